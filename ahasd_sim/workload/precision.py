"""Numeric precisions of an on-device deployment: byte widths and the NPU compute type.

A precision fixes three byte widths of a :class:`~ahasd_sim.workload.models.ModelSpec` (weight per
parameter, KV element, activation element) and the type the NPU's matrix unit computes in
(``array_dtype``), whose peak the SoC preset gives (``npu.<dtype>_tops``). ``dequant`` says the
weights are stored narrower than the array type and must be widened before the MACs.

=========  ======  =====  ===  ===========  ===============================================
name       weight  act    KV   array dtype  where it is used
=========  ======  =====  ===  ===========  ===============================================
w4a16      0.5     2      2    int16        Qualcomm AI Hub / QNN LLMs (uint16 activations)
w4afp16    0.5     2      2    fp16         AI Hub "w4" (4-bit weights, fp16 activations)
w4a8       0.5     1      1    int8         e.g. ExecuTorch 8da4w
w8a8       1       1      1    int8         the AHASD paper (the zoo's default widths)
w8a16      1       2      2    int16        QNN's "few layers" in w4a16 bundles
fp16       2       2      2    fp16         unquantised
=========  ======  =====  ===  ===========  ===============================================

Sources: AI Hub ``info.yaml`` "Precision: w4a16 + w8a16 (few layers)" and "w4 + w8 (few layers)
with fp16 activations" (quic/ai-hub-models qai_hub_models/models/llama_v3_2_3b_instruct/info.yaml
@52c080d2); ``_shared/llm/export.py`` there: intermediate type float16 for w4, uint16 for w4a16.
"Few layers" in W8 is read as the LM head (``head_weight_bytes_per_param``; which layers QNN
keeps at 8 bits is not stated). The KV cache is taken at the activation width (QNN keeps it in the activation type; assumption for
the other rows). Group-quantisation scales are not counted (per-channel INT4: one scale per output
row, < 0.1% of the weight bytes).

**Dequantisation.** On Hexagon the HMX consumes INT4 weights against 16-bit activations
directly (QNN's per-channel INT4 path); T-MAN (arXiv 2511.11248, abstract) reports that NPUs run
non-GEMM work such as dequantisation poorly. A precision whose ``dequant`` is True (w4afp16: INT4
weights, FP16 array) widens every weight once per streamed pass; the mobile model charges
``dequant_ops_per_weight`` vector element-ops per weight on the NPU's vector peak when the SoC
preset gives one, and reports it as not modelled otherwise.
"""
from __future__ import annotations

import re
import types
from dataclasses import dataclass
from typing import Mapping

from .models import ModelSpec, with_precision

__all__ = ["Precision", "PRECISIONS", "get_precision", "apply_precision", "ARRAY_DTYPES"]

ARRAY_DTYPES = ("int4", "int8", "int16", "fp16")


@dataclass(frozen=True)
class Precision:
    name: str
    weight_bytes_per_param: float
    act_bytes_per_elem: float
    kv_bytes_per_elem: float
    array_dtype: str
    dequant: bool
    dequant_ops_per_weight: float = 0.0
    head_weight_bytes_per_param: float | None = None  # LM head stored wider (None: same as the rest)
    notes: str = ""

    def __post_init__(self) -> None:
        if self.array_dtype not in ARRAY_DTYPES:
            raise ValueError(f"precision {self.name}: array_dtype must be one of {ARRAY_DTYPES}")
        if min(self.weight_bytes_per_param, self.act_bytes_per_elem, self.kv_bytes_per_elem) <= 0:
            raise ValueError(f"precision {self.name}: byte widths must be positive")


_P = (
    # AI Hub: "w4a16 + w8a16 (few layers)"; which layers is not stated -- read as the LM head
    # (the one layer whose INT4 error reaches the logits directly; assumption, grade C)
    Precision("w4a16", 0.5, 2.0, 2.0, "int16", False, head_weight_bytes_per_param=1.0,
              notes="QNN W4A16: INT4 weights on the 16-bit HMX path, LM head W8"),
    # one unpack + one scale multiply per weight (assumption, grade C)
    Precision("w4afp16", 0.5, 2.0, 2.0, "fp16", True, 2.0, head_weight_bytes_per_param=1.0,
              notes="AI Hub 'w4': INT4 weights widened to FP16, LM head W8"),
    Precision("w4a8", 0.5, 1.0, 1.0, "int8", False, notes="INT4 weights, INT8 activations"),
    Precision("w8a8", 1.0, 1.0, 1.0, "int8", False, notes="the AHASD paper's INT8"),
    Precision("w8a16", 1.0, 2.0, 2.0, "int16", False, notes="QNN W8A16"),
    Precision("fp16", 2.0, 2.0, 2.0, "fp16", False, notes="unquantised FP16"),
)
PRECISIONS: Mapping[str, Precision] = types.MappingProxyType({p.name: p for p in _P})
_ALIASES = {"w4": "w4afp16", "w4fp16": "w4afp16", "int8": "w8a8", "f16": "fp16", "float16": "fp16",
            "bf16": "fp16"}


def _squash(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(s).lower())


def get_precision(name: str) -> Precision:
    """The precision called ``name`` (case- and punctuation-insensitive: "W4A16", "w4-a16")."""
    key = _squash(name)
    key = _ALIASES.get(key, key)
    if key not in PRECISIONS:
        raise KeyError(f"unknown precision {name!r}; known: {', '.join(PRECISIONS)} (aliases: {', '.join(_ALIASES)})")
    return PRECISIONS[key]


def apply_precision(spec: ModelSpec, precision: str | Precision) -> ModelSpec:
    """``spec`` with the byte widths of ``precision``."""
    p = precision if isinstance(precision, Precision) else get_precision(precision)
    return with_precision(spec, p.weight_bytes_per_param, p.kv_bytes_per_elem, p.act_bytes_per_elem)
