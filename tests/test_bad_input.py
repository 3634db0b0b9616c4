"""Bad input at every entry point: exit code 2, one stderr line naming the file or key, no
traceback, and nothing new or changed in the output location (checked before any work).

Each case builds its inputs in ``tmp_path``, snapshots ``tmp_path`` (the working directory
too, so default output folders would show up), runs the command in-process and compares.
"""
from __future__ import annotations

import fcntl
import importlib.util
import json
import os
from pathlib import Path

import pytest

from ahasd_sim.__main__ import main as cli_main

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz"
PAPER = ROOT / "hw_configs" / "platform_mobile_npu_lpddr5_pim.yaml"
NPU_ONLY = ROOT / "hw_configs" / "platform_mobile_npu_lpddr5.yaml"
SCRIPTS = {}


def _script(name: str):
    if name not in SCRIPTS:
        spec = importlib.util.spec_from_file_location(f"_script_{name}", ROOT / "scripts" / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        SCRIPTS[name] = mod
    return SCRIPTS[name].main


# ---------------------------------------------------------------- input builders
def good_cfg(d: Path, extra: str = "") -> Path:
    p = d / "good.yaml"
    p.write_text(f"extends: {PAPER}\nrun: {{trace: {SMOKE}, generated_tokens: 24, timeline: false}}\n{extra}")
    return p


def text(d: Path, name: str, body: str | bytes) -> Path:
    p = d / name
    (p.write_bytes if isinstance(body, bytes) else p.write_text)(body)
    return p


def nested(depth: int) -> str:
    return "a: " + "{b: " * depth + "1" + "}" * depth + "\n"


def sweep(d: Path, body: str, name: str = "sw.yaml") -> Path:
    return text(d, name, f"name: s\nbase: {{config: {good_cfg(d).name}}}\n{body}")


def results_csv(d: Path) -> Path:
    return text(d, "results.csv", "point,status,variant,model_pair,seed,error_type,error,wall_time_s,"
                "throughput_tok_s,tokens_per_j,generated_tokens,decode_makespan_s,decode_energy_j\n"
                "a,ok,gpu_only,x/y,0,,,0.1,1.0,1.0,6,6.0,6.0\nb,ok,ahasd,x/y,0,,,0.1,2.0,3.0,6,3.0,2.0\n")


def results_csv_without_totals(d: Path) -> Path:
    return text(d, "old.csv", "point,status,variant,model_pair,seed,error_type,error,wall_time_s,"
                "throughput_tok_s,tokens_per_j\n"
                "a,ok,gpu_only,x/y,0,,,0.1,1.0,1.0\nb,ok,ahasd,x/y,0,,,0.1,2.0,3.0\n")


def timeline(d: Path) -> Path:
    run = d / "run"
    run.mkdir()
    (run / "timeline.json").write_text(json.dumps({"traceEvents": [
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 1, "args": {"name": "npu"}},
        {"ph": "X", "pid": 0, "tid": 1, "ts": 0.0, "dur": 1000.0, "name": "verify"}]}))
    return run


def experiments_with(d: Path, old: str, new: str) -> Path:
    """The shipped experiment file with ``old`` replaced by ``new`` (its sweeps named by full path)."""
    paper = ROOT / "hw_configs" / "paper"
    body = (paper / "experiments.yaml").read_text().replace(": reproduce.yaml", f": {paper / 'reproduce.yaml'}")
    body = body.replace(": regimes.yaml", f": {paper / 'regimes.yaml'}")
    assert old in body
    return text(d, "exp.yaml", body.replace(old, new, 1))


def other_sweep_folder(d: Path) -> Path:
    out = d / "sweepout"
    out.mkdir()
    (out / "spec.yaml").write_text("name: other\n")
    (out / "sweep.json").write_text(json.dumps({"spec_file": "other.yaml", "spec_sha256_12": "000000000000"}))
    return out


def foreign(d: Path) -> Path:
    f = d / "mine"
    f.mkdir()
    (f / "thesis.tex").write_text("precious")
    return f


def afile(d: Path, name: str = "afile") -> Path:
    return text(d, name, "x")


BIN = bytes(range(256)) * 4
UTF16 = "run: {mode: ahasd}\n".encode("utf-16")

# (id, entry, argv builder (tmp_path -> list[str]), fragment expected in the error line)
CASES = [
    # ---- config files (run)
    ("cfg-binary", "cli", lambda d: ["--config", str(text(d, "c.yaml", BIN)), "--out", str(d / "o")], "expected UTF-8 text"),
    ("cfg-utf16", "cli", lambda d: ["--config", str(text(d, "c.yaml", UTF16)), "--out", str(d / "o")], "UTF-16"),
    ("cfg-nul", "cli", lambda d: ["--config", str(text(d, "c.yaml", "run:\x00\n")), "--out", str(d / "o")], "NUL"),
    ("cfg-nested", "cli", lambda d: ["--config", str(text(d, "c.yaml", nested(200))), "--out", str(d / "o")], "nested too deeply"),
    ("cfg-nested-extreme", "cli", lambda d: ["--config", str(text(d, "c.yaml", "[" * 20000 + "]" * 20000))], "nested too deeply"),
    ("cfg-dup-section", "cli", lambda d: ["--config", str(text(d, "c.yaml", "run: {seed: 1}\nrun: {seed: 2}\n"))], "duplicate key 'run'"),
    ("cfg-dup-key", "cli", lambda d: ["--config", str(text(d, "c.yaml", "run:\n  seed: 1\n  seed: 2\n"))], "duplicate key 'seed' at line 3"),
    ("cfg-yaml-syntax", "cli", lambda d: ["--config", str(text(d, "c.yaml", "run: [1, 2\n"))], "YAML parse error"),
    ("cfg-toplevel-list", "cli", lambda d: ["--config", str(text(d, "c.yaml", "- 1\n- 2\n"))], "expected a mapping at the top level"),
    # the smoke trace holds 3 disjoint windows of 24 tokens: 4 is refused before anything runs
    ("cfg-too-many-windows", "cli", lambda d: ["--config", str(good_cfg(d)), "--set", "run.windows=4", "--out", str(d / "o")],
     "run.windows: 4 disjoint windows of 24 tokens (run.generated_tokens) starting at prompt boundaries do not fit in the trace (72 positions, 3 prompts): at most 3"),
    ("cfg-too-many-windows-dry", "cli", lambda d: ["--config", str(good_cfg(d)), "--set", "run.windows=4", "--dry-run"],
     "run.windows: 4 disjoint windows"),
    ("cfg-unknown-section", "cli", lambda d: ["--config", str(good_cfg(d, "npuu: {}\n"))], "npuu: unknown section (did you mean 'npu'?)"),
    ("cfg-unknown-key", "cli", lambda d: ["--config", str(good_cfg(d, "npu: {freq_gz: 1}\n"))], "npu.freq_gz: unknown key"),
    ("cfg-wrong-type", "cli", lambda d: ["--config", str(good_cfg(d, "npu: {freq_ghz: fast}\n"))], "npu.freq_ghz: expected a number"),
    ("cfg-out-of-range", "cli", lambda d: ["--config", str(good_cfg(d, "npu: {freq_ghz: -1}\n"))], "npu.freq_ghz: expected > 0"),
    ("cfg-folder", "cli", lambda d: ["--config", str(d)], "expected a YAML file, got a folder"),
    ("cfg-missing", "cli", lambda d: ["--config", str(d / "none.yaml")], "none.yaml: file not found"),
    ("cfg-extends-missing", "cli", lambda d: ["--config", str(text(d, "c.yaml", "extends: nope.yaml\n"))], "parent config 'nope.yaml' not found"),
    ("cfg-extends-cycle", "cli", lambda d: ["--config", str(text(d, "c.yaml", "extends: c.yaml\n"))], "circular extends"),
    ("cfg-extends-binary", "cli", lambda d: [text(d, "p.yaml", BIN) and "--config", str(text(d, "c.yaml", "extends: p.yaml\n"))], "p.yaml: expected UTF-8 text"),
    ("cfg-huge", "cli", lambda d: ["--config", str(text(d, "c.yaml", "# x\n" * 1_200_000))], "too large"),
    ("cfg-sci-not-int", "cli", lambda d: ["--config", str(good_cfg(d)), "--set", "run.generated_tokens=2.5e0"], "run.generated_tokens: expected an integer, got 2.5"),
    # ---- --set / --seed
    ("set-no-equals", "cli", lambda d: ["--config", str(good_cfg(d)), "--set", "run.mode"], "expected KEY=VALUE"),
    ("set-empty-part", "cli", lambda d: ["--config", str(good_cfg(d)), "--set", "run..mode=x"], "expected a dotted key"),
    ("set-unknown-mode", "cli", lambda d: ["--config", str(good_cfg(d)), "--set", "run.mode=warp"], "run.mode: unknown mode 'warp'"),
    ("set-not-number", "cli", lambda d: ["--config", str(good_cfg(d)), "--set", "npu.freq_ghz=fast"], "--set: npu.freq_ghz: expected a number"),
    ("set-section-value", "cli", lambda d: ["--config", str(good_cfg(d)), "--set", "run=5"], "run: is a section, not a value"),
    ("set-dup-in-value", "cli", lambda d: ["--config", str(good_cfg(d)), "--set", "policy.fixed={k: 1, k: 2}"], "duplicate key 'k'"),
    ("set-list-element", "cli", lambda d: ["--config", str(good_cfg(d)), "--set", "policy.specdecpp.features=[entropy, 3]"],
     "error: --set: policy.specdecpp.features[1]: expected a string, got 3"),
    ("set-section-check", "cli", lambda d: ["--config", str(good_cfg(d)), "--set", "policy.specdecpp.features=[entropy, bogus]"],
     "error: --set: policy.specdecpp: unknown feature 'bogus'"),
    ("file-and-set-section-check", "cli", lambda d: ["--config", str(good_cfg(d, "policy:\n  specdecpp:\n    features: [bogus]\n")),
                                                      "--set", "policy.specdecpp.tol=1e-6"],
     "good.yaml + --set: policy.specdecpp: unknown feature 'bogus'"),
    ("seed-conflict", "cli", lambda d: ["--config", str(good_cfg(d)), "--set", "run.seed=3", "--seed", "4"], "--seed 4 conflicts with --set run.seed=3"),
    ("seed-negative", "cli", lambda d: ["--config", str(good_cfg(d)), "--seed", "-1"], "run.seed: expected >= 0"),
    ("seed-not-int", "cli", lambda d: ["--config", str(good_cfg(d)), "--seed", "abc"], "--seed: invalid int value"),
    ("trace-missing", "cli", lambda d: ["--config", str(good_cfg(d)), "--set", "run.trace=nope.npz"], "run.trace: trace file 'nope.npz' not found"),
    ("trace-binary", "cli", lambda d: ["--config", str(good_cfg(d)), "--set", f"run.trace={text(d, 't.npz', BIN)}"], "t.npz"),
    ("trace-too-short", "cli", lambda d: ["--config", str(good_cfg(d)), "--set", "run.generated_tokens=100000"], "100000"),
    ("time-limit", "cli", lambda d: ["--config", str(good_cfg(d)), "--set", "run.max_sim_time_s=2e0"], "run.max_sim_time_s: mode 'ahasd' committed only"),
    ("time-limit-slow-npu", "cli", lambda d: ["--config", str(good_cfg(d)), "--set", "npu.freq_ghz=1e-3",
                                               "--set", "run.max_sim_time_s=100"], "bottleneck: npu"),
    ("baseline-device-absent", "cli", lambda d: ["--config", str(good_cfg(d)), "--set", "run.mode=autoregressive",
                                                  "--set", "baseline.device=gpu"], "--set: baseline.device: is gpu, but this platform has no GPU"),
    ("set-section-null", "cli", lambda d: ["--config", str(good_cfg(d)), "--set", "npu=null"], "npu: is a section, not a value"),
    ("cfg-device-file", "cli", lambda d: ["--config", "/dev/zero"], "got a device or pipe"),
    ("mode-needs-device", "cli", lambda d: ["--config", str(good_cfg(d)), "--set", "run.mode=gpu_only"], "needs device(s) gpu"),
    ("no-config", "cli", lambda d: ["run"], "--config"),
    ("unknown-option", "cli", lambda d: ["run", "--config", str(good_cfg(d)), "--bogus"], "unrecognized arguments: --bogus"),
    # ---- output locations (run)
    ("out-is-file", "cli", lambda d: ["--config", str(good_cfg(d)), "--out", str(afile(d))], "exists and is a file"),
    ("out-under-file", "cli", lambda d: ["--config", str(good_cfg(d)), "--out", str(afile(d) / "sub")], "is a file, so nothing can be created under it"),
    ("out-unwritable", "cli", lambda d: ["--config", str(good_cfg(d)), "--out", "/proc/ahasd-sim-test/out"], "cannot write"),
    ("out-foreign", "cli", lambda d: ["--config", str(good_cfg(d)), "--out", str(foreign(d))], "does not hold an ahasd_sim run result"),
    ("out-dry-run-foreign", "cli", lambda d: ["--config", str(good_cfg(d)), "--dry-run", "--out", str(foreign(d))], "refusing to replace it"),
    # ---- compare
    ("compare-repeated", "cli", lambda d: ["compare", "--config", str(good_cfg(d)), "--modes", "ahasd,async,ahasd"], "mode 'ahasd' is listed more than once"),
    ("compare-policies-repeated", "cli", lambda d: ["compare", "--config", str(good_cfg(d)), "--policies", "svip,adaedl,svip"], "--policies: policy 'svip' is listed more than once"),
    ("compare-policies-unknown", "cli", lambda d: ["compare", "--config", str(good_cfg(d)), "--policies", "svip,adaedll"], "--policies: unknown policy 'adaedll' (did you mean 'adaedl'?)"),
    ("tree-policy-in-chain-mode", "cli", lambda d: ["--config", str(good_cfg(d)), "--set", "run.policy=specfit"], "run.policy: policy 'specfit' selects draft trees; use it with run.mode moe_offload"),
    ("compare-unknown", "cli", lambda d: ["compare", "--config", str(good_cfg(d)), "--modes", "ahasd,asink"], "unknown mode 'asink' (did you mean 'async'?)"),
    ("compare-empty", "cli", lambda d: ["compare", "--config", str(good_cfg(d)), "--modes", ","], "--modes: expected comma-separated"),
    ("compare-baseline", "cli", lambda d: ["compare", "--config", str(good_cfg(d)), "--modes", "ahasd", "--baseline", "gpu"], "unknown mode 'gpu'"),
    ("compare-out-file", "cli", lambda d: ["compare", "--config", str(good_cfg(d)), "--modes", "ahasd,async", "--out", str(afile(d))], "exists and is a file"),
    ("compare-out-foreign", "cli", lambda d: ["compare", "--config", str(good_cfg(d)), "--modes", "ahasd", "--out", str(foreign(d))], "compare result"),
    # ---- sweep
    ("sweep-binary", "cli", lambda d: ["sweep", "--config", str(text(d, "s.yaml", BIN))], "s.yaml: expected UTF-8 text"),
    ("sweep-dup-key", "cli", lambda d: ["sweep", "--config", str(sweep(d, "seeds: [0]\nseeds: [1]\n"))], "duplicate key 'seeds'"),
    ("sweep-nested", "cli", lambda d: ["sweep", "--config", str(sweep(d, nested(100)))], "nested too deeply"),
    ("sweep-unknown-key", "cli", lambda d: ["sweep", "--config", str(sweep(d, "axis: {}\n"))], "axis: unknown key (did you mean 'axes'?)"),
    ("sweep-bad-axis-key", "cli", lambda d: ["sweep", "--config", str(sweep(d, "axes: {pim.rank: [1]}\n"))], "unknown config key 'pim.rank'"),
    ("sweep-scheduler-local", "cli", lambda d: ["sweep", "--config", str(sweep(d, "")), "--scheduler", "tcp://x:1"], "--scheduler tcp://x:1 needs --executor dask"),
    ("sweep-workers-0", "cli", lambda d: ["sweep", "--config", str(sweep(d, "")), "--workers", "0"], "argument --workers: expected an integer >= 1, got 0"),
    ("sweep-out-file", "cli", lambda d: ["sweep", "--config", str(sweep(d, "")), "--out", str(afile(d))], "exists and is a file"),
    ("sweep-out-other-sweep", "cli", lambda d: ["sweep", "--config", str(sweep(d, "")), "--out", str(other_sweep_folder(d))], "holds another sweep"),
    ("sweep-out-foreign", "cli", lambda d: ["sweep", "--config", str(sweep(d, "")), "--out", str(foreign(d))], "is not a sweep folder"),
    ("sweep-too-large", "cli", lambda d: ["sweep", "--config", str(sweep(d, f"seeds: {list(range(2000))}\n"
                                           f"axes: {{run.generated_tokens: {list(range(1, 1001))}}}\n"))], "2,000,000 points"),
    ("sweep-dry-run-other", "cli", lambda d: ["sweep", "--dry-run", "--config", str(sweep(d, "")), "--out", str(other_sweep_folder(d))], "holds another sweep"),
    # ---- area, traces, validate, config-reference
    ("area-binary", "cli", lambda d: ["area", "--config", str(text(d, "c.yaml", BIN))], "expected UTF-8 text"),
    ("traces-missing", "cli", lambda d: ["traces", "stats", str(d / "none.npz")], "none.npz"),
    ("traces-binary", "cli", lambda d: ["traces", "stats", str(text(d, "t.npz", BIN))], "t.npz"),
    ("traces-out-file", "cli", lambda d: ["traces", "stats", str(SMOKE), "--out", str(afile(d))], "exists and is a file"),
    ("traces-no-sub", "cli", lambda d: ["traces"], "traces stats FILE"),
    ("validate-measured-binary", "cli", lambda d: ["validate", "--measured", str(text(d, "m.csv", BIN))], "m.csv"),
    ("validate-out-file", "cli", lambda d: ["validate", "--out", str(afile(d))], "exists and is a file"),
    ("validate-no-gpu", "cli", lambda d: ["validate", "--config", str(NPU_ONLY)], "gpu.enabled is false"),
    ("config-reference-unknown", "cli", lambda d: ["config-reference", "pimm"], "no section or key 'pimm' (did you mean 'pim'?)"),
    # ---- scripts
    ("bars-no-baseline", "plot_bars", lambda d: ["--results", str(results_csv(d)), "--baseline", "npu_pim", "--out", str(d / "f")], "--baseline npu_pim: no finished point"),
    ("bars-unknown-bar", "plot_bars", lambda d: ["--results", str(results_csv(d)), "--baseline", "gpu_only", "--bars", "ahasd,xx", "--out", str(d / "f")], "--bars xx"),
    ("bars-results-missing", "plot_bars", lambda d: ["--results", str(d / "none"), "--baseline", "a", "--out", str(d / "f")], "not found"),
    ("bars-out-under-file", "plot_bars", lambda d: ["--results", str(results_csv(d)), "--baseline", "gpu_only", "--out", str(afile(d) / "f")], "is a file"),
    ("bars-no-totals", "plot_bars", lambda d: ["--results", str(results_csv_without_totals(d)), "--baseline", "gpu_only", "--out", str(d / "f")], "--metrics throughput_tok_s: the results table has no columns generated_tokens and decode_makespan_s"),
    ("bars-no-pairing", "plot_bars", lambda d: ["--results", str(results_csv(d)), "--baseline", "gpu_only", "--match", "point", "--out", str(d / "f")], "could be paired"),
    ("sweep-plot-where", "plot_sweep", lambda d: ["heatmap", "--results", str(results_csv(d)), "--x", "variant", "--y", "seed",
                                                  "--metric", "throughput_tok_s", "--where", "seed=7", "--out", str(d / "f")], "--where seed=7"),
    ("sweep-plot-column", "plot_sweep", lambda d: ["lines", "--results", str(results_csv(d)), "--x", "pim.ranks",
                                                   "--metric", "throughput_tok_s", "--out", str(d / "f")], "--x pim.ranks: no column"),
    ("sweep-plot-binary", "plot_sweep", lambda d: ["lines", "--results", str(text(d, "r.csv", BIN)), "--x", "a",
                                                   "--metric", "b", "--out", str(d / "f")], "r.csv"),
    ("sweep-plot-where-syntax", "plot_sweep", lambda d: ["lines", "--results", str(results_csv(d)), "--x", "seed",
                                                         "--metric", "throughput_tok_s", "--where", "seed", "--out", str(d / "f")], "--where expects KEY=VALUE"),
    ("timeline-negative", "plot_timeline", lambda d: [str(timeline(d)), "--start-ms", "-5", "--out", str(d / "f")], "--start-ms -5: expected >= 0"),
    ("timeline-outside", "plot_timeline", lambda d: [str(timeline(d)), "--start-ms", "50", "--out", str(d / "f")], "holds no activity"),
    ("timeline-zero-window", "plot_timeline", lambda d: [str(timeline(d)), "--window-ms", "0", "--out", str(d / "f")], "--window-ms 0: expected > 0"),
    ("timeline-missing", "plot_timeline", lambda d: [str(d / "none"), "--out", str(d / "f")], "not found"),
    ("timeline-binary", "plot_timeline", lambda d: [str(text(d, "timeline.json", BIN)), "--out", str(d / "f")], "not a readable timeline.json"),
    ("dist-empty", "plot_distributions", lambda d: [str(text(d, "events.csv", "time_s,event,n_tokens,accepted\n")), "--out", str(d / "f")], "no draft batches"),
    ("dist-max-len", "plot_distributions", lambda d: [str(d), "--max-len", "0", "--out", str(d / "f")], "--max-len 0: expected >= 1"),
    ("bench-tokens", "bench", lambda d: ["--tokens", "0"], "--tokens 0: expected >= 1"),
    ("bench-modes", "bench", lambda d: ["--modes", "ahasd,ahasd"], "listed more than once"),
    ("bench-out", "bench", lambda d: ["--out", str(afile(d) / "b.json"), "--modes", "ahasd"], "is a file"),
    ("bench-config", "bench", lambda d: ["--config", str(text(d, "c.yaml", UTF16)), "--modes", "ahasd"], "UTF-16"),
    ("repro-tokens", "reproduce_paper", lambda d: ["--tokens", "0", "--out", str(d / "p")], "--tokens 0: expected >= 1"),
    ("repro-out-foreign", "reproduce_paper", lambda d: ["--out", str(foreign(d))], "is not a reproduction folder"),
    ("repro-scheduler", "reproduce_paper", lambda d: ["--scheduler", "tcp://x:1", "--out", str(d / "p")], "needs --executor dask"),
    ("repro-spec-binary", "reproduce_paper", lambda d: ["--spec", str(text(d, "s.yaml", BIN)), "--out", str(d / "p")], "s.yaml: expected UTF-8 text"),
    ("hyco-workers", "hyco_study", lambda d: ["--workers", "0", "--out", str(d / "h")], "--workers 0: expected >= 1"),
    ("hyco-traces", "hyco_study", lambda d: ["--traces", str(afile(d)), "--out", str(d / "h"), "--figure", str(d / "f.png")], "is not a folder"),
    ("hyco-out-file", "hyco_study", lambda d: ["--out", str(afile(d)), "--figure", str(d / "f.png")], "exists and is a file"),
    ("hyco-figure", "hyco_study", lambda d: ["--out", str(d / "h"), "--figure", str(afile(d) / "f.png")], "is a file"),
    ("repro-out-file", "reproduce_paper", lambda d: ["--out", str(afile(d))], "exists and is a file"),
    ("repro-experiments-rung", "reproduce_paper", lambda d: ["--experiments", str(experiments_with(d, "plus_edc,", "plus_edcc,")),
                                                             "--out", str(d / "p")], "exp.yaml: ladders.draft_one_more[3]: 'plus_edcc' is not a variant"),
    ("repro-experiments-type", "reproduce_paper", lambda d: ["--experiments", str(experiments_with(d, "ahasd: 3.8", "ahasd: 3.8x")),
                                                             "--out", str(d / "p")], "exp.yaml: paper_reported.ladder_throughput.ahasd: expected a number, got '3.8x'"),
    ("repro-experiments-missing", "reproduce_paper", lambda d: ["--experiments", str(d / "none.yaml"), "--out", str(d / "p")],
     "none.yaml: experiments file not found"),
]


def snapshot(root: Path) -> dict[str, tuple]:
    """Every path under ``root`` with its mode, and for files size and mtime (a folder's own
    mtime moves when a scratch file is created and removed in it: not a change of content)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            out[str((Path(dirpath) / name).relative_to(root))] = ((Path(dirpath) / name).lstat().st_mode,)
        for name in filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            out[str(p.relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


@pytest.mark.parametrize("case_id, entry, build, fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_input(case_id, entry, build, fragment, tmp_path, monkeypatch, capsys):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)             # default output folders would appear here
    argv = build(tmp_path)
    before = snapshot(tmp_path)
    fn = cli_main if entry == "cli" else _script(entry)
    rc = fn(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert "\n" not in err and "Traceback" not in err, err
    assert err.startswith("error: "), err
    assert fragment in err, err
    assert snapshot(tmp_path) == before, "the command created or changed files"


def test_enough_cases():
    entries = {c[1] for c in CASES}
    assert len(CASES) >= 60 and entries == {"cli", "plot_bars", "plot_sweep", "plot_timeline",
                                            "plot_distributions", "bench", "reproduce_paper", "hyco_study"}


def test_disk_full_is_refused_before_simulating(tmp_path, monkeypatch, capsys):
    import ahasd_sim.outdir as outdir
    monkeypatch.setattr(outdir, "MIN_FREE_BYTES", 1 << 62)   # no file system has that much free space
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    for argv in (["--config", str(good_cfg(tmp_path)), "--out", str(tmp_path / "o")],
                 ["sweep", "--config", str(sweep(tmp_path, "")), "--out", str(tmp_path / "s")]):
        before = snapshot(tmp_path)
        assert cli_main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert "the disk is full" in err and "\n" not in err
        assert snapshot(tmp_path) == before


def test_locked_output_folder_is_refused(tmp_path, capsys):
    """A folder another command is writing (its lock is held) is refused, untouched."""
    out = tmp_path / "o"
    cfg = good_cfg(tmp_path)
    lock = tmp_path / ".o.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, b"12345")
        before = snapshot(tmp_path)
        assert cli_main(["--config", str(cfg), "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert "in use by another ahasd_sim command (process 12345)" in err
        assert snapshot(tmp_path) == before
    finally:
        os.close(fd)


def test_scientific_notation_is_a_number(tmp_path, capsys):
    """1e9-style numbers are numbers in files and in --set (YAML 1.1 would read strings)."""
    from ahasd_sim.config import load_config
    cfg = load_config(good_cfg(tmp_path, "npu: {freq_ghz: 1e0}\n"), ["run.max_sim_time_s=3.6e4", "pim.unit_gops_int8=1.024E2"])
    assert cfg.npu.freq_ghz == 1.0 and cfg.run.max_sim_time_s == 36000.0 and cfg.pim.unit_gops_int8 == 102.4
    assert cfg.run.generated_tokens == 24 and isinstance(cfg.run.generated_tokens, int)
    cfg = load_config(good_cfg(tmp_path), ["run.generated_tokens=1e3"])   # an integral number is an integer
    assert cfg.run.generated_tokens == 1000 and isinstance(cfg.run.generated_tokens, int)


def test_drafter_larger_than_target_warns(tmp_path, capsys):
    assert cli_main(["--config", str(good_cfg(tmp_path)), "--set", "run.draft_model=llama2-13b",
                     "--set", "run.target_model=llama2-7b", "--dry-run", "--out", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "run.draft_model llama2-13b" in err and "not smaller than run.target_model" in err
    assert not (tmp_path / "o").exists()


def test_errors_survive_reraise_from_args():
    """SimPy re-creates an exception raised inside a process from its args; ours must survive
    that (else a config error found while costing a task becomes a TypeError traceback)."""
    import pickle

    from ahasd_sim.config.errors import ConfigError
    from ahasd_sim.traces.format import TraceError
    for exc in (ConfigError("f.yaml", "run.mode", "bad"), TraceError("t.npz", "broken\nfile")):
        again = type(exc)(*exc.args)
        assert str(again) == str(exc) == str(pickle.loads(pickle.dumps(exc)))
        assert "\n" not in str(exc)
