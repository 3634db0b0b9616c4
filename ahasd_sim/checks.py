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
        draft, target = get_model(cfg.run.draft_model, cfg.source_file), get_model(cfg.run.target_model, cfg.source_file)
    except ValueError:
        return out   # reported as an error by the run itself
    out += trace_pair_warnings(cfg)
    out += unused_setting_warnings(cfg)
    out += pim_unit_warnings(cfg)
    if cfg.run.mode == "moe_offload" and cfg.moe.expert_execution != "gpu" and cfg.moe.overlap != "none":
        out.append(f"{cfg.source_of('moe.overlap')}: moe.overlap {cfg.moe.overlap} does not apply with "
                   f"moe.expert_execution {cfg.moe.expert_execution} (no next-layer copies are made)")
    if cfg.run.drafter in ("head", "lookup"):
        from .modes import MODES
        fam = getattr(MODES.get(cfg.run.mode), "family", "soc")
        if fam not in ("soc", "moe"):
            out.append(f"{cfg.source_of('run.drafter')}: run.drafter {cfg.run.drafter} is modelled on the mobile "
                       f"SoC and MoE modes; mode {cfg.run.mode} drafts with run.draft_model {cfg.run.draft_model}")
    if cfg.run.drafter not in ("head", "lookup") and draft.param_count() >= target.param_count():
        out.append(f"{cfg.source_file}: run.draft_model {cfg.run.draft_model} ({draft.param_count() / 1e9:.2f} B "
                   f"parameters) is not smaller than run.target_model {cfg.run.target_model} "
                   f"({target.param_count() / 1e9:.2f} B): speculative decoding needs a smaller drafter")
    p = cfg.pim
    if p.enabled and p.dram_power_limit_w is None and p.power_limit_kind != "instantaneous":
        out.append(f"{cfg.source_of('pim.power_limit_kind')}: pim.power_limit_kind {p.power_limit_kind} has no effect: "
                   "pim.dram_power_limit_w is null (no limit)")
    t = cfg.thermal
    if t.voltage_scaling and not cfg.npu.enabled:
        out.append(f"{cfg.source_of('thermal.voltage_scaling')}: thermal.voltage_scaling has no effect: the platform "
                   "has no NPU (the PIM units' DRAM rails do not scale)")
    if not p.enabled and cfg.memory.reserved_gib and cfg.gpu.enabled and not cfg.npu.enabled:
        out.append(f"{cfg.source_of('memory.reserved_gib')}: memory.reserved_gib has no effect on a GPU platform "
                   "(the GPU checks its own memory)")
    return out


#: cloud.utilization from which a warning is given: the M/M/1 wait of the unsimulated tenants is
#: rho / (1 - rho) service times, 99 at 0.99 (the run then measures the queue, not the design)
UTILIZATION_WARN = 0.99
#: run.kv_len_quantum_tokens above which a warning is given: KV lengths are rounded up to a
#: multiple of it before costing, and the shipped traces' prompts are about 100-500 tokens, so a
#: larger quantum changes a step's KV length by more than half a prompt
KV_QUANTUM_WARN_TOKENS = 256


def _set_keys(cfg: SimConfig, prefix: str) -> list[str]:
    """Keys under ``prefix`` (``cloud.``) that a config file or ``--set`` set explicitly."""
    prov = getattr(cfg, "_provenance", {})
    return sorted(k for k in prov if k.startswith(prefix) and k != prefix.rstrip(".") and "[" not in k)


def _ignored(cfg: SimConfig, keys: list[str], why: str) -> list[str]:
    """One warning per source that set some of ``keys``: they do not apply to this run."""
    by_source: dict[str, list[str]] = {}
    for k in keys:
        by_source.setdefault(cfg.source_of(k), []).append(k)
    out = []
    for src, ks in by_source.items():
        shown = ", ".join(ks[:4]) + (f" and {len(ks) - 4} more" if len(ks) > 4 else "")
        out.append(f"{src}: {shown}: {'is' if len(ks) == 1 else 'are'} set, but {why}: ignored")
    return out


def unused_setting_warnings(cfg: SimConfig) -> list[str]:
    """Settings that do not apply to this run (a trace for a link the run does not have, a power
    limit of PIM the platform lacks, MoE options of a dense mode), and valid values that make the
    run measure something else than the design (a saturated cloud queue, a coarse KV quantum)."""
    from .modes import MODES
    out = []
    mode_cls = MODES.get(cfg.run.mode)
    network = getattr(cfg, "network", None)
    if network is not None and not network.enabled:
        keys = [k for k in _set_keys(cfg, "network.") if k != "network.enabled"] + _set_keys(cfg, "cloud.")
        out += _ignored(cfg, keys, "network.enabled is false (this run has no network and no cloud)")
    elif network is not None and "network" not in getattr(mode_cls, "required_devices", ()):
        keys = _set_keys(cfg, "cloud.")
        out += _ignored(cfg, keys, f"mode '{cfg.run.mode}' uses no cloud server")
    pim = getattr(cfg, "pim", None)
    if pim is not None and pim.dram_power_limit_w is not None and not pim.enabled:
        out += _ignored(cfg, ["pim.dram_power_limit_w"], "pim.enabled is false (the limit throttles PIM units, "
                        "and this platform has none)")
    if cfg.run.mode != "moe_offload":
        keys = _set_keys(cfg, "moe.") + _set_keys(cfg, "tree_policy.")
        out += _ignored(cfg, keys, f"mode '{cfg.run.mode}' is not moe_offload")
    cloud = getattr(cfg, "cloud", None)
    if cloud is not None and network is not None and network.enabled and cloud.utilization >= UTILIZATION_WARN:
        rho = cloud.utilization
        out.append(f"{cfg.source_of('cloud.utilization')}: cloud.utilization: {rho:g} makes every request wait "
                   f"{rho / (1 - rho):.3g} service times (M/M/1): the run measures the queue of tenants it does "
                   f"not simulate, not the design")
    if pim is not None and pim.enabled and getattr(cfg, "memory", None) is not None:
        from .hw import pim_spec
        spec = pim_spec.PRESETS.get(pim.preset)
        # LPDDR5X is electrically an LPDDR5 part: only another family (GDDR6, HBM2) is a mismatch
        if spec is not None and not cfg.memory.standard.startswith(spec.standard):
            out.append(f"{cfg.source_of('pim.preset')}: pim.preset: {pim.preset} is a {spec.standard} PIM device, "
                       f"but memory.standard is {cfg.memory.standard}: the PIM rates and command timings are "
                       f"{spec.standard}'s while the memory bus is {cfg.memory.standard}'s (not one package)")
    q = cfg.run.kv_len_quantum_tokens
    if q > KV_QUANTUM_WARN_TOKENS:
        out.append(f"{cfg.source_of('run.kv_len_quantum_tokens')}: run.kv_len_quantum_tokens: {q} rounds every KV "
                   f"length up by as many as {q - 1} tokens before costing (more than {KV_QUANTUM_WARN_TOKENS}: "
                   "attention costs are those of a longer context)")
    return out


def pim_unit_warnings(cfg: SimConfig) -> list[str]:
    """Keys of the PIM command sequence that a roofline-timed run does not use."""
    import dataclasses as dc
    p = cfg.pim
    if not p.enabled or p.gemv_timing != "roofline":
        return []
    defaults = {f.name: f.default for f in dc.fields(p)}
    return [f"{cfg.source_of('pim.' + k)}: pim.{k} ({getattr(p, k)}) applies to pim.gemv_timing: command_sequence "
            "only; this run times PIM GEMVs by the roofline" for k in ("driver_order", "all_bank_act", "protocol_io",
                                                                        "result_registers_per_bank")
            if getattr(p, k) != defaults[k]]


def _recorded_pair(cfg: SimConfig, key: str) -> dict | None:
    """The ``models`` header entry (drafter, target) of the trace that ``key`` names, read
    without loading the trace; None when it cannot be read (the run reports that)."""
    import json

    from .paths import resolve_data_path
    path = resolve_data_path(getattr(getattr(cfg, key.split(".")[0]), key.split(".")[1]), cfg.source_file)
    try:
        with np.load(path, allow_pickle=False) as z:
            models = json.loads(str(z["header_json"])).get("models")
    except Exception:   # noqa: BLE001 - unreadable here: the run's own loader reports it
        return None
    if not isinstance(models, dict) or not all(isinstance(models.get(r), dict) for r in ("drafter", "target")):
        return None
    return models


def trace_pair_warnings(cfg: SimConfig) -> list[str]:
    """Warnings about the model pair a trace was recorded with: the drafter no smaller than the
    target (roles swapped, or one model twice), and a placement tuned on a trace of another pair
    than the one the run replays."""
    out = []
    run_pair = _recorded_pair(cfg, "run.trace")
    if run_pair is not None:
        d, t = run_pair["drafter"], run_pair["target"]
        ds, ts = d.get("size_bytes"), t.get("size_bytes")
        if d.get("sha256") and d.get("sha256") == t.get("sha256"):
            out.append(f"{cfg.source_of('run.trace')}: run.trace {cfg.run.trace} was recorded with the same model "
                       f"as drafter and target ({d.get('name')}): its acceptance is not a speculative pair's")
        elif isinstance(ds, (int, float)) and isinstance(ts, (int, float)) and ds >= ts:
            out.append(f"{cfg.source_of('run.trace')}: run.trace {cfg.run.trace} was recorded with a drafter "
                       f"({d.get('name')}, {ds / 1e9:.2f} GB) no smaller than its target ({t.get('name')}, "
                       f"{ts / 1e9:.2f} GB): drafter and target swapped?")
    uses_tuning = cfg.pim.enabled and cfg.pim.partition_policy == "auto"
    if run_pair is not None and uses_tuning and cfg.tuning.trace != cfg.run.trace:
        tune_pair = _recorded_pair(cfg, "tuning.trace")
        ids = lambda m: tuple(m[r].get("sha256") or m[r].get("name") for r in ("drafter", "target"))  # noqa: E731
        if tune_pair is not None and ids(tune_pair) != ids(run_pair):
            out.append(f"{cfg.source_of('tuning.trace')}: tuning.trace {cfg.tuning.trace} was recorded with "
                       f"{tune_pair['drafter'].get('name')} -> {tune_pair['target'].get('name')}, run.trace with "
                       f"{run_pair['drafter'].get('name')} -> {run_pair['target'].get('name')}: the PIM placement "
                       "is chosen on another pair's acceptance")
    return out


def dry_run(cfg: SimConfig) -> list[str]:
    """Build every part of the run without simulating; return report lines. Raises the same
    one-line errors a run would: the trace windows and each window's set-up (mode, models,
    platform, cost model, policy, the mode's own options) go through the run's own functions
    (:func:`~ahasd_sim.simulation.window_start_prompts`, :func:`~ahasd_sim.simulation.build_window`)."""
    from .modes.placement import dry_run_lines
    from .simulation import (_in_config_file, _load_full_trace, build_platform, build_window, load_run_trace,
                             mode_and_models, resolve_data_path, trace_models, window_start_prompts)

    run = cfg.run
    mode_cls, draft, target = mode_and_models(cfg)
    platform = build_platform(cfg, mode_cls)
    trace = _load_full_trace(cfg)
    starts = window_start_prompts(cfg, trace)
    try:
        place_lines, fits = dry_run_lines(cfg, platform, draft, target)
    except ConfigError as exc:
        raise _in_config_file(cfg, exc) from None
    # a dry run simulates nothing: cost the first fitting placement instead of tuning
    ccfg = cfg.replace([f"pim.partition_policy={fits}"], source=None) if fits else cfg
    w = build_window(ccfg, load_run_trace(cfg, starts[0], trace), 0)
    sim_trace, models = w.sim_trace, {"draft_model": draft, "target_model": target}
    tm = trace_models(sim_trace)
    d, t = models["draft_model"], models["target_model"]
    devices = ", ".join(sorted(platform.devices()))
    return [
        f"config {cfg.source_file}: OK (resolved, every section and hardware value checked)",
        f"  mode {run.mode}, policy {run.policy}, seed {run.seed}",
        f"  model shapes: draft {d.name} ({d.param_count() / 1e9:.2f} B parameters; run.drafter {run.drafter}), "
        f"target {run.target_model} ({t.param_count() / 1e9:.2f} B)",
        f"  trace {resolve_data_path(run.trace, cfg.source_file)}: {len(starts)} disjoint window(s) of "
        f"{run.generated_tokens} tokens from prompt(s) {', '.join(map(str, starts[:8]))}"
        f"{' ...' if len(starts) > 8 else ''}; acceptance recorded with {tm['drafter']} -> {tm['target']}",
        *([f"  mode {run.mode} replays the tree trace {cfg.soc_tree.trace} ({len(w.mode.tt)} rounds), not "
           f"run.trace's windows"] if getattr(w.mode, "tt", None) is not None and hasattr(cfg, "soc_tree")
          and getattr(w.mode, "family", "") == "soc" else []),
        f"  devices: {devices}",
        *place_lines,
        "dry run: nothing was simulated; no results are reported",
    ]


def summary_trace_line(summary: dict) -> str:
    """Where the acceptance of a run came from (printed next to the model shapes)."""
    tm = summary.get("trace_models") or {}
    pair = f"{tm.get('drafter')} -> {tm.get('target')}" if tm.get("drafter") or tm.get("target") else "unknown pair"
    line = f"  acceptance from trace   {Path(str(summary.get('trace'))).name} ({pair})"
    kind = summary.get("drafter")
    if kind and kind != "model":     # a head's acceptance is a what-if, a lookup's is exact: say which
        line += f"\n  drafter                 {kind}: {summary.get('acceptance_source')}"
    if (summary.get("mode_stats") or {}).get("routing") == "synthetic":
        line += "\n  expert routing          SYNTHETIC (moe.routing synthetic: drawn on the trace's trees, not recorded)"
    return line
