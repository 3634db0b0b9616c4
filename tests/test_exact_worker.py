"""Sweep worker functions in-process: error records, the Dask file path, materialising (issue 19)."""
from __future__ import annotations

import json

import pytest

from ahasd_sim.config import load_config
from ahasd_sim.config.errors import ConfigError
from ahasd_sim.sweep import worker as w

from conftest import PAPER_PLATFORM, SMOKE_TRACE


def test_one_line_and_error_record():
    assert w.one_line(ValueError("\n  first line  \nsecond")) == "first line"
    assert w.one_line(ValueError('"quoted"')) == "quoted"
    assert w.one_line(ValueError("Xray: 10 XX")) == "Xray: 10 XX"        # only quotes are stripped
    assert w.one_line(ValueError("")) == "ValueError"
    assert w.one_line(KeyError()) == "KeyError"
    rec = w.error_record(RuntimeError("boom\nmore"), 1.5, tb="TB")
    assert rec == {"type": "RuntimeError", "message": "boom", "input_error": False, "wall_time_s": 1.5,
                   "traceback": "TB"}
    try:
        raise ConfigError("f.yaml", "run.mode", "bad")
    except ConfigError as exc:
        rec = w.error_record(exc)
    assert rec["type"] == "ConfigError" and rec["input_error"] is True and rec["wall_time_s"] is None
    assert rec["message"] == "f.yaml: run.mode: bad"
    tb = rec["traceback"].splitlines()
    assert tb[0] == "Traceback (most recent call last):" and tb[1].startswith('  File "')
    assert tb[-1] == "ahasd_sim.config.errors.ConfigError: f.yaml: run.mode: bad"
    from ahasd_sim.workload.traces import TraceError
    assert w.error_record(TraceError("t.npz", "truncated"))["input_error"] is True


def _cfg(*extra):
    return load_config(PAPER_PLATFORM, [f"run.trace={SMOKE_TRACE}", "run.generated_tokens=16", "run.windows=1",
                                        "run.timeline=false", *extra])


def test_simulate_into_ok_and_failed(tmp_path):
    import time
    t0 = time.perf_counter()
    status, info = w._simulate_into(_cfg(), tmp_path / "ok")
    elapsed = time.perf_counter() - t0
    assert status == "ok" and set(info) == {"wall_time_s"} and 0 < info["wall_time_s"] <= elapsed
    assert json.loads((tmp_path / "ok" / "meta.json").read_text())["wall_time_s"] == info["wall_time_s"]
    s = json.loads((tmp_path / "ok" / "summary.json").read_text())
    assert s["generated_tokens"] == 16 and not (tmp_path / "ok" / "error.json").exists()
    # a point that fails while simulating (PIM too small for both models)
    t0 = time.perf_counter()
    status, info = w._simulate_into(_cfg("pim.ranks=1"), tmp_path / "bad")
    assert 0 <= info["wall_time_s"] <= time.perf_counter() - t0
    assert status == "failed" and info["error_type"] == "ConfigError" and "pim.ranks" in info["error"]
    err = json.loads((tmp_path / "bad" / "error.json").read_text())
    assert err["type"] == "ConfigError" and err["message"] == info["error"] and err["input_error"] is True
    assert err["wall_time_s"] == info["wall_time_s"] >= 0
    assert "pim:" in (tmp_path / "bad" / "config.resolved.yaml").read_text()   # what was run, for the user
    assert not (tmp_path / "bad" / "summary.json").exists()


def test_run_point_files_and_materialise(tmp_path):
    task = {"hash": "h1", "config": _cfg(), "dir": str(tmp_path / "unused")}
    res = w.run_point_files(task)
    assert res["hash"] == "h1" and res["status"] == "ok" and res["wall_time_s"] > 0
    names = set(res["files"])
    assert {"summary.json", "config.resolved.yaml", "events.csv", "energy_breakdown.csv"} <= names
    assert not any(n.startswith(".") for n in names)
    assert not (tmp_path / "unused").exists()
    d = tmp_path / "point"
    d.mkdir()
    (d / "error.json").write_text("{}")                 # an earlier failure of this point
    w.materialise(res["files"], d)
    w.materialise(res["files"], tmp_path / "a" / "b" / "point")     # parents are created
    assert w.is_done(tmp_path / "a" / "b" / "point")
    assert not (d / "error.json").exists()
    for n, data in res["files"].items():
        assert (d / n).read_bytes() == data
    assert w.is_done(d)
    # a failed point's files: error.json written, nothing else claimed
    bad = w.run_point_files({"hash": "h2", "config": _cfg("pim.ranks=1")})
    assert bad["status"] == "failed" and "error.json" in bad["files"] and "summary.json" not in bad["files"]
    d2 = tmp_path / "p2"
    w.materialise(bad["files"], d2)
    assert json.loads((d2 / "error.json").read_text())["type"] == "ConfigError" and not w.is_done(d2)


def test_materialise_writes_summary_last(tmp_path, monkeypatch):
    order = []
    real = w.atomic_write
    monkeypatch.setattr(w, "atomic_write", lambda path, fn, mode="w": (order.append(path.name), real(path, fn, mode=mode)))
    w.materialise({"summary.json": b"{}", "a.csv": b"x", "error.json": b"{}", "b.yaml": b"y"}, tmp_path / "p")
    assert order[:2] == ["a.csv", "b.yaml"] and order[2:] == ["summary.json", "error.json"]


def test_run_point_skips_finished_and_clears_old_error(tmp_path):
    d = tmp_path / "p"
    d.mkdir()
    (d / "summary.json").write_text("{}")
    assert w.run_point({"hash": "h", "dir": str(d), "config": None}) == {"hash": "h", "status": "cached"}
    d2 = tmp_path / "p2"
    d2.mkdir()
    (d2 / "error.json").write_text("{}")
    res = w.run_point({"hash": "h", "dir": str(d2), "config": _cfg()})
    assert res["hash"] == "h" and res["status"] == "ok" and not (d2 / "error.json").exists() and w.is_done(d2)


def test_task_config_resolves_file_overrides_and_seed():
    cfg = w.task_config({"config": None, "config_path": str(PAPER_PLATFORM),
                         "overrides": ["run.generated_tokens=7"], "seed": 11})
    assert cfg.run.generated_tokens == 7 and cfg.run.seed == 11


def test_run_point_files_returns_no_hidden_files_and_cleans_up(tmp_path, monkeypatch):
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def fake(cfg, out_dir):
        (out_dir / "summary.json").write_text("{}")
        (out_dir / ".summary.json.tmp").write_text("partial")
        (out_dir / ".staging-1").mkdir()
        return "ok", {"wall_time_s": 0.0}

    monkeypatch.setattr(w, "_simulate_into", fake)
    res = w.run_point_files({"hash": "hh", "config": object()})
    assert res["files"] == {"summary.json": b"{}"}
    assert list(tmp_path.iterdir()) == []                 # the private folder is gone
