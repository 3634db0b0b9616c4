"""Capacity at an SLO: the largest load (phones, or an arrival rate) whose latency meets it.

A doubling search from ``lo`` finds the first load that fails (or reaches ``cap``), then a
bisection between the last load that passed and the first that failed narrows the boundary.
``meets(load)`` runs the simulation at that load and says whether the SLO holds; it is
assumed monotone (meets at x implies meets below x). Simulated latency is noisy, so the
search reports the boundary of the loads it probed, with every probe, not a proof that
every smaller load passes.

* :func:`largest_int` -- integer loads (phones per GPU): exact to ``rel_tol`` x the boundary
  (0: exact, the largest passing integer).
* :func:`largest_real` -- real loads (arrivals per second): to ``rel_tol`` of the boundary.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Capacity:
    """Result of a capacity search. ``value``: the largest load that met the SLO (None: not
    even ``lo``); ``failed_at``: the smallest load probed that failed (None: none failed up to
    ``cap``, so ``value`` is a lower bound); ``probes``: (load, met) in probe order."""

    value: float | int | None
    failed_at: float | int | None
    probes: list[tuple[float, bool]] = field(default_factory=list)

    @property
    def at_cap(self) -> bool:
        """True when no probe failed: the capacity is at least ``value``."""
        return self.failed_at is None and self.value is not None


def _search(meets: Callable, lo, cap, grow, mid, close_enough) -> Capacity:
    probes: list[tuple[float, bool]] = []

    def probe(x):
        ok = bool(meets(x))
        probes.append((x, ok))
        return ok

    if not probe(lo):
        return Capacity(None, lo, probes)
    good, bad = lo, None
    while bad is None:                       # doubling: first failing load (or the cap)
        if good >= cap:
            return Capacity(good, None, probes)
        x = min(cap, grow(good))
        if probe(x):
            good = x
        else:
            bad = x
    while not close_enough(good, bad):       # bisection: good meets, bad does not
        x = mid(good, bad)
        if probe(x):
            good = x
        else:
            bad = x
    return Capacity(good, bad, probes)


def largest_int(meets: Callable[[int], bool], lo: int = 1, cap: int = 4096, rel_tol: float = 0.0) -> Capacity:
    """Largest integer load in [lo, cap] that meets the SLO. The bisection stops when the
    failing and passing loads differ by 1 or by at most ``rel_tol`` x the passing load."""
    if lo < 1 or cap < lo or rel_tol < 0:
        raise ValueError("need 1 <= lo <= cap and rel_tol >= 0")
    return _search(meets, int(lo), int(cap), lambda g: 2 * g, lambda g, b: (g + b) // 2,
                   lambda g, b: b - g <= max(1, int(rel_tol * g)))


def largest_real(meets: Callable[[float], bool], lo: float, cap: float, rel_tol: float = 0.05) -> Capacity:
    """Largest real load in [lo, cap] that meets the SLO, to ``rel_tol`` of the boundary (the
    search stops when the failing load is within (1 + rel_tol) x the passing one)."""
    if not (0 < lo <= cap) or rel_tol <= 0:
        raise ValueError("need 0 < lo <= cap and rel_tol > 0")
    return _search(meets, float(lo), float(cap), lambda g: 2.0 * g, lambda g, b: 0.5 * (g + b),
                   lambda g, b: b <= g * (1.0 + rel_tol))
