"""GPU (section ``gpu``): roofline model with two efficiency factors and power states.

``op_cost(op)`` = max(FLOPs / (peak x compute_efficiency), bytes / (bandwidth x
bandwidth_efficiency)); for attention over k > 1 new tokens the KV cache is read at
``multi_token_kv_bw_fraction`` of that bandwidth (a multi-query attention kernel launches
few CTAs per head and streams the KV cache below peak; measured on the H200, docs/validation.md).
Per-kernel overhead is charged per forward (:meth:`Gpu.forward_cost`):
``layers x (kernels x launch_overhead_us + [k > 1] x multi_token_layer_overhead_us)`` with
the kernel count of the architecture: ``kernels_per_layer`` for gated-MLP models
(LLaMA/Qwen: RoPE, RMSNorm, SwiGLU), ``kernels_per_layer_plain_mlp`` for the others (OPT).
Energy: power-state model, the dynamic part ``(active_power_w - idle_power_w) x busy
time`` on device "gpu" (idle power is the static part, charged by the caller over the
whole run). A mobile GPU (``memory_source: lpddr5``) shares the LPDDR5: its bandwidth
is min(own figure, the memory's effective bandwidth), its DRAM energy goes to
"lpddr5", and the memory's own efficiency replaces ``bandwidth_efficiency``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config.fields import param
from ..config.registry import config_section
from .cost import ELEMENTWISE_KINDS, OpCost, op_kind, seq

GIB = 2**30


@config_section("gpu")
@dataclass
class GpuConfig:
    """A GPU (laptop/server discrete, or mobile sharing LPDDR5). Disabled on the AHASD platform."""

    enabled: bool = param(False, doc="the platform has a GPU")
    name: str = param("RTX4090-Laptop", doc="label")
    memory_gib: float = param(16.0, doc="device memory (own) or the share usable by the GPU (lpddr5)",
                              unit="GiB", gt=0, source="RTX 4090 Laptop 16 GB GDDR6 [4090L]")
    reserved_gib: float = param(1.0, doc="memory not available to weights/KV (context, workspace)", unit="GiB",
                                ge=0, source="assumption (grade C): CUDA context + allocator workspace")
    mem_bw_gb_s: float = param(576.0, doc="peak memory bandwidth", unit="GB/s", gt=0,
                               source="RTX 4090 Laptop 256-bit GDDR6, 576 GB/s [4090L]")
    bf16_tflops: float = param(151.8, doc="dense FP16/BF16 tensor throughput", unit="TFLOPS", gt=0,
                               source="RTX 4090 Laptop 151.8 TFLOPS FP16 tensor [4090L]")
    int8_tops: float = param(303.6, doc="dense INT8 tensor throughput (2 ops/MAC)", unit="TOPS", gt=0,
                             source="2 x FP16 tensor rate (Ada), derived (grade C)")
    compute_dtype: str = param("int8", doc="which peak the workload uses (AHASD runs INT8)",
                               choices=("int8", "bf16"), source="AHASD paper section 8: all INT8")
    compute_efficiency: float = param(0.6, doc="achieved fraction of tensor peak (efficiency factor 1 of 2)",
                                      gt=0, le=1, source="assumption (grade C)")
    bandwidth_efficiency: float = param(0.75, doc="achieved fraction of peak memory bandwidth in decode "
                                        "(efficiency factor 2 of 2; ignored for memory_source lpddr5)",
                                        gt=0, le=1, source="assumption (grade C); measured decode 0.6-0.8 "
                                        "(references.md#on-device)")
    launch_overhead_us: float = param(4.0, doc="per-kernel launch overhead", unit="us", ge=0,
                                      source="assumption (grade B/C): ~3-5 us per CUDA kernel launch")
    kernels_per_layer: float = param(8.0, doc="kernels per transformer layer of a gated-MLP model (LLaMA/Qwen)",
                                     ge=0, source="assumption: norm, qkv, attention, o_proj, norm, gate/up, act, down")
    kernels_per_layer_plain_mlp: float = param(8.0, doc="kernels per layer of a model without a gated MLP (OPT)",
                                               ge=0, source="assumption: same as kernels_per_layer")
    multi_token_layer_overhead_us: float = param(0.0, doc="extra fixed cost per layer of a step with k > 1 new "
                                                 "tokens (GEMM instead of GEMV kernels, masked attention)",
                                                 unit="us", ge=0, source="assumption: none")
    multi_token_kv_bw_fraction: float = param(1.0, doc="fraction of the effective bandwidth at which attention "
                                              "over k > 1 new tokens reads the KV cache", gt=0, le=1,
                                              source="assumption: full bandwidth")
    idle_power_w: float = param(10.0, doc="idle (static) power", unit="W", ge=0,
                                source="assumption (grade C) for a laptop dGPU")
    active_power_w: float = param(120.0, doc="power while busy", unit="W", gt=0,
                                  source="RTX 4090 Laptop TGP 80-150 W [4090L]")
    memory_source: str = param("own", doc="own device memory, or the mobile SoC's LPDDR5",
                               choices=("own", "lpddr5"))
    weight_streaming: str = param("overlapped", doc="how weights that do not fit in GPU memory are streamed over "
                                  "h2d every forward: overlapped = double-buffered per layer (layer i+1 streams "
                                  "while layer i computes; a forward takes fill + sum of max(compute, stream) per "
                                  "layer, hw.gpu.double_buffered_time_s); serial = stream everything, then compute "
                                  "(no overlap)", choices=("overlapped", "serial"),
                                  source="overlapped: what offloading runtimes do (FlexGen, ICML 2023, "
                                  "arXiv:2303.06865; DeepSpeed ZeRO-Inference; HF accelerate's offload prefetch); "
                                  "serial: the pre-issue-23 model, kept as an option")
    # MoE expert FFN implementation (validation/h200_moe_measured.csv)
    moe_kernel: str = param("fused", doc="MoE expert FFN: one fused grouped kernel set per layer, or a "
                            "loop over the experts hit (several kernels + a host sync each, as in HF "
                            "transformers)", choices=("fused", "per_expert_loop"))
    moe_fused_kernels: int = param(5, doc="kernels of one fused MoE layer (align/sort, grouped gate-up, "
                                   "activation, grouped down, combine)", ge=0,
                                   source="count of vLLM fused_moe's launches per layer (grade B/C)")
    moe_fused_fixed_us: float | None = param(None, doc="fused: fixed time of one MoE layer beyond its bytes/FLOPs "
                                             "(null: moe_fused_kernels x launch_overhead_us)", unit="us", ge=0,
                                             source="fit: python -m ahasd_sim validate --moe")
    moe_fused_per_expert_us: float = param(0.0, doc="fused: time per distinct expert hit beyond its weight bytes",
                                           unit="us", ge=0, source="fit: python -m ahasd_sim validate --moe")
    moe_fused_per_pair_us: float = param(0.0, doc="fused: time per token-expert pair (gather, grouped-GEMM "
                                         "rows, combine) beyond its FLOPs", unit="us", ge=0,
                                         source="fit: python -m ahasd_sim validate --moe")
    moe_loop_fixed_us: float = param(0.0, doc="per_expert_loop: fixed time of one MoE layer", unit="us", ge=0,
                                     source="fit: python -m ahasd_sim validate --moe")
    moe_loop_per_pair_us: float = param(0.0, doc="per_expert_loop: time per token-expert pair beyond its FLOPs",
                                        unit="us", ge=0, source="fit: python -m ahasd_sim validate --moe")
    moe_loop_overhead_per_expert_us: float = param(
        42.0, doc="per_expert_loop: launch/sync time per expert hit, beyond its bytes/FLOPs",
        unit="us", ge=0, source="derived (grade C): 8 kernels x 4 us launch + ~10 us host sync "
        "(torch.where) per expert; H200 eager measured 150 us (validation/h200_moe_measured.csv)")

    def validate(self) -> None:
        if self.reserved_gib >= self.memory_gib:
            raise ValueError(f"reserved_gib ({self.reserved_gib}) must be < memory_gib ({self.memory_gib})")
        if self.active_power_w < self.idle_power_w:
            raise ValueError(f"active_power_w ({self.active_power_w}) < idle_power_w ({self.idle_power_w})")


def double_buffered_time_s(compute_s, stream_s) -> float:
    """Span of a forward whose unit j (a layer) needs ``stream_s[j]`` of weight streaming before
    its ``compute_s[j]``, with two weight buffers: unit j's stream starts once unit j-1's stream
    has ended and unit j-2's compute has freed its buffer; unit j computes once its stream and
    unit j-1's compute have ended. For L equal units (c, s) this is L x max(c, s) + min(c, s)."""
    if len(compute_s) != len(stream_s):
        raise ValueError("compute_s and stream_s need one entry per unit")
    stream_end = 0.0
    compute_end = [0.0, 0.0]            # ends of the computes of units j-2 and j-1
    for c, s in zip(compute_s, stream_s):
        stream_end = max(stream_end, compute_end[0]) + s
        done = max(compute_end[1], stream_end) + c
        compute_end = [compute_end[1], done]
    return compute_end[1]


class Gpu:
    device = "gpu"

    def __init__(self, cfg: GpuConfig, memory=None):
        if cfg.memory_source == "lpddr5" and memory is None:
            raise ValueError("a GPU with memory_source lpddr5 needs the LPDDR5 memory model")
        self.cfg = cfg
        self.memory = memory if cfg.memory_source == "lpddr5" else None

    @property
    def peak_ops_s(self) -> float:
        c = self.cfg
        return (c.int8_tops if c.compute_dtype == "int8" else c.bf16_tflops) * 1e12

    @property
    def effective_ops_s(self) -> float:
        return self.peak_ops_s * self.cfg.compute_efficiency

    @property
    def effective_bandwidth_bytes_s(self) -> float:
        own = self.cfg.mem_bw_gb_s * 1e9
        if self.memory is not None:
            return min(own, self.memory.effective_bandwidth_bytes_s)
        return own * self.cfg.bandwidth_efficiency

    @property
    def usable_memory_bytes(self) -> float:
        return (self.cfg.memory_gib - self.cfg.reserved_gib) * GIB

    @property
    def static_power_w(self) -> float:
        return self.cfg.idle_power_w

    def overflow_bytes(self, resident_bytes: float) -> float:
        """Bytes that do not fit in GPU memory (streamed over h2d every forward)."""
        return max(0.0, float(resident_bytes) - self.usable_memory_bytes)

    def op_bytes(self, op: object) -> float:
        return (float(op.weight_bytes) + float(getattr(op, "kv_bytes", 0.0))
                + float(op.act_bytes_in) + float(op.act_bytes_out))

    def op_cost(self, op: object) -> OpCost:
        """Roofline cost of ONE occurrence of ``op`` (no launch overhead)."""
        if op_kind(op) in ELEMENTWISE_KINDS:
            flops = float(getattr(op, "elements", 0) or 0) * 4.0  # a few ops per element; never the bound
        else:
            flops = float(op.flops)
        nbytes = self.op_bytes(op)
        t_mem = nbytes / self.effective_bandwidth_bytes_s
        if op_kind(op) == "attention" and int(getattr(op, "n_tokens", 1)) > 1:
            kv = float(getattr(op, "kv_bytes", 0.0))
            t_mem += kv / self.effective_bandwidth_bytes_s * (1.0 / self.cfg.multi_token_kv_bw_fraction - 1.0)
        t = max(flops / self.effective_ops_s, t_mem)
        energy = {self.device: (self.cfg.active_power_w - self.cfg.idle_power_w) * t}
        if self.memory is not None and nbytes > 0:
            energy[self.memory.device] = self.memory.read_energy_j(nbytes)
        return OpCost(t, energy, bus_bytes=nbytes, macs=float(getattr(op, "macs", 0.0)))

    def kernels_per_layer_for(self, ops) -> float:
        """Kernel count per layer of the architecture the ops describe (gated MLP or not)."""
        gated = any(getattr(op, "name", "") == "ffn_gate" for op in ops)
        return self.cfg.kernels_per_layer if gated else self.cfg.kernels_per_layer_plain_mlp

    def launch_overhead_s(self, n_layers: int, kernels_per_layer: float | None = None,
                          n_tokens: int = 1) -> float:
        kpl = self.cfg.kernels_per_layer if kernels_per_layer is None else kernels_per_layer
        per_layer_us = kpl * self.cfg.launch_overhead_us
        if n_tokens > 1:
            per_layer_us += self.cfg.multi_token_layer_overhead_us
        return n_layers * per_layer_us * 1e-6

    def forward_cost(self, ops) -> OpCost:
        """One forward pass: every op x ``layer_repeat`` + per-kernel overhead for the layers."""
        ops = tuple(ops)
        n_layers = max((int(op.layer_repeat) for op in ops), default=0)
        n_tokens = max((int(getattr(op, "n_tokens", 1)) for op in ops), default=1)
        launch = self.launch_overhead_s(n_layers, self.kernels_per_layer_for(ops), n_tokens)
        body = seq(*(self.op_cost(op).repeat(int(op.layer_repeat)) for op in ops))
        return seq(body, OpCost(launch, {self.device: (self.cfg.active_power_w - self.cfg.idle_power_w) * launch}))

    def forward_time_s(self, ops) -> float:
        return self.forward_cost(ops).duration_s
