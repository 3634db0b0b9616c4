"""Mobile <-> cloud cellular link (section ``network``): a SimPy component.

Each direction (uplink, downlink) is a FIFO byte queue in front of a bottleneck whose
capacity is either a constant rate or a mahimahi packet-delivery trace, followed by a
propagation delay of RTT/2 plus a seeded random jitter:

* constant rate: a message of ``B`` bytes enqueued at ``t`` starts serialising when the
  bytes queued before it have left, leaves ``B / rate`` later and arrives RTT/2 (+ jitter)
  after that. An isolated message therefore takes ``RTT/2 + B / rate``.
* mahimahi trace (the format of ``mm-link``): one line per delivery opportunity, a
  millisecond timestamp at which up to 1500 bytes may cross the link; several lines with
  one timestamp are several opportunities. Opportunities serve the queue's bytes in FIFO
  order (one opportunity may finish one message and start the next); opportunities that
  find the queue empty are lost. The file repeats with a period equal to its last
  timestamp, as ``mm-link`` loops it. A message leaves at the opportunity that carries its
  last byte.

Jitter: each message's one-way delay is RTT/2 + X, X ~ Exponential(mean ``jitter_ms``),
drawn from the session's own seeded generator; messages of one direction arrive in order
(a TCP-like stream), so X can delay but never reorder them.

Trace offset: a session starts reading both traces at ``trace_offset_s`` into them (< 0:
uniform over the uplink trace's period, drawn from the session's seeded generator, so every
seed and window replays another stretch of the recording).

Device radio (the phone's modem; the LTE RRC model of Huang et al., MobiSys 2012): the
radio is idle at the start and after ``radio_tail_s`` without activity; a message that finds
it idle first waits ``radio_promotion_s`` (RRC promotion) at ``radio_promotion_power_w``.
Energy: ``radio_tx_nj_per_bit`` x bits sent + ``radio_rx_nj_per_bit`` x bits received +
``radio_active_power_w`` x seconds a message is queued or on the air at the phone +
promotions + ``radio_tail_power_w`` x the connected time after each activity (at most
``radio_tail_s`` per idle gap, and a whole tail after the last message: the run that sent
it pays it, even though it ends before the radio sleeps).
"""
from __future__ import annotations

import bisect
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config.fields import param
from ..config.registry import config_section
from .cost import OpCost

HUANG12 = ("Huang et al., 'A Close Examination of Performance and Power Characteristics of 4G LTE "
           "Networks', MobiSys 2012, https://doi.org/10.1145/2307636.2307658")
MAHIMAHI_PACKET_BYTES = 1500  # bytes per delivery opportunity in mahimahi traces (mm-link's PACKET_SIZE)


#: the largest RTT an rtt_trace line may hold (the unit ceiling of "ms", config/fields.py)
_MAX_RTT_MS = 1e6


def _read_regular(path: Path, where: str) -> bytes:
    """The bytes of a regular file of at most ``_MAX_TRACE_BYTES``: a device (``/dev/zero``), a
    FIFO or a folder is refused by name, not read until memory runs out."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise TraceFormatError(f"cannot read {where}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a device or a pipe)"
        raise TraceFormatError(f"{where}: is {kind}; expected a text file")
    if st.st_size > _MAX_TRACE_BYTES:
        raise TraceFormatError(f"{where}: larger than {_MAX_TRACE_BYTES} bytes (not a trace of this kind?)")
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_MAX_TRACE_BYTES + 1)
    except OSError as exc:
        raise TraceFormatError(f"cannot read {where}: {exc.strerror or exc}") from None
    if len(raw) > _MAX_TRACE_BYTES:
        raise TraceFormatError(f"{where}: larger than {_MAX_TRACE_BYTES} bytes (not a trace of this kind?)")
    return raw


class TraceFormatError(ValueError):
    """A mahimahi trace file cannot be read (message is one line); ``key`` names the config key."""

    key = ""


@config_section("network")
@dataclass
class NetworkConfig:
    """Mobile <-> cloud cellular link (uplink + downlink) and the phone's radio energy."""

    enabled: bool = param(False, doc="the platform talks to a cloud server")
    uplink_mbps: float = param(6.0, doc="uplink rate when no uplink_trace is given", unit="Mbit/s", gt=0,
                               source=f"LTE median uplink 6 Mbit/s, {HUANG12}")
    downlink_mbps: float = param(13.0, doc="downlink rate when no downlink_trace is given", unit="Mbit/s", gt=0,
                                 source=f"LTE median downlink 13 Mbit/s, {HUANG12}")
    uplink_trace: str = param("", doc="mahimahi packet-delivery trace of the uplink (empty: constant uplink_mbps); "
                              "relative paths: to the current directory, then to the config file")
    downlink_trace: str = param("", doc="mahimahi packet-delivery trace of the downlink (empty: constant downlink_mbps)")
    rtt_ms: float = param(50.0, doc="round-trip propagation + core-network time (without queueing or serialisation)",
                          unit="ms", ge=0, source="US 5G/LTE latency ~47 ms [Ookla]; swept 10-200 ms")
    jitter_ms: float = param(0.0, doc="mean of the exponential extra one-way delay per message", unit="ms", ge=0,
                             source="assumption: 0 (set to study jitter)")
    message_overhead_bytes: int = param(83, doc="protocol bytes per message", unit="B", ge=0,
                                        source="IPv4 20 + TCP 20 + TCP timestamps 12 + TLS 1.3 record 22 + HTTP/2 frame 9")
    radio_tx_nj_per_bit: float = param(438.39, doc="uplink energy per bit", unit="nJ/bit", ge=0,
                                       source=f"alpha_u = 438.39 mW/Mbit/s, {HUANG12}")
    radio_rx_nj_per_bit: float = param(51.97, doc="downlink energy per bit", unit="nJ/bit", ge=0,
                                       source=f"alpha_d = 51.97 mW/Mbit/s, {HUANG12}")
    radio_active_power_w: float = param(1.288, doc="radio base power while a message is queued or on the air",
                                        unit="W", ge=0, source=f"beta = 1288.04 mW, {HUANG12}")
    radio_tail_power_w: float = param(1.060, doc="radio power in the connected tail after activity", unit="W", ge=0,
                                      source=f"LTE tail 1060 mW, {HUANG12}")
    radio_tail_s: float = param(11.576, doc="longest connected tail after activity (then the radio sleeps)",
                                unit="s", ge=0, source=f"LTE tail timer 11.576 s, {HUANG12}")
    radio_promotion_s: float = param(0.2601, doc="RRC promotion delay from idle to connected (the first message, "
                                     "and any message more than radio_tail_s after the last activity)",
                                     unit="s", ge=0, source=f"LTE T_pro = 260.1 ms, Table 3 of {HUANG12}")
    radio_promotion_power_w: float = param(1.2107, doc="radio power during an RRC promotion", unit="W", ge=0,
                                           source=f"LTE P_pro = 1210.7 mW, Table 3 of {HUANG12}")
    radio_session_tokens: int = param(512, doc="output tokens of one user session (one answer): the radio tail after "
                                      "a session's last message is charged once per session, so a run of N tokens "
                                      "pays N / radio_session_tokens tails (0: the run is one session, one whole "
                                      "tail after its last message, whatever its length)", unit="tokens", ge=0,
                                      source="[R] assumption: one chat answer of 512 tokens (the mobile-cloud "
                                      "study's window)")
    rtt_trace: str = param("", doc="time-varying RTT: a text file of 'time_s rtt_ms' lines (piecewise constant, "
                           "looping with the last time as period, read at the same offset as the traces; "
                           "empty: constant rtt_ms)")
    trace_offset_s: float = param(-1.0, doc="where in the traces a run starts (< 0: uniform over the uplink "
                                  "trace's period, drawn per seed and window)", unit="s", ge=-1.0,
                                  low_reason="any negative value means a random offset: write -1")


# ------------------------------------------------------------------ traces
#: bounds of a mahimahi trace file: size and the largest timestamp (30 days in ms)
_MAX_TRACE_BYTES = 256 * 2**20
_MAX_TIMESTAMP_MS = 30 * 24 * 3600 * 1000


class PacketTrace:
    """A mahimahi packet-delivery schedule (integer ms timestamps, looping)."""

    def __init__(self, timestamps_ms, name: str = "trace"):
        ts = np.asarray(timestamps_ms, dtype=np.int64)
        if ts.size == 0:
            raise TraceFormatError(f"{name}: no delivery opportunities")
        if (np.diff(ts) < 0).any():
            i = int(np.argmax(np.diff(ts) < 0)) + 1
            raise TraceFormatError(f"{name}: timestamps must not decrease (line {i + 1}: {ts[i]} after {ts[i - 1]})")
        if ts[0] < 0:
            raise TraceFormatError(f"{name}: negative timestamp {ts[0]}")
        if ts[-1] <= 0:
            raise TraceFormatError(f"{name}: the last timestamp (the loop period) must be > 0 ms")
        self.name = name
        self.ts_ms = ts
        self.period_ms = int(ts[-1])
        self._ts_list = ts.tolist()

    @classmethod
    def load(cls, path: str | Path) -> "PacketTrace":
        path = Path(path)
        where = f"mahimahi trace '{path}'"
        raw = _read_regular(path, where)
        if len(raw) > _MAX_TRACE_BYTES:
            raise TraceFormatError(f"{where}: larger than {_MAX_TRACE_BYTES} bytes (not a mahimahi trace?)")
        if raw.startswith(b"PK\x03\x04"):
            raise TraceFormatError(f"{where}: a zip/.npz archive, expected a text file of millisecond timestamps")
        if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
            raise TraceFormatError(f"{where}: UTF-16 text, expected ASCII/UTF-8 (one integer per line)")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TraceFormatError(f"{where}: byte 0x{raw[exc.start]:02x} at offset {exc.start} is not text "
                                   "(a binary file?); expected one integer millisecond timestamp per line") from None
        if "\x00" in text:
            raise TraceFormatError(f"{where}: NUL bytes (a binary file?)")
        values = []
        for i, line in enumerate(text.splitlines(), 1):
            s = line.strip()
            if not s:
                continue
            try:
                v = int(s)
            except ValueError:
                raise TraceFormatError(f"{where} line {i}: expected an integer millisecond "
                                       f"timestamp, got {s[:40]!r}") from None
            if not 0 <= v <= _MAX_TIMESTAMP_MS:
                raise TraceFormatError(f"{where} line {i}: timestamp {s[:24]} ms is outside 0..{_MAX_TIMESTAMP_MS} "
                                       "(about 30 days; a mahimahi trace covers seconds to hours)")
            values.append(v)
        return cls(values, str(path))

    def __len__(self) -> int:
        return len(self._ts_list)

    @property
    def mean_rate_mbps(self) -> float:
        return len(self) * MAHIMAHI_PACKET_BYTES * 8 / (self.period_ms * 1e-3) / 1e6

    def time_ms(self, g: int) -> int:
        """Timestamp of the g-th opportunity of the looped schedule."""
        n = len(self._ts_list)
        return self._ts_list[g % n] + (g // n) * self.period_ms

    def first_at_or_after(self, t_ms: float) -> int:
        """Index of the first opportunity with timestamp >= t_ms."""
        n = len(self._ts_list)
        loops = max(0, int(t_ms // self.period_ms) - 1)
        g = loops * n
        # At most two passes: the remainder of this loop and the next one.
        while True:
            base = (g // n) * self.period_ms
            i = bisect.bisect_left(self._ts_list, t_ms - base)
            if i < n:
                return (g // n) * n + i
            g = (g // n + 1) * n


class RttTrace:
    """Piecewise-constant RTT over time: (time s, RTT s) steps, looping with the last time as period."""

    def __init__(self, times_s, rtts_s, name: str = "rtt trace"):
        self.t = np.asarray(times_s, float)
        self.v = np.asarray(rtts_s, float)
        if self.t.size < 2:
            raise TraceFormatError(f"{name}: needs at least two 'time_s rtt_ms' lines (the last time is the period)")
        if (np.diff(self.t) <= 0).any() or self.t[0] < 0:
            raise TraceFormatError(f"{name}: times must start at >= 0 s and increase")
        if (self.v < 0).any():
            raise TraceFormatError(f"{name}: RTTs must be >= 0 ms")
        self.period_s = float(self.t[-1])
        self.name = name

    @classmethod
    def load(cls, path) -> "RttTrace":
        where = f"rtt trace '{path}'"
        raw = _read_regular(Path(path), where)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TraceFormatError(f"{where}: byte 0x{raw[exc.start]:02x} at offset {exc.start} is not text "
                                   "(a binary file?); expected 'time_s rtt_ms' lines") from None
        ts, vs = [], []
        for i, line in enumerate(text.splitlines(), 1):
            f = line.replace(",", " ").split()
            if not f or f[0].startswith("#"):
                continue
            try:
                t, v = float(f[0]), float(f[1])
            except (ValueError, IndexError):
                raise TraceFormatError(f"{where} line {i}: expected 'time_s rtt_ms', got {line.strip()[:40]!r}") from None
            # every number of a data file is finite and in range, or its line is named (a nan RTT
            # made every message arrive at once, an inf one never)
            if not (math.isfinite(t) and 0 <= t <= _MAX_TIMESTAMP_MS * 1e-3):
                raise TraceFormatError(f"{where} line {i}: time {f[0]!r} s is not in 0..{_MAX_TIMESTAMP_MS * 1e-3:g} "
                                       "(about 30 days)")
            if not (math.isfinite(v) and 0 <= v <= _MAX_RTT_MS):
                raise TraceFormatError(f"{where} line {i}: RTT {f[1]!r} ms is not in 0..{_MAX_RTT_MS:g} "
                                       "(a network delay of 1000 s is an outage, not a latency)")
            ts.append(t)
            vs.append(v * 1e-3)
        return cls(ts, vs, where)

    def at(self, t_s: float) -> float:
        x = t_s % self.period_s
        return float(self.v[max(0, int(np.searchsorted(self.t, x, side="right")) - 1)])


# ------------------------------------------------------------------ link
class NetworkLink:
    """Configuration + loaded traces of one link; :meth:`open` makes the per-run session."""

    device = "network"

    def __init__(self, cfg: NetworkConfig, base_dir: str | Path | None = None):
        self.cfg = cfg
        self.traces: dict[str, PacketTrace | None] = {}
        for direction, key in (("up", "uplink_trace"), ("down", "downlink_trace")):
            path = getattr(cfg, key)
            try:
                self.traces[direction] = PacketTrace.load(_resolve(path, base_dir)) if path else None
            except TraceFormatError as exc:
                exc.key = f"network.{key}"
                raise
        try:
            self.rtt_trace = RttTrace.load(_resolve(cfg.rtt_trace, base_dir)) if cfg.rtt_trace else None
        except TraceFormatError as exc:
            exc.key = "network.rtt_trace"
            raise

    def rate_bytes_s(self, direction: str) -> float:
        """Constant rate of ``direction`` (the trace's mean rate when a trace is set)."""
        tr = self._trace(direction)
        if tr is not None:
            return tr.mean_rate_mbps * 1e6 / 8.0
        return (self.cfg.uplink_mbps if direction == "up" else self.cfg.downlink_mbps) * 1e6 / 8.0

    def _trace(self, direction: str) -> PacketTrace | None:
        if direction not in ("up", "down"):
            raise ValueError(f"direction must be 'up' or 'down', got {direction!r}")
        return self.traces[direction]

    @property
    def rtt_s(self) -> float:
        """The constant RTT (with an rtt_trace: its time average, for a priori estimates)."""
        tr = self.rtt_trace
        if tr is not None:
            return float(np.sum(np.diff(tr.t) * tr.v[:-1]) / tr.period_s)
        return self.cfg.rtt_ms * 1e-3

    def rtt_at(self, trace_time_s: float) -> float:
        return self.rtt_trace.at(trace_time_s) if self.rtt_trace is not None else self.cfg.rtt_ms * 1e-3

    def transfer_time_s(self, nbytes: float, direction: str) -> float:
        """Isolated one-way time at the (mean) rate, no jitter: RTT/2 + bytes / rate."""
        return self.rtt_s / 2.0 + float(nbytes) / self.rate_bytes_s(direction)

    def transfer_cost(self, nbytes: float, direction: str) -> OpCost:
        """Isolated transfer: time as :meth:`transfer_time_s`; radio energy per bit + active power
        over the serialisation time (the tail is charged per run by :class:`NetworkSession`)."""
        ser = float(nbytes) / self.rate_bytes_s(direction)
        per_bit = self.cfg.radio_tx_nj_per_bit if direction == "up" else self.cfg.radio_rx_nj_per_bit
        e = float(nbytes) * 8 * per_bit * 1e-9 + self.cfg.radio_active_power_w * ser
        return OpCost(self.transfer_time_s(nbytes, direction), {self.device: e})

    @property
    def static_power_w(self) -> float:
        return 0.0  # the radio's connected-state power is the tail, charged per run

    def open(self, env, rng: np.random.Generator) -> "NetworkSession":
        return NetworkSession(self, env, rng)


def _resolve(path: str, base_dir) -> Path:
    p = Path(path)
    if p.is_absolute() or p.is_file() or base_dir is None:
        return p
    alt = Path(base_dir) / p
    return alt if alt.is_file() else p


@dataclass
class Delivery:
    """One message: when it was sent, left the bottleneck and arrived."""

    direction: str
    nbytes: int
    sent_s: float
    service_start_s: float
    depart_s: float
    arrive_s: float
    promotion_s: float = 0.0     # RRC promotion it waited for (the phone knows its radio was idle)


class _Direction:
    """FIFO bottleneck state of one direction."""

    def __init__(self, rate_bytes_s: float, trace: PacketTrace | None, offset_s: float = 0.0):
        self.rate = rate_bytes_s
        self.trace = trace
        self.offset_ms = offset_s * 1e3     # simulation time t reads the trace at t + offset
        self.free_at_s = 0.0        # constant rate: when the queued bytes have left
        self.g_last = -1            # trace: last opportunity used
        self.left_in_last = 0       # trace: bytes still free in it
        self.last_arrive_s = 0.0
        self.last_event = None      # arrival event of the latest message sent (in-order wake-ups)

    def depart(self, now_s: float, nbytes: int) -> tuple[float, float]:
        """(service start, departure) of a message of ``nbytes`` enqueued at ``now_s``."""
        if self.trace is None:
            start = max(now_s, self.free_at_s)
            self.free_at_s = start + nbytes / self.rate
            return start, self.free_at_s
        tr = self.trace
        off = self.offset_ms
        now_ms = now_s * 1e3 + off
        need = nbytes
        g = self.g_last
        if self.left_in_last > 0 and g >= 0 and tr.time_ms(g) >= now_ms:
            start = (tr.time_ms(g) - off) * 1e-3
            take = min(need, self.left_in_last)
            need -= take
            self.left_in_last -= take
        else:
            g = max(self.g_last + 1, tr.first_at_or_after(now_ms))
            start = (tr.time_ms(g) - off) * 1e-3
            take = min(need, MAHIMAHI_PACKET_BYTES)
            need -= take
            self.left_in_last = MAHIMAHI_PACKET_BYTES - take
        if need > 0:
            k = math.ceil(need / MAHIMAHI_PACKET_BYTES)   # further opportunities, used in order
            g += k
            self.left_in_last = k * MAHIMAHI_PACKET_BYTES - need
        self.g_last = g
        return start, (tr.time_ms(g) - off) * 1e-3


class NetworkSession:
    """The link inside one SimPy environment: queues, jitter RNG, byte counters, radio log."""

    def __init__(self, link: NetworkLink, env, rng: np.random.Generator):
        self.link = link
        self.cfg = link.cfg
        self.env = env
        self.rng = rng
        off = self.cfg.trace_offset_s
        if off < 0:
            up = link.traces["up"] or link.traces["down"]
            off = float(rng.uniform(0.0, up.period_ms * 1e-3)) if up is not None else 0.0
        self.offset_s = off
        self.dirs = {d: _Direction(link.rate_bytes_s(d), link.traces[d], off) for d in ("up", "down")}
        self.bytes = {"up": 0, "down": 0}
        self.messages = {"up": 0, "down": 0}
        self.deliveries: list[Delivery] = []
        self._radio_busy: list[tuple[float, float]] = []  # phone radio queued/on air
        self._promotions: list[tuple[float, float]] = []  # RRC promotions (idle -> connected)
        self._radio_last_s: float | None = None           # end of the latest radio activity
        self.promotions = 0

    def message_bytes(self, payload_bytes: int) -> int:
        return int(payload_bytes) + self.cfg.message_overhead_bytes

    def schedule(self, payload_bytes: int, direction: str) -> Delivery:
        """Enqueue a message now; return its delivery record (times fixed by FIFO order)."""
        if direction not in self.dirs:
            raise ValueError(f"direction must be 'up' or 'down', got {direction!r}")
        nbytes = self.message_bytes(payload_bytes)
        now = self.env.now
        d = self.dirs[direction]
        c = self.cfg
        half = self.link.rtt_at(now + self.offset_s) / 2.0     # one-way propagation, fixed when the message is sent
        t_radio = now if direction == "up" else now + half       # when the phone's radio is needed
        promo = 0.0
        if self._radio_idle_at(t_radio) and c.radio_promotion_s > 0:
            promo = c.radio_promotion_s           # RRC promotion before the message can move
            self._promotions.append((t_radio, t_radio + promo))
            self.promotions += 1
        start, depart = d.depart(now + promo, nbytes)
        jitter = float(self.rng.exponential(c.jitter_ms * 1e-3)) if c.jitter_ms > 0 else 0.0
        arrive = max(depart + half + jitter, d.last_arrive_s)
        d.last_arrive_s = arrive
        self.bytes[direction] += nbytes
        self.messages[direction] += 1
        rec = Delivery(direction, nbytes, now, start, depart, arrive, promo)
        self.deliveries.append(rec)
        if direction == "up":      # the phone holds the bytes from enqueue (after promotion) until they leave
            busy = (now + promo, depart)
        else:                      # the phone receives for as long as the bottleneck served them
            busy = (arrive - (depart - start), arrive)
        self._radio_busy.append(busy)
        self._radio_last_s = max(self._radio_last_s or 0.0, busy[1])
        return rec

    def _radio_idle_at(self, t: float) -> bool:
        """The radio is idle at ``t``: no activity yet, or the tail timer expired before ``t``."""
        last = self._radio_last_s
        return last is None or t > last + self.cfg.radio_tail_s

    def send(self, payload_bytes: int, direction: str):
        """SimPy process body: deliver a message; returns its :class:`Delivery` on arrival."""
        rec = self.schedule(payload_bytes, direction)
        d = self.dirs[direction]
        prev, mine = d.last_event, self.env.event()
        d.last_event = mine
        yield self.env.timeout(max(0.0, rec.arrive_s - self.env.now))
        # in order even when two arrivals are equal but their float timeouts round apart
        if prev is not None:
            yield prev
        mine.succeed()
        return rec

    def in_flight_s(self, end_s: float) -> float:
        """Time in [0, end_s] during which at least one message was queued, on the air or
        propagating (the union of its [sent, arrive] intervals): the time the run waited on
        the link unless something else overlapped it."""
        total, cur_a, cur_b = 0.0, None, None
        for a, b in sorted((d.sent_s, min(d.arrive_s, end_s)) for d in self.deliveries if d.sent_s < end_s):
            if cur_b is not None and a <= cur_b:
                cur_b = max(cur_b, b)
                continue
            if cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        if cur_b is not None:
            total += cur_b - cur_a
        return total

    # ------------------------------------------------------------ energy
    def radio_energy_j(self, end_s: float, last_tail_share: float = 1.0) -> dict[str, float]:
        """Radio energy by component: tx, rx, active, promotion, tail. Activity after ``end_s``
        is cut; the tail after the last activity (the radio stays connected ``radio_tail_s``
        after the last message, whoever looks at it) and the first promotion (the one that opened
        the session) are charged ``last_tail_share`` times: 1 for a run that is one session,
        tokens / session tokens for a run charged per session."""
        c = self.cfg
        out = {"radio_tx": self.bytes["up"] * 8 * c.radio_tx_nj_per_bit * 1e-9,
               "radio_rx": self.bytes["down"] * 8 * c.radio_rx_nj_per_bit * 1e-9,
               "radio_active": 0.0, "radio_promotion": 0.0, "radio_tail": 0.0}
        merged: list[list[float]] = []
        for a, b in sorted(self._radio_busy + self._promotions):
            a, b = max(0.0, a), min(end_s, b)
            if b < a:
                continue
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        spans = [min(end_s, b) - max(0.0, a) for a, b in self._promotions if b > 0 and a < end_s]
        promo = sum(spans)
        active = sum(b - a for a, b in merged) - promo
        if spans:    # the session's opening promotion, like its closing tail, is charged per session
            promo += spans[0] * (last_tail_share - 1.0)
        tail = 0.0
        for i, (_a, b) in enumerate(merged):
            if i + 1 < len(merged):
                tail += min(max(0.0, merged[i + 1][0] - b), c.radio_tail_s)
            else:
                tail += c.radio_tail_s * last_tail_share
        out["radio_active"] = active * c.radio_active_power_w
        out["radio_promotion"] = promo * c.radio_promotion_power_w
        out["radio_tail"] = tail * c.radio_tail_power_w
        return out
