"""The processor-sharing model (ahasd_sim/hw/sharing.py): analytic cases and invariants."""
from __future__ import annotations

import random

import pytest
import simpy

from ahasd_sim.hw.sharing import FlowSpec, FluidShare, Task, fluid_run, maxmin_rates, two_flow_span


def test_lone_flow_gets_full_rate_whatever_its_weight_and_demand():
    for w in (0.01, 0.5, 0.9):
        assert maxmin_rates([FlowSpec("a", {"r": 1.0}, w)]) == [1.0]
    assert maxmin_rates([FlowSpec("a", {"r": 0.3, "s": 0.7}, 0.1)]) == [1.0]
    assert fluid_run([2.5], [FlowSpec("a", {"r": 1.0}, 0.1)]) == [2.5]


def test_two_flows_equal_and_weighted():
    a, b = FlowSpec("a", {"r": 1.0}), FlowSpec("b", {"r": 1.0})
    assert maxmin_rates([a, b]) == pytest.approx([0.5, 0.5])
    # weights 3:1 on one saturated resource: 0.75 / 0.25
    assert maxmin_rates([FlowSpec("a", {"r": 1.0}, 3.0), b]) == pytest.approx([0.75, 0.25])
    # a uses 0.4 of r at full speed: equal levels would give both 1 / 1.4; work-conserving
    assert maxmin_rates([FlowSpec("a", {"r": 0.4}), b]) == pytest.approx([1 / 1.4, 1 / 1.4])
    # a heavy host weight caps the host at rate 1; the PIM flow gets what is left (0.6), not 0.1
    assert maxmin_rates([FlowSpec("h", {"r": 0.4}, 0.9), FlowSpec("p", {"r": 1.0}, 0.1)]) == pytest.approx([1.0, 0.6])
    # the two-flow closed form: 2 s and 3 s at half rate: the first ends at 4, the second at 5
    assert two_flow_span(2.0, 3.0, a, b) == pytest.approx((5.0, 4.0, 5.0))
    assert fluid_run([2.0, 3.0], [a, b]) == pytest.approx([4.0, 5.0])


def test_n_flows_on_one_resource_and_a_bottleneck_elsewhere():
    n = 5
    flows = [FlowSpec(i, {"r": 1.0}) for i in range(n)]
    assert maxmin_rates(flows) == pytest.approx([1 / n] * n)
    # works 1..5 s started together: flow k ends at sum_{j<k} (n - j) * (w_j - w_{j-1})
    works = [1.0, 2.0, 3.0, 4.0, 5.0]
    ends = fluid_run(works, flows)
    expect, t, prev = [], 0.0, 0.0
    for k, w in enumerate(works):
        t += (n - k) * (w - prev)
        prev = w
        expect.append(t)
    assert ends == pytest.approx(expect)
    # classic max-min: flow 0 crosses r and s, flow 1 only r, flow 2 only s with capacity 0.5
    f0, f1, f2 = FlowSpec(0, {"r": 1.0, "s": 1.0}), FlowSpec(1, {"r": 1.0}), FlowSpec(2, {"s": 1.0})
    x = maxmin_rates([f0, f1, f2], capacity={"r": 1.0, "s": 0.5})
    assert x == pytest.approx([0.25, 0.75, 0.25])   # s binds first (0.25 each), r's rest to flow 1


def test_rates_never_overload_and_leave_no_idle_capacity():
    rng = random.Random(7)
    for _ in range(300):
        res = ["r0", "r1", "r2"]
        flows = [FlowSpec(i, {r: rng.choice((0.0, rng.random())) for r in res} | {rng.choice(res): 1.0},
                          rng.choice((0.1, 0.5, 1.0, 2.0))) for i in range(rng.randint(1, 5))]
        x = maxmin_rates(flows)
        load = {r: sum(f.demand.get(r, 0.0) * xi for f, xi in zip(flows, x)) for r in res}
        assert all(v <= 1.0 + 1e-9 for v in load.values())
        for f, xi in zip(flows, x):       # Pareto: each flow is at rate 1 or on a saturated resource
            assert 0.0 < xi <= 1.0 + 1e-12
            assert xi >= 1.0 - 1e-9 or any(load[r] >= 1.0 - 1e-9 for r in f.demand)


def test_work_is_conserved_and_a_resource_is_never_idle_while_flows_wait():
    # two flows on one resource: whatever the starts, the resource does exactly the total work,
    # busy without a gap from the first start (both start before the first could end)
    a, b = FlowSpec("a", {"r": 1.0}), FlowSpec("b", {"r": 1.0})
    for sa, sb, wa, wb in ((0.0, 0.5, 2.0, 1.0), (0.0, 1.5, 2.0, 3.0), (0.2, 0.0, 1.0, 1.0)):
        ends = fluid_run([wa, wb], [a, b], [sa, sb])
        assert max(ends) - min(sa, sb) == pytest.approx(wa + wb)


def test_striped_task_finishes_with_its_slowest_part():
    # a GEMV striped over 3 ranks, 1 s each; another flow uses rank 1 only, at equal weight:
    # parts 0 and 2 finish at 1 s, part 1 runs at half rate next to a 1 s flow: 2 s
    parts = [(1.0, FlowSpec(("gemv", k), {("rank", k): 1.0})) for k in range(3)]
    other = (1.0, FlowSpec("host", {("rank", 1): 1.0}), 0.0)
    assert Task(parts).finish([other]) == pytest.approx(2.0)
    assert Task(parts).finish() == pytest.approx(1.0)    # alone: 1 s, not slowed
    # not a byte-weighted mean (that would be (1 + 2 + 1) / 3)
    assert Task(parts).finish([other]) > 4.0 / 3.0 + 0.5


def _simulate(starts, works, specs):
    """FluidShare in SimPy: flows started at ``starts``; returns each one's end time."""
    env = simpy.Environment()
    share = FluidShare(env)
    ends = [None] * len(works)

    def proc(i):
        yield env.timeout(starts[i])
        f = share.start(specs[i], works[i])
        yield f.event
        ends[i] = env.now
    for i in range(len(works)):
        env.process(proc(i))
    env.run()
    return ends, share


def test_a_rate_change_mid_task_reschedules_its_completion():
    # a: 4 s from 0; b: 1 s from 1 at equal weight. a alone 0..1 (1 s done), both at half rate
    # 1..3 (b done at 3, a at 2 s), a alone 3..5: ends 5 (not 4, not the 6 of a stretch for its
    # whole length); b ends at 3
    a, b = FlowSpec("a", {"r": 1.0}), FlowSpec("b", {"r": 1.0})
    ends, share = _simulate([0.0, 1.0], [4.0, 1.0], [a, b])
    assert ends == pytest.approx([5.0, 3.0])
    assert share.lost_s == pytest.approx({"a": 1.0, "b": 1.0})
    assert share.contended == {"a": 1, "b": 1}


def test_event_driven_sharing_matches_the_closed_form():
    rng = random.Random(3)
    for _ in range(60):
        n = rng.randint(1, 5)
        specs = [FlowSpec(i, {"r": rng.choice((0.5, 1.0)), "s": rng.choice((0.0, 1.0))}, rng.choice((0.5, 1.0)))
                 for i in range(n)]
        starts = [round(rng.uniform(0, 3), 3) for _ in range(n)]
        works = [round(rng.uniform(0.1, 3), 3) for _ in range(n)]
        ends, share = _simulate(starts, works, specs)
        assert ends == pytest.approx(fluid_run(works, specs, starts), rel=1e-9, abs=1e-12)
        assert not share.active
        for i in range(n):          # no flow ends before its stand-alone time
            assert ends[i] >= starts[i] + works[i] - 1e-9


def test_progress_milestones_and_the_recorded_curve():
    env = simpy.Environment()
    share = FluidShare(env)
    a, b = FlowSpec("a", {"r": 1.0}), FlowSpec("b", {"r": 1.0})
    seen = {}

    def host():
        f = share.start(a, 4.0, record=True)
        seen["flow"] = f
        yield f.event

    def watcher():
        yield env.timeout(0.5)
        yield share.wait_work(seen["flow"], 2.0)
        seen["at_2"] = env.now

    def pim():
        yield env.timeout(1.0)
        g = share.start(b, 1.0)
        yield g.event
    for p in (host, watcher, pim):
        env.process(p())
    env.run()
    # a: 1 s done at 1, half rate until b ends at 3 (a at 2 s): the milestone 2 s is reached at 3
    assert seen["at_2"] == pytest.approx(3.0)
    f = seen["flow"]
    assert [f.time_at(w) for w in (0.5, 1.0, 1.5, 2.0, 3.0, 4.0)] == pytest.approx([0.5, 1.0, 2.0, 3.0, 4.0, 5.0])
    assert f.times_at([0.5, 1.0, 1.5, 2.0, 3.0, 4.0]) == [f.time_at(w) for w in (0.5, 1.0, 1.5, 2.0, 3.0, 4.0)]


def test_deterministic():
    specs = [FlowSpec(i, {"r": 1.0}, 0.5 + i) for i in range(4)]
    runs = {tuple(_simulate([0.0, 0.3, 0.3, 1.0], [1.0, 2.0, 0.5, 1.5], specs)[0]) for _ in range(3)}
    assert len(runs) == 1
