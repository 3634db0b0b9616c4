"""The cloud server's paged KV memory: reservation-based admission (cloud.kv_cache_gib)."""
from __future__ import annotations

import pytest

from ahasd_sim.config import load_config
from ahasd_sim.hw.cloud import KvBlocks
from ahasd_sim.simulation import run_simulation

from conftest import ROOT

BIG = ROOT / "hw_configs" / "hyco_large_target.yaml"


def test_kv_blocks_refuse_exactly_when_blocks_run_out():
    """10 blocks of 16 tokens. 33 tokens take ceil(33/16) = 3 blocks, 48 take 3, 64 take 4: after
    3 + 3 + 4 = 10 blocks the pool is full; 1 more token is refused and nothing is taken; a
    release of 3 blocks lets a 48-token reservation in, not a 49-token one (4 blocks)."""
    kv = KvBlocks(10, 16)
    assert kv.try_reserve(1, 33) and kv.try_reserve(2, 48) and kv.try_reserve(3, 64)
    assert kv.free_blocks == 0 and kv.peak_blocks == 10
    assert not kv.try_reserve(4, 1) and kv.free_blocks == 0 and kv.refusals == 1
    assert kv.release(2) == 3 and kv.free_blocks == 3
    assert not kv.try_reserve(4, 49) and kv.free_blocks == 3
    assert kv.try_reserve(4, 48) and kv.free_blocks == 0 and kv.refusals == 2


def _fleet(n, gib):
    cfg = load_config(BIG, ["run.mode=cloud_autoregressive", "run.generated_tokens=64", f"cloud.phones_per_gpu={n}",
                            f"cloud.kv_cache_gib={gib}"])
    return cfg, run_simulation(cfg).summary


def test_server_admits_phones_while_their_reservations_fit():
    """A pool sized for exactly one phone's reservation (LLaMA2-13B: 2 x 40 layers x 40 heads x 128
    x 1 B = 409600 B per token; blocks of 16 tokens) admits the run's phone at once and makes the
    second wait until the first is done; with room for two, nobody waits. Unlimited (0): no pool."""
    cfg, s = _fleet(1, 0)
    assert s["cloud_fleet"]["kv_blocks_total"] == 0
    from ahasd_sim.workload.models import get_model
    per_block = 16 * get_model("llama2-13b").kv_bytes_per_token()
    assert per_block == 16 * 409600
    # each phone's reservation (prompt context + 64 tokens + one draft window + 1), read back
    from ahasd_sim.simulation import build_window, load_run_windows
    two = cfg.replace(["cloud.kv_cache_gib=100", "cloud.phones_per_gpu=2"])
    w = build_window(two, load_run_windows(two)[0][1])
    b0, b1 = (-(-w.mode.cloud.kv_tokens[o] // 16) for o in (0, 1))
    # room for the larger one alone: the phones take turns
    _c, s1 = _fleet(2, (max(b0, b1) + 0.5) * per_block / 2**30)
    f = s1["cloud_fleet"]
    assert f["kv_blocks_total"] == max(b0, b1) and f["kv_peak_blocks"] in (b0, b1) and f["kv_refusals"] >= 1
    assert f["admission_wait_p90_ms"] > 0
    # room for both: nobody waits, both held at once
    _c, s2 = _fleet(2, (b0 + b1 + 0.5) * per_block / 2**30)
    assert s2["cloud_fleet"]["kv_refusals"] == 0 and s2["cloud_fleet"]["kv_peak_blocks"] == b0 + b1
    assert s2["cloud_fleet"]["admission_wait_p90_ms"] == 0


def test_a_phone_larger_than_the_pool_is_a_config_error():
    from ahasd_sim.config.errors import ConfigError
    with pytest.raises(ConfigError, match="cloud.kv_cache_gib"):
        _fleet(1, 0.001)


def test_batching_window_gathers_forwards_that_arrive_within_it():
    """Two verify forwards of 1 token arrive at 0 and 1 ms; every forward costs 4 ms (batched: the
    same). Greedy iterations: the first runs alone 0-4 ms, the second 4-8 ms (2 iterations). A 2 ms
    window: the GPU waits until 2 ms, both run in one iteration 2-6 ms."""
    import numpy as np
    import simpy

    from ahasd_sim.config import load_config
    from ahasd_sim.hw.cloud import CloudServer
    from types import SimpleNamespace

    def run(window_ms):
        cfg = load_config(BIG, [f"cloud.batch_window_ms={window_ms}"]).cloud
        env = simpy.Environment()
        srv = CloudServer(env, cfg, lambda kind, n, kv: SimpleNamespace(duration_s=4e-3, energy_j={}), np.random.default_rng(0))
        spans = {}

        def phone(o, at):
            srv.attach(o)
            yield env.timeout(at)
            spans[o] = yield from srv.run(o, "verify", 1, 0, "v", new_call=False)
        env.process(phone(0, 0.0))
        env.process(phone(1, 1e-3))
        env.run()
        return srv.iterations, spans
    it, spans = run(0.0)
    assert it == 2 and spans[0] == pytest.approx((0.0, 4e-3)) and spans[1] == pytest.approx((4e-3, 8e-3))
    it, spans = run(2.0)
    assert it == 1 and spans[0] == spans[1] == pytest.approx((2e-3, 6e-3))


def test_open_arrivals_start_the_other_phones_at_poisson_times():
    """cloud.arrival_rate_per_s = 20: the two other phones arrive at the cumulative sums of two
    Exponential(1 / 20 s) draws from the generator seeded [run.seed, 0xA771, replay seed]; each one's
    first token comes after its arrival and its TPOT counts from there. Rate 0: all start at t = 0."""
    import numpy as np

    from ahasd_sim.simulation import build_window, load_run_windows
    cfg = load_config(BIG, ["run.mode=cloud_autoregressive", "run.generated_tokens=64", "cloud.phones_per_gpu=3",
                            "cloud.arrival_rate_per_s=20"])
    w = build_window(cfg, load_run_windows(cfg)[0][1])
    done = w.mode.start()
    w.env.run(until=done)
    m = w.mode
    want = np.cumsum(np.random.default_rng([cfg.run.seed, 0xA771, m.replay.seed]).exponential(1 / 20, size=2))
    assert [p.started_s for p in m.peers] == pytest.approx(list(want), rel=1e-12)
    for p in m.peers:
        if p.commit_log:
            assert p.commit_log[0][0] > p.started_s
            assert p.user_tpot_s() == pytest.approx((p.commit_log[-1][0] - p.started_s) / p.committed)
    cfg0 = cfg.replace(["cloud.arrival_rate_per_s=0"])
    w0 = build_window(cfg0, load_run_windows(cfg0)[0][1])
    w0.env.run(until=w0.mode.start())
    assert [p.started_s for p in w0.mode.peers] == [0.0, 0.0]
