"""Config sections ``moe`` (expert offload workload, GPU memory split, cache, predictor) and
``tree_policy`` (tree-selection policies: eagle_fixed, eagle_dynamic, specfit, ecospec)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..config.fields import param
from ..config.registry import config_section

MOE_NOTE = "docs/references.md#moe-offload (SpecFit/EcoSpec abstracts; our reconstruction)"
EAGLE_SRC = "https://arxiv.org/abs/2406.16858 ; https://github.com/SafeAILab/EAGLE"
SPECFIT_SRC = "SpecFit abstract (code announced at https://github.com/Chlience/SpecFit); [R] reconstruction"
ECOSPEC_SRC = "https://arxiv.org/abs/2607.12696 (abstract only); [R] reconstruction"


def _section(cls: type, doc: str):
    return dataclasses.field(default_factory=cls, metadata={"doc": doc, "unit": None, "source": None,
                                                            "ge": None, "gt": None, "le": None,
                                                            "lt": None, "choices": None})


@config_section("moe")
@dataclass
class MoeConfig:
    """MoE expert offload (mode ``moe_offload``): experts in host memory, a GPU expert cache."""

    tree_trace: str = param("", doc="tree trace file (draft trees with per-node verdicts and MoE routing); "
                                    "relative paths: to the current directory, then the config, then the repository")
    routing: str = param("trace", doc="expert routing of the tree nodes: trace (recorded; the target's shape must "
                         "match it) or synthetic (drawn for the target's layers / experts / top-k on the trace's trees; "
                         "see synthetic_*; every report says so)", choices=("trace", "synthetic"),
                         source="[R] ahasd_sim/moe/synthetic.py")
    synthetic_locality: float = param(0.19, doc="routing synthetic: probability that each of a token's k experts "
                                      "at a layer is one of the previous token's there (consecutive-token reuse)",
                                      ge=0, le=1, source="[C] fitted to the shipped MoEfied trace: consecutive "
                                      "committed tokens share 0.365 of their experts against 0.216 for random "
                                      "pairs, 0.365 = p + (1 - p) 0.216 -> p = 0.19; no published Qwen3-30B-A3B "
                                      "figure; swept by scripts/moe_study.py")
    synthetic_zipf_s: float = param(0.45, doc="routing synthetic: expert popularity per layer is Zipf(s) over a "
                                    "random order (0 = perfectly balanced)", ge=0, le=5,
                                    source="[C] median per-layer Zipf slope of the shipped MoEfied trace's committed "
                                    "routing (0.29-0.65, 10-90%); load-balanced models (Qwen3 is trained with a "
                                    "global-batch balance loss) are flatter; swept by scripts/moe_study.py")
    synthetic_seed: int = param(0, doc="routing synthetic: seed of the routing draw", ge=0, le=2 ** 63 - 1,
                                bound_reason="a seed is a 64-bit integer")
    workspace_gib: float = param(1.0, doc="GPU memory held for activations, CUDA graphs and copy staging "
                                 "(memory split; cache_capacity_unit auto leaves it free)", unit="GiB", ge=0, le=1024,
                                 source="[C] assumption: ~1 GiB runtime workspace at batch 1")
    trace_start_round: int = param(0, doc="first tree round replayed", ge=0)
    trace_end_round: int = param(0, doc="replay stops before this round (the run ends there even if "
                                 "run.generated_tokens is not reached); 0: no end round", ge=0)
    profile_start_round: int = param(-1, doc="first of the profile_rounds profile rounds; -1: just before "
                                     "the replayed rounds, else the trace's last rounds", ge=-1)
    weight_bytes_per_param: float = param(2.0, doc="target/drafter weight precision on the GPU (2 = BF16, "
                                          "0.5 = INT4); expert bytes follow", unit="B/param", gt=0,
                                          source="BF16 serving default (Qwen3-30B-A3B expert 9.44 MB BF16)")
    kv_bytes_per_elem: float = param(2.0, doc="KV-cache element width", unit="B", gt=0)
    kv_reserve_tokens: int = param(4096, doc="KV tokens reserved in GPU memory (memory split)", unit="tokens",
                                   ge=0, source="assumption: one 4k-token context")
    cache_capacity: float = param(0.25, doc="expert-cache capacity, in the unit of cache_capacity_unit", ge=0)
    cache_capacity_unit: str = param("fraction", doc="fraction of all experts, experts, or GiB; auto: every "
                                     "expert that fits the GPU memory left after the dense weights, the drafter, "
                                     "the KV reserve and the workspace (cache_capacity ignored)",
                                     choices=("fraction", "experts", "gib", "auto"))
    cache_policy: str = param("lru", doc="eviction policy (activation: MoE-Infinity-style activation-aware, "
                              "lowest decayed per-pass activation count evicted first)",
                              choices=("lru", "lfu", "activation", "static"),
                              source=MOE_NOTE + "; MoE-Infinity https://arxiv.org/abs/2401.14361")
    cache_scope: str = param("per_layer", doc="capacity / layers per layer (what offloading runtimes keep), or "
                             "one capacity shared by all layers", choices=("global", "per_layer"),
                             source="per-layer expert caches: MoE-Infinity, Mixtral-offloading "
                             "(https://arxiv.org/abs/2312.17238)")
    activation_half_life_passes: float = param(4.0, doc="cache_policy activation: half-life of an expert's "
                                               "activation count", unit="passes", gt=0,
                                               source="[R] stands in for MoE-Infinity's per-request "
                                               "activation matrix (a request spans a few rounds)")
    cache_initial: str = param("popular", doc="initial contents: most popular experts of the profile rounds, or empty",
                               choices=("popular", "empty"))
    profile_rounds: int = param(64, doc="rounds (before the replayed ones if possible, else after) whose "
                                "committed-token routing gives the popularity profile (static cache, initial fill)",
                                unit="rounds", ge=0)
    overlap: str = param("none", doc="none: a layer's missing experts are copied after its router runs; "
                         "next_layer: copies for layer l+1 start with layer l (routing known one layer "
                         "ahead, a pre-gating oracle)", choices=("none", "next_layer"),
                         source="[R] per-layer copy/compute overlap (Pre-gated MoE / SP-MoE style)")
    expert_execution: str = param("gpu", doc="where a verification's non-resident experts run: gpu (copied "
                                  "over H2D into the cache, then run on the GPU), cpu (run on the host CPU from "
                                  "host memory, host_cpu section; the cache keeps its initial popular experts), "
                                  "mixed (per expert, the cheaper of a copy and the CPU run, by the cost model)",
                                  choices=("gpu", "cpu", "mixed"),
                                  source="[R] llama.cpp --n-cpu-moe, Fiddler (https://arxiv.org/abs/2402.07033), "
                                  "kTransformers")
    prefetch: bool = param(False, doc="during drafting, copy the experts the predictor expects for new "
                           "draft nodes (draft-guided prefetch, SP-MoE style)")
    prefetch_max_experts_per_round: int = param(64, doc="cap on prefetched experts per round", ge=0)
    predictor: str = param("learned", doc="routing predictor the tree policies see: learned (from the profile "
                           "rounds: per draft token and layer, the target's routing there + recently verified "
                           "routing + popularity; never the target's routing of an unverified node) or recall "
                           "(the truth corrupted to top-k recall predictor_recall; 1 = oracle)",
                           choices=("learned", "recall"), source="[R]")
    next_layer_guess: str = param("learned", doc="overlap next_layer: layer l+1's experts guessed from layer l's "
                                  "routing by the profile's layer-to-layer transitions (wrong guesses are copied "
                                  "too), or oracle (the true layer l+1 union)", choices=("learned", "oracle"),
                                  source="[R] Pre-gated MoE (https://arxiv.org/abs/2308.12066) style guess")
    cost_calibration: str = param("online", doc="the expert-cost estimate SpecFit and EcoSpec use: online -- "
                                  "predicted union sizes and copies corrected by ratio estimators of true / predicted "
                                  "over the tokens verified so far (never an unverified node's routing); none -- the "
                                  "predictor's unions as they are", choices=("online", "none"),
                                  source="[R] calibrated cost estimate (ahasd_sim/moe/calibration.py)")
    calibration_half_life_passes: float = param(64.0, doc="cost_calibration online: half-life of a pass's weight in "
                                                "the ratio estimators", unit="passes", gt=0, le=1e9,
                                                source="[R] assumption: routing drifts over tens of passes")
    predictor_recall: float = param(1.0, doc="predictor recall: per-layer top-k recall of the routing "
                                    "predictor policies see (1 = oracle)", ge=0, le=1, source="[R] moe-offload notes: EcoSpec predictor "
                                    "modelled by its recall")
    head_ffn_width: int = param(0, doc="run.drafter head: FFN width of the EAGLE head's one dense decoder layer; "
                                "0 = top-k x expert FFN width (Qwen3-30B-A3B: 8 x 768 = 6144, its config's dense "
                                "intermediate_size)", unit="neurons", ge=0, le=1_000_000,
                                source="[R] EAGLE heads are one dense decoder layer (https://arxiv.org/abs/2406.16858); "
                                "https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json")
    drafter_device: str = param("gpu", doc="where the drafter runs: on the GPU (dense, resident) or on a "
                                "mobile NPU / LPDDR5-PIM drafter", choices=("gpu", "npu", "pim"))
    ci_windows: int = param(8, doc="contiguous windows of rounds used as samples for the 95% CIs", ge=2)


@config_section("host_cpu")
@dataclass
class HostCpuConfig:
    """The host CPU that runs non-resident experts (``moe.expert_execution`` cpu / mixed), as
    llama.cpp ``--n-cpu-moe``, kTransformers and Fiddler do. Default: a laptop with dual-channel
    DDR5-5600 (the RTX 4090 Laptop class)."""

    name: str = param("DDR5-5600 dual-channel laptop CPU", doc="label")
    mem_bw_gb_s: float = param(89.6, doc="peak DRAM bandwidth", unit="GB/s", gt=0, le=10_000,
                               source="derived: DDR5-5600 x 2 channels x 8 B = 89.6 GB/s (JEDEC JESD79-5 speed bin)")
    bandwidth_efficiency: float = param(0.75, doc="achieved / peak DRAM bandwidth of the expert GEMV threads", gt=0,
                                        le=1, source="[C] assumption: STREAM-class reads reach 70-80% of peak on "
                                        "client DDR5 (a 9.44 MB expert in ~140 us)")
    effective_gflops: float = param(600.0, doc="achieved expert-FFN throughput of the CPU threads (AVX2/AVX-512 "
                                    "dot products on dequantised weights)", unit="GFLOP/s", gt=0, le=1e6,
                                    source="[C] assumption: ~16 threads x ~40 GFLOP/s achieved")
    sync_latency_us: float = param(10.0, doc="per layer with CPU experts: GPU->CPU->GPU hand-off of the hidden "
                                   "states beyond their transfer time (stream sync, thread wake-up)", unit="us",
                                   ge=0, le=10_000, source="[C] assumption: two stream syncs of ~5 us")
    active_power_w: float = param(45.0, doc="CPU package power above idle while it runs experts", unit="W", ge=0,
                                  le=2000, source="[C] assumption: laptop HX-class CPU under an all-core load")


@dataclass
class EagleFixedParams:
    """EAGLE-1 style static tree: at depth d keep the children of sibling rank < branching[d-1]."""

    branching: list[int] = param([3, 2, 1, 1, 1], doc="children kept per node at each depth (27 nodes)",
                                 length=(1, 64), item_ge=1, item_le=1024,
                                 source="[R] close to EAGLE-1's 26-node static tree; " + EAGLE_SRC)


@dataclass
class EagleDynamicParams:
    """EAGLE-2/3: keep the N nodes of highest cumulative draft confidence (ancestor-closed)."""

    total_nodes: int = param(60, doc="verified draft nodes N (EAGLE-2/3 default total_token 60, depth 5-7)",
                             ge=1, source="[C] " + EAGLE_SRC)
    max_depth: int = param(6, doc="draft levels", ge=1, source="[C] " + EAGLE_SRC)


@dataclass
class SpecFitParams:
    """SpecFit: the ancestor-closed subtree maximising expected tokens / cycle time (exact)."""

    max_depth: int = param(6, doc="most draft levels (the stop rule may end drafting earlier)", ge=1,
                           source=SPECFIT_SRC)
    max_nodes: int = param(64, doc="most verified draft nodes", ge=1, source="[R]")
    stop_rule: bool = param(True, doc="stop drafting when an optimistic bound for one more level cannot "
                            "beat the incumbent ratio", source=SPECFIT_SRC)
    tolerance: float = param(1e-9, doc="Dinkelbach stop: F(lambda) <= tolerance", gt=0, source="[R]")
    speculation_gate: bool = param(False, doc="before drafting, skip speculation (verify the root alone, "
                                   "autoregressive) while the observed speculative rate (tokens / round time, "
                                   "EMA) is below the autoregressive rate (EMA of root-only rounds, else the cost "
                                   "model's root-only time); one speculative probe after every gate_probe_rounds gated rounds",
                                   source="[R] Cascade (https://arxiv.org/abs/2506.20675): speculation off when "
                                   "its utility < 1")
    gate_probe_rounds: int = param(8, doc="speculation_gate: gated rounds between speculative probes",
                                   unit="rounds", ge=1, source="[R]")
    gate_ema: float = param(0.3, doc="speculation_gate: weight of the newest round in both rate EMAs", gt=0, le=1,
                            source="[R]")
    expert_term: bool = param(True, doc="cost each node's predicted experts (SpecFit); false: expert-blind "
                              "-- T(S) = T_draft + a + b (|S|+1) with a, b least squares on the verification "
                              "times of the rounds this run verified so far (isolates expert awareness)",
                              source="[R], ablation")


@dataclass
class ExpertBudgetParams:
    """MoE-Spec-style expert budget, lossless: nodes by cumulative confidence, each kept only if no
    layer then needs more than ``budget_experts_per_layer`` predicted experts loaded (not resident)."""

    budget_experts_per_layer: int = param(4, doc="most predicted non-resident experts loaded per layer", ge=0,
                                          source="[R] MoE-Spec https://arxiv.org/abs/2602.16052 caps the "
                                          "experts per layer (lossy); here a cap on copies, lossless")
    max_nodes: int = param(64, doc="most verified draft nodes", ge=1, source="[R]")
    max_depth: int = param(6, doc="draft levels", ge=1, source="[R]")


@dataclass
class NoDraftParams:
    """Autoregressive decoding: no drafting, each round verifies the root alone (one decode step)."""

    max_depth: int = param(1, doc="unused (no drafting)", ge=1, source="[R]")


@dataclass
class EcoSpecParams:
    """EcoSpec: greedy growth by P(v) - mu * (time of v's predicted new experts) / T_ref."""

    mu: float = param(1.0, doc="weight of the predicted marginal expert cost (T_ref = root-only round time)",
                      ge=0, source=ECOSPEC_SRC)
    max_nodes: int = param(64, doc="most verified draft nodes", ge=1, source="[R]")
    max_depth: int = param(6, doc="draft levels", ge=1, source="[R]")


@config_section("tree_policy")
@dataclass
class TreePolicyConfig:
    """Tree-selection policies of mode ``moe_offload`` (``run.policy``)."""

    eagle_fixed: EagleFixedParams = _section(EagleFixedParams, "EAGLE static tree shape")
    eagle_dynamic: EagleDynamicParams = _section(EagleDynamicParams, "EAGLE-2/3 top-N by confidence")
    expert_budget: ExpertBudgetParams = _section(ExpertBudgetParams, "MoE-Spec-style per-layer expert budget")
    no_draft: NoDraftParams = _section(NoDraftParams, "autoregressive decoding of the MoE target")
    specfit: SpecFitParams = _section(SpecFitParams, "SpecFit throughput-optimal subtree")
    ecospec: EcoSpecParams = _section(EcoSpecParams, "EcoSpec expert-cost-aware greedy")
