"""How each summary entry combines over trace windows.

A run of several windows reports one summary; every number in it declares here how it is
built from the windows' own summaries (:data:`RULES`), never guessed from its name:

* ``sum`` -- a total (seconds, joules, bytes, counts): the windows' sum;
* ``wmean(w)`` -- a per-unit figure (per token, per round, per iteration): the mean weighted by
  the windows' ``w``, which is the ratio of the totals when the figure is a total / ``w``
  (time per output token weighted by tokens = total time / total tokens);
* ``ratio(num, den)`` -- recomputed from the combined totals at the paths ``num`` / ``den``
  (several paths add up);
* ``max`` / ``min`` -- a size, a peak or a low; ``first`` -- a setting or a derived hardware
  figure, the same in every window; ``last`` -- a state at the end of the run;
* ``mean`` -- an unweighted mean over windows (declared where no weight exists);
* ``concat`` -- a list of per-window samples, joined;
* ``pct(list, q)`` -- the q-th percentile of the joined samples at path ``list``;
* ``tci(point)`` -- the half-width of the Student-t 95% interval over the windows' ``point``
  values (one window = one sample);
* ``later`` -- recomputed by the caller from the combined totals (the ratio estimators and their
  bootstrap intervals, utilisations, acceptance).

Paths are dotted (``cloud_fleet.mean_batch_tokens``); a ``*`` matches one level. The first
matching rule wins. A number no rule declares falls back to the mean (and
:func:`undeclared` lists it: the test suite keeps that list empty for every mode and policy).
"""
from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

import numpy as np

from .stats import t_interval

SUM, MEAN, MAX, MIN, FIRST, LAST, CONCAT, LATER = "sum", "mean", "max", "min", "first", "last", "concat", "later"


def wmean(weight: str) -> tuple:
    """Mean weighted by the windows' value at ``weight`` (``{key}``: this entry's own key)."""
    return ("wmean", weight)


def ratio(num: str | tuple[str, ...], den: str | tuple[str, ...]) -> tuple:
    """Recomputed as combined ``num`` / combined ``den`` (0 when the denominator is 0)."""
    return ("ratio", (num,) if isinstance(num, str) else num, (den,) if isinstance(den, str) else den)


def pct(samples: str, q: float) -> tuple:
    return ("pct", samples, q)


def tci(point: str) -> tuple:
    return ("tci", point)


_PER_TOKEN = wmean("generated_tokens")
_PER_ROUND = wmean("policy_stats.rounds")

#: (path pattern, rule); the first match wins
RULES: list[tuple[str, Any]] = [
    # identity and settings
    ("seed", FIRST), ("windows", FIRST), ("window_tokens", FIRST), ("platform.*", FIRST),
    ("platform.*.*", FIRST), ("platform.*.*.*", FIRST), ("pim_placement.*", FIRST), ("pim_placement.*.*", FIRST),
    # totals
    ("generated_tokens", SUM), ("makespan_s", SUM), ("decode_makespan_s", SUM), ("prefill_s", SUM),
    ("prefills", SUM), ("energy_j", SUM), ("prefill_energy_j", SUM), ("decode_energy_j", SUM),
    ("preverify_accepted_tokens", SUM), ("drafted_tokens", SUM), ("accepted_tokens", SUM),
    ("rejected_tokens", SUM), ("killed_tokens", SUM), ("wasted_draft_tokens", SUM), ("unverified_at_end", SUM),
    ("discarded_draft_forwards", SUM), ("verifications", SUM), ("rollbacks", SUM), ("offpath_drafted_tokens", SUM),
    ("offpath_synthetic_tokens", SUM), ("drafter_forwards", SUM), ("reused_drafter_forwards", SUM),
    ("duplicate_drafter_forwards", SUM), ("npu_idle_draft_exhausted_s", SUM), ("device_busy_s.*", SUM),
    ("energy_breakdown_j.*.*", SUM), ("dynamic_energy_by_task_j.*.*", SUM), ("offchip_bytes", SUM),
    ("offchip_bytes_by_task.*", SUM),
    # recomputed by combine_windows from the totals
    ("throughput_tok_s", LATER), ("throughput_e2e_tok_s", LATER), ("tokens_per_j", LATER),
    ("tokens_per_j_e2e", LATER), ("energy_per_token_j", LATER), ("*_ci95_low", LATER), ("*_ci95_high", LATER),
    ("*_ci95", LATER), ("window_start_prompts", LATER),
    ("acceptance_rate", LATER), ("mean_accepted_per_verify", LATER), ("device_idle_s.*", LATER),
    ("device_utilization.*", LATER),
    # memory-package power
    ("dram_power.mean_w", wmean("makespan_s")), ("dram_power.throttled_time_s", SUM), ("dram_power.*", FIRST),
    # drafting policies
    ("policy_stats.rounds", SUM), ("policy_stats.draft_length_histogram.*", SUM),
    ("policy_stats.discarded_tokens", SUM), ("policy_stats.rounds_stopped_by_*", SUM),
    ("policy_stats.stops_by_rule", SUM), ("policy_stats.gated_rounds", SUM), ("policy_stats.invalid_outcomes", SUM),
    ("policy_stats.mean_*", _PER_ROUND), ("policy_stats.round_acceptance_rate", _PER_ROUND),
    ("policy_stats.lambda.initial", FIRST), ("policy_stats.lambda.final", LAST), ("policy_stats.lambda.min", MIN),
    ("policy_stats.lambda.max", MAX), ("policy_stats.lambda.updates", SUM),
    ("policy_stats.lambda.mean", wmean("policy_stats.lambda.updates")),
    ("policy_stats.acceptance_rate_ema", LAST), ("policy_stats.entropy_threshold_nats_final", LAST),
    ("policy_stats.entropy_threshold_nats", LAST), ("policy_stats.k", FIRST), ("policy_stats.best_arm", LAST),
    ("policy_stats.arm_pulls.*", SUM), ("policy_stats.arm_mean_reward.*", wmean("policy_stats.arm_pulls.{key}")),
    ("policy_stats.predictor.*", FIRST), ("policy_stats.predictor.*.*", FIRST),   # fitted before the run
    ("policy_stats.alpha_fit", FIRST), ("policy_stats.alpha_final", LAST),
    # SoC modes
    ("mode_stats.queue_ops", SUM), ("mode_stats.queues.*.capacity", MAX), ("mode_stats.queues.*.max_occupancy", MAX),
    ("mode_stats.queues.*.pushes", SUM), ("mode_stats.queues.*.producer_blocked_s", SUM),
    ("mode_stats.drafter_stall_s", SUM), ("mode_stats.shared_rank_contention.host_weight", FIRST),
    ("mode_stats.shared_rank_contention.lost_s.*", SUM), ("mode_stats.shared_rank_contention.contended_*", SUM),
    ("mode_stats.edc.prediction_accuracy", ratio("mode_stats.edc.correct_predictions",
                                                 "mode_stats.edc.resolved_predictions")),
    ("mode_stats.edc.*", SUM), ("mode_stats.tvc.*", SUM), ("mode_stats.preverify.*", SUM),
    ("mode_stats.edc_idle_waits", SUM), ("mode_stats.mapping_draft_len", FIRST),
    # MoE offload
    ("mode_stats.rounds", SUM), ("mode_stats.first_round", FIRST), ("mode_stats.memory_split.*", FIRST),
    # each window calibrates its own expert-cost estimate from its own verified passes
    ("mode_stats.cost_calibration.union_scale", MEAN), ("mode_stats.cost_calibration.miss_scale", MEAN),
    ("mode_stats.cost_calibration.passes", SUM), ("mode_stats.cost_calibration.kind", FIRST),
    ("mode_stats.drafter.*", FIRST), ("mode_stats.expert_execution", FIRST), ("mode_stats.routing", FIRST),
    ("verify_passes", SUM), ("cpu_expert_runs", SUM),
    ("mode_stats.cache.capacity_experts", FIRST), ("mode_stats.cache.resident_at_end", LAST),
    ("mode_stats.cache.hit_rate", ratio("mode_stats.cache.hits", ("mode_stats.cache.hits", "mode_stats.cache.misses"))),
    ("mode_stats.cache.*", SUM), ("mode_stats.profile.tokens", SUM), ("mode_stats.next_layer_wasted_copies", SUM),
    ("mode_stats.predictor.train_tokens_seen", SUM), ("mode_stats.predictor.*", wmean("verifications")),
    ("mode_stats.verify_time_model_error.median", wmean("mode_stats.verify_time_model_error.n")),
    ("mode_stats.verify_time_model_error.worst", "maxabs"), ("mode_stats.verify_time_model_error.n", SUM),
    ("expert_h2d_bytes*", SUM), ("expert_copy_stall_s", SUM),
    ("expert_cache_hit_rate", ratio("mode_stats.cache.hits", ("mode_stats.cache.hits", "mode_stats.cache.misses"))),
    ("experts_touched_per_verify", wmean("verifications")),
    ("experts_touched_per_layer_per_verify", wmean("verifications")),
    ("accepted_length_per_round", wmean("mode_stats.rounds")),
    # mobile-cloud
    ("mode_stats.rounds_by_option.*", SUM), ("mode_stats.cloud_sessions", SUM), ("mode_stats.estimates_at_end.*", LAST),

    ("mode_windows.*", FIRST), ("mode_stats.profile.rounds", FIRST), ("policy_stats.arms", FIRST), ("policy_stats.predictor.features", FIRST),
    ("tpot_s", _PER_TOKEN), ("ttft_s", MEAN), ("tpot_ci95_s", tci("tpot_s")), ("tpot_window_s", CONCAT),
    ("cloud_cost_usd", SUM), ("cloud_cost_usd_per_1k_tokens", _PER_TOKEN),
    ("cloud_cost_usd_per_1k_tokens_by_pricing.*", _PER_TOKEN), ("cloud_gpu_busy_s", SUM),
    ("cloud_gpu_share_s", SUM), ("cloud_queue_wait_s", SUM), ("cloud_batch_wait_s", SUM), ("cloud_calls", SUM),
    ("cloud_tokens_processed", SUM), ("cloud_energy_j", SUM),
    ("device_energy_per_token_j", ratio("decode_energy_j", "generated_tokens")),
    ("uplink_bytes", SUM), ("downlink_bytes", SUM), ("uplink_messages", SUM), ("downlink_messages", SUM),
    ("radio_promotions", SUM), ("radio_sessions", SUM), ("network_trace_offset_s", FIRST), ("round_trips", SUM),
    ("tokens_not_uploaded", SUM), ("unverified_mismatch_tokens", SUM),
    ("cloud_fleet.phones_per_gpu", FIRST), ("cloud_fleet.slo_tpot_ms", FIRST),
    ("cloud_fleet.user_tpot_ms", CONCAT), ("cloud_fleet.user_tokens_committed", CONCAT),
    ("cloud_fleet.user_tpot_p50_ms", pct("cloud_fleet.user_tpot_ms", 50)),
    ("cloud_fleet.user_tpot_p90_ms", pct("cloud_fleet.user_tpot_ms", 90)),
    ("cloud_fleet.user_tpot_p99_ms", pct("cloud_fleet.user_tpot_ms", 99)),
    ("cloud_fleet.slo_attainment", wmean("cloud_fleet.phones_per_gpu")),
    ("cloud_fleet.gpu_utilization", wmean("makespan_s")), ("cloud_fleet.iterations", SUM),
    ("cloud_fleet.mean_batch_forwards", wmean("cloud_fleet.iterations")),
    ("cloud_fleet.mean_batch_tokens", wmean("cloud_fleet.iterations")),
    ("cloud_fleet.kv_blocks_total", FIRST), ("cloud_fleet.kv_peak_blocks", MAX), ("cloud_fleet.kv_refusals", SUM),
    ("cloud_fleet.admission_wait_p90_ms", MAX),
]


def rule_for(path: str) -> Any | None:
    """The declared rule of a dotted summary path, or None."""
    parts = path.split(".")
    for pattern, rule in RULES:
        pp = pattern.split(".")
        if len(pp) == len(parts) and all(fnmatchcase(a, b) for a, b in zip(parts, pp)):
            return rule
    return None


def _get(summary: dict, path: str) -> Any:
    cur: Any = summary
    for k in path.split("."):
        if not isinstance(cur, dict) or k not in cur:
            return None
        cur = cur[k]
    return cur


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _leaves(d: dict, prefix: str = ""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from _leaves(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def undeclared(summary: dict) -> list[str]:
    """Numeric or list entries of ``summary`` that no rule declares."""
    return [p for p, v in _leaves(summary) if (_number(v) or isinstance(v, list)) and rule_for(p) is None]


def merge_summaries(summaries: list[dict]) -> dict:
    """One summary from the windows' summaries, each entry combined by its rule (``later``
    entries keep the first window's value: the caller recomputes them)."""
    out = _merge(summaries, "")
    deferred: list[tuple[str, Any]] = []

    def walk(node: dict, prefix: str):
        for k, v in node.items():
            p = f"{prefix}{k}"
            if isinstance(v, dict):
                walk(v, p + ".")
            else:
                r = rule_for(p)
                if isinstance(r, tuple) and r[0] in ("ratio", "pct", "tci"):
                    deferred.append((p, r))
    walk(out, "")
    for p, r in deferred:          # from the combined totals or from the windows' values
        parent = _get(out, p.rsplit(".", 1)[0]) if "." in p else out
        key = p.rsplit(".", 1)[-1]
        if r[0] == "ratio":
            num = sum(float(_get(out, q) or 0.0) for q in r[1])
            den = sum(float(_get(out, q) or 0.0) for q in r[2])
            parent[key] = num / den if den else 0.0
        elif r[0] == "pct":
            xs = np.asarray(_get(out, r[1]) or [], dtype=float)
            xs = xs[np.isfinite(xs)]
            parent[key] = float(np.percentile(xs, r[2])) if xs.size else float("nan")
        else:
            # [low, high] over the windows' values (one sample each), cut at 0; None below the
            # t interval's minimum sample count
            parent[key] = t_interval([_get(s, r[1]) for s in summaries], center=_get(out, r[1]), lower=0.0)[1]
    return out


def _merge(values: list[dict], prefix: str, roots: list[dict] | None = None, idx: list[int] | None = None) -> dict:
    roots = values if roots is None else roots
    idx = list(range(len(values))) if idx is None else idx
    keys = list(dict.fromkeys(k for v in values if isinstance(v, dict) for k in v))
    out: dict[str, Any] = {}
    for k in keys:
        p = f"{prefix}{k}"
        have = [(i, v[k]) for i, v in zip(idx, values) if isinstance(v, dict) and k in v]
        vals = [x for _, x in have]
        if isinstance(vals[0], dict):
            out[k] = _merge(vals, p + ".", roots, [i for i, _ in have])
            continue
        rule = rule_for(p)
        if rule == CONCAT and all(isinstance(x, list) for x in vals):
            out[k] = [y for x in vals for y in x]
            continue
        if not all(_number(x) for x in vals):
            out[k] = vals[0]                  # strings, lists, flags, None: the first window's
            continue
        if isinstance(rule, tuple) and rule[0] == "wmean":
            w = [float(_get(roots[i], rule[1].replace("{key}", k)) or 0.0) for i, _ in have]
            tw = sum(w)
            out[k] = float(sum(wi * x for wi, x in zip(w, vals)) / tw) if tw > 0 else float(np.mean(vals))
            continue
        out[k] = _combine(rule, vals)
    return out


def _combine(rule: Any, vals: list) -> Any:
    if rule == SUM:
        return sum(vals)
    if rule == MAX:
        return max(vals)
    if rule == MIN:
        return min(vals)
    if rule == "maxabs":
        return max(vals, key=abs)
    if rule == LAST:
        return vals[-1]
    if rule in (FIRST, LATER) or isinstance(rule, tuple):   # ratio / pct / tci: filled in afterwards
        return vals[0]
    return float(np.mean(vals))               # MEAN, and undeclared numbers
