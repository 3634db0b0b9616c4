"""Energy on a real run, compare ratios, config strictness, sweep resume (issue 19).

Expectations are computed independently of the code under test: the energy test
records every task the modes actually ran (the cost model's TaskCost) and rebuilds
the platform to read static powers, instead of summing the collector's own totals.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from ahasd_sim.config import load_config
from ahasd_sim.config.errors import ConfigError
from ahasd_sim.hw.platform import Platform
from ahasd_sim.metrics.collector import Collector
from ahasd_sim.modes import base as mode_base
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
    cfg = load_config(PAPER_PLATFORM, [f"run.mode={mode}", "run.policy=fixed", f"run.trace={SMOKE_TRACE}",
                                       f"run.generated_tokens={n}", "run.timeline=false", *extra])
    # capture the mode instance at finalize without changing what finalize does
    cls = mode_base.get_mode(mode)
    real_final = cls.finalize
    monkeypatch.setattr(cls, "finalize", lambda self: (modes.append(self), real_final(self))[1])
    res = run_simulation(cfg)
    return cfg, res, tasks, modes        # one mode instance per trace window


@pytest.mark.parametrize("mode", ["operator_sync", "async", "ahasd"])
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
        assert br[dev]["static"] == pytest.approx(powers.get(dev, 0.0) * makespan, rel=1e-12), dev
        assert br[dev]["dynamic"] == pytest.approx(expected_dyn.get(dev, 0.0), rel=1e-9), dev
    total = sum(powers.values()) * makespan + sum(expected_dyn.values())
    assert s["energy_j"] == pytest.approx(total, rel=1e-9)
    # decode-only energy per token leaves out the prompt prefills: their tasks' energy and all
    # static power while they ran (every device waits for a prefill)
    prefill_tasks = [c for label, c in tasks if label.startswith("prefill")]
    prefill_s = sum(m.prefill_s for m in ms)
    assert 0 < prefill_s <= sum(c.duration_s for c in prefill_tasks) * (1 + 1e-12)   # they may overlap
    prefill_j = sum(e for c in prefill_tasks for e in c.energy_j.values()) + sum(powers.values()) * prefill_s
    assert s["prefill_energy_j"] == pytest.approx(prefill_j, rel=1e-9)
    assert s["energy_per_token_j"] == pytest.approx((total - prefill_j) / s["generated_tokens"], rel=1e-9)
    # static energy is a real share of the run (so charging power instead of power x time shows)
    assert sum(powers.values()) * makespan > 0.01 * total
    # NPU static power comes from its config key
    assert powers["npu"] == cfg.npu.static_power_w


def test_compare_ratios_are_mode_over_baseline(tmp_path, monkeypatch):
    import time
    from ahasd_sim.compare import run_compare
    # one trace window: the table's mean of per-window ratios is then the ratio of the summaries
    cfg = load_config(PAPER_PLATFORM, [f"run.trace={SMOKE_TRACE}", "run.generated_tokens=24", "run.windows=1",
                                       "run.policy=fixed", "run.timeline=false"])
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
            s["throughput_tok_s"] / base["throughput_tok_s"], rel=1e-12)
        assert t.loc[m, "energy_efficiency_vs_operator_sync"] == pytest.approx(
            s["tokens_per_j"] / base["tokens_per_j"], rel=1e-9)
    # two different schemes: the non-baseline ratio is not 1 (an inverted ratio would be its reciprocal)
    r = t.loc["ahasd", "throughput_vs_operator_sync"]
    assert abs(r - 1.0) > 0.01
    csv = pd.read_csv(out / "compare.csv")
    assert list(csv.columns) == list(table.columns) and list(csv["mode"]) == ["ahasd", "operator_sync"]
    assert csv.set_index("mode").loc["ahasd", "throughput_vs_operator_sync"] == pytest.approx(r, rel=1e-9)
    # --out is used when given, and a second compare into the same folder replaces the first
    given = tmp_path / "given"
    _t, out1 = run_compare(cfg, "ahasd,operator_sync", "operator_sync", given)
    assert out1 == given and (given / "compare.csv").is_file()
    table2, out2 = run_compare(cfg, "operator_sync,ahasd", None, given)
    assert out2 == given and list(table2["mode"]) == ["operator_sync", "ahasd"]
    assert table2.set_index("mode").loc["ahasd", "throughput_vs_operator_sync"] == pytest.approx(r, rel=1e-12)


@pytest.mark.parametrize("text, baseline, expected", [
    ("ahasd, async", None, (["ahasd", "async"], "ahasd")),               # first mode is the baseline
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
    assert str(ei.value) == message.format(valid=", ".join(sorted(MODES)))


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

    def failing(cfg, out_dir):
        if cfg.run.mode == "ahasd":
            out_dir.mkdir(parents=True, exist_ok=True)
            rec = worker_mod.error_record(RuntimeError("transient failure"), 0.0)
            worker_mod.write_error(out_dir, rec)
            return "failed", {"error_type": rec["type"], "error": rec["message"], "wall_time_s": 0.0}
        return real(cfg, out_dir)

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
