"""Checks that need more than the config schema: warnings about odd but valid setups, and
``--dry-run`` (resolve and validate a run without simulating it).

A dry run builds everything a run needs -- mode, model shapes, platform (every hardware
check), the trace slice, the per-step cost model and the drafting policy -- and reports what
it resolved. It prints no performance figures: nothing is simulated.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .config.errors import ConfigError
from .config.loader import SimConfig


def config_warnings(cfg: SimConfig) -> list[str]:
    """One-line warnings about a valid config that is probably not what was meant."""
    from .workload.models import get_model
    out = []
    try:
        draft, target = get_model(cfg.run.draft_model), get_model(cfg.run.target_model)
    except ValueError:
        return out   # reported as an error by the run itself
    if draft.param_count() >= target.param_count():
        out.append(f"{cfg.source_file}: run.draft_model {cfg.run.draft_model} ({draft.param_count() / 1e9:.2f} B "
                   f"parameters) is not smaller than run.target_model {cfg.run.target_model} "
                   f"({target.param_count() / 1e9:.2f} B): speculative decoding needs a smaller drafter")
    return out


def dry_run(cfg: SimConfig) -> list[str]:
    """Build every part of the run without simulating; return report lines. Raises the same
    one-line errors a run would."""
    from .modes import get_mode
    from .modes.costs import StepCosts
    from .policies import make_policy, policy_needs_fit_data
    from .simulation import _config_error, _in_config_file, build_platform, load_run_windows, resolve_data_path, trace_models
    from .workload.models import get_model

    run = cfg.run
    try:
        mode_cls = get_mode(run.mode)
    except ValueError as exc:
        raise _config_error(cfg, "run.mode", str(exc)) from None
    models = {}
    for key in ("draft_model", "target_model"):
        try:
            models[key] = get_model(getattr(run, key))
        except ValueError as exc:
            raise _config_error(cfg, f"run.{key}", str(exc).strip('"')) from None
    platform = build_platform(cfg, mode_cls)
    windows = load_run_windows(cfg)         # the disjoint windows (an error when they do not fit)
    _full, sim_trace, heldout = windows[0][1]
    from .modes.placement import dry_run_lines
    try:
        place_lines, fits = dry_run_lines(cfg, platform, models["draft_model"], models["target_model"])
        # a dry run simulates nothing: cost the first fitting placement instead of tuning
        ccfg = cfg.replace([f"pim.partition_policy={fits}"]) if fits else cfg
        StepCosts(platform, models["draft_model"], models["target_model"], ccfg)
    except ConfigError as exc:
        raise _in_config_file(cfg, exc) from None
    fit = heldout if policy_needs_fit_data(run.policy) else None
    try:
        make_policy(run.policy, cfg.policy, np.random.default_rng(run.seed), fit)
    except ValueError as exc:
        raise _config_error(cfg, "run.policy", str(exc)) from None
    tm = trace_models(sim_trace)
    d, t = models["draft_model"], models["target_model"]
    devices = ", ".join(sorted(platform.devices()))
    return [
        f"config {cfg.source_file}: OK (resolved, every section and hardware value checked)",
        f"  mode {run.mode}, policy {run.policy}, seed {run.seed}",
        f"  model shapes: draft {run.draft_model} ({d.param_count() / 1e9:.2f} B parameters), "
        f"target {run.target_model} ({t.param_count() / 1e9:.2f} B)",
        f"  trace {resolve_data_path(run.trace, cfg.source_file)}: {len(windows)} disjoint window(s) of "
        f"{run.generated_tokens} tokens from prompt(s) {', '.join(str(p) for p, _ in windows)}; acceptance recorded "
        f"with {tm['drafter']} -> {tm['target']}",
        f"  devices: {devices}",
        *place_lines,
        "dry run: nothing was simulated; no results are reported",
    ]


def summary_trace_line(summary: dict) -> str:
    """Where the acceptance of a run came from (printed next to the model shapes)."""
    tm = summary.get("trace_models") or {}
    pair = f"{tm.get('drafter')} -> {tm.get('target')}" if tm.get("drafter") or tm.get("target") else "unknown pair"
    return f"  acceptance from trace   {Path(str(summary.get('trace'))).name} ({pair})"
