"""Exact-outcome scenarios per mode with a recording, scripted drafting policy (issue 19).

Tiny constructed traces, constant task latencies (modes_helpers.FixedCosts: draft 1 s per
token on the drafter device, verify 5 s on the verifier), and a policy that drafts a
scripted number of tokens per round and records every ``on_verify`` outcome. Each test
derives, in its comments, the exact sequence of verifications, commits and rollbacks,
the token counters and the device busy intervals, and asserts them all.
"""
from __future__ import annotations

import numpy as np
import simpy

from ahasd_sim.config import load_config
from ahasd_sim.metrics.collector import Collector
from ahasd_sim.modes import RunContext, get_mode
from ahasd_sim.modes.replay import TraceReplay
from ahasd_sim.policies.base import Decision, DraftPolicy

from modes_helpers import FixedCosts, as_trace, synthetic_trace

T, F = True, False


class ScriptedPolicy(DraftPolicy):
    """Drafts ``ks[i]`` tokens in round i (the last entry repeats); records what it is told."""

    name = "scripted"

    def __init__(self, config, ks):
        super().__init__(config, np.random.default_rng(0))
        self.ks = list(ks)
        self.rounds = 0
        self.outcomes: list[tuple] = []

    def begin_round(self, ctx):
        self.rounds += 1
        return super().begin_round(ctx)

    def decide(self, view):
        k = self.ks[min(self.rounds - 1, len(self.ks) - 1)]
        return self.bounded(view, Decision.STOP_AFTER if view.index_in_round + 1 >= k else Decision.CONTINUE)

    def on_verify(self, outcome):
        self.outcomes.append((outcome.n_drafted, outcome.n_accepted, outcome.n_committed,
                              outcome.round_time_s, outcome.now_s))
        return super().on_verify(outcome)


def run_scripted(tmp_path, mode, accept, n_tokens, ks, overrides=(), costs=None):
    p = tmp_path / "cfg.yaml"
    p.write_text("{}\n")
    cfg = load_config(p, [f"run.mode={mode}", f"run.generated_tokens={n_tokens}", *overrides])
    trace = as_trace(synthetic_trace(accept))
    env = simpy.Environment()
    col = Collector(devices=["npu", "pim", "gpu"])
    policy = ScriptedPolicy(cfg.policy, ks)
    ctx = RunContext(cfg=cfg, platform=None, costs=costs or FixedCosts(), replay=TraceReplay(trace, n_tokens),
                     policy=policy, collector=col, rng=np.random.default_rng(0), n_tokens=n_tokens)
    m = get_mode(mode)(env, ctx)
    done = m.start()
    env.run(until=simpy.AnyOf(env, [done, env.timeout(1e6)]))
    assert done.triggered, "mode did not finish"
    return m, col, policy, env.now


def counters(col):
    c = col.counters
    return dict(drafted=c.drafted_tokens, accepted=c.accepted_tokens, rejected=c.rejected_tokens,
                killed=c.killed_tokens, unverified_at_end=c.unverified_at_end, committed=c.committed_tokens,
                verifications=c.verifications, rollbacks=c.rollbacks, offpath=c.offpath_drafted_tokens)


def intervals(col, dev):
    return [(s, e, label) for s, e, label in col.busy_intervals[dev]]


# ------------------------------------------------------------------ synchronous modes
SYNC_ACCEPT = [T, T, F, T, T, T, T, F, T, T, T, T]


def _check_sync(col, policy, t, dev):
    # Round 1 drafts pos 0,1,2 (t 0..3), verifies 3..8: pos 0,1 right, pos 2 wrong ->
    #   2 accepted, 1 rejected, commit 0..2 (pos 2 = the target's correction), a rollback
    #   (a rejection); outcome (drafted 3, accepted 2, committed 3, round time 8, at t=8).
    # Round 2 drafts 3,4,5 (8..11), verifies 11..16: all right -> 3 accepted, commit 3..6
    #   (pos 6 = bonus token); nothing rejected or killed: no rollback; outcome (3, 3, 4, 8, 16).
    # Round 3 (k=2) drafts 7,8 (16..18): pos 7 is wrong, so pos 8 is drafted off-path; verify
    #   18..23: 0 accepted, pos 7 rejected, commit pos 7 -> 8 tokens, done. Pos 8 was never
    #   decided: unverified at the end. Outcome (2, 0, 1, 7, 23).
    assert policy.outcomes == [(3, 2, 3, 8.0, 8.0), (3, 3, 4, 8.0, 16.0), (2, 0, 1, 7.0, 23.0)]
    assert counters(col) == dict(drafted=8, accepted=5, rejected=2, killed=0, unverified_at_end=1, committed=8,
                                 verifications=3, rollbacks=1, offpath=1)
    assert t == 23.0
    assert col.committed_positions == list(range(8))
    d, v = "draft", "verify"
    assert intervals(col, dev) == [(0, 1, d), (1, 2, d), (2, 3, d), (3, 8, v),
                                   (8, 9, d), (9, 10, d), (10, 11, d), (11, 16, v),
                                   (16, 17, d), (17, 18, d), (18, 23, v)]
    # 1 J per busy second on the busy device
    assert col.dynamic_energy_j[dev] == 23.0


def test_gpu_only_sync_rounds_exact(tmp_path):
    m, col, policy, t = run_scripted(tmp_path, "gpu_only", SYNC_ACCEPT, 8, [3, 3, 2])
    _check_sync(col, policy, t, "gpu")


def test_operator_sync_rounds_exact(tmp_path):
    # FixedCosts maps an operator_sync drafter forward to 1 s and a target pass to 5 s on "npu"
    m, col, policy, t = run_scripted(tmp_path, "operator_sync", SYNC_ACCEPT, 8, [3, 3, 2])
    _check_sync(col, policy, t, "npu")


def test_sync_bonus_token_ends_the_run_exactly(tmp_path):
    # k=4 on an all-right trace, 5 tokens: drafts 0..3 (0..4), verify 4..9 accepts all 4 and
    # commits 0..4 including the bonus token pos 4 -> done after one round, nothing pending.
    m, col, policy, t = run_scripted(tmp_path, "gpu_only", [T] * 10, 5, [4])
    assert policy.outcomes == [(4, 4, 5, 9.0, 9.0)]
    assert counters(col) == dict(drafted=4, accepted=4, rejected=0, killed=0, unverified_at_end=0, committed=5,
                                 verifications=1, rollbacks=0, offpath=0)
    # 6 tokens: a bonus token (pos 4) that does not end the run; round 2 drafts pos 5 (9..10)
    # and verifies it (10..15): commit 5 (+ bonus 6, capped at the run length 6).
    m, col, policy, t = run_scripted(tmp_path, "gpu_only", [T] * 10, 6, [4, 1])
    assert policy.outcomes == [(4, 4, 5, 9.0, 9.0), (1, 1, 1, 6.0, 15.0)]
    assert counters(col)["accepted"] == 5 and counters(col)["unverified_at_end"] == 0 and t == 15.0
