"""Run metrics: device busy intervals, per-step events, token counters, energy.

Every simulated action is logged once here; the summary, the CSVs and the
timeline are all derived from these records.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any


# What Collector.task records for a (cost, label): task costs are cached process-wide per task
# size, so the same objects recur across tasks, windows and runs. Keyed by the cost's id (a cost
# is recorded under one label in practice; another label replaces the plan). A plan holds its
# cost, so the cost's id is not reused while the plan is in the table.
_PLANS: dict[int, tuple] = {}
_PLANS_MAX = 20_000


def _plan(cost, label: str) -> tuple:
    """(cost, label, ((device, busy_s) with busy_s > 0), ((device, (device, label), energy_j)))
    of a task, in the cost's dict order (so sums add in the same order as a direct loop)."""
    for dev, e in cost.energy_j.items():
        if e < 0:
            raise ValueError(f"negative energy {e} J for {dev}/{label}")
    plan = (cost, label, tuple([(d, b) for d, b in cost.busy_s.items() if b > 0]),
            tuple([(d, (d, label), e) for d, e in cost.energy_j.items()]))
    if len(_PLANS) >= _PLANS_MAX:     # one-off costs (stretched, extra time) must not pile up
        _PLANS.clear()
    _PLANS[id(cost)] = plan
    return plan


class OverlapError(RuntimeError):
    """A device was recorded busy in two tasks at once (a simulator bug)."""


@dataclass
class TokenCounters:
    drafted_tokens: int = 0            # draft tokens kept in a round (later accepted or wasted)
    discarded_draft_forwards: int = 0  # drafter forwards whose token a policy dropped (AdaEDL)
    accepted_tokens: int = 0           # drafts accepted by verification (incl. pre-verification)
    preverify_accepted_tokens: int = 0  # of which accepted by PIM pre-verification (ahasd)
    rejected_tokens: int = 0           # drafts found wrong by verification
    killed_tokens: int = 0             # drafts discarded because an earlier token was rejected
    unverified_at_end: int = 0         # drafts still pending when the run ended
    committed_tokens: int = 0
    verifications: int = 0             # target verification passes (NPU/GPU)
    rollbacks: int = 0
    offpath_drafted_tokens: int = 0    # drafts built on an unverified wrong token
    offpath_synthetic_tokens: int = 0  # off-path drafts beyond the recorded rollout (synthetic fallback)
    drafter_forwards: int = 0          # drafter forwards charged (kept, discarded or killed)
    reused_drafter_forwards: int = 0   # a discarded forward's logits reused by the next round (not re-run)
    duplicate_drafter_forwards: int = 0  # forwards re-run on the same (chain, position): must stay 0
    npu_idle_draft_exhausted_s: float = 0.0  # verifier idle because no drafts were pending

    @property
    def wasted_draft_tokens(self) -> int:
        """Drafts that never became output: rejected plus killed (= drafted - accepted - unverified)."""
        return self.rejected_tokens + self.killed_tokens


@dataclass
class Collector:
    """Collects everything a run reports."""

    devices: list[str]
    busy_intervals: dict[str, list[tuple[float, float, str]]] = field(default_factory=lambda: defaultdict(list))
    events: list[dict[str, Any]] = field(default_factory=list)
    dynamic_energy_j: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    dynamic_energy_by_label_j: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    counters: TokenCounters = field(default_factory=TokenCounters)
    committed_positions: list[int] = field(default_factory=list)
    offchip_bytes_by_task: dict[str, float] = field(default_factory=dict)
    keep_intervals: bool = True
    #: keep the per-step event rows (events.csv); off for runs that write no events.csv (a
    #: sweep point by default, placement tuning), which then skip building them
    keep_events: bool = True

    def __post_init__(self):
        #: with ``keep_intervals``: per task (start_s, {device: end_s}, {device: energy_j}, offchip bytes),
        #: the timeline's power and bandwidth counters
        self.task_marks: list[tuple[float, dict[str, float], dict[str, float], float]] = []
        self._busy_s: dict[str, float] = defaultdict(float)
        #: tasks still running: token -> (start_s, {device: busy_s}); read when a run hits its time limit
        self.in_flight: dict[object, tuple[float, dict[str, float]]] = {}
        self._last_end: dict[str, float] = defaultdict(float)

    def busy(self, device: str, start_s: float, end_s: float, label: str) -> None:
        """Record that ``device`` worked on ``label`` in [start_s, end_s)."""
        if end_s < start_s:
            raise OverlapError(f"{device}: negative interval {start_s}..{end_s} ({label})")
        # Float round-off of chained time sums may be a few ulps; real overlaps are >= 1 ns.
        if start_s < self._last_end[device] - 1e-12 * max(1.0, abs(start_s)):
            raise OverlapError(f"{device}: '{label}' starts at {start_s} before the previous task ended "
                               f"({self._last_end[device]})")
        self._last_end[device] = end_s
        self._busy_s[device] += end_s - start_s
        if self.keep_intervals:
            self.busy_intervals[device].append((start_s, end_s, label))

    def task(self, cost, label: str, start_s: float) -> None:
        """Record a finished task (a :class:`~ahasd_sim.modes.base.TaskCost` started at
        ``start_s``): each device's busy interval, the dynamic energy and the off-chip bytes."""
        self._record(cost, label, start_s, 1.0)

    def _record(self, cost, label: str, start_s: float, scale: float) -> None:
        """:meth:`task` of a task that took ``scale`` x its duration (busy time scaled; energy
        and bytes unchanged). One body for :meth:`task` and :meth:`task_took`.
        Same checks and records as :meth:`busy`, :meth:`energy_map` and :meth:`offchip`, inlined:
        this runs once per simulated task. What a (cost, label) records is read once into a
        plan (:func:`_plan`); the same cost objects recur (costs are cached per task size)."""
        plan = _PLANS.get(id(cost))
        if plan is None or plan[0] is not cost or (plan[1] is not label and plan[1] != label):
            plan = _plan(cost, label)
        last_end = self._last_end
        tol = 1e-12 * (start_s if start_s > 1.0 else (-start_s if start_s < -1.0 else 1.0))  # 1e-12*max(1,|t|)
        busy_s = self._busy_s
        for dev, busy in plan[2]:
            end_s = start_s + busy * scale  # busy > 0 in a plan: never a negative interval
            if start_s < last_end[dev] - tol:
                raise OverlapError(f"{dev}: '{label}' starts at {start_s} before the previous task ended "
                                   f"({last_end[dev]})")
            last_end[dev] = end_s
            busy_s[dev] += end_s - start_s
            if self.keep_intervals:
                self.busy_intervals[dev].append((start_s, end_s, label))
        if self.keep_intervals:
            self.task_marks.append((start_s, {dev: start_s + busy * scale for dev, busy in plan[2]},
                                    cost.energy_j, cost.offchip_bytes or 0.0))
        total, by_label = self.dynamic_energy_j, self.dynamic_energy_by_label_j
        for dev, key, e in plan[3]:
            total[dev] += e
            by_label[key] += e
        if cost.offchip_bytes:
            self.offchip_bytes_by_task[label] = self.offchip_bytes_by_task.get(label, 0.0) + cost.offchip_bytes

    def task_took(self, cost, label: str, start_s: float, took_s: float) -> None:
        """:meth:`task` for a task that took ``took_s`` instead of ``cost.duration_s`` (slowed by
        sharing a resource, :mod:`ahasd_sim.hw.sharing`): each device's busy time scaled by
        took / duration, the dynamic energy and bytes unchanged (the work is the same)."""
        d = cost.duration_s
        if took_s == d:
            self.task(cost, label, start_s)
            return
        self._record(cost, label, start_s, took_s / d if d > 0 else 1.0)

    def task_over(self, cost, label: str, start_s: float, intervals: list[tuple[float, float]]) -> None:
        """Record a task started at ``start_s`` whose devices worked only during ``intervals``
        ((start, end) in order, inside the task), e.g. a layer-pipelined pre-verification that
        waits for the NPU between its layers: as :meth:`task` (the same busy time, energy and
        bytes, summed alike), but a device's busy time is drawn over the intervals in proportion
        to their lengths (timeline)."""
        last_end = self._last_end
        tol = 1e-12 * (start_s if start_s > 1.0 else (-start_s if start_s < -1.0 else 1.0))
        span = None
        for dev, busy in cost.busy_s.items():
            if busy <= 0:
                continue
            if start_s < last_end[dev] - tol:
                raise OverlapError(f"{dev}: '{label}' starts at {start_s} before the previous task ended "
                                   f"({last_end[dev]})")
            if self.keep_intervals:
                if span is None:
                    span = sum(b - a for a, b in intervals)
                drawn = self.busy_intervals[dev]
                end = intervals[0][0]
                for a, b in intervals:
                    start = a if a > end else end    # never before the previous one ended
                    end = start + (b - a) * busy / span
                    drawn.append((start, end, label))
            else:
                end = intervals[-1][1]
            last_end[dev] = end
            self._busy_s[dev] += (start_s + busy) - start_s    # the sum task() adds
        if self.keep_intervals:
            self.task_marks.append((intervals[0][0], {dev: intervals[-1][1] for dev, b in cost.busy_s.items() if b > 0},
                                    cost.energy_j, cost.offchip_bytes or 0.0))
        self.energy_map(cost.energy_j, label)
        if cost.offchip_bytes:
            self.offchip(label, cost.offchip_bytes)

    def busy_until(self, device: str, now_s: float) -> float:
        """Busy time of ``device`` up to ``now_s``, counting the running part of unfinished tasks."""
        extra = sum(max(0.0, min(now_s, start + b.get(device, 0.0)) - start)
                    for start, b in self.in_flight.values() if b.get(device, 0.0) > 0)
        return self._busy_s.get(device, 0.0) + extra

    def energy(self, device: str, energy_j: float, label: str) -> None:
        if energy_j < 0:
            raise ValueError(f"negative energy {energy_j} J for {device}/{label}")
        self.dynamic_energy_j[device] += energy_j
        self.dynamic_energy_by_label_j[(device, label)] += energy_j

    def energy_map(self, energy_by_device: dict[str, float], label: str) -> None:
        # energy() inlined: this runs once per simulated task
        total, by_label = self.dynamic_energy_j, self.dynamic_energy_by_label_j
        for dev, e in energy_by_device.items():
            if e < 0:
                raise ValueError(f"negative energy {e} J for {dev}/{label}")
            total[dev] += e
            by_label[(dev, label)] += e

    def offchip(self, label: str, nbytes: float) -> None:
        self.offchip_bytes_by_task[label] = self.offchip_bytes_by_task.get(label, 0.0) + nbytes

    def event(self, time_s: float, event: str, **fields: Any) -> None:
        if self.keep_events:
            self.events.append({"time_s": time_s, "event": event, **fields})

    def commit(self, positions: range) -> None:
        self.committed_positions.extend(positions)
        self.counters.committed_tokens += len(positions)

    def busy_s(self, device: str) -> float:
        return self._busy_s.get(device, 0.0)
