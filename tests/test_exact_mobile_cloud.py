"""Hand-derived exact values for the mobile-cloud modules (issue 33): the cellular link
(hw/network.py), the cloud server (hw/cloud.py) and the HyCo-family machinery
(modes/mobile_cloud/engine.py). Each test builds a case small enough to compute by hand in its
docstring and asserts the numbers with rel=1e-12 (or exact equality)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import simpy

from ahasd_sim.hw.cloud import CloudConfig, CloudServer
from ahasd_sim.hw.network import (MAHIMAHI_PACKET_BYTES, NetworkConfig, NetworkLink, PacketTrace, RttTrace,
                                  TraceFormatError, _Direction, _resolve)
from ahasd_sim.modes.base import TaskCost
from ahasd_sim.metrics.stats import mean_t_interval
from ahasd_sim.modes.mobile_cloud.engine import tpot_windows_s


def ex(x):
    return pytest.approx(x, rel=1e-12, abs=0)


def _cfg(**kw):
    kw = {"radio_promotion_s": 0.0, "trace_offset_s": 0.0, "message_overhead_bytes": 0, **kw}
    return NetworkConfig(enabled=True, **kw)


def _session(tmp_path=None, seed=0, **kw):
    env = simpy.Environment()
    return env, NetworkLink(_cfg(**kw), tmp_path).open(env, np.random.default_rng(seed))


def _trace_file(tmp_path, name, lines):
    p = tmp_path / name
    p.write_text("".join(f"{x}\n" for x in lines))
    return p


# ------------------------------------------------------------------ packet traces
def test_packet_trace_indexing_over_loops():
    """Opportunities at 0, 5, 5, 12 ms: period 12 ms, 4 per loop. The g-th looped one is
    ts[g % 4] + (g // 4) * 12: g = 5 -> 5 + 12 = 17, g = 11 -> 12 + 24 = 36.
    first_at_or_after: 5 -> index 1 (the first of the two 5-ms ones); 5.5 -> 3 (12 ms);
    12.5 -> 5 (the loop's 12 + 5 = 17: the 0-ms one of loop 1 is 12 ms, < 12.5); 12 -> 3 (the
    12-ms one of loop 0, ties take the earliest); 40 -> loop 3 starts at 36: 36 + 5 = 41, g = 13.
    Mean rate: 4 x 1500 B x 8 / 12 ms = 4 Mbit/s."""
    tr = PacketTrace([0, 5, 5, 12], "t")
    assert len(tr) == 4 and tr.period_ms == 12 and tr.name == "t"
    assert [tr.time_ms(g) for g in (0, 1, 3, 4, 5, 11)] == [0, 5, 12, 12, 17, 36]
    assert [tr.first_at_or_after(t) for t in (0, 5, 5.5, 12, 12.5, 40, 36)] == [0, 1, 3, 3, 5, 13, 11]
    assert tr.first_at_or_after(1e6) == 333333       # 1e6 = 83333 loops x 12 + 4 ms -> the 5-ms one, g = 83333 x 4 + 1
    assert tr.time_ms(333333) == 83333 * 12 + 5
    assert tr.mean_rate_mbps == ex(4 * 1500 * 8 / 0.012 / 1e6)
    assert MAHIMAHI_PACKET_BYTES == 1500


@pytest.mark.parametrize("stamps, msg", [
    ([], "t: no delivery opportunities"),
    ([3, 7, 6, 9], "t: timestamps must not decrease (line 3: 6 after 7)"),
    ([3, 3, 2], "t: timestamps must not decrease (line 3: 2 after 3)"),     # an equal pair before is fine
    ([0], "t: the last timestamp (the loop period) must be > 0 ms"),
    ([-2, 4], "t: negative timestamp -2"),
    ([0, 0], "t: the last timestamp (the loop period) must be > 0 ms"),
])
def test_packet_trace_rejects(stamps, msg):
    with pytest.raises(TraceFormatError) as e:
        PacketTrace(stamps, "t")
    assert str(e.value) == msg


@pytest.mark.parametrize("raw, tail", [
    (b"PK\x03\x04xx", ": a zip/.npz archive, expected a text file of millisecond timestamps"),
    (b"\xff\xfe1\x00", ": UTF-16 text, expected ASCII/UTF-8 (one integer per line)"),
    (b"\xfe\xff\x001", ": UTF-16 text, expected ASCII/UTF-8 (one integer per line)"),
    (b"12\n\x80\n", ": byte 0x80 at offset 3 is not text (a binary file?); expected one integer millisecond "
                    "timestamp per line"),
    (b"1\x002\n", ": NUL bytes (a binary file?)"),
    (b"5\n\n  x7\n", " line 3: expected an integer millisecond timestamp, got 'x7'"),
    (b"y" * 50 + b"\n", " line 1: expected an integer millisecond timestamp, got '" + "y" * 40 + "'"),
    (b"9" * 30 + b"\n", " line 1: timestamp " + "9" * 24 + " ms is outside 0..2592000000 (about 30 days; a "
                        "mahimahi trace covers seconds to hours)"),
    (b"5\n2592000001\n", " line 2: timestamp 2592000001 ms is outside 0..2592000000 (about 30 days; a mahimahi "
                         "trace covers seconds to hours)"),
    (b"-1\n", " line 1: timestamp -1 ms is outside 0..2592000000 (about 30 days; a mahimahi trace covers "
              "seconds to hours)"),
])
def test_packet_trace_load_rejects_with_one_line(tmp_path, raw, tail):
    p = tmp_path / "bad.up"
    p.write_bytes(raw)
    with pytest.raises(TraceFormatError) as e:
        PacketTrace.load(p)
    assert str(e.value) == f"mahimahi trace '{p}'{tail}"


def test_packet_trace_small_valid_and_default_name():
    """One opportunity at 5 ms is a valid trace of period 5 ms; so is [0, 1] (period 1 ms).
    Timestamps are integers (a float input is truncated like int64). Default name 'trace'."""
    one = PacketTrace([5])
    assert one.period_ms == 5 and [one.time_ms(g) for g in range(3)] == [5, 10, 15]
    assert PacketTrace([0, 1]).period_ms == 1
    assert PacketTrace([0, 5.7, 12]).time_ms(1) == 5
    with pytest.raises(TraceFormatError) as e:
        PacketTrace([])
    assert str(e.value) == "trace: no delivery opportunities"
    with pytest.raises(TraceFormatError) as e:
        RttTrace([0.0], [0.1])
    assert str(e.value) == "rtt trace: needs at least two 'time_s rtt_ms' lines (the last time is the period)"
    assert RttTrace([0.0, 1.0], [0.0, 0.0]).at(0.5) == 0.0       # RTT 0 is allowed


def test_packet_trace_load_reads_blank_lines_and_limits(tmp_path):
    """Blank and padded lines are skipped; 0 and the 30-day bound 2592000000 ms are accepted."""
    p = tmp_path / "ok.up"
    p.write_bytes(b" 0 \n\n2592000000\n")
    tr = PacketTrace.load(p)
    assert tr.ts_ms.tolist() == [0, 2592000000] and tr.name == str(p)
    missing = tmp_path / "none.up"
    with pytest.raises(TraceFormatError) as e:
        PacketTrace.load(missing)
    assert str(e.value) == f"cannot read mahimahi trace '{missing}': No such file or directory"


def test_packet_trace_load_size_bound(tmp_path, monkeypatch):
    """A file larger than the bound (patched to 8 bytes here) is refused before parsing."""
    import ahasd_sim.hw.network as network
    monkeypatch.setattr(network, "_MAX_TRACE_BYTES", 8)
    p = tmp_path / "big.up"
    p.write_bytes(b"1\n2\n3\n4\n5\n")              # 10 bytes
    with pytest.raises(TraceFormatError) as e:
        PacketTrace.load(p)
    assert str(e.value) == f"mahimahi trace '{p}': larger than 8 bytes (not a mahimahi trace?)"
    p.write_bytes(b"1\n2\n3\n4\n")                 # exactly 8 bytes: read
    assert len(PacketTrace.load(p)) == 4


# ------------------------------------------------------------------ RTT traces
def test_rtt_trace_steps_loop_and_time_average(tmp_path):
    """Steps 0 s: 40 ms, 1 s: 100 ms, 1.5 s: 300 ms, period 3 s (the last line's value unused).
    at(): 0.99 -> 40 ms; 1.0 -> 100 ms (a step starts at its time); 1.7 -> 300 ms; 4.2 = 1.2
    after one loop -> 100 ms. Time average: (1 x 40 + 0.5 x 100 + 1.5 x 300) / 3 = 180 ms.
    Comments, blank lines and commas are accepted."""
    p = _trace_file(tmp_path, "r.rtt", ["# t rtt", "", "0, 40", "1 100", "1.5 300", "3 999"])
    tr = RttTrace.load(p)
    assert tr.period_s == 3.0 and tr.name == f"rtt trace '{p}'"
    assert [tr.at(t) for t in (0.0, 0.99, 1.0, 1.7, 4.2)] == [0.04, 0.04, 0.1, 0.3, 0.1]
    link = NetworkLink(_cfg(rtt_trace=str(p)))
    assert link.rtt_s == ex(0.180)
    assert link.rtt_at(1.2) == 0.1
    assert NetworkLink(_cfg(rtt_ms=30.0)).rtt_at(1.2) == ex(0.030)


@pytest.mark.parametrize("lines, tail", [
    (["0 40"], ": needs at least two 'time_s rtt_ms' lines (the last time is the period)"),
    (["0 40", "0 50"], ": times must start at >= 0 s and increase"),
    (["-1 40", "2 50"], ": times must start at >= 0 s and increase"),
    (["0 40", "2 -5"], ": RTTs must be >= 0 ms"),
    (["0 40", "2"], " line 2: expected 'time_s rtt_ms', got '2'"),
    (["0 x"], " line 1: expected 'time_s rtt_ms', got '0 x'"),
    (["0 " + "z" * 50], " line 1: expected 'time_s rtt_ms', got '0 " + "z" * 38 + "'"),
])
def test_rtt_trace_rejects(tmp_path, lines, tail):
    p = _trace_file(tmp_path, "r.rtt", lines)
    with pytest.raises(TraceFormatError) as e:
        RttTrace.load(p)
    assert str(e.value) == f"rtt trace '{p}'{tail}"


def test_rtt_trace_unreadable_and_config_key(tmp_path):
    p = tmp_path / "none.rtt"
    with pytest.raises(TraceFormatError) as e:
        RttTrace.load(p)
    assert str(e.value) == f"cannot read rtt trace '{p}': No such file or directory"
    binary = tmp_path / "bin.rtt"
    binary.write_bytes(b"\x80\x81\n")
    with pytest.raises(TraceFormatError) as e:
        RttTrace.load(binary)
    assert str(e.value) == (f"cannot read rtt trace '{binary}': 'utf-8' codec can't decode byte 0x80 in "
                            "position 0: invalid start byte")
    with pytest.raises(TraceFormatError) as e:
        NetworkLink(_cfg(rtt_trace=str(p)))
    assert e.value.key == "network.rtt_trace"
    for key in ("uplink_trace", "downlink_trace"):
        with pytest.raises(TraceFormatError) as e:
            NetworkLink(_cfg(**{key: str(p)}))
        assert e.value.key == f"network.{key}"


# ------------------------------------------------------------------ link estimates
def test_link_rates_transfer_time_and_cost(tmp_path):
    """Constant: up 8 Mbit/s = 1e6 B/s, down 20 Mbit/s = 2.5e6 B/s, RTT 40 ms. 5000 B up:
    0.020 + 5000 / 1e6 = 0.025 s; energy 5000 x 8 x 438.39 nJ + 1.288 W x 5 ms.
    10000 B down: 0.020 + 0.004 s; 10000 x 8 x 51.97 nJ + 1.288 W x 4 ms.
    A downlink trace of 4 opportunities in 12 ms has mean 4 x 1500 B / 12 ms = 500000 B/s: its rate replaces downlink_mbps, the uplink keeps 8 Mbit/s."""
    link = NetworkLink(_cfg(uplink_mbps=8.0, downlink_mbps=20.0, rtt_ms=40.0))
    assert link.rate_bytes_s("up") == ex(1e6) and link.rate_bytes_s("down") == ex(2.5e6)
    assert link.rtt_s == ex(0.040) and link.static_power_w == 0.0 and link.device == "network"
    assert link.transfer_time_s(5000, "up") == ex(0.025)
    assert link.transfer_time_s(10000, "down") == ex(0.024)
    c = link.transfer_cost(5000, "up")
    assert c.duration_s == ex(0.025)
    assert dict(c.energy_j_by_device) == {"network": ex(5000 * 8 * 438.39e-9 + 1.288 * 0.005)}
    c = link.transfer_cost(10000, "down")
    assert c.duration_s == ex(0.024)
    assert dict(c.energy_j_by_device) == {"network": ex(10000 * 8 * 51.97e-9 + 1.288 * 0.004)}
    with pytest.raises(ValueError, match=r"^direction must be 'up' or 'down', got 'side'$"):
        link.rate_bytes_s("side")
    p = _trace_file(tmp_path, "d.down", [0, 5, 5, 12])
    tl = NetworkLink(_cfg(uplink_mbps=8.0, downlink_trace=str(p)))
    assert tl.rate_bytes_s("down") == ex(500000.0) and tl.rate_bytes_s("up") == ex(1e6)
    assert tl.traces["up"] is None and len(tl.traces["down"]) == 4


def test_trace_paths_resolve_against_the_config_folder(tmp_path, monkeypatch):
    """A relative trace path is tried in the current directory, then in base_dir."""
    sub = tmp_path / "cfgdir"
    sub.mkdir()
    _trace_file(sub, "u.up", [0, 10])
    monkeypatch.chdir(tmp_path)
    assert _resolve("u.up", sub) == sub / "u.up"
    assert _resolve("u.up", None).as_posix() == "u.up"
    assert _resolve("nope.up", sub).as_posix() == "nope.up"      # neither: the path as given
    _trace_file(tmp_path, "u.up", [0, 20])                       # now the current directory has one
    assert _resolve("u.up", sub).as_posix() == "u.up"
    assert _resolve(str(sub / "u.up"), tmp_path) == sub / "u.up"
    link = NetworkLink(_cfg(uplink_trace="u.up"), sub)
    assert link.traces["up"].period_ms == 20
    _trace_file(sub, "only.down", [0, 30])                      # only beside the config
    _trace_file(sub, "only.rtt", ["0 10", "2 10"])
    link = NetworkLink(_cfg(downlink_trace="only.down", rtt_trace="only.rtt"), sub)
    assert link.traces["down"].period_ms == 30 and link.rtt_trace.period_s == 2.0


# ------------------------------------------------------------------ bottleneck
def test_constant_rate_queue_is_fifo():
    """1e6 B/s: 1000 B at t = 0 leaves at 1 ms; 3000 B enqueued at 0.5 ms starts at 1 ms and
    leaves at 4 ms; 2000 B at 10 ms finds the queue empty: 10 .. 12 ms."""
    d = _Direction(1e6, None)
    assert d.depart(0.0, 1000) == (0.0, ex(0.001))
    assert d.depart(0.0005, 3000) == (ex(0.001), ex(0.004))
    assert d.depart(0.010, 2000) == (0.010, ex(0.012))


def test_trace_queue_shares_and_skips_opportunities():
    """Opportunities at 2, 4, 6, 8, 10 ms (period 10, 5 per loop), offset 1 ms (sim t reads the
    trace at t + 1 ms).
    * 1600 B at t = 0 (trace 1 ms): starts at the 2-ms one (sim 1 ms), needs 100 B more: one
      further -> the 4-ms one (sim 3 ms), 1400 B left in it.
    * 1400 B at t = 0: fits the rest of the 4-ms one exactly: start = depart = sim 3 ms.
    * 1 B at t = 0: the 4-ms one is full -> the next, 6 ms (sim 5 ms); 1499 B left.
    * 10 B at sim 6 ms (trace 7 ms): the 6-ms one is past -> 8 ms (sim 7 ms).
    * 4501 B at sim 7 ms (trace 8): the 8-ms one still has 1490 B -> start sim 7 ms; 3011 B more
      need ceil(3011 / 1500) = 3 more: 10, 12, 14 ms -> depart sim 13 ms, 4500 - 3011 = 1489 left."""
    d = _Direction(0.0, PacketTrace([2, 4, 6, 8, 10]), offset_s=0.001)
    assert d.depart(0.0, 1600) == (ex(0.001), ex(0.003)) and d.left_in_last == 1400
    assert d.depart(0.0, 1400) == (ex(0.003), ex(0.003)) and d.left_in_last == 0
    assert d.depart(0.0, 1) == (ex(0.005), ex(0.005)) and d.left_in_last == 1499
    assert d.depart(0.006, 10) == (ex(0.007), ex(0.007)) and d.left_in_last == 1490
    assert d.depart(0.007, 4501) == (ex(0.007), ex(0.013)) and d.left_in_last == 1489 and d.g_last == 6


def test_trace_queue_remainders_of_one_byte_and_of_the_first_opportunity():
    """Opportunities at 1, 2, 3 ms. 100 B and 100 B at 0 share the first (index 0) one;
    1299 B more leave 1 B in it, which a 1-B message still uses; 1501 B need the 2-ms one
    and one byte of the 3-ms one."""
    d = _Direction(0.0, PacketTrace([1, 2, 3]))
    assert d.depart(0.0, 100) == (ex(0.001), ex(0.001)) and d.g_last == 0
    assert d.depart(0.0, 100) == (ex(0.001), ex(0.001)) and d.left_in_last == 1300
    assert d.depart(0.0, 1299) == (ex(0.001), ex(0.001)) and d.left_in_last == 1
    assert d.depart(0.0, 1) == (ex(0.001), ex(0.001)) and d.left_in_last == 0
    assert d.depart(0.0, 1501) == (ex(0.002), ex(0.003)) and d.left_in_last == 1499


def test_trace_queue_message_of_exact_multiple_and_zero_bytes():
    """Opportunities at 1, 2, 3 ms (period 3): 3000 B at 0 take the 1- and 2-ms ones exactly
    (0 left); 0 B then takes the 3-ms one (a message still needs an opportunity to leave)."""
    d = _Direction(0.0, PacketTrace([1, 2, 3]))
    assert d.depart(0.0, 3000) == (ex(0.001), ex(0.002)) and d.left_in_last == 0 and d.g_last == 1
    assert d.depart(0.0, 0) == (ex(0.003), ex(0.003)) and d.left_in_last == 1500


# ------------------------------------------------------------------ session
def test_session_offset_draws(tmp_path):
    """trace_offset_s < 0: offset = uniform(0, uplink period); without an uplink trace the
    downlink's; with neither 0. The draw is the session generator's first uniform."""
    up = _trace_file(tmp_path, "a.up", [0, 20])
    down = _trace_file(tmp_path, "a.down", [0, 50])
    want = float(np.random.default_rng(7).uniform(0.0, 0.020))
    _, s = _session(tmp_path, seed=7, uplink_trace=str(up), downlink_trace=str(down), trace_offset_s=-1.0)
    assert s.offset_s == want
    assert s.dirs["up"].offset_ms == want * 1e3 and s.dirs["down"].offset_ms == want * 1e3
    _, s = _session(tmp_path, seed=7, downlink_trace=str(down), trace_offset_s=-1.0)
    assert s.offset_s == float(np.random.default_rng(7).uniform(0.0, 0.050))
    _, s = _session(seed=7, trace_offset_s=-1.0)
    assert s.offset_s == 0.0
    _, s = _session(seed=7, trace_offset_s=0.25)
    assert s.offset_s == 0.25


def test_session_schedule_overhead_promotion_and_energy():
    """Up 8 Mbit/s (1e6 B/s), down 16 Mbit/s (2e6 B/s), RTT 40 ms, overhead 100 B, promotion
    0.2 s, tail 1 s; powers tx 400 nJ/bit, rx 50 nJ/bit, active 2 W, tail 1 W, promotion 3 W.
    * t = 0, up 900 B payload = 1000 B: radio idle -> promotion [0, 0.2]; leaves 0.2 + 1 ms =
      0.201, arrives 0.221. Radio busy [0.2, 0.201].
    * t = 0.5, down 1900 B = 2000 B: the phone needs the radio at 0.5 + 0.02 = 0.52, within
      0.201 + 1 s of tail: no promotion. Serialised 0.5 .. 0.501, arrives 0.521; the phone's
      radio is busy for the serialisation time before arrival: [0.520, 0.521].
    * t = 3, down 0 B payload = 100 B: needed at 3.02 > 0.521 + 1 -> promotion [3.02, 3.22];
      the bottleneck starts at 3 + 0.2 = 3.2, leaves 3.20005, arrives 3.22005; busy
      [3.22, 3.22005].
    Energy to end 10 s: tx 1000 x 8 x 400e-9 = 3.2e-3 J; rx 2100 x 8 x 50e-9 = 8.4e-4 J.
    Merged activity [0, 0.201], [0.52, 0.521], [3.02, 3.22005]: promotions 0.4 s (x 3 W);
    active = (0.201 + 0.001 + 0.20005) - 0.4 = 0.00205 s (x 2 W); tail: gap 0.319, then
    min(2.499, 1) = 1, then a whole 1 s after the last: 2.319 s (x 1 W)."""
    env, s = _session(uplink_mbps=8.0, downlink_mbps=16.0, rtt_ms=40.0, message_overhead_bytes=100,
                      radio_promotion_s=0.2, radio_tail_s=1.0, radio_tx_nj_per_bit=400.0,
                      radio_rx_nj_per_bit=50.0, radio_active_power_w=2.0, radio_tail_power_w=1.0,
                      radio_promotion_power_w=3.0)
    assert s.message_bytes(900) == 1000
    r = s.schedule(900, "up")
    assert (r.direction, r.nbytes, r.sent_s) == ("up", 1000, 0.0)
    assert (r.service_start_s, r.depart_s, r.arrive_s) == (ex(0.2), ex(0.201), ex(0.221))
    env.run(until=0.5)
    r = s.schedule(1900, "down")
    assert (r.service_start_s, r.depart_s, r.arrive_s) == (0.5, ex(0.501), ex(0.521))
    assert s.promotions == 1
    env.run(until=3.0)
    r = s.schedule(0, "down")
    assert (r.service_start_s, r.depart_s, r.arrive_s) == (ex(3.2), ex(3.20005), ex(3.22005))
    assert s.promotions == 2
    assert s._promotions == [(0.0, ex(0.2)), (ex(3.02), ex(3.22))]
    assert s.bytes == {"up": 1000, "down": 2100} and s.messages == {"up": 1, "down": 2}
    e = s.radio_energy_j(10.0)
    assert e == {"radio_tx": ex(3.2e-3), "radio_rx": ex(8.4e-4), "radio_active": ex(2 * 0.00205),
                 "radio_promotion": ex(3 * 0.4), "radio_tail": ex(2.319)}
    assert s.in_flight_s(10.0) == ex(0.221 + 0.021 + 0.22005)
    assert s.in_flight_s(3.1) == ex(0.221 + 0.021 + 0.1)       # cut at the end
    assert s.in_flight_s(0.5) == ex(0.221)                     # the message sent at 0.5 is not counted


def test_in_flight_is_the_union_of_message_intervals():
    """Messages [sent, arrive]: [0, 1], [0.5, 2] (overlaps), [2, 3] (touches), [2.5, 2.8]
    (inside), [4, 6]. Union up to 5 s: [0, 3] + [4, 5] = 4 s; up to 2.6 s: 2.6 s."""
    from ahasd_sim.hw.network import Delivery
    _env, s = _session()
    s.deliveries = [Delivery("up", 1, a, a, a, b) for a, b in ((0.5, 2.0), (0.0, 1.0), (2.0, 3.0), (2.5, 2.8),
                                                                (4.0, 6.0))]
    assert s.in_flight_s(5.0) == ex(4.0)
    assert s.in_flight_s(2.6) == ex(2.6)
    assert s.in_flight_s(0.0) == 0.0


def test_zero_length_radio_activity_still_starts_a_tail(tmp_path):
    """A downlink trace message that starts and leaves in one opportunity keeps the phone's
    radio busy for 0 s (at its arrival), but it is activity: a whole tail (1 s x 1 W) follows."""
    down = _trace_file(tmp_path, "z.down", [10, 20])
    _env, s = _session(tmp_path, downlink_trace=str(down), rtt_ms=0.0, radio_tail_s=1.0, radio_tail_power_w=1.0)
    r = s.schedule(100, "down")
    assert r.service_start_s == r.depart_s == r.arrive_s == ex(0.010)
    e = s.radio_energy_j(5.0)
    assert e["radio_active"] == 0.0 and e["radio_tail"] == ex(1.0)


def test_radio_energy_cut_at_the_run_end():
    """Same link as above, one uplink message at 0 (promotion [0, 0.2], busy [0.2, 0.201]),
    energy to 0.1 s: the promotion counts 0.1 s, nothing active (0.1 - 0.1 = 0), and a whole
    tail (1 s) after the cut activity."""
    _env, s = _session(uplink_mbps=8.0, message_overhead_bytes=100, radio_promotion_s=0.2, radio_tail_s=1.0,
                       radio_active_power_w=2.0, radio_tail_power_w=1.0, radio_promotion_power_w=3.0)
    s.schedule(900, "up")
    e = s.radio_energy_j(0.1)
    assert e["radio_promotion"] == ex(0.3) and e["radio_active"] == 0.0 and e["radio_tail"] == ex(1.0)
    assert s.radio_energy_j(0.0)["radio_promotion"] == 0.0
    _env.run(until=3.0)
    s.schedule(900, "up")               # 3 s > 0.201 + 1 s of tail: a second promotion [3, 3.2]
    assert s.promotions == 2
    e = s.radio_energy_j(1.0)           # it starts after the end: not counted
    assert e["radio_promotion"] == ex(0.6) and e["radio_active"] == ex(2 * 0.001)


def test_session_jitter_is_the_generators_exponential_and_never_reorders():
    """jitter 10 ms: the arrival is depart + RTT/2 + X, X the session generator's exponential
    draw of mean 0.010 (the generator is used for nothing else with trace_offset_s >= 0).
    A second message cannot arrive before the first (max with the last arrival)."""
    rng = np.random.default_rng(5)
    x1, x2 = rng.exponential(0.010), rng.exponential(0.010)
    env, s = _session(seed=5, uplink_mbps=8.0, rtt_ms=20.0, jitter_ms=10.0)
    a1 = s.schedule(1000, "up").arrive_s
    a2 = s.schedule(0, "up").arrive_s
    assert a1 == ex(0.001 + 0.010 + x1)
    assert a2 == ex(max(0.001 + 0.010 + x2, a1))


def test_sub_millisecond_jitter_is_drawn():
    rng = np.random.default_rng(2)
    x = rng.exponential(0.0005)
    _env, s = _session(seed=2, uplink_mbps=8.0, rtt_ms=20.0, jitter_ms=0.5)
    assert s.schedule(1000, "up").arrive_s == ex(0.011 + x)


def test_radio_tail_timer_boundaries():
    """Promotion 0.25 s, tail 1 s, 1e6 B/s up. Message 1 at 0: promotion [0, 0.25], on air
    0.25 .. 0.5. At exactly 0.5 + 1 = 1.5 s the radio is still connected (idle only after the
    timer): no promotion; that message is on air 1.5 .. 1.75. At 3.0 s > 1.75 + 1: promoted.
    Second case: a first message ending at 0.251 s and one at 1.3 s > 0.251 + 1: promoted."""
    env, s = _session(uplink_mbps=8.0, radio_promotion_s=0.25, radio_tail_s=1.0)
    s.schedule(250000, "up")
    env.run(until=1.5)
    r = s.schedule(250000, "up")
    assert s.promotions == 1 and (r.service_start_s, r.depart_s) == (1.5, 1.75)
    env.run(until=3.0)
    s.schedule(1, "up")
    assert s.promotions == 2
    env, s = _session(uplink_mbps=8.0, radio_promotion_s=0.25, radio_tail_s=1.0)
    s.schedule(1000, "up")
    env.run(until=1.3)
    s.schedule(1, "up")
    assert s.promotions == 2


def test_send_wakes_the_caller_at_arrival_and_rejects_bad_directions():
    env, s = _session(uplink_mbps=8.0, rtt_ms=20.0)
    got = []

    def go():
        rec = yield from s.send(1000, "up")
        got.append((rec.arrive_s, env.now))

    env.process(go())
    env.run()
    assert got == [(ex(0.011), ex(0.011))]
    with pytest.raises(ValueError, match=r"^direction must be 'up' or 'down', got 'x'$"):
        s.schedule(1, "x")


# ------------------------------------------------------------------ cloud server
def _lin_cost(kind, n, kv):
    """T(n, kv) = 1 ms + 10 us n + 1 us kv (+ 2 ms for drafts); energy 100 W x T."""
    t = 1e-3 + 1e-5 * n + 1e-6 * kv + (2e-3 if kind == "draft" else 0.0)
    return TaskCost(t, {"cloud_gpu": 100.0 * t, "other": 1.0}, {"cloud_gpu": t})


def test_batch_cost_single_and_batched():
    """One forward: its own cost (T(3, 50) = 1.08 ms; energy 0.108 + 1 J: every device's).
    Batch [(2, 100), (3, 0)]: T(5, 0) + [T(2, 100) - T(2, 0)] + 0 = 1.05 + 0.1 = 1.15 ms;
    energy (105 mJ + 1) + 10 mJ (the KV part; the 'other' 1 J cancels in the difference)."""
    srv = CloudServer(simpy.Environment(), CloudConfig(), _lin_cost, np.random.default_rng(0))
    t, e = srv.batch_cost("verify", [(3, 50)])
    assert (t, e) == (ex(1.08e-3), ex(0.108 + 1.0))
    t, e = srv.batch_cost("verify", [(2, 100), (3, 0)])
    assert (t, e) == (ex(1.15e-3), ex(0.105 + 1.0 + 0.010))
    # drafts cost their own kind throughout: T_d(2, 0) + [T_d(1, 100) - T_d(1, 0)] = 3.02 + 0.1 ms
    t, e = srv.batch_cost("draft", [(1, 100), (1, 0)])
    assert (t, e) == (ex(3.12e-3), ex(0.302 + 1.0 + 0.010))


def test_batch_cost_never_subtracts_kv_time():
    """A cost that falls with the KV length (not physical) must not shorten the batch:
    max(0, full - empty)."""
    def cost(kind, n, kv):
        return TaskCost(1e-3 + 1e-5 * n - 1e-6 * kv, {"cloud_gpu": 1.0 - 1e-3 * kv}, {})
    srv = CloudServer(simpy.Environment(), CloudConfig(), cost, np.random.default_rng(0))
    assert srv.batch_cost("verify", [(1, 100), (1, 0)]) == (ex(1.02e-3), ex(1.0))


def test_queue_wait_fixed_plus_mm1():
    """queue_delay 5 ms; rho 0.5: with probability rho an Exponential of mean S / (1 - rho)."""
    cfg = CloudConfig(queue_delay_ms=5.0, utilization=0.5)
    srv = CloudServer(simpy.Environment(), cfg, _lin_cost, np.random.default_rng(3))
    ref = np.random.default_rng(3)
    for _ in range(6):
        want = 0.005
        if ref.random() < 0.5:
            want += float(ref.exponential(0.002 / 0.5))
        assert srv.queue_wait_s(0.002) == ex(want)
    srv0 = CloudServer(simpy.Environment(), CloudConfig(queue_delay_ms=5.0), _lin_cost, np.random.default_rng(3))
    assert srv0.queue_wait_s(1.0) == ex(0.005)
    assert srv0.rng.random() == np.random.default_rng(3).random()       # rho 0 draws nothing


def test_request_wait_uses_the_forwards_own_kind():
    """utilization 0.5: the M/M/1 wait of a draft request has mean T_draft(1, 0) / 0.5 =
    3.01 ms / 0.5 (not the verify's 1.01 ms)."""
    env = simpy.Environment()
    srv = CloudServer(env, CloudConfig(utilization=0.5), _lin_cost, np.random.default_rng(11))
    srv.attach(0)
    ref = np.random.default_rng(11)
    want = float(ref.exponential(3.01e-3 / 0.5)) if ref.random() < 0.5 else 0.0
    env.process(srv.run(0, "draft", 1, 0, "d"))
    env.run()
    assert want > 0 and srv.ledgers[0].queue_wait_s == ex(want)


def test_a_request_without_wait_queues_at_once():
    """No queue delay: a new request (wait 0) queued before a continuation at the same instant
    stays ahead of it, so its kind (draft) forms the first iteration: draft [0, 3.01 ms], then
    the verify [3.01, 4.02 ms]."""
    env = simpy.Environment()
    srv = CloudServer(env, CloudConfig(), _lin_cost, np.random.default_rng(0))
    srv.attach(0)
    srv.attach(1)
    got = {}

    def fwd(owner, kind, label, new_call):
        got[label] = yield from srv.run(owner, kind, 1, 0, label, new_call)

    env.process(fwd(0, "draft", "d", True))
    env.process(fwd(1, "verify", "v", False))
    env.run()
    assert got == {"d": (0.0, ex(3.01e-3)), "v": (ex(3.01e-3), ex(4.02e-3))}


def test_cloud_iteration_ledgers_cap_kinds_and_collectors():
    """max_batch 2, queue_delay 1 ms. At t = 0 owner 0 sends verify (2 tok, kv 0) 'a' and
    draft (1, 0) 'b', owner 1 verify (1, 0) 'c' and verify (3, 0) 'd' (new_call=False), in that order.
    All wait 1 ms except d (no request wait), so d is queued first at t = 0:
    iteration 1 at 0: only d is queued (the others wait): T(3, 0) = 1.03 ms -> [0, 1.03e-3].
    At 1 ms a, b, c queue; iteration 2 starts at 1.03 ms with the head's kind (verify): a, c
    (cap 2): T(3, 0) = 1.03 ms -> [1.03, 2.06]; iteration 3: b alone, T_draft(1, 0) = 3.01 ms
    -> [2.06, 5.07].
    Owner 0: share 2/3 x 1.03 + 3.01 ms; busy 1.03 + 3.01; batch waits 0.03 + 1.06 ms;
    calls 2, forwards 2, tokens 3. Owner 1: share 1.03 + 1.03 / 3; busy 2.06; waits 0 + 0.03;
    calls 1, forwards 2, tokens 4. Energies 100 W x shares + the 'other' 1 J per iteration
    by share."""
    cfg = CloudConfig(max_batch=2, queue_delay_ms=1.0)
    env = simpy.Environment()
    srv = CloudServer(env, cfg, _lin_cost, np.random.default_rng(0))

    class Col:
        def __init__(self):
            self.log = []

        def busy(self, dev, a, b, label):
            self.log.append((dev, a, b, label))

    c0, c1 = Col(), Col()
    srv.attach(0, c0)
    srv.attach(1, c1)
    got = {}

    def fwd(owner, kind, n, label, new_call=True):
        got[label] = yield from srv.run(owner, kind, n, 0, label, new_call)

    env.process(fwd(0, "verify", 2, "a"))
    env.process(fwd(0, "draft", 1, "b"))
    env.process(fwd(1, "verify", 1, "c"))
    env.process(fwd(1, "verify", 3, "d", new_call=False))
    env.run()
    T3, Td = 1.03e-3, 3.01e-3
    assert got["d"] == (0.0, ex(T3))
    assert got["a"] == got["c"] == (ex(T3), ex(2 * T3))
    assert got["b"] == (ex(2 * T3), ex(2 * T3 + Td))
    l0, l1 = srv.ledgers[0], srv.ledgers[1]
    assert l0.gpu_share_s == ex(T3 * 2 / 3 + Td) and l1.gpu_share_s == ex(T3 + T3 / 3)
    assert l0.gpu_busy_s == ex(T3 + Td) and l1.gpu_busy_s == ex(2 * T3)
    assert l0.batch_wait_s == ex((T3 - 1e-3) + (2 * T3 - 1e-3)) and l1.batch_wait_s == ex(T3 - 1e-3)
    assert (l0.calls, l0.forwards, l0.tokens_processed) == (2, 2, 3)
    assert (l1.calls, l1.forwards, l1.tokens_processed) == (1, 2, 4)
    assert l0.queue_wait_s == ex(2e-3) and l1.queue_wait_s == ex(1e-3)
    assert l0.energy_j == ex((100 * T3 + 1) * 2 / 3 + 100 * Td + 1)
    assert l1.energy_j == ex(100 * T3 + 1 + (100 * T3 + 1) / 3)
    assert l0.by_task_s == {"a": ex(T3 * 2 / 3), "b": ex(Td)}
    assert l1.by_task_s == {"c": ex(T3 / 3), "d": ex(T3)}
    assert (srv.iterations, srv.batched_forwards, srv.batched_tokens) == (3, 4, 7)
    assert srv.busy_s == ex(2 * T3 + Td)
    assert c0.log == [("cloud_gpu", ex(T3), ex(2 * T3), "a"), ("cloud_gpu", ex(2 * T3), ex(2 * T3 + Td), "b")]
    assert c1.log == [("cloud_gpu", 0.0, ex(T3), "d"), ("cloud_gpu", ex(T3), ex(2 * T3), "c")]


def test_one_owner_two_forwards_in_one_iteration_count_busy_once():
    """Owner 0 queues two verify forwards (1 and 3 tokens, kv 0) at t = 0: one iteration of
    T(4, 0) = 1.04 ms; busy 1.04 ms once (not twice), share the whole 1.04, one collector
    interval labelled with the first forward."""
    env = simpy.Environment()
    srv = CloudServer(env, CloudConfig(), _lin_cost, np.random.default_rng(0))
    log = []
    srv.attach(0, type("C", (), {"busy": lambda self, *a: log.append(a)})())
    for n, lab in ((1, "x"), (3, "y")):
        env.process(srv.run(0, "verify", n, 0, lab))
    env.run()
    led = srv.ledgers[0]
    assert led.gpu_busy_s == ex(1.04e-3) and led.gpu_share_s == ex(1.04e-3)
    assert led.by_task_s == {"x": ex(0.26e-3), "y": ex(0.78e-3)}
    assert log == [("cloud_gpu", 0.0, ex(1.04e-3), "x")]
    assert srv.collectors == {0: srv.collectors[0]} and srv.attach(1) is srv.ledgers[1] and 1 not in srv.collectors


def test_costs_usd_per_pricing():
    """3.6 USD/GPU-h = 0.001 USD/s; 4 phones; 0.2 USD/Mtoken; 0.01 USD/call. Ledger: share
    2 s, 1000 tokens, 3 calls; wall 40 s. shared_busy 2 x 0.001 = 0.002; dedicated_wall
    40 x 0.001 / 4 = 0.01; per_token_api 1000 x 0.2e-6 + 3 x 0.01 = 0.0302."""
    cfg = CloudConfig(usd_per_gpu_hour=3.6, phones_per_gpu=4, usd_per_1m_tokens=0.2, usd_per_call=0.01)
    srv = CloudServer(simpy.Environment(), cfg, _lin_cost, np.random.default_rng(0))
    led = srv.attach(0)
    led.gpu_share_s, led.tokens_processed, led.calls, led.gpu_busy_s = 2.0, 1000, 3, 5.0
    assert srv.costs_usd(0, 40.0) == {"shared_busy": ex(0.002), "dedicated_wall": ex(0.01),
                                      "per_token_api": ex(0.0302)}
    for p, v in (("shared_busy", 0.002), ("dedicated_wall", 0.01), ("per_token_api", 0.0302)):
        srv.cfg = CloudConfig(pricing=p, usd_per_gpu_hour=3.6, phones_per_gpu=4, usd_per_1m_tokens=0.2,
                              usd_per_call=0.01)
        assert srv.cost_usd(0, 40.0) == ex(v)


# ------------------------------------------------------------------ statistics helpers
def test_tpot_interval_is_the_exact_student_t():
    """n = 0: (nan, nan); n = 1: (x, nan), never a zero width; n = 2: t(1) = tan(0.475 pi)
    = 12.7062047361747, s = |a - b| / sqrt 2; n = 4: t(3) = 3.18244630528371; n = 31 and 32:
    t(30) = 2.04227245630124, t(31) = 2.03951344639641 (no normal 1.96 beyond a table)."""
    m, h = mean_t_interval([])
    assert math.isnan(m) and math.isnan(h)
    m, h = mean_t_interval([3.5])
    assert m == 3.5 and math.isnan(h)
    m, h = mean_t_interval([1.0, 3.0])
    assert m == 2.0 and h == ex(math.tan(0.475 * math.pi) * math.sqrt(2.0) / math.sqrt(2))
    x = np.array([1.0, 2.0, 4.0, 8.0])
    assert mean_t_interval(x)[1] == ex(3.1824463052837078 * float(np.std(x, ddof=1)) / 2.0)
    for n, t in ((31, 2.0422724563012378), (32, 2.039513446396408)):
        x = np.arange(float(n))
        m, h = mean_t_interval(x)
        assert m == (n - 1) / 2 and h == ex(t * float(np.std(x, ddof=1)) / math.sqrt(n))


def test_tpot_windows_uneven_commits():
    """Commits: 2 tokens at 1 s, 5 at 2 s, 6 at 4 s, 9 at 5 s; 9 tokens in 3 windows of 3:
    window 1 ends when count >= 3 (2 s): 2 / 3; window 2 at >= 6 (4 s): (4 - 2) / 3;
    window 3 at 9 (5 s): 1 / 3. Windows capped at the token count: 9 tokens, 20 windows ->
    9 windows. A log short of the last window uses its last time."""
    log = [(1.0, 2), (2.0, 5), (4.0, 6), (5.0, 9)]
    assert tpot_windows_s(log, 9, 3) == [ex(2 / 3), ex(2 / 3), ex(1 / 3)]
    w = tpot_windows_s(log, 9, 20)
    assert len(w) == 9
    assert w == [ex(1.0), 0.0, ex(1.0), 0.0, 0.0, ex(2.0), ex(1.0), 0.0, 0.0]
    assert tpot_windows_s(log, 12, 2) == [ex(4 / 6), ex(1 / 6)]
    assert tpot_windows_s(log, 0, 3) == [] and tpot_windows_s([], 5, 3) == []
    assert tpot_windows_s(log, 9, 0) == [ex(5 / 9)]


# ------------------------------------------------------------------ the modes, with fixed costs
from pathlib import Path  # noqa: E402

from modes_helpers import FixedCosts, as_trace, synthetic_trace  # noqa: E402

HYCO = Path(__file__).resolve().parent.parent / "hw_configs" / "hyco_mobile_cloud.yaml"
LINK = ["network.uplink_mbps=8", "network.downlink_mbps=16", "network.rtt_ms=20", "network.radio_promotion_s=0",
        "network.message_overhead_bytes=0", "network.trace_offset_s=0", "network.jitter_ms=0",
        "hyco.draft_topk=0", "hyco.request_bytes=16", "hyco.token_id_bytes=4", "hyco.verdict_header_bytes=4"]


def _mode(mode, accept, n_tokens, overrides=(), dev=None, cloud=None, entropy=0.5, start=True, rollout_len=8,
          replay_seed=0):
    """A mobile-cloud mode on the HYCO platform (link, cloud pricing) with fixed task costs:
    phone draft ``dev.d`` s per token; cloud verify ``cloud.v + cloud.vt x n`` s, cloud draft
    ``cloud.d`` s. Returns (mode, env) after the run (or before it with start=False)."""
    from ahasd_sim.config import load_config
    from ahasd_sim.hw.platform import Platform
    from ahasd_sim.metrics.collector import Collector
    from ahasd_sim.modes import RunContext, get_mode
    from ahasd_sim.modes.replay import TraceReplay
    from ahasd_sim.policies import make_policy

    cfg = load_config(HYCO, [f"run.mode={mode}", f"run.generated_tokens={n_tokens}", "run.policy=fixed",
                             "policy.fixed.k=2", "policy.max_tokens=4", *LINK, *overrides])
    dev = dev or FixedCosts(draft_s=1e-3, verify_s=50e-3)
    cc = cloud or FixedCosts(draft_s=2e-3, verify_s=5e-3, verify_per_token_s=1e-3)
    env = simpy.Environment()
    platform = Platform.build(cfg)
    col = Collector(devices=sorted([*platform.devices(), "cloud_gpu"]))
    rng = np.random.default_rng(0)
    srv = CloudServer(env, cfg.cloud, lambda kind, n, kv: cc.gpu_draft_token(kv) if kind == "draft"
                      else cc.gpu_verify(n, kv), np.random.default_rng(1))
    tr = as_trace(synthetic_trace(accept, entropy, rollout_len))
    ctx = RunContext(cfg=cfg, platform=platform, costs=dev, replay=TraceReplay(tr, n_tokens, replay_seed),
                     policy=make_policy(cfg.run.policy, cfg.policy, rng, None), collector=col, rng=rng,
                     n_tokens=n_tokens, extras={"cloud": (cc, srv)})
    m = get_mode(mode)(env, ctx)
    if start:
        done = m.start()
        env.run(until=simpy.AnyOf(env, [done, env.timeout(100.0)]))
        assert done.triggered
    return m, env


def test_split_rounds_exact_timing():
    """device_draft_cloud_verify, fixed k = 2, every draft accepted, 6 tokens. Up 1e6 B/s,
    down 2e6 B/s, RTT 20 ms; up message 16 + 2 x 4 = 24 B (24 us), verdict 4 + 4 = 8 B (4 us).
    Round 1: drafts 0 .. 2 ms; uplink leaves 2.024, arrives 12.024 ms; verify 3 tokens
    5 + 3 = 8 ms -> 20.024; verdict leaves 20.028, arrives 30.028 ms: 3 committed (2 + bonus).
    Round 2 the same from 30.028: 60.056 ms, 6 committed."""
    m, env = _mode("device_draft_cloud_verify", np.ones(20, bool), 6, ["hyco.skip_max_entropy_nats=-1"])
    assert env.now == ex(60.056e-3)
    assert m.commit_log == [(ex(30.028e-3), 3), (ex(60.056e-3), 6)]
    assert m.round_trips == 2 and m.net.bytes == {"up": 48, "down": 16}
    assert m.net.messages == {"up": 2, "down": 2}
    led = m.cloud.ledgers[0]
    assert led.gpu_busy_s == ex(16e-3) and led.calls == 2 and led.tokens_processed == 6
    assert m.rounds_by_option["split"] == 2 and m.col.counters.verifications == 2
    # summary: 6 TPOT windows of one token (6 < hyco.tpot_windows 8): 30.028, 0, 0, 30.028, 0, 0 ms
    s = m.summary_fields({"generated_tokens": 6, "makespan_s": env.now, "energy_per_token_j": 0.25})
    assert s["tpot_window_s"] == [ex(30.028e-3), 0.0, 0.0, ex(30.028e-3), 0.0, 0.0]
    assert s["tpot_s"] == ex(60.056e-3 / 6)
    per_s = 3.5 / 3600
    assert s["cloud_cost_usd"] == ex(16e-3 * per_s) and s["cloud_pricing"] == "shared_busy"
    assert s["cloud_cost_usd_per_1k_tokens"] == ex(16e-3 * per_s / 6 * 1000)
    assert s["cloud_cost_usd_per_1k_tokens_by_pricing"] == {
        "shared_busy": ex(16e-3 * per_s / 6 * 1000), "dedicated_wall": ex(60.056e-3 * per_s / 6 * 1000),
        "per_token_api": ex(6 * 0.10e-6 / 6 * 1000)}
    assert (s["cloud_gpu_busy_s"], s["cloud_gpu_share_s"]) == (ex(16e-3), ex(16e-3))
    assert (s["cloud_queue_wait_s"], s["cloud_batch_wait_s"], s["cloud_calls"]) == (0.0, 0.0, 2)
    assert s["cloud_tokens_processed"] == 6 and s["cloud_energy_j"] == ex(16e-3)
    assert s["device_energy_per_token_j"] == 0.25
    assert (s["uplink_bytes"], s["downlink_bytes"], s["uplink_messages"], s["downlink_messages"]) == (48, 16, 2, 2)
    assert (s["radio_promotions"], s["network_trace_offset_s"], s["round_trips"]) == (0, 0.0, 2)
    assert (s["tokens_not_uploaded"], s["unverified_mismatch_tokens"]) == (0, 0)
    f = s["cloud_fleet"]
    assert f["phones_per_gpu"] == 1 and f["user_tpot_ms"] == [ex(60.056 / 6)]
    assert f["user_tpot_p50_ms"] == f["user_tpot_p90_ms"] == f["user_tpot_p99_ms"] == ex(60.056 / 6)
    assert f["slo_tpot_ms"] == ex(50.0) and f["slo_attainment"] == 1.0
    assert f["gpu_utilization"] == ex(16e-3 / 60.056e-3) and f["iterations"] == 2
    assert f["mean_batch_forwards"] == 1.0 and f["mean_batch_tokens"] == 3.0
    assert f["user_tokens_committed"] == [6]
    # estimates after two rounds (EWMA 0.3): acceptance 0.7 -> 0.79 -> 0.853; window 2 -> 2 -> 2;
    # tokens per split (1 - 0.7^3) / 0.3 = 2.19 -> 2.433 -> 2.6031; round trip minus the cloud's
    # time: 30.028 - 2 - 8 = 20.028 ms both rounds, from the prior 20 + 0.032 + 0.004 = 20.036 ms
    e = m.est
    assert e.acceptance == ex(0.853) and e.window_split == ex(2.0) and e.observations == 2
    t0 = (1 - 0.7 ** 3) / 0.3
    assert e.tokens_per_split == ex(0.49 * t0 + 0.51 * 3)
    assert e.net_rt_s == ex(0.49 * 20.036e-3 + 0.51 * 20.028e-3)
    assert e.last_obs_s == ex(60.056e-3)


def test_estimates_prior_and_byte_counts():
    """Prior (max_tokens 4): window 4 // 2 = 2; tokens per round (1 - 0.7^3) / (1 - 0.7);
    round trip RTT + up(4 drafts: 16 + 4 x 4 = 32 B) / 1e6 + down(1: 8 B) / 2e6 = 20.036 ms;
    AR interval T_v(1) = 6 ms. Bytes with top-16 uploads (4 + 16 x (4 + 2) = 100 B per draft):
    3 drafts + 2 piggy-backed ids = 16 + 300 + 8 = 324 B; verdict of 5 tokens 4 + 20 = 24 B."""
    m, _ = _mode("hybrid", np.ones(20, bool), 6, start=False)
    e = m.est
    assert (e.acceptance, e.window_split, e.window_cloud_sd) == (0.7, 2.0, 2.0)
    assert e.tokens_per_split == ex((1 - 0.7 ** 3) / 0.3) and e.tokens_per_cloud_sd == ex((1 - 0.7 ** 3) / 0.3)
    assert e.net_rt_s == ex(0.020 + 32 / 1e6 + 8 / 2e6)
    assert e.ar_interval_s == ex(6e-3) and e.observations == 0
    assert m._up_bytes(3, 2) == 16 + 3 * 4 + 2 * 4 and m._down_bytes(5) == 24
    m2, _ = _mode("hybrid", np.ones(20, bool), 6, ["hyco.draft_topk=16", "hyco.prob_bytes=2"], start=False)
    assert m2._up_bytes(3, 2) == 324 and m2._up_bytes(0) == 16
    m._observe(acceptance=1.0, net_rt_s=0.0)
    assert e.acceptance == ex(0.79) and e.net_rt_s == ex(0.7 * (0.020 + 32 / 1e6 + 8 / 2e6))
    assert e.observations == 1 and e.window_split == 2.0


def test_cloud_autoregressive_stream_exact():
    """cloud_autoregressive, 3 tokens, one request of 16 B: arrives 10.016 ms. Each decode
    T_v(1) = 6 ms: tokens at 16.016, 22.016, 28.016 ms; each 8-B chunk (4 us) arrives 10.004 ms
    later: 26.020, 32.020, 38.020 ms. One call; AR interval observed 6 ms twice; first-chunk
    round trip 26.020 - (16.016 - 10.016) = 20.020 ms."""
    m, env = _mode("cloud_autoregressive", np.ones(20, bool), 3)
    assert env.now == ex(38.020e-3)
    assert m.commit_log == [(ex(26.020e-3), 1), (ex(32.020e-3), 2), (ex(38.020e-3), 3)]
    led = m.cloud.ledgers[0]
    assert (led.calls, led.forwards, led.tokens_processed) == (1, 3, 3) and led.gpu_busy_s == ex(18e-3)
    assert m.round_trips == 1 and m.sessions == 1 and m.rounds_by_option["cloud_ar"] == 1
    assert m.net.bytes == {"up": 16, "down": 24} and m.col.counters.verifications == 3
    e = m.est
    assert e.ar_interval_s == ex(0.49 * 6e-3 + 0.51 * 6e-3)
    assert e.net_rt_s == ex(0.7 * (0.020 + 32 / 1e6 + 8 / 2e6) + 0.3 * 20.020e-3)
    assert e.observations == 3


def test_cloud_speculative_session_exact():
    """hybrid with options [cloud_sd], 6 tokens, k = 2, all accepted. Request 16 B arrives at
    10.016 ms; the cloud drafts 2 x 2 ms and verifies 3 tokens (8 ms): 22.016 ms, chunk of
    3 tokens 4 + 12 = 16 B (8 us) arrives 32.024 ms. Round 2: 22.016 + 12 = 34.016, chunk
    arrives 44.024 ms. One call (the session's first draft), 2 + 3 + 2 + 3 = 10 tokens
    processed, busy 24 ms; acceptance 1 observed twice, 2 drafts and 3 tokens per round."""
    m, env = _mode("hybrid", np.ones(20, bool), 6, ["hyco.options=[cloud_sd]"])
    assert env.now == ex(44.024e-3)
    assert m.commit_log == [(ex(32.024e-3), 3), (ex(44.024e-3), 6)]
    led = m.cloud.ledgers[0]
    assert (led.calls, led.forwards, led.tokens_processed) == (1, 6, 10) and led.gpu_busy_s == ex(24e-3)
    assert led.by_task_s == {"cloud_draft": ex(8e-3), "cloud_verify": ex(16e-3)}
    c = m.col.counters
    assert (c.drafted_tokens, c.verifications, c.accepted_tokens) == (4, 2, 4)
    assert m.net.bytes == {"up": 16, "down": 32} and m.round_trips == 1 and m.sessions == 1
    e = m.est
    assert e.acceptance == ex(0.853) and e.window_cloud_sd == ex(2.0)
    t0 = (1 - 0.7 ** 3) / 0.3
    assert e.tokens_per_cloud_sd == ex(0.49 * t0 + 0.51 * 3)
    assert e.net_rt_s == ex(0.7 * (0.020 + 32 / 1e6 + 8 / 2e6) + 0.3 * (32.024e-3 - 12e-3))


def _with_estimates(m, **kw):
    base = dict(window_split=3.4, window_cloud_sd=2.6, tokens_per_split=2.5, tokens_per_cloud_sd=3.0,
                net_rt_s=0.030, ar_interval_s=0.004)
    for k, v in {**base, **kw}.items():
        setattr(m.est, k, v)
    return m


PRICE = dict(usd_per_gpu_hour=3.6, phones_per_gpu=4, usd_per_1m_tokens=0.2, usd_per_call=0.01)


@pytest.mark.parametrize("pricing", ["shared_busy", "dedicated_wall", "per_token_api"])
def test_predict_per_option_and_pricing(pricing):
    """Phone draft 1 ms, cloud draft 2 ms, cloud verify 5 + n ms (T_ar = 6 ms). Estimates:
    window 3.4 (split) / 2.6 (cloud SD) -> 3 drafts verified as 4 tokens (9 ms); tokens per
    round 2.5 / 3; round trip 30 ms; AR interval 4 ms; sessions of 32 tokens; 0.001 USD/s.
    split, no pre-draft: period 3.4 + 30 + 9 = 42.4 ms -> 16.96 ms/token; with pre-draft
    max(3.4, 39) = 39 ms -> 15.6 ms. cloud SD: 2.6 x 2 + 9 = 14.2 ms over 3 tokens. cloud AR:
    max(6, 4) = 6 ms per token. One round's bill / its tokens:
    shared_busy: split 9 ms GPU, SD the whole 14.2 ms, AR 6 ms; dedicated_wall: the period / 4
    phones; per_token_api: split 4 tokens + 1 call, SD 2 x 3 + 1 = 7 tokens + 3/32 calls,
    AR 1 token + 1/32 call (0.2 USD per 1e6 tokens, 0.01 per call)."""
    m, _ = _mode("hybrid", np.ones(20, bool), 6, start=False)
    _with_estimates(m)
    m.cloud.cfg = CloudConfig(pricing=pricing, **PRICE)

    def usd(gpu_s, tokens, calls, period_s):
        return {"shared_busy": gpu_s * 0.001, "dedicated_wall": period_s * 0.001 / 4,
                "per_token_api": tokens * 0.2e-6 + calls * 0.01}[pricing]

    m.predraft = False
    p = m.predict()
    assert set(p) == {"split", "cloud_sd", "cloud_ar"}
    assert p["split"] == (ex(0.0424 / 2.5), ex(usd(0.009, 4, 1, 0.0424) / 2.5))
    assert p["cloud_sd"] == (ex(0.0142 / 3), ex(usd(0.0142, 7, 3 / 32, 0.0142) / 3))
    assert p["cloud_ar"] == (ex(0.006), ex(usd(0.006, 1, 1 / 32, 0.006)))
    m.predraft = True
    assert m.predict()["split"] == (ex(0.039 / 2.5), ex(usd(0.009, 4, 1, 0.039) / 2.5))
    # floors: tokens per round at least 1, windows at least 1 draft; AR no faster than T_ar
    _with_estimates(m, tokens_per_split=0.5, tokens_per_cloud_sd=0.2, window_split=0.3, window_cloud_sd=0.4,
                    ar_interval_s=0.010)
    m.predraft = False
    p = m.predict()
    assert p["split"] == (ex(0.001 + 0.030 + 0.007), ex(usd(0.007, 2, 1, 0.038)))
    assert p["cloud_sd"] == (ex(0.002 + 0.007), ex(usd(0.009, 3, 1 / 32, 0.009)))
    assert p["cloud_ar"] == (ex(0.010), ex(usd(0.006, 1, 1 / 32, 0.010)))


def test_predict_uses_the_modes_session_length():
    """cloud_autoregressive sets its session to the whole run (6 tokens): per-token calls 1/6."""
    m, _ = _mode("cloud_autoregressive", np.ones(20, bool), 6, start=False)
    _with_estimates(m)
    m.cloud.cfg = CloudConfig(pricing="per_token_api", **PRICE)
    assert m.predict() == {"cloud_ar": (ex(0.006), ex(0.2e-6 + 0.01 / 6))}


def test_choose_explores_untried_then_meets_the_target_cheapest():
    """Predictions as in test_predict (shared_busy, no pre-draft): split 16.96 ms / 3.6e-6 USD,
    cloud SD 4.733 ms / 4.733e-6, cloud AR 6 ms / 6e-6 per token.
    * Untried options go first, in order: split.
    * Target 100 ms: all meet it; the cheapest, split. Target 10 ms: SD and AR; SD is cheaper.
      Target 1 ms: none; the fastest, SD.
    * Every 8th decision, the cheaper option tried longest ago displaces SD: split.
    * With history (mean since the first commit): at t = 0.1 s, 10 tokens committed since
      (0, 0): split's next round of 2.5 tokens gives (0.1 + 2.5 x 16.96 ms) / 12.5 = 11.392 ms;
      SD's 32 tokens (0.1 + 32 x 4.733 ms) / 42 = 5.99 ms. Target 12 ms: split; 11 ms: SD."""
    m, env = _mode("hybrid", np.ones(200, bool), 150, ["hyco.tpot_slo_ms=100"], start=False)
    _with_estimates(m)
    m.cloud.cfg = CloudConfig(**PRICE)
    m.predraft = False
    assert m.choose() == "split" and m.exploring and m.decisions == 1 and m.last_tried == {"split": 1}
    ev = m.col.events[-1]
    assert ev == {"time_s": 0.0, "event": "hyco_decision", "option": "split", "info_time_s": 0.0, "observations": 0,
                  "pred_tpot_split_s": ex(0.0424 / 2.5), "pred_tpot_cloud_sd_s": ex(0.0142 / 3),
                  "pred_tpot_cloud_ar_s": ex(0.006)}
    m.rounds_by_option["split"] = 1
    assert m.choose() == "cloud_sd" and m.exploring              # next untried
    m.rounds_by_option.update(cloud_sd=1, cloud_ar=1)
    assert m.choose() == "split" and not m.exploring and m.decisions == 3

    def pick(slo_ms, decisions=0):
        m.hy.tpot_slo_ms = slo_ms
        m.decisions = decisions
        return m.choose()

    assert pick(10) == "cloud_sd" and not m.exploring
    assert pick(1) == "cloud_sd"
    assert pick(10, decisions=7) == "split" and m.exploring and m.last_tried["split"] == 8
    assert pick(10, decisions=8) == "cloud_sd" and not m.exploring
    m.hy.explore_every = 0
    assert pick(10, decisions=7) == "cloud_sd"
    m.hy.explore_every = 8
    env.run(until=0.1)
    m.commit_log = [(0.0, 0)]
    m.committed = 10
    assert pick(12) == "split" and pick(11) == "cloud_sd"
    m.options = ("cloud_ar",)
    assert pick(0.001) == "cloud_ar"


def test_choose_does_not_explore_without_a_cheaper_option():
    """Per-token API pricing (estimates of test_predict, target 10 ms). Per token: split
    (4 x 0.2e-6 + 0.01) / 2.5 = 4.00032e-3 USD, 16.96 ms (misses the target); SD
    (7 x 0.2e-6 + 3/32 x 0.01) / 3 = 3.1297e-4, 4.73 ms; AR 0.2e-6 + 0.01 / 32 = 3.127e-4,
    6 ms. The exploit is AR (cheapest within the target); nothing is cheaper, so decision 8
    does not explore."""
    m, _ = _mode("hybrid", np.ones(200, bool), 150, ["hyco.tpot_slo_ms=10"], start=False)
    _with_estimates(m)
    m.cloud.cfg = CloudConfig(pricing="per_token_api", **PRICE)
    m.predraft = False
    m.rounds_by_option.update(split=1, cloud_sd=1, cloud_ar=1)
    m.decisions = 7
    assert m.choose() == "cloud_ar" and not m.exploring


def test_predraft_auto_rule():
    """auto: pre-draft when round trip + T_v(round(window) + 1) > one phone draft.
    Round trip 0, window 2.5 -> round(2.5) = 2 (banker's rounding): T_v(3) = 8 ms. A phone
    draft of 8.5 ms: 8 < 8.5, no pre-draft; 7.5 ms: pre-draft; exactly 8 ms: no (strict).
    Window 0.2 -> at least 1 draft: T_v(2) = 7 ms. 'always' / 'never' ignore the estimates."""
    for d_ms, want in ((8.5, False), (7.5, True), (8.0, False)):
        m, _ = _mode("hybrid", np.ones(20, bool), 6, dev=FixedCosts(draft_s=d_ms * 1e-3), start=False)
        _with_estimates(m, net_rt_s=0.0, window_split=2.5)
        assert m.predraft == "auto" and m.predraft_now(0) is want, d_ms
    m, _ = _mode("hybrid", np.ones(20, bool), 6, dev=FixedCosts(draft_s=6.9e-3), start=False)
    _with_estimates(m, net_rt_s=0.0, window_split=0.2)
    assert m.predraft_now(0) is True
    m.dev_costs.c.d = 7.0e-3
    assert m.predraft_now(0) is False
    for mode, want in (("always", True), ("never", False)):
        m, _ = _mode("hybrid", np.ones(20, bool), 6, [f"hyco.predraft={mode}"], start=False)
        assert m.predraft is want and m.predraft_now(0) is want


def test_upload_skipping_commits_at_the_phone_and_piggybacks_ids():
    """hybrid, [split], never pre-draft, skip threshold 0.05 and every drafter entropy 0.01:
    every head-of-chain draft is committed at once without upload. k = 2, 6 tokens:
    round 1: tokens 0, 1 committed at 1 and 2 ms; an upload of 0 drafts + 2 ids (16 + 8 = 24 B)
    arrives 12.024 ms; the cloud verifies 0 + 1 + 2 = 3 tokens (8 ms) and sends the bonus
    token: 30.028 ms, 3 committed. Round 2: 4 and 5 at 31.028 and 32.028 ms, bonus 6 at
    60.056 ms. Positions 1 and 4 differ from the target: 2 unverified mismatches of 4 skipped."""
    acc = np.ones(20, bool)
    acc[[1, 4]] = False
    m, env = _mode("hybrid", acc, 6, ["hyco.options=[split]", "hyco.predraft=never",
                                      "hyco.skip_max_entropy_nats=0.05"], entropy=0.01)
    assert env.now == ex(60.056e-3)
    assert m.commit_log == [(ex(1e-3), 1), (ex(2e-3), 2), (ex(30.028e-3), 3), (ex(31.028e-3), 4),
                            (ex(32.028e-3), 5), (ex(60.056e-3), 6)]
    assert (m.tokens_not_uploaded, m.unverified_mismatch_tokens, m.pending_ids) == (4, 2, 0)
    assert m.net.bytes == {"up": 48, "down": 16} and m.col.counters.drafted_tokens == 0
    assert m.cloud.ledgers[0].tokens_processed == 6 and m.round_trips == 2
    # observations: acceptance unchanged (no drafts verified), window 1, 3 tokens per round
    assert m.est.acceptance == ex(0.7) and m.est.window_split == ex(0.49 * 2 + 0.51)
    # at the threshold itself a token is still skipped; above it, it is uploaded
    m2, _ = _mode("hybrid", np.ones(20, bool), 6, ["hyco.options=[split]", "hyco.predraft=never",
                                                   "hyco.skip_max_entropy_nats=0.01"], entropy=0.01)
    assert m2.tokens_not_uploaded == 4
    m3, _ = _mode("hybrid", np.ones(20, bool), 6, ["hyco.options=[split]", "hyco.predraft=never",
                                                   "hyco.skip_max_entropy_nats=0.009"], entropy=0.01)
    assert m3.tokens_not_uploaded == 0 and m3.net.bytes["up"] == 48 and m3.col.counters.drafted_tokens == 4


def test_split_round_with_a_rejection():
    """device_draft_cloud_verify, k = 2, position 1 rejected, 5 tokens: round 1 as in the
    all-accepted case (30.028 ms) commits 0 and the correction at 1 (2 tokens); round 2
    drafts 2, 3 (both accepted), commits 3 tokens at 60.056 ms. Acceptance observed 1/2 then
    1: 0.7 -> 0.64 -> 0.748; tokens per round 2 then 3."""
    acc = np.ones(20, bool)
    acc[1] = False
    m, env = _mode("device_draft_cloud_verify", acc, 5)
    assert env.now == ex(60.056e-3)
    assert m.commit_log == [(ex(30.028e-3), 2), (ex(60.056e-3), 5)]
    e = m.est
    assert e.acceptance == ex(0.748)
    t0 = (1 - 0.7 ** 3) / 0.3
    assert e.tokens_per_split == ex(0.49 * t0 + 0.21 * 2 + 0.3 * 3)
    assert m.col.counters.accepted_tokens == 3 and m.chain_start == 2


def test_exploration_session_then_switch_to_cloud_sd():
    """hybrid, options [cloud_ar, cloud_sd], exploration sessions of 3 tokens. Decision 1:
    cloud_ar untried -> a 3-token exploration session: chunks arrive 26.020, 32.020, 38.020 ms
    (as the cloud AR stream). At the first chunk the phone decides again: cloud_sd untried, so
    no continuation request; after the session's last chunk it requests cloud_sd (16 B at
    38.020 ms, arrives 48.036): two drafts and a 3-token verify (12 ms) end at 60.036 ms and
    the 16-B chunk arrives 70.044 ms: 6 committed."""
    m, _ = _mode("hybrid", np.ones(40, bool), 12, ["hyco.options=[cloud_ar,cloud_sd]",
                                                   "hyco.explore_session_tokens=3"])
    assert m.commit_log[:4] == [(ex(26.020e-3), 1), (ex(32.020e-3), 2), (ex(38.020e-3), 3), (ex(70.044e-3), 6)]
    assert m.rounds_by_option["cloud_ar"] >= 1 and m.rounds_by_option["cloud_sd"] >= 1
    assert m.round_trips == m.sessions >= 2           # every session, first or continuation, is one request


def test_switching_to_the_cloud_drops_phone_drafts():
    """Phone drafts beyond the committed point (2 here) are killed when a cloud option takes
    over: killed_tokens 2, a new chain from the committed point; then the AR stream as usual
    (3 tokens at 38.020 ms)."""
    m, env = _mode("cloud_autoregressive", np.ones(20, bool), 3, start=False)
    m.frontier = 2
    env.process(m._cloud_worker())
    env.process(m._cloud_option("cloud_ar"))
    env.run(until=1e-6)
    assert m.col.counters.killed_tokens == 2 and m.gen == 1 and m.frontier == m.chain_start == 0
    env.run(until=m.done)
    assert env.now == ex(38.020e-3) and m.committed == 3


def test_two_phones_share_one_batched_gpu():
    """phones_per_gpu 2, no trace file: the peer replays the same synthetic trace with the same
    costs, so both verify 3 tokens at 12.024 ms as one iteration: T(6 tokens) = 5 + 6 = 11 ms
    (the cost here does not depend on the KV length). Rounds end 33.028 and 66.056 ms for both;
    each phone's share is half of 22 ms, its busy time all 22 ms. Per-user TPOT 66.056 / 6 ms."""
    m, env = _mode("device_draft_cloud_verify", np.ones(20, bool), 6, ["cloud.phones_per_gpu=2", "run.trace="])
    assert len(m.peers) == 1 and m.peers[0].owner == 1
    assert env.now == ex(66.056e-3)
    assert m.commit_log == [(ex(33.028e-3), 3), (ex(66.056e-3), 6)]
    for o in (0, 1):
        led = m.cloud.ledgers[o]
        assert led.gpu_share_s == ex(11e-3) and led.gpu_busy_s == ex(22e-3)
    f = m.summary_fields({"generated_tokens": 6, "makespan_s": env.now, "energy_per_token_j": 0.0})["cloud_fleet"]
    assert f["phones_per_gpu"] == 2 and f["user_tpot_ms"] == [ex(66.056 / 6)] * 2
    assert f["iterations"] == 2 and f["mean_batch_forwards"] == 2.0 and f["mean_batch_tokens"] == 6.0
    assert f["gpu_utilization"] == ex(22e-3 / 66.056e-3) and f["user_tokens_committed"] == [6, 6]
    assert f["slo_attainment"] == 1.0


def test_fleet_percentiles_and_slo_attainment():
    """Three phones with TPOT 10, 20, 60 ms (SLO 50 ms): p50 20, p90 = 20 + 0.8 x 40 = 52,
    p99 = 20 + 0.98 x 40 = 59.2 ms (linear interpolation); 2 of 3 within the SLO. A phone
    that committed nothing (NaN) is left out. Utilisation 0.5 s busy over 2 s."""
    from types import SimpleNamespace

    from ahasd_sim.modes.mobile_cloud.engine import fleet_stats

    def user(t, n):
        return SimpleNamespace(user_tpot_s=lambda: t, committed=n)

    srv = SimpleNamespace(cfg=CloudConfig(), busy_s=0.5, iterations=4, batched_forwards=10, batched_tokens=30)
    prim = SimpleNamespace(cloud=srv, peers=[user(0.020, 5), user(0.060, 7), user(float("nan"), 0)],
                           user_tpot_s=lambda: 0.010, committed=9)
    f = fleet_stats(prim, 2.0)
    assert f["phones_per_gpu"] == 4 and f["user_tpot_ms"] == [ex(10.0), ex(20.0), ex(60.0)]
    assert (f["user_tpot_p50_ms"], f["user_tpot_p90_ms"], f["user_tpot_p99_ms"]) == (ex(20.0), ex(52.0), ex(59.2))
    assert f["slo_attainment"] == ex(2 / 3) and f["gpu_utilization"] == 0.25
    assert (f["mean_batch_forwards"], f["mean_batch_tokens"]) == (2.5, 7.5)
    assert f["user_tokens_committed"] == [9, 5, 7, 0]
    srv.iterations, srv.busy_s = 0, 0.0
    empty = fleet_stats(SimpleNamespace(cloud=srv, peers=[], user_tpot_s=lambda: float("nan"), committed=0), 0.0)
    assert math.isnan(empty["user_tpot_p50_ms"]) and empty["slo_attainment"] == 0.0
    assert empty["gpu_utilization"] == 0.0 and empty["mean_batch_forwards"] == 0.0 and empty["mean_batch_tokens"] == 0.0


def test_device_costs_pick_the_drafters_unit():
    """PIM present: the drafter on its ranks; NPU without PIM: the NPU op by op over the KV
    quantum (cached under ('npu_draft', kv)); neither: the GPU. Verify: NPU if present, else GPU."""
    from types import SimpleNamespace

    from ahasd_sim.modes.mobile_cloud.engine import DeviceCosts

    class C:
        draft = "D"

        def draft_token(self, kv):
            return ("pim", kv)

        def gpu_draft_token(self, kv):
            return ("gpu", kv)

        def verify(self, n, kv):
            return ("npu_v", n, kv)

        def gpu_verify(self, n, kv):
            return ("gpu_v", n, kv)

        def _kv(self, kv):
            return kv // 10 * 10

        def _cached(self, key, fn):
            return (key, fn())

        def ops(self, model, n, kv):
            return [("op", model, n, kv)]

        def _sequential(self, ops, f):
            return [f(op) for op in ops]

        def _op_on(self, op, unit, role):
            return (op, unit, role)

    both = DeviceCosts(C(), SimpleNamespace(pim=1, npu=1))
    assert both.draft(57) == ("pim", 57) and both.verify(3, 57) == ("npu_v", 3, 57)
    npu = DeviceCosts(C(), SimpleNamespace(pim=None, npu=1))
    assert npu.draft(57) == (("npu_draft", 50), [((("op", "D", 1, 50), "npu", "draft"), "npu")])
    gpu = DeviceCosts(C(), SimpleNamespace(pim=None, npu=None))
    assert gpu.draft(57) == ("gpu", 57) and gpu.verify(3, 57) == ("gpu_v", 3, 57)


def test_cloud_forward_cost_kinds():
    """The server's forward: a draft is the drafter's GPU forward with nothing else resident;
    anything else is the target's verify."""
    m, _ = _mode("device_draft_cloud_verify", np.ones(20, bool), 6, start=False)

    class CC:
        draft = "D"

        def _gpu_forward(self, model, n, kv, resident_other):
            return ("fwd", model, n, kv, resident_other)

        def gpu_verify(self, n, kv):
            return ("v", n, kv)

    m.cloud_costs = CC()
    assert m._cloud_forward_cost("draft", 1, 40) == ("fwd", "D", 1, 40, 0)
    assert m._cloud_forward_cost("verify", 3, 40) == ("v", 3, 40)


def test_build_cloud_costs_errors(tmp_path):
    from ahasd_sim.config import load_config
    from ahasd_sim.config.errors import ConfigError
    from ahasd_sim.modes.mobile_cloud.engine import build_cloud_costs

    cfg = load_config(HYCO, ["cloud.platform_config=nope.yaml"])
    src = cfg.source_of("cloud.platform_config")
    with pytest.raises(ConfigError) as e:
        build_cloud_costs(cfg, None, None)
    assert str(e.value) == f"{src}: cloud.platform_config: platform file 'nope.yaml' not found"
    mobile = HYCO.parent / "platform_mobile_npu_lpddr5_pim.yaml"
    cfg = load_config(HYCO, [f"cloud.platform_config={mobile}"])
    with pytest.raises(ConfigError) as e:
        build_cloud_costs(cfg, None, None)
    assert str(e.value) == (f"{src}: cloud.platform_config: '{mobile}' has no GPU (gpu.enabled: false); "
                            "the cloud needs one")
    bad = tmp_path / "bad.yaml"
    bad.write_text("gpu: {enabled: true, bogus_key: 1}\n")
    cfg = load_config(HYCO, [f"cloud.platform_config={bad}"])
    with pytest.raises(ConfigError) as e:
        build_cloud_costs(cfg, None, None)
    assert e.value.source == str(bad) and e.value.key_path.startswith("gpu")
    assert e.value.message.endswith(f" (the cloud platform chosen by cloud.platform_config in {src})")


def test_device_only_reports_no_cloud_and_charges_the_radio_nothing():
    """device_only: the whole round on the phone; the cloud fields are zeros, no link."""
    m, env = _mode("device_only", np.ones(20, bool), 6)
    assert m.net is None and m.cloud is None
    s = m.summary_fields({"generated_tokens": 6, "makespan_s": env.now, "energy_per_token_j": 0.5})
    assert s["cloud_cost_usd"] == 0.0 and s["cloud_pricing"] == "" and "cloud_fleet" not in s
    assert s["cloud_cost_usd_per_1k_tokens_by_pricing"] == {p: 0.0 for p in ("shared_busy", "dedicated_wall",
                                                                                "per_token_api")}
    assert (s["uplink_bytes"], s["round_trips"], s["cloud_calls"], s["network_trace_offset_s"]) == (0, 0, 0, 0.0)
    assert (s["cloud_energy_j"], s["cloud_gpu_busy_s"], s["cloud_tokens_processed"]) == (0.0, 0.0, 0)
    assert m.user_tpot_s() == ex(m.commit_log[-1][0] / 6)


def test_finalize_books_the_radio_energy_and_user_tpot_before_a_commit():
    m, env = _mode("device_draft_cloud_verify", np.ones(20, bool), 6, start=False)
    assert math.isnan(m.user_tpot_s())
    m, env = _mode("device_draft_cloud_verify", np.ones(20, bool), 6)
    want = m.net.radio_energy_j(env.now, m.radio_sessions())   # its share of a session's tail
    got = []
    m.col.energy = lambda dev, e, label: got.append((dev, e, label))
    m.finalize()
    assert got == [("network", want[k], k) for k in want]
    assert m.user_tpot_s() == ex(60.056e-3 / 6)


def test_split_and_session_events():
    """The timeline events of the split run of test_split_rounds_exact_timing (each draft,
    the upload's arrival, the cloud verify's start and end, the verdict's arrival and the
    commit) and of the cloud SD session of test_cloud_speculative_session_exact."""
    m, _ = _mode("device_draft_cloud_verify", np.ones(20, bool), 6)
    want = []
    for r, t in ((0, 0.0), (1, 30.028e-3)):
        p = 3 * r
        want += [{"time_s": ex(t), "event": "draft_token", "position": p, "duration_s": ex(1e-3)},
                 {"time_s": ex(t + 1e-3), "event": "draft_token", "position": p + 1, "duration_s": ex(1e-3)},
                 {"time_s": ex(t + 12.024e-3), "event": "uplink", "position": p, "round_id": r, "sent_s": ex(t + 2e-3)},
                 {"time_s": ex(t + 12.024e-3), "event": "cloud_verify", "position": p, "round_id": r,
                  "end_s": ex(t + 20.024e-3), "n_tokens": 2},
                 {"time_s": ex(t + 30.028e-3), "event": "downlink", "position": p, "round_id": r,
                  "sent_s": ex(t + 20.024e-3)},
                 {"time_s": ex(t + 30.028e-3), "event": "commit", "position": p, "round_id": r, "committed": p + 3}]
    assert m.col.events == want
    m, _ = _mode("hybrid", np.ones(20, bool), 6, ["hyco.options=[cloud_sd]"])
    assert m.col.events == [
        {"time_s": ex(32.024e-3), "event": "downlink", "position": 0, "session": 1, "sent_s": ex(22.016e-3)},
        {"time_s": ex(32.024e-3), "event": "commit", "position": 0, "session": 1, "committed": 3},
        {"time_s": ex(44.024e-3), "event": "downlink", "position": 3, "session": 1, "sent_s": ex(34.016e-3)},
        {"time_s": ex(44.024e-3), "event": "commit", "position": 3, "session": 1, "committed": 6}]
    assert m.stats() == {"rounds_by_option": {"split": 0, "cloud_sd": 1, "cloud_ar": 0}, "cloud_sessions": 1,
                         "estimates_at_end": {"acceptance": m.est.acceptance, "window_split": 2.0,
                                              "window_cloud_sd": m.est.window_cloud_sd,
                                              "tokens_per_split": m.est.tokens_per_split,
                                              "tokens_per_cloud_sd": m.est.tokens_per_cloud_sd,
                                              "net_rt_s": m.est.net_rt_s, "ar_interval_s": m.est.ar_interval_s,
                                              "cloud_verify_s": m.est.cloud_verify_s}}


def _record_outcomes(m):
    got = []
    for p in {id(m.policy): m.policy, id(m.cloud_policy): m.cloud_policy}.values():
        f = p.on_verify
        p.on_verify = lambda o, f=f: (got.append(o), f(o))
    return got


def test_predrafting_split_rounds_and_what_the_policy_is_told():
    """hybrid, [split], pre-draft always, 6 tokens, all accepted, k = 2. Round 1: drafts 0, 1
    (0 .. 2 ms), then during the round trip pre-drafts 2, 3 (2 .. 4 ms); the verdict (3
    committed: 0, 1 and the bonus at 2) arrives 30.028 ms. Round 2 uploads only position 3
    (16 + 4 = 20 B, 20 us): arrives 40.048, verify 2 tokens 7 ms -> 47.048, verdict 57.052 ms:
    5 committed; pre-drafts 4, 5 meanwhile. Round 3 uploads 5 at 57.052: 67.072, 74.072,
    84.076 ms: 6 committed (the bonus beyond the run is cut).
    The policy is told each round's own drafts: 2 of 2 accepted (not 3: the pre-draft at 2,
    which the bonus token matched, belongs to the next window), then 1 of 1, 1 of 1;
    committed 3, 2, 1; round times 28.028, 27.024, 27.024 ms."""
    m, env = _mode("hybrid", np.ones(20, bool), 6, ["hyco.options=[split]", "hyco.predraft=always",
                                                   "hyco.skip_max_entropy_nats=-1"], start=False)
    got = _record_outcomes(m)
    env.run(until=m.start())
    assert env.now == ex(84.076e-3)
    assert m.commit_log == [(ex(30.028e-3), 3), (ex(57.052e-3), 5), (ex(84.076e-3), 6)]
    assert [(o.n_drafted, o.n_accepted, o.n_committed, o.round_id) for o in got] == [(2, 2, 3, 0), (1, 1, 2, 1),
                                                                                   (1, 1, 1, 2)]
    assert [o.round_time_s for o in got] == [ex(28.028e-3), ex(27.024e-3), ex(27.024e-3)]
    assert [o.now_s for o in got] == [ex(30.028e-3), ex(57.052e-3), ex(84.076e-3)]
    assert m.net.bytes["up"] == 24 + 20 + 20 and m.col.counters.drafted_tokens == 8


def test_cloud_policy_is_told_its_rounds():
    """Cloud SD (test_cloud_speculative_session_exact): the cloud's policy sees 2 of 2
    accepted, 3 committed per round, round time 2 x 2 + 8 = 12 ms, ending 22.016 / 34.016 ms."""
    m, env = _mode("hybrid", np.ones(20, bool), 6, ["hyco.options=[cloud_sd]"], start=False)
    got = _record_outcomes(m)
    env.run(until=m.start())
    assert [(o.n_drafted, o.n_accepted, o.n_committed, o.round_id) for o in got] == [(2, 2, 3, 0), (2, 2, 3, 1)]
    assert [(o.round_time_s, o.now_s) for o in got] == [(ex(12e-3), ex(22.016e-3)), (ex(12e-3), ex(34.016e-3))]


def test_predrafts_past_a_rejection_are_off_path_and_killed():
    """hybrid, [split], pre-draft always, k = 4 (= max_tokens), position 1 rejected, rollouts
    of one token. Round 1 drafts 0 .. 3 (0 .. 4 ms) and pre-drafts 4 .. 7 (4 .. 8 ms: the
    bound is two windows ahead of the committed point). The upload (16 + 16 = 32 B) arrives
    14.032 ms, the 5-token verify ends 24.032, the verdict arrives 34.036 ms: 2 committed
    (0 and the correction at 1). Drafts 2 .. 7 followed the rejected token: 6 off the target's
    path, 5 of them (3 .. 7) beyond its one-token rollout (synthetic), all 6 killed."""
    acc = np.ones(20, bool)
    acc[1] = False
    m, _ = _mode("hybrid", acc, 8, ["hyco.options=[split]", "hyco.predraft=always", "hyco.skip_max_entropy_nats=-1",
                                    "policy.fixed.k=4"], rollout_len=1)
    c = m.col.counters
    assert m.commit_log[0] == (ex(34.036e-3), 2)
    assert [e["position"] for e in m.col.events if e["event"] == "draft_token"][:8] == list(range(8))
    assert (c.offpath_drafted_tokens, c.offpath_synthetic_tokens, c.killed_tokens) == (6, 5, 6)
    assert m.col.busy_intervals["pim"][:2] == [(0.0, ex(1e-3), "draft"), (ex(1e-3), ex(2e-3), "draft")]


def test_a_discarded_draft_forward_closes_the_window():
    """device_draft_cloud_verify, 4 tokens; the policy discards every round's second forward:
    draft 0 .. 1 ms, discarded forward 1 .. 2 ms, upload of 1 draft (20 B) arrives 12.020 ms,
    2-token verify 7 ms -> 19.020, verdict 29.024 ms: 2 committed; the second round the same:
    58.048 ms. Two discarded forwards, two drafted tokens."""
    from ahasd_sim.policies.base import Decision
    m, env = _mode("device_draft_cloud_verify", np.ones(20, bool), 4, start=False)
    f = m.policy.decide
    m.policy.decide = lambda v: Decision.STOP_DISCARD if v.index_in_round == 1 else f(v)
    env.run(until=m.start())
    assert m.commit_log == [(ex(29.024e-3), 2), (ex(58.048e-3), 4)]
    c = m.col.counters
    assert (c.discarded_draft_forwards, c.drafted_tokens) == (2, 2)


def test_continuation_sessions_are_pipelined_round_trips():
    """hybrid, [cloud_sd], sessions of 3 tokens, 9 tokens. Session 1: request arrives 10.016,
    2 drafts + verify end 22.016, chunk arrives 32.024 ms. There the phone sends the next
    request at once (42.040 ms at the cloud): 54.040, chunk 64.048; the third: 96.072 ms.
    Three sessions, three round trips, three calls. (A hybrid with one option streams without
    sessions, below; the sessions are those of a hybrid that keeps deciding, forced here.)"""
    m, env = _mode("hybrid", np.ones(20, bool), 9, ["hyco.options=[cloud_sd]", "hyco.cloud_session_tokens=3"],
                   start=False)
    m.session_tokens = None       # sessions of hyco.cloud_session_tokens, as with several options
    done = m.start()
    env.run(until=done)
    assert m.commit_log == [(ex(32.024e-3), 3), (ex(64.048e-3), 6), (ex(96.072e-3), 9)]
    assert (m.round_trips, m.sessions, m.cloud.ledgers[0].calls) == (3, 3, 3)
    assert m.rounds_by_option["cloud_sd"] == 3
    # one option: one continuous stream, a chunk every cloud round (12 ms: 2 drafts + verify)
    m, env = _mode("hybrid", np.ones(20, bool), 9, ["hyco.options=[cloud_sd]", "hyco.cloud_session_tokens=3"])
    assert m.commit_log == [(ex(32.024e-3), 3), (ex(44.024e-3), 6), (ex(56.024e-3), 9)]
    assert (m.round_trips, m.sessions, m.cloud.ledgers[0].calls) == (1, 1, 1)


def test_peers_replay_their_own_windows_with_their_own_generators():
    """phones_per_gpu 2 with the run's trace file: the peer replays a window drawn from it
    (not the primary's synthetic trace) and its policy draws from [seed, 0x9EE5, replay seed, 1]."""
    m, _ = _mode("device_draft_cloud_verify", np.ones(20, bool), 6, ["cloud.phones_per_gpu=2"], start=False,
                 replay_seed=5)
    p = m.peers[0]
    assert p.replay.trace is not m.replay.trace and p.owner == 1 and p.cloud is m.cloud
    seed = m.ctx.cfg.run.seed
    assert m.replay.seed == 5 and p.replay.seed == 5 * 7919 + 1
    assert p.policy.rng.random() == np.random.default_rng([seed, 0x9EE5, m.replay.seed, 1]).random()


def test_summary_of_an_empty_run_and_the_ci():
    """0 tokens: per-1k costs 0 (not a division by zero), no TPOT and no interval (NaN, not 0).
    The TPOT CI of the split run's six windows (30.028, 0, 0, 30.028, 0, 0 ms): t(5) =
    2.57058183563631 x s / sqrt 6 around the mean, as [low, high] cut at 0."""
    m, env = _mode("device_draft_cloud_verify", np.ones(20, bool), 6)
    s = m.summary_fields({"generated_tokens": 0, "makespan_s": env.now, "energy_per_token_j": 0.0})
    assert s["cloud_cost_usd_per_1k_tokens"] == 0.0
    assert math.isnan(s["tpot_s"]) and s["tpot_ci95_s"] is None
    assert s["cloud_cost_usd_per_1k_tokens_by_pricing"] == {"shared_busy": 0.0, "dedicated_wall": 0.0,
                                                            "per_token_api": 0.0}
    s = m.summary_fields({"generated_tokens": 6, "makespan_s": env.now, "energy_per_token_j": 0.0})
    w = np.array([30.028e-3, 0, 0, 30.028e-3, 0, 0])
    h = 2.5705818356363146 * float(np.std(w, ddof=1)) / math.sqrt(6)
    # [low, high] cut at 0, the least a time per token can be (mean 10.0 ms - 16.3 ms < 0)
    assert s["tpot_ci95_s"] == [0.0, ex(float(np.mean(w)) + h)]


def test_link_generator_stream_and_disabled_network():
    """Each phone's link draws from [seed, 0x4E4554 ('NET'), owner, replay seed]; a mode that
    talks to the cloud on a platform without a network is a one-line config error."""
    from ahasd_sim.config.errors import ConfigError
    m, _ = _mode("device_draft_cloud_verify", np.ones(20, bool), 6, start=False)
    seed = m.ctx.cfg.run.seed
    assert m.net.rng.random() == np.random.default_rng([seed, 0x4E4554, 0, m.replay.seed]).random()
    with pytest.raises(ConfigError) as e:
        _mode("hybrid", np.ones(20, bool), 6, ["network.enabled=false"], start=False)
    assert e.value.key_path == "network.enabled"
    assert e.value.message == "mode 'hybrid' talks to the cloud: set network.enabled: true"


def test_prior_window_of_a_one_token_round():
    """policy.max_tokens 1: the prior window is max(1, 1 // 2) = 1 draft and tokens per round
    (1 - 0.7^2) / 0.3 = 1.7."""
    m, _ = _mode("hybrid", np.ones(20, bool), 6, ["policy.max_tokens=1", "policy.fixed.k=1"], start=False)
    assert m.est.window_split == 1.0 and m.est.window_cloud_sd == 1.0
    assert m.est.tokens_per_split == ex((1 - 0.7 ** 2) / 0.3)


def test_the_cloud_drafter_runs_its_own_policy_instance():
    """A policy that needs no fit data: the cloud's drafter gets its own instance (own state)
    seeded [seed, 0xC1], not the phone's."""
    m, _ = _mode("hybrid", np.ones(20, bool), 6, start=False)
    assert m.cloud_policy is not m.policy and type(m.cloud_policy) is type(m.policy)
    seed = m.ctx.cfg.run.seed
    assert m.cloud_policy.rng.random() == np.random.default_rng([seed, 0xC1]).random()
