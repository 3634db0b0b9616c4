"""Mobile NPU: declarative spec (section ``npu``) and a tiling-aware roofline model.

Convention: **2 ops per MAC** (``OPS_PER_MAC``) for every TOPS figure.

The AHASD NPU (paper Table 2: 16 TOPS INT8 matrix, 8.2 TOPS vector, 2 chips, 1 GHz,
8 MB scratchpad) is read as two 64x64 weight-stationary systolic arrays at 1 GHz
(2 x 4096 MAC x 2 ops x 1 GHz = 16.4 TOPS; modeling.md decision 9) plus a vector
unit of 2 x 2048 MAC/cycle (8.19 TOPS).

Matrix ops (GEMM, GEMV, attention) on the array. A GEMM ``(M x K) . (K x N)`` (M = tokens
in the step, K x N = the weight) is cut into folds that each fit the ``rows x cols``
array; which operand stays in the array is ``dataflow`` (the mapping of SCALE-Sim v2's
compute modules, ``scalesim/compute/systolic_compute_{ws,os,is}.py``):

=========  ==================  ==================  ==============  ===================
dataflow   fold rows (S_r)     fold cols (S_c)     streamed (T)    preload per fold
=========  ==================  ==================  ==============  ===================
``ws``     K                   N                   M               ``rows`` (weights)
``os``     M                   N                   K               0 (outputs stay)
``is``     K                   M                   N               ``rows`` (inputs)
=========  ==================  ==================  ==============  ===================

folds = ceil(S_r/rows) x ceil(S_c/cols), split over the chips; a fold streams
``max(T, min_stream_cycles)`` cycles after its preload. ``fold_model`` says what the
skewed pipeline costs (fill ``rows - 1`` + drain ``cols - 1``):

* ``onnxim_overlap`` (default; ONNXim's weight-stationary core, PSAL-POSTECH/ONNXim
  ``src/SystolicWS.cc``): folds are issued back to back, fill and drain once per op:
  ``folds x (preload + T) + rows + cols - 2``;
* ``scalesim`` (SCALE-Sim v2): every fold pays its own preload, fill and drain:
  ``folds x (preload + T + rows + cols - 2)``. Configured like SCALE-Sim (one chip,
  ``matrix_util`` 1, ``min_stream_cycles`` 1), this is SCALE-Sim's ``Total Cycles`` + 1
  on every GEMM checked (``validate --peers``).

``weight_preload_hidden`` (double-buffered stationary operand) makes a fold
``max(preload, T)`` instead of ``preload + T``. Compute time = cycles /
(freq x ``matrix_util``). Operators that do not expose ``k_dim``/``n_dim`` (attention)
use ``K*N = macs / n_tokens`` (for ``ws``: passes = ceil(K*N / (rows*cols)), exact when K
and N are multiples of the array; for ``os``/``is``: K = N = sqrt(K*N)).

Memory time = bytes crossing the external bus / the bandwidth the caller grants: the
weights (re-read once per activation chunk when the activation working set exceeds the
half of the scratchpad reserved for activations), the KV cache read and written, and the
activations only when they do not fit on chip (spilled). Duration = max(compute, memory)
+ a fixed per-op overhead. Nonlinear/reduction ops run on the vector unit.

Energy (dynamic, device "npu"): MACs x pJ/MAC + vector element-ops x pJ/op + scratchpad
bytes x pJ/bit x 8 + DMA bytes x pJ/byte. If a memory model is attached, the DRAM side
of the bus traffic is charged to device "lpddr5".
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..config.fields import param
from ..config.registry import config_section
from .cost import ELEMENTWISE_KINDS, MATRIX_KINDS, OpCost, op_kind

OPS_PER_MAC = 2  # every TOPS / GOPS / TFLOPS figure in this package counts 2 ops per MAC

_AHASD = "AHASD paper Table 2"
_NL_CLASSES = ("gelu", "softmax", "layernorm", "reduction", "attention_score")
_NL_ALIASES = {"silu": "gelu", "swiglu": "gelu", "relu": "gelu", "rmsnorm": "layernorm",
               "attention": "attention_score", "sum": "reduction", "max": "reduction"}


def nonlinear_class_of(op: object) -> str:
    """Canonical nonlinear class of an elementwise op (gelu, softmax, layernorm,
    reduction, attention_score); SiLU/SwiGLU/ReLU -> gelu, RMSNorm -> layernorm."""
    cls = getattr(op, "nonlinear_class", None)
    if cls is None:
        if op_kind(op) == "reduction":
            return "reduction"
        raise ValueError(f"op {getattr(op, 'name', op)!r} has no nonlinear_class")
    cls = str(cls).lower()
    cls = _NL_ALIASES.get(cls, cls)
    if cls not in _NL_CLASSES:
        raise ValueError(f"unknown nonlinear class {cls!r} of op {getattr(op, 'name', op)!r}; "
                         f"expected one of {', '.join(_NL_CLASSES)}")
    return cls


@config_section("npu")
@dataclass
class NpuConfig:
    """Mobile NPU (matrix systolic arrays + vector unit + scratchpad)."""

    enabled: bool = param(True, doc="the platform has an NPU")
    chips: int = param(2, doc="compute chips (each one systolic array + vector lanes)", ge=1, le=64,
                       bound_reason="64 NPU chips is a server board, not a phone SoC (2-4 cores)",
                       source=_AHASD + ": 2 compute chips")
    array_rows: int = param(64, doc="systolic array rows (reduction dim K per tile)", ge=1, le=1024,
                            bound_reason="4x the largest built systolic array (TPU v1: 256x256)",
                            source="modeling.md decision 9: 16 TOPS / 2 chips / 1 GHz = 64x64")
    array_cols: int = param(64, doc="systolic array columns (output dim N per tile)", ge=1, le=1024,
                            bound_reason="4x the largest built systolic array (TPU v1: 256x256)",
                            source="modeling.md decision 9")
    freq_ghz: float = param(1.0, doc="NPU clock", unit="GHz", gt=0, le=5.0, source=_AHASD + ": 1 GHz",
                            bound_reason="mobile NPUs clock at 1-2 GHz; 5 GHz is past any CMOS logic in a phone")
    vector_macs_per_cycle: int = param(2048, doc="vector-unit MACs (element-ops) per cycle per chip", ge=1,
                                       source=_AHASD + ": 8.2 TOPS vector = 2 chips x 2048 x 2 ops x 1 GHz")
    spm_bytes: int = param(8 * 2**20, doc="scratchpad memory, total over chips", unit="B", gt=0,
                           source=_AHASD + ": 8 MB SPM")
    matrix_util: float = param(0.90, doc="achieved fraction of the tiled array cycle count (stalls, "
                               "synchronisation) beyond what the tiling model captures", gt=0, le=1,
                               source="assumption (grade C); ONNXim reports tile-level stalls of this order")
    vector_util: float = param(0.80, doc="achieved fraction of vector-unit peak", gt=0, le=1,
                               source="assumption (grade C)")
    dataflow: str = param("ws", doc="which operand stays in the array: weights (ws), outputs (os) or inputs (is)",
                          choices=("ws", "os", "is"),
                          source="AHASD NPU read as weight-stationary (modeling.md decision 9); fold "
                          "mapping of SCALE-Sim v2 scalesim/compute/systolic_compute_{ws,os,is}.py")
    fold_model: str = param("onnxim_overlap", doc="pipeline cost of the folds: fill/drain once per op with folds "
                            "back to back (onnxim_overlap), or preload + fill + drain per fold (scalesim)",
                            choices=("onnxim_overlap", "scalesim"),
                            source="ONNXim src/SystolicWS.cc (overlap); SCALE-Sim v2 compute modules (scalesim); "
                            "validation/peers/scalesim (validate --peers)")
    weight_preload_hidden: bool = param(False, doc="double-buffered stationary operand: fold = max(preload, T) "
                                        "instead of preload + T cycles",
                                        source="ONNXim src/SystolicWS.cc charges core_height cycles per preload")
    min_stream_cycles: int = param(4, doc="minimum streaming cycles of one tile pass", ge=1,
                                   source="ONNXim src/SystolicWS.cc: MAX(size, 4)")
    vector_pipeline_cycles: int = param(8, doc="vector-unit pipeline latency per op", unit="cycle", ge=0,
                                        source="assumption, same order as the AAU's 8-cycle pipeline")
    gelu_ops_per_element: float = param(2.0, doc="vector element-ops per GELU/SiLU element", gt=0,
                                        source="matches AAU 2 cycles per 16-lane vector (references.md#ahasd-aau-gts)")
    softmax_ops_per_element: float = param(3.0, doc="vector element-ops per softmax element", gt=0,
                                           source="max, exp, normalise; AAU 3 cycles per vector")
    layernorm_ops_per_element: float = param(3.0, doc="vector element-ops per LayerNorm/RMSNorm element", gt=0,
                                             source="mean/var, normalise, scale; AAU 3 cycles per vector")
    reduction_ops_per_element: float = param(1.0, doc="vector element-ops per reduction/residual element", gt=0,
                                             source="one add/compare per element")
    attention_score_ops_per_element: float = param(4.0, doc="vector element-ops per attention-score element",
                                                   gt=0, source="AAU 4 cycles per vector")
    dram_bw_fraction: float = param(0.703, doc="share of the LPDDR5's sustained bandwidth (memory."
                                    "effective_bandwidth) the NPU's DMA achieves when it streams weights/KV "
                                    "alone (1 = the whole sustained rate, the v0.1 assumption)", gt=0, le=1,
                                    source="fitted by `python -m ahasd_sim validate --mobile` (eta_bw) on Snapdragon "
                                    "8 Elite decode measurements of Qualcomm AI Hub (validation/mobile/measured.csv, "
                                    "quic/ai-hub-models@52c080d2), out-of-sample phone decode MdAPE 13.7% "
                                    "(docs/validation.md); it also absorbs the runtime's per-token overheads")
    op_overhead_ns: float = param(200.0, doc="fixed per-op overhead (descriptor fetch, DMA setup, sync)",
                                  unit="ns", ge=0, source="assumption (grade C)")
    pj_per_mac: float = param(0.17, doc="INT8 MAC energy (whole-NPU efficiency)", unit="pJ/MAC", gt=0,
                              source="Samsung 4 nm NPU 11.59 TOPS/W INT8 [SamsungNPU] JSSC 2022")
    vector_pj_per_op: float = param(0.47, doc="vector element-op energy (FP16 FMA)", unit="pJ/op", gt=0,
                                    source="Samsung 4 nm NPU 4.26 TFLOPS/W FP16 [SamsungNPU]")
    spm_pj_per_bit: float = param(0.05, doc="scratchpad access energy", unit="pJ/bit", gt=0,
                                  source="references.md#derived-defaults (CACTI 28 nm 8 KB: 0.035-0.049 pJ/bit)")
    dma_pj_per_byte: float = param(2.0, doc="NPU-side DMA + on-chip interconnect energy per byte moved "
                                   "over the external bus", unit="pJ/B", ge=0,
                                   source="assumption (grade C): ~0.25 pJ/bit NoC + DMA engine")
    static_power_w: float = param(0.14, doc="NPU leakage / idle power", unit="W", ge=0,
                                  source="0.10 x active power 1.39 W (= 8192 MAC/ns x 0.17 pJ/MAC), "
                                  "references.md#derived-defaults idle_frac_of_active 0.10")
    soc_rest_power_w: float = param(0.0, doc="power the rest of the SoC draws while the NPU decoder runs (the "
                                    "CPU core running the runtime's token loop and sampling, the fabric/NoC and "
                                    "memory controller kept awake): charged for the whole run as device 'soc'",
                                    unit="W", ge=0, le=10.0,
                                    bound_reason="10 W is twice a phone's sustained SoC budget",
                                    source="0 = the AHASD paper's accounting (NPU and memory only); the phone "
                                    "presets set 0.6 W (docs/references.md, 'Phone memory and power envelope', "
                                    "grade C)")

    def validate(self) -> None:
        if self.spm_bytes < self.chips * self.array_rows * self.array_cols * 2:
            raise ValueError(f"spm_bytes ({self.spm_bytes}) cannot hold one double-buffered weight tile per chip")


@dataclass(frozen=True)
class NpuOpBreakdown:
    """Intermediate quantities of one :meth:`Npu.op_cost` evaluation (for reports/tests)."""

    unit: str              # "array" | "vector"
    passes: int            # array tile passes (total over chips); 0 on the vector unit
    cycles: float          # per-chip cycles before utilisation
    compute_s: float
    memory_s: float
    bus_bytes: float
    weight_reads: int      # times the weights cross the bus


class Npu:
    """Analytic NPU model; stateless. ``memory`` (optional) receives the DRAM energy."""

    device = "npu"

    def __init__(self, cfg: NpuConfig, memory=None):
        self.cfg = cfg
        self.memory = memory

    # --------------------------------------------------------------- peaks
    @property
    def macs_per_cycle(self) -> int:
        return self.cfg.chips * self.cfg.array_rows * self.cfg.array_cols

    @property
    def peak_ops_s(self) -> float:
        """Matrix peak in ops/s (2 ops per MAC): 16.4e12 for the AHASD NPU."""
        return self.macs_per_cycle * OPS_PER_MAC * self.cfg.freq_ghz * 1e9

    @property
    def peak_tops(self) -> float:
        return self.peak_ops_s / 1e12

    @property
    def vector_peak_ops_s(self) -> float:
        return self.cfg.chips * self.cfg.vector_macs_per_cycle * OPS_PER_MAC * self.cfg.freq_ghz * 1e9

    @property
    def static_power_w(self) -> float:
        return self.cfg.static_power_w

    def ops_per_element(self, cls: str) -> float:
        return float(getattr(self.cfg, f"{cls}_ops_per_element"))

    # --------------------------------------------------------------- costs
    def gemm_dims(self, op: object, n: int) -> tuple[int, int, int]:
        """(M, K, N) of a matrix op: M = tokens, K x N the weight (see module docstring for
        ops without ``k_dim``/``n_dim``)."""
        k, nd = getattr(op, "k_dim", 0), getattr(op, "n_dim", 0)
        if k and nd:
            return n, int(k), int(nd)
        side = max(1, round(math.sqrt(float(op.macs) / n)))
        return n, side, side

    def fold_geometry(self, op: object, n: int) -> tuple[int, int, int]:
        """(folds, streamed cycles T, preload cycles) of a matrix op under ``dataflow``."""
        c = self.cfg
        rows, cols = c.array_rows, c.array_cols
        m, k, nd = self.gemm_dims(op, n)
        if c.dataflow == "ws":
            if getattr(op, "k_dim", 0) and getattr(op, "n_dim", 0):
                folds = math.ceil(k / rows) * math.ceil(nd / cols)
            else:
                folds = max(1, math.ceil(float(op.macs) / n / (rows * cols) - 1e-9))
            return folds, m, rows
        if c.dataflow == "os":
            return math.ceil(m / rows) * math.ceil(nd / cols), k, 0
        return math.ceil(k / rows) * math.ceil(m / cols), nd, rows  # "is"

    def array_cycles(self, op: object, n: int) -> tuple[int, float]:
        """(folds, per-chip array cycles before ``matrix_util``) of a matrix op."""
        c = self.cfg
        folds, t_stream, preload = self.fold_geometry(op, n)
        per_chip = math.ceil(folds / c.chips)
        stream = max(t_stream, c.min_stream_cycles)
        fold = max(preload, stream) if c.weight_preload_hidden else preload + stream
        fill_drain = c.array_rows + c.array_cols - 2
        if c.fold_model == "scalesim":
            return folds, per_chip * (fold + fill_drain)
        return folds, per_chip * fold + fill_drain

    def analyse(self, op: object, mem_bw_bytes_s: float) -> NpuOpBreakdown:
        """Compute/memory split of one occurrence of ``op`` (see module docstring)."""
        if not mem_bw_bytes_s > 0:
            raise ValueError(f"mem_bw_bytes_s must be > 0, got {mem_bw_bytes_s!r}")
        c = self.cfg
        mem_bw_bytes_s = mem_bw_bytes_s * c.dram_bw_fraction      # what one NPU's DMA achieves of it
        kind = op_kind(op)
        n = max(1, int(getattr(op, "n_tokens", 1)))
        act_in, act_out = float(op.act_bytes_in), float(op.act_bytes_out)
        act_budget = c.spm_bytes / c.chips / 2.0          # half of each chip's SPM for activations
        act_ws = act_in + act_out / c.chips               # each chip: all inputs, its share of outputs
        spilled = act_ws > act_budget
        act_bus = act_in + act_out if spilled else 0.0
        kv = float(getattr(op, "kv_bytes", 0.0))
        f_hz = c.freq_ghz * 1e9
        if kind in MATRIX_KINDS and op.macs > 0:
            passes, cycles = self.array_cycles(op, n)
            compute_s = cycles / (f_hz * c.matrix_util)
            chunks = max(1, math.ceil(act_ws / act_budget)) if float(op.weight_bytes) > 0 else 1
            deq = self.dequant_ops(op, chunks)
            if deq:
                # narrow weights are widened by the vector unit as the array consumes them: the
                # slower of the two sets the pace
                deq_s = math.ceil(deq / (c.chips * c.vector_macs_per_cycle)) / (f_hz * c.vector_util)
                compute_s = max(compute_s, deq_s)
            bus = float(op.weight_bytes) * chunks + kv + act_bus
            return NpuOpBreakdown("array", passes, cycles, compute_s, bus / mem_bw_bytes_s, bus, chunks)
        if kind in ELEMENTWISE_KINDS or kind in MATRIX_KINDS:
            elems = float(getattr(op, "elements", 0) or 0)
            slots = elems * self.ops_per_element(nonlinear_class_of(op)) if elems > 0 else 0.0
            cycles = math.ceil(slots / (c.chips * c.vector_macs_per_cycle)) + (c.vector_pipeline_cycles if slots else 0)
            compute_s = cycles / (f_hz * c.vector_util)
            bus = float(op.weight_bytes) + kv + act_bus
            return NpuOpBreakdown("vector", 0, cycles, compute_s, bus / mem_bw_bytes_s, bus, 1)
        raise ValueError(f"NPU cannot run op kind {kind!r}")

    #: vector ops that widen one stored weight to the array's type (0: the array consumes the stored
    #: weights, e.g. Hexagon's HMX on INT4); set from ``run.precision`` (workload/precision.py) when
    #: the platform is built for a run
    dequant_ops_per_weight: float = 0.0

    def dequant_ops(self, op: object, weight_reads: int = 1) -> float:
        """Vector ops that widen ``op``'s stored weights (``weight_reads`` times read) to the
        array's type under the run's precision."""
        shape = tuple(getattr(op, "pim_gemv", ()) or ())
        if not self.dequant_ops_per_weight or not shape or float(op.weight_bytes) <= 0:
            return 0.0
        return float(op.weight_bytes) / float(shape[3]) * weight_reads * self.dequant_ops_per_weight

    def op_cost(self, op: object, mem_bw_bytes_s: float) -> OpCost:
        """Cost of ONE occurrence of ``op`` (multiply by ``op.layer_repeat`` for a forward)."""
        c = self.cfg
        b = self.analyse(op, mem_bw_bytes_s)
        duration = max(b.compute_s, b.memory_s) + c.op_overhead_ns * 1e-9
        n = max(1, int(getattr(op, "n_tokens", 1)))
        act_in, act_out = float(op.act_bytes_in), float(op.act_bytes_out)
        if b.unit == "array":
            macs = float(op.macs)
            # SPM traffic: fill from DRAM, weights into the array, activation rows streamed
            # into each pass (INT8: rows bytes per token per pass), outputs written once.
            spm = b.bus_bytes + float(op.weight_bytes) * b.weight_reads + b.passes * n * c.array_rows + act_out
            compute_j = macs * c.pj_per_mac * 1e-12 + self.dequant_ops(op, b.weight_reads) * c.vector_pj_per_op * 1e-12
        else:
            macs = 0.0
            elems = float(getattr(op, "elements", 0) or 0)
            slots = elems * self.ops_per_element(nonlinear_class_of(op)) if elems > 0 else 0.0
            spm = b.bus_bytes + act_in + act_out + float(op.weight_bytes)
            compute_j = slots * c.vector_pj_per_op * 1e-12
        npu_j = compute_j + spm * 8.0 * c.spm_pj_per_bit * 1e-12 + b.bus_bytes * c.dma_pj_per_byte * 1e-12
        energy = {self.device: npu_j}
        if self.memory is not None and b.bus_bytes > 0:
            written = float(getattr(op, "kv_write_bytes", 0.0))
            if act_in + act_out / c.chips > c.spm_bytes / c.chips / 2.0:
                written += act_out
            written = min(written, b.bus_bytes)
            energy[self.memory.device] = (self.memory.read_energy_j(b.bus_bytes - written)
                                          + self.memory.write_energy_j(written))
        return OpCost(duration, energy, bus_bytes=b.bus_bytes, macs=macs)

    def forward_cost(self, ops, mem_bw_bytes_s: float) -> OpCost:
        """Sequential cost of a whole forward pass (``layer_repeat`` applied)."""
        from .cost import seq
        return seq(*(self.op_cost(op, mem_bw_bytes_s).repeat(int(op.layer_repeat)) for op in ops))
