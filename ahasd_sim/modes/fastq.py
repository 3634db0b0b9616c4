"""Lean SimPy queue and lock with exactly SimPy's event order, for the per-token hot paths.

``simpy.Store`` and ``simpy.Resource`` create and schedule one event per put, get, request and
release, even when nothing waits: the producer of a non-full store does not wait on its put,
but the put event is still scheduled and processed (its callback then finds no waiting getter).
:class:`FastStore` and :class:`FastLock` keep SimPy's rules (FIFO, the same capacity checks,
waiters served when SimPy's event would be processed) and leave out only events whose
processing would change nothing:

* an event nobody waits on whose callback is a no-op at the time it would be processed
  (a put that found room while no getter waited, a release while no request waited);
* the event a process yields for a put/get/request that succeeds at once, when no other
  event is scheduled at the current instant (:func:`nothing_else_now`): SimPy would process
  it next, so the process continues at once, before and after in the same order;
* likewise a timeout that would be the next event processed (:func:`advance`, :func:`sleep`):
  the clock moves to its time and the process goes on (a run of drafter forwards inside one
  NPU pass, or every task of a synchronous mode, then costs no event at all).

What remains is scheduled exactly as SimPy schedules it, so a simulation's event order (and
every number it reports) is unchanged; ``tests/test_fastq.py`` checks this against SimPy on
random producer/consumer schedules. Restriction (the modes' use): each :class:`FastStore` has
one consumer process, which waits for each get it issues before issuing the next.
"""
from __future__ import annotations

from collections import deque
from typing import Any

from simpy.events import Event


def nothing_else_now(env) -> bool:
    """True if no event is scheduled at the current simulated time (SimPy's queue is a heap of
    ``(time, priority, id, event)``): an already-triggered event a process yields now would be
    the next one processed, so the process may continue without yielding it."""
    q = env._queue
    return not q or q[0][0] > env._now


def advance(env, delay: float) -> bool:
    """Advance the clock by ``delay`` without an event if a timeout of ``delay`` scheduled now
    would be the next event processed (every scheduled event is later): SimPy would pop it
    next and resume the process at ``now + delay`` with nothing in between. Returns False (the
    clock untouched) otherwise; the caller then yields ``env.timeout(delay)``."""
    t = env._now + delay            # the time SimPy's schedule() computes for the timeout
    q = env._queue
    if q and q[0][0] <= t:
        return False
    env._now = t
    return True


def sleep(env, delay: float):
    """``yield from sleep(env, d)``: same as ``yield env.timeout(d)``, without the event when
    :func:`advance` allows."""
    if not advance(env, delay):
        yield env.timeout(delay)


def resumed(env, value: Any = None) -> Event:
    """An event triggered now (what SimPy returns for a request that succeeds at once)."""
    ev = Event(env)
    ev._ok = True
    ev._value = value
    env.schedule(ev)
    return ev


class FastStore:
    """FIFO store of ``capacity`` items (``simpy.Store`` semantics, fewer events).

    ``put`` and ``get`` are generators (``yield from``); ``get`` returns the item."""

    def __init__(self, env, capacity: int):
        if capacity <= 0:
            raise ValueError('"capacity" must be > 0.')
        self.env = env
        self.capacity = capacity
        self.items: list[Any] = []
        self.pushes = 0                 # items put (counted when the put completes)
        self.max_occupancy = 0          # most items held right after a put completed
        self._getters: deque[Event] = deque()                 # waiting get events
        self._putters: deque[tuple[Event, Any]] = deque()     # blocked put events and their items

    # SimPy's Store._trigger_get / _trigger_put: serve the head waiter, one per call
    def _serve_getter(self, _event=None) -> None:
        if self._getters and self.items:
            self._getters.popleft().succeed(self.items.pop(0))

    def _serve_putter(self, _event=None) -> None:
        if self._putters and len(self.items) < self.capacity:
            p, item = self._putters.popleft()
            self.items.append(item)
            p.succeed()

    def try_put(self, item: Any) -> bool:
        """:meth:`put` as a plain call when it would not block (no blocked put waits and there is
        room): puts ``item`` exactly as ``put`` does and returns True; otherwise returns False
        having done nothing (then ``yield from put(item)``)."""
        items = self.items
        if self._putters or len(items) >= self.capacity:
            return False
        items.append(item)
        if self._getters:                   # SimPy's put event would serve it when processed
            env = self.env
            ev = Event(env)
            ev.callbacks.append(self._serve_getter)
            ev._ok = True
            env.schedule(ev)
        self.pushes += 1
        if len(items) > self.max_occupancy:
            self.max_occupancy = len(items)
        return True

    def _count_put(self) -> None:
        self.pushes += 1
        if len(self.items) > self.max_occupancy:
            self.max_occupancy = len(self.items)

    def put(self, item: Any):
        """Put ``item``; blocks while the store is full. Returns True if the producer blocked."""
        env = self.env
        if self._putters:
            self._serve_putter()            # SimPy tries the head (oldest) blocked put first
        elif len(self.items) < self.capacity:
            self.items.append(item)
            if self._getters:               # SimPy's put event would serve it when processed
                ev = Event(env)
                ev.callbacks.append(self._serve_getter)
                ev._ok = True
                env.schedule(ev)
            self._count_put()
            return False
        ev = Event(env)
        ev.callbacks.append(self._serve_getter)
        self._putters.append((ev, item))
        yield ev
        self._count_put()
        return True

    def try_get(self, default: Any = None) -> Any:
        """:meth:`get` as a plain call when it would neither wait nor yield (an item is there,
        no getter waits, no put is blocked, nothing else is scheduled now): takes the oldest
        item; otherwise returns ``default`` having done nothing (then ``yield from get()``)."""
        items = self.items
        if items and not self._getters and not self._putters:
            q = self.env._queue                 # nothing_else_now(env), inlined
            if not q or q[0][0] > self.env._now:
                return items.pop(0)
        return default

    def get(self):
        """Take the oldest item; blocks while the store is empty."""
        env = self.env
        if self.items and not self._getters:
            item = self.items.pop(0)
            if self._putters:               # the processed get event lets a blocked put in
                ev = Event(env)
                ev.callbacks.append(self._serve_putter)
                ev._ok = True
                ev._value = item
                env.schedule(ev)
                return (yield ev)
            if nothing_else_now(env):
                return item
            return (yield resumed(env, item))
        ev = Event(env)
        ev.callbacks.append(self._serve_putter)   # before the consumer's resume, as in SimPy
        self._getters.append(ev)
        return (yield ev)


class FastLock:
    """A capacity-one ``simpy.Resource`` (FIFO requests, fewer events).

    ``acquire`` is a generator returning a token; pass it to ``release``."""

    def __init__(self, env):
        self.env = env
        self.users: list[object] = []
        self._waiting: deque[Event] = deque()

    def _grant(self, _event=None) -> None:
        """SimPy's Resource._trigger_put: grant the head request if the unit is free."""
        if self._waiting and not self.users:
            ev = self._waiting.popleft()
            self.users.append(ev)
            ev.succeed(ev)

    def acquire(self):
        env = self.env
        if self._waiting:
            self._grant()                   # SimPy tries the head request first
        if not self._waiting and not self.users:
            token = object()
            self.users.append(token)
            if nothing_else_now(env):
                return token
            yield resumed(env)
            return token
        ev = Event(env)
        self._waiting.append(ev)
        return (yield ev)

    def release(self, token) -> None:
        self.users.remove(token)
        if self._waiting:                   # SimPy's release event grants it when processed
            ev = Event(env := self.env)
            ev.callbacks.append(self._grant)
            ev._ok = True
            env.schedule(ev)
