"""Energy accounting: per-action dynamic energy plus state (static) power x time.

:class:`EnergyLedger` keeps every charge; :meth:`EnergyLedger.breakdown` groups them
per device into ``{"dynamic": J, "static": J}`` and :meth:`EnergyLedger.total_j` is
exactly the sum of the parts (same summation over the same entries; tested).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

from .cost import OpCost

KINDS = ("dynamic", "static")


@dataclass(frozen=True)
class EnergyEntry:
    device: str
    kind: str          # "dynamic" | "static"
    energy_j: float
    label: str


class EnergyLedger:
    """Append-only record of energy charges of one run (no global state)."""

    def __init__(self) -> None:
        self._entries: list[EnergyEntry] = []

    # ---------------------------------------------------------------- charging
    def add(self, device: str, kind: str, energy_j: float, label: str = "") -> None:
        """Charge ``energy_j`` joules of ``kind`` ("dynamic" or "static") to ``device``."""
        if kind not in KINDS:
            raise ValueError(f"energy kind must be one of {KINDS}, got {kind!r}")
        energy_j = float(energy_j)
        if not math.isfinite(energy_j) or energy_j < 0.0:
            raise ValueError(f"energy must be finite and >= 0 J, got {energy_j!r} ({device}, {label})")
        self._entries.append(EnergyEntry(str(device), kind, energy_j, str(label)))

    def add_cost(self, cost: OpCost, label: str = "") -> None:
        """Charge the dynamic energy of every device in ``cost``."""
        for device, e in cost.energy_j_by_device.items():
            self.add(device, "dynamic", e, label)

    def charge_static(self, device: str, power_w: float, seconds: float, label: str = "static") -> float:
        """Charge static power ``power_w`` (W) held for ``seconds`` (s); returns the joules."""
        if power_w < 0 or seconds < 0:
            raise ValueError(f"static power and time must be >= 0, got {power_w} W x {seconds} s")
        e = float(power_w) * float(seconds)
        self.add(device, "static", e, label)
        return e

    def charge_static_all(self, powers_w: dict[str, float], seconds: float) -> None:
        """Charge each device's static power (e.g. ``Platform.devices()``) over ``seconds``."""
        for device, p in powers_w.items():
            self.charge_static(device, p, seconds)

    # ---------------------------------------------------------------- reading
    @property
    def entries(self) -> tuple[EnergyEntry, ...]:
        return tuple(self._entries)

    def breakdown(self) -> dict[str, dict[str, float]]:
        """``{device: {"dynamic": J, "static": J}}`` over every charge so far."""
        out: dict[str, dict[str, float]] = {}
        for e in self._entries:
            out.setdefault(e.device, {k: 0.0 for k in KINDS})[e.kind] += e.energy_j
        return out

    def by_label(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for e in self._entries:
            out[e.label] = out.get(e.label, 0.0) + e.energy_j
        return out

    def device_j(self, device: str, kind: str | None = None) -> float:
        return sum(e.energy_j for e in self._entries
                   if e.device == device and (kind is None or e.kind == kind))

    def total_j(self) -> float:
        """Sum of all parts of :meth:`breakdown` (summed in the same order)."""
        return sum(v for parts in self.breakdown().values() for v in parts.values())

    def merge(self, others: Iterable["EnergyLedger"]) -> None:
        for other in others:
            self._entries.extend(other._entries)
