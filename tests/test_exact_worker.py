"""Sweep worker functions in-process (error records, the Dask file path, materialising) and the
sweep runner's bookkeeping (issue 19)."""
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
    assert tb[-1] == "ahasd_sim.errors.ConfigError: f.yaml: run.mode: bad"   # the class lives in ahasd_sim.errors (0.2.0)
    from ahasd_sim.traces.format import TraceError
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
    assert names == {"summary.json", "config.resolved.yaml", "windows.csv", "energy_breakdown.csv", "meta.json"}
    assert w.run_point_files({**task, "events": True})["files"].keys() == names | {"events.csv"}   # --full-points
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

    def fake(cfg, out_dir, events=False):
        (out_dir / "summary.json").write_text("{}")
        (out_dir / ".summary.json.tmp").write_text("partial")
        (out_dir / ".staging-1").mkdir()
        return "ok", {"wall_time_s": 0.0}

    monkeypatch.setattr(w, "_simulate_into", fake)
    res = w.run_point_files({"hash": "hh", "config": object()})
    assert res["files"] == {"summary.json": b"{}"}
    assert list(tmp_path.iterdir()) == []                 # the private folder is gone


# ================================================================== sweep runner (sweep/runner.py)
# In-process (workers=1, or the pool logic with a scripted pool) with a stand-in for the
# simulation that writes what a finished or failed point writes, so that the runner's own
# bookkeeping (layout, resume, limits, duplicates, markers, counts, messages) is checked exactly.
import io  # noqa: E402
from pathlib import Path  # noqa: E402

import pandas as pd  # noqa: E402

from ahasd_sim.config.errors import InputError, OutputError  # noqa: E402
from ahasd_sim.output import atomic_write_text, to_json  # noqa: E402
from ahasd_sim.sweep import runner as r  # noqa: E402
from ahasd_sim.sweep.spec import load_sweep_spec, spec_identity  # noqa: E402

RSPEC = f"""name: rs
base:
  config: {PAPER_PLATFORM}
  set:
    run.trace: {SMOKE_TRACE}
    run.generated_tokens: 16
variants:
  a: {{set: {{run.mode: async}}}}
  a_again: {{set: {{run.mode: async}}}}
  b: {{set: {{run.mode: ahasd}}}}
  bad: {{set: {{npu.chips: 0}}}}
seeds: [1, 2]
"""


@pytest.fixture
def fake_sim(monkeypatch):
    """Points of mode 'ahasd' with seed 2 fail; the others write a summary. Records the calls."""
    calls = []

    def simulate_into(cfg, out_dir, events=False):
        calls.append((cfg.run.mode, cfg.run.seed))
        out_dir.mkdir(parents=True, exist_ok=True)
        if cfg.run.mode == "ahasd" and cfg.run.seed == 2:
            rec = w.error_record(RuntimeError("planned failure"), 0.25)
            w.write_error(out_dir, rec)
            return "failed", {"error_type": rec["type"], "error": rec["message"], "wall_time_s": 0.25}
        atomic_write_text(out_dir / w.SUMMARY, to_json({"throughput_tok_s": 10.0 * cfg.run.seed,
                                                         "mode": cfg.run.mode}))
        atomic_write_text(out_dir / "meta.json", to_json({"wall_time_s": 0.5}))
        return "ok", {"wall_time_s": 0.5}

    monkeypatch.setattr(w, "_simulate_into", simulate_into)
    return calls


def _spec(tmp_path, text=RSPEC):
    p = tmp_path / "rs.yaml"
    p.write_text(text)
    return p


def test_sweep_layout_counts_duplicates_and_invalid_points(tmp_path, fake_sim):
    src = _spec(tmp_path)
    out = tmp_path / "out"
    res = r.run_sweep(src, out, workers=1, progress=False)
    # 4 variants x 2 seeds = 8 points; a and a_again resolve to the same runs (run once each);
    # 'bad' does not resolve: failed without running
    assert sorted(fake_sim) == [("ahasd", 1), ("ahasd", 2), ("async", 1), ("async", 2)]
    assert (res.n_points, res.n_ok, res.n_failed, res.n_pending) == (8, 5, 3, 0)
    assert (res.n_cached, res.n_computed) == (0, 4)
    assert res.out_dir == out and len(res.points) == 8
    t = res.table
    assert list(t["variant"]) == ["a", "a", "a_again", "a_again", "b", "b", "bad", "bad"]
    assert list(t["seed"]) == [1, 2] * 4
    assert list(t["status"]) == ["ok", "ok", "ok", "ok", "ok", "failed", "failed", "failed"]
    assert list(t["point"][:2]) == list(t["point"][2:4]) and t["point"].nunique() == 6
    assert list(t["throughput_tok_s"][:5]) == [10.0, 20.0, 10.0, 20.0, 10.0]
    assert t.loc[5, "error"] == "planned failure" and t.loc[5, "error_type"] == "RuntimeError"
    assert t.loc[6, "error_type"] == "ConfigError" and "npu.chips: expected >= 1, got 0" in t.loc[6, "error"]
    assert res.failed_dirs == sorted({out / "points" / h for h in t.loc[5:, "point"]})
    assert len(res.failed_dirs) == 3
    # files: spec copy, sweep.json, points.csv, results.csv (same as the table)
    assert (out / "spec.yaml").read_text() == RSPEC
    meta = json.loads((out / "sweep.json").read_text())
    spec = load_sweep_spec(src)
    assert {k: meta[k] for k in ("spec_file", "spec_sha256_12", "name", "points")} == {
        "spec_file": str(src), "spec_sha256_12": spec_identity(spec), "name": "rs", "points": 8}
    pts = pd.read_csv(out / "points.csv")
    assert list(pts.columns) == ["index", "point", "config_file", "variant", "seed", "overrides"]
    assert list(pts["index"]) == list(range(8)) and list(pts["point"]) == list(t["point"])
    assert pts.loc[0, "overrides"].split() == [f"run.trace={SMOKE_TRACE}", "run.generated_tokens=16",
                                               "run.mode=async"]
    assert list(pts["seed"]) == [1, 2] * 4
    on_disk = pd.read_csv(out / "results.csv")
    assert list(on_disk["status"]) == list(t["status"]) and list(on_disk["point"]) == list(t["point"])
    assert sorted(p.name for p in out.iterdir()) == ["points", "points.csv", "results.csv", "spec.yaml",
                                                     "sweep.json"]
    assert res.points_per_s == pytest.approx(4 / res.wall_s, rel=1e-12, abs=0)
    # again: the finished points are reused, the failed simulation is retried (and fails again),
    # the invalid point fails again without running
    fake_sim.clear()
    again = r.run_sweep(src, out, workers=1, progress=False)
    assert fake_sim == [("ahasd", 2)]
    assert (again.n_cached, again.n_computed, again.n_ok, again.n_failed) == (3, 1, 5, 3)   # distinct finished runs
    assert json.loads((out / "sweep.json").read_text())["created_utc"] == meta["created_utc"]


def test_sweep_limit_leaves_points_pending_and_resumes(tmp_path, fake_sim):
    src = _spec(tmp_path)
    out = tmp_path / "out"
    res = r.run_sweep(src, out, workers=1, progress=False, limit=2)
    assert fake_sim == [("async", 1), ("async", 2)]
    assert (res.n_ok, res.n_failed, res.n_pending, res.n_computed) == (4, 2, 2, 2)
    assert list(res.table["status"]) == ["ok", "ok", "ok", "ok", "pending", "pending", "failed", "failed"]
    res = r.run_sweep(src, out, workers=1, progress=False, limit=1)
    assert fake_sim[2:] == [("ahasd", 1)] and res.n_pending == 1 and res.n_cached == 2
    res = r.run_sweep(src, out, workers=1, progress=False, limit=0)
    assert fake_sim[3:] == [] and res.n_pending == 1 and res.n_computed == 0 and res.points_per_s is None
    res = r.run_sweep(src, out, workers=1, progress=False)
    assert fake_sim[3:] == [("ahasd", 2)] and res.n_pending == 0 and res.n_cached == 3


def test_sweep_progress_lines(tmp_path, fake_sim):
    buf = io.StringIO()
    out = tmp_path / "out"
    r.run_sweep(_spec(tmp_path), out, workers=1, progress=True, stream=buf)
    assert f"rs: 8 points, 4 to run, 0 finished earlier, folder {out}\n" in buf.getvalue()


def test_sweep_folder_checks(tmp_path, fake_sim):
    src = _spec(tmp_path)
    spec = load_sweep_spec(src)
    ident = spec_identity(spec)
    out = tmp_path / "out"
    r._check_folder(spec, out)                           # missing: fine
    out.mkdir()
    (out / ".lock").write_text("")
    r._check_folder(spec, out)                           # only a lock: fine
    (out / "b.txt").write_text("x")
    (out / "a.txt").write_text("x")
    with pytest.raises(OutputError) as ei:
        r._check_folder(spec, out)
    assert str(ei.value) == (f"--out {out}: folder exists and is not a sweep folder (it contains '.lock'); "
                             "choose a new folder")
    other = tmp_path / "other"
    other.mkdir()
    (other / "sweep.json").write_text(json.dumps({"spec_sha256_12": "abc", "spec_file": "x.yaml"}))
    with pytest.raises(OutputError) as ei:
        r._check_folder(spec, other, flag="--into")
    assert str(ei.value) == (f"--into {other}: holds another sweep (from x.yaml, spec abc; this one is {ident}); "
                             "a changed sweep goes into a new --out (or remove the folder to start over)")
    (other / "sweep.json").write_text(json.dumps({"spec_sha256_12": ident}))
    r._check_folder(spec, other)
    # a folder from before sweep.json: its spec.yaml decides
    old = tmp_path / "old"
    old.mkdir()
    (old / "spec.yaml").write_text(RSPEC.replace("name: rs", "name: rs   # same, reformatted"))
    r._check_folder(spec, old)
    (old / "spec.yaml").write_text(RSPEC.replace("seeds: [1, 2]", "seeds: [1]"))
    with pytest.raises(OutputError) as ei:
        r._check_folder(spec, old)
    assert str(ei.value) == (f"--out {old}: holds another sweep (its spec.yaml differs from {src}); "
                             "use another --out, or remove the folder to start over")
    (old / "spec.yaml").write_text("a: [")
    with pytest.raises(OutputError, match="its spec.yaml differs"):
        r._check_folder(spec, old)
    # run_sweep refuses before writing anything
    with pytest.raises(OutputError):
        r.run_sweep(src, out, workers=1, progress=False)
    assert sorted(p.name for p in out.iterdir()) == [".lock", "a.txt", "b.txt"] and fake_sim == []


def test_clean_stale_removes_only_markers_staging_and_temporaries(tmp_path):
    pts = tmp_path / "points"
    r._clean_stale(pts)                                   # no folder yet: nothing to do
    d = pts / "h1"
    d.mkdir(parents=True)
    (pts / "stray.txt").write_text("x")                   # a file next to the point folders
    for name in (r.RUNNING, ".summary.json.tmp", "summary.json", ".keep", "x.tmp", ".staging-note"):
        (d / name).write_text("x")
    (d / ".staging-1").mkdir()
    (d / ".staging-1" / "f").write_text("x")
    (d / "sub.tmp").mkdir()
    r._clean_stale(pts)
    assert sorted(p.name for p in d.iterdir()) == [".keep", ".staging-note", "sub.tmp", "summary.json", "x.tmp"]
    assert (pts / "stray.txt").is_file()


def test_pool_entry_marks_the_point_while_it_runs(tmp_path, monkeypatch):
    seen = []

    def run_point(task):
        seen.append((Path(task["dir"]) / r.RUNNING).is_file())
        if task["hash"] == "boom":
            raise RuntimeError("x")
        return {"hash": task["hash"], "status": "ok"}

    monkeypatch.setattr(r, "run_point", run_point)
    d = tmp_path / "p" / "h"
    assert r._pool_entry({"hash": "h", "dir": str(d)}) == {"hash": "h", "status": "ok"}
    assert seen == [True] and sorted(p.name for p in d.iterdir()) == []
    with pytest.raises(RuntimeError):
        r._pool_entry({"hash": "boom", "dir": str(d)})
    assert seen == [True, True] and not (d / r.RUNNING).exists()


def test_broken_pool_reruns_unstarted_points_and_isolates_the_killer(tmp_path, monkeypatch):
    """_run_local's recovery: points that had not started go to a fresh pool; points whose
    marker says they were running are re-run alone; one that breaks its own pool is failed."""
    tasks = [{"hash": h, "dir": str(tmp_path / h)} for h in ("a", "b", "c", "d")]
    rounds = []

    def pool_round(todo, workers, on_done):
        rounds.append(([t["hash"] for t in todo], workers))
        n = len(rounds)
        if n == 1:   # a finishes; the pool breaks while b and c run (markers) and d waits
            on_done({"hash": "a", "status": "ok"})
            for t in todo[1:3]:
                Path(t["dir"]).mkdir(parents=True, exist_ok=True)
                (Path(t["dir"]) / r.RUNNING).touch()
            return todo[1:]
        if todo[0]["hash"] == "b":   # b alone breaks its pool again: the culprit
            return list(todo)
        for t in todo:
            on_done({"hash": t["hash"], "status": "ok"})
        return []

    monkeypatch.setattr(r, "_pool_round", pool_round)
    done = []
    r._run_local(tasks, 3, done.append)
    assert rounds == [(["a", "b", "c", "d"], 3), (["d"], 3), (["b"], 1), (["c"], 1)]
    assert [x["hash"] for x in done] == ["a", "d", "b", "c"]
    died = done[2]
    assert died == {"hash": "b", "status": "failed", "error_type": "RuntimeError",
                    "error": "worker process died while running this point (killed, or out of memory?)"}
    rec = json.loads((tmp_path / "b" / w.ERROR).read_text())
    assert rec["message"] == died["error"] and rec["traceback"] == ""
    assert not (tmp_path / "b" / r.RUNNING).exists() and not (tmp_path / "c" / r.RUNNING).exists()


def test_check_sweep_args_and_announce():
    with pytest.raises(InputError) as ei:
        r.check_sweep_args("slurm", None, None)
    assert str(ei.value) == "unknown executor 'slurm' (expected one of local, dask)"
    with pytest.raises(InputError) as ei:
        r.check_sweep_args("local", 0, None)
    assert str(ei.value) == "--workers must be >= 1, got 0"
    r.check_sweep_args("local", 1, None)
    r.check_sweep_args("local", None, "")
    with pytest.raises(InputError) as ei:
        r.check_sweep_args("local", 2, "tcp://h:1")
    assert str(ei.value) == "--scheduler tcp://h:1 needs --executor dask (the local executor has no scheduler)"

    class S:
        source = Path("s.yaml")

    buf = io.StringIO()
    r.announce(S, r.LARGE_SWEEP_POINTS, buf)
    r.announce(S, r.MAX_SWEEP_POINTS - r.MAX_SWEEP_POINTS + 1, buf)
    assert buf.getvalue() == ""
    r.announce(S, r.LARGE_SWEEP_POINTS + 1, buf)
    assert buf.getvalue() == ("warning: s.yaml: 10,001 points; resolving them alone takes a while and the sweep "
                              "folder grows by a run folder per point (progress follows)\n")
    buf = io.StringIO()
    r.announce(S, r.MAX_SWEEP_POINTS, buf)
    assert buf.getvalue().startswith("warning: s.yaml: 250,000 points;")
    with pytest.raises(InputError) as ei:
        r.announce(S, r.MAX_SWEEP_POINTS + 1, buf)
    assert str(ei.value) == ("s.yaml: the sweep has 250,001 points, more than 250,000; split it into several "
                             "sweeps or use combine: zip")
    assert (r.LARGE_SWEEP_POINTS, r.MAX_SWEEP_POINTS) == (10_000, 250_000)


def test_summarize_text(tmp_path):
    rows = [{"point": "p0", "status": "ok", "error_type": None, "error": None}]
    rows += [{"point": f"f{i}", "status": "failed", "error_type": "E", "error": f"bad {i}"} for i in range(12)]
    rows += [{"point": "f0", "status": "failed", "error_type": "E", "error": "bad 0"},
             {"point": "q", "status": "pending", "error_type": None, "error": None}]
    res = r.SweepResult(tmp_path, [], pd.DataFrame(rows), n_cached=3, n_computed=4, wall_s=2.0)
    lines = r.summarize(res).splitlines()
    assert lines[0] == (f"sweep {tmp_path}: 15 points, 1 ok, 13 failed, 1 pending; computed 4, reused 3 finished "
                        "in 00:02 (2.00 points/s)")
    assert lines[1] == f"results: {tmp_path / 'results.csv'}"
    assert lines[2] == "13 point(s) failed; see error.json in:"
    assert lines[3:13] == [f"  {tmp_path / 'points' / f'f{i}'}: E: bad {i}" for i in range(10)]
    assert lines[13:] == ["  ... and 2 more (status column of results.csv)"]
    ok = r.SweepResult(tmp_path, [], pd.DataFrame(rows[:1]), n_computed=0, wall_s=0.0)
    assert r.summarize(ok).splitlines() == [f"sweep {tmp_path}: 1 points, 1 ok, 0 failed; computed 0, reused 0 "
                                            "finished in 00:00", f"results: {tmp_path / 'results.csv'}"]
    empty = r.SweepResult(tmp_path, [], pd.DataFrame())
    assert (empty.n_points, empty.n_ok, empty.n_failed) == (0, 0, 0)
    assert r.default_out_dir(type("S", (), {"name": "nm"})) == Path("sweeps") / "nm"
    assert list(r.iter_point_dirs(res))[:2] == [tmp_path / "points" / "p0", tmp_path / "points" / "f0"]
    assert len(list(r.iter_point_dirs(res))) == 14


def test_dry_run_sweep_report(tmp_path, monkeypatch, capsys):
    import ahasd_sim.checks as checks
    built = []

    def dry_run(cfg):
        built.append((cfg.run.mode, cfg.run.seed))
        if cfg.run.mode == "ahasd":
            raise ValueError("would not start\nsecond line")

    monkeypatch.setattr(checks, "dry_run", dry_run)
    src = _spec(tmp_path)
    out = tmp_path / "out"
    assert r.dry_run_sweep(load_sweep_spec(src), out, progress=False) == 2
    text = capsys.readouterr().out.splitlines()
    assert sorted(built) == [("ahasd", 1), ("ahasd", 2), ("async", 1), ("async", 2)]
    assert text[0] == (f"sweep rs ({src}): 8 points, 4 distinct runs, 4 would fail; output folder {out}: "
                       "0 of them already finished there")
    assert text[1] == "axes: variant, seed"
    assert text[2] == "  point 4 (variant=b, seed=1): would not start"
    assert text[3] == "  point 5 (variant=b, seed=2): would not start"
    assert text[4].startswith("  point 6 (variant=bad, seed=1): ") and "npu.chips" in text[4]
    assert text[-1] == "dry run: nothing was simulated or written"
    assert not out.exists()
    monkeypatch.setattr(checks, "dry_run", lambda cfg: None)
    ok = _spec(tmp_path, RSPEC.replace("  bad: {set: {npu.chips: 0}}\n", ""))
    assert r.dry_run_sweep(load_sweep_spec(ok), out, progress=False) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith("6 points, 4 distinct runs, 0 would fail; output folder "
                                                            f"{out}: 0 of them already finished there")


def test_run_sweep_cli_exit_codes(tmp_path, fake_sim, capsys):
    import argparse
    src = _spec(tmp_path)
    args = argparse.Namespace(config=str(src), executor="local", workers=1, scheduler=None, dry_run=False,
                              out=str(tmp_path / "out"), no_progress=True, debug=True)
    assert r.run_sweep_cli(args) == 1                  # some points failed
    cap = capsys.readouterr()
    assert cap.out.splitlines()[0].startswith(f"sweep {tmp_path / 'out'}: 8 points, 5 ok, 3 failed;")
    assert cap.err.count('"message"') == 3             # --debug prints each failed folder's error.json
    ok = _spec(tmp_path, RSPEC.replace("  bad: {set: {npu.chips: 0}}\n", "").replace("seeds: [1, 2]", "seeds: [1]"))
    args.config, args.out, args.debug = str(ok), str(tmp_path / "ok"), False
    assert r.run_sweep_cli(args) == 0


def _cli_args(src, out, **kw):
    import argparse
    base = dict(config=str(src), executor="local", workers=1, scheduler=None, dry_run=False, out=out,
                no_progress=True, debug=False)
    base.update(kw)
    return argparse.Namespace(**base)


def test_run_sweep_cli_passes_its_options_and_reports_interrupts(tmp_path, monkeypatch, capsys):
    src = _spec(tmp_path)
    seen = {}

    def run_sweep(spec, out, **kw):
        seen.update(kw, out=out, name=spec.name)
        return r.SweepResult(Path(out or "x"), [], pd.DataFrame({"point": ["p"], "status": ["pending"]}))

    monkeypatch.setattr(r, "run_sweep", run_sweep)
    assert r.run_sweep_cli(_cli_args(src, "o", workers=3, no_progress=False)) == 1      # a point is pending
    assert seen == {"workers": 3, "executor": "local", "scheduler": None, "progress": True, "out": "o", "name": "rs",
                    "split_points": True, "full_points": False, "recompute": False}
    # Ctrl-C: the message points at the folder when results.csv was written, and the interrupt goes on
    monkeypatch.chdir(tmp_path)

    def interrupted(spec, out, **kw):
        d = Path(out) if out else r.default_out_dir(spec)
        d.mkdir(parents=True, exist_ok=True)
        (d / "results.csv").write_text("point,status\n")
        raise KeyboardInterrupt

    monkeypatch.setattr(r, "run_sweep", interrupted)
    capsys.readouterr()
    with pytest.raises(KeyboardInterrupt):
        r.run_sweep_cli(_cli_args(src, None))
    out = Path("sweeps") / "rs"
    assert capsys.readouterr().err == (f"stopped: finished points are kept in {out / 'points'} and listed in "
                                       f"{out / 'results.csv'}; run the same command again to compute only the "
                                       "missing ones\n")
    monkeypatch.setattr(r, "run_sweep", lambda spec, out, **kw: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        r.run_sweep_cli(_cli_args(src, str(tmp_path / "empty")))
    assert capsys.readouterr().err == ""                      # nothing written: nothing to point at


def test_run_sweep_cli_dry_run_and_debug(tmp_path, monkeypatch, capsys, fake_sim):
    import ahasd_sim.checks as checks
    monkeypatch.setattr(checks, "dry_run", lambda cfg: None)
    src = _spec(tmp_path)
    out = tmp_path / "o"
    assert r.run_sweep_cli(_cli_args(src, str(out), dry_run=True)) == 2        # the 'bad' variant
    text = capsys.readouterr().out
    assert f"output folder {out}: 0 of them" in text and not out.exists() and fake_sim == []
    # without --debug no error.json is printed
    assert r.run_sweep_cli(_cli_args(src, str(out))) == 1
    assert capsys.readouterr().err == ""
    # a finished point is counted by the dry run
    assert r.run_sweep_cli(_cli_args(src, str(out), dry_run=True)) == 2
    assert f"output folder {out}: 3 of them already finished there" in capsys.readouterr().out


def test_dry_run_lists_ten_failures_and_counts_the_rest(tmp_path, monkeypatch, capsys):
    import ahasd_sim.checks as checks
    monkeypatch.setattr(checks, "dry_run", lambda cfg: None)
    seeds = list(range(1, 13))
    src = _spec(tmp_path, RSPEC.replace("seeds: [1, 2]", f"seeds: {seeds}"))
    assert r.dry_run_sweep(load_sweep_spec(src), tmp_path / "o", progress=False) == 2
    lines = capsys.readouterr().out.splitlines()
    bad = [ln for ln in lines if ln.startswith("  point ")]
    assert len(bad) == 10 and bad[0].startswith("  point 36 (variant=bad, seed=1): ")
    assert "  ... and 2 more" in lines
    src = _spec(tmp_path, RSPEC.replace("seeds: [1, 2]", "seeds: [1, 2, 3, 4, 5]"))
    assert r.dry_run_sweep(load_sweep_spec(src), tmp_path / "o", progress=False) == 2
    lines = capsys.readouterr().out.splitlines()
    assert len([ln for ln in lines if ln.startswith("  point ")]) == 5 and not any("more" in ln for ln in lines)


def test_pool_round_in_worker_processes(tmp_path, monkeypatch):
    """One real process pool (forked, so the stand-in below is what the workers run)."""
    import multiprocessing as mp
    if "fork" not in mp.get_all_start_methods():
        pytest.skip("needs the fork start method to hand the stand-in to the workers")
    assert r._pool_context().get_start_method() == "fork"   # the runner forks where it can

    def run_point(task):
        if task["hash"] == "die":
            os._exit(3)
        if task["hash"] == "raise":
            raise RuntimeError("cannot run")
        return {"hash": task["hash"], "status": "ok", "marker": (Path(task["dir"]) / r.RUNNING).is_file()}

    import os
    monkeypatch.setattr(r, "run_point", run_point)
    done = []
    tasks = [{"hash": h, "dir": str(tmp_path / h)} for h in ("a", "raise", "b")]
    assert r._pool_round(tasks, 2, done.append) == []
    by = {d["hash"]: d for d in done}
    assert by["a"] == {"hash": "a", "status": "ok", "marker": True} and by["b"]["marker"] is True
    assert by["raise"] == {"hash": "raise", "status": "failed", "error_type": "RuntimeError", "error": "cannot run"}
    assert json.loads((tmp_path / "raise" / w.ERROR).read_text())["message"] == "cannot run"
    assert not (tmp_path / "a" / r.RUNNING).exists()
    # a worker that dies breaks the pool: its task comes back, with its marker left in place
    done.clear()
    broken = r._pool_round([{"hash": "die", "dir": str(tmp_path / "die")}], 1, done.append)
    assert [t["hash"] for t in broken] == ["die"] and done == []
    assert (tmp_path / "die" / r.RUNNING).is_file()


class _FakeFuture:
    def __init__(self, key, fn, task):
        self.key, self.fn, self.task, self.cancelled = key, fn, task, False

    def result(self):
        return self.fn(self.task)

    def cancel(self):
        self.cancelled = True


class _FakeClient:
    """What _run_dask uses of a distributed.Client, run in this process."""

    def __init__(self):
        self.submitted = []
        self.warmed = []

    def run(self, fn, task):            # the warm-up on every worker before the points go out
        self.warmed.append(task["hash"])

    def submit(self, fn, task, key, pure):
        assert pure is False
        f = _FakeFuture(key, fn, task)
        self.submitted.append(f)
        return f


def test_run_dask_bookkeeping_with_a_client(tmp_path, monkeypatch):
    import distributed
    monkeypatch.setattr(distributed, "as_completed", lambda futs: iter(list(futs)))

    def files_of(task):
        if task["hash"] == "lost":
            raise OSError("worker lost")
        return {"hash": task["hash"], "status": "ok", "files": {"summary.json": b"{}", "meta.json": b"{\"a\": 1}"}}

    monkeypatch.setattr(r, "run_point_files", files_of)
    client = _FakeClient()
    done = []
    tasks = [{"hash": h, "dir": str(tmp_path / h)} for h in ("a", "lost")]
    r._run_dask(tasks, 1, None, done.append, client=client)
    assert [f.key for f in client.submitted] == ["ahasd-point-a", "ahasd-point-lost"]
    assert client.warmed == ["a"]          # every worker warmed once, with the first task
    assert done == [{"hash": "a", "status": "ok"},
                    {"hash": "lost", "status": "failed", "error_type": "OSError", "error": "worker lost"}]
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["meta.json", "summary.json"]
    assert (tmp_path / "a" / "meta.json").read_bytes() == b"{\"a\": 1}"
    assert json.loads((tmp_path / "lost" / w.ERROR).read_text())["type"] == "OSError"

    # an interrupt cancels every submitted future and propagates
    def stop(res):
        raise KeyboardInterrupt

    client = _FakeClient()
    with pytest.raises(KeyboardInterrupt):
        r._run_dask(tasks[:1] + [{"hash": "c", "dir": str(tmp_path / "c")}], 1, None, stop, client=client)
    assert [f.cancelled for f in client.submitted] == [True, True]
