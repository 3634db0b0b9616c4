"""The public Python API (ahasd_sim.api): the README's example prints what the command line
prints, the example script runs, overrides are typed, errors are the command line's."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ahasd_sim import api
from ahasd_sim.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Python API"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture(scope="module")
def cli_throughput(tmp_path_factory) -> str:
    """The throughput the command the README names prints (run.timeline does not change it)."""
    tmp = tmp_path_factory.mktemp("cli")
    r = subprocess.run([sys.executable, "-m", "ahasd_sim", "run", "--config", "hw_configs/ahasd_mobile.yaml",
                        "--set", "run.generated_tokens=96", "--set", "run.windows=2", "--out", str(tmp / "cli")],
                       cwd=tmp, env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return re.search(r"throughput\s+([\d.]+) tok/s", r.stdout).group(1)


def test_readme_example_prints_the_cli_throughput(tmp_path, cli_throughput):
    code = _readme_example()
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=ENV, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    api_tput = re.search(r"throughput ([\d.]+) tok/s", r.stdout).group(1)
    # the README says which command it matches; run exactly that
    assert "--set\nrun.generated_tokens=96 --set run.windows=2" in (ROOT / "README.md").read_text()
    assert api_tput == cli_throughput


def test_example_script_runs_and_agrees_with_the_cli(tmp_path, cli_throughput):
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "api_example.py"), str(tmp_path / "ex")],
                       cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    tput = re.search(r"run: ahasd/adaedl throughput ([\d.]+) tok/s", out).group(1)
    assert tput == cli_throughput
    assert re.search(r"^\s*async\s+[\d.]+\s+[\d.]+\s+[\d.]+$", out, re.M)       # the compare table
    assert len(re.findall(r"^\s*(async|ahasd)\s+ok\s+[\d.]+$", out, re.M)) == 2  # the sweep table
    assert (tmp_path / "ex" / "run" / "summary.json").is_file()
    assert (tmp_path / "ex" / "compare" / "compare.csv").is_file()


def test_overrides_are_typed_and_equal_to_set_strings():
    a = api.load_config("hw_configs/ahasd_mobile.yaml", {"npu.freq_ghz": 0.5, "run.timeline": False,
                                                         "run.policy": "svip"}, warn=False)
    b = api.load_config("hw_configs/ahasd_mobile.yaml", ["npu.freq_ghz=0.5", "run.timeline=false",
                                                         "run.policy=svip"], warn=False)
    assert a.fingerprint() == b.fingerprint()
    assert a.npu.freq_ghz == 0.5 and a.run.policy == "svip"
    c = api.load_config(a, {"run.seed": 3}, warn=False)      # a SimConfig is copied, not changed
    assert c.run.seed == 3 and a.run.seed != 3


def test_bad_input_is_one_line_input_error():
    with pytest.raises(InputError) as ei:
        api.load_config("hw_configs/ahasd_mobile.yaml", {"npu.freq_gz": 1.0})
    assert "npu.freq_gz" in str(ei.value) and "\n" not in str(ei.value)


def test_result_values_are_the_summary():
    res = api.run("hw_configs/ahasd_mobile.yaml", {"run.generated_tokens": 32, "run.windows": 1,
                                                   "run.timeline": False})
    s = res.summary
    assert res.throughput_tok_s == s["throughput_tok_s"] and res.energy_j == s["energy_j"]
    assert res["device_utilization.npu"] == s["device_utilization"]["npu"]
    assert res.throughput_tok_s_ci95 is None                  # one window: no interval
    row = res.frame().iloc[0]
    assert row["energy_breakdown_j.npu.dynamic"] == s["energy_breakdown_j"]["npu"]["dynamic"]
    assert api.describe("throughput_tok_s")[1] == "tok/s"
