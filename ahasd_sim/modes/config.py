"""Config sections of the execution modes and AHASD's controls."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..config.fields import param
from ..config.registry import config_section

PAPER = "AHASD paper, https://arxiv.org/abs/2604.25326"
ARTIFACT = "AHASD artifact headers, https://github.com/MAdrid1011/AHASD (never executed; spec only)"


@dataclass
class EdcConfig:
    """Entropy-History-Aware Drafting Control (LEHT/LCEHT/LLR/PHT)."""

    entropy_max_nats: float = param(10.0, doc="H_max of the 8 equal entropy buckets", unit="nats", gt=0,
                                    source=f"{ARTIFACT} (H_max = 10); ln 32000 = 10.37 nats")
    history_len: int = param(8, doc="LEHT/LCEHT entries", ge=2, le=8, source=PAPER,
                             bound_reason="the EDC's history index packs at most 8 entries (paper section 5)")
    bucket_bits: int = param(3, doc="bits per bucket id (8 buckets)", ge=1, le=3, source=PAPER,
                             bound_reason="8 entropy buckets need 3 bits")
    llr_bits: int = param(3, doc="leading length register width (saturates at 2^bits - 1)", ge=1, le=3, source=PAPER,
                          bound_reason="the paper's 3-bit register")
    pht_counter_init: int = param(2, doc="initial value of the 2-bit PHT counters", ge=0, le=3, source=ARTIFACT,
                                  bound_reason="a 2-bit counter holds 0-3")
    killed_batch_update: str = param("decrement", doc="PHT update for batches killed by an earlier rejection",
                                     choices=("decrement", "skip"), source="modeling.md decision 2")
    history_order: str = param("shift_newest_h0", doc="LEHT layout: shift register with newest in H0, or the artifact's circular buffer",
                               choices=("shift_newest_h0", "circular"), source="modeling.md decision 1")
    decision_latency_ns: float = param(50.0, doc="CPU time of one EDC prediction", unit="ns", ge=0,
                                       source="modeling.md decisions (fixed ~50-100 ns per control decision)")
    decision_energy_nj: float = param(0.05, doc="energy of one EDC prediction", unit="nJ", ge=0, source=ARTIFACT)


@dataclass
class TvcConfig:
    """Time-Aware Pre-Verification Control (NVCT/PDCT/PVCT/NCR)."""

    table_entries: int = param(4, doc="entries of NVCT/PDCT/PVCT FIFOs", ge=1, le=64, source=ARTIFACT,
                               bound_reason="16x the artifact's 4 entries; the area model is for small FIFOs")
    max_preverify_tokens: int = param(8, doc="cap on L_pv", ge=1, source="modeling.md decision 4 (optional cap 8)")
    preload_kv_len: int = param(512, doc="KV length at which the tables are preloaded from the analytic cost model (offline profile)",
                                unit="tokens", ge=1, source="references.md#ahasd-controls: tables preloaded with offline-profiled cycles")
    preload_draft_len: int = param(4, doc="draft length used to preload PDCT/PVCT", unit="tokens", ge=1)
    decision_latency_ns: float = param(100.0, doc="CPU time of one TVC decision", unit="ns", ge=0,
                                       source="modeling.md decisions")
    decision_energy_nj: float = param(0.1, doc="energy of one TVC decision", unit="nJ", ge=0, source=ARTIFACT)


@config_section("ahasd")
@dataclass
class AhasdConfig:
    """Task-level asynchronous execution (``async``) and AHASD's controls (``ahasd``).

    AAU and GTS are hardware: switch them with ``pim.aau.enabled`` / ``pim.gts.enabled``.
    """

    edc: bool = param(True, doc="enable EDC (mode ahasd)")
    tvc: bool = param(True, doc="enable TVC pre-verification (mode ahasd)")
    unverified_queue_batches: int = param(64, doc="capacity of the unverified-draft queue; the drafter blocks when full",
                                          ge=1, source=f"{ARTIFACT}; blocking is our decision (references.md#ahasd-controls)")
    feedback_queue_entries: int = param(32, doc="capacity of the feedback queue", ge=1, source=ARTIFACT)
    preverify_queue_entries: int = param(16, doc="capacity of the CPU's pre-verification queue, in draft batches: "
                                         "a pre-verification covers tokens of at most this many pending batches",
                                         ge=1, source=ARTIFACT)
    preverify_kv: str = param("layer_pipelined", doc="how pre-verification gets the target KV of the tokens the NPU is "
                              "still verifying (it must never read KV before the NPU task writing it ends): "
                              "recompute = PIM also runs the target over the NPU's in-flight tokens and rebuilds "
                              "their KV (TVC counts that cost); wait = PIM starts only when the NPU pass has "
                              "ended and the whole prefix KV exists; layer_pipelined = PIM trails the NPU layer by "
                              "layer, reading each layer's KV once the NPU has written it, and stays in target "
                              "mode (GTS) for the whole NPU pass",
                              choices=("recompute", "wait", "layer_pipelined"),
                              source="docs/modeling.md; default = the causal option with the highest AHASD throughput on "
                              "the tuning trace traces/qwc-0.5b-1.5b_t1.npz (10 windows: layer_pipelined 11.24, "
                              "wait 10.52, recompute 10.00 tok/s), not on the reported greedy trace ("
                              "docs/modeling.md, 'Pre-verification and KV')")
    edc_stop: str = param("draft_one_more", doc="what the drafter does when EDC says stop and TVC does not "
                          "pre-verify: draft_one_more = draft one more batch, then ask again (paper); "
                          "idle_until_feedback = PIM idles until the next NPU result (saves energy)",
                          choices=("draft_one_more", "idle_until_feedback"),
                          source="AHASD paper (draft_one_more); idle_until_feedback is the energy-saving option")
    max_verify_tokens: int = param(32, doc="most draft tokens the NPU verifies in one pass", ge=1,
                                   source="modeling.md decisions (cap ~32 tokens)")
    feedback_latency_ns: float = param(20.0, doc="CPU polling delay before the drafter sees feedback (a rollback or "
                                       "a verification result) (20 cycles at 1 GHz)",
                                       unit="ns", ge=0, source=ARTIFACT)
    queue_op_energy_pj: float = param(1.0, doc="energy of one queue push or pop", unit="pJ", ge=0,
                                      source="assumption: 1-cycle register-file access (0.5 mW at 1 GHz = 0.5 pJ/cycle, artifact)")
    edc_config: EdcConfig = field(default_factory=EdcConfig)
    tvc_config: TvcConfig = field(default_factory=TvcConfig)


@config_section("operator_sync")
@dataclass
class OperatorSyncConfig:
    """SpecPIM-like operator-level synchronous execution."""

    mapping_draft_len: int = param(4, doc="draft length for which the static operator mapping is searched",
                                   ge=1, source="SADDLE (HPCA'26) measured SpecPIM peaking at gamma=4; AHASD artifact uses 8")
    barrier_ns: float = param(100.0, doc="synchronisation cost of one operator-tier barrier between NPU and PIM",
                              unit="ns", ge=0, source="assumption: one host-side doorbell/poll round trip")


@config_section("baseline")
@dataclass
class BaselineConfig:
    """Single-device baselines (``autoregressive``, ``gpu_only``)."""

    device: str = param("auto", doc="device running autoregressive decoding: gpu, npu, pim (the target on "
                        "every PIM rank: no drafter is loaded), or auto = the device of the platform whose "
                        "one-token target forward at auto_reference_kv_tokens is fastest (analytic, from the "
                        "cost model: no trace data is used to choose)",
                        choices=("auto", "gpu", "npu", "pim"),
                        source="fair baselines: the best autoregressive decoder a designer would build on this hardware")
    auto_reference_kv_tokens: int = param(512, doc="KV length of the one-token forward that baseline.device auto "
                                          "compares across devices", unit="tokens", ge=1,
                                          source="mid-window KV length of a 1024-token generation")


@config_section("tuning")
@dataclass
class TuningConfig:
    """Choices a mode makes for itself (``pim.partition_policy: auto``), measured on data that the
    reported run does not use (every competitor gets its own best, chosen out of sample)."""

    trace: str = param("traces/qwc-0.5b-1.5b_t1.npz",
                       doc="trace the choices are measured on (relative paths as run.trace); it should not be "
                       "run.trace (a warning says so when it is)",
                       source="the shipped T=1 (sampled) trace of the same Qwen2.5-Coder pair: other prompts' "
                       "draws than the default greedy trace the reported results replay")
    windows: int = param(2, doc="trace windows of the tuning runs", ge=2,
                         source="2 windows spread over the tuning trace (>= 2: one window would start at "
                         "run.trace_start_prompt)")
    generated_tokens: int = param(512, doc="tokens per tuning window", unit="tokens", ge=16)
    objective: str = param("throughput_tok_s", doc="what the best choice maximises",
                           choices=("throughput_tok_s", "tokens_per_j"),
                           source="throughput: the headline metric of the AHASD paper")


@config_section("lookup")
@dataclass
class LookupConfig:
    """The model-free drafter (``run.drafter: lookup``): at every drafted position, the longest
    suffix of the context (max_ngram down to min_ngram tokens) that occurred earlier proposes the
    token that followed its latest occurrence (a suffix match re-taken per token). It runs on the
    application CPU: each drafted token costs one hash probe per n-gram size tried."""

    max_ngram: int = param(3, doc="longest context suffix matched", unit="tokens", ge=1, le=16,
                           source="prompt lookup decoding's default max_ngram_size = 3, "
                           "https://github.com/apoorvumang/prompt-lookup-decoding",
                           bound_reason="longer suffixes rarely recur; 16 bounds the probes per token")
    min_ngram: int = param(1, doc="shortest context suffix matched (below it: no proposal)", unit="tokens", ge=1,
                           le=16, source="prompt lookup decoding tries sizes down to 1",
                           bound_reason="at most max_ngram's ceiling")
    probe_ns: float = param(100.0, doc="CPU time of one hash-table probe (an n-gram key, missing the caches)",
                            unit="ns", ge=0,
                            source="derivation: one LPDDR5 random read on a phone SoC, ~100 ns; the same order as "
                            "the ~50-100 ns per control decision of modeling.md")
    cpu_power_w: float = param(1.0, doc="power of the CPU core while it matches (dynamic energy = power x time)",
                               unit="W", ge=0,
                               source="assumption: one big core of a phone SoC at a moderate clock, order 1 W")


@config_section("soc_tree")
@dataclass
class SocTreeConfig:
    """Draft trees on the mobile SoC (modes ``tree_sync``, ``tree_pim``) and the hardware-aware
    selector ``hw_tree`` (its parameters are the ones below)."""

    trace: str = param("traces/qwc-0.5b-1.5b_tree_moe.npz",
                       doc="tree trace the tree modes replay (per-node target verdicts; its MoE routing is not "
                       "used on the SoC); relative paths as run.trace",
                       source="the shipped EAGLE-2-style tree trace of the Qwen2.5-Coder 0.5B/1.5B pair: 24 of "
                       "the chain trace's prompts, their first 48 tokens (traces/README.md)")
    prompts_per_window: int = param(2, doc="consecutive prompts of the tree trace per window (one sample of the "
                                    "95% CIs)", ge=1, source="docs/modeling.md, Statistics: one window is one sample")
    max_depth: int = param(6, doc="most draft levels of hw_tree", ge=1,
                           source="the tree trace's recorded depth (header tree.depth = 6)")
    max_nodes: int = param(64, doc="most verified draft nodes of hw_tree", ge=1,
                           source="the tree trace's node budget (header tree.node_budget = 64)")
    min_path_prob: float = param(0.0, doc="hw_tree prunes nodes whose cumulative draft confidence is below this "
                                 "before its search (LP-Spec-like pruning; 0 = off)", ge=0, le=1,
                                 source="LP-Spec (ICCAD'25): hardware-aware draft-tree pruning on LPDDR5-PIM; the "
                                 "threshold form is ours", bound_reason="a probability")
