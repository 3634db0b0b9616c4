"""The results schema: every ``summary.json`` key (and so every ``results.csv`` column) with its
type, unit and meaning.

One registry, :data:`SUMMARY_KEYS`: a key adds one entry ``"dotted.key": (type, unit, meaning)``.
Nested dicts are dotted (``device_utilization.npu``), as ``results.csv`` flattens them; a segment
in angle brackets matches any one name (``<device>``: npu, pim, gpu, h2d, ...). Types: ``number``,
``integer``, ``string``, ``boolean``, ``array`` (a list, e.g. a ``[low, high]`` interval; left
out of results.csv), each possibly null (an undefined statistic). Units: SI unless the name
says otherwise; ``1`` for a count or ratio without unit.

``python -m ahasd_sim results-schema [--markdown | --json]`` prints it (docs/results-schema.md
and docs/results-schema.json are generated from it); tests/test_results_schema.py runs a short
case of every execution-mode family and policy and fails on a key without an entry.
"""
from __future__ import annotations

import json
from typing import Any

N, I, S, B, A = "number", "integer", "string", "boolean", "array"

#: results.csv columns that are not summary.json keys (``sweep/results.py``)
RESULTS_COLUMNS: dict[str, tuple[str, str, str]] = {
    "point": (S, "", "point folder name under points/ (the run identity hash)"),
    "status": (S, "", "ok (summary.json present), failed (error.json) or pending"),
    "variant": (S, "", "the sweep variant's name (sweeps with variants)"),
    "model_pair": (S, "", "draft/target model names (sweeps with model_pairs)"),
    "<config key>": (S, "", "each config key the sweep varies (run.mode, pim.ranks, ...), with its value"),
    "seed": (I, "1", "run.seed of the point"),
    "error_type": (S, "", "exception type of a failed point"),
    "error": (S, "", "one-line error message of a failed point"),
    "wall_time_s": (N, "s", "wall-clock time of the point's simulation (not reproducible)"),
}

_CI = "95% interval of {} (percentile bootstrap over trace windows, ratio of totals), or null with one window"

#: summary.json keys, dotted; see the module docstring
SUMMARY_KEYS: dict[str, tuple[str, str, str]] = {
    # ---- identity of the run
    "ahasd_sim_version": (S, "", "simulator version that produced the run"),
    "mode": (S, "", "execution mode (run.mode)"),
    "policy": (S, "", "drafting policy (run.policy)"),
    "verify_passes": (I, "1", "target verification passes (MoE offload)"),
    "cpu_expert_runs": (I, "1", "expert FFNs run on the host CPU (moe.expert_execution cpu or mixed)"),
    "drafter": (S, "", "kind of drafter the run used (run.drafter resolved): model, head or lookup"),
    "acceptance_source": (S, "", "where the run's acceptance comes from: the trace's own drafter, or a what-if (another drafter's trace)"),
    "draft_model": (S, "", "drafter model shape (run.draft_model): a zoo name or a model file"),
    "target_model": (S, "", "target model shape (run.target_model)"),
    "trace": (S, "", "acceptance trace file replayed (run.trace)"),
    "trace_sha256": (S, "", "SHA-256 of the trace file's bytes"),
    "trace_models.drafter": (S, "", "drafter that recorded the trace's acceptance"),
    "trace_models.target": (S, "", "target that recorded the trace's acceptance"),
    "seed": (I, "1", "seed of the run's RNG (run.seed)"),
    # ---- tokens and time
    "generated_tokens": (I, "tokens", "tokens generated, over every window"),
    "makespan_s": (N, "s", "simulated time of every window, prefill included"),
    "decode_makespan_s": (N, "s", "simulated decode time (makespan less prefill)"),
    "prefill_s": (N, "s", "simulated prefill time (drafter and target prompts)"),
    "prefills": (I, "1", "prompt prefills simulated (one per window and model)"),
    "throughput_tok_s": (N, "tok/s", "decode throughput: total tokens / total decode time over the windows"),
    "throughput_e2e_tok_s": (N, "tok/s", "end-to-end throughput: tokens / (decode + prefill) time"),
    "energy_j": (N, "J", "energy of every device, prefill included"),
    "prefill_energy_j": (N, "J", "energy of the prefills"),
    "decode_energy_j": (N, "J", "energy of decoding (energy_j less prefill)"),
    "energy_per_token_j": (N, "J/token", "decode energy per generated token"),
    "tokens_per_j": (N, "tok/J", "energy efficiency: generated tokens / decode energy"),
    "tokens_per_j_e2e": (N, "tok/J", "generated tokens / total energy, prefill included"),
    # ---- speculation
    "acceptance_rate": (N, "1", "accepted draft tokens / drafted tokens"),
    "mean_accepted_per_verify": (N, "tokens", "tokens committed per target verification"),
    "preverify_accepted_tokens": (I, "tokens", "tokens accepted by PIM pre-verification (TVC)"),
    "drafted_tokens": (I, "tokens", "draft tokens the drafter produced"),
    "accepted_tokens": (I, "tokens", "draft tokens the target accepted"),
    "rejected_tokens": (I, "tokens", "draft tokens the target rejected"),
    "killed_tokens": (I, "tokens", "draft tokens discarded unverified after a rejection before them"),
    "wasted_draft_tokens": (I, "tokens", "rejected + killed draft tokens"),
    "unverified_at_end": (I, "tokens", "draft tokens still unverified when the run ended"),
    "discarded_draft_forwards": (I, "1", "drafter forwards whose output was thrown away"),
    "verifications": (I, "1", "target verification forwards"),
    "rollbacks": (I, "1", "drafter rollbacks after a rejection"),
    "offpath_drafted_tokens": (I, "tokens", "tokens drafted past the last verified position (asynchronous drafting)"),
    "offpath_synthetic_tokens": (I, "tokens", "off-path tokens whose acceptance the trace does not hold (synthesised)"),
    "drafter_forwards": (I, "1", "drafter forward passes"),
    "reused_drafter_forwards": (I, "1", "drafter forwards reused after a verification instead of recomputed"),
    "duplicate_drafter_forwards": (I, "1", "drafter forwards computed twice for one position (always 0: a check)"),
    "npu_idle_draft_exhausted_s": (N, "s", "time the NPU waited because no draft tokens were ready"),
    "accepted_length_per_round": (N, "tokens", "tokens committed per verification round (draft trees)"),
    # ---- devices
    "device_busy_s.<device>": (N, "s", "time the device was busy"),
    "device_idle_s.<device>": (N, "s", "time the device was idle within the makespan"),
    "device_utilization.<device>": (N, "1", "busy time / makespan of the device"),
    "energy_breakdown_j.<device>.<kind>": (N, "J", "energy of a device, dynamic or static (leakage, background)"),
    "dynamic_energy_by_task_j.<task>.<device>": (N, "J", "dynamic energy of a task (draft, verify, prefill_*, "
                                                 "preverify, expert_copy, radio_*, ...) on a device"),
    "offchip_bytes": (N, "B", "bytes moved over the off-chip memory interface (host side)"),
    "offchip_bytes_by_task.<task>": (N, "B", "off-chip bytes of one task"),
    # ---- drafting policy (policy_stats: what the policy reports)
    "policy_stats.rounds": (I, "1", "drafting rounds"),
    "policy_stats.mean_draft_length": (N, "tokens", "mean draft length per round"),
    "policy_stats.draft_length_histogram.<n>": (I, "rounds", "rounds that drafted n tokens"),
    "policy_stats.round_acceptance_rate": (N, "1", "accepted / drafted, averaged over rounds"),
    "policy_stats.mean_accepted_length": (N, "tokens", "mean accepted draft tokens per round"),
    "policy_stats.mean_committed_per_round": (N, "tokens", "mean committed tokens per round (accepted + bonus)"),
    "policy_stats.discarded_tokens": (I, "tokens", "draft tokens discarded by the policy"),
    "policy_stats.lambda.<stat>": (N, "1", "AdaEDL's lambda: initial, final, min, max, mean value and updates"),
    "policy_stats.acceptance_rate_ema": (N, "1", "the policy's moving average of the acceptance rate at the end"),
    "policy_stats.entropy_threshold_nats_final": (N, "nats", "AdaEDL's entropy stop threshold at the end"),
    "policy_stats.entropy_threshold_nats": (N, "nats", "SVIP's entropy stop threshold"),
    "policy_stats.rounds_stopped_by_bound": (I, "rounds", "rounds stopped by the policy's acceptance bound"),
    "policy_stats.rounds_stopped_by_entropy": (I, "rounds", "rounds stopped by the entropy threshold"),
    "policy_stats.rounds_stopped_by_threshold": (I, "rounds", "rounds stopped by the predicted-acceptance threshold"),
    "policy_stats.k": (I, "tokens", "fixed draft length"),
    "policy_stats.algorithm": (S, "", "bandit algorithm (BanditSpec)"),
    "policy_stats.reward": (S, "", "bandit reward (BanditSpec)"),
    "policy_stats.arm_pulls.<n>": (I, "rounds", "rounds that used draft length n (BanditSpec arm)"),
    "policy_stats.arm_mean_reward.<n>": (N, "1", "mean reward of draft length n (BanditSpec arm)"),
    "policy_stats.arms": (A, "tokens", "draft lengths the bandit chooses among (BanditSpec arms)"),
    "policy_stats.best_arm": (I, "tokens", "draft length with the best mean reward at the end"),
    "policy_stats.invalid_outcomes": (I, "1", "bandit outcomes dropped as invalid"),
    "policy_stats.mean_predicted_acceptance": (N, "1", "SpecDec++'s mean predicted acceptance probability"),
    "policy_stats.predictor.coef.<feature>": (N, "1", "SpecDec++ acceptance predictor: logistic coefficient of a feature"),
    "policy_stats.predictor.features": (A, "", "SpecDec++ acceptance predictor: its input features"),
    "policy_stats.predictor.intercept": (N, "1", "SpecDec++ acceptance predictor: intercept"),
    "policy_stats.predictor.n": (I, "tokens", "SpecDec++ acceptance predictor: training tokens"),
    "policy_stats.predictor.accept_rate": (N, "1", "SpecDec++ acceptance predictor: acceptance rate of its training data"),
    "policy_stats.predictor.iterations": (I, "1", "SpecDec++ acceptance predictor: fitting iterations"),
    "policy_stats.predictor.converged": (B, "", "SpecDec++ acceptance predictor: the fit converged"),
    "policy_stats.predictor.log_loss": (N, "nats", "SpecDec++ acceptance predictor: training log loss"),
    "policy_stats.predictor.accuracy": (N, "1", "SpecDec++ acceptance predictor: training accuracy"),
    "policy_stats.mean_nodes_verified": (N, "nodes", "draft-tree nodes verified per round"),
    "policy_stats.mean_levels_drafted": (N, "levels", "draft-tree depth drafted per round"),
    "policy_stats.stops_by_rule": (I, "rounds", "rounds the tree policy's stop rule ended"),
    "policy_stats.gated_rounds": (I, "rounds", "rounds the expert-budget gate limited"),
    "policy_stats.mean_dinkelbach_iterations": (N, "1", "SpecFit's Dinkelbach iterations per round"),
    # ---- execution mode (mode_stats)
    "mode_stats.queue_ops": (I, "1", "pushes and pops of AHASD's hardware queues"),
    "mode_stats.queues.<queue>.capacity": (I, "entries", "capacity of a queue (unverified_draft, feedback)"),
    "mode_stats.queues.<queue>.pushes": (I, "1", "entries pushed into the queue"),
    "mode_stats.queues.<queue>.max_occupancy": (I, "entries", "largest occupancy of the queue"),
    "mode_stats.queues.<queue>.producer_blocked_s": (N, "s", "time the producer waited on a full queue"),
    "mode_stats.drafter_stall_s": (N, "s", "time the drafter stalled (queue full or waiting for feedback)"),
    "mode_stats.shared_rank_contention.model": (S, "", "how shared PIM ranks are arbitrated"),
    "mode_stats.shared_rank_contention.host_weight": (N, "1", "host (NPU) share of a contended rank"),
    "mode_stats.shared_rank_contention.lost_s.<device>": (N, "s", "time a device lost to rank contention"),
    "mode_stats.shared_rank_contention.contended_verifications": (I, "1", "verifications that met contention"),
    "mode_stats.shared_rank_contention.contended_drafts": (I, "1", "drafts that met contention"),
    "mode_stats.shared_rank_contention.contended_preverifications": (I, "1", "pre-verifications that met contention"),
    "mode_stats.edc.predictions": (I, "1", "EDC (early draft control) predictions"),
    "mode_stats.edc.continue_predictions": (I, "1", "EDC predictions to keep drafting"),
    "mode_stats.edc.suppressed_batches": (I, "1", "draft batches EDC suppressed"),
    "mode_stats.edc.resolved_predictions": (I, "1", "EDC predictions whose outcome became known"),
    "mode_stats.edc.correct_predictions": (I, "1", "EDC predictions that were right"),
    "mode_stats.edc.rollbacks": (I, "1", "rollbacks after a wrong EDC prediction"),
    "mode_stats.edc.prediction_accuracy": (N, "1", "correct / resolved EDC predictions"),
    "mode_stats.edc_idle_waits": (I, "1", "times the drafter idled until feedback (ahasd.edc_stop)"),
    "mode_stats.tvc.decisions": (I, "1", "TVC (target verification control) decisions"),
    "mode_stats.tvc.inserted": (I, "1", "pre-verifications TVC inserted"),
    "mode_stats.tvc.successful": (I, "1", "pre-verifications whose result was used"),
    "mode_stats.tvc.wasted": (I, "1", "pre-verifications whose result was not used"),
    "mode_stats.tvc.tokens_preverified": (I, "tokens", "tokens pre-verified on PIM"),
    "mode_stats.tvc.tokens_committed": (I, "tokens", "pre-verified tokens committed"),
    "mode_stats.tvc.early_rejections": (I, "1", "rejections found by pre-verification"),
    "mode_stats.tvc.npu_wait_for_preverify_s": (N, "s", "time the NPU waited for a pre-verification"),
    "mode_stats.preverify.kv": (S, "", "how pre-verification gets the target's KV (ahasd.preverify_kv)"),
    "mode_stats.preverify.recomputed_tokens": (I, "tokens", "KV entries recomputed for pre-verification"),
    "mode_stats.preverify.pim_waiting_for_kv_s": (N, "s", "time PIM waited for KV to be written"),
    "mode_stats.preverify.kv_causality_violations": (I, "1", "KV reads before their write (always 0: a check)"),
    "mode_stats.preverify.kv_reads_checked": (I, "1", "KV reads checked for causality"),
    "mode_stats.mapping_draft_len": (I, "tokens", "draft length the operator mapping was chosen for"),
    "mode_stats.mapping.<model>.<op>": (S, "", "device each operator of the draft/target forward runs on"),
    "mode_stats.tree_trace": (S, "", "draft-tree trace file replayed"),
    "mode_stats.tree_trace_label": (S, "", "target the tree trace routes through"),
    "mode_stats.tree_trace_constructed_example": (B, "", "the tree trace is a constructed example, not recorded"),
    "mode_stats.tree_trace_sha256": (S, "", "SHA-256 of the tree trace file"),
    "mode_stats.rounds": (I, "1", "verification rounds simulated"),
    "mode_stats.first_round": (I, "1", "first round of the trace replayed"),
    "mode_stats.memory_split.dense_weights_gib": (N, "GiB", "GPU memory for the target's dense weights"),
    "mode_stats.memory_split.drafter_weights_gib": (N, "GiB", "GPU memory for the drafter's weights"),
    "mode_stats.memory_split.kv_reserve_gib": (N, "GiB", "GPU memory reserved for KV"),
    "mode_stats.memory_split.workspace_gib": (N, "GiB", "GPU memory kept for activations and runtime workspace (moe.workspace_gib)"),
    "mode_stats.cost_calibration.union_scale": (N, "1", "online correction of the predicted per-layer expert-union size at the end of the run (1: uncorrected)"),
    "mode_stats.cost_calibration.miss_scale": (N, "1", "online correction of the predicted expert copies (misses) at the end of the run"),
    "mode_stats.cost_calibration.passes": (I, "1", "verified passes the calibration learned from"),
    "mode_stats.cost_calibration.kind": (S, "", "expert-cost calibration (moe.cost_calibration none)"),
    "mode_stats.drafter.kind": (S, "", "drafter of the MoE run: model (run.draft_model) or head (an EAGLE-style head of the target)"),
    "mode_stats.drafter.model": (S, "", "the drafter's shape name"),
    "mode_stats.expert_execution": (S, "", "where uncached experts run (moe.expert_execution): gpu (copied over H2D), cpu or mixed"),
    "mode_stats.routing": (S, "", "where expert routing comes from: recorded in the tree trace, or synthetic (drawn; a what-if)"),
    "mode_stats.memory_split.expert_cache_gib": (N, "GiB", "GPU memory left for the expert cache"),
    "mode_stats.memory_split.usable_gib": (N, "GiB", "usable GPU memory"),
    "mode_stats.memory_split.all_experts_gib": (N, "GiB", "size of every expert"),
    "mode_stats.memory_split.expert_bytes": (N, "B", "bytes of one expert"),
    "mode_stats.memory_split.cache_capacity_experts": (I, "experts", "experts the cache holds"),
    "mode_stats.memory_split.total_experts": (I, "experts", "experts of the model (layers x experts)"),
    "mode_stats.cache.policy": (S, "", "expert-cache replacement policy"),
    "mode_stats.cache.scope": (S, "", "expert-cache scope (per layer or global)"),
    "mode_stats.cache.capacity_experts": (I, "experts", "expert-cache capacity"),
    "mode_stats.cache.hits": (I, "1", "expert-cache hits"),
    "mode_stats.cache.misses": (I, "1", "expert-cache misses"),
    "mode_stats.cache.late_hits": (I, "1", "hits on an expert still being copied"),
    "mode_stats.cache.hit_rate": (N, "1", "hits / (hits + misses)"),
    "mode_stats.cache.evictions": (I, "1", "experts evicted"),
    "mode_stats.cache.streamed_misses": (I, "1", "misses served by streaming, not cached"),
    "mode_stats.cache.resident_at_end": (I, "experts", "experts resident at the end"),
    "mode_stats.profile.tokens": (I, "tokens", "tokens of the routing profile the cache was warmed with"),
    "mode_stats.profile.rounds": (A, "1", "trace rounds the routing profile was taken from [first, last)"),
    "mode_stats.profile.overlaps_replay": (B, "", "the profile's tokens overlap the replayed ones"),
    "mode_stats.predictor.kind": (S, "", "expert predictor kind"),
    "mode_stats.predictor.node_recall": (N, "1", "experts predicted per node / experts used"),
    "mode_stats.predictor.union_recall": (N, "1", "recall of the union of predicted experts"),
    "mode_stats.predictor.union_precision": (N, "1", "precision of the union of predicted experts"),
    "mode_stats.predictor.train_tokens_seen": (I, "tokens", "tokens the learned predictor trained on"),
    "mode_stats.next_layer_wasted_copies": (I, "1", "prefetched next-layer experts never used"),
    "mode_stats.overlap": (S, "", "copy/compute overlap of the MoE offload"),
    "mode_stats.moe_kernel": (S, "", "MoE kernel model (fused or per-expert loop)"),
    "mode_stats.drafter_device": (S, "", "device the drafter runs on"),
    "mode_stats.tree_policy": (S, "", "draft-tree selection policy of a tree mode (run.policy)"),
    "mode_stats.verify_on": (S, "", "device a tree mode verifies on (npu, or pim with k input vectors per weight read)"),
    "mode_stats.kv_kept_nodes": (I, "nodes", "tree nodes whose KV was kept (the accepted paths)"),
    "mode_stats.kv_discarded_nodes": (I, "nodes", "tree nodes whose KV was discarded (rejected branches)"),
    "mode_stats.verify_time_model_error.<stat>": (N, "1", "relative error of the verify-time model: median, worst, n"),
    "mode_stats.rounds_by_option.<option>": (I, "rounds", "mobile-cloud rounds by option (split, cloud_sd, cloud_ar, ...)"),
    "mode_stats.cloud_sessions": (I, "1", "cloud sessions opened"),
    "mode_stats.estimates_at_end.<name>": (N, "1", "the mobile-cloud controller's estimates at the end "
                                           "(acceptance, windows, tokens per option; net_rt_s and ar_interval_s in s)"),
    # ---- platform
    "platform.memory_peak_bandwidth_gb_s": (N, "GB/s", "peak memory bandwidth"),
    "platform.memory_effective_bandwidth_gb_s": (N, "GB/s", "effective memory bandwidth"),
    "platform.gpu_effective_bandwidth_gb_s": (N, "GB/s", "effective GPU memory bandwidth"),
    "platform.npu_peak_tops": (N, "TOPS", "NPU peak INT8 throughput"),
    "platform.pim_draft_ranks": (I, "ranks", "PIM ranks holding the drafter"),
    "platform.pim_target_ranks": (I, "ranks", "PIM ranks holding the target"),
    "platform.pim_shared_ranks": (I, "ranks", "PIM ranks holding both"),
    "platform.pim_throttle": (N, "1", "PIM rate factor under the DRAM power limit"),
    "platform.pim_placement.policy": (S, "", "PIM placement used"),
    "platform.pim_placement.chosen_by": (S, "", "how the placement was chosen (tuned, pinned, ...)"),
    "platform.pim_placement.objective": (S, "", "metric the placement was tuned for"),
    "platform.pim_placement.tuning_trace": (S, "", "trace the placement was tuned on"),
    "platform.pim_placement.candidates.<placement>": (N, "tok/s", "tuning result of each candidate placement"),
    "pim_placement.policy": (S, "", "PIM placement used"),
    "pim_placement.chosen_by": (S, "", "how the placement was chosen (tuned, pinned, ...)"),
    "pim_placement.objective": (S, "", "metric the placement was tuned for"),
    "pim_placement.tuning_trace": (S, "", "trace the placement was tuned on"),
    "pim_placement.candidates.<placement>": (N, "tok/s", "tuning result of each candidate placement"),
    "dram_power.limit_w": (N, "W", "DRAM package power limit pim.dram_power_limit_w (null: none)"),
    "dram_power.kind": (S, "", "how the limit applies (pim.power_limit_kind): instantaneous (per operator) or mean (over the run)"),
    "dram_power.static_w": (N, "W", "the package's static power: DRAM background + PIM/AAU/GTS leakage"),
    "dram_power.background_w": (N, "W", "DRAM background power"),
    "dram_power.host_io_w": (N, "W", "DRAM power of the host's streams at the rate they are drawn"),
    "dram_power.pim_achieved_w": (N, "W", "PIM power at the rate its command sequence achieves"),
    "dram_power.pim_full_rate_w": (N, "W", "DRAM power with every PIM rank at the ideal full rate (reference only)"),
    "dram_power.host_overlaps_pim": (B, "", "whether the mode streams host I/O while PIM computes (its share of the budget is kept)"),
    "dram_power.pim_budget_w": (N, "W", "power the instantaneous cap leaves PIM (null: no instantaneous cap)"),
    "dram_power.host_io_budget_w": (N, "W", "power the instantaneous cap leaves the host's streams (null: no instantaneous cap)"),
    "dram_power.host_rate_fraction": (N, "1", "fraction of its bandwidth the host's streams keep under the cap"),
    "dram_power.peak_bound_w": (N, "W", "upper bound of the package's power at any moment under an instantaneous cap (null: none)"),
    "dram_power.mean_w": (N, "W", "mean DRAM package power over the run (its energy / makespan)"),
    "dram_power.mean_dilation": (N, "1", "factor a mean cap slowed the run by (1: not slowed)"),
    # ---- MoE offload
    "expert_h2d_bytes": (N, "B", "expert bytes copied host to device"),
    "expert_h2d_bytes_demand": (N, "B", "expert bytes copied on demand (misses)"),
    "expert_h2d_bytes_prefetch": (N, "B", "expert bytes prefetched"),
    "expert_cache_hit_rate": (N, "1", "expert-cache hit rate"),
    "experts_touched_per_verify": (N, "experts", "distinct experts a verification touches, all layers"),
    "experts_touched_per_layer_per_verify": (N, "experts", "distinct experts per layer per verification"),
    "expert_copy_stall_s": (N, "s", "time compute waited for expert copies"),
    # ---- mobile-cloud
    "tpot_s": (N, "s", "time per output token of this phone"),
    "ttft_s": (N, "s", "time to the first committed token (prompt upload and cloud prefill included with hyco.cloud_prefill)"),
    "radio_sessions": (N, "1", "radio sessions charged a promotion and a tail (network.radio_session_tokens tokens each)"),
    "acceptance_basis": (S, "", "whether acceptance is measured (the trace's pair is the run's pair) or a what-if"),
    "tpot_ci95_s": (A, "s", "95% t-interval [low, high] of TPOT over the TPOT windows (cut at 0; null below 3 windows)"),
    "tpot_window_s": (A, "s", "TPOT of each TPOT window"),
    "cloud_pricing": (S, "", "cloud pricing model used for cloud_cost_usd"),
    "cloud_cost_usd": (N, "USD", "cloud cost of the run"),
    "cloud_cost_usd_per_1k_tokens": (N, "USD/1k tokens", "cloud cost per 1000 generated tokens"),
    "cloud_cost_usd_per_1k_tokens_by_pricing.<pricing>": (N, "USD/1k tokens", "cloud cost per 1000 tokens under each pricing"),
    "cloud_gpu_busy_s": (N, "s", "cloud GPU busy time for this phone"),
    "cloud_gpu_share_s": (N, "s", "this phone's share of cloud GPU time (batched forwards split)"),
    "cloud_queue_wait_s": (N, "s", "time this phone's requests queued at the cloud"),
    "cloud_batch_wait_s": (N, "s", "time this phone's requests waited to be batched"),
    "cloud_calls": (I, "1", "requests to the cloud"),
    "cloud_tokens_processed": (I, "tokens", "tokens the cloud processed for this phone"),
    "cloud_energy_j": (N, "J", "cloud GPU energy for this phone (not in energy_j)"),
    "device_energy_per_token_j": (N, "J/token", "phone energy per token (= energy_per_token_j)"),
    "uplink_bytes": (I, "B", "bytes sent to the cloud"),
    "downlink_bytes": (I, "B", "bytes received from the cloud"),
    "uplink_messages": (I, "1", "messages sent"),
    "downlink_messages": (I, "1", "messages received"),
    "radio_promotions": (I, "1", "radio state promotions (idle to connected)"),
    "network_trace_offset_s": (N, "s", "start offset into the network trace"),
    "round_trips": (I, "1", "network round trips"),
    "tokens_not_uploaded": (I, "tokens", "tokens committed at the phone without cloud verification"),
    "unverified_mismatch_tokens": (I, "tokens", "of those, tokens the target would have rejected"),
    "cloud_fleet.phones_per_gpu": (I, "phones", "phones sharing the cloud GPU"),
    "cloud_fleet.kv_blocks_total": (I, "blocks", "KV-cache blocks of the cloud GPU's pool (cloud.kv_cache_gib; 0: no limit)"),
    "cloud_fleet.kv_peak_blocks": (I, "blocks", "most KV-cache blocks in use at once"),
    "cloud_fleet.kv_refusals": (I, "1", "requests the KV admission made wait for blocks"),
    "cloud_fleet.admission_wait_p90_ms": (N, "ms", "90th percentile of the phones' total wait for KV admission"),
    "cloud_fleet.user_tpot_p50_ms": (N, "ms", "median per-phone TPOT"),
    "cloud_fleet.user_tpot_p90_ms": (N, "ms", "90th percentile per-phone TPOT"),
    "cloud_fleet.user_tpot_p99_ms": (N, "ms", "99th percentile per-phone TPOT"),
    "cloud_fleet.user_tpot_ms": (A, "ms", "TPOT of each phone on the cloud GPU"),
    "cloud_fleet.user_tokens_committed": (A, "tokens", "tokens each phone committed"),
    "cloud_fleet.slo_tpot_ms": (N, "ms", "TPOT service-level objective"),
    "cloud_fleet.slo_attainment": (N, "1", "phones meeting the SLO / phones"),
    "cloud_fleet.gpu_utilization": (N, "1", "cloud GPU busy time / wall time"),
    "cloud_fleet.iterations": (I, "1", "cloud batching iterations"),
    "cloud_fleet.mean_batch_forwards": (N, "1", "forwards per batch"),
    "cloud_fleet.mean_batch_tokens": (N, "tokens", "tokens per batch"),
    # ---- statistics over trace windows
    "windows": (I, "1", "trace windows simulated (the samples of the intervals)"),
    "window_start_prompts": (A, "1", "first prompt index of each trace window"),
    "window_tokens": (I, "tokens", "tokens generated per window"),
    "window_basis": (S, "", "what one window is, where not a trace slice"),
    "ci_method": (S, "", "how the 95% intervals are computed"),
    "throughput_tok_s_ci95": (A, "tok/s", _CI.format("throughput_tok_s")),
    "throughput_tok_s_ci95_low": (N, "tok/s", "lower end of throughput_tok_s_ci95"),
    "throughput_tok_s_ci95_high": (N, "tok/s", "upper end of throughput_tok_s_ci95"),
    "throughput_e2e_tok_s_ci95": (A, "tok/s", _CI.format("throughput_e2e_tok_s")),
    "throughput_e2e_tok_s_ci95_low": (N, "tok/s", "lower end of throughput_e2e_tok_s_ci95"),
    "throughput_e2e_tok_s_ci95_high": (N, "tok/s", "upper end of throughput_e2e_tok_s_ci95"),
    "tokens_per_j_ci95": (A, "tok/J", _CI.format("tokens_per_j")),
    "tokens_per_j_ci95_low": (N, "tok/J", "lower end of tokens_per_j_ci95"),
    "tokens_per_j_ci95_high": (N, "tok/J", "upper end of tokens_per_j_ci95"),
    "tokens_per_j_e2e_ci95": (A, "tok/J", _CI.format("tokens_per_j_e2e")),
    "tokens_per_j_e2e_ci95_low": (N, "tok/J", "lower end of tokens_per_j_e2e_ci95"),
    "tokens_per_j_e2e_ci95_high": (N, "tok/J", "upper end of tokens_per_j_e2e_ci95"),
    "energy_per_token_j_ci95": (A, "J/token", _CI.format("energy_per_token_j")),
    "energy_per_token_j_ci95_low": (N, "J/token", "lower end of energy_per_token_j_ci95"),
    "energy_per_token_j_ci95_high": (N, "J/token", "upper end of energy_per_token_j_ci95"),
}


def _matches(pattern: list[str], parts: list[str]) -> bool:
    return all(p == k or (p.startswith("<") and p.endswith(">")) for p, k in zip(pattern, parts))


def describe(key: str) -> tuple[str, str, str] | None:
    """(type, unit, meaning) of a dotted summary key, or None when the schema lacks it."""
    if key in SUMMARY_KEYS:
        return SUMMARY_KEYS[key]
    parts = key.split(".")
    for pattern, entry in SUMMARY_KEYS.items():
        pp = pattern.split(".")
        if len(pp) == len(parts) and _matches(pp, parts):
            return entry
    return None


def _is_group(key: str) -> bool:
    """``key`` is a mapping of the schema (an empty one in a summary: no devices, no candidates)."""
    parts = key.split(".")
    return any(len(pp) > len(parts) and _matches(pp, parts) for pp in (p.split(".") for p in SUMMARY_KEYS))


def leaf_keys(summary: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Every leaf of ``summary``, dotted (lists are leaves, as summary.json holds them)."""
    out: dict[str, Any] = {}
    for k, v in summary.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(leaf_keys(v, key + "."))
        else:
            out[key] = v
    return out


def undescribed(summary: dict[str, Any]) -> list[str]:
    """Keys of ``summary`` without a schema entry."""
    return sorted(k for k, v in leaf_keys(summary).items()
                  if describe(k) is None and not (v == {} and _is_group(k)))


def markdown() -> str:
    """docs/results-schema.md."""
    lines = ["# Results schema", "",
             "Generated by `python -m ahasd_sim results-schema --markdown`; do not edit by hand (the entries "
             "live in `ahasd_sim/metrics/schema.py`). Every `summary.json` key, dotted as `results.csv` "
             "flattens nested values (`device_utilization.npu`); `<name>` stands for any one name. "
             "Keys appear where the mode or policy reports them. Arrays are in summary.json only. "
             "Machine-readable: [results-schema.json](results-schema.json).", "",
             "## summary.json (and results.csv metric columns)", "",
             "| key | type | unit | meaning |", "| --- | --- | --- | --- |"]
    lines += [f"| `{k}` | {t} | {u or '-'} | {m} |" for k, (t, u, m) in SUMMARY_KEYS.items()]
    lines += ["", "## results.csv columns that are not summary keys", "",
              "| column | type | unit | meaning |", "| --- | --- | --- | --- |"]
    lines += [f"| `{k}` | {t} | {u or '-'} | {m} |" for k, (t, u, m) in RESULTS_COLUMNS.items()]
    return "\n".join(lines) + "\n"


def json_schema() -> str:
    """docs/results-schema.json: a JSON Schema (draft 2020-12) of summary.json's dotted keys."""
    def prop(t: str, u: str, m: str) -> dict[str, Any]:
        return {"type": [t, "null"], "description": m, **({"unit": u} if u else {})}
    fixed = {k: prop(*v) for k, v in SUMMARY_KEYS.items() if "<" not in k}
    pattern = {"^" + ".".join("[^.]+" if p.startswith("<") else p.replace(".", r"\.") for p in k.split(".")) + "$":
               prop(*v) for k, v in SUMMARY_KEYS.items() if "<" in k}
    doc = {"$schema": "https://json-schema.org/draft/2020-12/schema",
           "title": "ahasd_sim summary.json, flattened (dotted keys, as results.csv columns)",
           "type": "object", "properties": fixed, "patternProperties": pattern,
           "additionalProperties": False,
           "$defs": {"results_csv_columns": {k: prop(*v) for k, v in RESULTS_COLUMNS.items()}}}
    return json.dumps(doc, indent=1, sort_keys=False) + "\n"
