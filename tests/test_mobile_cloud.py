"""Mobile-cloud link, cloud verifier and the HyCo-family modes (issue 16)."""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import simpy

from ahasd_sim.__main__ import main
from ahasd_sim.config import load_config
from ahasd_sim.hw.network import NetworkConfig, NetworkLink, PacketTrace, TraceFormatError
from ahasd_sim.metrics.stats import mean_t_interval
from ahasd_sim.modes.mobile_cloud.engine import build_cloud_costs, tpot_windows_s
from ahasd_sim.simulation import run_simulation
from modes_helpers import as_trace, synthetic_trace

ROOT = Path(__file__).resolve().parent.parent
HYCO = ROOT / "hw_configs" / "hyco_mobile_cloud.yaml"
H200 = ROOT / "hw_configs" / "platform_server_h200_pcie5.yaml"
SMOKE_TRACE = ROOT / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz"
MODES = ("hybrid", "device_draft_cloud_verify", "cloud_autoregressive", "device_only")


def _session(tmp_path=None, **kw):
    kw = {"radio_promotion_s": 0.0, "trace_offset_s": 0.0, **kw}   # link timing alone unless a test asks
    cfg = NetworkConfig(enabled=True, **kw)
    env = simpy.Environment()
    return env, NetworkLink(cfg, tmp_path).open(env, np.random.default_rng(0))


def _trace_file(tmp_path, name, stamps):
    p = tmp_path / name
    p.write_text("".join(f"{t}\n" for t in stamps))
    return p


# ------------------------------------------------------------------ link vs hand computation
def test_constant_link_message_takes_half_rtt_plus_bytes_over_rate():
    env, s = _session(uplink_mbps=8.0, downlink_mbps=20.0, rtt_ms=40.0, message_overhead_bytes=83)
    arrivals = []

    def go(payload, direction):
        rec = yield env.process(s.send(payload, direction))
        arrivals.append((direction, rec.arrive_s, env.now))

    env.process(go(917, "up"))       # 1000 B on the wire
    env.process(go(917, "up"))       # queued behind the first
    env.process(go(1917, "down"))    # 2000 B, the other direction
    env.run()
    ser_up = 1000 * 8 / 8e6
    got = {(d, round(a, 12)) for d, a, _ in arrivals}
    assert got == {("up", round(0.020 + ser_up, 12)), ("up", round(0.020 + 2 * ser_up, 12)),
                   ("down", round(0.020 + 2000 * 8 / 20e6, 12))}
    assert all(abs(a - now) < 1e-12 for _, a, now in arrivals)   # the process wakes on arrival
    assert s.bytes == {"up": 2000, "down": 2000} and s.messages == {"up": 2, "down": 1}
    # radio energy: per bit + active while queued/on air (union of intervals) + tail until the end
    end = 1.0
    e = s.radio_energy_j(end)
    c = s.cfg
    assert e["radio_tx"] == pytest.approx(2000 * 8 * c.radio_tx_nj_per_bit * 1e-9)
    assert e["radio_rx"] == pytest.approx(2000 * 8 * c.radio_rx_nj_per_bit * 1e-9)
    rx_end = 0.020 + 2000 * 8 / 20e6
    active = 2 * ser_up + 2000 * 8 / 20e6      # uplink [0, 2 ser_up], downlink [0.020, rx_end]
    assert e["radio_active"] == pytest.approx(active * c.radio_active_power_w)
    tail = (0.020 - 2 * ser_up) + c.radio_tail_s      # the gap, then a whole tail after the last message
    assert e["radio_tail"] == pytest.approx(tail * c.radio_tail_power_w)


def test_packet_trace_message_leaves_at_the_computed_delivery_slot(tmp_path):
    up = _trace_file(tmp_path, "t.up", [5, 5, 10, 20])      # period 20 ms, 4 opportunities
    env, s = _session(tmp_path, uplink_trace=str(up), rtt_ms=10.0, message_overhead_bytes=0)
    # 2000 B at t=0: opportunities at 5 ms (1500 B) and 5 ms (500 B) -> leaves at 5 ms
    r1 = s.schedule(2000, "up")
    assert (r1.depart_s, r1.arrive_s) == pytest.approx((0.005, 0.010))
    # 1000 B at t=0: the 1000 B left in the second 5-ms opportunity carry it (FIFO sharing)
    r2 = s.schedule(1000, "up")
    assert r2.depart_s == pytest.approx(0.005)
    # 1600 B: opportunities at 10 ms and 20 ms
    r3 = s.schedule(1600, "up")
    assert r3.depart_s == pytest.approx(0.020)
    # at t = 21 ms the link has looped: the next opportunities are 25, 25, 30 ms
    env.run(until=0.021)
    r4 = s.schedule(3001, "up")
    assert r4.depart_s == pytest.approx(0.030) and r4.service_start_s == pytest.approx(0.025)
    # an idle link wastes opportunities: at 101 ms (after loop 4's last one at 100 ms) the next is 105 ms
    env.run(until=0.101)
    assert s.schedule(1, "up").depart_s == pytest.approx(0.105)
    tr = PacketTrace.load(up)
    assert tr.mean_rate_mbps == pytest.approx(4 * 1500 * 8 / 0.020 / 1e6)


def test_jitter_is_seeded_and_keeps_order():
    def arrivals(seed):
        cfg = NetworkConfig(enabled=True, rtt_ms=20.0, jitter_ms=30.0)
        env = simpy.Environment()
        s = NetworkLink(cfg).open(env, np.random.default_rng(seed))
        return [s.schedule(100, "down").arrive_s for _ in range(50)]

    a, b, c = arrivals(1), arrivals(1), arrivals(2)
    assert a == b and a != c
    assert all(x <= y for x, y in zip(a, a[1:]))          # in-order delivery
    assert min(a) >= 0.010                                  # never earlier than RTT/2


@pytest.mark.parametrize("content, fragment", [
    ("5\n7\nabc\n", "line 3: expected an integer"),
    ("5\n3\n", "must not decrease"),
    ("", "no delivery opportunities"),
    ("0\n0\n", "loop period"),
])
def test_corrupt_trace_is_rejected(tmp_path, content, fragment):
    p = tmp_path / "bad.up"
    p.write_text(content)
    with pytest.raises(TraceFormatError, match=fragment):
        PacketTrace.load(p)


@pytest.mark.parametrize("key, make", [
    ("network.uplink_trace", lambda d: d / "missing.up"),
    ("network.downlink_trace", lambda d: _trace_file(d, "bad.down", ["12", "x"])),
    ("network.rtt_trace", lambda d: _trace_file(d, "bad.rtt", ["0 50", "x"])),
])
def test_cli_bad_trace_is_one_line_exit_2(tmp_path, capsys, key, make):
    path = make(tmp_path)
    out = tmp_path / "out"
    rc = main(["--config", str(HYCO), "--out", str(out), "--set", f"{key}={path}",
               "--set", f"run.trace={SMOKE_TRACE}", "--set", "run.generated_tokens=16"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "Traceback" not in err
    assert key in err and str(path.name) in err
    assert not (out / "summary.json").exists()


# ------------------------------------------------------------------ modes on the shipped config
def _run(mode, extra=(), tokens=96):
    cfg = load_config(HYCO, [f"run.mode={mode}", f"run.generated_tokens={tokens}",
                             "run.timeline=false", *extra])
    return run_simulation(cfg)


@pytest.mark.parametrize("mode", MODES)
def test_mobile_cloud_metrics_are_consistent(mode):
    res = _run(mode)
    s = res.summary
    n = s["generated_tokens"]
    assert n == 96
    # TPOT over equal windows: its mean is makespan / tokens
    assert s["tpot_s"] == pytest.approx(s["makespan_s"] / n, rel=1e-6)
    assert 1 / s["throughput_e2e_tok_s"] == pytest.approx(s["tpot_s"], rel=1e-6)   # TPOT includes prefill
    ev = res.events
    if mode == "device_only":
        assert s["uplink_bytes"] == s["downlink_bytes"] == s["round_trips"] == 0
        assert s["cloud_cost_usd_per_1k_tokens"] == 0.0
        return
    # cost follows the GPU time the cloud actually ran (busy intervals on "cloud_gpu")
    cfg = load_config(HYCO)
    busy = s["device_busy_s"]["cloud_gpu"]
    usd = busy * cfg.cloud.usd_per_gpu_hour / 3600
    assert s["cloud_cost_usd_per_1k_tokens"] == pytest.approx(usd / n * 1000, rel=1e-9)
    # every message is counted once; bytes include the per-message overhead
    down = ev[ev.event == "downlink"]
    assert s["downlink_messages"] == len(down)
    assert s["downlink_bytes"] >= s["downlink_messages"] * cfg.network.message_overhead_bytes
    # device energy excludes the cloud GPU and includes the radio
    assert "cloud_gpu" not in s["energy_breakdown_j"]
    assert s["energy_breakdown_j"]["network"]["dynamic"] > 0
    assert s["device_energy_per_token_j"] == pytest.approx(s["energy_j"] / n)
    if mode == "cloud_autoregressive":
        assert s["round_trips"] == 1 and s["downlink_messages"] == n and s["drafted_tokens"] == 0
    if mode == "device_draft_cloud_verify":
        assert s["round_trips"] == s["uplink_messages"] == s["verifications"]
        assert s["tokens_not_uploaded"] == 0


def test_pricing_modes_bill_what_each_model_says():
    """shared_busy: GPU-hour price x the phone's GPU time (one phone: every iteration is its own);
    dedicated_wall: price x wall time / phones; per_token_api: tokens processed x price per token +
    requests x price per request. Split verifies n drafts as n + 1 tokens per request."""
    s = _run("device_draft_cloud_verify", ["cloud.usd_per_call=0.001"]).summary
    cfg = load_config(HYCO)
    n, by = s["generated_tokens"], s["cloud_cost_usd_per_1k_tokens_by_pricing"]
    per_s = cfg.cloud.usd_per_gpu_hour / 3600
    assert by["shared_busy"] == pytest.approx(s["device_busy_s"]["cloud_gpu"] * per_s / n * 1000, rel=1e-9)
    assert by["dedicated_wall"] == pytest.approx(s["makespan_s"] * per_s / n * 1000, rel=1e-9)
    assert s["cloud_tokens_processed"] == s["drafted_tokens"] + s["verifications"]
    assert s["cloud_calls"] == s["verifications"]
    api = s["cloud_tokens_processed"] * cfg.cloud.usd_per_1m_tokens * 1e-6 + s["cloud_calls"] * 0.001
    assert by["per_token_api"] == pytest.approx(api / n * 1000, rel=1e-9)
    assert s["cloud_pricing"] == "shared_busy" and s["cloud_cost_usd_per_1k_tokens"] == by["shared_busy"]
    api_run = _run("device_draft_cloud_verify", ["cloud.usd_per_call=0.001", "cloud.pricing=per_token_api"]).summary
    assert api_run["cloud_cost_usd_per_1k_tokens"] == pytest.approx(by["per_token_api"], rel=1e-12)
    # a dedicated GPU idles while the phone drafts and the messages travel: it costs more than busy time
    assert by["dedicated_wall"] > by["shared_busy"]


@pytest.mark.parametrize("mode, extra", [("cloud_autoregressive", []), ("hybrid", ["hyco.options=[cloud_sd]"]),
                                         ("device_draft_cloud_verify", [])])
def test_queue_wait_is_drawn_per_request_not_per_forward(mode, extra):
    """A fixed 20 ms admission wait is paid once per request: cloud AR sends one request for the
    whole generation (its 96 decode forwards wait 20 ms in all, and the run ends 20 ms later);
    cloud SD once per session; split once per verification."""
    base = _run(mode, extra).summary
    q = _run(mode, [*extra, "cloud.queue_delay_ms=20"]).summary
    assert q["cloud_queue_wait_s"] == pytest.approx(0.020 * q["cloud_calls"], rel=1e-9)
    if mode == "cloud_autoregressive":
        assert q["cloud_calls"] == 1 and base["verifications"] == 96
        assert q["makespan_s"] - base["makespan_s"] == pytest.approx(0.020, rel=1e-6)
    elif mode == "hybrid":
        assert q["cloud_calls"] == q["mode_stats"]["cloud_sessions"] < q["verifications"]
    else:
        assert q["cloud_calls"] == q["verifications"]
    # waiting in the queue is not billed GPU time
    assert q["cloud_gpu_busy_s"] == pytest.approx(base["cloud_gpu_busy_s"], rel=1e-9)
    if mode == "device_draft_cloud_verify":       # many requests: some wait behind unsimulated tenants
        shared = _run(mode, [*extra, "cloud.utilization=0.8"]).summary
        assert shared["cloud_queue_wait_s"] > 0 and base["cloud_queue_wait_s"] == 0
        assert shared["tpot_s"] > base["tpot_s"]


def test_radio_promotion_and_tail_after_the_last_message():
    """Huang et al. LTE RRC model. Uplink 1000 B on an 8 Mbit/s link (1 ms on the air), RTT 40 ms.
    t = 0: the radio is idle -> promotion 260.1 ms, the message leaves at 0.2611 s, arrives 0.2811 s.
    t = 5 s (< 0.2611 + 11.576 s tail): connected, no promotion; leaves 5.001 s.
    t = 30 s (> 5.001 + 11.576): idle again -> a second promotion; leaves 30.2611 s.
    Energy (run ends at 31 s): promotions 2 x 0.2601 s x 1.2107 W; active 3 x 1 ms x 1.288 W;
    tail: the 3.9999 s gap (shorter than the timer) + one whole tail after the 5.001 s message +
    a whole tail after the last one although the run ends 0.7389 s after it."""
    env, s = _session(uplink_mbps=8.0, rtt_ms=40.0, message_overhead_bytes=0, radio_promotion_s=0.2601)
    c = s.cfg
    r1 = s.schedule(1000, "up")
    assert (r1.depart_s, r1.arrive_s) == pytest.approx((0.2611, 0.2811))
    env.run(until=5.0)
    assert s.schedule(1000, "up").depart_s == pytest.approx(5.001)
    env.run(until=30.0)
    assert s.schedule(1000, "up").depart_s == pytest.approx(30.2611)
    assert s.promotions == 2
    e = s.radio_energy_j(31.0)
    assert e["radio_promotion"] == pytest.approx(2 * 0.2601 * c.radio_promotion_power_w)
    assert e["radio_active"] == pytest.approx(3 * 0.001 * c.radio_active_power_w)
    assert e["radio_tail"] == pytest.approx(((5.0 - 0.2611) + 2 * c.radio_tail_s) * c.radio_tail_power_w)
    # a run's summary carries the tail after its last message (cloud AR: ~12.3 J, not 0), its token
    # share of it when runs are charged per session (96 of 512 tokens)
    res = _run("cloud_autoregressive", ["network.radio_session_tokens=0"])
    tail = res.summary["dynamic_energy_by_task_j"]["radio_tail"]["network"]
    assert tail >= c.radio_tail_s * c.radio_tail_power_w
    res = _run("cloud_autoregressive")
    tail = res.summary["dynamic_energy_by_task_j"]["radio_tail"]["network"]
    assert tail >= 96 / 512 * c.radio_tail_s * c.radio_tail_power_w


def test_time_varying_rtt_from_an_rtt_trace(tmp_path):
    """RTT trace: 40 ms from 0 s, 200 ms from 1 s, period 2 s; offset 0.5 s. A message sent at t = 0
    (trace time 0.5 s) travels 20 ms one way; at t = 0.6 s (trace 1.1 s) 100 ms; at t = 1.6 s
    (trace 2.1 s = 0.1 s after the loop) 20 ms again. The estimate before any message is the
    time average, (40 + 200) / 2 = 120 ms."""
    rt = _trace_file(tmp_path, "r.rtt", ["0 40", "1 200", "2 40"])
    env, s = _session(tmp_path, rtt_trace=str(rt), trace_offset_s=0.5, uplink_mbps=1e6, message_overhead_bytes=0)
    assert s.link.rtt_s == pytest.approx(0.120)
    assert s.schedule(1, "up").arrive_s == pytest.approx(0.020, abs=1e-6)
    env.run(until=0.6)
    assert s.schedule(1, "up").arrive_s == pytest.approx(0.700, abs=1e-6)
    env.run(until=1.6)
    assert s.schedule(1, "up").arrive_s == pytest.approx(1.620, abs=1e-6)


def test_trace_offset_is_drawn_per_seed_and_used(tmp_path):
    """Offset 7 ms into a trace with opportunities at 5, 10, 20 ms (period 20): a message at t = 0
    reads the trace at 7 ms and leaves at the 10-ms opportunity, i.e. t = 3 ms. A negative offset
    draws one per session from its seeded generator (same seed, same offset)."""
    up = _trace_file(tmp_path, "o.up", [5, 10, 20])
    env, s = _session(tmp_path, uplink_trace=str(up), rtt_ms=0.0, message_overhead_bytes=0, trace_offset_s=0.007)
    assert s.schedule(100, "up").depart_s == pytest.approx(0.003)
    offs = []
    for seed in (1, 1, 2):
        cfg = NetworkConfig(enabled=True, uplink_trace=str(up), trace_offset_s=-1.0)
        offs.append(NetworkLink(cfg, tmp_path).open(simpy.Environment(), np.random.default_rng(seed)).offset_s)
    assert offs[0] == offs[1] != offs[2] and all(0 <= o < 0.020 for o in offs)


def test_hybrid_falls_back_to_the_cloud_on_a_bad_link():
    good = _run("hybrid", ["network.rtt_ms=20"], tokens=192).summary
    bad = _run("hybrid", ["network.rtt_ms=1000", "network.uplink_mbps=0.005"], tokens=192).summary
    g, b = good["mode_stats"]["rounds_by_option"], bad["mode_stats"]["rounds_by_option"]
    assert g["split"] > g["cloud_ar"] + g["cloud_sd"]
    assert b["split"] < b["cloud_ar"] + b["cloud_sd"]


def test_upload_skipping_commits_confident_tokens_without_the_cloud():
    off = _run("hybrid", ["hyco.options=[split]", "hyco.skip_max_entropy_nats=-1", "pim.partition_policy=min_fit"]).summary
    on = _run("hybrid", ["hyco.options=[split]", "hyco.skip_max_entropy_nats=0.5", "pim.partition_policy=min_fit"]).summary
    assert off["tokens_not_uploaded"] == 0 and on["tokens_not_uploaded"] > 0
    assert on["uplink_bytes"] < off["uplink_bytes"]          # skipped drafts travel as bare ids
    assert on["round_trips"] <= off["round_trips"]
    # skipped tokens are never verified: the output differs from the target where the trace says so
    assert 0 <= on["unverified_mismatch_tokens"] <= on["tokens_not_uploaded"]


# ------------------------------------------------------------------ causality
def _causal_run(tmp_path, options, tokens=160):
    rng = np.random.default_rng(3)
    accept = rng.random(400) < 0.75
    tr = as_trace(synthetic_trace(accept, entropy=0.02))
    tr.drf_H = np.where(rng.random(400) < 0.3, 0.01, 1.0)     # some confident tokens to skip
    cfg = load_config(HYCO, [f"hyco.options={options}", "network.jitter_ms=15", "policy.max_tokens=6",
                             f"run.generated_tokens={tokens}", "run.timeline=false", "run.policy=fixed",
                             "policy.fixed.k=4", "hyco.skip_max_entropy_nats=0.05", "network.rtt_ms=60"])
    return run_simulation(cfg, (tr, tr, None))


@pytest.mark.parametrize("options", ["[split]", "[split,cloud_sd,cloud_ar]"])
def test_phone_never_uses_a_verdict_before_its_downlink_message_arrives(tmp_path, options):
    res = _causal_run(tmp_path, options)
    ev = res.events
    rounds = ev[ev.round_id.notna()] if "round_id" in ev else ev.iloc[:0]
    checked = 0
    for rid, g in rounds.groupby("round_id"):
        kinds = dict(zip(g.event, g.time_s))
        if not {"uplink", "cloud_verify", "downlink", "commit"} <= set(kinds):
            continue
        ver = g[g.event == "cloud_verify"].iloc[0]
        assert kinds["uplink"] <= ver.time_s + 1e-12           # verify starts after the upload arrived
        dn = g[g.event == "downlink"].iloc[0]
        assert ver.end_s <= dn.sent_s + 1e-12                 # the verdict is sent after the verify ends
        assert dn.time_s <= kinds["commit"] + 1e-12            # ... and used only once it arrived
        checked += 1
    assert checked >= (10 if options == "[split]" else 3)
    # cloud-session tokens are committed only when their chunk arrives
    if "session" in ev:
        chunks = ev[(ev.event == "downlink") & ev.session.notna()]
        commits = ev[(ev.event == "commit") & ev.session.notna()]
        assert len(commits) == len(chunks)
        assert (commits.time_s.to_numpy() >= chunks.time_s.to_numpy() - 1e-12).all()


def test_hybrid_decisions_use_only_arrived_information(tmp_path):
    res = _causal_run(tmp_path, "[split,cloud_sd,cloud_ar]", tokens=240)
    ev = res.events
    dec = ev[ev.event == "hyco_decision"]
    arrivals = np.sort(ev[ev.event == "downlink"].time_s.to_numpy())
    assert len(dec) >= 3 and set(dec.option) >= {"split"}
    for _, d in dec.iterrows():
        assert d.info_time_s <= d.time_s + 1e-12
        # every observation comes from a downlink message that had arrived when deciding
        assert d.observations <= np.searchsorted(arrivals, d.time_s + 1e-12, side="right")


# ------------------------------------------------------------------ Speculation at a Distance
def test_split_drafting_beats_colocated_only_when_rtt_is_below_the_drafting_window(tmp_path):
    """Closed form (arXiv 2606.25091): split drafting with the phone drafting the next window
    during the round trip runs at period max(W, RTT + t_v) per window, co-located speculative
    decoding at W + t_v; with equal drafters split wins only when RTT < W (W = k t_d).

    The phone here is given the cloud's own GPU, so the two drafters are identical. With
    fixed k and every draft accepted, split commits k tokens per period (the first pre-draft
    is superseded by the bonus token) and co-located k + 1 per round."""
    k, n = 8, 480
    cfgf = tmp_path / "saad.yaml"
    cfgf.write_text(f"extends: {H200}\n"
                    f"run: {{mode: hybrid, policy: fixed, generated_tokens: {n}, timeline: false, kv_len_quantum_tokens: 4096}}\n"
                    f"policy: {{max_tokens: {k}, fixed: {{k: {k}}}}}\n"
                    f"network: {{enabled: true, uplink_mbps: 1000000.0, downlink_mbps: 1000000.0, message_overhead_bytes: 0,"
                    " radio_promotion_s: 0.0}\n"
                    f"cloud: {{platform_config: {H200}}}\n"
                    "hyco: {draft_topk: 0, request_bytes: 0, verdict_header_bytes: 0, skip_max_entropy_nats: -1,"
                    " predraft: always, cloud_session_tokens: 100000}\n")
    tr = as_trace(synthetic_trace(np.ones(n + 64, dtype=bool)))
    cfg = load_config(cfgf)
    from ahasd_sim.workload.models import get_model
    cc = build_cloud_costs(cfg, get_model(cfg.run.draft_model), get_model(cfg.run.target_model))
    t_d = cc.gpu_draft_token(200).duration_s
    t_v8, t_v9 = cc.gpu_verify(k, 200).duration_s, cc.gpu_verify(k + 1, 200).duration_s
    W = k * t_d
    tpot_co = (W + t_v9) / (k + 1)
    rtt_star = k * tpot_co - t_v8                 # split period / k == tpot_co
    assert 0 < rtt_star < W                       # the paper's condition: only below the drafting window

    def run(options, rtt_s):
        c = load_config(cfgf, [f"hyco.options={options}", f"network.rtt_ms={rtt_s * 1e3}"])
        return run_simulation(c, (tr, tr, None)).summary

    def tpot(options, rtt_s):
        return run(options, rtt_s)["tpot_s"]

    # whole runs: co-located pays the RTT once (request up, last token down) and rounds up to
    # whole rounds; split starts with a full window and one un-pipelined round trip
    def co_run(rtt):
        return (math.ceil(n / (k + 1)) * (W + t_v9) + rtt) / n

    def split_run(rtt):
        return (W + rtt + t_v9 + math.ceil((n - k - 1) / k) * max(W, rtt + t_v8)) / n

    for f in (0.3, 0.8, 1.2, 2.0):
        rtt = f * rtt_star
        co, split = tpot("[cloud_sd]", rtt), tpot("[split]", rtt)
        assert co == pytest.approx(co_run(rtt), rel=0.01)
        assert split == pytest.approx(split_run(rtt), rel=0.01)
        assert (split < co) == (rtt < rtt_star), (f, split, co)
    # ... and the server capacity split drafting frees: GPU time per token falls from
    # (W + t_v) / (k + 1) to t_v / k, i.e. by about 1 + k t_d / t_v
    gpu_co = run("[cloud_sd]", rtt_star)["cloud_gpu_busy_s"]
    gpu_split = run("[split]", rtt_star)["cloud_gpu_busy_s"]
    assert gpu_co == pytest.approx(math.ceil(n / (k + 1)) * (W + t_v9), rel=1e-6)
    assert gpu_split == pytest.approx(t_v9 + math.ceil((n - k - 1) / k) * t_v8, rel=1e-6)
    assert gpu_co / gpu_split == pytest.approx((W + t_v9) / (k + 1) / (t_v8 / k), rel=0.02)


# ------------------------------------------------------------------ statistics helpers
def test_tpot_windows_and_ci():
    log = [(0.1 * i, i) for i in range(1, 101)]       # one token every 100 ms
    w = tpot_windows_s(log, 100, 4)
    assert w == pytest.approx([0.1] * 4)
    m, ci = mean_t_interval([1.0, 2.0, 3.0])
    assert m == 2.0 and ci == pytest.approx(4.302652729749464 / np.sqrt(3), rel=1e-12)


def test_undefined_statistics_are_null_in_a_strict_summary_json(tmp_path):
    """One token makes one TPOT window: its interval is undefined. summary.json must still be
    strict JSON (null, not Python's NaN literal, which jq and JavaScript refuse)."""
    import json

    out = tmp_path / "one"
    assert main(["--config", str(HYCO), "--out", str(out), "--set", "run.mode=hybrid",
                 "--set", "run.generated_tokens=1", "--set", "run.timeline=false"]) == 0

    def refuse(name):
        raise AssertionError(f"summary.json holds the non-JSON literal {name}")
    s = json.loads((out / "summary.json").read_text(), parse_constant=refuse)
    assert s["generated_tokens"] == 1
    assert s["tpot_ci95_s"] is None and s["tpot_s"] > 0


# ------------------------------------------------------------------ real traces (CI has them)
REAL = Path(os.environ.get("AHASD_SIM_NETWORK_TRACES", ROOT.parent / "shared" / "data" / "network"))


@pytest.mark.skipif(not REAL.is_dir(), reason=f"real mahimahi traces not found at {REAL} "
                    "(set AHASD_SIM_NETWORK_TRACES or place ../shared/data/network beside the checkout)")
def test_real_mahimahi_traces_run():
    up, down = REAL / "TMobile-LTE-short.up", REAL / "TMobile-LTE-short.down"
    assert PacketTrace.load(up).mean_rate_mbps == pytest.approx(13.32, rel=0.02)
    assert PacketTrace.load(down).mean_rate_mbps == pytest.approx(16.70, rel=0.02)
    s = _run("hybrid", [f"network.uplink_trace={up}", f"network.downlink_trace={down}"], tokens=64).summary
    assert s["generated_tokens"] == 64 and s["uplink_bytes"] > 0
    drive = _run("device_draft_cloud_verify", [f"network.uplink_trace={REAL / 'ATT-LTE-driving-2016.up'}",
                                               f"network.downlink_trace={REAL / 'ATT-LTE-driving-2016.down'}"],
                 tokens=64).summary
    assert drive["generated_tokens"] == 64


# ------------------------------------------------------------------ shared, batched cloud GPU
def test_continuous_batching_iteration_cost_shares_and_causality():
    """Synthetic forward cost T(n, kv) = 1 ms + 10 us x n + 1 us x kv (kv 0 = the empty cache).
    Forwards A (1 token, kv 100) and B (3 tokens, kv 200) queued at t = 0 run as one iteration:
    T(4, 0) + [T(1, 100) - T(1, 0)] + [T(3, 200) - T(3, 0)] = 1.04 + 0.1 + 0.2 = 1.34 ms, billed
    1/4 and 3/4 by token share. C, queued at 0.5 ms while that iteration runs, must not join it
    (its data was not there when the batch started): it runs alone from 1.34 ms to 1.34 + 1.01 ms."""
    from ahasd_sim.hw.cloud import CloudConfig, CloudServer
    from ahasd_sim.modes.base import TaskCost

    def cost(kind, n, kv):
        t = 1e-3 + 1e-5 * n + 1e-6 * kv
        return TaskCost(t, {"cloud_gpu": 100.0 * t}, {"cloud_gpu": t})

    env = simpy.Environment()
    srv = CloudServer(env, CloudConfig(), cost, np.random.default_rng(0))
    for o in (0, 1, 2):
        srv.attach(o)
    got = {}

    def fwd(owner, n, kv, at):
        yield env.timeout(at)
        got[owner] = yield from srv.run(owner, "verify", n, kv, "v")

    env.process(fwd(0, 1, 100, 0.0))
    env.process(fwd(1, 3, 200, 0.0))
    env.process(fwd(2, 1, 0, 0.5e-3))
    env.run()
    assert got[0] == pytest.approx((0.0, 1.34e-3)) and got[1] == pytest.approx((0.0, 1.34e-3))
    assert got[2] == pytest.approx((1.34e-3, 1.34e-3 + 1.01e-3))
    led = srv.ledgers
    assert led[0].gpu_share_s == pytest.approx(1.34e-3 / 4) and led[1].gpu_share_s == pytest.approx(1.34e-3 * 3 / 4)
    assert led[0].gpu_busy_s == led[1].gpu_busy_s == pytest.approx(1.34e-3)
    assert led[2].batch_wait_s == pytest.approx(1.34e-3 - 0.5e-3)
    assert srv.iterations == 2 and srv.busy_s == pytest.approx(2.35e-3)


def test_capacity_at_an_slo_grows_with_batching_as_predicted():
    """N phones stream cloud AR from one GPU (no RTT, no promotion, a fast link; the KV quantum
    puts every forward at one KV length, so a batch of N is one forward over N tokens). Closed
    loop, deterministic service: with batching every iteration decodes one token of each phone,
    so per-user TPOT = T(N); without batching (max_batch 1) the phones take turns, TPOT = N T(1).
    Capacity at an SLO of 3.5 T(1) over N in {1, 2, 4, 8, 16, 32}: the largest N whose
    predicted TPOT meets it (unbatched: 2, as 4 T(1) > 3.5 T(1)); measured must match."""
    base = ["run.mode=cloud_autoregressive", "run.generated_tokens=48", "run.timeline=false",
            "run.kv_len_quantum_tokens=8192", "network.rtt_ms=0", "network.radio_promotion_s=0",
            "network.uplink_mbps=100000", "network.downlink_mbps=100000"]
    cfg = load_config(HYCO, base)
    from ahasd_sim.workload.models import get_model
    cc = build_cloud_costs(cfg, get_model(cfg.run.draft_model), get_model(cfg.run.target_model))
    T = lambda n: cc.gpu_verify(n, 0).duration_s            # noqa: E731
    grid = (1, 2, 4, 8, 16, 32)
    slo = 3.5 * T(1)
    measured = {}
    for batch in (1, 256):
        tp = {}
        for N in grid:
            s = run_simulation(load_config(HYCO, [*base, f"cloud.phones_per_gpu={N}",
                                                  f"cloud.max_batch={batch}"])).summary
            f = s["cloud_fleet"]
            tp[N] = f["user_tpot_p50_ms"] * 1e-3
            want = T(N) if batch > 1 else N * T(1)
            assert tp[N] == pytest.approx(want, rel=0.03), (batch, N, tp[N], want)
            if batch > 1:
                assert f["mean_batch_forwards"] == pytest.approx(N, rel=0.05)
        measured[batch] = max(N for N in grid if tp[N] <= slo)
    predicted = {1: max(N for N in grid if N * T(1) <= slo), 256: max(N for N in grid if T(N) <= slo)}
    assert measured == predicted
    assert predicted[1] == 2 and predicted[256] > predicted[1]


def test_tpot_target_traces_a_monotone_cost_latency_curve():
    """hyco.tpot_slo_ms targets the run's mean TPOT: a looser target buys slower, cheaper split
    rounds, so TPOT never falls and cloud cost never rises as the target grows (same seed and
    trace); between the fastest and the cheapest option the mean lands near the target."""
    pts = []
    for slo in (5, 8, 12, 20, 40):
        s = _run("hybrid", [f"hyco.tpot_slo_ms={slo}", "network.jitter_ms=5"], tokens=512).summary
        pts.append((slo, s["tpot_s"] * 1e3, s["cloud_cost_usd_per_1k_tokens"]))
    for (_, t1, c1), (_, t2, c2) in zip(pts, pts[1:]):
        assert t2 >= t1 - 1e-9 and c2 <= c1 + 1e-12, pts
    assert pts[-1][1] > 1.5 * pts[0][1] and pts[-1][2] < 0.7 * pts[0][2], pts
    assert pts[1][1] == pytest.approx(8, rel=0.25), pts      # 8 ms lies between cloud AR and split alone


def test_a_sequence_released_by_an_iteration_joins_the_next_one():
    """Continuous batching: phone D decodes two steps back to back; E's forward arrives at 0.5 ms,
    during D's first iteration (T(1, 0) = 1.01 ms with the cost of the test above). The next
    iteration must hold both D's second step and E: T(2, 0) = 1.02 ms, ending at 2.03 ms (a
    scheduler that started E alone before D re-queued would end D's step at 3.04 ms)."""
    from ahasd_sim.hw.cloud import CloudConfig, CloudServer
    from ahasd_sim.modes.base import TaskCost

    def cost(kind, n, kv):
        t = 1e-3 + 1e-5 * n + 1e-6 * kv
        return TaskCost(t, {}, {"cloud_gpu": t})

    env = simpy.Environment()
    srv = CloudServer(env, CloudConfig(), cost, np.random.default_rng(0))
    srv.attach(0)
    srv.attach(1)
    ends = {}

    def d():
        yield from srv.run(0, "verify", 1, 0, "v")
        ends["d2"] = (yield from srv.run(0, "verify", 1, 0, "v", new_call=False))[1]

    def e():
        yield env.timeout(0.5e-3)
        ends["e"] = (yield from srv.run(1, "verify", 1, 0, "v"))[1]

    env.process(d())
    env.process(e())
    env.run()
    assert ends == pytest.approx({"d2": 2.03e-3, "e": 2.03e-3})
    assert srv.iterations == 2


def test_messages_wake_the_receiver_in_order_when_arrivals_coincide():
    """Messages that arrive at one instant (one trace opportunity carries several) must wake
    their receivers in the order sent, although each timeout's end, now + (arrive - now), rounds
    differently in floating point: sent at 0.30896819907559114 s and 0.3955564210524287 s, both
    released by the bottleneck at 1.9409341876619017 s, the second timeout ends one ulp earlier."""
    env = simpy.Environment()
    s = NetworkLink(NetworkConfig(enabled=True, rtt_ms=0.0, radio_promotion_s=0.0)).open(env, np.random.default_rng(0))
    order = []
    release = 1.9409341876619017

    def msg(i, at):
        yield env.timeout(at)
        s.dirs["down"].free_at_s = release          # the bottleneck releases both at one time
        yield from s.send(0, "down")
        order.append(i)

    for i, at in enumerate((0.30896819907559114, 0.3955564210524287)):
        env.process(msg(i, at))
    env.run()
    arr = [r.arrive_s for r in s.deliveries]
    assert arr[0] == arr[1]
    assert order == [0, 1]
