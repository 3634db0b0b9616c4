"""Mobile-cloud speculative decoding: the machinery shared by the HyCo-family modes.

Our reconstruction of the design space named by "HyCo: Hybrid Drafting for Cost-Efficient
Mobile-Cloud Speculative Decoding" (only the title is public), from U-HLM (upload skipping),
Venkatesha et al. (pre-drafting during the round trip), DSD (links as latency +
bytes/bandwidth + queue) and "Speculation at a Distance" (when split drafting pays off).

Actors: the phone (drafter on its NPU/PIM platform, or NPU/GPU), the cellular link
(:mod:`ahasd_sim.hw.network`) and the cloud GPU (:mod:`ahasd_sim.hw.cloud`). A token
counts as output when it is committed *at the phone*: after the downlink message that
carries it (or the verdict on it) has arrived, or, for a token whose upload was skipped,
when the phone drafted it.

Options a round can use (``hyco.options``):

* ``split`` -- the phone drafts a window, uploads ids (+ top-k draft probabilities), the
  cloud verifies, the verdict comes back (one round trip per window). With
  ``predraft`` the phone drafts the next window while the verdict is in flight.
  With ``skip_max_entropy_nats`` the phone commits a token at the head of its chain
  without uploading it when its drafter entropy is below the threshold (U-HLM); its id
  rides on the next upload as context, it is never verified (a lossy choice: the
  number that differ from the target's token is reported).
* ``cloud_sd`` -- speculative decoding on the cloud GPU (drafter and target there), the
  committed tokens streamed down.
* ``cloud_ar`` -- the target alone on the cloud, every token streamed down.

Cloud options run as *sessions* of ``cloud_session_tokens`` tokens; when the first result
of a session reaches the phone it decides the next option and, if it stays in the cloud,
sends the continuation request at once (pipelined), so the cloud does not idle for a
round trip between sessions.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import simpy

from ...config.errors import ConfigError
from ...config.fields import param
from ...config.registry import config_section
from ...hw.cloud import PRICINGS, CloudServer
from ...metrics.stats import t_interval
from ...policies.base import Decision, RoundContext, VerifyOutcome
from ..base import Mode, TaskCost

OPTIONS = ("split", "cloud_sd", "cloud_ar")


@config_section("hyco")
@dataclass
class HycoConfig:
    """Mobile-cloud protocol and the hybrid mode's per-round choice (our HyCo reconstruction)."""

    token_id_bytes: int = param(4, doc="bytes of one token id", unit="B", ge=1, source="int32 token ids")
    draft_topk: int = param(16, doc="top-k (id, probability) pairs uploaded per verified draft token "
                            "(needed for lossless speculative sampling; 0 = ids only, greedy)", ge=0,
                            source="[R] top-k truncated uploads as in CU-HLM, arXiv 2505.11788")
    prob_bytes: int = param(2, doc="bytes of one uploaded probability", unit="B", ge=1, source="fp16")
    verdict_header_bytes: int = param(4, doc="bytes of a verdict or chunk header (accepted length)", unit="B", ge=0,
                                      source="int32")
    request_bytes: int = param(16, doc="bytes of a cloud request (option, start position, token budget)", unit="B",
                               ge=0, source="[R] four int32 fields")
    options: list[str] = param(["split", "cloud_sd", "cloud_ar"], doc="options the hybrid mode may choose from",
                               length=(1, len(OPTIONS)), item_choices=OPTIONS)
    predraft: str = param("auto", doc="hybrid: draft the next window while the verdict is in flight: always, never, or "
                          "auto (only when the expected wait for the verdict exceeds one draft forward: a pre-draft "
                          "spends a forward on the bonus position and is lost on a rejection)",
                          choices=("auto", "always", "never"), source="Venkatesha et al., arXiv 2505.21594; auto rule [R]")
    skip_max_entropy_nats: float = param(0.05, doc="hybrid: commit a head-of-chain draft without upload when its "
                                         "drafter entropy is at most this (U-HLM upload skipping; < 0 disables)",
                                         unit="nats", ge=-1.0, source="[R] U-HLM threshold rule, arXiv 2412.12687; value ours",
                                         low_reason="any value below 0 disables skipping: write -1")
    tpot_slo_ms: float = param(100.0, doc="hybrid: target on the run's mean time per output token (the cost-latency "
                               "knob): among options whose next round keeps the mean within it the one with the "
                               "most tokens per dollar wins, else the fastest", unit="ms", gt=0,
                               source="[R] assumption: 10 tok/s, above reading speed (~250 words/min, about 5.5 tok/s)")
    cloud_session_tokens: int = param(32, doc="tokens per cloud session before the phone decides again", ge=1)
    explore_every: int = param(8, doc="hybrid: every this many decisions, take the option tried longest ago among "
                               "those predicted cheaper than the choice (only they could displace it; 0 = never)",
                               ge=0, source="[R] assumption")
    explore_session_tokens: int = param(8, doc="hybrid: tokens of a cloud session taken to explore", ge=1,
                                        source="[R] assumption")
    ewma_alpha: float = param(0.3, doc="weight of the newest observation in the phone's estimates", gt=0, le=1)
    prior_acceptance: float = param(0.7, doc="acceptance the phone assumes before its first verdict", gt=0, lt=1,
                                    source="assumption")
    cloud_prefill: bool = param(False, doc="the run's first cloud request uploads the prompt's token ids and the "
                                "cloud prefills it (one forward over the prompt) before its first verification or "
                                "decode step (ttft_s includes both); false: the cloud holds the prompt already",
                                source="[R] a chat turn whose context the server does not cache")
    tpot_windows: int = param(8, doc="windows of equal token count for the TPOT confidence interval", ge=2)


def tpot_windows_s(commit_log: list[tuple[float, int]], n_tokens: int, windows: int) -> list[float]:
    """Time per output token in ``windows`` consecutive windows of equal token count.

    ``commit_log`` holds (time, committed count) after every commit at the phone; a window
    spans from the time the previous window's last token was committed (0 for the first)."""
    if n_tokens <= 0 or not commit_log:
        return []
    windows = max(1, min(windows, n_tokens))
    times = np.array([t for t, _ in commit_log])
    counts = np.array([c for _, c in commit_log])
    out = []
    prev_t, prev_k = 0.0, 0
    for w in range(1, windows + 1):
        k = round(w * n_tokens / windows)
        i = int(np.searchsorted(counts, k, side="left"))
        t = float(times[min(i, len(times) - 1)])
        out.append((t - prev_t) / max(1, k - prev_k))
        prev_t, prev_k = t, k
    return out


# ------------------------------------------------------------------ costs of both sides
class DeviceCosts:
    """What the phone's drafter and (device_only) verifier cost on the run's platform."""

    def __init__(self, costs, platform):
        self.c, self.p = costs, platform

    def draft(self, kv_len: int) -> TaskCost:
        if self.p.pim is not None:
            return self.c.draft_token(kv_len)               # drafter on its PIM ranks
        if self.p.npu is not None:                          # NPU alone, weights over the bus
            kv = self.c._kv(kv_len)
            return self.c._cached(("npu_draft", kv), lambda: self.c._sequential(
                self.c.ops(self.c.draft, 1, kv), lambda op: (self.c._op_on(op, "npu", "draft"), "npu")))
        return self.c.gpu_draft_token(kv_len)

    def verify(self, n_tokens: int, kv_len: int) -> TaskCost:
        if self.p.npu is not None:
            return self.c.verify(n_tokens, kv_len)
        return self.c.gpu_verify(n_tokens, kv_len)


def build_cloud_costs(cfg, draft, target):
    """StepCosts of the cloud server: the GPU of ``cloud.platform_config``, same model shapes."""
    from ...config.loader import load_config
    from ...hw.platform import Platform
    from ...paths import resolve_data_path
    from ..costs import StepCosts

    path = resolve_data_path(cfg.cloud.platform_config, cfg.source_file)
    if not path.is_file():
        raise ConfigError(cfg.source_of("cloud.platform_config"), "cloud.platform_config",
                          f"platform file '{cfg.cloud.platform_config}' not found")
    where = f"(the cloud platform chosen by cloud.platform_config in {cfg.source_of('cloud.platform_config')})"
    try:
        ccfg = load_config(path, [f"run.kv_len_quantum_tokens={cfg.run.kv_len_quantum_tokens}"])
        if not ccfg.gpu.enabled:
            raise ConfigError(cfg.source_of("cloud.platform_config"), "cloud.platform_config",
                              f"'{cfg.cloud.platform_config}' has no GPU (gpu.enabled: false); the cloud needs one")
        return StepCosts(Platform.build(ccfg), draft, target, ccfg)
    except ConfigError as exc:
        if exc.key_path == "cloud.platform_config":
            raise
        raise ConfigError(exc.source or str(path), exc.key_path, f"{exc.message} {where}") from None


# ------------------------------------------------------------------ shared base
class MobileCloudBase(Mode):
    """Commit log at the phone and the summary fields every mobile-cloud mode reports."""

    uses_cloud: ClassVar[bool] = True

    def __init__(self, env, ctx):
        super().__init__(env, ctx)
        cfg = ctx.cfg
        self.hy = cfg.hyco
        self.dev_costs = DeviceCosts(ctx.costs, ctx.platform)
        self.dev_lock = simpy.Resource(env, capacity=1)
        self.commit_log: list[tuple[float, int]] = []
        self.net = None
        self.cloud = None
        self.round_trips = 0
        self.tokens_not_uploaded = 0
        self.unverified_mismatch_tokens = 0
        self.chain_start = 0
        self.owner = int(ctx.extras.get("peer", 0))
        self.peers: list["MobileCloudBase"] = []
        if self.uses_cloud:
            if ctx.platform.network is None:
                raise ConfigError(cfg.source_of("network.enabled"), "network.enabled",
                                  f"mode '{self.name}' talks to the cloud: set network.enabled: true")
            # each phone has its own link and its own seeded generators (peer k: stream k)
            self.net = ctx.platform.network.open(env, np.random.default_rng([cfg.run.seed, 0x4E4554, self.owner,
                                                                             self.replay.seed]))
            shared = ctx.extras.get("cloud")
            if shared is not None:
                self.cloud_costs, self.cloud = shared
            else:
                self.cloud_costs = build_cloud_costs(cfg, ctx.costs.draft, ctx.costs.target)
                self.cloud = CloudServer(env, cfg.cloud, self._cloud_forward_cost,
                                         np.random.default_rng([cfg.run.seed, 0xC10D, self.replay.seed]))
            self.cloud.attach(self.owner, self.col)
            self._reserve_kv(cfg)
            self.done.callbacks.append(lambda _ev: self.cloud.release(self.owner))
            if self.owner == 0 and cfg.cloud.phones_per_gpu > 1:
                self.peers = make_peers(self, env, ctx)

    def _reserve_kv(self, cfg) -> None:
        """This phone's KV reservation on the server (its whole context: prompt + tokens to
        generate + one draft window; the drafter's KV too when the cloud may draft), and the
        server's block pool the first time (``cloud.kv_cache_gib``; 0: no limit)."""
        gib = cfg.cloud.kv_cache_gib
        if gib == 0:
            return
        cc = self.cloud_costs
        cloud_drafts = cfg.run.mode == "hybrid" and "cloud_sd" in cfg.hyco.options
        per_tok = cc.target.kv_bytes_per_token() + (cc.draft.kv_bytes_per_token() if cloud_drafts else 0.0)
        block_bytes = cfg.cloud.kv_block_tokens * per_tok
        srv = self.cloud
        if srv.kv is None:
            if gib > 0:
                pool = gib * 2**30
            else:
                pool = (cc.p.gpu.usable_memory_bytes - cc.target.weight_bytes()
                        - (cc.draft.weight_bytes() if cloud_drafts else 0))
            srv.use_kv_blocks(int(max(0.0, pool) // block_bytes))
        tokens = self.replay.kv_len_at(0) + self.n_tokens + self.max_round_tokens + 1
        srv.kv_tokens[self.owner] = tokens
        if srv.kv.blocks_for(tokens) > srv.kv.total_blocks:
            raise ConfigError(cfg.source_of("cloud.kv_cache_gib"), "cloud.kv_cache_gib",
                              f"one phone's KV cache ({srv.kv.blocks_for(tokens)} blocks of {cfg.cloud.kv_block_tokens} "
                              f"tokens, {tokens} tokens) does not fit the server's {srv.kv.total_blocks} blocks; "
                              "raise it or use -1 (derived) or 0 (unlimited)")

    def _cloud_forward_cost(self, kind: str, n_tokens: int, kv_len: int) -> TaskCost:
        cc = self.cloud_costs
        if kind == "draft":
            return cc._gpu_forward(cc.draft, n_tokens, kv_len, resident_other=0)
        return cc.gpu_verify(n_tokens, kv_len)

    def cloud_run(self, kind: str, n_tokens: int, kv_len: int, label: str, new_call: bool = True):
        return (yield from self.cloud.run(self.owner, kind, n_tokens, kv_len, label, new_call))

    def resolve(self, new_committed: int) -> bool:
        gen = self.gen
        restart = super().resolve(new_committed)
        if self.gen != gen:
            self.chain_start = self.committed
        self.commit_log.append((self.env.now, self.committed))
        return restart

    def commit_unverified(self, n: int) -> None:
        """Commit the next ``n`` drafted tokens at the phone without verification (upload skipped)."""
        c = self.committed
        n = min(n, self.n_tokens - c)
        if n <= 0:
            return
        wrong = int(np.count_nonzero(~self.replay.accept[c:c + n]))
        self.unverified_mismatch_tokens += wrong
        self.tokens_not_uploaded += n
        self.col.commit(range(c, c + n))
        self.committed = c + n
        self.frontier = max(self.frontier, self.committed)
        self.chain_start = self.committed      # replay continues on the recorded (target) path
        self.commit_log.append((self.env.now, self.committed))
        if self.committed >= self.n_tokens and not self.done.triggered:
            self.done.succeed()

    def device_task(self, cost: TaskCost, label: str):
        return (yield from self.run_task(cost, label, {"device": self.dev_lock}))

    def radio_sessions(self) -> float:
        """User sessions this run stands for: its tokens / ``network.radio_session_tokens`` (1
        when that is 0: the run is one session)."""
        per = self.net.cfg.radio_session_tokens if self.net is not None else 0
        return self.committed / per if per > 0 else 1.0

    def finalize(self) -> None:
        if self.net is not None:
            # the tail after a session's last message, once per session: energy per token does
            # not depend on how long the simulated run is
            for label, e in self.net.radio_energy_j(self.env.now, self.radio_sessions()).items():
                self.col.energy(self.net.link.device, e, label)

    def user_tpot_s(self) -> float:
        """This phone's time per output token so far: (last commit time - its arrival) / tokens
        committed."""
        if not (self.committed and self.commit_log):
            return float("nan")
        return (self.commit_log[-1][0] - getattr(self, "started_s", 0.0)) / self.committed

    def summary_fields(self, summary: dict[str, Any]) -> dict[str, Any]:
        n = int(summary["generated_tokens"])
        wins = tpot_windows_s(self.commit_log, n, self.hy.tpot_windows)
        # [low, high], cut at 0 (a window can commit its tokens in no time); none below 3 windows
        tpot, ci = t_interval(wins, lower=0.0)
        wall = float(summary["makespan_s"])
        by = self.cloud.costs_usd(self.owner, wall) if self.cloud else {p: 0.0 for p in PRICINGS}
        cost = by[self.cloud.cfg.pricing] if self.cloud else 0.0
        led = self.cloud.ledgers[self.owner] if self.cloud else None
        net = self.net
        out = {
            "acceptance_basis": acceptance_basis(summary),
            "tpot_s": tpot,
            "ttft_s": self.commit_log[0][0] if self.commit_log else float("nan"),
            "tpot_ci95_s": ci,
            "tpot_window_s": wins,
            "cloud_pricing": self.cloud.cfg.pricing if self.cloud else "",
            "cloud_cost_usd": cost,
            "cloud_cost_usd_per_1k_tokens": cost / n * 1000 if n else 0.0,
            "cloud_cost_usd_per_1k_tokens_by_pricing": {p: (v / n * 1000 if n else 0.0) for p, v in by.items()},
            "cloud_gpu_busy_s": led.gpu_busy_s if led else 0.0,
            "cloud_gpu_share_s": led.gpu_share_s if led else 0.0,
            "cloud_queue_wait_s": led.queue_wait_s if led else 0.0,
            "cloud_batch_wait_s": led.batch_wait_s if led else 0.0,
            "cloud_calls": led.calls if led else 0,
            "cloud_tokens_processed": led.tokens_processed if led else 0,
            "cloud_energy_j": led.energy_j if led else 0.0,
            "device_energy_per_token_j": summary["energy_per_token_j"],
            "uplink_bytes": net.bytes["up"] if net else 0,
            "downlink_bytes": net.bytes["down"] if net else 0,
            "uplink_messages": net.messages["up"] if net else 0,
            "downlink_messages": net.messages["down"] if net else 0,
            "radio_promotions": net.promotions if net else 0,
            "radio_sessions": self.radio_sessions() if net else 0.0,
            "network_trace_offset_s": net.offset_s if net else 0.0,
            "round_trips": self.round_trips,
            "tokens_not_uploaded": self.tokens_not_uploaded,
            "unverified_mismatch_tokens": self.unverified_mismatch_tokens,
        }
        if self.cloud is not None:
            out["cloud_fleet"] = fleet_stats(self, wall)
        return out


def acceptance_basis(summary: dict[str, Any]) -> str:
    """Whether the run's acceptance was measured with its own model pair or is a what-if: the
    trace's pair replayed under other shapes (time and energy from the shapes)."""
    from ...workload.models import get_model
    tm = summary.get("trace_models") or {}
    names = {"drafter": summary.get("draft_model"), "target": summary.get("target_model")}
    same = True
    for role, name in names.items():
        rec = (tm.get(role) or "").lower()
        try:
            disp = get_model(name).display_name.lower() if name else ""
        except Exception:               # an unknown name was refused earlier; be safe in reports
            disp = str(name).lower()
        same = same and bool(rec) and bool(disp) and rec.startswith(disp)
    if same:
        return "measured: the trace's own model pair"
    return (f"what-if: acceptance of the trace's pair ({tm.get('drafter')} -> {tm.get('target')}) with the time and "
            f"energy of the shapes {names['drafter']} -> {names['target']}")


def fleet_stats(primary: "MobileCloudBase", wall_s: float) -> dict[str, Any]:
    """Per-user TPOT over every phone on the GPU, SLO attainment, batching and utilisation.

    A phone's TPOT: the time of its last commit / tokens committed (the run ends when the
    run's own phone is done; the others are the load it shared the GPU with)."""
    srv = primary.cloud
    users = [primary, *primary.peers]
    tpots = np.array([u.user_tpot_s() for u in users], dtype=float)
    tpots = tpots[np.isfinite(tpots)]
    slo = srv.cfg.user_tpot_slo_ms * 1e-3
    kv = getattr(srv, "kv", None)
    pct = (lambda q: float(np.percentile(tpots, q)) * 1e3) if tpots.size else (lambda q: float("nan"))
    # each entry's combination over windows is declared in metrics.combine.RULES
    return {"phones_per_gpu": len(users), "user_tpot_p50_ms": pct(50), "user_tpot_p90_ms": pct(90),
            "user_tpot_p99_ms": pct(99), "user_tpot_ms": (tpots * 1e3).tolist(),
            "slo_tpot_ms": slo * 1e3, "slo_attainment": float((tpots <= slo).mean()) if tpots.size else 0.0,
            "gpu_utilization": srv.busy_s / wall_s if wall_s > 0 else 0.0, "iterations": srv.iterations,
            "mean_batch_forwards": srv.batched_forwards / srv.iterations if srv.iterations else 0.0,
            "mean_batch_tokens": srv.batched_tokens / srv.iterations if srv.iterations else 0.0,
            "user_tokens_committed": [u.committed for u in users],
            "kv_blocks_total": kv.total_blocks if kv else 0, "kv_peak_blocks": kv.peak_blocks if kv else 0,
            "kv_refusals": kv.refusals if kv else 0,
            "admission_wait_p90_ms": float(np.percentile([srv.ledgers[u.owner].admission_wait_s for u in users], 90))
            * 1e3 if kv else 0.0}


def make_peers(primary: "MobileCloudBase", env, ctx) -> list["MobileCloudBase"]:
    """The other ``cloud.phones_per_gpu - 1`` phones: the same mode, each on a trace window
    drawn (seeded by the run's seed and window) from the prompts where a window fits, with
    its own replay, policy, link and collector; they share the primary's cloud server."""
    from ...metrics.collector import Collector
    from ...policies import make_policy, policy_needs_fit_data
    from ...traces.load import load_full_trace as _load_full_trace, load_run_trace
    from ..base import RunContext
    from ..replay import TraceReplay

    cfg, run = ctx.cfg, ctx.cfg.run
    full = _load_full_trace(cfg) if run.trace else None
    rng = np.random.default_rng([run.seed, 0x9EE5, primary.replay.seed])
    fits = []
    if full is not None:
        n = len(full)
        fits = [i for i, b in enumerate(full.prompt_bounds()) if n - int(b[0]) >= run.generated_tokens]
    peers = []
    for k in range(1, cfg.cloud.phones_per_gpu):
        if fits:
            _, sim, held = load_run_trace(cfg, int(rng.choice(fits)), full)
        else:                                   # a trace handed in directly: every phone replays it
            sim, held = primary.replay.trace, None
        prng = np.random.default_rng([run.seed, 0x9EE5, primary.replay.seed, k])
        policy = make_policy(run.policy, cfg.policy, prng, held if policy_needs_fit_data(run.policy) else None)
        col = Collector(devices=sorted(ctx.platform.devices()), keep_intervals=False,
                        keep_events=ctx.collector.keep_events)
        pctx = RunContext(cfg=cfg, platform=ctx.platform, costs=ctx.costs,
                          replay=TraceReplay(sim, ctx.n_tokens, primary.replay.seed * 7919 + k), policy=policy,
                          collector=col, rng=prng, n_tokens=ctx.n_tokens,
                          extras={"peer": k, "cloud": (primary.cloud_costs, primary.cloud)}, audit=ctx.audit)
        peers.append(type(primary)(env, pctx))
    return peers


# ------------------------------------------------------------------ the engine
@dataclass
class _Window:
    """One policy round of phone drafts."""

    round_id: int
    idx: int = 0          # tokens the policy has seen in this round
    closed: bool = False


@dataclass
class _Session:
    option: str
    budget: int
    start: int | None            # None: continue where the cloud stands
    sid: int
    first: simpy.Event = None
    last: simpy.Event = None
    sent_s: float = 0.0
    prev_arrive_s: float | None = None   # arrival of this session's previous chunk at the phone
    prefill: int = 0                     # prompt tokens the cloud prefills before the session's first step


@dataclass
class _Estimates:
    """What the phone knows: updated only when a message reaches it."""

    acceptance: float
    window_split: float            # drafts per phone window
    window_cloud_sd: float         # drafts per cloud speculative round
    tokens_per_split: float        # tokens committed per split round (skipped ones included)
    tokens_per_cloud_sd: float     # tokens committed per cloud speculative round
    net_rt_s: float
    ar_interval_s: float
    cloud_verify_s: float          # the cloud's time per split verification (queueing included)
    observations: int = 0
    last_obs_s: float = 0.0
    history: list = field(default_factory=list)


class MobileCloudEngine(MobileCloudBase):
    """Split rounds and cloud sessions, combined per round by :meth:`choose`."""

    options: ClassVar[tuple[str, ...]] = OPTIONS
    predraft: ClassVar[bool] = False
    skip: ClassVar[bool] = False
    session_tokens: ClassVar[int | None] = None     # None: hyco.cloud_session_tokens
    required_devices = ("network",)

    def __init__(self, env, ctx):
        super().__init__(env, ctx)
        self.configure()
        self.prompt_pending = bool(self.hy.cloud_prefill)
        self.next_window: _Window | None = None
        self.pending_ids = 0          # skipped tokens whose ids have not reached the cloud yet
        self.cloud_pos = 0
        self.cloud_inbox = simpy.Store(env)
        self.sessions = 0
        self.rounds_by_option = {o: 0 for o in OPTIONS}
        # The cloud's drafter runs its own instance of the drafting policy (separate state on a
        # separate machine); policies fitted on held-out data share the phone's fitted instance.
        from ...policies import make_policy, policy_needs_fit_data
        rp = ctx.cfg.run.policy
        self.cloud_policy = self.policy if policy_needs_fit_data(rp) else make_policy(
            rp, ctx.cfg.policy, np.random.default_rng([ctx.cfg.run.seed, 0xC1]), None)
        self.decisions = 0
        self.exploring = False
        self.last_tried: dict[str, int] = {}
        a = self.hy.ewma_alpha
        self._a = a
        net = self.net.link
        kv0 = self.replay.kv_len_at(0)
        w0 = float(max(1, self.max_round_tokens // 2))
        a0 = self.hy.prior_acceptance
        t0 = (1 - a0 ** (w0 + 1)) / (1 - a0)      # i.i.d. prior, replaced by observations
        self.est = _Estimates(acceptance=a0, window_split=w0, window_cloud_sd=w0, tokens_per_split=t0,
                              tokens_per_cloud_sd=t0,
                              net_rt_s=net.rtt_s + self._up_bytes(4) / net.rate_bytes_s("up")
                              + self._down_bytes(1) / net.rate_bytes_s("down"),
                              ar_interval_s=self.cloud_costs.gpu_verify(1, kv0).duration_s,
                              cloud_verify_s=self.cloud_costs.gpu_verify(int(w0) + 1, kv0).duration_s)

    def configure(self) -> None:
        """Hook: set ``options``, ``predraft``, ``skip``, ``session_tokens`` per mode."""

    # ------------------------------------------------------------ bytes
    def _up_bytes(self, n_drafts: int, piggy: int = 0) -> int:
        h = self.hy
        return h.request_bytes + n_drafts * (h.token_id_bytes + h.draft_topk * (h.token_id_bytes + h.prob_bytes)) \
            + piggy * h.token_id_bytes

    def _down_bytes(self, n_tokens: int) -> int:
        return self.hy.verdict_header_bytes + n_tokens * self.hy.token_id_bytes

    # ------------------------------------------------------------ lifecycle
    def start(self):
        self.started_s = self.env.now
        self.env.process(self._cloud_worker())
        self.env.process(self._device())
        rate = self.ctx.cfg.cloud.arrival_rate_per_s
        if rate > 0 and self.peers:
            # open arrivals: the other phones arrive as a Poisson process (seeded by the run's seed
            # and window), not all at t = 0 in step
            rng = np.random.default_rng([self.ctx.cfg.run.seed, 0xA771, self.replay.seed])
            at = np.cumsum(rng.exponential(1.0 / rate, size=len(self.peers)))
            for peer, t in zip(self.peers, at):
                self.env.process(self._arrive(peer, float(t)))
        else:
            for peer in self.peers:
                peer.start()
        return self.done

    def _arrive(self, peer, at_s: float):
        yield self.env.timeout(at_s)
        peer.start()

    def _device(self):
        nxt = None
        while not self.done.triggered:
            opt = nxt or self.choose()
            nxt = None
            if opt == "split":
                self.rounds_by_option["split"] += 1
                yield from self._split_round()
            else:
                nxt = yield from self._cloud_option(opt)

    # ------------------------------------------------------------ decision
    def _observe(self, **kv) -> None:
        e, a = self.est, self._a
        for k, v in kv.items():
            setattr(e, k, (1 - a) * getattr(e, k) + a * v)
        e.observations += 1
        e.last_obs_s = self.env.now

    def predict(self) -> dict[str, tuple[float, float]]:
        """Per option: (predicted time per output token s, predicted cloud USD per token)."""
        e = self.est
        kv = self.replay.kv_len_at(self.committed)
        # observed tokens per round, not an i.i.d. formula: acceptance is bursty
        tok_split, tok_sd = max(1.0, e.tokens_per_split), max(1.0, e.tokens_per_cloud_sd)
        t_dd = self.dev_costs.draft(kv).duration_s
        cc = self.cloud_costs
        t_dc = cc.gpu_draft_token(kv).duration_s
        t_ar = cc.gpu_verify(1, kv).duration_s
        price = self.cloud.cfg
        per_s = price.usd_per_gpu_hour / 3600.0

        def usd(gpu_s, tokens, calls, period_s):     # one round's bill under the run's pricing
            if price.pricing == "shared_busy":
                return gpu_s * per_s
            if price.pricing == "dedicated_wall":
                return period_s * per_s / price.phones_per_gpu
            return tokens * price.usd_per_1m_tokens * 1e-6 + calls * price.usd_per_call

        sess = self.session_tokens or self.hy.cloud_session_tokens
        out = {}
        for opt in self.options:
            g = max(1.0, e.window_split if opt == "split" else e.window_cloud_sd)
            gi = max(1, int(round(g)))
            t_v = cc.gpu_verify(gi + 1, kv).duration_s
            if opt == "split":
                rt = e.net_rt_s + t_v
                period = max(g * t_dd, rt) if self.predraft_now(self.committed) else g * t_dd + rt
                out[opt] = (period / tok_split, usd(t_v, gi + 1, 1, period) / tok_split)
            elif opt == "cloud_sd":
                period = g * t_dc + t_v
                out[opt] = (period / tok_sd, usd(period, 2 * gi + 1, tok_sd / sess, period) / tok_sd)
            else:
                period = max(t_ar, e.ar_interval_s)
                out[opt] = (period, usd(t_ar, 1, 1 / sess, period))
        return out

    def choose(self) -> str:
        if len(self.options) == 1:
            return self.options[0]
        pred = self.predict()
        slo = self.hy.tpot_slo_ms * 1e-3
        untried = [o for o in self.options if self.rounds_by_option[o] == 0]
        # The target is on the run's mean TPOT (since the first commit): an option is acceptable when
        # the mean after its next round (h tokens at its predicted TPOT) stays within the target, so
        # time saved earlier buys slower, cheaper rounds and a deficit forces faster ones.
        t0, c0 = self.commit_log[0] if self.commit_log else (self.env.now, self.committed)
        el, cm = self.env.now - t0, self.committed - c0
        sess = self.session_tokens or self.hy.cloud_session_tokens

        def h(o):
            return max(1.0, self.est.tokens_per_split) if o == "split" else float(sess)
        ok = [o for o in pred if (el + h(o) * pred[o][0]) / (cm + h(o)) <= slo]
        self.decisions += 1
        every = self.hy.explore_every
        exploit = min(ok, key=lambda o: (pred[o][1], pred[o][0])) if ok else min(pred, key=lambda o: pred[o][0])
        # Only a cheaper option can displace the choice when its (stale) latency estimate is wrong:
        # a dearer one is taken only if the choice misses the target, which its own rounds show.
        cheaper = [o for o in self.options if o != exploit and pred[o][1] < pred[exploit][1]]
        self.exploring = True
        if untried:                 # explore every option once before trusting the predictions
            best = untried[0]
        elif every and cheaper and self.decisions % every == 0:
            best = min(cheaper, key=lambda o: self.last_tried.get(o, -1))
        else:
            self.exploring = False
            best = exploit
        self.last_tried[best] = self.decisions
        self.col.event(self.env.now, "hyco_decision", option=best, info_time_s=self.est.last_obs_s,
                       observations=self.est.observations,
                       **{f"pred_tpot_{o}_s": v[0] for o, v in pred.items()})
        return best

    def predraft_now(self, pos: int) -> bool:
        """Pre-draft during this round trip? (``predraft``: False/True, or "auto": when the phone
        expects to wait longer than one draft forward.)"""
        if self.predraft != "auto":
            return bool(self.predraft)
        kv = self.replay.kv_len_at(pos)
        g = max(1, int(round(self.est.window_split)))
        wait = self.est.net_rt_s + self.cloud_costs.gpu_verify(g + 1, kv).duration_s
        return wait > self.dev_costs.draft(kv).duration_s

    # ------------------------------------------------------------ phone drafting
    def _new_window(self) -> _Window:
        return _Window(self.policy.begin_round(self.split_context()))

    def split_context(self) -> RoundContext:
        """A phone round's context with what the phone has measured (round-trip-aware policies)."""
        kv = self.replay.kv_len_at(self.frontier)
        e = self.est
        return RoundContext(self.env._now, self.min_round_tokens, self.max_round_tokens, round_trip_s=e.net_rt_s,
                            draft_token_s=self.dev_costs.draft(kv).duration_s, verify_s=e.cloud_verify_s,
                            predraft=bool(self.predraft_now(self.committed)))

    def cloud_context(self, kv: int) -> RoundContext:
        """A cloud speculative round's context: drafter and verifier co-located (no round trip)."""
        cc = self.cloud_costs
        g = max(1, int(round(self.est.window_cloud_sd)))
        return RoundContext(self.env._now, self.min_round_tokens, self.max_round_tokens, round_trip_s=0.0,
                            draft_token_s=cc.gpu_draft_token(kv).duration_s,
                            verify_s=cc.gpu_verify(g + 1, kv).duration_s)

    def _draft_into(self, w: _Window, stop: simpy.Event | None = None, skip: bool = False):
        """Draft tokens of window ``w`` until the policy stops it or ``stop`` has fired."""
        ctr = self.col.counters
        thr = self.hy.skip_max_entropy_nats
        while not w.closed and not self.done.triggered:
            if stop is not None and stop.triggered:
                return
            pos = self.frontier
            if pos - self.committed >= self.max_round_tokens * 2:
                return                                  # at most one window ahead of the one in flight
            view = self.replay.view(pos, self.chain_start, w.idx, self.env.now)
            if view is None:                            # end of the slice or of the prompt
                w.closed = True
                return
            t0 = yield from self.device_task(self.dev_costs.draft(self.replay.kv_len_at(pos)), "draft")
            if self.col.keep_events:
                self.col.event(t0, "draft_token", position=pos, duration_s=self.env.now - t0)
            decision = self.policy.decide(view)
            if decision is Decision.STOP_DISCARD:
                ctr.discarded_draft_forwards += 1
                w.closed = True
                return
            w.idx += 1
            if skip and thr >= 0 and pos == self.committed and view.entropy_nats <= thr:
                self.frontier = pos + 1
                self.commit_unverified(1)             # U-HLM: confident head token, no upload
                self.pending_ids += 1
            else:
                ctr.drafted_tokens += 1
                if self.replay.is_off_path(pos, self.chain_start):
                    ctr.offpath_drafted_tokens += 1
                    if self.replay.is_synthetic(pos, self.chain_start):
                        ctr.offpath_synthetic_tokens += 1
                self.frontier = pos + 1
            if decision is Decision.STOP_AFTER or w.idx >= self.max_round_tokens:
                w.closed = True

    # ------------------------------------------------------------ split round
    def _split_round(self):
        w = self.next_window if self.next_window is not None else self._new_window()
        self.next_window = None
        round_start_committed = self.committed
        yield from self._draft_into(w, skip=self.skip)
        if self.done.triggered:
            return
        start = self.committed
        n = self.frontier - start
        if n == 0 and w.idx > 0 and self.pending_ids == 0:
            return                                     # the whole window was committed locally
        if self.committed >= self.n_tokens:
            return
        piggy, self.pending_ids = self.pending_ids, 0
        verdict = self.env.event()
        self.round_trips += 1
        sent = self.env.now
        self.env.process(self._remote_verify(start, n, piggy, verdict, w.round_id))
        if self.predraft_now(start):
            w2 = self._new_window()
            yield from self._draft_into(w2, stop=verdict)
            self.next_window = w2
        yield verdict
        new_c, cloud_s, promo_s = verdict.value
        gen = self.gen
        self.resolve(new_c)
        self.col.event(self.env.now, "commit", position=start, round_id=w.round_id, committed=self.committed)
        # this round's drafts the target accepted; not the counter's growth, which also counts a
        # pre-draft of the next window that the bonus token happened to match (n_accepted > n)
        acc = min(n, self.replay.accepted_run(start, n))
        self.policy.on_verify(VerifyOutcome(n, acc, min(new_c, self.n_tokens) - start, self.env.now - sent,
                                            self.env.now, round_id=w.round_id))
        if self.gen != gen:
            self.next_window = None                    # pre-drafts were built on a rejected token
        self._observe(acceptance=(acc / n) if n else self.est.acceptance, window_split=float(max(n, 1)),
                      tokens_per_split=float(self.committed - round_start_committed),
                      net_rt_s=max(0.0, self.env.now - sent - cloud_s - promo_s), cloud_verify_s=cloud_s)

    def _take_prompt(self) -> int:
        """Prompt tokens the next message carries (``hyco.cloud_prefill``: the run's first one only)."""
        if not getattr(self, "prompt_pending", False):
            return 0
        self.prompt_pending = False
        return int(self.replay.kv_len_at(0))

    def _prefill(self, tokens: int):
        """The cloud's forward over an uploaded prompt (starts the request: one call, one wait)."""
        yield from self.cloud_run("verify", tokens, 0, "cloud_prefill")

    def _remote_verify(self, start: int, n: int, piggy: int, verdict: simpy.Event, round_id: int):
        prompt = self._take_prompt()
        up = yield from self.net.send(self._up_bytes(n, piggy) + prompt * self.hy.token_id_bytes, "up")
        self.col.event(up.arrive_s, "uplink", position=start, round_id=round_id, sent_s=up.sent_s)
        t_in = self.env.now
        kv = self.replay.kv_len_at(start)
        if prompt:
            yield from self._prefill(prompt)
        t0, t1 = yield from self.cloud_run("verify", n + 1 + piggy, kv, "cloud_verify", new_call=not prompt)
        self.col.counters.verifications += 1
        new_c = self.verify_span(start, n)             # the cloud's verdict (target side)
        self.col.event(t0, "cloud_verify", position=start, round_id=round_id, end_s=t1, n_tokens=n)
        cloud_s = self.env.now - t_in
        down = yield from self.net.send(self._down_bytes(1), "down")
        self.col.event(down.arrive_s, "downlink", position=start, round_id=round_id, sent_s=down.sent_s)
        # the phone knows when its radio had to wake up: that wait is not the link's round trip
        verdict.succeed((new_c, cloud_s, up.promotion_s + down.promotion_s))

    # ------------------------------------------------------------ cloud sessions
    def _request(self, s: _Session, piggy: int):
        s.sent_s = self.env.now
        s.prefill = self._take_prompt()
        yield from self.net.send(self._up_bytes(0, piggy) + s.prefill * self.hy.token_id_bytes, "up")
        self.cloud_inbox.put(s)

    def _cloud_option(self, opt: str):
        """Run cloud sessions of option ``opt`` until the phone picks another option; return it."""
        budget = self.session_tokens or self.hy.cloud_session_tokens
        first_budget = min(budget, self.hy.explore_session_tokens) if self.exploring else budget
        self.next_window = None
        if self.frontier > self.committed:            # phone pre-drafts are dropped: the cloud takes over
            self.col.counters.killed_tokens += self.frontier - self.committed
            self.gen += 1
            self.frontier = self.chain_start = self.committed
        s = self._session(opt, first_budget, self.committed)
        bound = self.committed + first_budget         # the cloud produces at least this far
        piggy, self.pending_ids = self.pending_ids, 0
        self.round_trips += 1
        self.env.process(self._request(s, piggy))
        while True:
            self.rounds_by_option[opt] += 1
            yield s.first | self.done
            if self.done.triggered:
                return None
            nxt = self.choose()
            s2 = None
            if nxt == opt and bound < self.n_tokens:
                s2 = self._session(opt, budget, None)
                bound += budget
                self.round_trips += 1
                self.env.process(self._request(s2, 0))
            yield s.last | self.done
            if self.done.triggered or s2 is None:
                return nxt
            s = s2

    def _session(self, opt, budget, start) -> _Session:
        self.sessions += 1
        return _Session(opt, budget, start, self.sessions, self.env.event(), self.env.event())

    def _cloud_worker(self):
        cc = self.cloud_costs
        ctr = self.col.counters
        while True:
            s = yield self.cloud_inbox.get()
            got = self.env.now
            if s.start is not None:
                self.cloud_pos = s.start
            produced = 0
            first_call = True
            if s.prefill:
                yield from self._prefill(s.prefill)
                first_call = False
            while produced < s.budget and self.cloud_pos < self.n_tokens:
                start = self.cloud_pos
                kv = self.replay.kv_len_at(start)
                if s.option == "cloud_ar":
                    yield from self.cloud_run("verify", 1, kv, "cloud_decode", new_call=first_call)
                    ctr.verifications += 1
                    n, new_c = 0, start + 1
                else:
                    pol = self.cloud_policy
                    rid = pol.begin_round(self.cloud_context(kv))
                    n, t_round = 0, self.env.now
                    while n < self.max_round_tokens:
                        view = self.replay.view(start + n, start, n, self.env.now)
                        if view is None:
                            break
                        yield from self.cloud_run("draft", 1, self.replay.kv_len_at(start + n), "cloud_draft",
                                                  new_call=first_call and n == 0)
                        d = pol.decide(view)
                        if d is Decision.STOP_DISCARD:
                            ctr.discarded_draft_forwards += 1
                            break
                        ctr.drafted_tokens += 1
                        n += 1
                        if d is Decision.STOP_AFTER:
                            break
                    yield from self.cloud_run("verify", n + 1, kv, "cloud_verify", new_call=False)
                    ctr.verifications += 1
                    new_c = self.verify_span(start, n)
                    a = new_c - start - 1
                    pol.on_verify(VerifyOutcome(n, a, min(new_c, self.n_tokens) - start,
                                                        self.env.now - t_round, self.env.now, round_id=rid))
                first_call = False
                self.cloud_pos = min(new_c, self.n_tokens)
                produced += self.cloud_pos - start
                last = produced >= s.budget or self.cloud_pos >= self.n_tokens
                first = produced == self.cloud_pos - start
                # the first chunk's header carries the cloud's time since the request arrived
                self.env.process(self._deliver(s, start, n, self.cloud_pos, first, last,
                                               self.env.now - got if first else 0.0))
            if produced == 0:                       # nothing left to generate
                for ev in (s.first, s.last):
                    if not ev.triggered:
                        ev.succeed()

    def _deliver(self, s: _Session, start: int, n_drafts: int, new_c: int, first: bool, last: bool,
                 cloud_s: float = 0.0):
        down = yield from self.net.send(self._down_bytes(new_c - start), "down")
        self.col.event(down.arrive_s, "downlink", position=start, session=s.sid, sent_s=down.sent_s)
        if self.committed != start and not self.done.triggered:
            raise RuntimeError(f"cloud chunk for position {start} reached the phone at {self.committed}")
        obs: dict[str, float] = {}            # one observation per arrived message
        if not self.done.triggered:
            if n_drafts:
                self.frontier = start + n_drafts       # the cloud's drafts, decided by this chunk
            acc_before = self.col.counters.accepted_tokens
            self.resolve(new_c)
            self.col.event(self.env.now, "commit", position=start, session=s.sid, committed=self.committed)
            if n_drafts:
                obs.update(acceptance=(self.col.counters.accepted_tokens - acc_before) / n_drafts,
                           window_cloud_sd=float(n_drafts), tokens_per_cloud_sd=float(new_c - start))
        if first and s.start is not None:     # a fresh request: its round trip shows the link
            obs["net_rt_s"] = max(0.0, self.env.now - s.sent_s - cloud_s)
        if s.option == "cloud_ar" and s.prev_arrive_s is not None:
            obs["ar_interval_s"] = self.env.now - s.prev_arrive_s
        if obs:
            self._observe(**obs)
        s.prev_arrive_s = self.env.now
        if first and not s.first.triggered:
            s.first.succeed()
        if last and not s.last.triggered:
            s.last.succeed()

    def stats(self) -> dict[str, Any]:
        return {"rounds_by_option": dict(self.rounds_by_option), "cloud_sessions": self.sessions,
                "estimates_at_end": {"acceptance": self.est.acceptance, "window_split": self.est.window_split,
                                     "window_cloud_sd": self.est.window_cloud_sd,
                                     "tokens_per_split": self.est.tokens_per_split,
                                     "tokens_per_cloud_sd": self.est.tokens_per_cloud_sd,
                                     "net_rt_s": self.est.net_rt_s, "ar_interval_s": self.est.ar_interval_s,
                                     "cloud_verify_s": self.est.cloud_verify_s}}
