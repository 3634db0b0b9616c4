"""CLI contract: outputs, exit codes, one-line errors, determinism, atomic writes."""
from __future__ import annotations

import json

import pytest

from ahasd_sim.__main__ import main

REQUIRED = ["throughput_tok_s", "generated_tokens", "makespan_s", "energy_j", "energy_per_token_j",
            "tokens_per_j", "acceptance_rate", "mean_accepted_per_verify", "drafted_tokens",
            "wasted_draft_tokens", "device_busy_s", "device_utilization", "energy_breakdown_j", "mode",
            "policy", "draft_model", "target_model", "trace", "seed", "ahasd_sim_version"]


def test_run_writes_outputs(smoke_cfg_file, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["--config", str(smoke_cfg_file), "--out", str(out), "--seed", "3"]) == 0
    for name in ("config.resolved.yaml", "summary.json", "events.csv", "energy_breakdown.csv",
                 "timeline.json", "meta.json"):
        assert (out / name).is_file(), name
    s = json.loads((out / "summary.json").read_text())
    for k in REQUIRED:
        assert k in s, k
    assert s["seed"] == 3 and s["generated_tokens"] == 48
    # the files hold what the library computes for the same config and seed
    from ahasd_sim.config import load_config
    from ahasd_sim.simulation import run_simulation
    lib = run_simulation(load_config(smoke_cfg_file, seed=3)).summary
    for k in ("throughput_tok_s", "makespan_s", "energy_j", "drafted_tokens", "accepted_tokens",
              "wasted_draft_tokens", "device_busy_s"):
        assert s[k] == pytest.approx(lib[k], rel=1e-12), k
    import pandas as pd
    e = pd.read_csv(out / "energy_breakdown.csv")
    for dev, parts in lib["energy_breakdown_j"].items():
        for kind, joules in parts.items():
            row = e[(e["device"] == dev) & (e["kind"] == kind)]
            assert len(row) == 1 and row["energy_j"].iloc[0] == pytest.approx(joules, rel=1e-12), (dev, kind)
    ev = pd.read_csv(out / "events.csv")
    assert (ev["event"] == "verify").sum() == lib["verifications"]
    assert "throughput" in capsys.readouterr().out
    # the resolved config reproduces the run
    out2 = tmp_path / "out2"
    assert main(["--config", str(out / "config.resolved.yaml"), "--out", str(out2)]) == 0
    assert (out2 / "summary.json").read_bytes() == (out / "summary.json").read_bytes()


def test_same_config_and_seed_byte_identical(smoke_cfg_file, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        assert main(["--config", str(smoke_cfg_file), "--out", str(d), "--quiet"]) == 0
    assert (a / "summary.json").read_bytes() == (b / "summary.json").read_bytes()
    assert "wall_time_s" in json.loads((a / "meta.json").read_text())


@pytest.mark.parametrize("args, fragment", [
    (["--set", "run.modee=async"], "run.modee: unknown key (did you mean 'mode'?)"),
    (["--set", "npu.freq_ghz=fast"], "npu.freq_ghz: expected a number"),
    (["--set", "run.trace=traces/nope.npz"], "run.trace: trace file 'traces/nope.npz' not found"),
    (["--set", "run.mode=warp"], "run.mode: unknown mode 'warp'"),
    (["--set", "run.policy=adaedll"], "did you mean 'adaedl'"),
    (["--set", "pim.ranks=2"], "pim"),
])
def test_bad_input_exit_2_one_line(smoke_cfg_file, tmp_path, capsys, args, fragment):
    out = tmp_path / "out"
    rc = main(["--config", str(smoke_cfg_file), "--out", str(out), *args])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    assert fragment in err
    assert not (out / "summary.json").exists()


def test_missing_config_file(tmp_path, capsys):
    assert main(["--config", str(tmp_path / "none.yaml")]) == 2
    assert "none.yaml: file not found" in capsys.readouterr().err


def test_crash_mid_write_leaves_no_half_summary(smoke_cfg_file, tmp_path, monkeypatch):
    out = tmp_path / "out"
    assert main(["--config", str(smoke_cfg_file), "--out", str(out), "--quiet"]) == 0
    before = (out / "summary.json").read_bytes()
    import ahasd_sim.output as output

    def boom(obj):
        raise RuntimeError("disk full")
    monkeypatch.setattr(output, "to_json", boom)
    with pytest.raises(RuntimeError):
        main(["--config", str(smoke_cfg_file), "--out", str(out), "--quiet", "--set", "run.seed=9"])
    assert (out / "summary.json").read_bytes() == before
    assert not [p for p in out.iterdir() if p.name.startswith(".")]
    # the other files still belong to the same (first) run
    import yaml
    assert yaml.safe_load((out / "config.resolved.yaml").read_text())["run"]["seed"] == 0


def test_list_and_reference(capsys):
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    assert "ahasd" in text and "adaedl" in text and "llama2-7b" in text
    assert main(["config-reference"]) == 0
    ref = capsys.readouterr().out
    assert "npu.freq_ghz" in ref and "run.generated_tokens" in ref


def test_area_command(smoke_cfg_file, capsys):
    assert main(["area", "--config", str(smoke_cfg_file)]) == 0
    out = capsys.readouterr().out
    assert "AAU" in out and "EDC" in out
    # the PIM unit logic per die and the capacity it displaces, per unit preset
    assert "PIM unit logic per die" in out and "capacity_lost_gib" in out
    assert all(name in out for name in ("aim", "gemm_k8", "hbm_pim"))


def test_run_identity_changes_with_config_and_trace(smoke_cfg_file, tmp_path):
    import shutil
    from ahasd_sim.config import load_config
    from ahasd_sim.output import run_identity_hash
    a = run_identity_hash(load_config(smoke_cfg_file))
    assert a == run_identity_hash(load_config(smoke_cfg_file))
    assert a != run_identity_hash(load_config(smoke_cfg_file, ["run.seed=1"]))
    from conftest import SMOKE_TRACE
    copy = tmp_path / "copy.npz"
    shutil.copy(SMOKE_TRACE, copy)
    b = run_identity_hash(load_config(smoke_cfg_file, [f"run.trace={copy}"]))
    with open(copy, "ab") as fh:   # same name, different bytes
        fh.write(b"\0")
    import os
    os.utime(copy, (1, 1))
    assert b != run_identity_hash(load_config(smoke_cfg_file, [f"run.trace={copy}"]))


def test_compare_normalises_to_baseline(smoke_cfg_file, tmp_path, capsys):
    import pandas as pd
    out = tmp_path / "cmp"
    assert main(["compare", "--config", str(smoke_cfg_file), "--modes", "operator_sync,async,ahasd",
                 "--baseline", "operator_sync", "--out", str(out)]) == 0
    table = pd.read_csv(out / "compare.csv")
    assert list(table["mode"]) == ["operator_sync", "async", "ahasd"]
    assert table.loc[0, "throughput_vs_operator_sync"] == 1.0
    for mode in ("operator_sync", "async", "ahasd"):
        s = json.loads((out / mode / "summary.json").read_text())
        row = table[table["mode"] == mode].iloc[0]
        assert row["throughput_tok_s"] == s["throughput_tok_s"]
    assert "tok/s vs operator_sync" in capsys.readouterr().out


def test_committed_config_reference_is_current():
    """docs/config-reference.md is generated; this fails when a config field changes without it."""
    from conftest import ROOT
    from ahasd_sim.__main__ import config_reference_markdown
    assert (ROOT / "docs" / "config-reference.md").read_text() == config_reference_markdown(), \
        "regenerate: python -m ahasd_sim config-reference --markdown > docs/config-reference.md"
