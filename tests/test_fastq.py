"""FastStore / FastLock / sleep against SimPy's Store / Resource / timeout: on random schedules (several producers,
one consumer, same-instant events, unrelated processes, full and empty queues, lock waiters)
every process sees the same items at the same times and in the same order, which is what keeps
the async/ahasd modes' results identical to the SimPy-queue version."""
import random

import pytest
import simpy

from ahasd_sim.modes.fastq import FastLock, FastStore, nothing_else_now, sleep


class SimpyStoreAdapter:
    def __init__(self, env, cap):
        self.s = simpy.Store(env, capacity=cap)
        self.items = self.s.items

    def put(self, item):
        ev = self.s.put(item)
        if not ev.triggered:
            yield ev
            return True
        return False

    def get(self):
        return (yield self.s.get())


class SimpyLockAdapter:
    def __init__(self, env):
        self.r = simpy.Resource(env, 1)

    def acquire(self):
        req = self.r.request()
        yield req
        return req

    def release(self, token):
        self.r.release(token)


_MISSING = object()


def _scenario(seed: int, fast: bool, try_put: bool = False, try_get: bool = False, stores: list | None = None) -> list:
    rnd = random.Random(seed)
    env = simpy.Environment()
    cap = rnd.choice([1, 1, 2, 3, 8])
    store = FastStore(env, cap) if fast else SimpyStoreAdapter(env, cap)
    if stores is not None:
        stores.append(store)
    lock = FastLock(env) if fast else SimpyLockAdapter(env)
    log: list = []

    def wait(d):                 # the fast variant advances the clock without an event when it can
        if fast:
            yield from sleep(env, d)
        else:
            yield env.timeout(d)
    # delays on a coarse grid, so that many events fall on the same instant
    delays = [rnd.choice([0, 0, 1, 2, 3]) for _ in range(400)]
    it = iter(delays)

    def producer(k):
        for i in range(rnd.randint(5, 25)):
            yield from wait(next(it, 1))
            if try_put and k % 2 == 0 and store.try_put((k, i)):   # the plain-call fast path
                blocked = False
            else:
                blocked = yield from store.put((k, i))
            log.append((env.now, "put", k, i, blocked, len(store.items)))

    def take():
        if try_get:                          # the plain-call fast path, else the generator
            item = store.try_get(_MISSING)
            if item is not _MISSING:
                return item
        return (yield from store.get())

    def consumer():
        for _ in range(200):
            if rnd.random() < 0.3 and store.items:
                while store.items:           # drain what is there (as the drafter does)
                    item = yield from take()
                    log.append((env.now, "drain", item, len(store.items)))
            item = yield from take()
            log.append((env.now, "get", item, len(store.items)))
            yield from wait(next(it, 1))

    def locker(k):
        for i in range(rnd.randint(3, 12)):
            yield from wait(next(it, 1))
            t0 = env.now
            tok = yield from lock.acquire()
            log.append((env.now, "lock", k, i, env.now > t0))
            yield from wait(next(it, 0))
            lock.release(tok)
            log.append((env.now, "unlock", k, i))

    def bystander():
        for i in range(60):
            yield from wait(next(it, 1))
            log.append((env.now, "tick", i))

    for k in range(rnd.randint(1, 3)):
        env.process(producer(k))
    env.process(consumer())
    for k in range(rnd.randint(1, 4)):
        env.process(locker(k))
    env.process(bystander())
    env.run(until=400)
    return log


@pytest.mark.parametrize("seed", range(60))
def test_same_order_as_simpy(seed):
    ref = _scenario(seed, fast=False)
    assert len(ref) > 20
    assert _scenario(seed, fast=True) == ref


@pytest.mark.parametrize("seed", range(60))
def test_try_put_same_order_as_simpy(seed):
    """``FastStore.try_put`` (else ``put``) gives SimPy's order too: it puts only when ``put``
    would not block, exactly as ``put`` would."""
    assert _scenario(seed, fast=True, try_put=True) == _scenario(seed, fast=False)


@pytest.mark.parametrize("seed", range(60))
def test_try_get_same_order_as_simpy(seed):
    """``FastStore.try_get`` (else ``get``) gives SimPy's order too: it takes an item only when
    ``get`` would neither wait nor yield."""
    assert _scenario(seed, fast=True, try_put=True, try_get=True) == _scenario(seed, fast=False)


@pytest.mark.parametrize("seed", range(20))
def test_store_counts_its_puts_and_peak_occupancy(seed):
    stores: list = []
    log = _scenario(seed, fast=True, try_put=True, try_get=True, stores=stores)
    puts = [e for e in log if e[1] == "put"]
    # pushes counts puts that completed (a producer blocked at the end is not one of them)
    assert stores[0].pushes == len(puts)
    assert stores[0].max_occupancy == max(e[5] for e in puts)


def test_try_get_refuses_without_side_effects_when_get_would_yield():
    env = simpy.Environment()
    store = FastStore(env, 2)
    assert store.try_get("none") == "none"                  # empty
    store.try_put("a")
    env.timeout(0)                                          # another event at this instant
    assert store.try_get("none") == "none" and store.items == ["a"]
    env.run()
    assert store.try_get("none") == "a" and store.items == []


def test_try_put_refuses_without_side_effects_when_put_would_block():
    env = simpy.Environment()
    store = FastStore(env, 1)
    assert store.try_put("a") and store.items == ["a"]
    assert not store.try_put("b") and store.items == ["a"] and not store._putters


def test_scenarios_exercise_blocking_and_waiting():
    """The random schedules above do hit full stores (blocked producers) and lock waiters."""
    blocked = waits = 0
    for seed in range(60):
        log = _scenario(seed, fast=False)
        blocked += sum(1 for e in log if e[1] == "put" and e[4])
        waits += sum(1 for e in log if e[1] == "lock" and e[4])
    assert blocked > 50 and waits > 50


def test_nothing_else_now():
    env = simpy.Environment()
    seen = []

    def p():
        seen.append(nothing_else_now(env))      # the other process's start is pending now
        yield env.timeout(1)
        seen.append(nothing_else_now(env))      # alone at t=1
        env.timeout(0)
        seen.append(nothing_else_now(env))      # an event at t=1 is pending

    def q():
        yield env.timeout(5)

    env.process(p())
    env.process(q())
    env.run()
    assert seen == [False, True, False]


def _lock_handover(fast: bool) -> list:
    """A releases at t=5 while W waits; B asks at the same instant, before the release is
    processed: SimPy grants W right then (the head request first), ahead of C's same-instant event."""
    env = simpy.Environment()
    lock = FastLock(env) if fast else SimpyLockAdapter(env)
    log = []

    def a():
        tok = yield from lock.acquire()
        yield env.timeout(5)
        lock.release(tok)
        log.append("A released")

    def w():
        yield env.timeout(1)
        tok = yield from lock.acquire()
        log.append(f"W got {env.now}")
        lock.release(tok)

    def b():
        yield env.timeout(1)
        yield env.timeout(4)         # its t=5 event comes after A's
        tok = yield from lock.acquire()
        log.append(f"B got {env.now}")
        lock.release(tok)

    def c():
        yield env.timeout(1)
        yield env.timeout(4)
        yield env.timeout(0)
        log.append("C")

    for p in (a, w, b, c):
        env.process(p())
    env.run()
    return log


def test_lock_grants_the_head_request_when_a_new_one_arrives():
    ref = _lock_handover(False)
    assert ref == ["A released", "W got 5", "C", "B got 5"]
    assert _lock_handover(True) == ref
