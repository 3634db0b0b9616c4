"""Exact-outcome scenarios per mode with a recording, scripted drafting policy (issue 19).

Tiny constructed traces, constant task latencies (modes_helpers.FixedCosts: draft 1 s per
token on the drafter device, verify 5 s on the verifier), and a policy that drafts a
scripted number of tokens per round and records every ``on_verify`` outcome. Each test
derives, in its comments, the exact sequence of verifications, commits and rollbacks,
the token counters and the device busy intervals, and asserts them all.
"""
from __future__ import annotations

import numpy as np
import pytest
import simpy

from ahasd_sim.config import ConfigError, load_config
from ahasd_sim.metrics.collector import Collector
from ahasd_sim.modes import RunContext, get_mode
from ahasd_sim.modes.base import MODES, TaskCost
from ahasd_sim.modes.replay import TraceReplay
from ahasd_sim.policies.base import Decision, DraftPolicy

from modes_helpers import FixedCosts, as_trace, synthetic_trace

T, F = True, False


class ScriptedPolicy(DraftPolicy):
    """Drafts ``ks[i]`` tokens in round i (the last entry repeats); records what it is told.

    ``discard``: end each round by discarding the forward after its k-th token (AdaEDL-like)
    instead of stopping after it; ``raw``: always answer CONTINUE without the round bounds,
    so the mode's own cap ends the round. Records every round context, id, view and outcome.
    """

    name = "scripted"

    def __init__(self, config, ks, discard=False, raw=False):
        super().__init__(config, np.random.default_rng(0))
        self.ks = list(ks)
        self.discard, self.raw = discard, raw
        self.rounds = 0
        self.outcomes: list[tuple] = []
        self.round_ids: list[int] = []
        self.contexts: list[tuple] = []
        self.views: list[tuple] = []

    def begin_round(self, ctx):
        self.rounds += 1
        self.contexts.append((ctx.now_s, ctx.min_tokens, ctx.max_tokens))
        rid = super().begin_round(ctx)
        self.round_ids.append(rid)
        return rid

    def decide(self, view):
        self.views.append((self.rounds, view.index_in_round, view.entropy_nats, view.now_s))
        if self.raw:
            return Decision.CONTINUE
        k = self.ks[min(self.rounds - 1, len(self.ks) - 1)]
        if self.discard:
            return self.bounded(view, Decision.STOP_DISCARD if view.index_in_round >= k else Decision.CONTINUE)
        return self.bounded(view, Decision.STOP_AFTER if view.index_in_round + 1 >= k else Decision.CONTINUE)

    def on_verify(self, outcome):
        self.outcomes.append((outcome.n_drafted, outcome.n_accepted, outcome.n_committed,
                              outcome.round_time_s, outcome.now_s))
        self.outcome_round_ids = getattr(self, "outcome_round_ids", []) + [outcome.round_id]
        return super().on_verify(outcome)


class RecordingCosts(FixedCosts):
    """FixedCosts that log every cost asked for, with its token count and KV length."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.calls: list[tuple] = []
        self.mapping_asked: list[int] = []

    def draft_token(self, kv_len):
        self.calls.append(("draft", kv_len))
        return super().draft_token(kv_len)

    def verify(self, n_tokens, kv_len):
        self.calls.append(("verify", n_tokens, kv_len))
        return super().verify(n_tokens, kv_len)

    def preverify(self, n_tokens, kv_len):
        self.calls.append(("preverify", n_tokens, kv_len))
        return super().preverify(n_tokens, kv_len)

    def prefill(self, role, n_tokens):
        self.calls.append(("prefill", role, n_tokens))
        return super().prefill(role, n_tokens)

    def gpu_prefill(self, role, n_tokens):
        self.calls.append(("prefill", role, n_tokens))
        return super().gpu_prefill(role, n_tokens)

    def gpu_draft_token(self, kv_len):
        self.calls.append(("draft", kv_len))
        return super().gpu_draft_token(kv_len)

    def gpu_verify(self, n_tokens, kv_len):
        self.calls.append(("verify", n_tokens, kv_len))
        return super().gpu_verify(n_tokens, kv_len)

    def opsync_mapping(self, k):
        self.mapping_asked.append(k)
        self.mapping = {"draft": {"q_proj": "pim"}, "target": {"q_proj": "npu"}}
        return self.mapping

    def opsync_forward(self, role, n, kv, mapping):
        assert mapping is self.mapping       # the mapping searched once, at construction
        self.calls.append(("draft", kv) if role == "draft" else ("verify", n, kv))
        assert role == "target" or n == 1
        return super().opsync_forward(role, n, kv, mapping)


def run_scripted(tmp_path, mode, accept, n_tokens, ks, overrides=(), costs=None, entropy=0.5, prompts=None,
                 rollout_len=8, tvc_spy=False, **policy_kw):
    """``prompts``: [(prompt length, response length), ...] covering the trace (default: one
    prompt of 100 tokens)."""
    p = tmp_path / "cfg.yaml"
    p.write_text("{}\n")
    cfg = load_config(p, [f"run.mode={mode}", f"run.generated_tokens={n_tokens}", *overrides])
    trace = synthetic_trace(accept, entropy, rollout_len)
    if prompts is not None:
        trace.prompt_len = np.concatenate([np.full(n, plen) for plen, n in prompts])
        trace.pos_in_response = np.concatenate([np.arange(n) for _, n in prompts])
    trace = as_trace(trace)
    env = simpy.Environment()
    col = Collector(devices=["npu", "pim", "gpu"])
    policy = ScriptedPolicy(cfg.policy, ks, **policy_kw)
    ctx = RunContext(cfg=cfg, platform=None, costs=costs or FixedCosts(), replay=TraceReplay(trace, n_tokens),
                     policy=policy, collector=col, rng=np.random.default_rng(0), n_tokens=n_tokens)
    m = get_mode(mode)(env, ctx)
    if tvc_spy:                  # record what TVC is asked: (elapsed s, KV length, extra tokens)
        decide, m.tvc.asked = m.tvc.decide, []

        def spy(elapsed, kv, next_draft_len=None, extra_tokens=0):
            if not m.tvc.asked:      # the tables the first decision sees
                m.tvc.first_tables = [list(f.items) for f in (m.tvc.nvct, m.tvc.pdct, m.tvc.pvct)]
            m.tvc.asked.append((elapsed, kv, extra_tokens))
            return decide(elapsed, kv, next_draft_len, extra_tokens)
        m.tvc.decide = spy
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


def test_sync_rounds_ask_the_right_costs_views_and_contexts(tmp_path):
    # The SYNC_ACCEPT rounds of _check_sync, now checking what the mode asks for. The trace's
    # prompt is 100 tokens and position p is the p-th response token: KV length 100 + p.
    # Drafter forward at pos p: KV 100 + p. A round from s verifying d drafts: d + 1 tokens
    # (the drafts and the token before them) over the KV before s: (d + 1, 100 + s).
    # Entropies: position p has 0.01 (p + 1); the off-path pos 8 (after the wrong pos 7)
    # shows the first recorded rollout value after pos 7 (2.0 nats).
    ent = 0.01 * (np.arange(12) + 1)
    for mode in ("gpu_only", "operator_sync"):
        costs = RecordingCosts()
        m, col, policy, t = run_scripted(tmp_path, mode, SYNC_ACCEPT, 8, [3, 3, 2], costs=costs, entropy=ent,
                                         overrides=["policy.min_tokens=1", "policy.max_tokens=6"])
        assert costs.calls == [("prefill", "target", 100), ("prefill", "draft", 100), ("draft", 100), ("draft", 101), ("draft", 102), ("verify", 4, 100),
                               ("draft", 103), ("draft", 104), ("draft", 105), ("verify", 4, 103),
                               ("draft", 107), ("draft", 108), ("verify", 3, 107)], mode
        if mode == "operator_sync":
            assert costs.mapping_asked == [4]          # operator_sync.mapping_draft_len, searched once
            assert m.stats() == {"mapping_draft_len": 4, "mapping": costs.mapping}
        # rounds begin at 0, 8 and 16 with the configured bounds; outcomes carry their round's id
        assert policy.contexts == [(0.0, 1, 6), (8.0, 1, 6), (16.0, 1, 6)]
        assert policy.round_ids == [0, 1, 2] and policy.outcome_round_ids == [0, 1, 2]
        # each view: (round, index in round, entropy, time: the view is taken when the forward
        # of that token starts)
        e = [pytest.approx(x) for x in ent]
        assert policy.views == [(1, 0, e[0], 0.0), (1, 1, e[1], 1.0), (1, 2, e[2], 2.0),
                                (2, 0, e[3], 8.0), (2, 1, e[4], 9.0), (2, 2, e[5], 10.0),
                                (3, 0, e[7], 16.0), (3, 1, 2.0, 17.0)]
        # events: one per drafter forward (position, 1 s) and per verification (start, drafts,
        # accepted, 5 s)
        ev = [(x["event"], x["time_s"], x["position"], x.get("n_tokens"), x.get("accepted"), x["duration_s"])
              for x in col.events]
        d = [("draft_token", float(ts), pos, None, None, 1.0) for ts, pos in
             ((0, 0), (1, 1), (2, 2), (8, 3), (9, 4), (10, 5), (16, 7), (17, 8))]
        assert ev == [*d[:3], ("verify", 3.0, 0, 3, 2, 5.0), *d[3:6], ("verify", 11.0, 3, 3, 3, 5.0),
                      *d[6:], ("verify", 18.0, 7, 2, 0, 5.0)]
        _check_sync(col, policy, t, "gpu" if mode == "gpu_only" else "npu")


def test_sync_discarded_forwards_are_charged_and_counted(tmp_path):
    # Each round keeps 2 tokens and discards the forward of the 3rd (AdaEDL-like), all right:
    # round 1 drafts pos 0,1 and runs pos 2's forward (0..3), verifies 3..8: 2 accepted, commit
    # 0,1 + bonus 2; round 2 from pos 3: forwards 3,4,5 (8..11), verify 11..16: commit 3,4 +
    # bonus 5 -> 6 tokens, done. The discarded forward at pos 2 (pos 5) is not reused: the next
    # round starts after the bonus token. 6 forwards, 4 drafted, 2 discarded, 0 reused.
    for mode in ("gpu_only", "operator_sync"):
        m, col, policy, t = run_scripted(tmp_path, mode, [T] * 12, 6, [2], discard=True)
        c = col.counters
        assert (c.drafter_forwards, c.drafted_tokens, c.discarded_draft_forwards, c.reused_drafter_forwards,
                c.duplicate_drafter_forwards) == (6, 4, 2, 0, 0)
        assert policy.outcomes == [(2, 2, 3, 8.0, 8.0), (2, 2, 3, 8.0, 16.0)] and t == 16.0
        dev = "gpu" if mode == "gpu_only" else "npu"
        assert [(s, e) for s, e, _ in intervals(col, dev)] == [
            (0, 1), (1, 2), (2, 3), (3, 8), (8, 9), (9, 10), (10, 11), (11, 16)]


def test_sync_round_cap_and_end_of_trace_end_a_round(tmp_path):
    # A policy that never stops: the mode's cap (policy.max_tokens = 2) ends every round.
    # All right, 6 tokens: drafts 0,1 (0..2), verify 2..7 commits 0,1 + bonus 2; drafts 3,4
    # (7..9), verify 9..14 commits 3,4,5: done at 14.
    m, col, policy, t = run_scripted(tmp_path, "gpu_only", [T] * 12, 6, [1], raw=True,
                                     overrides=["policy.max_tokens=2"])
    assert policy.outcomes == [(2, 2, 3, 7.0, 7.0), (2, 2, 3, 7.0, 14.0)] and t == 14.0
    assert col.counters.drafted_tokens == 4
    # A trace of exactly 8 positions, k = 4: round 1 drafts 0..3 (0..4), verify 4..9 commits
    # 0..4; round 2 drafts 5,6,7 (9..12) and finds no position 8 to draft: it verifies the 3
    # (12..17), committing 5,6,7 (the bonus would be past the trace) -> done at 17.
    m, col, policy, t = run_scripted(tmp_path, "gpu_only", [T] * 8, 8, [4])
    assert policy.outcomes == [(4, 4, 5, 9.0, 9.0), (3, 3, 3, 8.0, 17.0)] and t == 17.0
    assert col.counters.drafted_tokens == 7 and col.committed_positions == list(range(8))


def test_sync_redrafting_a_position_on_a_new_chain_is_no_duplicate(tmp_path):
    # k=3, pos 1 wrong, 5 tokens. Round 1 drafts 0,1,2 (0..3), verify 3..8: pos 0 accepted,
    # pos 1 rejected (commit 0 + correction 1), pos 2 (drafted after the wrong token) killed:
    # rollback 1, new chain. Round 2 drafts 2,3,4 (8..11) -- pos 2 again, on the new chain --
    # verify 11..16: all right, commit 2,3,4 (bonus cut at 5). Outcomes (3,1,2,8,8) and
    # (3,3,3,8,16); 6 forwards, none a duplicate.
    m, col, policy, t = run_scripted(tmp_path, "gpu_only", [T, F] + [T] * 10, 5, [3])
    assert policy.outcomes == [(3, 1, 2, 8.0, 8.0), (3, 3, 3, 8.0, 16.0)]
    assert counters(col) == dict(drafted=6, accepted=4, rejected=1, killed=1, unverified_at_end=0, committed=5,
                                 verifications=2, rollbacks=1, offpath=1)
    c = col.counters
    assert (c.drafter_forwards, c.duplicate_drafter_forwards) == (6, 0)


def test_sync_counts_offpath_and_synthetic_drafts(tmp_path):
    # k=5, pos 1 wrong, 1 recorded rollout token, 2 tokens: the round drafts 0..4 (0..5); pos
    # 2,3,4 follow the wrong pos 1 (off-path), pos 2 is the recorded rollout token, 3 and 4 are
    # synthetic. Verify 5..10: pos 0 accepted, pos 1 rejected: 2 tokens, done; 3 unverified.
    m, col, policy, t = run_scripted(tmp_path, "gpu_only", [T, F] + [T] * 10, 2, [5], rollout_len=1)
    assert t == 10.0 and policy.outcomes == [(5, 1, 2, 10.0, 10.0)]
    c = col.counters
    assert (c.drafted_tokens, c.offpath_drafted_tokens, c.offpath_synthetic_tokens, c.unverified_at_end) == (5, 3, 2, 3)


def test_verification_right_after_the_last_draft_is_not_contended(tmp_path):
    # EDC-only, stop after each batch (pos 2i right, 2i+1 wrong): the drafter's forward of pos
    # 1 ends at 2, when the NPU starts [0,2); PIM is idle from then on (the drafter waits for
    # feedback), so the pass shares the ranks with nothing and runs at full rate: 2..7, done.
    # (The old fixed stretch factor, decided at a pass's start, would have made it 7.5 s.)
    class Contended(FixedCosts):
        host_share = 0.5
        draft_shares_ranks = True
    m, col, policy, t = run_scripted(tmp_path, "ahasd", [T, F] * 10, 2, [2],
                                     [*ASYNC, "ahasd.tvc=false", "ahasd.edc_stop=idle_until_feedback", "ahasd.edc_config.pht_counter_init=0"],
                                     costs=Contended())
    assert t == 7.0 and m.stats()["shared_rank_contention"]["contended_verifications"] == 0
    assert m.stats()["shared_rank_contention"]["lost_s"] == {"npu": 0.0, "pim": 0.0}
    assert intervals(col, "npu") == [(2.0, 7.0, "verify")]


def test_each_prompt_is_prefilled_with_its_own_length(tmp_path):
    # Prompt 0 (50 tokens) has a 1-token response (pos 0), prompt 1 (80 tokens) starts at pos
    # 1. Every mode prefills both models over prompt 0 first, then over prompt 1 once pos 0 is
    # committed: a draft chain never crosses into the next prompt (the round at pos 0 drafts
    # only pos 0, and its pass commits just pos 0: the bonus position is the next prompt's).
    for mode, extra in (("operator_sync", []), ("async", ASYNC), ("ahasd", [*ASYNC, "ahasd.tvc=false"])):
        costs = RecordingCosts()
        m, col, policy, t = run_scripted(tmp_path, mode, [T] * 12, 4, [3], extra, costs=costs,
                                         prompts=[(50, 1), (80, 11)])
        prefills = [c for c in costs.calls if c[0] == "prefill"]
        assert prefills == [("prefill", "target", 50), ("prefill", "draft", 50),
                            ("prefill", "target", 80), ("prefill", "draft", 80)], mode
        assert m.prefills == 2 and col.committed_positions == [0, 1, 2, 3]
        # the first verification checks pos 0 alone, at prompt 0's KV (50): 2 tokens
        assert [c for c in costs.calls if c[0] == "verify"][0] == ("verify", 2, 50), mode


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


# ------------------------------------------------------------------ asynchronous modes
ASYNC = ["ahasd.feedback_latency_ns=0"]   # integer-second timelines (the 20 ns poll delay is tested elsewhere)


def test_async_rejection_rollback_and_kills_exact(tmp_path):
    # k=2, draft 1 s (PIM), verify 5 s (NPU), pos 1 wrong, run of 4 tokens.
    # Drafter (gen 0): pos 0,1 at 0..2 -> batch [0,2) pushed at 2; pos 2,3 (off-path: after the
    #   wrong pos 1) -> [2,4) at 4; pos 4,5 (off-path) -> [4,6) at 6; pos 6 runs 6..7.
    # Verifier: idle 0..2, verifies [0,2) at 2..7 (it is resumed before the drafter at t=7, its
    #   event being older): pos 0 right, pos 1 wrong -> accepted 1, rejected 1, commit 0,1;
    #   frontier 6 -> the 4 drafts at 2..5 are killed, rollback 1, gen 1.
    #   Outcome of round 0: (2 drafted, 1 accepted, 2 committed, 7 - 0, at 7).
    # Drafter at 7: its pos-6 forward finished on a dead chain -> drafted and killed (1 more).
    #   Restarts at pos 2: pos 2,3 at 7..9 -> [2,4) at 9; pos 4,5 -> [4,6) at 11; 6,7 -> [6,8)
    #   at 13; pos 8 runs 13..14.
    # Verifier: drops the two dead gen-0 batches, idle 7..9, verifies [2,4) at 9..14: both
    #   right -> commit 2,3 (the bonus token at 4 is cut by the run length 4): done at 14.
    #   Outcome: (2, 2, 2 committed, 14 - 7, at 14); drafts 4..7 stay unverified.
    m, col, policy, t = run_scripted(tmp_path, "async", [T, F] + [T] * 20, 4, [2], ASYNC)
    assert t == 14.0
    assert policy.outcomes == [(2, 1, 2, 7.0, 7.0), (2, 2, 2, 7.0, 14.0)]
    assert counters(col) == dict(drafted=13, accepted=3, rejected=1, killed=5, unverified_at_end=4, committed=4,
                                 verifications=2, rollbacks=1, offpath=4)
    assert col.counters.npu_idle_draft_exhausted_s == 4.0
    assert intervals(col, "npu") == [(2.0, 7.0, "verify"), (9.0, 14.0, "verify")]
    assert intervals(col, "pim") == [(float(i), float(i + 1), "draft") for i in range(14)]
    assert col.committed_positions == [0, 1, 2, 3]


def test_ahasd_edc_stop_waits_for_every_verification_exact(tmp_path):
    # EDC only (no TVC), PHT counters 0: every prediction is "stop", so after each batch the
    # drafter waits for the verifier's feedback; control latencies 0. k=2, pos 3 wrong, 6 tokens.
    # Batch [0,2): drafted 0..2, verified 2..7: both right -> commit 0,1 + bonus 2 (c=3).
    # Drafter resumes at 7 from pos 3: [3,5) drafted 7..9 (pos 4 off-path, after the wrong
    #   pos 3), verified 9..14: pos 3 wrong -> commit 3 (correction), 1 rejected, pos 4 killed
    #   (it is in the verified batch but after the rejection), rollback 1. Nothing beyond: the
    #   drafter was waiting for this feedback.
    # [4,6) drafted 14..16, verified 16..21: both right -> commit 4,5 (bonus cut at 6): done.
    m, col, policy, t = run_scripted(
        tmp_path, "ahasd", [T, T, T, F] + [T] * 20, 6, [2],
        ASYNC + ["ahasd.tvc=false", "ahasd.edc_stop=idle_until_feedback", "ahasd.edc_config.pht_counter_init=0",
                 "ahasd.edc_config.decision_latency_ns=0"])
    assert t == 21.0
    # 6 drafted = 2 + 0 + 2 accepted + 1 rejected + 1 killed
    assert counters(col) == dict(drafted=6, accepted=4, rejected=1, killed=1, unverified_at_end=0, committed=6,
                                 verifications=3, rollbacks=1, offpath=1)
    assert intervals(col, "npu") == [(2.0, 7.0, "verify"), (9.0, 14.0, "verify"), (16.0, 21.0, "verify")]
    assert intervals(col, "pim") == [(0.0, 1.0, "draft"), (1.0, 2.0, "draft"), (7.0, 8.0, "draft"),
                                     (8.0, 9.0, "draft"), (14.0, 15.0, "draft"), (15.0, 16.0, "draft")]
    # committed per round: 0,1 + bonus 2 -> 3; correction 3 -> 1; 4,5 (bonus cut at 6) -> 2
    assert policy.outcomes == [(2, 2, 3, 7.0, 7.0), (2, 0, 1, 7.0, 14.0), (2, 2, 2, 7.0, 21.0)]
    st = m.edc.stats
    assert (st.predictions, st.suppressed_batches, st.resolved_predictions, st.rollbacks) == (3, 3, 3, 1)
    # LEHT holds only bucket 0 (every batch has mean entropy 0.5 nats < 1.25)
    assert set(m.edc.leht) == {0}


def test_policy_is_told_every_committed_token_once(tmp_path):
    # Bug found while writing these scenarios: in the async modes the bonus token of a fully
    # accepted batch was credited only when the batch ended exactly at the committed point,
    # i.e. when the run length had cut the bonus (credited though not committed) and never
    # when it was committed. The rounds' n_committed must add up to the committed tokens.
    for mode, extra in (("async", ASYNC), ("ahasd", ASYNC + ["ahasd.tvc=false",
                                                              "ahasd.edc_config.pht_counter_init=0"])):
        for accept in ([T] * 30, [T, T, T, F] * 8, [T, F] * 15):
            m, col, policy, t = run_scripted(tmp_path, mode, accept, 12, [2, 3, 1], extra)
            # rounds killed by an earlier rejection are not reported, but commit nothing either
            assert sum(o[2] for o in policy.outcomes) == 12, (mode, accept, policy.outcomes)


# ------------------------------------------------------------------ ahasd: TVC pre-verification
TVC = ["ahasd.edc_config.pht_counter_init=0", "ahasd.tvc_config.preload_kv_len=100", "ahasd.feedback_latency_ns=0",
       "ahasd.edc_config.decision_latency_ns=0", "ahasd.tvc_config.decision_latency_ns=0"]


@pytest.mark.parametrize("kv_policy", ["wait", "recompute", "layer_pipelined"])
def test_ahasd_tvc_preverification_exact(tmp_path, kv_policy):
    # k=2, all right, 8 tokens; draft 1 s, verify 20 s (4 equal layers), pre-verify 1 s per
    # token (4 equal layers), GTS switches free, control latencies 0. EDC never predicts
    # "continue" here (counters start at 0; a fully accepted batch raises its own entry to 1).
    # TVC tables (4 entries) preloaded at KV 100 and draft length 4: NPU 20 s / 100 KV,
    # drafting 4 s / 4 tokens, pre-verification 4 s / 4 tokens. KV length at pos p: 100 + p.
    #
    # Drafter: [0,2) pushed at 2 (the idle verifier takes it: no TVC, keep drafting), [2,4) at
    # 4. NPU verifies [0,2) 2..22. At 4 EDC says stop; TVC (PDCT now 4,4,2,2 s over 4,4,2,2
    # tokens: mean length 3, 1 s/token): C_left = 20 s x 100/100 - (2 s running + 3 s) = 15 s,
    # 1 s per pre-verified token -> 15 (recompute: minus the NPU's 3 in-flight inputs = 12),
    # capped at 8; PIM can check from pos 3 (the NPU's bonus position 2 + 1) to the frontier
    # 4: L_pv = 1, pos 3.
    #   wait:      PIM holds until the NPU pass ends (22), pre-verifies 22..23; the NPU commits
    #              0,1,2 at 22, waits for PIM (1 s), PIM commits pos 3 at 23. The drafter (held
    #              in the pre-verification) drafts [4,6) 23..25; NPU 25..45. At 27 ([6,8)):
    #              C_npu = 20 s x 104/100 (NVCT now all 20 s / 100), C_left = 20.8 - 2 - 2 =
    #              16.8 s -> L_pv 1 (pos 7); PIM waits to 45, 45..46; NPU commits 4,5,6 at 45,
    #              waits 1 s, PIM commits 7 at 46: done. Waits for KV 18 + 18 s.
    #   recompute: PIM rebuilds the KV of the NPU's inputs 0,1,2 and checks pos 3: 4 tokens,
    #              4..8; the result waits (the NPU has not committed up to pos 3). The drafter
    #              drafts [4,6) 8..10 and, with a pre-verification pending, idles until feedback
    #              (22: NPU commits 0,1,2, the pending result pos 3). Drafts [6,8) 22..24; NPU
    #              verifies [4,6) 22..42; at 24 L_pv = 1 again (pos 7), 4 tokens 24..28 (KV
    #              4..6 rebuilt); drafts [8,10) 28..30, idles; at 42 the NPU commits 4,5,6 and
    #              the pending result 7: done. Pos 8,9 drafted and never verified.
    #   layer_pipelined: PIM layer l of pos 3 waits for the NPU's layer l (ends 2 + 5 (l+1)):
    #              layers start at 7, 12, 17, 22 and take 0.25 s: span 4..22.25 (PIM busy 1 s,
    #              waiting 17.25 s), and PVCT learns 18.25 s for 1 token. The NPU commits 0,1,2
    #              at 22, waits 0.25 s, PIM commits 3 at 22.25; [4,6) drafted 22.25..24.25, NPU
    #              24.25..44.25; at 26.25 PVCT's mean is (1 + 1 + 1 + 18.25)/4 = 5.3125 s per
    #              token: floor(16.8 / 5.3125) = 3, L_pv 1 (pos 7): layers at 29.25 .. 44.25,
    #              span 26.25..44.5; the NPU commits 4,5,6 at 44.25, waits 0.25 s: done at 44.5.
    costs = RecordingCosts(draft_s=1.0, verify_s=20.0, preverify_per_token_s=1.0)
    m, col, _, t = run_scripted(tmp_path, "ahasd", [T] * 40, 8, [2], [*TVC, f"ahasd.preverify_kv={kv_policy}"],
                                costs=costs)
    # the TVC tables are preloaded from the costs at KV 100 and draft length 4: an NPU pass of
    # 4 drafts (5 tokens), one drafter forward (x 4), a pre-verification of 4 tokens
    assert costs.calls[:3] == [("verify", 5, 100), ("draft", 100), ("preverify", 4, 100)]
    # pre-verifications: pos 3 at the KV before it (wait, layer_pipelined: 103) or, rebuilding
    # the NPU's inputs, 4 tokens at the NPU pass's KV (recompute: 100, then 104)
    pvs = [c for c in costs.calls[3:] if c[0] == "preverify"]
    if kv_policy == "recompute":
        assert set(pvs) == {("preverify", 4, 100), ("preverify", 4, 104)}
    else:
        assert set(pvs) == {("preverify", 1, 103), ("preverify", 1, 107)}
    m.finalize()          # checks the KV reads against the NPU passes
    st = m.tvc.stats
    assert (st.decisions, st.inserted, st.successful, st.wasted, st.tokens_preverified, st.tokens_committed,
            st.early_rejections) == (2, 2, 2, 0, 2, 2, 0)
    c = col.counters
    assert (c.accepted_tokens, c.preverify_accepted_tokens, c.verifications, c.rejected_tokens) == (8, 2, 2, 0)
    pv = m.stats()["preverify"]
    assert pv["kv_causality_violations"] == 0 and pv["kv_reads_checked"] == 2 and pv["kv"] == kv_policy
    d, p = "draft", "preverify"
    if kv_policy == "wait":
        assert t == 46.0
        assert intervals(col, "npu") == [(2.0, 22.0, "verify"), (25.0, 45.0, "verify")]
        assert intervals(col, "pim") == [(0, 1, d), (1, 2, d), (2, 3, d), (3, 4, d), (22, 23, p),
                                         (23, 24, d), (24, 25, d), (25, 26, d), (26, 27, d), (45, 46, p)]
        assert (st.npu_wait_for_preverify_s, pv["pim_waiting_for_kv_s"], pv["recomputed_tokens"]) == (2.0, 36.0, 0)
        assert (c.drafted_tokens, c.unverified_at_end, m.edc_idle_waits) == (8, 0, 0)
        pv_events = [(e["time_s"], e["position"], e["n_tokens"], e["accepted"], e["duration_s"])
                     for e in col.events if e["event"] == "preverify"]
        assert pv_events == [(22.0, 3, 1, 1, 1.0), (45.0, 7, 1, 1, 1.0)]
    elif kv_policy == "recompute":
        assert t == 42.0
        assert intervals(col, "npu") == [(2.0, 22.0, "verify"), (22.0, 42.0, "verify")]
        assert intervals(col, "pim") == [(0, 1, d), (1, 2, d), (2, 3, d), (3, 4, d), (4, 8, p), (8, 9, d),
                                         (9, 10, d), (22, 23, d), (23, 24, d), (24, 28, p), (28, 29, d), (29, 30, d)]
        assert (st.npu_wait_for_preverify_s, pv["pim_waiting_for_kv_s"], pv["recomputed_tokens"]) == (0.0, 0.0, 6)
        assert (c.drafted_tokens, c.unverified_at_end, m.edc_idle_waits) == (10, 2, 2)
        # PVCT learns 4 s for the 4 tokens each pass processed
        assert list(m.tvc.pvct.items) == [(4e9, 4)] * 4
    else:
        assert t == 44.5
        assert intervals(col, "npu") == [(2.0, 22.0, "verify"), (24.25, 44.25, "verify")]
        # PIM's pre-verification work is drawn over its layers (it waits for the NPU between them)
        assert intervals(col, "pim") == [(0, 1, d), (1, 2, d), (2, 3, d), (3, 4, d),
                                         (7, 7.25, p), (12, 12.25, p), (17, 17.25, p), (22, 22.25, p),
                                         (22.25, 23.25, d), (23.25, 24.25, d), (24.25, 25.25, d), (25.25, 26.25, d),
                                         (29.25, 29.5, p), (34.25, 34.5, p), (39.25, 39.5, p), (44.25, 44.5, p)]
        assert (st.npu_wait_for_preverify_s, pv["pim_waiting_for_kv_s"], pv["recomputed_tokens"]) == (0.5, 34.5, 0)
        assert (c.drafted_tokens, c.unverified_at_end, m.edc_idle_waits) == (8, 0, 0)
        assert list(m.tvc.pvct.items) == [(4e9, 4), (4e9, 4), (18.25e9, 1), (18.25e9, 1)]
        assert m.kv_ledger.reads == [(2, 2, [7.0, 12.0, 17.0, 22.0]), (6, 6, [29.25, 34.25, 39.25, 44.25])]
    # every batch was fully accepted (none killed), and EDC predicted "stop" for all 4 (5 with
    # recompute's extra batch [8,10), never resolved)
    assert m.edc.stats.continue_predictions == 0
    assert m.edc.stats.predictions == (5 if kv_policy == "recompute" else 4)
    edc = m.stats()["edc"]
    assert (edc["predictions"], edc["resolved_predictions"], edc["correct_predictions"]) == \
        (m.edc.stats.predictions, 4, 0)
    assert edc["prediction_accuracy"] == 0.0     # every "stop" was followed by a fully accepted batch
    assert m.stats()["tvc"]["inserted"] == 2 and m.stats()["edc_idle_waits"] == m.edc_idle_waits


def test_ahasd_preverification_finds_a_rejection_early(tmp_path):
    # The "wait" scenario of test_ahasd_tvc_preverification_exact with pos 3 wrong, 6 tokens:
    # the NPU commits 0,1,2 at 22 and waits for PIM (1 s), whose pass over pos 3 (22..23)
    # finds it wrong: PIM commits the correction at 3 and rolls the drafter back (nothing
    # beyond pos 3 drafted: 0 killed). Batch [2,4) was 1 accepted of 2. The drafter restarts
    # at 4: [4,6) 23..25, NPU 25..45 commits 4,5 (bonus cut at 6): done at 45; TVC's second
    # pass (pos 7, at 27, waiting for the NPU's KV until 45) never finishes.
    m, col, policy, t = run_scripted(tmp_path, "ahasd", [T, T, T, F] + [T] * 40, 6, [2],
                                     [*TVC, "ahasd.preverify_kv=wait"],
                                     costs=FixedCosts(draft_s=1.0, verify_s=20.0, preverify_per_token_s=1.0))
    assert t == 45.0
    st = m.tvc.stats
    assert (st.decisions, st.inserted, st.successful, st.wasted, st.tokens_committed, st.early_rejections,
            st.npu_wait_for_preverify_s) == (2, 2, 1, 0, 1, 1, 1.0)
    assert counters(col) == dict(drafted=8, accepted=5, rejected=1, killed=0, unverified_at_end=2, committed=6,
                                 verifications=2, rollbacks=1, offpath=0)
    assert col.counters.preverify_accepted_tokens == 0
    assert intervals(col, "npu") == [(2.0, 22.0, "verify"), (25.0, 45.0, "verify")]
    # [0,2): 2 (its bonus position 2 was drafted in [2,4): counted there); [2,4): 1 accepted,
    # committed with the correction (pos 2, 3); [4,6): 2 (bonus cut): 6 committed in all
    assert [o[:3] for o in policy.outcomes] == [(2, 2, 2), (2, 1, 2), (2, 2, 2)]


def test_ahasd_two_early_rejections(tmp_path):
    # As above with pos 3 and 7 wrong, 8 tokens: after the first early rejection (23) the
    # drafter drafts [4,6) 23..25 (NPU 25..45) and [6,8) 25..27; TVC sends pos 7 to PIM, which
    # waits for the NPU's KV (45) and finds pos 7 wrong at 46 (the NPU committed 4,5,6 at 45):
    # PIM commits the correction at 7: done at 46, 2 early rejections.
    m, col, policy, t = run_scripted(tmp_path, "ahasd", [T, T, T, F] * 10, 8, [2], [*TVC, "ahasd.preverify_kv=wait"],
                                     costs=FixedCosts(draft_s=1.0, verify_s=20.0, preverify_per_token_s=1.0))
    st = m.tvc.stats
    assert t == 46.0 and (st.successful, st.early_rejections, st.tokens_committed) == (2, 2, 2)
    assert (col.counters.rejected_tokens, col.counters.rollbacks) == (2, 1)   # the last correction ends the run


def test_ahasd_without_controls_is_async(tmp_path):
    # EDC and TVC off: the async scenario's exact timeline and counts
    m, col, policy, t = run_scripted(tmp_path, "ahasd", [T, F] + [T] * 20, 4, [2],
                                     [*ASYNC, "ahasd.edc=false", "ahasd.tvc=false"])
    assert t == 14.0 and policy.outcomes == [(2, 1, 2, 7.0, 7.0), (2, 2, 2, 7.0, 14.0)]
    assert counters(col) == dict(drafted=13, accepted=3, rejected=1, killed=5, unverified_at_end=4, committed=4,
                                 verifications=2, rollbacks=1, offpath=4)
    assert m.edc is None and m.tvc is None and m.stats()["edc_idle_waits"] == 0


def test_ahasd_preverification_results_are_wasted_after_a_rollback_or_past_the_end(tmp_path):
    # The "recompute" scenario with pos 1 wrong, 4 tokens. PIM checks pos 3 at 4..8 (pending);
    # the NPU rejects pos 1 at 22 (commit 0 + correction 1; pos 2..5 killed): the pending result
    # belongs to the dead chain -> wasted. The drafter restarts at 2: [2,4) 22..24, NPU
    # 24..44; [4,6) at 26: TVC pre-verifies pos 5 (26..30, pending), the drafter idles after
    # [6,8) (30..32). At 44 the NPU commits 2,3 (run length 4): pos 5 is past the committed
    # point -> wasted too.
    m, col, policy, t = run_scripted(tmp_path, "ahasd", [T, F] + [T] * 40, 4, [2],
                                     [*TVC, "ahasd.preverify_kv=recompute"],
                                     costs=FixedCosts(draft_s=1.0, verify_s=20.0, preverify_per_token_s=1.0))
    assert t == 44.0
    st = m.tvc.stats
    assert (st.decisions, st.inserted, st.successful, st.wasted, st.tokens_committed, st.early_rejections) == \
        (2, 2, 0, 2, 0, 0)
    assert counters(col) == dict(drafted=12, accepted=3, rejected=1, killed=4, unverified_at_end=4, committed=4,
                                 verifications=2, rollbacks=1, offpath=4)
    assert intervals(col, "pim")[4] == (4.0, 8.0, "preverify") and intervals(col, "pim")[-3] == (26.0, 30.0, "preverify")
    assert m.edc_idle_waits == 2
    # EDC: 6 "stop" predictions ([0,2) [2,4) [4,6), then [2,4) [4,6) [6,8) on the new chain);
    # resolved: [0,2) (held the rejection: a correct "stop", a rollback) and the new [2,4)
    # (fully accepted: a wrong "stop"); the killed [2,4), [4,6) only lower their counters
    st = m.edc.stats
    assert (st.predictions, st.resolved_predictions, st.correct_predictions, st.rollbacks) == (6, 2, 1, 1)


def test_async_discarded_forward_is_reused_by_the_next_round(tmp_path):
    # Each round keeps 2 tokens and discards the forward of the 3rd; all right, 6 tokens, draft
    # 1 s, verify 5.25 s. The next round starts at the discarded position on the same chain
    # and reuses its logits (no forward). Round 1: forwards 0,1,2 (0..3), [0,2) at 3; each
    # later round reuses 1 position and runs 2 forwards: [2,4) at 5, [4,6) at 7, [6,8) at 9,
    # [8,10) at 11, [10,12) at 13; round 7 reuses pos 12 at 13 (kept) and is running pos 13
    # at the end. NPU: [0,2) 3..8.25 (commit 0,1,2), [2,6) 8.25..13.5 (commit 3,4,5): done.
    # Forwards pos 0..12 = 13, reused 6 (2,4,...,12), discarded 6, kept 13 (pos 0..12).
    m, col, policy, t = run_scripted(tmp_path, "async", [T] * 40, 6, [2], ASYNC, discard=True,
                                     costs=FixedCosts(draft_s=1.0, verify_s=5.25))
    assert t == 13.5
    c = col.counters
    assert (c.drafter_forwards, c.reused_drafter_forwards, c.discarded_draft_forwards, c.drafted_tokens,
            c.duplicate_drafter_forwards) == (13, 6, 6, 13, 0)
    assert [s for s, _, _ in intervals(col, "pim")] == list(range(13))
    assert intervals(col, "npu") == [(3.0, 8.25, "verify"), (8.25, 13.5, "verify")]
    pushes = [(e["time_s"], e["position"], e["n_tokens"]) for e in col.events if e["event"] == "batch_pushed"]
    assert pushes == [(3.0, 0, 2), (5.0, 2, 2), (7.0, 4, 2), (9.0, 6, 2), (11.0, 8, 2), (13.0, 10, 2)]
    # each batch's mean entropy: of its 2 kept tokens (the trace's 0.5 nats everywhere)
    assert [e["mean_entropy_nats"] for e in col.events if e["event"] == "batch_pushed"] == [0.5] * 6
    # verify events: (start, drafts, accepted drafts per the target): [0,2) both; [3,6) all 3
    verifies = [(e["time_s"], e["position"], e["n_tokens"], e["accepted"]) for e in col.events if e["event"] == "verify"]
    assert verifies == [(3.0, 0, 2, 2), (8.25, 3, 3, 3)]


def test_ahasd_preverification_and_npu_share_the_target_ranks(tmp_path):
    # The "recompute" scenario with shared-rank contention: the host gets half of a rank's time
    # while PIM works on it. A pre-verification overlapping an NPU pass runs at PIM's half:
    # 4 tokens x 1 s x 2 = 8 s; the NPU pass progresses at half rate during the overlap (one
    # flow of the sharing model: the pass itself lasts longer), and the TVC tables learn the
    # times the tasks really took.
    # [0,2) NPU 2..22; PIM checks pos 3 (4 tokens) 4..12 (pending); [4,6) drafted 12..14, then
    #   the drafter idles. Overlap 4..12 = 8 s at half rate -> the pass ends at 26 (NVCT: 24 s).
    #   At 26: commit 0,1,2 and the pending pos 3. [6,8) drafted 26..28; NPU verifies [4,6)
    #   26..46. At 28: C_npu = mean(20,20,20,24)/100 x 104 = 21.84 s, C_draft1 2 s, elapsed
    #   2 s: C_left 17.84 s; PVCT (1,1,1,2 s/token) 1.25 s/token: floor 14 - 3 = 11 -> capped
    #   8, 1 token available (pos 7): 4 tokens 28..36 (pending). [8,10) 36..38, idle.
    #   Overlap 28..36 -> the pass ends at 50: commit 4,5,6 and pos 7: done at 50.
    class Contended(FixedCosts):
        host_share = 0.5
    m, col, policy, t = run_scripted(tmp_path, "ahasd", [T] * 40, 8, [2], [*TVC, "ahasd.preverify_kv=recompute"],
                                     costs=Contended(draft_s=1.0, verify_s=20.0, preverify_per_token_s=1.0))
    assert t == 50.0
    assert intervals(col, "npu") == [(2.0, 26.0, "verify"), (26.0, 50.0, "verify")]
    assert [(s, e) for s, e, lab in intervals(col, "pim") if lab == "preverify"] == [(4.0, 12.0), (28.0, 36.0)]
    cs = m.stats()["shared_rank_contention"]
    assert cs["contended_verifications"] == 2 and cs["contended_preverifications"] == 2
    assert cs["lost_s"] == pytest.approx({"npu": 8.0, "pim": 8.0})   # 2 x (8 s overlap at half rate)
    # PIM's 4 layers of each 8 s pass start 2 s apart; it reads KV before its first input
    # (pos 2, resp. 6) and computes its own from the NPU's first input (pos -1, resp. 3)
    assert m.kv_ledger.reads == [(2, -1, [4.0, 6.0, 8.0, 10.0]), (6, 3, [28.0, 30.0, 32.0, 34.0])]
    assert list(m.tvc.pvct.items)[2:] == [(8e9, 4), (8e9, 4)]
    assert list(m.tvc.nvct.items)[2:] == [(24e9, 100), (24e9, 104)]
    st = m.tvc.stats
    assert (st.successful, st.tokens_committed, st.wasted) == (2, 2, 0)
    assert col.counters.verifications == 2
    # contention leaves the work: 1 J per second of stand-alone task (2 x 20 s NPU, 2 x 4 s PIM)
    assert col.dynamic_energy_j["npu"] == 40.0


# ------------------------------------------------------------------ shared machinery (modes/base.py)
def test_task_cost_rejects_impossible_tasks():
    with pytest.raises(ValueError, match="^negative task duration$"):
        TaskCost(-1e-9, {}, {})
    with pytest.raises(ValueError, match=r"^npu busy 1\.5 s longer than its task \(1\.0 s\)$"):
        TaskCost(1.0, {}, {"gpu": 1.0, "npu": 1.5})
    # a device busy for the whole task, up to float round-off, is fine
    assert TaskCost(1.0, {}, {"npu": 1.0 + 1e-12}).busy_s == {"npu": 1.0 + 1e-12}
    assert TaskCost(0.0, {}, {"npu": 1e-16}).duration_s == 0.0


def test_unknown_mode_names_the_closest_and_lists_all():
    with pytest.raises(ValueError) as e:
        get_mode("asnyc")
    msg = str(e.value)
    assert msg.startswith("unknown mode 'asnyc' (did you mean 'async'?); valid modes: ")
    assert msg.split("valid modes: ")[1].split(", ") == sorted(MODES)


def test_round_bounds_and_tasks_in_flight(tmp_path):
    # the round bounds reach the policy; a never-stopping policy is cut at policy.max_tokens
    # 3: drafts 0..3, verify 3..8 commits 0..3 (4 tokens)
    m, col, policy, t = run_scripted(tmp_path, "gpu_only", [T] * 12, 4, [1], raw=True,
                                     overrides=["policy.min_tokens=2", "policy.max_tokens=3"])
    assert (m.min_round_tokens, m.max_round_tokens) == (2, 3) and policy.contexts == [(0.0, 2, 3)]
    assert policy.outcomes == [(3, 3, 4, 8.0, 8.0)] and t == 8.0
    assert col.in_flight == {}          # every task ended
    # stopped at 2.5 s, the third drafter forward (2..3) is in flight and its busy time counts
    p = tmp_path / "cfg.yaml"
    cfg = load_config(p, ["run.mode=gpu_only", "run.generated_tokens=4"])
    env = simpy.Environment()
    col = Collector(devices=["npu", "pim", "gpu"])
    ctx = RunContext(cfg=cfg, platform=None, costs=FixedCosts(), replay=TraceReplay(as_trace(synthetic_trace([T] * 12)), 4),
                     policy=ScriptedPolicy(cfg.policy, [3]), collector=col, rng=np.random.default_rng(0), n_tokens=4)
    get_mode("gpu_only")(env, ctx).start()
    env.run(until=2.5)
    assert list(col.in_flight.values()) == [(2.0, {"gpu": 1.0})]
    assert col.busy_until("gpu", 2.5) == 2.5


def test_prefill_can_be_left_out_and_offchip_bytes_are_booked(tmp_path):
    class Bytes(RecordingCosts):
        def prefill(self, role, n_tokens):
            super().prefill(role, n_tokens)
            return TaskCost(2.0, {"npu": 2.0}, {"npu": 2.0}, 100.0)

        def verify(self, n_tokens, kv_len):
            c = super().verify(n_tokens, kv_len)
            return TaskCost(c.duration_s, c.energy_j, c.busy_s, 7.0)
    # async, k=2, all right, 2 tokens: prefill of both models 0..4 on the NPU (100 B each),
    # [0,2) drafted 4..6, verified 6..11 (7 B) -> done at 11
    m, col, _, t = run_scripted(tmp_path, "async", [T] * 12, 2, [2], ASYNC, costs=Bytes())
    assert t == 11.0 and (m.prefills, m.prefill_s) == (1, 4.0)
    assert col.offchip_bytes_by_task == {"prefill_target": 100.0, "prefill_draft": 100.0, "verify": 7.0}
    assert intervals(col, "npu") == [(0.0, 2.0, "prefill_target"), (2.0, 4.0, "prefill_draft"), (6.0, 11.0, "verify")]
    costs = Bytes()
    m, col, _, t = run_scripted(tmp_path, "async", [T] * 12, 2, [2], [*ASYNC, "run.prefill=false"], costs=costs)
    assert t == 7.0 and (m.prefills, m.prefill_s) == (0, 0.0)
    assert not any(c[0] == "prefill" for c in costs.calls) and "prefill_target" not in col.offchip_bytes_by_task


def test_ahasd_control_energy_per_decision_and_queue_operation(tmp_path):
    # the "wait" TVC scenario: 4 EDC predictions (0.05 nJ each), 2 TVC decisions (0.1 nJ), and
    # every queue push/pop at 1 pJ, all on the control unit, each under its own label
    m, col, _, t = run_scripted(tmp_path, "ahasd", [T] * 40, 8, [2], [*TVC, "ahasd.preverify_kv=wait"],
                                costs=FixedCosts(draft_s=1.0, verify_s=20.0, preverify_per_token_s=1.0))
    m.finalize()
    e = col.dynamic_energy_by_label_j
    assert e[("ctrl", "edc")] == pytest.approx(4 * 0.05e-9, rel=1e-12)
    assert e[("ctrl", "tvc")] == pytest.approx(2 * 0.1e-9, rel=1e-12)
    assert e[("ctrl", "queue")] == pytest.approx(m.queue_ops * 1e-12, rel=1e-12) and m.queue_ops > 10


# ------------------------------------------------------------------ async details
def test_async_rollback_waits_for_the_poll_delay(tmp_path):
    # test_async_rejection_rollback_and_kills_exact with a 0.5 s poll delay: the rollback posted
    # at 7 is seen at 7.5; the drafter restarts at pos 2 then: [2,4) 7.5..9.5, verified
    # 9.5..14.5: done at 14.5 (14 without the delay).
    m, col, policy, t = run_scripted(tmp_path, "async", [T, F] + [T] * 20, 4, [2],
                                     ["ahasd.feedback_latency_ns=500000000.0"])
    assert t == 14.5
    assert intervals(col, "npu") == [(2.0, 7.0, "verify"), (9.5, 14.5, "verify")]
    assert [s for s, _, _ in intervals(col, "pim")][7:9] == [7.5, 8.5]


def test_async_drafter_stops_at_the_end_of_the_trace(tmp_path):
    # A 4-position trace, k=3: [0,3) pushed at 3; pos 3 (3..4), then no pos 4: the partial
    # round [3,4) is pushed at 4 and the drafter waits. NPU [0,3) 3..8 commits 0,1,2 + bonus 3
    # (the last position): done at 8.
    m, col, policy, t = run_scripted(tmp_path, "async", [T] * 4, 4, [3], ASYNC)
    assert t == 8.0
    pushes = [(e["time_s"], e["position"], e["n_tokens"]) for e in col.events if e["event"] == "batch_pushed"]
    assert pushes == [(3.0, 0, 3), (4.0, 3, 1)]
    assert col.counters.drafted_tokens == 4 and m.drafter_stall_s == 0.0   # still waiting at the end


def test_async_verification_takes_at_most_max_verify_tokens(tmp_path):
    # k=1, all right, 6 tokens, at most 2 drafts per pass: [0,1) 1..6 (commit 0,1); at 6 the
    # queue holds [1,2) (committed) .. [4,5): the NPU takes [2,3), [3,4) (2 tokens) 6..11,
    # commits 2,3,4; then [5,6), [6,7) 11..16: done. Without the cap it takes everything at 6,
    # [2,6) (the NPU's first queue pop yields to the drafter, whose [5,6) lands at 6 too), and
    # is done at 11.
    m, col, policy, t = run_scripted(tmp_path, "async", [T] * 40, 6, [1], [*ASYNC, "ahasd.max_verify_tokens=2"])
    assert t == 16.0
    assert [e["n_tokens"] for e in col.events if e["event"] == "verify"] == [1, 2, 2]
    m, col, policy, t = run_scripted(tmp_path, "async", [T] * 40, 6, [1], ASYNC)
    assert t == 11.0 and [e["n_tokens"] for e in col.events if e["event"] == "verify"] == [1, 4]


# ------------------------------------------------------------------ ahasd pieces, by hand
def test_kv_ledger_counts_reads_before_the_writing_layer_ends():
    from ahasd_sim.modes.soc.ahasd import KvLedger
    led = KvLedger()
    led.write(0, 3, 0.0, 1.0, 4)       # NPU pass A writes KV 0..2, layer l done at l + 1 (ends 4)
    led.write(2, 6, 5.0, 1.0, 4)       # pass B writes KV 2..5, layer l done at 6 + l (ends 9)
    led.read(3, 3, [4.0, 5.0, 6.0, 7.0])     # needs KV < 3 (A's, written by 4): fine
    led.read(5, 5, [5.5, 6.5, 7.5, 8.5])     # needs KV < 5, B's layer 0 done at 6 > 5.5: 1 violation
    led.read(2, 2, [5.5, 6.5, 7.5, 8.5])     # needs KV < 2 only: B (from 2) not needed: fine
    led.read(5, 2, [5.5, 6.5, 7.5, 8.5])     # computes its own KV from 2: B not needed: fine
    led.read(5, 5, [6.0, 7.0, 8.0, 9.0])     # reads each layer as B finishes it: fine
    assert led.violations() == 1
    led.read(6, 6, [6.0, 7.0, 8.0, 8.5])     # layer 3 read at 8.5, written at 9: one more
    assert led.violations() == 2


def test_preverify_queue_marks_the_first_entries_reaching_past_the_start(tmp_path):
    from ahasd_sim.modes.base import Batch
    for entries, expected in ((1, 1), (2, 4), (16, 6)):
        m, *_ = run_scripted(tmp_path, "ahasd", [T] * 12, 2, [2], [*ASYNC, f"ahasd.preverify_queue_entries={entries}"])
        m.batches = [Batch(0, 2, 0, 0.0, 0.5), Batch(2, 2, 0, 0.0, 0.5), Batch(4, 3, 0, 0.0, 0.5),
                     Batch(7, 2, 0, 0.0, 0.5)]
        # from pos 3: [2,4) reaches past it (to 4), then [4,7) (to 7), then [7,9) (to 9)
        assert m._preverify_queue_tokens(3) == expected, entries
        assert m._preverify_queue_tokens(9) == 0


def test_ahasd_idles_until_feedback_when_tvc_declines(tmp_path):
    # The TVC scenario with pre-verification far too slow (100 s per token): at each EDC stop
    # TVC finds C_left / 100 s < 1 token, and with edc_stop=idle_until_feedback the drafter
    # waits for the NPU's result. [0,2)@2, NPU 2..22; [2,4)@4: wait 1 until 22 (commit 0,1,2);
    # NPU takes pos 3, 22..42; [4,6) 22..24: wait 2 until 42 (commit 3 + bonus 4); NPU takes
    # pos 5, 42..62; [6,8) 42..44: wait 3 (the run ends at 62 with pos 5 + bonus 6 cut at 6).
    # With draft_one_more the drafter never idles.
    over = [*TVC, "ahasd.preverify_kv=recompute"]
    costs = FixedCosts(draft_s=1.0, verify_s=20.0, preverify_per_token_s=100.0)
    m, col, policy, t = run_scripted(tmp_path, "ahasd", [T] * 40, 6, [2], [*over, "ahasd.edc_stop=idle_until_feedback"],
                                     costs=costs)
    assert t == 62.0 and m.edc_idle_waits == 3
    assert intervals(col, "npu") == [(2.0, 22.0, "verify"), (22.0, 42.0, "verify"), (42.0, 62.0, "verify")]
    assert [s for s, _, _ in intervals(col, "pim")] == [0.0, 1.0, 2.0, 3.0, 22.0, 23.0, 42.0, 43.0]
    st = m.tvc.stats
    assert (st.decisions, st.inserted) == (3, 0)
    m2, *_ = run_scripted(tmp_path, "ahasd", [T] * 40, 6, [2], [*over, "ahasd.edc_stop=draft_one_more"], costs=costs)
    assert m2.edc_idle_waits == 0


def test_tvc_is_asked_with_the_in_flight_pass(tmp_path):
    # recompute scenario: TVC decides at 4 (NPU pass of [0,2) started at 2, KV 100) and at 24
    # (pass of [4,6) started at 22, KV 104): 2 s into the pass each time, and PIM must also
    # rebuild the pass's 3 input tokens
    m, *_ = run_scripted(tmp_path, "ahasd", [T] * 40, 8, [2], [*TVC, "ahasd.preverify_kv=recompute"],
                         costs=FixedCosts(draft_s=1.0, verify_s=20.0, preverify_per_token_s=1.0), tvc_spy=True)
    assert m.tvc.asked == [(2.0, 100, 3), (2.0, 104, 3)]
    # preloaded (ns, length): NPU 20 s at KV 100, drafting 4 x 1 s, pre-verification 4 x 1 s;
    # the drafter has since recorded its two 2-token batches of 2 s
    assert m.tvc.first_tables == [[(20e9, 100)] * 4, [(4e9, 4), (4e9, 4), (2e9, 2), (2e9, 2)], [(4e9, 4)] * 4]
    # with a 0.5 s TVC decision the control latency delays the GTS switch into target mode:
    # PIM's first pre-verification runs 4.5..8.5
    m, col, *_ = run_scripted(tmp_path, "ahasd", [T] * 40, 8, [2],
                              [*TVC, "ahasd.preverify_kv=recompute", "ahasd.tvc_config.decision_latency_ns=500000000.0"],
                              costs=FixedCosts(draft_s=1.0, verify_s=20.0, preverify_per_token_s=1.0))
    assert [(s, e) for s, e, lab in intervals(col, "pim") if lab == "preverify"][0] == (4.5, 8.5)


def test_async_outcomes_carry_their_round_ids(tmp_path):
    # test_async_rejection_rollback_and_kills_exact: rounds begin at 0 (id 0: [0,2)), 2 (1),
    # 4 (2), 6 (3, its pos 6 killed at 7), 7 (4: [2,4) on the new chain), ...; the two
    # verified rounds are 0 and 4
    m, col, policy, t = run_scripted(tmp_path, "async", [T, F] + [T] * 20, 4, [2], ASYNC)
    assert policy.outcome_round_ids == [0, 4]
    assert [c[0] for c in policy.contexts[:6]] == [0.0, 2.0, 4.0, 6.0, 7.0, 9.0]


def test_a_tree_policy_in_a_chain_mode_is_a_config_error(tmp_path):
    class TreePolicy(ScriptedPolicy):
        is_tree_policy = True
    p = tmp_path / "cfg.yaml"
    p.write_text("{}\n")
    cfg = load_config(p, ["run.mode=async"])
    ctx = RunContext(cfg=cfg, platform=None, costs=FixedCosts(), replay=TraceReplay(as_trace(synthetic_trace([T] * 4)), 4),
                     policy=TreePolicy(cfg.policy, [2]), collector=Collector(devices=["npu", "pim"]),
                     rng=np.random.default_rng(0), n_tokens=4)
    with pytest.raises(ConfigError) as e:
        get_mode("async")(simpy.Environment(), ctx)
    assert e.value.key_path == "run.policy" and e.value.source == str(p)
    assert e.value.message == (f"policy '{cfg.run.policy}' selects draft trees; use it with run.mode moe_offload, tree_pim, tree_sync, "
                               f"not 'async'")


def test_layer_pipelined_preverification_follows_the_npu_layers_and_head(tmp_path):
    # The layer_pipelined scenario with head ops: both passes are 4 layers of 20% + a head of
    # 20% of the pass. NPU [0,2) 2..22: layers end at 6, 10, 14, 18 (head 18..22); it writes
    # the KV of its inputs -1..1 at 4 s per layer. PIM checks pos 3 from 4: layer l waits for
    # the NPU's layer l: starts 6, 10, 14, 18 (0.2 s each), head 18.2..18.4: span 4..18.4, and
    # PVCT learns 14.4 s for the token.
    class Head(FixedCosts):
        def layer_split(self, task, n_tokens, kv_len):
            total = (self.verify(n_tokens, kv_len) if task == "verify" else self.preverify(n_tokens, kv_len)).duration_s
            return 4, 0.2 * total, 0.2 * total
    m, col, policy, t = run_scripted(tmp_path, "ahasd", [T] * 40, 8, [2], [*TVC, "ahasd.preverify_kv=layer_pipelined"],
                                     costs=Head(draft_s=1.0, verify_s=20.0, preverify_per_token_s=1.0))
    assert m.kv_ledger.writes[0] == (-1, 2, 2.0, 4.0, 4, None)
    assert m.kv_ledger.reads[0] == (2, 2, [6.0, 10.0, 14.0, 18.0])
    assert list(m.tvc.pvct.items)[2] == (pytest.approx(14.4e9), 1)


@pytest.mark.parametrize("kv_policy", ["wait", "layer_pipelined"])
def test_preverification_contention_depends_on_the_kv_policy(tmp_path, kv_policy):
    # Contention (host half of a shared rank), pre-verification 2 s per token. TVC at 4
    # (C_left 15 s, PVCT 2 s/token: 7, capped by the frontier: 1 token, pos 3).
    #   wait: PIM runs after the NPU pass (22..24): no contention, full rate: 2 s.
    #   layer_pipelined: 4 PIM layers of 0.5 s; a layer starts when the NPU pass has really
    #   written that layer (5 s of its work each). Both run at half rate while they overlap:
    #   layer 0 7..8 (the pass: 5.5 s done at 8), layer 1 at 8 + 4.5 = 12.5 (..13.5), layer 2
    #   at 18 (..19), layer 3 at 23.5 = the pass's end, alone: 23.5..24. Span 4..24 (PVCT 20 s).
    class Contended(FixedCosts):
        host_share = 0.5
    m, col, policy, t = run_scripted(tmp_path, "ahasd", [T] * 40, 8, [2], [*TVC, f"ahasd.preverify_kv={kv_policy}"],
                                     costs=Contended(draft_s=1.0, verify_s=20.0, preverify_per_token_s=2.0))
    pv = [(s, e) for s, e, lab in intervals(col, "pim") if lab == "preverify"]
    if kv_policy == "wait":
        assert pv[0] == (22.0, 24.0) and list(m.tvc.pvct.items)[3] == (2e9, 1)
        assert m.kv_ledger.reads[0] == (2, 2, [22.0, 22.5, 23.0, 23.5])    # 4 layers of 0.5 s
    else:
        assert pv[:4] == [(7.0, 8.0), (12.5, 13.5), (18.0, 19.0), (23.5, 24.0)]   # PIM busy 3.5 s
        assert m.kv_ledger.reads[0] == (2, 2, [7.0, 12.5, 18.0, 23.5])
        assert list(m.tvc.pvct.items)[3] == (20e9, 1)


@pytest.mark.parametrize("kv_policy,per_token_s,npu", [
    # layer_pipelined, 2 s per token (the scenario above): PIM works on the target's ranks during
    # its layers 7..8, 12.5..13.5, 18..19 (and 23.5..24, alone); the first three overlap the
    # NPU pass: 3 s at half rate cost the pass 1.5 s (2..23.5)
    ("layer_pipelined", 2.0, [(2.0, 23.5)]),
    # recompute, 2.5 s per token: 4 tokens (the pass's 3 inputs + pos 3), 10 s of work from 4,
    # both at half rate: PIM ends at 24 (the pass has done 2 + 10 of its 20 s), the pass then
    # alone: 8 s more, ends at 32 (it lost 10 s: 20 s of overlap at half rate)
    ("recompute", 2.5, [(2.0, 32.0)]),
])
def test_preverification_slows_the_npu_pass_it_overlaps(tmp_path, kv_policy, per_token_s, npu):
    class Contended(FixedCosts):
        host_share = 0.5
    m, col, policy, t = run_scripted(tmp_path, "ahasd", [T] * 40, 8, [2], [*TVC, f"ahasd.preverify_kv={kv_policy}"],
                                     costs=Contended(draft_s=1.0, verify_s=20.0, preverify_per_token_s=per_token_s))
    assert [(s, e) for s, e, lab in intervals(col, "npu") if lab == "verify"][:1] == npu
