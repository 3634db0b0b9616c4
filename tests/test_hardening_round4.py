"""The last classes of the bad-input probe: hangs, tracebacks in scripts, silent acceptance,
wrong blame, dry runs that said OK where the run refused, leftovers. Each bad input: exit 2,
one stderr line naming the source and the key, no traceback, nothing written; each hang ends
within seconds; a setting the run ignores is a ``warning:`` line naming it."""
from __future__ import annotations

import errno
import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ahasd_sim.__main__ import main
from test_bad_input import _script, results_csv, snapshot
from test_hw_helpers import one_line_error

ROOT = Path(__file__).resolve().parent.parent
MAIN = ROOT / "hw_configs" / "ahasd_mobile.yaml"
HYCO = ROOT / "hw_configs" / "hyco_mobile_cloud.yaml"
MOE = ROOT / "hw_configs" / "moe_offload.yaml"
NO_PIM = ROOT / "hw_configs" / "platform_mobile_npu_lpddr5.yaml"
PAPER = ROOT / "hw_configs" / "platform_mobile_npu_lpddr5_pim.yaml"
SMOKE = ROOT / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz"
SOC = ROOT / "hw_configs" / "soc" / "snapdragon_8_gen_3.yaml"
MEASURED = ROOT / "validation" / "mobile" / "measured.csv"


def _quick(*extra):
    """--set items of a one-window smoke run (a second or so)."""
    items = [f"run.trace={SMOKE}", "run.windows=1", "run.generated_tokens=16", "run.timeline=false", *extra]
    return [x for s in items for x in ("--set", s)]


def _nothing_new(tmp_path, before):
    assert snapshot(tmp_path) == before, "the command created or changed files"


# ---------------------------------------------------------------- 1. hangs end in seconds
@pytest.mark.parametrize("dry", [False, True])
def test_a_pin_rate_that_takes_hours_is_refused_with_its_limit(tmp_path, capsys, dry):
    """1 MT/s made one window take simulated hours (and tripped the sharing livelock): refused
    with the bound and its reason, before anything is built."""
    t0 = time.perf_counter()
    rc = main(["--config", str(MAIN), "--set", "memory.data_rate_mts=1", "--jobs", "1",
               *(["--dry-run"] if dry else []), "--out", str(tmp_path / "o")])
    one_line_error(capsys, rc, "--set: memory.data_rate_mts: expected >= 400 MT/s, got 1.0",
                   "first LPDDR generation's pin rate")
    assert time.perf_counter() - t0 < 10 and not (tmp_path / "o").exists()


def test_sharing_advances_time_when_the_rest_is_below_the_clock_resolution():
    """At t = 1e6 s one float step of the clock is 1.16e-10 s. A flow of 1e-11 s of work got a
    zero-length timer (now + 1e-11 == now), advanced nothing, and re-armed it for ever. Now it
    ends at the next representable time, one step later."""
    import math

    import simpy

    from ahasd_sim.hw.sharing import FlowSpec, FluidShare
    env = simpy.Environment(initial_time=1e6)
    share = FluidShare(env)
    f = share.start(FlowSpec("a", {"r": 1.0}), 1e-11)
    share.start(FlowSpec("b", {"r": 0.5}), 1.0)
    steps = 0
    while f.end_s is None and steps < 100:
        env.step()
        steps += 1
    assert f.end_s == math.nextafter(1e6, math.inf) and steps <= 2
    assert env.now > 1e6


STUDY = f"""name: {{name}}
base:
  config: {PAPER}
  set: {{{{run.trace: {SMOKE}, run.generated_tokens: 16, run.timeline: false, run.windows: 1}}}}
runs:
  ahasd: {{{{run.mode: ahasd}}}}
space:
  pim.ranks: {{{{choices: [16]}}}}
objectives:
  - {{{{name: tps, metric: throughput_tok_s, run: ahasd, direction: maximize}}}}
sampler: grid
trials: 1
{{extra}}
"""


def _study(tmp_path, extra="", name="mine"):
    p = tmp_path / f"{name}.yaml"
    p.write_text(STUDY.format(name=name, extra=extra))
    return p


@pytest.mark.parametrize("command", ["optimize", "sensitivity"])
@pytest.mark.parametrize("extra, key, fragment", [
    ("constraints: [{expr: '9 ** 9 ** 9', max: 1}]", "constraints[0].expr", "9 ** 3.8742e+08 overflows a float"),
    ("constraints: [{expr: '1 / (pim.ranks - 16)', max: 1}]", "constraints[0].expr",
     "cannot be evaluated at pim.ranks=16: float division by zero"),
    ("constraints: [{expr: 'run.mode', max: 1}]", "constraints[0].expr", "config key 'run.mode' is 'ahasd', not a number"),
    ("windows: [0, 100000]", "windows[1]", "prompt 100000 is out of range: the trace"),
], ids=["power", "zero-division", "text-key", "window-range"])
def test_a_study_that_cannot_run_exits_2_before_running(tmp_path, capsys, command, extra, key, fragment):
    """Each used to run its trials and exit 1 ("trial 0 failed: ..."), the power one to hang."""
    pytest.importorskip("optuna")
    study = _study(tmp_path, extra)
    out = tmp_path / "st"
    t0 = time.perf_counter()
    rc = main([command, "--config", str(study), "--workers", "1", "--no-progress", "--out", str(out),
               *(["--sobol-samples", "0"] if command == "sensitivity" else [])])
    one_line_error(capsys, rc, f"{study}: {key}: ", fragment)
    assert time.perf_counter() - t0 < 20 and not out.exists()


def test_a_constraint_singular_only_where_the_search_never_goes_is_accepted(tmp_path):
    """The base config's pim.ranks (16) is not searched (choices [32]): 1 / (pim.ranks - 16) is
    evaluated at searched points only, where it is 1/16."""
    pytest.importorskip("optuna")
    from ahasd_sim.dse.study import load_study
    p = _study(tmp_path, "constraints: [{expr: '1 / (pim.ranks - 16)', max: 1}]")
    p.write_text(p.read_text().replace("choices: [16]", "choices: [32]"))
    study = load_study(p, check_metrics=False)
    assert study.base.pim.ranks == 16 and study.constraints[0].max == 1


def test_constraint_powers_are_float_powers():
    """2 ** 0.5 and 4 ** 2 as before; (-8) ** 0.5 has no real value: a ValueError, not a complex."""
    import ast

    from ahasd_sim.dse.study import eval_expr
    ev = lambda s: eval_expr(ast.parse(s, mode="eval"), {})   # noqa: E731
    assert ev("2 ** 0.5") == pytest.approx(2 ** 0.5, rel=1e-15) and ev("4 ** 2") == 16.0
    with pytest.raises(OverflowError, match="overflows a float"):
        ev("9 ** 9 ** 9")
    with pytest.raises(ValueError, match="not a real number"):
        ev("(0 - 8) ** 0.5")


@pytest.mark.parametrize("argv, fragment", [
    (["optimize", "--config", "s.yaml", "--trials", "1e20"], "argument --trials: expected at most 1048576"),
    (["optimize", "--config", "s.yaml", "--trials", "100000000000000000000"], "expected at most 1048576"),
    (["sweep", "--config", "s.yaml", "--workers", "1e9"], "argument --workers: expected at most 1048576"),
    (["optimize", "--config", "s.yaml", "--trials", "inf"], "expected an integer >= 1, got 'inf'"),
])
def test_counts_past_any_run_are_refused(tmp_path, capsys, argv, fragment):
    one_line_error(capsys, main([*argv, "--out", str(tmp_path / "o")]), fragment)
    assert not (tmp_path / "o").exists()


def test_a_study_file_asking_for_endless_trials_is_refused(tmp_path, capsys):
    pytest.importorskip("optuna")
    study = _study(tmp_path)
    study.write_text(study.read_text().replace("trials: 1", "trials: 100000000000000000000"))
    one_line_error(capsys, main(["optimize", "--config", str(study), "--out", str(tmp_path / "o")]),
                   f"{study}: trials: expected at most 1048576")
    assert not (tmp_path / "o").exists()


def test_a_written_count_in_scientific_notation_is_an_integer():
    from ahasd_sim.cli_common import positive_int
    assert positive_int("1e3") == 1000 and positive_int("7") == 7


def _sweep_file(tmp_path, axes="npu.freq_ghz: [1.0, 1.2]", extra_set=""):
    p = tmp_path / "sw.yaml"
    p.write_text(f"name: s\nbase: {{config: {PAPER}, set: {{run.trace: {SMOKE}, run.generated_tokens: 16, "
                 f"run.windows: 1, run.timeline: false{extra_set}}}}}\naxes:\n  {axes}\n")
    return p


def test_a_dask_scheduler_without_workers_is_refused_in_seconds(tmp_path, capsys, monkeypatch):
    """Its tasks waited for ever; now the first worker is waited for a bounded time."""
    distributed = pytest.importorskip("distributed")
    import ahasd_sim.sweep.runner as runner
    monkeypatch.setattr(runner, "DASK_WORKER_WAIT_S", 1.0)
    cluster = distributed.LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1",
                                       dashboard_address=None)
    try:
        out = tmp_path / "o"
        t0 = time.perf_counter()
        rc = main(["sweep", "--config", str(_sweep_file(tmp_path)), "--executor", "dask", "--scheduler",
                   cluster.scheduler_address, "--no-progress", "--out", str(out)])
        one_line_error(capsys, rc, f"--scheduler {cluster.scheduler_address}: no Dask worker joined within 1 s",
                       "dask worker")
        assert time.perf_counter() - t0 < 15 and not out.exists()
    finally:
        cluster.close()


def test_a_split_sweep_forks_no_more_workers_than_units(tmp_path, monkeypatch):
    """2 one-window points with a pinned placement (no tuning runs) keep 2 processes busy at
    most; --workers 64 forked 64."""
    import ahasd_sim.sweep.runner as runner
    seen = {}
    monkeypatch.setattr(runner, "_run_tasks", lambda tasks, on_done, **kw: seen.update(kw))
    sweep = _sweep_file(tmp_path, extra_set=", pim.partition_policy: striped")
    assert main(["sweep", "--config", str(sweep), "--workers", "64", "--no-progress", "--out", str(tmp_path / "o")]) == 1
    assert seen["workers"] == 2
    assert runner._capped_workers(64, None, 4) == 64      # nothing to plan from: unchanged


# ---------------------------------------------------------------- 2. no tracebacks in scripts
def _measured_with(tmp_path, old, new):
    text = MEASURED.read_text()
    assert old in text
    p = tmp_path / "measured.csv"
    p.write_text(text.replace(old, new, 1))
    return p


SCRIPT_CASES = [
    ("plot_sweep", lambda d: ["lines", "--results", str(_results_with_text(d)), "--x", "seed", "--metric", "run.mode",
                              "--out", str(d / "f")], "--metric run.mode: column 'run.mode' holds text (e.g. 'ahasd')"),
    ("plot_sweep", lambda d: ["heatmap", "--results", str(_results_with_text(d)), "--x", "seed", "--y", "variant",
                              "--metric", "variant", "--out", str(d / "f")], "--metric variant: column 'variant' holds text"),
    ("check_identical", lambda d: ["--baseline", "no_such_rev"], "--baseline no_such_rev: not a git revision"),
    ("check_identical", lambda d: ["--against", str(d / "none")], "holds no saved case"),
    ("plot_moe_sweep", lambda d: ["--cache", str(d / "none"), "--out", str(d / "m")], "--cache "),
    ("plot_moe_sweep", lambda d: ["--cache", str(_results_with_text(d)), "--out", str(d / "m")],
     "the results table has no column"),
]


def _results_with_text(d: Path) -> Path:
    p = results_csv(d)
    lines = p.read_text().splitlines()
    lines = [lines[0] + ",run.mode"] + [ln + ",ahasd" for ln in lines[1:]]
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.parametrize("script, build, fragment", SCRIPT_CASES,
                         ids=["plot-sweep-lines", "plot-sweep-heatmap", "check-identical-rev",
                              "check-identical-against", "plot-moe-missing", "plot-moe-not-moe"])
def test_scripts_answer_bad_input_in_one_line(tmp_path, capsys, monkeypatch, script, build, fragment):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    argv = build(tmp_path)
    before = snapshot(tmp_path)
    one_line_error(capsys, _script(script)(argv), fragment)
    _nothing_new(tmp_path, before)


@pytest.mark.parametrize("old, new, fragment", [
    (",prefill,1024,684.57,", ",prefill,0.5,684.57,", "line 3: context_or_prompt must be a whole number of tokens"),
    (",decode,1024,12.85,", ",decode,1e12,12.85,", "line 2: context_or_prompt must be <= 1.67772e+07"),
    (",decode,1024,12.85,", ",decode,1024,1e300,", "line 2: tok_s must be <= 100000"),
], ids=["half-a-token", "1e12-context", "1e300-tok-s"])
def test_validate_mobile_rows_out_of_range(tmp_path, capsys, old, new, fragment):
    """context_or_prompt 0.5 on a prefill row became 0 and divided by it (ZeroDivisionError);
    1e12 and 1e300 entered the error statistics."""
    measured = _measured_with(tmp_path, old, new)
    out = tmp_path / "o"
    one_line_error(capsys, main(["validate", "--mobile", "--measured", str(measured), "--out", str(out)]),
                   f"{measured}: {fragment}")
    assert not out.exists()


def _h200_with(tmp_path, kind: str, col: str, value: str) -> tuple[Path, int]:
    """The shipped H200 measurements with ``col`` of the first ``kind`` row set to ``value``."""
    import csv
    import io
    rows = list(csv.DictReader(io.StringIO((ROOT / "validation" / "h200_measured.csv").read_text())))
    i = next(i for i, r in enumerate(rows) if r["kind"] == kind)
    rows[i][col] = value
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    p = tmp_path / "measured.csv"
    p.write_text(out.getvalue())
    return p, i + 2


@pytest.mark.parametrize("kind, col, value, fragment", [
    ("ceiling_gemm", "latency_s_median", "nan", "latency_s_median must be a positive number, got nan"),
    ("ceiling_membw", "latency_s_median", "-1", "latency_s_median must be a positive number, got -1.0"),
    ("ceiling_membw", "bytes", "inf", "bytes must be a positive number, got inf"),
    ("decode", "latency_s_median", "1e300", "latency_s_median must be <= 3600, got 1e+300"),
    ("verify", "kv_len", "1e12", "kv_len must be <= 1.67772e+07"),
])
def test_validate_gpu_measurements_are_finite_and_in_range(tmp_path, capsys, kind, col, value, fragment):
    """A NaN in a ceiling row printed "bf16 GEMM TFLOP/s nan" and exited 0; a 1e300 s step entered
    the error statistics."""
    measured, line = _h200_with(tmp_path, kind, col, value)
    out = tmp_path / "o"
    one_line_error(capsys, main(["validate", "--measured", str(measured), "--out", str(out)]),
                   f"{measured}: line {line}: {fragment}")
    assert not out.exists()


# ---------------------------------------------------------------- 3. silent acceptance
def _trace_with_header(tmp_path, **changes) -> Path:
    d = dict(np.load(SMOKE, allow_pickle=False))
    h = json.loads(str(d["header_json"]))
    h.update(changes)
    d["header_json"] = np.array(json.dumps(h))
    p = tmp_path / "t.npz"
    np.savez(p, **d)
    return p


def _rtt(tmp_path, body: str) -> Path:
    p = tmp_path / "rtt.txt"
    p.write_text(body)
    return p


# (config, --set items built from tmp_path, fragment of the one-line error); each is refused by
# the dry run and by the run with the same line (section 5)
BAD_DATA = [
    ("empty-prompts", MAIN, lambda d: [f"run.trace={_trace_with_header(d, prompts=[])}"],
     "{d}/t.npz: header 'prompts' is empty: expected one object per recorded prompt (from run.trace in --set)"),
    ("rtt-nan", HYCO, lambda d: [f"network.rtt_trace={_rtt(d, '0 50' + chr(10) + '1 nan' + chr(10) + '2 60' + chr(10))}"],
     "--set: network.rtt_trace: rtt trace '{d}/rtt.txt' line 2: RTT 'nan' ms is not in 0..1e+06"),
    ("rtt-inf-time", HYCO, lambda d: [f"network.rtt_trace={_rtt(d, '0 50' + chr(10) + 'inf 60' + chr(10))}"],
     "line 2: time 'inf' s is not in 0.."),
    ("rtt-negative", HYCO, lambda d: [f"network.rtt_trace={_rtt(d, '0 50' + chr(10) + '1 -5' + chr(10))}"],
     "line 2: RTT '-5' ms is not in 0.."),
    ("rtt-dev-zero", HYCO, lambda d: ["network.rtt_trace=/dev/zero"],
     "--set: network.rtt_trace: rtt trace '/dev/zero': is not a regular file"),
    ("uplink-dev-zero", HYCO, lambda d: ["network.uplink_trace=/dev/zero"],
     "--set: network.uplink_trace: mahimahi trace '/dev/zero': is not a regular file"),
    ("run-trace-dev-zero", MAIN, lambda d: ["run.trace=/dev/zero"],
     "--set: run.trace: trace file '/dev/zero' is not a regular file"),
    ("moe-half-expert", MOE, lambda d: ["moe.cache_capacity_unit=experts", "moe.cache_capacity=0.5"],
     "--set: moe.cache_capacity: expected a whole number of experts"),
    ("moe-1000-gib", MOE, lambda d: ["moe.cache_capacity_unit=gib", "moe.cache_capacity=1000"],
     "--set: moe.cache_capacity: 1000 GiB is more than the model's 1792 experts"),
    ("moe-too-many-experts", MOE, lambda d: ["moe.cache_capacity_unit=experts", "moe.cache_capacity=5000"],
     "5000 experts is more than the model's 1792 experts (28 layers x 64); at most 1792"),
    ("moe-below-one-expert", MOE, lambda d: ["moe.cache_capacity_unit=gib", "moe.cache_capacity=0.0001"],
     "0.0001 GiB holds no whole expert"),
    ("ar-gpu-without-gpu", MAIN, lambda d: ["run.mode=autoregressive", "baseline.device=gpu"],
     "--set: baseline.device: is gpu, but this platform has no GPU"),
    ("ar-pim-without-pim", NO_PIM, lambda d: ["run.mode=autoregressive", "baseline.device=pim"],
     "--set: baseline.device: is pim, but this platform has no PIM"),
    ("rate-1", MAIN, lambda d: ["memory.data_rate_mts=1"], "--set: memory.data_rate_mts: expected >= 400"),
]


@pytest.mark.parametrize("name, cfg, sets, fragment", BAD_DATA, ids=[b[0] for b in BAD_DATA])
def test_bad_data_is_refused_alike_by_the_dry_run_and_the_run(tmp_path, capsys, name, cfg, sets, fragment):
    items = sets(tmp_path)
    argv = ["--config", str(cfg), *[x for s in items for x in ("--set", s)], "--jobs", "1"]
    t0 = time.perf_counter()
    dry = one_line_error(capsys, main([*argv, "--dry-run", "--out", str(tmp_path / "d")]),
                         fragment.format(d=tmp_path))
    run = one_line_error(capsys, main([*argv, "--out", str(tmp_path / "r")]))
    assert run == dry
    assert time.perf_counter() - t0 < 30
    assert not (tmp_path / "d").exists() and not (tmp_path / "r").exists()


WARNINGS = [
    (MAIN, ["network.uplink_trace=up.txt"], "--set: network.uplink_trace: is set, but network.enabled is false"),
    (MAIN, ["network.rtt_trace=rtt.txt"], "--set: network.rtt_trace: is set, but network.enabled is false"),
    (MAIN, ["cloud.utilization=0.5", "cloud.max_batch=8"],
     "--set: cloud.max_batch, cloud.utilization: are set, but network.enabled is false"),
    (HYCO, ["run.mode=device_only"], None),   # device_only has no cloud but a network: hyco's cloud keys
    (NO_PIM, ["pim.dram_power_limit_w=3"], "--set: pim.dram_power_limit_w: is set, but pim.enabled is false"),
    (MAIN, ["moe.cache_capacity=0.5"], "--set: moe.cache_capacity: is set, but mode 'ahasd' is not moe_offload"),
    (HYCO, ["cloud.utilization=0.999999"], "--set: cloud.utilization: 0.999999 makes every request wait 1e+06 "
                                           "service times (M/M/1)"),
    (MAIN, ["run.kv_len_quantum_tokens=1000000"], "--set: run.kv_len_quantum_tokens: 1000000 rounds every KV "
                                                  "length up by as many as 999999 tokens"),
    (MAIN, ["pim.preset=hbm_pim"], "--set: pim.preset: hbm_pim is a HBM2 PIM device, but memory.standard is LPDDR5"),
]


@pytest.mark.parametrize("cfg, sets, fragment", WARNINGS, ids=[s[0] for _, s, _ in WARNINGS])
def test_settings_the_run_ignores_are_named_in_a_warning(tmp_path, capsys, cfg, sets, fragment):
    rc = main(["--config", str(cfg), *[x for s in sets for x in ("--set", s)], "--dry-run",
               "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 0, err
    warnings = [ln for ln in err.splitlines() if ln.startswith("warning:")]
    if fragment is None:
        assert any("uses no cloud server" in w for w in warnings), err
        return
    assert len(warnings) == 1 and fragment in warnings[0], err
    assert "Traceback" not in err


@pytest.mark.parametrize("cfg", [MAIN, HYCO, MOE, NO_PIM, PAPER])
def test_the_shipped_configs_warn_about_nothing_they_use(tmp_path, capsys, cfg):
    """The warnings are about settings a run ignores: the shipped configs set none."""
    from ahasd_sim.checks import unused_setting_warnings
    from ahasd_sim.config import load_config
    assert unused_setting_warnings(load_config(cfg)) == []


@pytest.mark.parametrize("argv", [
    ["run", "--config", str(MAIN)], ["compare", "--config", str(MAIN)], ["sweep", "--config", "s.yaml"],
    ["optimize", "--config", "s.yaml"], ["sensitivity", "--config", "s.yaml"], ["validate"],
    ["traces", "stats", str(SMOKE)],
])
def test_an_empty_out_is_refused(tmp_path, capsys, monkeypatch, argv):
    """--out '' used to mean the default folder, without a word of where the results went."""
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    one_line_error(capsys, main([*argv, "--out", ""]), "argument --out: expected a folder or file name, got an "
                                                       "empty string")
    _nothing_new(tmp_path, before)


def test_a_dangling_out_link_says_where_the_results_go(tmp_path, capsys):
    link = tmp_path / "link"
    target = tmp_path / "not" / "yet"
    link.symlink_to(target)
    assert main(["--config", str(MAIN), "--dry-run", "--out", str(link)]) == 0
    err = capsys.readouterr().err
    assert f"warning: --out {link}: is a link to {target}, which does not exist yet: the results are written " \
           "there" in err, err
    assert not target.exists()


@pytest.mark.parametrize("old, new, fragment", [
    ("data_rate_mts: 9600", "data_rate_mts: .nan", "memory.data_rate_mts: expected a positive number, got nan"),
    ("data_rate_mts: 9600", "data_rate_mts: .inf", "memory.data_rate_mts: expected a positive number, got inf"),
    ("data_rate_mts: 9600", "data_rate_mts: 1.0e15", "memory.data_rate_mts: expected <= 10667 MT/s"),
    ("channels: 4", "channels: 2.5", "memory.channels: expected an integer, got 2.5"),
    ("standard: LPDDR5X", "standard: DDR4", "memory.standard: expected one of LPDDR5, LPDDR5X, got 'DDR4'"),
    ("channel_width_bits: 16", "channel_width_bits: 3", "memory.channel_width_bits: expected one of 8, 16, 32, got 3"),
    ("aliases: [", "aliases: SM8650\nx_: [", "aliases: expected a list of names"),
    ("int8_tops:", "int8_tops: .nan\nx_int8_tops:", "npu.int8_tops: expected a positive number <= 100000 or null"),
])
def test_soc_presets_are_checked_like_a_config(tmp_path, old, new, fragment):
    from ahasd_sim.config.errors import InputError
    from ahasd_sim.validate_mobile import load_soc
    text = SOC.read_text()
    assert old in text, old
    bad = text.replace(old, new, 1)
    if "x_" in new:   # the displaced rest of the line goes under a key of its own: drop it
        bad = "\n".join(ln for ln in bad.splitlines() if not ln.lstrip().startswith(("x_", "x_int8")))
    p = tmp_path / "soc.yaml"
    p.write_text(bad)
    with pytest.raises(InputError) as e:
        load_soc(p)
    assert str(e.value).startswith(f"{p}: ") and fragment in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("seeds, fragment", [("", "got ''"), ("1,,2", "got '1,,2'"), ("1,1", "got '1,1'")])
def test_seed_lists_with_holes_are_refused(tmp_path, capsys, seeds, fragment):
    pytest.importorskip("optuna")
    out = tmp_path / "st"
    rc = main(["optimize", "--config", str(_study(tmp_path)), "--seeds", seeds, "--workers", "1", "--no-progress",
               "--out", str(out)])
    one_line_error(capsys, rc, "--seeds: expected distinct integers >= 0 separated by commas", fragment)
    assert not out.exists()


@pytest.mark.parametrize("flags", [["--mobile", "--moe"], ["--mobile", "--peers"], ["--moe", "--peers"]])
def test_validate_takes_one_validation_at_a_time(tmp_path, capsys, flags):
    one_line_error(capsys, main(["validate", *flags, "--out", str(tmp_path / "o")]),
                   f"validate: {flags[0]} and {flags[1]} are separate validations")
    assert not (tmp_path / "o").exists()


def test_traces_stats_of_a_chain_trace_refuses_chain(tmp_path, capsys):
    out = tmp_path / "o"
    one_line_error(capsys, main(["traces", "stats", str(SMOKE), "--chain", str(SMOKE), "--out", str(out)]),
                   "--chain compares a draft-tree trace with a chain trace")
    assert not out.exists()


@pytest.mark.parametrize("flag", ["--moe", "--peers"])
def test_validations_with_their_own_measurements_refuse_measured(tmp_path, capsys, flag):
    """--measured was dropped without a word by the validations that read committed files."""
    one_line_error(capsys, main(["validate", flag, "--measured", str(MEASURED), "--out", str(tmp_path / "o")]),
                   f"validate {flag}: --measured applies to validate and validate --mobile")
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- 4. blame and exit codes
def test_a_sweep_axis_that_names_a_section_is_the_sweep_files_error(tmp_path, capsys):
    """It exited 1 with every point failed and nothing on stderr."""
    sweep = _sweep_file(tmp_path, axes="npu: [1, 2]")
    out = tmp_path / "o"
    one_line_error(capsys, main(["sweep", "--config", str(sweep), "--workers", "1", "--no-progress", "--out", str(out)]),
                   f"{sweep}: axes.npu: 'npu' is a section, not a value: name one of its keys, e.g. npu.")
    assert not out.exists()
    sweep.write_text(sweep.read_text().replace("run.timeline: false", "run.timeline: false, npu: 3"))
    one_line_error(capsys, main(["sweep", "--config", str(sweep), "--dry-run", "--out", str(out)]),
                   "base.set.npu: 'npu' is a section")


@pytest.mark.parametrize("command", ["optimize", "sensitivity"])
def test_a_full_disk_under_a_study_names_the_folder(tmp_path, capsys, monkeypatch, command):
    pytest.importorskip("optuna")
    import ahasd_sim.dse.optimize as opt
    import ahasd_sim.dse.sensitivity as sens

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(opt if command == "optimize" else sens, f"run_{command}", full)
    out = tmp_path / "st"
    rc = main([command, "--config", str(_study(tmp_path)), "--workers", "1", "--no-progress", "--out", str(out)])
    one_line_error(capsys, rc, f"error: --out {out}: {command} cannot write the study: No space left on device")


def test_an_out_link_to_a_file_names_the_link(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    link = tmp_path / "link"
    link.symlink_to(f)
    for dry in ([], ["--dry-run"]):
        one_line_error(capsys, main(["--config", str(MAIN), *dry, "--out", str(link)]),
                       f"--out {link}: is a link to the file {f}, not to a folder")
    assert f.read_text() == "x"


@pytest.mark.parametrize("command", ["run", "compare", "sweep", "optimize", "validate", "area"])
def test_every_subcommand_answers_version(capsys, command):
    from ahasd_sim import __version__
    assert main([command, "--version"]) == 0
    assert capsys.readouterr().out.strip() == f"ahasd_sim {__version__}"


def test_docs_script_ends_like_the_signal_it_got(monkeypatch, capsys):
    """An inner command stopped by SIGTERM (143) or Ctrl-C (130) ended docs.py with 2 ("exited
    143"), as if the input were bad."""
    import importlib.util

    import ahasd_sim.__main__ as cli
    from ahasd_sim.cli_common import EXIT_INTERRUPTED, EXIT_TERMINATED, run_guarded
    spec = importlib.util.spec_from_file_location("_docs_script", ROOT / "scripts" / "docs.py")
    docs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(docs)
    for code in (EXIT_TERMINATED, EXIT_INTERRUPTED):
        monkeypatch.setattr(cli, "main", lambda argv, code=code: code)
        assert run_guarded(lambda: docs._cli(["list"])) == code
    monkeypatch.setattr(cli, "main", lambda argv: 2)
    assert run_guarded(lambda: docs._cli(["list"])) == 2
    capsys.readouterr()


def test_optimize_seeds_holds_the_whole_folder_while_it_runs(tmp_path, monkeypatch):
    """A plain optimize into the folder of a running `optimize --seeds` was not refused: the
    seeds held only their seed-<S> folders. Causality: while a seed runs, <out>/study.lock holds
    this process; a second process's plain optimize is refused by it."""
    pytest.importorskip("optuna")
    import ahasd_sim.dse.optimize as opt
    from ahasd_sim.config.errors import InputError
    from ahasd_sim.dse.study import load_study
    out = tmp_path / "st"
    seen = []

    def one_seed(study, seed_out, **kw):
        seen.append((out / "study.lock").read_text())
        raise InputError("stop here")

    monkeypatch.setattr(opt, "run_optimize", one_seed)
    with pytest.raises(InputError, match="stop here"):
        opt.run_seeds(load_study(_study(tmp_path), check_metrics=False), out, [0, 1])
    assert seen == [str(os.getpid())] and not (out / "study.lock").exists()


def test_a_plain_optimize_into_a_folder_another_process_holds_is_refused(tmp_path, capsys):
    pytest.importorskip("optuna")
    out = tmp_path / "st"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (out / "study.lock").write_text(str(holder.pid))
        rc = main(["optimize", "--config", str(_study(tmp_path)), "--workers", "1", "--no-progress", "--out", str(out)])
        one_line_error(capsys, rc, f"study in use by process {holder.pid}")
    finally:
        holder.kill()
        holder.wait()


def test_local_dask_workers_ignore_ctrl_c_and_keep_quiet():
    """Ctrl-C reaches the process group: each local worker printed a KeyboardInterrupt traceback
    (67-71 stderr lines for a sweep). After quiet_local_workers the workers ignore SIGINT and
    their distributed/tornado loggers print nothing below CRITICAL; this process keeps its
    handler (it stops the sweep and closes the cluster)."""
    pytest.importorskip("distributed")
    import signal

    from distributed import Client

    from ahasd_sim.sweep.executors import local_dask_cluster
    from ahasd_sim.sweep.runner import quiet_local_workers

    def state():
        import logging
        import signal as s
        return s.getsignal(s.SIGINT) == s.SIG_IGN, logging.getLogger("distributed").level

    cluster = local_dask_cluster(1)
    client = Client(cluster)
    try:
        before = signal.getsignal(signal.SIGINT)
        assert list(client.run(state).values())[0][0] is False    # causality: not so by default
        quiet_local_workers(client)
        import logging
        assert list(client.run(state).values()) == [[True, logging.CRITICAL]] or \
            list(client.run(state).values()) == [(True, logging.CRITICAL)]
        assert signal.getsignal(signal.SIGINT) is before
    finally:
        client.close()
        cluster.close()


# ---------------------------------------------------------------- 5. dry run == run: held folders
def _hold(lock: Path):
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, b"4242")
    return fd


def test_a_dry_run_into_a_held_folder_is_refused_like_the_run(tmp_path, capsys):
    out = tmp_path / "o"
    fd = _hold(tmp_path / ".o.lock")
    try:
        before = snapshot(tmp_path)
        argv = ["--config", str(MAIN), "--jobs", "1", *_quick(), "--out", str(out)]
        dry = one_line_error(capsys, main([*argv, "--dry-run"]), f"--out {out}: in use by another ahasd_sim command "
                                                                 "(process 4242)")
        run = one_line_error(capsys, main(argv))
        assert dry == run
        cmp_dry = one_line_error(capsys, main(["compare", "--config", str(MAIN), "--modes", "ahasd", "--dry-run",
                                               "--out", str(out)]))
        assert "in use by another ahasd_sim command" in cmp_dry
        _nothing_new(tmp_path, before)
    finally:
        os.close(fd)
    # released: the dry run says the folder is usable
    assert main(["--config", str(MAIN), "--dry-run", "--out", str(out)]) == 0
    capsys.readouterr()


def test_a_moe_compare_dry_run_simulates_nothing(tmp_path, capsys, monkeypatch):
    """`compare --dry-run` of a moe_offload config ran the whole comparison (about 50 simulations);
    now it checks every planned run and simulates none, and refuses what the run refuses."""
    import ahasd_sim.compare_moe as cm
    import ahasd_sim.simulation as sim
    monkeypatch.setattr(cm, "candidates", lambda: {"autoregressive": [("no_draft", ["run.policy=no_draft"])]})
    monkeypatch.setattr(cm, "REPORTED", cm.REPORTED[:1])

    def no_simulation(*a, **k):
        raise AssertionError("a dry run simulated")

    monkeypatch.setattr(sim, "run_simulation", no_simulation)
    out = tmp_path / "o"
    assert main(["compare", "--config", str(MOE), "--dry-run", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "2 runs checked" in text and f"reported: {cm.REPORTED[0][0]}: OK" in text and not out.exists()
    one_line_error(capsys, main(["compare", "--config", str(MOE), "--dry-run", "--set", "moe.cache_capacity=1.5",
                                 "--out", str(out)]), "--set: moe.cache_capacity: a fraction must be <= 1")
    assert not out.exists()


def test_a_sweep_dry_run_into_a_held_sweep_folder_is_refused(tmp_path, capsys):
    out = tmp_path / "o"
    out.mkdir()
    fd = _hold(out / ".lock")
    try:
        one_line_error(capsys, main(["sweep", "--config", str(_sweep_file(tmp_path)), "--dry-run", "--no-progress",
                                     "--out", str(out)]), f"--out {out}: in use by another ahasd_sim command")
    finally:
        os.close(fd)


# ---------------------------------------------------------------- 6. leftovers
def test_temporary_files_of_a_killed_sweep_are_cleaned_by_the_next_one(tmp_path, capsys):
    """SIGKILL while points.csv or results.csv was being written left .points.csv.*.tmp in the
    folder, and the resuming run kept it."""
    sweep = _sweep_file(tmp_path, axes="npu.freq_ghz: [1.0]")
    out = tmp_path / "o"
    assert main(["sweep", "--config", str(sweep), "--workers", "1", "--no-progress", "--out", str(out)]) == 0
    stale = [out / ".points.csv.k1ll3d.tmp", out / ".results.csv.abc.tmp"]
    for f in stale:
        f.write_text("half a table")
    keep = out / ".notes.tmp.keep"
    keep.write_text("not ours")
    assert main(["sweep", "--config", str(sweep), "--workers", "1", "--no-progress", "--out", str(out)]) == 0
    capsys.readouterr()
    assert not any(f.exists() for f in stale) and keep.exists()
    assert (out / "results.csv").is_file()
