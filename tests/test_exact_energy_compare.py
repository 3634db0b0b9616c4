"""Energy on a real run, compare ratios, config strictness, sweep resume (issue 19).

Expectations are computed independently of the code under test: the energy test
records every task the modes actually ran (the cost model's TaskCost) and rebuilds
the platform to read static powers, instead of summing the collector's own totals.
"""
from __future__ import annotations

import json
import math
import typing
from pathlib import Path

import pandas as pd
import pytest

from ahasd_sim.config import load_config
from ahasd_sim.config.errors import ConfigError, InputError
from ahasd_sim.hw.platform import Platform
from ahasd_sim.metrics.collector import Collector
from ahasd_sim.modes import base as mode_base
from ahasd_sim.modes.base import TaskCost
from ahasd_sim.simulation import run_simulation

from conftest import PAPER_PLATFORM, ROOT, SMOKE_TRACE


def _recording_run(monkeypatch, mode, n=32, extra=()):
    """Run ``mode`` on the smoke trace, recording each finished task's cost and the mode object."""
    tasks: list = []
    modes: list = []
    orig_task = Collector.task     # every finished task of a mode is recorded here, once

    def task(self, cost, label, start_s):
        orig_task(self, cost, label, start_s)
        tasks.append((label, cost))

    monkeypatch.setattr(Collector, "task", task)
    orig_task_over = Collector.task_over   # a layer-pipelined pre-verification, drawn per layer

    def task_over(self, cost, label, start_s, intervals):
        orig_task_over(self, cost, label, start_s, intervals)
        tasks.append((label, cost))

    monkeypatch.setattr(Collector, "task_over", task_over)
    orig_task_took = Collector.task_took   # a task slowed by shared-rank contention (issue 24)

    def task_took(self, cost, label, start_s, took_s):
        orig_task_took(self, cost, label, start_s, took_s)
        if took_s != cost.duration_s:      # else task() above recorded it
            # the work (energy, bytes) is the task's own; each device busy for the time it took
            r = took_s / cost.duration_s
            tasks.append((label, TaskCost(took_s, cost.energy_j, {d: b * r for d, b in cost.busy_s.items()},
                                          cost.offchip_bytes)))

    monkeypatch.setattr(Collector, "task_took", task_took)
    cfg = load_config(PAPER_PLATFORM, [f"run.mode={mode}", "run.policy=fixed", f"run.trace={SMOKE_TRACE}",
                                       f"run.generated_tokens={n}", "run.timeline=false",
                                       "pim.partition_policy=striped", *extra])   # no tuning runs in the capture
    # capture the mode instance at finalize without changing what finalize does
    cls = mode_base.get_mode(mode)
    real_final = cls.finalize
    monkeypatch.setattr(cls, "finalize", lambda self: (modes.append(self), real_final(self))[1])
    res = run_simulation(cfg)
    return cfg, res, tasks, modes        # one mode instance per trace window


@pytest.mark.parametrize("mode", ["operator_sync", "task_sync", "async", "ahasd"])
def test_energy_is_static_power_times_makespan_plus_task_energies(monkeypatch, mode):
    cfg, res, tasks, ms = _recording_run(monkeypatch, mode)
    s = res.summary
    makespan = s["makespan_s"]
    powers = Platform.build(cfg).devices()
    expected_dyn: dict[str, float] = {}
    for _label, cost in tasks:
        for dev, e in cost.energy_j.items():
            expected_dyn[dev] = expected_dyn.get(dev, 0.0) + e
    # control-unit energy (not a TaskCost): queue operations (async, ahasd) and EDC/TVC decisions (ahasd)
    ctrl = 0.0
    for m in ms:
        if mode in ("async", "ahasd"):
            ctrl += m.queue_ops * cfg.ahasd.queue_op_energy_pj * 1e-12
        if mode == "ahasd":
            ctrl += m.edc.stats.predictions * cfg.ahasd.edc_config.decision_energy_nj * 1e-9
            ctrl += m.tvc.stats.decisions * cfg.ahasd.tvc_config.decision_energy_nj * 1e-9
    if mode == "ahasd":    # the scenario exercises both controls
        assert sum(m.edc.stats.predictions for m in ms) > 0 and sum(m.tvc.stats.decisions for m in ms) > 0
    if ctrl:
        expected_dyn["ctrl"] = ctrl
    br = s["energy_breakdown_j"]
    assert set(br) == set(powers) | set(expected_dyn)
    for dev in br:
        assert br[dev]["static"] == pytest.approx(powers.get(dev, 0.0) * makespan, rel=1e-12, abs=0), dev
        assert br[dev]["dynamic"] == pytest.approx(expected_dyn.get(dev, 0.0), rel=1e-9, abs=0), dev
    total = sum(powers.values()) * makespan + sum(expected_dyn.values())
    assert s["energy_j"] == pytest.approx(total, rel=1e-9, abs=0)
    # decode-only energy per token leaves out the prompt prefills: their tasks' energy and all
    # static power while they ran (every device waits for a prefill)
    prefill_tasks = [c for label, c in tasks if label.startswith("prefill")]
    prefill_s = sum(m.prefill_s for m in ms)
    assert 0 < prefill_s <= sum(c.duration_s for c in prefill_tasks) * (1 + 1e-12)   # they may overlap
    prefill_j = sum(e for c in prefill_tasks for e in c.energy_j.values()) + sum(powers.values()) * prefill_s
    assert s["prefill_energy_j"] == pytest.approx(prefill_j, rel=1e-9, abs=0)
    assert s["energy_per_token_j"] == pytest.approx((total - prefill_j) / s["generated_tokens"], rel=1e-9, abs=0)
    # the energy table: per device its dynamic and static energy, in device order
    assert res.energy.to_dict("records") == [
        {"device": dev, "kind": kind, "energy_j": pytest.approx(v, rel=1e-9, abs=0)}
        for dev in sorted(br) for kind, v in (("dynamic", expected_dyn.get(dev, 0.0)),
                                              ("static", powers.get(dev, 0.0) * makespan))]
    # rates: decode-only figures leave out the prefill time and energy, end-to-end ones keep them
    # (ratios of the totals over the windows)
    n = s["generated_tokens"]
    assert n == 32 * len(ms)
    assert s["decode_makespan_s"] == pytest.approx(makespan - prefill_s, rel=1e-12, abs=0)
    assert s["throughput_tok_s"] == pytest.approx(n / (makespan - prefill_s), rel=1e-12, abs=0)
    assert s["tokens_per_j"] == pytest.approx(n / (total - prefill_j), rel=1e-9, abs=0)
    # device busy time: what the recorded tasks say each device worked
    for dev in ("npu", "pim"):
        worked = sum(c.busy_s.get(dev, 0.0) for _label, c in tasks)
        assert s["device_busy_s"][dev] == pytest.approx(worked, rel=1e-9, abs=0), dev
    # every token counter of the collector is reported under its own name (summed over windows)
    import dataclasses
    from ahasd_sim.metrics.collector import TokenCounters
    for f in dataclasses.fields(TokenCounters):
        key = "generated_tokens" if f.name == "committed_tokens" else f.name
        assert s[key] == pytest.approx(sum(getattr(m.col.counters, f.name) for m in ms), rel=1e-12, abs=0), key
    assert s["wasted_draft_tokens"] == sum(m.col.counters.rejected_tokens + m.col.counters.killed_tokens for m in ms)
    acc = sum(m.col.counters.accepted_tokens for m in ms)
    verified = acc + s["rejected_tokens"] + s["killed_tokens"]
    assert s["acceptance_rate"] == pytest.approx(acc / verified, rel=1e-12, abs=0)
    assert s["mean_accepted_per_verify"] == pytest.approx(
        (acc - s["preverify_accepted_tokens"]) / s["verifications"], rel=1e-12, abs=0)
    assert s["offchip_bytes"] == pytest.approx(sum(s["offchip_bytes_by_task"].values()), rel=1e-12, abs=0)
    # static energy is a real share of the run (so charging power instead of power x time shows)
    assert sum(powers.values()) * makespan > 0.01 * total
    # NPU static power comes from its config key
    assert powers["npu"] == cfg.npu.static_power_w


def test_compare_ratios_are_mode_over_baseline(tmp_path, monkeypatch):
    import time
    from ahasd_sim.compare import run_compare
    # one trace window: the table's mean of per-window ratios is then the ratio of the summaries
    cfg = load_config(PAPER_PLATFORM, [f"run.trace={SMOKE_TRACE}", "run.generated_tokens=24", "run.windows=1",
                                       "run.policy=fixed", "run.timeline=false", "pim.partition_policy=striped"])
    monkeypatch.chdir(tmp_path)
    t0 = time.perf_counter()
    table, out = run_compare(cfg, "ahasd,operator_sync", "operator_sync", None)
    elapsed = time.perf_counter() - t0
    # default folder: results/<time stamp>_<mode>_<policy>_<config hash>_compare
    assert out.parent == Path("results") and out.name.endswith("_compare")
    assert f"_{cfg.run.mode}_fixed_" in out.name and out.is_dir()
    for m in ("ahasd", "operator_sync"):
        wall = json.loads((out / m / "meta.json").read_text())["wall_time_s"]
        assert 0.0 < wall <= elapsed
    runs = {m: json.loads((out / m / "summary.json").read_text()) for m in ("ahasd", "operator_sync")}
    # the baseline is listed first whatever the order given
    assert list(table["mode"]) == ["ahasd", "operator_sync"]
    t = table.set_index("mode")
    base = runs["operator_sync"]
    for m, s in runs.items():
        assert t.loc[m, "throughput_vs_operator_sync"] == pytest.approx(
            s["throughput_tok_s"] / base["throughput_tok_s"], rel=1e-12, abs=0)
        assert t.loc[m, "energy_efficiency_vs_operator_sync"] == pytest.approx(
            s["tokens_per_j"] / base["tokens_per_j"], rel=1e-9, abs=0)
    # two different schemes: the non-baseline ratio is not 1 (an inverted ratio would be its reciprocal)
    r = t.loc["ahasd", "throughput_vs_operator_sync"]
    assert abs(r - 1.0) > 0.01
    csv = pd.read_csv(out / "compare.csv")
    assert list(csv.columns) == list(table.columns) and list(csv["mode"]) == ["ahasd", "operator_sync"]
    assert csv.set_index("mode").loc["ahasd", "throughput_vs_operator_sync"] == pytest.approx(r, rel=1e-9, abs=0)
    # --out is used when given, and a second compare into the same folder replaces the first
    given = tmp_path / "given"
    _t, out1 = run_compare(cfg, "ahasd,operator_sync", "operator_sync", given)
    assert out1 == given and (given / "compare.csv").is_file()
    table2, out2 = run_compare(cfg, "operator_sync,ahasd", "operator_sync", given)
    assert out2 == given and list(table2["mode"]) == ["operator_sync", "ahasd"]
    assert table2.set_index("mode").loc["ahasd", "throughput_vs_operator_sync"] == pytest.approx(r, rel=1e-12, abs=0)


@pytest.mark.parametrize("text, baseline, expected", [
    ("ahasd, async", None, (["ahasd", "async"], "best")),                # the best decoder of the rows
    (None, None, (["autoregressive", "gpu_only", "npu_sync", "operator_sync", "task_sync", "async", "ahasd", "tree_sync",
                      "tree_pim"], "best")),
    ("ahasd, async", "best", (["ahasd", "async"], "best")),
    (["ahasd", "async"], "operator_sync", (["operator_sync", "ahasd", "async"], "operator_sync")),
    ("ahasd,async", "async", (["ahasd", "async"], "async")),
])
def test_parse_modes(text, baseline, expected):
    from ahasd_sim.compare import parse_modes
    assert parse_modes(text, baseline) == expected


@pytest.mark.parametrize("text, baseline, message", [
    ("", None, "--modes: expected comma-separated mode names, got ''; valid modes: {valid}"),
    ("ahasd,,async", None, "--modes: expected comma-separated mode names, got 'ahasd,,async'; valid modes: {valid}"),
    ("ahasd,warp", None, "--modes: unknown mode 'warp'; valid modes: {valid}"),
    ("ahsd", None, "--modes: unknown mode 'ahsd' (did you mean 'ahasd'?); valid modes: {valid}"),
    ("ahasd", "warp", "--modes: unknown mode 'warp'; valid modes: {valid}"),
    ("ahasd,async,ahasd", None, "--modes: mode 'ahasd' is listed more than once"),
    ("async,ahasd,async,ahasd", None, "--modes: mode 'ahasd' is listed more than once"),
])
def test_parse_modes_errors(text, baseline, message):
    from ahasd_sim.compare import parse_modes
    from ahasd_sim.config.errors import InputError
    from ahasd_sim.modes import MODES
    with pytest.raises(InputError) as ei:
        parse_modes(text, baseline)
    from ahasd_sim.compare import _mode_registry
    assert str(ei.value) == message.format(valid=", ".join(sorted(_mode_registry())))


# ------------------------------------------------------------------ config strictness
@pytest.mark.parametrize("override, fragment", [
    ("run.generated_tokens=true", "expected an integer"),      # YAML bool is an int subclass in Python
    ("ahasd.max_verify_tokens=false", "expected an integer"),
    ("run.max_sim_time_s=true", "expected a number"),
    ("run.max_sim_time_s=.nan", "expected a finite number"),
    ("run.max_sim_time_s=.inf", "expected a finite number"),
    ("run.max_sim_time_s=0", "expected > 0"),                  # gt bound: the bound itself is refused
    ("run.max_sim_time_s=0.0", "expected > 0"),
    ("policy.banditspec.delta=1", "expected < 1"),            # lt bound: the bound itself is refused
    ("run.generated_tokens=0", "expected >= 1"),
    ("ahasd.edc_config.pht_counter_init=4", "expected <= 3"),
    ("ahasd.edc=1", "expected true or false"),
    ("run.generated_tokens=1.5", "expected an integer"),
])
def test_config_rejects(tmp_path, override, fragment):
    p = tmp_path / "c.yaml"
    p.write_text("{}\n")
    key = override.split("=")[0]
    with pytest.raises(ConfigError) as ei:
        load_config(p, [override])
    assert key in str(ei.value) and fragment in str(ei.value)


@pytest.mark.parametrize("override, attr, value", [
    ("run.generated_tokens=1", ("run", "generated_tokens"), 1),                       # ge bound itself is fine
    ("ahasd.edc_config.pht_counter_init=3", ("ahasd", "edc_config", "pht_counter_init"), 3),  # le bound
    ("run.max_sim_time_s=1e-9", ("run", "max_sim_time_s"), 1e-9),                     # just above gt
    ("run.max_sim_time_s=5", ("run", "max_sim_time_s"), 5.0),                         # int for a float
    ("policy.banditspec.delta=0.999", ("policy", "banditspec", "delta"), 0.999),
])
def test_config_accepts_values_at_inclusive_bounds(tmp_path, override, attr, value):
    p = tmp_path / "c.yaml"
    p.write_text("{}\n")
    cfg = load_config(p, [override])
    v = cfg
    for a in attr:
        v = getattr(v, a)
    assert v == value and type(v) is type(value)


# ------------------------------------------------------------------ sweep resume
SPEC = f"""name: r
base:
  config: {PAPER_PLATFORM}
  set:
    run.trace: {SMOKE_TRACE}
    run.generated_tokens: 16
    run.timeline: false
modes: [async, ahasd]
"""


def test_sweep_resume_retries_failed_points_and_clears_stale_markers(tmp_path, monkeypatch):
    from ahasd_sim.sweep import run_sweep
    from ahasd_sim.sweep import worker as worker_mod
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    real = worker_mod._simulate_into

    def failing(cfg, out_dir, events=False):
        if cfg.run.mode == "ahasd":
            out_dir.mkdir(parents=True, exist_ok=True)
            rec = worker_mod.error_record(RuntimeError("transient failure"), 0.0)
            worker_mod.write_error(out_dir, rec)
            return "failed", {"error_type": rec["type"], "error": rec["message"], "wall_time_s": 0.0}
        return real(cfg, out_dir, events)

    monkeypatch.setattr(worker_mod, "_simulate_into", failing)
    first = run_sweep(spec, out, workers=1, progress=False)          # serial: in this process
    assert (first.n_ok, first.n_failed) == (1, 1)
    failed_dir = first.failed_dirs[0]
    assert (failed_dir / "error.json").is_file()
    # a killed worker's leftovers in the failed point's folder
    (failed_dir / ".running").touch()
    (failed_dir / ".staging-123").mkdir()
    (failed_dir / ".summary.json.tmp").write_text("x")
    monkeypatch.setattr(worker_mod, "_simulate_into", real)
    second = run_sweep(spec, out, workers=1, progress=False)
    # the failed point is run again (not taken as finished), the ok one is reused
    assert (second.n_ok, second.n_failed, second.n_computed, second.n_cached) == (2, 0, 1, 1)
    assert (failed_dir / "summary.json").is_file() and not (failed_dir / "error.json").exists()
    assert sorted(p.name for p in failed_dir.iterdir() if p.name.startswith(".")) == []
    df = pd.read_csv(out / "results.csv")
    assert sorted(df["status"]) == ["ok", "ok"]


# ================================================================== simulation.py (issue 19)
# Window placement, held-out parts, error attribution and the combination of windows, with
# expectations derived by hand from the smoke trace (3 prompts x 24 positions) and from
# constructed per-window summaries.
from ahasd_sim import simulation as sim  # noqa: E402
from ahasd_sim.traces.format import load_trace  # noqa: E402


def _smoke_cfg(*extra):
    return load_config(PAPER_PLATFORM, [f"run.trace={SMOKE_TRACE}", "run.timeline=false",
                                        "pim.partition_policy=striped", *extra])


# the smoke trace: 3 prompts starting at positions 0, 24, 48; 72 positions
@pytest.mark.parametrize("tokens, windows, starts", [
    (16, 0, [0, 1, 2]),      # [0, 16), [24, 40), [48, 64): the most disjoint windows that fit
    (16, 2, [0, 2]),         # spread: targets 0 and 72 - 16 = 56 -> the last prompt that fits (48)
    (16, 3, [0, 1, 2]),
    (24, 0, [0, 1, 2]),      # back to back
    (30, 0, [0]),            # [0, 30) overlaps prompt 1 (24); prompt 2 leaves 24 < 30
    (48, 0, [0]),
    (49, 0, [0]),
    (72, 0, [0]),
])
def test_window_start_prompts_on_the_smoke_trace(tokens, windows, starts):
    cfg = _smoke_cfg(f"run.generated_tokens={tokens}", f"run.windows={windows}")
    assert sim.window_start_prompts(cfg, load_trace(SMOKE_TRACE)) == starts


@pytest.mark.parametrize("tokens, windows, most", [(30, 3, 1), (48, 2, 1), (16, 4, 3), (25, 2, 1)])
def test_more_windows_than_fit_disjointly_is_an_error(tokens, windows, most):
    """Greedy counts by hand (prompts at 0, 24, 48; 72 positions): 30 and 25 tokens: [0, 30) or
    [0, 25) overlaps prompt 1 and prompt 2 leaves 24 positions -> 1; 48: prompt 1 leaves exactly
    48 but [24, 72) overlaps [0, 48) -> 1; 16: one per prompt -> 3."""
    trace = load_trace(SMOKE_TRACE)
    assert sim.max_disjoint_windows([0, 24, 48], 72, tokens) == most
    with pytest.raises(ConfigError) as ei:
        sim.window_start_prompts(_smoke_cfg(f"run.generated_tokens={tokens}", f"run.windows={windows}"), trace)
    assert str(ei.value) == (
        f"--set: run.windows: {windows} disjoint windows of {tokens} tokens (run.generated_tokens) "
        f"starting at prompt boundaries do not fit in the trace (72 positions, 3 prompts): at most {most}; lower "
        "run.windows or run.generated_tokens, or set run.windows: 0 (as many as fit)")


def test_window_start_prompts_single_and_too_long():
    trace = load_trace(SMOKE_TRACE)
    assert sim.window_start_prompts(_smoke_cfg("run.windows=1", "run.trace_start_prompt=2",
                                               "run.generated_tokens=8"), trace) == [2]
    with pytest.raises(ConfigError) as ei:
        sim.window_start_prompts(_smoke_cfg("run.generated_tokens=73", "run.windows=0"), trace)
    assert str(ei.value) == ("--set: run.generated_tokens: 73 tokens do not fit in the trace "
                             "(72 positions); lower it")
    # more windows than fit disjointly: refused (it used to be cut to 2 overlapping windows silently)
    with pytest.raises(ConfigError) as ei:
        sim.window_start_prompts(_smoke_cfg("run.generated_tokens=30", "run.windows=3"), trace)
    assert str(ei.value).startswith("--set: run.windows: 3 disjoint windows of 30 tokens") and "at most 1;" in str(ei.value)
    # the values come from a file: the file is named
    with pytest.raises(ConfigError) as ei:
        sim.window_start_prompts(load_config(PAPER_PLATFORM, []).replace(
            ["run.generated_tokens=73", "run.windows=0", f"run.trace={SMOKE_TRACE}"], source=None), trace)
    assert str(ei.value).startswith(f"{PAPER_PLATFORM}: run.generated_tokens: 73 tokens")


@pytest.mark.parametrize("tokens, first, heldout", [
    (16, 0, (24, 72)),       # whole prompts after the slice [0, 16)
    (16, 1, (48, 72)),       # slice [24, 40): prompt 2 follows
    (30, 1, (0, 24)),        # slice [24, 54) reaches into prompt 2: the prompts before it
    (16, 2, (0, 48)),        # slice [48, 64): nothing after, prompts 0 and 1 before
    (72, 0, None),           # the whole trace: nothing held out
])
def test_load_run_trace_slices_and_held_out_part(tokens, first, heldout):
    cfg = _smoke_cfg(f"run.generated_tokens={tokens}", "run.windows=1", f"run.trace_start_prompt={first}")
    full = load_trace(SMOKE_TRACE)
    trace, sl, held = sim.load_run_trace(cfg)
    start = int(full.prompt_bounds()[first, 0])
    assert len(trace) == 72 and len(sl) == tokens
    assert (sl["tgt_tok"] == full["tgt_tok"][start:start + tokens]).all()
    if heldout is None:
        assert held is None
    else:
        assert len(held) == heldout[1] - heldout[0]
        assert (held["tgt_tok"] == full["tgt_tok"][heldout[0]:heldout[1]]).all()
    # the window list: (start prompt, the same three parts)
    (p, parts), = sim.load_run_windows(cfg)
    assert p == first and len(parts[1]) == tokens


def test_run_errors_name_the_file_and_key(tmp_path):
    def err(*extra, exc=ConfigError):
        with pytest.raises(exc) as ei:
            run_simulation(_smoke_cfg("run.generated_tokens=8", "run.windows=1", *extra))
        return str(ei.value)

    f = "--set"   # every key below is set by an override: the errors name --set, not the file
    assert err("run.trace=nope.npz") == f"{f}: run.trace: trace file 'nope.npz' not found"
    assert err("run.mode=warp").startswith(f"{f}: run.mode: ") and "warp" in err("run.mode=warp")
    assert err("run.draft_model=gpt-9").startswith(f"{f}: run.draft_model: ")
    assert err("run.target_model=gpt-9").startswith(f"{f}: run.target_model: ")
    assert err("run.policy=oracle9") == (f"{f}: run.policy: unknown policy 'oracle9'; valid policies: adaedl, "
                                         "banditspec, eagle_dynamic, eagle_fixed, ecospec, expert_budget, fixed, hw_tree, "
                                         "no_draft, rtt_aware, specdecpp, specfit, svip")
    assert err("run.mode=async", "pim.enabled=false") == (
        f"{f}: run.mode: mode 'async' needs device(s) pim, which this platform does not enable "
        "(set pim.enabled: true)")
    assert err("run.mode=async", "pim.enabled=false", "npu.enabled=false", "gpu.enabled=true") == (
        f"{f}: run.mode: mode 'async' needs device(s) npu, pim, which this platform does not enable "
        "(set npu.enabled: true)")
    # a time limit that no task fits in: the first task (the NPU's prefill) runs throughout
    msg = err("run.mode=async", "run.max_sim_time_s=1e-12", exc=sim.SimulationTimeLimit)
    assert msg == (f"{f}: run.max_sim_time_s: mode 'async' committed only 0 of 8 tokens in 1e-12 s of simulated "
                   "time; bottleneck: npu (100% busy); the hardware is too slow for this run: "
                   "raise run.max_sim_time_s, or check the hardware values")


def _fake_window(i, tokens, makespan, prefill, energy, busy, acc, rej, killed, pv_acc, verifs, thr):
    """A window's summary; its own rates (``thr`` ...) deliberately disagree with its totals, so a
    combined rate taken from them (a mean of per-window ratios) fails the tests."""
    summary = {c: None for c in sim.WINDOW_COLUMNS[2:]}
    summary.update({
        "generated_tokens": tokens, "makespan_s": makespan, "prefill_s": prefill, "decode_makespan_s": makespan - prefill,
        "energy_j": energy, "decode_energy_j": 0.75 * energy, "throughput_tok_s": thr, "tokens_per_j": 2.0 * thr, "energy_per_token_j": 1.0 / thr,
        "throughput_e2e_tok_s": thr / 2, "tokens_per_j_e2e": thr / 4,
        "accepted_tokens": acc, "rejected_tokens": rej, "killed_tokens": killed, "preverify_accepted_tokens": pv_acc,
        "verifications": verifs, "acceptance_rate": 0.123, "mean_accepted_per_verify": 9.9,
        "device_busy_s": busy, "device_idle_s": {}, "device_utilization": {},
        "energy_breakdown_j": {"npu": {"dynamic": energy / 2, "static": energy / 2}},
        "mode_stats": {"some_rate": float(i + 1), "queue_ops": 10 * (i + 1), "label": f"w{i}", "flag": bool(i)},
        "trace_sha256": f"sha{i}", "policy": "fixed", "mode": "async", "seed": 5 + i, "platform": {"x": i},
        "policy_stats": {"k": i, "draft_length_histogram": {"2": 1 + i}}, "drafted_tokens": acc + rej + killed,
    })
    ev = pd.DataFrame({"t": [float(i)]})
    en = pd.DataFrame({"device": ["npu", "npu", "aau"], "kind": ["dynamic", "static", "dynamic"],
                       "energy_j": [energy / 2, energy / 2, 0.25]})
    return sim.RunResult(summary, ev, en, {"traceEvents": [{"name": f"w{i}"}], "displayTimeUnit": "ms"}, {"k": i})


def test_combine_windows_totals_pooled_rates_and_intervals(monkeypatch):
    import ahasd_sim.metrics.stats as stats_mod
    monkeypatch.setattr(stats_mod, "MIN_BOOTSTRAP_WINDOWS", 2)   # hand-counted resamples of 2-3 windows
    cfg = _smoke_cfg("run.generated_tokens=16")
    w0 = _fake_window(0, 16, 2.0, 0.5, 4.0, {"npu": 1.5, "pim": 1.5}, acc=12, rej=3, killed=1, pv_acc=2, verifs=5,
                      thr=10.0)
    w1 = _fake_window(1, 16, 3.0, 1.0, 6.0, {"npu": 2.5, "pim": 3.0}, acc=8, rej=6, killed=2, pv_acc=0, verifs=3,
                      thr=14.0)
    res = sim.combine_windows(cfg, [w0, w1], [0, 2])
    s = res.summary
    assert (s["generated_tokens"], s["makespan_s"], s["energy_j"], s["prefill_s"]) == (32, 5.0, 10.0, 1.5)
    assert s["decode_makespan_s"] == 3.5 and s["decode_energy_j"] == 7.5
    assert s["device_busy_s"] == {"npu": 4.0, "pim": 4.5}
    assert s["device_idle_s"] == {"npu": 1.0, "pim": 0.5}
    assert s["device_utilization"] == {"npu": 0.8, "pim": 0.9}
    # pooled counters: 20 accepted of 20 + 9 + 3 verified; NPU-verified accepted per verification
    assert s["acceptance_rate"] == 20 / 32 and s["mean_accepted_per_verify"] == (20 - 2) / 8
    assert (s["accepted_tokens"], s["rejected_tokens"], s["killed_tokens"], s["verifications"]) == (20, 9, 3, 8)
    # ratios of totals (not the mean 12 of the windows' own 10 and 14): 32 tokens / 3.5 s decode,
    # / 7.5 J decode energy, / 5 s and 10 J end to end
    assert s["throughput_tok_s"] == 32 / 3.5 and s["tokens_per_j"] == 32 / 7.5
    assert s["energy_per_token_j"] == 7.5 / 32 and abs(s["tokens_per_j"] * s["energy_per_token_j"] - 1) <= 4e-16
    assert s["throughput_e2e_tok_s"] == 32 / 5 and s["tokens_per_j_e2e"] == 32 / 10
    # bootstrap over 2 windows: a resample is {w0, w0} (16 / 1.5 s), {w1, w1} (16 / 2 s) or mixed
    # (32 / 3.5 s), with probabilities 1/4, 1/4, 1/2: the 2.5% and 97.5% quantiles are the two pure
    # resamples, exactly
    assert s["throughput_tok_s_ci95"] == [8.0, 16 / 1.5]
    assert (s["throughput_tok_s_ci95_low"], s["throughput_tok_s_ci95_high"]) == (8.0, 16 / 1.5)
    assert s["tokens_per_j_ci95"] == [16 / 4.5, 16 / 3.0] and s["ci_method"].startswith("ratio of totals")
    # other entries: numbers by their declared rule (metrics.combine.RULES: counts add; an
    # undeclared number is averaged), strings and flags from the first window, its identity
    assert s["mode_stats"] == {"some_rate": 1.5, "queue_ops": 30, "label": "w0", "flag": False}
    assert s["policy_stats"]["draft_length_histogram"] == {"2": 3}
    assert s["energy_breakdown_j"] == {"npu": {"dynamic": 5.0, "static": 5.0}}
    assert (s["trace_sha256"], s["seed"], s["platform"], s["policy"], s["mode"]) == ("sha0", 5, {"x": 0}, "fixed",
                                                                                    "async")
    assert (s["windows"], s["window_tokens"], s["window_start_prompts"]) == (2, 16, [0, 2])
    # k is a setting: the first window's (a name-based merge added it up)
    assert res.policy_stats == {"k": 0, "draft_length_histogram": {"2": 3}} and res.timeline == {
        "traceEvents": [{"name": "w0"}, {"name": "w1"}], "displayTimeUnit": "ms"}   # every window's trace
    # windows.csv: one row per window, in WINDOW_COLUMNS order
    assert list(res.windows.columns) == sim.WINDOW_COLUMNS
    assert list(res.windows["start_prompt"]) == [0, 2] and list(res.windows["throughput_tok_s"]) == [10.0, 14.0]
    assert list(res.windows["window"]) == [0, 1] and list(res.windows["generated_tokens"]) == [16, 16]
    assert list(res.events["window"]) == [0, 1] and list(res.events.index) == [0, 1]
    # energy rows in order of first appearance, summed over the windows
    assert res.energy.to_dict("records") == [{"device": "npu", "kind": "dynamic", "energy_j": 5.0},
                                             {"device": "npu", "kind": "static", "energy_j": 5.0},
                                             {"device": "aau", "kind": "dynamic", "energy_j": 0.5}]


def test_combine_one_window_and_a_mode_with_its_own_windows(monkeypatch):
    cfg = _smoke_cfg("run.generated_tokens=16")
    w0 = _fake_window(0, 16, 2.0, 0.5, 4.0, {"npu": 1.5}, acc=12, rej=3, killed=1, pv_acc=2, verifs=5, thr=10.0)
    s = sim.combine_windows(cfg, [w0], [1]).summary
    # one window: its own totals' ratio (16 tokens / 1.5 s decode), no interval
    assert s["throughput_tok_s"] == 16 / 1.5 and s["throughput_tok_s_ci95"] is None
    assert (s["throughput_tok_s_ci95_low"], s["throughput_tok_s_ci95_high"]) == (None, None)   # not [x, x]
    assert s["acceptance_rate"] == 0.123 and s["windows"] == 1 and s["window_start_prompts"] == [1]
    own = _fake_window(0, 16, 2.0, 0.0, 4.0, {"npu": 1.5}, acc=12, rej=3, killed=1, pv_acc=0, verifs=5, thr=10.0)
    own.summary["mode_windows"] = {"n": 3, "basis": "rounds", "throughput_tok_s": [1.0, 2.0, 6.0],
                                   "generated_tokens": [4.0, 4.0, 4.0], "decode_makespan_s": [2.0, 2.0, 2.0],
                                   "throughput_e2e_tok_s": [1.0, 1.0, 1.0]}
    # 3 windows: below the bootstrap's minimum (5), no interval; with the minimum at 2, the
    # interval of the mode's windows
    assert sim.combine_windows(cfg, [own], [0]).summary["throughput_tok_s_ci95"] is None
    import ahasd_sim.metrics.stats as stats_mod
    monkeypatch.setattr(stats_mod, "MIN_BOOTSTRAP_WINDOWS", 2)
    res = sim.combine_windows(cfg, [own], [0])
    s = res.summary
    assert (s["windows"], s["window_basis"]) == (3, "rounds") and "mode_windows" not in s
    # the run's own total ratio; the interval from the mode's windows' totals (all equal: degenerate)
    assert s["throughput_tok_s"] == 10.0 and s["throughput_tok_s_ci95"] == [2.0, 2.0]
    assert "throughput_tok_s_window_mean" not in s
    # windows without the totals of a rate give it no interval (never one from a mean of rates)
    assert "tokens_per_j_ci95" not in s and "throughput_e2e_tok_s_ci95" not in s
    assert list(res.windows["window"]) == [0, 1, 2]
    # no decode time: rate 0, not a division error
    zero = _fake_window(0, 0, 0.0, 0.0, 0.0, {}, acc=0, rej=0, killed=0, pv_acc=0, verifs=0, thr=1.0)
    assert sim.combine_windows(cfg, [zero], [0]).summary["throughput_tok_s"] == 0.0
    # two windows with nothing verified and no time: rates 0, not a division error or 1
    z = [_fake_window(i, 0, 0.0, 0.0, 0.0, {"npu": 0.0}, acc=0, rej=0, killed=0, pv_acc=0, verifs=0, thr=1.0)
         for i in (0, 1)]
    for w in z:
        del w.summary["preverify_accepted_tokens"]
    s = sim.combine_windows(cfg, z, [0, 1]).summary
    assert (s["acceptance_rate"], s["mean_accepted_per_verify"], s["device_utilization"]) == (0.0, 0.0, {"npu": 0.0})
    # short windows (well under a second) still get their utilisation
    short = [_fake_window(i, 4, 0.25, 0.0, 1.0, {"npu": 0.2}, acc=4, rej=0, killed=0, pv_acc=0, verifs=2, thr=1.0)
             for i in (0, 1)]
    for w in short:
        del w.summary["preverify_accepted_tokens"]
    s = sim.combine_windows(cfg, short, [0, 1]).summary
    assert s["device_utilization"] == {"npu": pytest.approx(0.8, rel=1e-12, abs=0)}
    assert s["mean_accepted_per_verify"] == 2.0 and s["acceptance_rate"] == 1.0


def test_merge_rules():
    """Each entry combines by its declared rule (metrics.combine.RULES), not by its name's suffix."""
    from ahasd_sim.metrics.combine import merge_summaries as m
    assert m([{"drafted_tokens": 1}, {"drafted_tokens": 2}]) == {"drafted_tokens": 3}         # a count
    assert m([{"makespan_s": 1.0}, {"makespan_s": 2.0}]) == {"makespan_s": 3.0}               # a total
    assert m([{"tpot_s": 1.0, "generated_tokens": 1}, {"tpot_s": 2.0, "generated_tokens": 3}])["tpot_s"] == 1.75
    assert m([{"mode": "a"}, {"mode": "b"}]) == {"mode": "a"}
    assert m([{"window_start_prompts": [1]}, {"window_start_prompts": [2]}]) == {"window_start_prompts": [1]}
    assert m([{"device_busy_s": {"a": 1.0}}, {"device_busy_s": {"a": 3.0, "b": 4.0}}]) == {
        "device_busy_s": {"a": 4.0, "b": 4.0}}
    assert m([{"energy_breakdown_j": {"n": {"a": 1.0}}}, {"energy_breakdown_j": {"n": {"a": 3.0}}}]) == {
        "energy_breakdown_j": {"n": {"a": 4.0}}}
    assert m([{"mode_stats": {"queues": {"q": {"capacity": 4, "max_occupancy": 1}}}},
              {"mode_stats": {"queues": {"q": {"capacity": 4, "max_occupancy": 3}}}}]) == {
        "mode_stats": {"queues": {"q": {"capacity": 4, "max_occupancy": 3}}}}
    assert m([{"drafted_tokens": 1.0}, {"drafted_tokens": "x"}]) == {"drafted_tokens": 1.0}   # mixed: the first


def test_trace_models_and_by_task():
    trace = load_trace(SMOKE_TRACE)
    assert sim.trace_models(trace) == {"drafter": "Qwen2.5-Coder-0.5B-Instruct (AWQ->GGUF, mixed Q5_0/Q8_0/Q6_K/Q4_K)",
                                       "target": "Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M)"}
    assert sim.trace_models(type("T", (), {"header": {}})()) == {"drafter": None, "target": None}
    assert sim._by_task({("npu", "verify"): 1.0, ("pim", "draft"): 2.0, ("npu", "draft"): 3.0}) == {
        "draft": {"npu": 3.0, "pim": 2.0}, "verify": {"npu": 1.0}}


# ------------------------------------------------------------------ compare: paired window intervals
def _fake_compare(monkeypatch, per_run):
    """compare with the simulation replaced by given per-window metrics (key: mode or policy)."""
    import ahasd_sim.compare as cmp
    written = []

    def run_simulation(cfg, parts):
        key = cfg.run.mode if cfg.run.mode in per_run else cfg.run.policy
        thr, tpj, extra = per_run[key]
        # 10 tokens per window: decode time 10 / thr, decode energy 10 / tpj
        w = pd.DataFrame({"window": range(len(thr)), "generated_tokens": 10.0,
                          "decode_makespan_s": [10 / x for x in thr], "decode_energy_j": [10 / x for x in tpj],
                          "throughput_tok_s": thr, "tokens_per_j": tpj})
        summary = {c: None for c in cmp.COLUMNS}
        summary.update({"mode": cfg.run.mode, "windows": len(thr),
                        "throughput_tok_s": 10 * len(thr) / w["decode_makespan_s"].sum(),
                        "tokens_per_j": 10 * len(thr) / w["decode_energy_j"].sum(), **extra})
        return sim.RunResult(summary, pd.DataFrame(), pd.DataFrame(), None, {}, windows=w)

    monkeypatch.setattr(cmp, "run_simulation", run_simulation)
    monkeypatch.setattr(cmp, "write_run", lambda res, cfg, d, wall: written.append(Path(d).name))
    return cmp, written


def test_compare_interval_of_paired_window_ratios(tmp_path, monkeypatch):
    import ahasd_sim.metrics.stats as stats_mod
    monkeypatch.setattr(stats_mod, "MIN_BOOTSTRAP_WINDOWS", 2)   # hand-counted resamples of 2-3 windows
    cmp, written = _fake_compare(monkeypatch, {"async": ([10.0, 20.0], [2.0, 4.0], {}),
                                               "ahasd": ([15.0, 20.0], [1.0, 4.0], {})})
    cfg = _smoke_cfg("run.generated_tokens=16", "run.windows=2")
    table, out = cmp.run_compare(cfg, "ahasd,async", "async", tmp_path / "c")
    assert written == ["ahasd", "async"] and out == tmp_path / "c"     # the order given
    t = table.set_index("mode")
    # ratio of totals, not the mean 1.25 of the per-window ratios 1.5 and 1.0: the same 20 tokens
    # in 10/10 + 10/20 = 1.5 s (async) and 10/15 + 10/20 = 7/6 s (ahasd) -> 9/7; energy 7.5 J and
    # 12.5 J -> 0.6 (not 0.75). Paired bootstrap over the 2 windows: the pure resamples give the
    # per-window ratios (1.0 and 1.5; 0.5 and 1.0), the mixed ones the point: the interval spans them
    assert t.loc["ahasd", "throughput_vs_async"] == pytest.approx(9 / 7, rel=1e-15, abs=0)
    assert [t.loc["ahasd", "throughput_vs_async_ci95_low"], t.loc["ahasd", "throughput_vs_async_ci95_high"]] == \
        pytest.approx([1.0, 1.5], rel=1e-12, abs=0)
    assert t.loc["ahasd", "energy_efficiency_vs_async"] == pytest.approx(0.6, rel=1e-15, abs=0)
    assert [t.loc["ahasd", "energy_efficiency_vs_async_ci95_low"],
            t.loc["ahasd", "energy_efficiency_vs_async_ci95_high"]] == pytest.approx([0.5, 1.0], rel=1e-12, abs=0)
    assert list(t.loc["async", ["throughput_vs_async", "throughput_vs_async_ci95_low",
                                "throughput_vs_async_ci95_high"]]) == [1.0, 1.0, 1.0]
    assert list(table.columns) == cmp.COLUMNS + ["pim_placement", "not_run"] + [
        f"{n}_vs_{b}{s}" for b in ("best", "async") for n in ("throughput", "energy_efficiency")
        for s in ("", "_ci95_low", "_ci95_high")] + ["best_throughput_decoder", "best_efficiency_decoder",
                                                  "window_basis"]
    # the best decoder by each metric: ahasd is faster (20 / (7/6) s vs 20 / 1.5 s), async more efficient
    assert table["best_throughput_decoder"].iloc[0] == "ahasd" and table["best_efficiency_decoder"].iloc[0] == "async"
    csv = pd.read_csv(out / "compare.csv")
    assert csv.set_index("mode").loc["ahasd", "throughput_vs_async_ci95_high"] == pytest.approx(1.5, rel=1e-12, abs=0)
    # default folder: next to the run's default output, suffixed _compare
    from ahasd_sim.output import default_out_dir
    d = cmp.default_compare_dir(cfg)
    assert d.parent == default_out_dir(cfg).parent and d.name.endswith("_compare")


def test_compare_policies_ratios_and_moe_columns(tmp_path, monkeypatch):
    cmp, written = _fake_compare(monkeypatch, {
        "fixed": ([10.0], [2.0], {"expert_h2d_bytes": 5.0}),
        "adaedl": ([25.0], [3.0], {"expert_h2d_bytes": 7.0, "expert_cache_hit_rate": 0.5})})
    cfg = _smoke_cfg("run.generated_tokens=16", "run.windows=1", "run.mode=ahasd")
    table, out = cmp.run_compare_policies(cfg, "adaedl", "fixed", tmp_path / "p")
    assert written == ["fixed", "adaedl"] and list(table["policy"]) == ["fixed", "adaedl"]
    t = table.set_index("policy")
    assert t.loc["adaedl", "throughput_vs_fixed"] == 2.5 and t.loc["fixed", "throughput_vs_fixed"] == 1.0
    assert t.loc["adaedl", "energy_efficiency_vs_fixed"] == 1.5
    assert list(t["expert_h2d_bytes"]) == [5.0, 7.0] and t.loc["adaedl", "expert_cache_hit_rate"] == 0.5
    assert "mode" not in table.columns and (out / "compare.csv").is_file()
    from ahasd_sim.compare import parse_policies
    assert parse_policies("svip, adaedl", None) == (["svip", "adaedl"], "svip")
    with pytest.raises(InputError) as ei:
        parse_policies("svip,oracle", None)
    assert str(ei.value).startswith("--policies: unknown policy 'oracle'; valid policies: adaedl, banditspec")


def test_describe_platform_and_hardware_errors_attributed_to_the_config_file():
    from types import SimpleNamespace
    from ahasd_sim.hw.pim import RankPartition
    cfg = _smoke_cfg()
    p = Platform.build(cfg)
    mode = SimpleNamespace(costs=SimpleNamespace(partition=RankPartition(3, 5, 8, 1.0, 2.0, 4.0)))
    d = sim.describe_platform(p, mode)
    assert d == {"memory_peak_bandwidth_gb_s": pytest.approx(51.2, rel=1e-12, abs=0),
                 "memory_effective_bandwidth_gb_s": pytest.approx(p.memory.effective_bandwidth_bytes_s / 1e9,
                                                                  rel=1e-12, abs=0),
                 "npu_peak_tops": pytest.approx(2 * 64 * 64 * 2 * 1e9 / 1e12, rel=1e-12, abs=0),
                 "pim_draft_ranks": 3, "pim_target_ranks": 5, "pim_shared_ranks": 0}
    gpu = Platform.build(_smoke_cfg("gpu.enabled=true", "npu.enabled=false", "pim.enabled=false"))
    d = sim.describe_platform(gpu, SimpleNamespace(costs=SimpleNamespace()))
    assert set(d) == {"memory_peak_bandwidth_gb_s", "memory_effective_bandwidth_gb_s", "gpu_effective_bandwidth_gb_s"}
    assert d["gpu_effective_bandwidth_gb_s"] == pytest.approx(gpu.gpu.effective_bandwidth_bytes_s / 1e9,
                                                              rel=1e-12, abs=0)
    # a model that does not fit the PIM ranks: the hardware model's error (no file) names where
    # pim.ranks was set (--set here)
    with pytest.raises(ConfigError) as ei:
        run_simulation(_smoke_cfg("run.generated_tokens=8", "run.windows=1", "run.mode=async",
                                  "pim.partition_policy=min_fit", "pim.ranks=2"))
    e = ei.value
    assert (e.source, e.key_path) == ("--set", "pim.ranks")
    assert e.message.startswith("draft model ") and e.message.endswith("but the device has 2 ranks (8.6 GB)")


def test_loader_type_names_of_other_types():
    from ahasd_sim.config.loader import _type_name
    assert _type_name(Path) == "Path"
    assert _type_name(typing.Any) == "Any"
    assert _type_name(3) == "3"                   # no __name__: its text


def test_devices_that_never_work_are_reported_idle():
    res = run_simulation(_smoke_cfg("run.mode=gpu_only", "gpu.enabled=true", "gpu.memory_gib=80", "run.generated_tokens=8",
                                    "run.windows=1", "run.policy=fixed"))
    s = res.summary
    assert set(s["device_busy_s"]) == {"gpu", "npu", "pim"}
    assert s["device_busy_s"]["npu"] == 0.0 and s["device_busy_s"]["pim"] == 0.0
    assert s["device_idle_s"]["npu"] == s["makespan_s"] and s["device_utilization"]["pim"] == 0.0
    assert s["platform"]["npu_peak_tops"] == pytest.approx(16.384, rel=1e-12, abs=0)
    # what was run, as configured
    from ahasd_sim import __version__
    assert (s["ahasd_sim_version"], s["mode"], s["policy"], s["draft_model"], s["target_model"], s["trace"],
            s["seed"]) == (__version__, "gpu_only", "fixed", "llama2-7b", "llama2-13b", str(SMOKE_TRACE), 0)
    assert s["trace_models"] == sim.trace_models(load_trace(SMOKE_TRACE))
    # 8 tokens from the first prompt: one prompt start, one prefill
    assert s["prefills"] == 1 and s["prefill_s"] > 0
    # decode-only and end-to-end rates of the (single) window
    mk, pf = s["makespan_s"], s["prefill_s"]
    assert s["throughput_tok_s"] == pytest.approx(8 / (mk - pf), rel=1e-12, abs=0)
    assert s["throughput_e2e_tok_s"] == pytest.approx(8 / mk, rel=1e-12, abs=0)
    assert s["tokens_per_j"] == pytest.approx(8 / (s["energy_j"] - s["prefill_energy_j"]), rel=1e-12, abs=0)
    assert s["tokens_per_j_e2e"] == pytest.approx(8 / s["energy_j"], rel=1e-12, abs=0)
