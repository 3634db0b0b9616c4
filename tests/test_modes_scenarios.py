"""Hand-computed tiny scenarios: exact timelines per mode with fixed task latencies."""
from __future__ import annotations

import pytest

from modes_helpers import run_mode

T, F = True, False


def test_sync_fixed_k_timeline(tmp_path):
    # k=3, draft 1 s, verify 5 s. Round 1 drafts 0,1,2; pos 2 wrong -> commit 0..2 (3 tokens).
    # Round 2 drafts 3,4,5 all right -> commit 3..6 (bonus). Round 3: pos 7 wrong -> commit 7.
    accept = [T, T, F, T, T, T, T, F, T, T]
    m, col, t = run_mode(tmp_path, "gpu_only", accept, 8,
                         ["run.policy=fixed", "policy.fixed.k=3"])
    assert t == 3 * (3 * 1.0 + 5.0)
    c = col.counters
    assert c.drafted_tokens == 9 and c.accepted_tokens == 2 + 3 + 0 and c.rejected_tokens == 2
    assert col.committed_positions == list(range(8))
    assert c.verifications == 3
    assert col.busy_s("gpu") == t


def test_autoregressive_one_token_per_forward(tmp_path):
    m, col, t = run_mode(tmp_path, "autoregressive", [T] * 6, 6, ["baseline.device=gpu"])
    assert t == 6 * 5.0 and col.counters.drafted_tokens == 0 and col.committed_positions == list(range(6))


def test_async_lookahead_timeline_all_accepted(tmp_path):
    # k=2, draft 1 s/token, verify 5 s. Batches pushed at t=2 [0,2), t=4 [2,4), t=6 [4,6), t=8 [6,8).
    # Verify [0,2) 2..7 -> commit 0..2 (pos 2 implicit: drafted and right). Verify [3,6) 7..12 -> commit
    # 3..6. Verify [7,8) 12..17 -> commit 7 (run length 8 reached) at t=17.
    m, col, t = run_mode(tmp_path, "async", [T] * 12, 8, ["run.policy=fixed", "policy.fixed.k=2"])
    assert t == 17.0
    assert col.counters.npu_idle_draft_exhausted_s == 2.0
    assert col.committed_positions == list(range(8))
    assert [(s, e) for s, e, _ in col.busy_intervals["npu"]] == [(2.0, 7.0), (7.0, 12.0), (12.0, 17.0)]


def test_async_rejection_kills_lookahead(tmp_path):
    # k=2. Pos 1 is wrong. Batch [0,2) verified 2..7: accepts pos 0, rejects pos 1 -> commit 0,1.
    # Meanwhile the drafter drafted 2..6 (5 tokens, in batches [2,4), [4,6) and one in progress
    # finishing at t=7 -> pos 6 kept at t=7, same instant). Everything after pos 1 is killed.
    accept = [T, F] + [T] * 20
    m, col, t = run_mode(tmp_path, "async", accept, 4, ["run.policy=fixed", "policy.fixed.k=2"])
    # (the derivation, with the same counts, is in test_exact_modes.py::test_async_rejection_rollback_and_kills_exact:
    # pos 0 and later 2, 3 accepted; 4 drafts of the dead chain plus its in-flight forward killed)
    c = col.counters
    assert c.rejected_tokens == 1 and c.accepted_tokens == 3
    assert c.killed_tokens == 5 and c.unverified_at_end == 4
    assert c.drafted_tokens == c.accepted_tokens + c.rejected_tokens + c.killed_tokens + c.unverified_at_end
    assert col.committed_positions == list(range(4))


def test_edc_only_stalls_drafter_until_feedback(tmp_path):
    # EDC with PHT counters initialised to 1 (predict "stop") and no TVC: after every batch the
    # drafter waits for feedback, so there is never look-ahead and nothing is killed.
    accept = [T, F] * 10
    m, col, t = run_mode(tmp_path, "ahasd", accept, 6,
                         ["run.policy=fixed", "policy.fixed.k=2", "ahasd.tvc=false", "ahasd.edc_stop=idle_until_feedback",
                          "ahasd.edc_config.pht_counter_init=1"])
    # Batches [0,2), [2,4), [4,6): each has pos 2i right and 2i+1 wrong -> 1 accepted, 1 rejected,
    # commit 2 tokens, 3 verifications. Every prediction uses PHT index (bucket 0, bucket 0, LLR 1) = 1,
    # whose counter starts at 1 (stop) and is only decremented by the rejections: 3 stops.
    c = col.counters
    assert c.killed_tokens == 0 and (c.accepted_tokens, c.rejected_tokens, c.verifications) == (3, 3, 3)
    st = m.edc.stats
    assert (st.predictions, st.suppressed_batches, st.rollbacks) == (3, 3, 3) and m.edc.pht[1] == 0
    assert col.committed_positions == list(range(6))


# (the TVC pre-verification scenarios, with every count and interval derived, are in
# test_exact_modes.py::test_ahasd_tvc_preverification_exact)


def test_full_unverified_queue_blocks_the_drafter(tmp_path):
    # Capacity 1 batch, k=1, draft 1 s, verify 5 s, all right, 6 tokens, no poll delay.
    # Drafter: [0,1) pushed at 1 (the idle verifier takes it at once: NPU idle 0..1); [1,2) at 2
    #   (queued); [2,3)'s push at 3 finds the queue full and blocks.
    # Verifier 1..6: commit 0 + bonus 1 (c=2); pops [1,2) (committed: dropped), which lets the
    #   drafter's [2,3) in at 6 (blocked 3..6); takes it, verifies 6..11: commit 2 + bonus 3.
    # Drafter: [3,4) at 7 (queued), [4,5) blocks 8..11 (the verifier drops [3,4) at 11);
    #   verify [4,5) 11..16 commits 4 + bonus 5: done at 16. Drafter: [5,6) at 12, [6,7) blocked
    #   from 13 (never completes).
    # Pushes 6 (0..5), blocked 6 s, occupancy never above 1. Queue ops (push or pop, charged
    #   in finalize): unverified 6 pushes + 5 pops ([0,1), [1,2), [2,3), [3,4), [4,5)); feedback 3
    #   pushes + 2 pops (drained by the drafter at 6 and 11; the last one lands at the end) = 16.
    # Accepted: 0,1 | 2,3 | 4,5 = 6; drafted pos 0..6 = 7; pos 6 unverified at the end.
    over = ["run.policy=fixed", "policy.fixed.k=1", "ahasd.feedback_latency_ns=0"]
    m, col, t = run_mode(tmp_path, "async", [T] * 40, 6, [*over, "ahasd.unverified_queue_batches=1"])
    assert t == 16.0
    assert m.unverified.stats() == {"capacity": 1, "pushes": 6, "max_occupancy": 1, "producer_blocked_s": 6.0}
    assert m.feedback.stats() == {"capacity": 32, "pushes": 3, "max_occupancy": 1, "producer_blocked_s": 0.0}
    assert m.queue_ops == 16
    c = col.counters
    assert (c.drafted_tokens, c.accepted_tokens, c.unverified_at_end, c.verifications) == (7, 6, 1, 3)
    assert c.npu_idle_draft_exhausted_s == 1.0
    assert [(s, e) for s, e, _ in col.busy_intervals["npu"]] == [(1.0, 6.0), (6.0, 11.0), (11.0, 16.0)]
    m.finalize()   # 1 pJ per queue operation, on the control unit
    assert col.dynamic_energy_j["ctrl"] == pytest.approx(16 * 1e-12, rel=1e-12)
    assert m.stats()["queue_ops"] == 16 and m.stats()["queues"]["unverified_draft"]["pushes"] == 6
    # Unbounded: nothing ever blocks; the drafter runs ahead one token per second, so the
    # verifier takes [1,6) at 6 (5 batches) and commits 1..6 at 11 -> done earlier, at 11
    m2, col2, t2 = run_mode(tmp_path, "async", [T] * 40, 6, over)
    assert m2.unverified.stats()["producer_blocked_s"] == 0.0 and t2 == 11.0
    assert [(s, e) for s, e, _ in col2.busy_intervals["npu"]] == [(1.0, 6.0), (6.0, 11.0)]


def test_async_shared_rank_contention_slows_only_the_overlap(tmp_path):
    # Drafts and NPU passes share one group of ranks at equal weights: both at half rate while
    # both run, a lone task at full rate. k=2, draft 1 s, verify 5 s, all right, 4 tokens.
    # Drafter: pos 0,1 alone at 0..2, [0,2) pushed at 2. At 2 the pass and pos 2 start together:
    #   both at half rate; every later draft also overlaps the pass: pos 2 2..4, 3 4..6 ([2,4)
    #   pushed at 6), 4 6..8, 5 8..10 ([4,6) at 10), 6 10..12; the pass has done 5 s at 12.
    m, col, t = run_mode(tmp_path, "async", [T] * 40, 4,
                         ["run.policy=fixed", "policy.fixed.k=2", "ahasd.feedback_latency_ns=0"],
                         costs=Contended(host_share=0.5))
    npu = [(s, e) for s, e, _ in col.busy_intervals["npu"]]
    assert npu[0] == (2.0, 12.0)
    assert col.busy_intervals["pim"][:5] == [(0.0, 1.0, "draft"), (1.0, 2.0, "draft"), (2.0, 4.0, "draft"),
                                              (4.0, 6.0, "draft"), (6.0, 8.0, "draft")]
    assert col.dynamic_energy_j["npu"] == 5.0 * len(npu)     # contention leaves the work (1 J/s alone)
    st = m.stats()["shared_rank_contention"]
    # conservation: every second a task lost is a second the other ran next to it at half rate
    assert st["lost_s"]["npu"] == pytest.approx(sum(e - s for s, e in npu) - 5.0 * len(npu))
    assert st["contended_verifications"] == len(npu) and st["contended_drafts"] >= 5


class Contended(__import__("modes_helpers").FixedCosts):
    draft_shares_ranks = True

    def __init__(self, host_share=0.5, **kw):
        super().__init__(**kw)
        self.host_share = host_share


def test_offpath_beyond_recorded_rollout_uses_labelled_synthetic_fallback(tmp_path):
    # Rollouts of length 1: look-ahead past a wrong token quickly runs past the recording; the
    # drafter keeps drafting (no stall) with synthetic drafts counted apart, drawn from the
    # trace's own off-path values (here all 3.0 nats), and every such draft dies.
    accept = ([T] * 3 + [F]) * 10
    # 4 tokens, pos 3 wrong, k=2, draft 1 s, verify 8.25 s: the NPU verifies [0,2) 2..10.25
    # (commit 0,1 + bonus 2), then everything pending (pos 3 on) 10.25..18.5: pos 3 rejected,
    # its correction commits the 4th token: done. The drafter never stopped: pos 0..17 drafted
    # by 18; pos 4..17 are off-path (after the wrong pos 3); the recording has 1 rollout token
    # (pos 4), so pos 5..17 are synthetic (13).
    m, col, t = run_mode(tmp_path, "async", accept, 4, ["run.policy=fixed", "policy.fixed.k=2"],
                         costs=__import__("modes_helpers").FixedCosts(draft_s=1.0, verify_s=8.25),
                         rollout_len=1, rollout_entropy=3.0)
    c = col.counters
    assert t == 18.5
    assert (c.drafted_tokens, c.offpath_drafted_tokens, c.offpath_synthetic_tokens) == (18, 14, 13)
    assert (c.accepted_tokens, c.rejected_tokens, c.unverified_at_end) == (3, 1, 14)
    assert col.committed_positions == list(range(4))
    m, col, t = run_mode(tmp_path, "async", accept, 20, ["run.policy=fixed", "policy.fixed.k=2"],
                         costs=__import__("modes_helpers").FixedCosts(draft_s=1.0, verify_s=8.0),
                         rollout_len=1, rollout_entropy=3.0)
    assert col.committed_positions == list(range(20))
    r = m.replay
    q = r.first_wrong(0)
    assert r.is_synthetic(q + 2, 0) and not r.is_synthetic(q + 1, 0) and not r.is_synthetic(q, 0)
    assert r.view(q + 5, 0, 0, 0.0).entropy_nats == 3.0
    # the recorded rollout length does not matter to the run finishing (any length works)
    for ro in (0, 1, 4, 40):
        _, col2, _ = run_mode(tmp_path, "async", accept, 20, ["run.policy=fixed", "policy.fixed.k=3"],
                              rollout_len=ro)
        assert col2.committed_positions == list(range(20))


@pytest.mark.parametrize("mode", ["async", "ahasd", "operator_sync"])
def test_no_duplicate_drafter_forwards_after_a_discard(tmp_path, mode):
    # AdaEDL discards: entropy alternates 0.1 / 3 nats (lambda 0.5 <=> stop if H > 1.25), so a
    # round keeps its first token and discards the forward at the next high-entropy position. The
    # next round starts at that position and must reuse that forward's logits, not run it again.
    accept = [T] * 60
    m, col, t = run_mode(tmp_path, mode, accept, 30, ["run.policy=adaedl", "policy.max_tokens=4"],
                         entropy=__import__("numpy").tile([0.1, 3.0], 30))
    c = col.counters
    assert c.discarded_draft_forwards > 0
    assert c.duplicate_drafter_forwards == 0
    assert col.committed_positions == list(range(30))
    if mode != "operator_sync":        # sync rounds verify before the next one: nothing to reuse
        assert c.reused_drafter_forwards > 0
    # forwards = kept drafts + discarded forwards - reused ones (each forward charged once)
    assert c.drafter_forwards == c.drafted_tokens + c.discarded_draft_forwards - c.reused_drafter_forwards


def test_duplicate_counter_catches_a_rerun(tmp_path):
    # The counter itself must fire when the same (chain, position) forward is charged twice.
    m, col, _ = run_mode(tmp_path, "async", [T] * 10, 4, ["run.policy=fixed", "policy.fixed.k=2"])
    m.note_drafter_forward(7, m.gen)
    m.note_drafter_forward(7, m.gen)
    assert col.counters.duplicate_drafter_forwards == 1
    m.note_drafter_forward(7, m.gen)
    assert col.counters.duplicate_drafter_forwards == 2
    m.note_drafter_forward(7, m.gen + 1)      # the same position on another chain: no duplicate
    assert col.counters.duplicate_drafter_forwards == 2


@pytest.mark.parametrize("mode", ["async", "ahasd", "operator_sync", "gpu_only"])
def test_draft_chains_stop_at_prompt_boundaries_and_each_prompt_is_prefilled(tmp_path, mode, monkeypatch):
    # Two prompts of 10 positions, everything accepted, k = 4: without boundaries the drafter
    # would run from position 8 into the second prompt. Prefill costs 3 s on the host per model.
    import modes_helpers as mh
    real = mh.synthetic_trace

    def two_prompts(*a, **k):
        t = real(*a, **k)
        t.pos_in_response = __import__("numpy").tile(__import__("numpy").arange(10), 2)
        return t
    monkeypatch.setattr(mh, "synthetic_trace", two_prompts)

    class Prefill(mh.FixedCosts):
        def prefill(self, role, n):
            return self._t("npu", 3.0)
        gpu_prefill = prefill
    m, col, t = run_mode(tmp_path, mode, [T] * 20, 20, ["run.policy=fixed", "policy.fixed.k=4"], costs=Prefill())
    assert col.committed_positions == list(range(20))
    assert m.prefills == 2 and m.prefill_s == 12.0
    for e in col.events:
        if e["event"] == "batch_pushed":
            assert e["position"] // 10 == (e["position"] + e["n_tokens"] - 1) // 10
        if e["event"] == "verify":
            assert e["position"] // 10 == (e["position"] + max(0, e["n_tokens"] - 1)) // 10
    # the second prompt's drafting starts only after its prefill (which starts once prompt 0 is done)
    drafts = [e["time_s"] for e in col.events if e["event"] in ("draft_token", "batch_pushed")
              and e["position"] >= 10]
    verify_p0 = max(e["time_s"] + e["duration_s"] for e in col.events if e["event"] == "verify" and e["position"] < 10)
    assert min(drafts) >= verify_p0 + 6.0 - 1e-9


def test_feedback_latency_delays_the_drafter(tmp_path):
    # EDC-only, stop after every batch of 2 (each batch ends in a rejection: the PHT counters
    # start at 0 and are only decremented), so the drafter waits for the verifier's feedback.
    # Pos 2i right, 2i+1 wrong, 12 tokens, draft 1 s, verify 5 s. Without poll delay a cycle
    # is 2 s drafting + 5 s verifying and commits 2 tokens (2i and the correction at 2i+1): 6
    # cycles, done at 42; the drafter waits 5 s in each of the first 5 (in the 6th the run
    # ends). EDC's 100 ns decision latency passes while the drafter waits: it delays nothing.
    # With a 0.5 s poll delay the drafter sees each of the first 5 results 0.5 s later (the
    # rollback too: it was posted as long ago): done at 44.5, waits 5.5 s each.
    base = ["run.policy=fixed", "policy.fixed.k=2", "ahasd.tvc=false", "ahasd.edc_stop=idle_until_feedback",
            "ahasd.edc_config.pht_counter_init=0"]
    m0, col0, t0 = run_mode(tmp_path, "ahasd", [T, F] * 20, 12, [*base, "ahasd.feedback_latency_ns=0"])
    m1, col1, t1 = run_mode(tmp_path, "ahasd", [T, F] * 20, 12, [*base, "ahasd.feedback_latency_ns=500000000.0"])
    assert t0 == 42.0 and t1 == 44.5
    assert m0.drafter_stall_s == 25.0 and m1.drafter_stall_s == 27.5
    assert [s for s, _, _ in col1.busy_intervals["pim"]] == [0.0, 1.0, 7.5, 8.5, 15.0, 16.0, 22.5, 23.5,
                                                              30.0, 31.0, 37.5, 38.5]
    assert m1.edc_idle_waits == 6 and m1.stats()["drafter_stall_s"] == 27.5
    # queue operations: 6 batches pushed and popped, 6 feedbacks pushed, 5 taken by the
    # waiting drafter (the last arrives as the run ends)
    assert m1.queue_ops == 23
    assert col1.counters.rollbacks == 5 and col1.counters.killed_tokens == 0


def test_preverify_queue_bounds_the_tokens_marked(tmp_path):
    # k = 1 batches: with a 1-entry pre-verification queue each pre-verification covers 1 token.
    over = ["run.policy=fixed", "policy.fixed.k=1", "ahasd.edc_config.pht_counter_init=0",
            "ahasd.tvc_config.preload_kv_len=100", "ahasd.preverify_kv=wait"]
    costs = __import__("modes_helpers").FixedCosts(draft_s=1.0, verify_s=20.0, preverify_per_token_s=0.5)
    m1, col1, _ = run_mode(tmp_path, "ahasd", [T] * 60, 24, [*over, "ahasd.preverify_queue_entries=1"], costs=costs)
    sizes1 = [e["n_tokens"] for e in col1.events if e["event"] == "preverify"]
    m8, col8, _ = run_mode(tmp_path, "ahasd", [T] * 60, 24, [*over, "ahasd.preverify_queue_entries=8"], costs=costs)
    sizes8 = [e["n_tokens"] for e in col8.events if e["event"] == "preverify"]
    assert sizes1 and max(sizes1) == 1
    assert sizes8 and max(sizes8) > 1


def test_edc_idle_until_feedback_drafts_less(tmp_path):
    # TVC declines (pre-verification far too slow): paper semantics keep drafting one more batch,
    # the energy-saving option idles until feedback.
    base = ["run.policy=fixed", "policy.fixed.k=2", "ahasd.edc_config.pht_counter_init=0",
            "ahasd.tvc_config.preload_kv_len=100"]
    costs = __import__("modes_helpers").FixedCosts(draft_s=1.0, verify_s=6.0, preverify_per_token_s=100.0)
    m_d, col_d, _ = run_mode(tmp_path, "ahasd", [T, T, T, F] * 10, 20, [*base, "ahasd.edc_stop=draft_one_more"],
                             costs=costs)
    m_i, col_i, _ = run_mode(tmp_path, "ahasd", [T, T, T, F] * 10, 20,
                             [*base, "ahasd.edc_stop=idle_until_feedback"], costs=costs)
    assert m_i.edc_idle_waits > 0 and m_d.edc_idle_waits == 0
    assert col_i.counters.drafted_tokens < col_d.counters.drafted_tokens
    assert col_i.committed_positions == col_d.committed_positions == list(range(20))
