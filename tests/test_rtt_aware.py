"""Round-trip-aware split draft length (policy ``rtt_aware``): the closed form, and the mobile-cloud
modes passing it the round trip and the drafter/verify times they measure."""
from __future__ import annotations

import pytest

from ahasd_sim.config import load_config
from ahasd_sim.policies import make_policy
from ahasd_sim.policies.base import DraftTokenView, RoundContext, VerifyOutcome
from ahasd_sim.policies.config import PolicyConfig
from ahasd_sim.policies.rtt_aware import expected_committed, optimal_draft_length, round_time_s
from ahasd_sim.simulation import run_simulation

from conftest import ROOT

HYCO = ROOT / "hw_configs" / "hyco_mobile_cloud.yaml"


def test_closed_form_by_hand():
    """alpha 0.8, t_d 1 ms, t_v 2 ms. Co-located (R = 0): E(g)/(g + 2) is 1.8/3 = 0.600, 2.44/4 = 0.610,
    2.952/5 = 0.590 for g = 1, 2, 3: gamma* = 2. At R = 50 ms: E(g)/(g + 52) is 4.5705/62 = 0.07372,
    4.6564/63 = 0.07391, 4.7251/64 = 0.07383 for g = 10, 11, 12: gamma* = 11 (the round trip buys a
    longer window). E(g) = (1 - 0.8^(g+1)) / 0.2."""
    assert expected_committed(0.8, 2) == pytest.approx(2.44)
    assert expected_committed(1.0, 5) == 6.0
    assert optimal_draft_length(0.8, 1e-3, 0.0, 2e-3, 1, 16) == 2
    assert optimal_draft_length(0.8, 1e-3, 0.050, 2e-3, 1, 16) == 11
    assert optimal_draft_length(0.8, 1e-3, 0.050, 2e-3, 1, 8) == 8         # capped by the round's bound
    # grows with the round trip, never shrinks
    lengths = [optimal_draft_length(0.85, 1.4e-3, r * 1e-3, 2.4e-3, 1, 64) for r in (0, 5, 20, 50, 100, 200)]
    assert lengths == sorted(lengths) and lengths[0] < lengths[-1]
    # pre-drafting: a fully accepted window hides its drafting in the round trip
    assert round_time_s(0.8, 4, 1e-3, 0.050, 2e-3, predraft=True) == pytest.approx(
        0.8 ** 4 * 0.052 + (1 - 0.8 ** 4) * 0.056)
    assert optimal_draft_length(0.8, 1e-3, 0.050, 2e-3, 1, 64, predraft=True) >= 11


def test_policy_drafts_the_optimum_and_learns_acceptance():
    cfg = PolicyConfig()
    cfg.rtt_aware.confidence = "none"                                  # the round's closed-form length
    pol = make_policy("rtt_aware", cfg, None, None)                     # no held-out part: alpha 0.7
    assert pol.alpha == pytest.approx(0.7)
    rid = pol.begin_round(RoundContext(0.0, 1, 16, round_trip_s=0.050, draft_token_s=1e-3, verify_s=2e-3))
    want = optimal_draft_length(0.7, 1e-3, 0.050, 2e-3, 1, 16)
    decisions = [pol.decide(DraftTokenView(i, 0.1, 0.9, 0.9)).value for i in range(want)]
    assert decisions == ["continue"] * (want - 1) + ["stop_after"]
    # every draft accepted 10 times: alpha rises toward 1, the window grows
    for _ in range(10):
        pol.on_verify(VerifyOutcome(want, want, want + 1, 0.06, 0.0, round_id=rid))
    assert pol.alpha > 0.7
    pol.begin_round(RoundContext(0.0, 1, 16, round_trip_s=0.050, draft_token_s=1e-3, verify_s=2e-3))
    assert pol.target >= want
    # no timings (not split drafting): k_without_timing
    pol.begin_round(RoundContext(0.0, 1, 16))
    assert pol.target == cfg.rtt_aware.k_without_timing


def _chosen(rtt_ms, mode="device_draft_cloud_verify"):
    import ahasd_sim.policies.rtt_aware as ra
    seen = []
    orig = ra.RttAwarePolicy.begin_round

    def spy(self, ctx):
        rid = orig(self, ctx)
        seen.append((ctx, self.alpha, self.target))
        return rid
    ra.RttAwarePolicy.begin_round = spy
    try:
        cfg = load_config(HYCO, [f"run.mode={mode}", "run.policy=rtt_aware", f"network.rtt_ms={rtt_ms}",
                                 "policy.rtt_aware.confidence=none",
                                 "network.jitter_ms=0", "run.generated_tokens=192"])
        s = run_simulation(cfg).summary
    finally:
        ra.RttAwarePolicy.begin_round = orig
    return cfg, s, seen


def test_split_mode_picks_the_closed_form_optimum_on_a_constant_link():
    """On a constant link the phone's measured round trip converges to the link's (RTT + the
    messages' bytes / rate); every round's length is the closed-form optimum of the acceptance the
    policy holds and the link's own round trip (computed here from the config, not from what the
    mode passed), within one token while the estimate converges; a longer RTT gives longer windows."""
    cfg, s, seen = _chosen(100.0)
    assert s["policy_stats"]["alpha_fit"] > 0 and len(seen) > 5
    net, hy = cfg.network, cfg.hyco
    for ctx, alpha, target in seen[-5:]:
        n = target
        up = hy.request_bytes + n * (hy.token_id_bytes + hy.draft_topk * (hy.token_id_bytes + hy.prob_bytes))
        down = hy.verdict_header_bytes + hy.token_id_bytes
        ovh = net.message_overhead_bytes
        rt = net.rtt_ms * 1e-3 + (up + ovh) / (net.uplink_mbps * 1e6 / 8) + (down + ovh) / (net.downlink_mbps * 1e6 / 8)
        assert ctx.round_trip_s == pytest.approx(rt, rel=0.05)
        best = optimal_draft_length(alpha, ctx.draft_token_s, rt, ctx.verify_s, ctx.min_tokens, ctx.max_tokens)
        assert abs(target - best) <= 1
    _cfg, s10, seen10 = _chosen(10.0)
    assert s10["policy_stats"]["mean_draft_length"] < s["policy_stats"]["mean_draft_length"]
    # hybrid passes the same measurements
    _c, sh, seenh = _chosen(100.0, "hybrid")
    assert seenh and all(c.round_trip_s is not None for c, _a, _t in seenh)


def test_entropy_confidence_drafts_while_one_more_token_pays_by_hand():
    """confidence = entropy, alpha 0.8 (no held-out part), t_d 1 ms, R 0, t_v 2 ms. With zero drafter
    entropy every kept token is accepted with bound 1, so after k tokens E = 1 + k, T = k + 2 ms, and
    one more pays while (E + 0.8)(k + 2) > E (k + 3), i.e. 0.8 (k + 2) > 1 + k, i.e. k < 3: the round
    stops after 3 tokens. A token whose bound is 0 (entropy >= 1 / gamma_ent = 5 nats) ends the round
    at once: nothing after it can be accepted. At R = 50 ms the same rule drafts to the cap."""
    cfg = PolicyConfig()
    cfg.rtt_aware.alpha_without_fit = 0.8
    pol = make_policy("rtt_aware", cfg, None, None)
    assert pol.confidence == "entropy"
    pol.begin_round(RoundContext(0.0, 1, 16, round_trip_s=0.0, draft_token_s=1e-3, verify_s=2e-3))
    got = [pol.decide(DraftTokenView(i, 0.0, 0.9, 0.9)).value for i in range(3)]
    assert got == ["continue", "continue", "stop_after"]
    pol.begin_round(RoundContext(0.0, 1, 16, round_trip_s=0.0, draft_token_s=1e-3, verify_s=2e-3))
    assert pol.decide(DraftTokenView(0, 6.0, 0.1, 0.1)).value == "stop_after"
    pol.begin_round(RoundContext(0.0, 1, 16, round_trip_s=0.050, draft_token_s=1e-3, verify_s=2e-3))
    got = [pol.decide(DraftTokenView(i, 0.0, 0.9, 0.9)).value for i in range(16)]
    assert got == ["continue"] * 15 + ["stop_after"]
