"""The default job's speed mechanisms keep every output byte (issue 12, task i12wall).

* window workers return plain rows; the parent frames them (and imports pandas meanwhile):
  the files written from a run in forked workers equal those of a serial run;
* setting up a run (config, trace windows, one window's simulation) imports no pandas;
* ``output.write_csv`` writes exactly what ``DataFrame.to_csv(index=False)`` writes.
"""
from __future__ import annotations

import math
import random
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from ahasd_sim.config import load_config
from ahasd_sim.output import config_hash, config_text, write_csv, write_run
from ahasd_sim.simulation import _run_window_rows, load_run_windows, run_simulation

from conftest import ROOT, SMOKE_TRACE

FILES = ("summary.json", "windows.csv", "events.csv", "energy_breakdown.csv", "timeline.json",
         "config.resolved.yaml")


def _smoke_cfg():
    return load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml",
                       [f"run.trace={SMOKE_TRACE}", "run.generated_tokens=24", "run.windows=3"])


def test_windows_in_forked_workers_write_the_serial_run_bytes(tmp_path):
    cfg = _smoke_cfg()
    serial = run_simulation(cfg, workers=1)
    forked = run_simulation(cfg, workers=2)
    assert serial.summary["windows"] == 3
    assert len(serial.events) > 3 and isinstance(forked.events, pd.DataFrame)
    write_run(serial, cfg, tmp_path / "a", 0.0)
    write_run(forked, cfg, tmp_path / "b", 0.0)
    for name in FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_a_window_job_returns_rows_not_tables():
    cfg = _smoke_cfg()
    (_p, parts), *_ = load_run_windows(cfg)
    raw = _run_window_rows(cfg, parts, 0)
    assert type(raw.events) is list and type(raw.energy) is list and raw.events
    assert isinstance(raw.events[0], dict) and set(raw.energy[0]) == {"device", "kind", "energy_j"}


def test_setting_up_and_simulating_a_window_imports_no_pandas():
    code = (f"import sys\nfrom ahasd_sim.config import load_config\n"
            f"from ahasd_sim.simulation import _run_window_rows, load_run_windows\n"
            f"cfg = load_config({str(ROOT / 'hw_configs' / 'ahasd_mobile.yaml')!r}, "
            f"['run.trace={SMOKE_TRACE}', 'run.generated_tokens=24'])\n"
            f"(_p, parts), *_ = load_run_windows(cfg)\n"
            f"r = _run_window_rows(cfg, parts, 0)\n"
            f"assert r.events, 'no events'\n"
            f"print('pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"   # the forked workers never pay for importing pandas


def test_config_text_is_dump_config_and_follows_changes():
    from ahasd_sim.config import dump_config
    a = _smoke_cfg()
    b = load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml",
                    [f"run.trace={SMOKE_TRACE}", "run.generated_tokens=25", "run.windows=3"])
    assert config_text(a) == dump_config(a) and config_text(b) == dump_config(b)
    assert config_text(a) != config_text(b) and config_hash(a) != config_hash(b)


def _random_table(rng: random.Random) -> pd.DataFrame:
    n = rng.randint(1, 40)
    specials = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e16, 1e15, 9999999999999998.0, 1e-4, 1e-5,
                0.1, 1 / 3, 5e-324, 1.7976931348623157e308, 123456789.125, -2.5e-7]

    def number():
        if rng.random() < 0.3:
            return rng.choice(specials)
        return rng.uniform(-1, 1) * 10.0 ** rng.randint(-30, 30)

    texts = ["plain", "with,comma", 'with "quote"', "line\nbreak", "", " spaced ", "ünïcode", "tab\there"]
    cols = {
        "f": lambda: number(),
        "i": lambda: rng.randint(-2**62, 2**62),
        "b": lambda: rng.random() < 0.5,
        "s": lambda: rng.choice(texts),
        "int_or_float": lambda: rng.choice([rng.randint(-5, 5), number()]),
        "mixed": lambda: rng.choice([1, 2.5, "x", True, None, math.nan]),   # object column
        "numpy": lambda: rng.choice([np.float64(0.1), np.int64(3), "y"]),     # left to pandas
    }
    names = rng.sample(sorted(cols), rng.randint(1, len(cols)))
    p_missing = rng.choice([0.0, 0.0, 0.1, 0.5])     # missing from a row: NaN / empty
    rows = []
    for _ in range(n):
        rows.append({name: cols[name]() for name in names if rng.random() >= p_missing})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("seed", range(60))
def test_write_csv_writes_what_to_csv_writes(tmp_path, seed):
    table = _random_table(random.Random(seed))
    write_csv(table, tmp_path / "fast.csv")
    table.to_csv(tmp_path / "pandas.csv", index=False)
    assert (tmp_path / "fast.csv").read_bytes() == (tmp_path / "pandas.csv").read_bytes()


def test_write_csv_on_typed_columns_and_empty_tables(tmp_path):
    tables = [
        pd.DataFrame({"x": np.array([1.5, np.nan, 2.0], dtype=np.float32)}),   # float32: pandas' own format
        pd.DataFrame({"n": pd.array([1, None, 3], dtype="Int64")}),             # nullable ints: pandas
        pd.DataFrame({"s": pd.Series(["a", None, "b,c"], dtype="string")}),
        pd.DataFrame({"t": [0.25, 0.5]}, index=[7, 3]),                         # index not written
        pd.DataFrame(),
        pd.DataFrame(columns=["a", "b"]),
    ]
    for i, t in enumerate(tables):
        write_csv(t, tmp_path / f"fast{i}.csv")
        t.to_csv(tmp_path / f"pandas{i}.csv", index=False)
        assert (tmp_path / f"fast{i}.csv").read_bytes() == (tmp_path / f"pandas{i}.csv").read_bytes(), i
