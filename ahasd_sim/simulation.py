"""One run = a pure function of (resolved config, trace, seed).

``run_simulation`` builds the platform, the workload costs, the trace replay,
the drafting policy and the execution mode, runs the SimPy environment until
the requested tokens are committed, then charges static energy over the
makespan and assembles the summary. Writing files is :mod:`ahasd_sim.output`'s job.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import simpy

from . import __version__
from .config.errors import ConfigError
from .config.loader import SimConfig
from .hw.platform import Platform
from .metrics.collector import Collector
from .metrics.timeline import chrome_trace
from .modes import RunContext, get_mode
from .modes.costs import StepCosts
from .modes.replay import TraceReplay
from .policies import make_policy, policy_needs_fit_data
from .workload.models import get_model, with_precision
from .workload.traces import Trace, load_trace
from .paths import resolve_data_path  # noqa: F401 - re-exported (callers import it from here)




class SimulationError(RuntimeError):
    """The simulation itself failed (a deadlock or time limit): a bug or an impossible setup."""


class SimulationTimeLimit(SimulationError):
    """``run.max_sim_time_s`` passed before the run finished (valid but very slow hardware):
    reported like bad input, naming how far the run got and the busiest device."""


@dataclass
class RunResult:
    summary: dict[str, Any]
    events: pd.DataFrame
    energy: pd.DataFrame
    timeline: dict[str, Any] | None
    policy_stats: dict[str, Any] = field(default_factory=dict)


def _config_error(cfg: SimConfig, key: str, message: str) -> ConfigError:
    return ConfigError(cfg.source_file, key, message)


def _in_config_file(cfg: SimConfig, exc: ConfigError) -> ConfigError:
    """A hardware-model error (raised without a file) re-attributed to the run's config file."""
    return ConfigError(exc.source or cfg.source_file, exc.key_path, exc.message)


def load_run_trace(cfg: SimConfig) -> tuple[Trace, Trace, Trace | None]:
    """(full trace, the replayed slice, the held-out part used only for fitting policies)."""
    run = cfg.run
    path = resolve_data_path(run.trace, cfg.source_file)
    if not path.is_file():
        raise _config_error(cfg, "run.trace", f"trace file '{run.trace}' not found")
    trace = load_trace(path)
    sim = trace.take(run.generated_tokens, run.trace_start_prompt)
    bounds = trace.prompt_bounds()
    start = int(bounds[run.trace_start_prompt, 0])
    end = start + run.generated_tokens
    # Held-out part for fitted predictors: whole prompts after the replayed slice, else before it.
    after = [b for b in bounds if b[0] >= end]
    before = [b for b in bounds if b[1] <= start]
    heldout = None
    if after:
        heldout = trace.slice_positions(int(after[0][0]), len(trace))
    elif before:
        heldout = trace.slice_positions(0, int(before[-1][1]))
    return trace, sim, heldout


def run_simulation(cfg: SimConfig, trace_parts: tuple[Trace, Trace, Trace | None] | None = None) -> RunResult:
    run = cfg.run
    try:
        mode_cls = get_mode(run.mode)
    except ValueError as exc:
        raise _config_error(cfg, "run.mode", str(exc)) from None
    try:
        draft = get_model(run.draft_model)
    except ValueError as exc:
        raise _config_error(cfg, "run.draft_model", str(exc).strip('"')) from None
    try:
        target = get_model(run.target_model)
    except ValueError as exc:
        raise _config_error(cfg, "run.target_model", str(exc).strip('"')) from None

    try:
        platform = Platform.build(cfg)
    except ConfigError as exc:
        raise _in_config_file(cfg, exc) from None
    missing = [d for d in mode_cls.required_devices if getattr(platform, d, None) is None]
    if missing:
        raise _config_error(cfg, "run.mode", f"mode '{run.mode}' needs device(s) {', '.join(missing)}, "
                            f"which this platform does not enable (set {missing[0]}.enabled: true)")
    _full, sim_trace, heldout = trace_parts or load_run_trace(cfg)
    rng = np.random.default_rng(run.seed)
    try:
        costs = StepCosts(platform, draft, target, cfg)
    except ConfigError as exc:
        raise _in_config_file(cfg, exc) from None
    fit = heldout if policy_needs_fit_data(run.policy) else None
    try:
        policy = make_policy(run.policy, cfg.policy, rng, fit)
    except ValueError as exc:
        raise _config_error(cfg, "run.policy", str(exc)) from None

    collector = Collector(devices=sorted(platform.devices()), keep_intervals=run.timeline)
    replay = TraceReplay(sim_trace, run.generated_tokens)
    env = simpy.Environment()
    ctx = RunContext(cfg=cfg, platform=platform, costs=costs, replay=replay, policy=policy,
                     collector=collector, rng=rng, n_tokens=run.generated_tokens)
    mode = mode_cls(env, ctx)
    done = mode.start()
    try:
        env.run(until=simpy.AnyOf(env, [done, env.timeout(run.max_sim_time_s)]))
    except ConfigError as exc:   # a setting found unusable only when a task is costed
        raise _in_config_file(cfg, exc) from None
    if not done.triggered:
        devs = set(platform.devices()) | set(collector._busy_s)
        busy = {d: collector.busy_until(d, env.now) for d in sorted(devs)}
        busiest = max(busy, key=lambda d: busy[d]) if busy else None
        if busiest is not None and busy[busiest] > 0 and env.now > 0:
            where = f"; bottleneck: {busiest} ({busy[busiest] / env.now:.0%} busy)"
        else:
            where = "; no device finished a single task in that time"
        raise SimulationTimeLimit(
            f"{cfg.source_file}: run.max_sim_time_s: mode '{run.mode}' committed only {mode.committed} of "
            f"{run.generated_tokens} tokens in {run.max_sim_time_s:g} s of simulated time{where}; the hardware "
            "is too slow for this run: raise run.max_sim_time_s, or check the hardware values")
    makespan = env.now
    mode.finalize()
    return _assemble(cfg, platform, collector, mode, policy, makespan, draft, target, sim_trace)


def trace_models(trace) -> dict[str, str | None]:
    """The drafter and target that recorded the trace (acceptance comes from them)."""
    models = trace.header.get("models") or {}
    return {role: (models.get(role) or {}).get("name") for role in ("drafter", "target")}


def _by_task(by_label: dict[tuple[str, str], float]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for (dev, label), e in sorted(by_label.items()):
        out.setdefault(label, {})[dev] = e
    return out


def describe_platform(platform, mode) -> dict[str, Any]:
    """Derived hardware figures worth printing next to results (all computed)."""
    out: dict[str, Any] = {
        "memory_peak_bandwidth_gb_s": platform.memory.peak_bandwidth_bytes_s / 1e9,
        "memory_effective_bandwidth_gb_s": platform.memory.effective_bandwidth_bytes_s / 1e9,
    }
    if platform.npu is not None:
        out["npu_peak_tops"] = platform.npu.peak_tops
    if platform.gpu is not None:
        out["gpu_effective_bandwidth_gb_s"] = platform.gpu.effective_bandwidth_bytes_s / 1e9
    part = getattr(mode.costs, "partition", None)
    if part is not None:
        out["pim_draft_ranks"] = part.draft_ranks
        out["pim_target_ranks"] = part.target_ranks
    return out


def _assemble(cfg, platform, col: Collector, mode, policy, makespan, draft, target, trace) -> RunResult:
    run = cfg.run
    ctr = col.counters
    # Energy: dynamic (logged per action) + static (power x makespan) per device.
    rows = []
    static_w = platform.devices()
    devices = sorted(set(static_w) | set(col.dynamic_energy_j))
    breakdown: dict[str, dict[str, float]] = {}
    for dev in devices:
        dyn = float(col.dynamic_energy_j.get(dev, 0.0))
        sta = float(static_w.get(dev, 0.0) * makespan)
        breakdown[dev] = {"dynamic": dyn, "static": sta}
        rows.append({"device": dev, "kind": "dynamic", "energy_j": dyn})
        rows.append({"device": dev, "kind": "static", "energy_j": sta})
    energy_j = float(sum(v["dynamic"] + v["static"] for v in breakdown.values()))
    busy_devices = sorted({*(d for d in ("npu", "pim", "gpu") if getattr(platform, d, None) is not None),
                           *col._busy_s})
    busy = {d: col.busy_s(d) for d in busy_devices}
    n = ctr.committed_tokens
    drafted_verified = ctr.accepted_tokens + ctr.rejected_tokens + ctr.killed_tokens
    summary: dict[str, Any] = {
        "ahasd_sim_version": __version__,
        "mode": run.mode,
        "policy": run.policy,
        "draft_model": run.draft_model,
        "target_model": run.target_model,
        "trace": run.trace,
        "trace_sha256": trace.header.get("sha256") or trace.header.get("file_sha256"),
        # acceptance comes from the trace's real pair, time and energy from the model shapes above
        "trace_models": trace_models(trace),
        "seed": run.seed,
        "generated_tokens": n,
        "makespan_s": makespan,
        "throughput_tok_s": n / makespan if makespan > 0 else 0.0,
        "energy_j": energy_j,
        "energy_per_token_j": energy_j / n if n else 0.0,
        "tokens_per_j": n / energy_j if energy_j > 0 else 0.0,
        "acceptance_rate": ctr.accepted_tokens / drafted_verified if drafted_verified else 0.0,
        "mean_accepted_per_verify": ctr.accepted_tokens / ctr.verifications if ctr.verifications else 0.0,
        "drafted_tokens": ctr.drafted_tokens,
        "accepted_tokens": ctr.accepted_tokens,
        "rejected_tokens": ctr.rejected_tokens,
        "killed_tokens": ctr.killed_tokens,
        "wasted_draft_tokens": ctr.wasted_draft_tokens,
        "unverified_at_end": ctr.unverified_at_end,
        "discarded_draft_forwards": ctr.discarded_draft_forwards,
        "verifications": ctr.verifications,
        "rollbacks": ctr.rollbacks,
        "offpath_drafted_tokens": ctr.offpath_drafted_tokens,
        "offpath_unrecorded_stalls": ctr.offpath_unrecorded_stalls,
        "npu_idle_draft_exhausted_s": ctr.npu_idle_draft_exhausted_s,
        "device_busy_s": busy,
        "device_idle_s": {d: max(0.0, makespan - b) for d, b in busy.items()},
        "device_utilization": {d: (b / makespan if makespan > 0 else 0.0) for d, b in busy.items()},
        "energy_breakdown_j": breakdown,
        "dynamic_energy_by_task_j": _by_task(col.dynamic_energy_by_label_j),
        "offchip_bytes": float(sum(col.offchip_bytes_by_task.values())),
        "offchip_bytes_by_task": dict(sorted(col.offchip_bytes_by_task.items())),
        "policy_stats": policy.stats(),
        "mode_stats": mode.stats(),
        "platform": describe_platform(platform, mode),
    }
    extra = getattr(mode, "summary_fields", None)   # mode-specific top-level metrics (mobile-cloud)
    if extra is not None:
        summary.update(extra(summary))
    events = pd.DataFrame(col.events)
    energy = pd.DataFrame(rows, columns=["device", "kind", "energy_j"])
    timeline = chrome_trace(col.busy_intervals, f"{run.mode}/{run.policy}") if run.timeline else None
    return RunResult(summary, events, energy, timeline, policy.stats())
