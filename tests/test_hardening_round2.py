"""Issue 33, first classes: inputs that used to end in a traceback or a hang now exit 2 with one
line naming the source, and write nothing."""
from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import numpy as np
import pytest

from ahasd_sim.__main__ import main
from test_hw_helpers import one_line_error as _one_line_error

ROOT = Path(__file__).resolve().parent.parent
MAIN = ROOT / "hw_configs" / "ahasd_mobile.yaml"
SMOKE = ROOT / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz"


def test_dask_scheduler_that_is_not_an_address(tmp_path, capsys):
    pytest.importorskip("distributed")
    rc = main(["sweep", "--config", str(ROOT / "hw_configs" / "sweeps" / "smoke.yaml"), "--executor", "dask",
               "--scheduler", "not a url", "--out", str(tmp_path / "sw")])
    _one_line_error(capsys, rc, "--scheduler 'not a url'", "tcp://host:8786")
    assert not (tmp_path / "sw").exists()


def test_config_that_is_a_symlink_loop(tmp_path, capsys):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.symlink_to(b)
    b.symlink_to(a)
    _one_line_error(capsys, main(["--config", str(a), "--out", str(tmp_path / "o")]), "a.yaml", "symlink loop")


def test_config_that_is_a_link_to_nothing_is_not_found(tmp_path, capsys):
    """A symlink whose target is missing is 'not found', not a loop (the loop check asks for the
    strict resolution only of links that do not resolve, on every Python version)."""
    a = tmp_path / "a.yaml"
    a.symlink_to(tmp_path / "missing.yaml")
    _one_line_error(capsys, main(["--config", str(a), "--out", str(tmp_path / "o")]), "a.yaml", "not found")


def test_billion_laughs_is_refused_within_seconds(tmp_path, capsys):
    lines = ['a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    prev = "a"
    for i in range(1, 10):
        n = chr(ord("a") + i)
        lines.append(f"{n}: &{n} [" + ", ".join([f"*{prev}"] * 9) + "]")
        prev = n
    f = tmp_path / "laughs.yaml"
    f.write_text("\n".join(lines) + "\n")
    t0 = time.perf_counter()
    rc = main(["--config", str(f), "--out", str(tmp_path / "o")])
    assert time.perf_counter() - t0 < 10
    _one_line_error(capsys, rc, "laughs.yaml", "aliases")
    # a document that shares an anchor a few times is fine
    from ahasd_sim.config.yamlio import loads
    assert loads("a: &x [1, 2]\nb: *x\nc: *x\n", "t") == {"a": [1, 2], "b": [1, 2], "c": [1, 2]}


def _bad_trace(tmp_path, name, **header_changes):
    d = dict(np.load(SMOKE, allow_pickle=False))
    h = json.loads(str(d["header_json"]))
    h.update(header_changes)
    d["header_json"] = np.array(json.dumps(h))
    p = tmp_path / f"{name}.npz"
    np.savez(p, **d)
    return p


@pytest.mark.parametrize("name, change, fragment", [
    ("npos", {"n_positions": "abc"}, "header 'n_positions' is \"abc\""),
    ("lmax", {"L_max": None}, "header 'L_max' is null"),
    ("models", {"models": "x"}, "header 'models' is \"x\""),
    ("zero", {"n_positions": 0}, "header 'n_positions' is 0"),
    ("topk", {"top_k": -1}, "header 'top_k' is -1"),
    ("cats", {"categories": [1, 2]}, "header 'categories' must be a non-empty list of names"),
])
def test_trace_header_fields_are_typed_before_use(tmp_path, capsys, name, change, fragment):
    p = _bad_trace(tmp_path, name, **change)
    _one_line_error(capsys, main(["traces", "stats", str(p)]), f"{name}.npz", fragment)
    rc = main(["--config", str(MAIN), "--set", f"run.trace={p}", "--set", "run.generated_tokens=16",
               "--set", "run.windows=1", "--out", str(tmp_path / "o")])
    _one_line_error(capsys, rc, fragment)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("name, content, fragment", [
    ("binary.tr", bytes(range(128, 256)), "is not text"),
    ("utf16.tr", "1\n2\n3\n".encode("utf-16"), "UTF-16"),
    ("huge.tr", b"1\n" + b"9" * 400 + b"\n", "is outside 0.."),
    ("archive.tr", b"PK\x03\x04" + b"\0" * 40, "zip/.npz archive"),
])
def test_mahimahi_traces_that_are_not_timestamp_text(tmp_path, name, content, fragment):
    from ahasd_sim.hw.network import PacketTrace, TraceFormatError
    p = tmp_path / name
    p.write_bytes(content)
    with pytest.raises(TraceFormatError, match=fragment):
        PacketTrace.load(p)


@pytest.mark.parametrize("content, fragment", [(b"garbage\n", "not an SQLite database"), (b"", "empty (0 bytes)")])
def test_study_db_that_is_not_a_database(tmp_path, capsys, content, fragment):
    pytest.importorskip("optuna")
    out = tmp_path / "study"
    out.mkdir()
    (out / "study.db").write_bytes(content)
    rc = main(["optimize", "--config", str(ROOT / "hw_configs" / "studies" / "where_ahasd_wins.yaml"),
               "--out", str(out), "--trials", "1", "--workers", "1", "--no-progress"])
    _one_line_error(capsys, rc, "study.db", fragment)
    assert (out / "study.db").read_bytes() == content      # left as it was


def test_reproduce_paper_negative_windows(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("reproduce_paper", ROOT / "scripts" / "reproduce_paper.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rc = mod.main(["--windows", "-1", "--out", str(tmp_path / "rp")])
    _one_line_error(capsys, rc, "--windows -1: expected >= 0")
    assert not (tmp_path / "rp").exists()


def test_dry_run_of_a_huge_sweep_refuses_at_once(tmp_path, capsys):
    vals = lambda n, a, step: "[" + ", ".join(str(round(a + i * step, 4)) for i in range(n)) + "]"  # noqa: E731
    f = tmp_path / "big.yaml"
    f.write_text(f"name: big\nbase: {{config: {MAIN}}}\naxes:\n  npu.freq_ghz: {vals(40, 0.5, 0.01)}\n"
                 f"  pim.unit_gops_int8: {vals(40, 50, 1)}\n  pim.internal_bw_gb_s: {vals(10, 100, 1)}\n"
                 f"  run.seed: {vals(10, 0, 1)}\n")
    t0 = time.perf_counter()
    rc = main(["sweep", "--config", str(f), "--dry-run", "--out", str(tmp_path / "o")])
    assert time.perf_counter() - t0 < 20
    _one_line_error(capsys, rc, "160000", "--dry-run checks every point")
