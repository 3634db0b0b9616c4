"""Fluid (processor-sharing) model of tasks that share memory resources.

One mechanism for every shared resource of the SoC (the bank time of a group of LPDDR5 ranks,
a channel's data bus, the H2D link, ...): each active task (a *flow*) has a demand on one or
more resources, and progresses at a rate ``x`` in [0, 1] of its stand-alone speed. At full speed
(``x = 1``) a flow uses the fraction ``a[r]`` of resource ``r``'s capacity; resources are shared
by **weighted max-min fairness** (progressive filling): the rates satisfy
``sum_i a_i[r] * x_i <= 1`` for every resource, ``x_i <= 1``, and are the lexicographically
largest vector of ``x_i / w_i`` (Bertsekas & Gallager, *Data Networks*, 2nd ed., section 6.5.2;
the model of SimGrid's LMM solver, Velho et al., ACM TOMACS 23(4), 2013). Rates are
recomputed at every flow start and finish (and by any flow whose rate changes, its completion is
rescheduled).

Properties the tests check: a lone flow gets rate 1 (work-conserving: capacity another flow does
not use goes to whoever can use it); rates never overload a resource; work (bytes, bank-seconds)
is conserved; a striped task (parts on several resources, :class:`Task`) ends when its slowest
part does.

Default arbitration (``pim.host_share_of_active_rank``, 0.5): the host's (NPU's) command stream
and the PIM units' command stream to a rank are served round-robin when both have requests, so
host flows weigh ``share`` and PIM flows ``1 - share`` (equal weights at the default); see
docs/modeling.md "Shared ranks".

Why not SimGrid (PyPI ``simgrid`` 4.1, whose LMM solver implements the same max-min sharing):
it ships as a 5.4 MB source distribution only (3,516 files) that builds with CMake against
Boost (and optionally Eigen, nlohmann_json) on every install; its Python binding drives its own
engine and clock (actors on hosts and links), not a solver one can call from SimPy, so a run
would need two simulators kept in step; and a compiled engine's event order is one more thing to
keep deterministic. The solver here is ~60 lines, pure Python, deterministic (fixed order, no
randomness) and memoised per set of flow kinds, so its cost is a dict lookup per rate change.

Complexity: :func:`maxmin_rates` is O(F * R) per filling round and at most F rounds (F flows,
R resources); :class:`FluidShare` memoises the rates per set of active flow kinds, so a
simulation with a few kinds of flow solves each combination once.
"""
from __future__ import annotations

import bisect
import heapq
import math
from operator import itemgetter
from typing import Callable, Hashable, Iterable, Mapping, Sequence

__all__ = ["FlowSpec", "maxmin_rates", "two_flow_span", "fluid_run", "Task", "FluidShare"]

_EPS = 1e-12
_DONE = itemgetter(1)


class FlowSpec:
    """A kind of flow: its use of each resource at full speed (``demand[r]``, a fraction of the
    resource's capacity) and its arbitration weight."""

    __slots__ = ("name", "demand", "weight")

    def __init__(self, name: Hashable, demand: Mapping[Hashable, float], weight: float = 1.0):
        if weight <= 0:
            raise ValueError(f"flow {name!r}: weight must be > 0, got {weight}")
        for r, a in demand.items():
            if a < 0:
                raise ValueError(f"flow {name!r}: negative demand on {r!r}")
        self.name = name
        self.demand = {r: float(a) for r, a in demand.items() if a > 0}
        self.weight = float(weight)

    def __repr__(self) -> str:
        return f"FlowSpec({self.name!r}, {self.demand!r}, weight={self.weight})"


def maxmin_rates(flows: Sequence[FlowSpec], capacity: Mapping[Hashable, float] | None = None) -> list[float]:
    """Weighted max-min fair rates (each in [0, 1]) of ``flows`` by progressive filling.

    ``capacity[r]`` defaults to 1 (demands are fractions of the resource). All unfrozen flows
    rise together as ``x_i = level * w_i``; when a resource saturates, the flows using it are
    frozen; a flow reaching rate 1 is frozen too. Deterministic (no randomness, fixed order)."""
    n = len(flows)
    rates = [0.0] * n
    free = list(range(n))
    left: dict[Hashable, float] = {}
    for f in flows:
        for r in f.demand:
            if r not in left:
                left[r] = 1.0 if capacity is None else float(capacity.get(r, 1.0))
    level = 0.0
    while free:
        # the level at which the next constraint binds: a flow's cap (x = 1) or a resource
        step = min((1.0 - rates[i]) / flows[i].weight for i in free)
        load: dict[Hashable, float] = {}
        for i in free:
            for r, a in flows[i].demand.items():
                load[r] = load.get(r, 0.0) + a * flows[i].weight
        tight = None
        for r, w in load.items():
            s = left[r] / w if w > 0 else float("inf")
            if s < step - _EPS:
                step, tight = s, {r}
            elif tight is not None and abs(s - step) <= _EPS:
                tight.add(r)
        if step < 0:
            step = 0.0
        level += step
        for i in free:
            inc = step * flows[i].weight
            rates[i] += inc
            for r, a in flows[i].demand.items():
                left[r] -= a * inc
        if tight is None:    # some flows reached rate 1 (and maybe resources saturated exactly)
            tight = {r for r, v in left.items() if v <= _EPS}
        still = []
        for i in free:
            if rates[i] >= 1.0 - _EPS or any(r in tight for r in flows[i].demand):
                if rates[i] > 1.0:
                    rates[i] = 1.0
                continue
            still.append(i)
        if len(still) == len(free):    # nothing froze (rounding): stop rather than loop
            break
        free = still
    return rates


def fluid_run(works: Sequence[float], flows: Sequence[FlowSpec], starts: Sequence[float] | None = None,
              capacity: Mapping[Hashable, float] | None = None) -> list[float]:
    """Finish times of flows with ``works`` (seconds at full speed) started at ``starts``
    (default all at 0), sharing by :func:`maxmin_rates`, rates recomputed at every start and
    finish. The closed form the event-driven :class:`FluidShare` must reproduce."""
    n = len(works)
    starts = [0.0] * n if starts is None else list(starts)
    left = [float(w) for w in works]
    end = [None] * n
    t = min(starts) if n else 0.0
    while any(e is None for e in end):
        active = [i for i in range(n) if end[i] is None and starts[i] <= t + _EPS]
        pending = [starts[i] for i in range(n) if end[i] is None and starts[i] > t + _EPS]
        if not active:
            t = min(pending)
            continue
        rates = maxmin_rates([flows[i] for i in active], capacity)
        dt = min((left[i] / x if x > 0 else float("inf")) for i, x in zip(active, rates))
        if pending:
            dt = min(dt, min(pending) - t)
        for i, x in zip(active, rates):
            left[i] -= x * dt
        t += dt
        for i in active:
            if left[i] <= _EPS * max(1.0, works[i]):
                end[i] = t
    return end


def two_flow_span(t_a: float, t_b: float, a: FlowSpec, b: FlowSpec,
                  rates: tuple[float, float] | None = None) -> tuple[float, float, float]:
    """Two flows started together, alone taking ``t_a`` and ``t_b``: (span until both are done,
    time a was running, time b was running). Closed form of :func:`fluid_run` for two flows
    (operator_sync's static tiers). ``rates``: their :func:`maxmin_rates`, if known."""
    if t_a <= 0 or t_b <= 0:
        return max(t_a, t_b), t_a, t_b
    xa, xb = maxmin_rates((a, b)) if rates is None else rates
    fa = t_a / xa if xa > 0 else float("inf")
    fb = t_b / xb if xb > 0 else float("inf")
    if fa <= fb:                      # a finishes first, b then runs alone at rate 1
        return fa + (t_b - xb * fa), fa, fa + (t_b - xb * fa)
    return fb + (t_a - xa * fb), fb + (t_a - xa * fb), fb


class Task:
    """A striped operation: parts (work, flow kind) on several resources; it ends when its
    slowest part does (``end`` of :func:`fluid_run` over the parts, max)."""

    def __init__(self, parts: Iterable[tuple[float, FlowSpec]]):
        self.parts = list(parts)

    def finish(self, others: Sequence[tuple[float, FlowSpec, float]] = ()) -> float:
        """Finish time when started at 0 next to ``others`` ((work, kind, start) each)."""
        works = [w for w, _ in self.parts] + [w for w, _, _ in others]
        kinds = [k for _, k in self.parts] + [k for _, k, _ in others]
        starts = [0.0] * len(self.parts) + [s for _, _, s in others]
        ends = fluid_run(works, kinds, starts)
        return max(ends[:len(self.parts)]) if self.parts else 0.0


class Flow:
    """One active flow of a :class:`FluidShare`: ``work`` seconds at full speed, ``done`` so far."""

    __slots__ = ("spec", "work", "done", "rate", "t", "start_s", "event", "armed_s", "version",
                 "marks", "history", "end_s", "timer")

    def __init__(self, spec: FlowSpec, work: float, now: float):
        self.spec, self.work, self.done, self.rate, self.t = spec, work, 0.0, 1.0, now
        self.start_s = now
        self.event = None         # fired at completion (SimPy event), made on demand
        self.armed_s = None       # when the flow's wake-up timer is set
        self.version = 0
        self.marks = None         # [(work, event)] progress milestones, sorted
        self.history = None       # [(t, done)] breakpoints of the progress curve (if recorded)
        self.end_s = None
        self.timer = None         # its wake-up Timeout (while armed)

    def times_at(self, works: list[float]) -> list[float]:
        """:meth:`time_at` of each of ``works`` (ascending), in one walk of the history (a merge:
        17-20% faster than a bisect per work on NPU passes of 14-70 breakpoints and 32-40 layers)."""
        h = self.history
        out = []
        append = out.append
        k, n = 0, len(h)
        for work in works:
            if work <= 0:
                append(self.start_s)
                continue
            lim = work - _EPS * (work if work > 1.0 else 1.0)
            # the first breakpoint at or past lim (bisect_left's answer; works ascend, so the
            # walk resumes where the last one stopped)
            while k < n and h[k][1] < lim:
                k += 1
            if k >= n:
                append(h[-1][0])
                continue
            t1, d1 = h[k]
            if k == 0:
                append(t1)
                continue
            t0, d0 = h[k - 1]
            append(t1 if d1 <= d0 else t0 + (t1 - t0) * (min(work, d1) - d0) / (d1 - d0))
        return out

    def time_at(self, work: float) -> float:
        """When the flow's progress reached ``work`` (from its recorded history; exact inverse of
        the piecewise-linear progress curve, the rate constant between breakpoints)."""
        if work <= 0:
            return self.start_s
        h = self.history
        k = bisect.bisect_left(h, work - _EPS * (work if work > 1.0 else 1.0), key=_DONE)
        if k >= len(h):
            return h[-1][0]
        t1, d1 = h[k]
        if k == 0:
            return t1
        t0, d0 = h[k - 1]
        if d1 <= d0:
            return t1
        return t0 + (t1 - t0) * (min(work, d1) - d0) / (d1 - d0)


class FluidShare:
    """Event-driven processor sharing inside a SimPy environment.

    ``start(spec, work)`` adds a flow and returns it; ``flow.event`` (from :meth:`completion`)
    succeeds when its work is done. Every start and finish advances each active flow's progress
    at its old rate, recomputes the rates (:func:`maxmin_rates`, memoised per set of kinds) and
    re-arms wake-ups: a flow whose projected end moved earlier gets a new timer, one whose end
    moved later keeps its (now early) timer, which re-arms on firing. ``lost_s`` per kind is the
    time flows spent beyond their stand-alone work (contention)."""

    def __init__(self, env, solver: Callable[[Sequence[FlowSpec]], list[float]] = maxmin_rates):
        self.env = env
        self.solver = solver
        self.active: list[Flow] = []
        self._memo: dict[tuple, list[float]] = {}
        self._pairs: dict[FlowSpec, tuple] = {}     # spec -> (the other flow's spec, its rate, own rate)
        self.lost_s: dict[Hashable, float] = {}
        self.contended: dict[Hashable, int] = {}

    # ---------------------------------------------------------------- core
    def _advance(self, now: float) -> None:
        for f in self.active:
            dt = now - f.t
            if dt > 0:
                f.done += f.rate * dt
                f.t = now
                if f.history is not None:
                    f.history.append((now, f.done))

    def _resolve(self) -> None:
        act = self.active
        if not act:
            return
        if len(act) == 1:
            rates = (1.0,)
        else:
            key = tuple(id(f.spec) for f in act)
            rates = self._memo.get(key)
            if rates is None:
                rates = self._memo[key] = self.solver([f.spec for f in act])
        for f, x in zip(act, rates):
            f.rate = x

    def _target(self, f: Flow) -> float:
        m = f.marks
        return m[0][0] if m and m[0][0] < f.work else f.work

    def _arm(self, f: Flow) -> None:
        if f.event is None and not f.marks:
            return                # nobody waits on it (its owner polls ``projected_end``)
        now = self.env._now
        rem = self._target(f) - f.done
        at = now + (rem / f.rate if f.rate > 0 else float("inf")) if rem > 0 else now
        if at == float("inf"):
            return
        if at <= now and rem > _EPS * (f.work if f.work > 1.0 else 1.0):
            # the rest takes less than one float step of the clock (tiny work late in a long
            # run) but more than the wake-up's tolerance: a zero-length timer would advance
            # nothing and re-arm forever; the next representable time finishes it (rate * step
            # >= rem), so time always moves on. Within the tolerance the wake-up at `now` ends it.
            at = math.nextafter(now, math.inf)
        if f.armed_s is not None and f.armed_s <= at:
            return                # the timer fires no later than needed: re-arms then
        f.version += 1
        f.armed_s = at
        ev = f.timer = self.env.timeout(at - now)
        v = f.version
        ev.callbacks.append(lambda _e, f=f, v=v: self._wake(f, v))

    def _wake(self, f: Flow, version: int) -> None:
        if version != f.version or f.end_s is not None:
            return
        f.armed_s = None
        now = self.env._now
        self._advance(now)
        tol = _EPS * (f.work if f.work > 1.0 else 1.0)
        m = f.marks
        while m and m[0][0] <= f.done + tol:
            m.pop(0)[1].succeed()
        if f.done >= f.work - tol:
            self._finish(f, now)
            ev = f.event
            if ev is not None:
                ev.succeed()
            return
        self._arm(f)

    def _finish(self, f: Flow, now: float) -> None:
        f.end_s = now
        f.done = f.work
        if f.history is not None:
            f.history.append((now, f.work))
        self.active.remove(f)
        lost = (now - f.start_s) - f.work
        if lost > _EPS * (f.work if f.work > 1.0 else 1.0):
            name = f.spec.name
            self.lost_s[name] = self.lost_s.get(name, 0.0) + lost
            self.contended[name] = self.contended.get(name, 0) + 1
        self._resolve()
        for g in self.active:
            self._arm(g)

    # ---------------------------------------------------------------- API
    def start(self, spec: FlowSpec, work: float, wait: bool = True, record: bool = False) -> Flow:
        """Add a flow of ``work`` seconds (at full speed). ``wait``: make ``flow.event``, fired at
        completion; otherwise the owner ends it with :meth:`finish_now` at :meth:`projected_end`
        (valid only while nothing else happens first). ``record``: keep its progress history."""
        now = self.env._now
        self._advance(now)
        f = Flow(spec, work, now)
        if record:
            f.history = [(now, 0.0)]
        if wait:
            f.event = self.env.event()
        self.active.append(f)
        self._resolve()
        for g in self.active:
            self._arm(g)
        return f

    # ---------------------------------------------------------------- fast path: one flow beside another
    def beside(self, spec: FlowSpec, work: float):
        """A flow of ``spec`` and ``work`` started now next to the one active flow ``g``, if that
        is the case: (when it ends if nothing else starts or ends first, g, g's rate meanwhile),
        else None (no other flow, several, or g would end first: use :meth:`start`). With
        :meth:`commit_beside` it books exactly what start + finish_now would, without a Flow."""
        act = self.active
        if len(act) != 1:
            return None
        g = act[0]
        pair = self._pairs.get(spec)
        if pair is None or pair[0] is not g.spec:
            key = (id(g.spec), id(spec))
            rates = self._memo.get(key)
            if rates is None:
                rates = self._memo[key] = self.solver([g.spec, spec])
            pair = self._pairs[spec] = (g.spec, rates[0], rates[1])
        _gs, x_g, x = pair
        now = self.env._now
        t = now + work / x
        if g.done + g.rate * (now - g.t) + x_g * (t - now) >= g.work:
            return None
        return t, g, x_g

    def drop_early_timer(self, g: Flow, t: float) -> bool:
        """If ``g``'s wake-up timer is the next event and due by ``t``, take it off the event
        queue (it would only find ``g`` unfinished and re-arm: a flow :meth:`beside` g slows g)
        and return True; :meth:`commit_beside` or :meth:`rearm` sets a new one."""
        q = self.env._queue
        if q and g.timer is not None and q[0][3] is g.timer and q[0][0] <= t:
            heapq.heappop(q)
            g.timer = g.armed_s = None
            g.version += 1
            return True
        return False

    def rearm(self, g: Flow) -> None:
        """Set ``g``'s wake-up timer if it has none."""
        if g.armed_s is None and g.end_s is None:
            self._arm(g)

    def commit_beside(self, g: Flow, x_g: float, t0: float, t1: float, spec: FlowSpec, work: float) -> None:
        """Book a :meth:`beside` flow that ran from ``t0`` to ``t1`` (nothing else happened):
        ``g`` advanced at ``x_g`` meanwhile (its rate afterwards is its lone rate again; its
        wake-up timer, if any, fires no later than it ends: early, it re-arms then)."""
        done0 = g.done + g.rate * (t0 - g.t)
        if g.history is not None:
            if t0 > g.t:
                g.history.append((t0, done0))
            g.history.append((t1, done0 + x_g * (t1 - t0)))
        g.done = done0 + x_g * (t1 - t0)
        g.t = t1
        if g.armed_s is None:
            self._arm(g)
        lost = (t1 - t0) - work
        if lost > _EPS * (work if work > 1.0 else 1.0):
            name = spec.name
            self.lost_s[name] = self.lost_s.get(name, 0.0) + lost
            self.contended[name] = self.contended.get(name, 0) + 1

    def done_of(self, f: Flow) -> float:
        """Work ``f`` has done by now."""
        if f.end_s is not None:
            return f.work
        return f.done + f.rate * (self.env._now - f.t)

    def projected_end(self, f: Flow) -> float:
        """When ``f`` ends if no flow starts or ends before."""
        rem = f.work - f.done - f.rate * (self.env._now - f.t)
        return self.env._now + (rem / f.rate if rem > 0 else 0.0)

    def attach(self, f: Flow):
        """Make a flow started with ``wait=False`` a waited one: returns ``f.event``."""
        f.event = self.env.event()
        self._advance(self.env._now)
        self._arm(f)
        return f.event

    def finish_now(self, f: Flow) -> None:
        """End a flow not waited on (``wait=False``) now, at its projected end."""
        now = self.env._now
        self._advance(now)
        self._finish(f, now)

    def wait_work(self, f: Flow, work: float):
        """A SimPy event that succeeds when ``f`` has done ``work`` (at once if it already has)."""
        ev = self.env.event()
        now = self.env._now
        done = f.done + f.rate * (now - f.t) if f.end_s is None else f.work
        if f.end_s is not None or done >= work - _EPS * max(1.0, work):
            ev.succeed()
            return ev
        m = f.marks if f.marks is not None else []
        f.marks = m
        k = 0
        while k < len(m) and m[k][0] <= work:
            k += 1
        m.insert(k, (work, ev))
        self._advance(now)
        self._arm(f)
        return ev

    def rate_of(self, spec: FlowSpec, others: Iterable[FlowSpec] = ()) -> float:
        """The rate a flow of kind ``spec`` gets next to flows of the kinds ``others``."""
        return self.solver([spec, *others])[0]
