"""Cost of one unit of work on the hardware: :class:`OpCost`.

Every analytic unit model (NPU, LPDDR5, PIM, AAU, GTS, GPU, links) answers "how long
and how much dynamic energy" with an :class:`OpCost`. Costs compose:

* :func:`seq` -- one after another: durations add, energies add, bytes add;
* :func:`par` -- concurrently on independent resources: duration is the maximum,
  energies and bytes add;
* :meth:`OpCost.repeat` -- ``n`` sequential copies (``layer_repeat`` occurrences).

Static (leakage/background) energy is *not* part of an OpCost: it is charged on the
simulated time span through :class:`ahasd_sim.hw.energy.EnergyLedger`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Iterable, Mapping


def _freeze(d: Mapping[str, float]) -> Mapping[str, float]:
    return MappingProxyType({str(k): float(v) for k, v in d.items()})


@dataclass(frozen=True)
class OpCost:
    """Duration, dynamic energy per device and traffic of one piece of work.

    ``energy_j_by_device`` maps a device name (``"npu"``, ``"lpddr5"``, ``"pim"``,
    ``"aau"``, ``"gts"``, ``"gpu"``, ``"h2d"``, ``"network"``) to *dynamic* joules.
    ``bus_bytes`` are the bytes that crossed the external memory bus (NPU/GPU <-> DRAM,
    or PIM <-> NPU offloads); PIM bank-local traffic is not bus traffic.
    """

    duration_s: float
    energy_j_by_device: Mapping[str, float] = field(default_factory=dict)
    bus_bytes: float = 0.0
    macs: float = 0.0

    def __post_init__(self) -> None:
        if not self.duration_s >= 0.0:
            raise ValueError(f"OpCost.duration_s must be >= 0, got {self.duration_s!r}")
        if self.bus_bytes < 0 or self.macs < 0:
            raise ValueError("OpCost.bus_bytes and OpCost.macs must be >= 0")
        for dev, e in self.energy_j_by_device.items():
            if not e >= 0.0:
                raise ValueError(f"OpCost energy of {dev!r} must be >= 0, got {e!r}")
        object.__setattr__(self, "energy_j_by_device", _freeze(self.energy_j_by_device))

    # ------------------------------------------------------------------ views
    @property
    def energy_j(self) -> float:
        """Total dynamic energy over all devices (J)."""
        return float(sum(self.energy_j_by_device.values()))

    def energy_of(self, device: str) -> float:
        return float(self.energy_j_by_device.get(device, 0.0))

    # ------------------------------------------------------------ composition
    def repeat(self, n: int | float) -> "OpCost":
        """``n`` sequential copies of this cost (``n`` may be 0)."""
        if n < 0:
            raise ValueError(f"repeat count must be >= 0, got {n!r}")
        return OpCost(self.duration_s * n,
                      {k: v * n for k, v in self.energy_j_by_device.items()},
                      self.bus_bytes * n, self.macs * n)

    def then(self, other: "OpCost") -> "OpCost":
        return seq(self, other)

    def __add__(self, other: "OpCost") -> "OpCost":
        return seq(self, other)

    def with_energy(self, device: str, energy_j: float) -> "OpCost":
        """This cost with ``energy_j`` more dynamic energy charged to ``device``."""
        e = dict(self.energy_j_by_device)
        e[device] = e.get(device, 0.0) + energy_j
        return OpCost(self.duration_s, e, self.bus_bytes, self.macs)

    @staticmethod
    def zero() -> "OpCost":
        return ZERO


ZERO = OpCost(0.0)


def _merge_energy(costs: Iterable[OpCost]) -> dict[str, float]:
    out: dict[str, float] = {}
    for c in costs:
        for k, v in c.energy_j_by_device.items():
            out[k] = out.get(k, 0.0) + v
    return out


def seq(*costs: OpCost) -> OpCost:
    """Costs executed one after another: durations, energies, bytes and MACs add."""
    return OpCost(float(sum(c.duration_s for c in costs)), _merge_energy(costs),
                  float(sum(c.bus_bytes for c in costs)), float(sum(c.macs for c in costs)))


def par(*costs: OpCost) -> OpCost:
    """Costs executed concurrently on independent resources: duration = max, the rest adds."""
    return OpCost(max((c.duration_s for c in costs), default=0.0), _merge_energy(costs),
                  float(sum(c.bus_bytes for c in costs)), float(sum(c.macs for c in costs)))


def op_kind(op: object) -> str:
    """The kind of a workload operator as a plain string ("gemm", "gemv", ...)."""
    kind = getattr(op, "kind")
    return str(getattr(kind, "value", kind))


MATRIX_KINDS = ("gemm", "gemv", "attention")
ELEMENTWISE_KINDS = ("nonlinear", "reduction")
