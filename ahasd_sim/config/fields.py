"""Declarative config fields: default, unit, valid range and source in one place.

Hardware sections use :func:`param` so that every constant carries its unit and
where it comes from, and the loader can check ranges and print a reference.

Every number has an upper bound. A field that names none gets the physical ceiling of its
unit (:data:`UNIT_CEILINGS`, each with its reason), so a typo such as ``npu.freq_ghz: 1e300``
or ``memory.channels: 1e8`` is refused instead of simulated. The ceilings are deliberately
generous (one to three orders of magnitude past any shipped or published value): they catch
nonsense, they do not judge designs. Fields whose physics allows a tighter bound say so with
``le``/``lt`` and ``bound_reason``.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

#: unit -> (largest accepted value, why no real design goes past it)
UNIT_CEILINGS: dict[str, tuple[float, str]] = {
    "GHz": (10.0, "no CMOS logic clock in an SoC reaches 10 GHz (mobile NPU/PIM logic runs at 0.5-2 GHz)"),
    "ns": (1e9, "a hardware latency or DRAM timing of 1 s or more is no circuit's"),
    "us": (1e6, "a hardware latency of 1 s or more is no circuit's"),
    "ms": (1e6, "a network or cloud delay of 1000 s is an outage, not a latency"),
    "s": (1e7, "about 116 days"),
    "nCK": (1e4, "JEDEC LPDDR5 timings are below 100 clocks"),
    "cycle": (1e6, "a pipeline latency of 10^6 cycles is no pipeline"),
    "PIM cycle": (1e6, "a switch of 10^6 cycles is no hardware switch"),
    "pJ": (1e9, "1 mJ per element or switch is 10^9 times any circuit's"),
    "pJ/bit": (1e4, "10 nJ/bit is 1000x off-chip DRAM access (~5 pJ/bit)"),
    "pJ/B": (1e5, "100 nJ/byte is 1000x a PCIe/DMA transfer (~40 pJ/byte)"),
    "pJ/MAC": (1e4, "10 nJ per MAC is 10^4x any digital MAC (~0.1-1 pJ)"),
    "pJ/op": (1e4, "10 nJ per vector op is 10^4x any FP16 FMA (~0.5 pJ)"),
    "nJ": (1e6, "1 mJ per decision or row activation is 10^6x any circuit's"),
    "nJ/bit": (1e5, "100 uJ/bit is 200x a cellular radio's uplink (~0.5 uJ/bit)"),
    "uJ": (1e6, "1 J per switch is a CPU busy for seconds"),
    "C": (200.0, "silicon stops working long before 200 C (JEDEC LPDDR5 is specified to 105 C)"),
    "K/W": (1e4, "10 kK/W would put a 1 mW part 10 kK above its surroundings"),
    "J/K": (1e6, "1 MJ/K is a tonne of water, not a device"),
    "mW": (1e5, "100 W is more than a whole phone or laptop SoC draws"),
    "W": (1e4, "10 kW is more than any single accelerator board (H200: 700 W)"),
    "GiB": (1e5, "no single device, rank or memory holds 100 TiB"),
    "GB/s": (1e6, "1 PB/s is 200x the fastest HBM stack set (H200: 4.8 TB/s)"),
    "TFLOPS": (1e5, "100 PFLOPS is 50x the densest single GPU"),
    "TOPS": (1e5, "100 POPS is 25x the densest single GPU"),
    "GOPS": (1e7, "10 POPS per PIM unit is 10^5x any PIM unit"),
    "Mbit/s": (1e6, "1 Tbit/s is 100x any cellular or Wi-Fi link"),
    "B": (float(2 ** 40), "a field of 1 TiB is no message, page or scratchpad"),
    "B/param": (8.0, "no weight format is wider than FP64 (8 bytes)"),
    "bit": (float(2 ** 30), "a 2^30-bit register or entry is no register"),
    "NAND2": (1e9, "10^9 NAND2 gates is a whole SoC, not one controller"),
    "um^2": (1e8, "100 mm^2 is a whole die, not one cell or lane"),
    "mm^2": (1000.0, "the lithography reticle limit is about 858 mm^2"),
    "USD": (1e6, "a million dollars per call or per million tokens"),
    "USD/GPU-h": (1e6, "a million dollars per GPU-hour"),
    "USD/Mtoken": (1e6, "a million dollars per million tokens"),
    "tokens": (float(2 ** 24), "16.7 M tokens is 1000x any shipped trace (about 11k positions)"),
    "rounds": (float(2 ** 24), "16.7 M rounds is 1000x any shipped trace"),
    "positions": (float(2 ** 24), "16.7 M positions is 1000x any shipped trace"),
    "passes": (float(2 ** 24), "16.7 M verification passes is 1000x any shipped trace"),
    "nats": (50.0, "no distribution over fewer than 2^64 tokens has more than ln(2^64) = 44.4 nats"),
}
#: unitless fields: counts (queue entries, array rows, iterations) and dimensionless factors
COUNT_CEILING = (float(2 ** 20), "a count above 2^20 (queue entries, array rows, iterations) is no design "
                 "a run can simulate")
FACTOR_CEILING = (1e6, "a dimensionless factor above 10^6")


def param(
    default: Any = dataclasses.MISSING,
    *,
    doc: str,
    unit: str | None = None,
    source: str | None = None,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    bound_reason: str | None = None,
    low_reason: str | None = None,
    choices: Sequence[Any] | None = None,
    length: tuple[int, int] | None = None,
    item_ge: float | None = None,
    item_le: float | None = None,
    item_choices: Sequence[Any] | None = None,
) -> Any:
    """A dataclass field with metadata used for validation and documentation.

    ``unit`` is informative (units also appear in field names); ``source`` is a
    URL or a derivation note; ``ge/gt/le/lt`` bound numeric values; ``choices``
    restricts strings. A number without ``le``/``lt`` gets its unit's ceiling
    (:data:`UNIT_CEILINGS`); ``bound_reason`` says why an explicit upper bound holds,
    ``low_reason`` why a lower bound does. Lists:
    ``length`` = (fewest, most) items, ``item_ge``/``item_le``/``item_choices`` bound each item.
    """
    if isinstance(default, list) and length is None:
        raise ValueError("a list field needs length=(min, max)")
    numeric = choices is None and (isinstance(default, (int, float)) and not isinstance(default, bool)
                                   or (default is None and unit is not None))
    if (le == 1 or lt == 1) and bound_reason is None and (ge == 0 or gt == 0):
        bound_reason = "a fraction or probability"
    if numeric and le is None and lt is None:
        if unit is not None and unit in UNIT_CEILINGS:
            le, bound_reason = UNIT_CEILINGS[unit]
        elif unit is None:
            le, bound_reason = COUNT_CEILING if isinstance(default, int) else FACTOR_CEILING
        else:
            raise ValueError(f"unit {unit!r} has no ceiling in UNIT_CEILINGS: add one or give le=")
    meta = {
        "doc": doc,
        "unit": unit,
        "source": source,
        "ge": ge,
        "gt": gt,
        "le": le,
        "lt": lt,
        "bound_reason": bound_reason,
        "low_reason": low_reason,
        "choices": tuple(choices) if choices is not None else None,
        "length": length,
        "item_ge": item_ge,
        "item_le": item_le,
        "item_choices": tuple(item_choices) if item_choices is not None else None,
    }
    if isinstance(default, (list, dict, set)):
        value = default
        return dataclasses.field(default_factory=lambda: type(value)(value), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)
