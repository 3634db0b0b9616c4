"""Cloud verifier (section ``cloud``): a server GPU shared by phones, continuous batching, price.

The server GPU is the validated GPU model of another platform file (default: the H200
platform, ``hw_configs/platform_server_h200_pcie5.yaml``), so its step times are the
calibrated ones. ``phones_per_gpu`` phones share it (the run's phone and N - 1 others that
run the same mode on other trace windows, :mod:`ahasd_sim.modes.mobile_cloud`).

Continuous batching (iteration-level scheduling, Orca, OSDI 2022): forwards wait in one
FIFO queue; each iteration takes every waiting forward of the head request's model (at
most ``max_batch``) and runs them as one batched forward; a forward that arrives during an
iteration joins the next (``batch_window_ms`` > 0: an idle GPU waits until the head forward
has waited that long, so later arrivals join its iteration). Batched forward time, from the GPU model: one forward over all
the batch's tokens with an empty KV cache (weights read once, FLOPs of every token) plus,
per forward, its own KV-dependent attention time (its forward at its KV length minus the
same forward at the shortest KV). A batch of one is exactly the single forward.

Requests (the first forward of a verification, a streamed generation or a cloud session)
may in addition wait, once per request: a fixed ``queue_delay_ms`` plus, at ``utilization``
rho > 0, an M/M/1 wait for tenants that are not simulated (0 with probability 1 - rho,
else Exponential with mean S / (1 - rho), S the request's first forward).

Price (``pricing``), per phone:
* ``shared_busy`` (default) -- ``usd_per_gpu_hour`` x the phone's share of the GPU's busy
  time: each iteration's time split over its forwards by token count. The provider's
  marginal cost when idle time is resold; at one phone it is the batch-1 busy time.
* ``dedicated_wall`` -- ``usd_per_gpu_hour`` x the run's wall time / ``phones_per_gpu``:
  the GPU is rented for the session whether busy or not.
* ``per_token_api`` -- ``usd_per_1m_tokens`` x tokens the server processed for the phone
  (inputs of its forwards, drafts included) + ``usd_per_call`` x its requests.
All three are reported (``cloud_cost_usd_per_1k_tokens_by_pricing``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..config.fields import param
from ..config.registry import config_section

PRICINGS = ("shared_busy", "dedicated_wall", "per_token_api")


@config_section("cloud")
@dataclass
class CloudConfig:
    """The cloud server of mobile-cloud modes."""

    platform_config: str = param("hw_configs/platform_server_h200_pcie5.yaml",
                                 doc="platform file whose GPU is the cloud server (relative: to the current "
                                     "directory, the config file, then the repository)")
    pricing: str = param("shared_busy", doc="how the phone's cloud use is billed: shared_busy (its token share "
                         "of the GPU's busy time at the achieved batch), dedicated_wall (the GPU's wall time / "
                         "phones_per_gpu), per_token_api (per token processed + per request); all three are "
                         "reported, this one is cloud_cost_usd_per_1k_tokens", choices=PRICINGS,
                         source="default: a provider that batches many phones and resells idle time charges its "
                         "marginal GPU time; the other two bound it (docs/mobile_cloud.md)")
    usd_per_gpu_hour: float = param(3.50, doc="price of one server GPU-hour", unit="USD/GPU-h", ge=0,
                                    source="H200 on-demand from 3.50 USD/GPU-h, GPUaaS.com (May 2026), "
                                    "https://gpuaas.com/blog/h200-vs-h100-rental-decision-guide-2026 "
                                    "(other 2026 quotes: 2.0-4.5 USD/h)")
    usd_per_call: float = param(0.0, doc="per_token_api: price per request", unit="USD", ge=0,
                                source="serverless APIs bill tokens only")
    usd_per_1m_tokens: float = param(0.10, doc="per_token_api: price per million tokens processed",
                                     unit="USD/Mtoken", ge=0,
                                     source="Together AI serverless price tier for models up to 4B parameters, "
                                     "0.10 USD per 1M tokens, https://www.together.ai/pricing (grade C: "
                                     "2024-25 tier table, not re-checked)")
    utilization: float = param(0.0, doc="utilisation rho of tenants that are not simulated (an M/M/1 wait per "
                               "request; 0 = none)", ge=0, lt=1)
    queue_delay_ms: float = param(0.0, doc="fixed extra wait per request (admission, scheduling)", unit="ms", ge=0)
    phones_per_gpu: int = param(1, doc="phones sharing one server GPU (the run's phone + others running the same "
                                "mode on other trace windows)", ge=1, le=4096,
                                bound_reason="each phone is simulated; 4096 is 16x vLLM's default batch of 256")
    arrival_rate_per_s: float = param(0.0, doc="open arrivals: the other phones_per_gpu - 1 phones arrive as a "
                                      "Poisson process of this rate (seeded per run and window) instead of all at "
                                      "t = 0; each phone's TPOT counts from its arrival (0 = closed fleet, in step)",
                                      unit="1/s", ge=0, le=1e6, source="[R] Poisson session arrivals",
                                      bound_reason="a million phone arrivals per second on one GPU is no fleet")
    max_batch: int = param(256, doc="most forwards in one continuous-batching iteration (1 = no batching)", ge=1,
                           source="vLLM's default max_num_seqs = 256")
    batch_window_ms: float = param(0.0, doc="batching window: an idle GPU waits this long after the first "
                                   "forward arrives before forming the iteration (0 = greedy: start at once)",
                                   unit="ms", ge=0, source="[R] timed batching as in Triton's dynamic batcher "
                                   "max_queue_delay; 0 keeps iteration-level scheduling (Orca, OSDI 2022)")
    kv_cache_gib: float = param(0.0, doc="KV-cache memory of the server for admission control: 0 = unlimited; "
                                "> 0 = this many GiB; -1 = derived: the GPU's usable memory minus the weights of the "
                                "models it serves. A phone is admitted at its first request when blocks for its whole "
                                "context (prompt + tokens to generate + one draft window) are free, else it waits "
                                "(FIFO) until a finished phone releases its blocks", unit="GiB", ge=-1.0,
                                low_reason="write -1 for the derived size", source="[R] reservation-based admission "
                                "(no preemption); paged blocks as in vLLM, Kwon et al., SOSP 2023")
    kv_block_tokens: int = param(16, doc="tokens per KV-cache block (paged allocation)", unit="tokens", ge=1,
                                 source="vLLM's default block_size = 16")
    user_tpot_slo_ms: float = param(50.0, doc="per-user TPOT target for SLO attainment with shared GPUs",
                                    unit="ms", gt=0, source="assumption: 20 tok/s, faster than reading")


@dataclass
class CloudLedger:
    """One phone's use of the server."""

    gpu_busy_s: float = 0.0        # time of the iterations that ran its forwards
    gpu_share_s: float = 0.0       # its token share of those iterations
    queue_wait_s: float = 0.0      # per-request waits (queue_delay_ms, utilization)
    batch_wait_s: float = 0.0      # waiting for an iteration to start
    calls: int = 0
    forwards: int = 0
    tokens_processed: int = 0
    energy_j: float = 0.0          # its share of the GPU's dynamic energy
    admission_wait_s: float = 0.0  # waiting for KV blocks before its first request
    by_task_s: dict = field(default_factory=dict)


class KvBlocks:
    """Paged KV memory: ``total_blocks`` blocks of ``block_tokens`` tokens, reserved per owner.

    A reservation for ``tokens`` takes ceil(tokens / block_tokens) blocks; it succeeds exactly
    when that many blocks are free (nothing is taken otherwise)."""

    def __init__(self, total_blocks: int, block_tokens: int):
        if total_blocks < 0 or block_tokens < 1:
            raise ValueError("need total_blocks >= 0 and block_tokens >= 1")
        self.total_blocks = int(total_blocks)
        self.block_tokens = int(block_tokens)
        self.held: dict[int, int] = {}
        self.refusals = 0
        self.peak_blocks = 0

    def blocks_for(self, tokens: int) -> int:
        return -(-int(tokens) // self.block_tokens)

    @property
    def free_blocks(self) -> int:
        return self.total_blocks - sum(self.held.values())

    def try_reserve(self, owner: int, tokens: int) -> bool:
        need = self.blocks_for(tokens)
        if need > self.free_blocks:
            self.refusals += 1
            return False
        self.held[owner] = self.held.get(owner, 0) + need
        self.peak_blocks = max(self.peak_blocks, sum(self.held.values()))
        return True

    def release(self, owner: int) -> int:
        return self.held.pop(owner, 0)


@dataclass
class _Forward:
    owner: int
    kind: str
    n_tokens: int
    kv_len: int
    label: str
    done: object
    enqueued_s: float


class CloudServer:
    """One server GPU in a SimPy environment: continuous batching, per-request waits, ledgers.

    ``forward_cost(kind, n_tokens, kv_len)`` returns the TaskCost of one unbatched forward
    (``kind``: ``draft`` or ``verify``)."""

    device = "cloud_gpu"

    def __init__(self, env, cfg: CloudConfig, forward_cost, rng):
        self.env = env
        self.cfg = cfg
        self.forward_cost = forward_cost
        self.rng = rng
        self.ledgers: dict[int, CloudLedger] = {}
        self.collectors: dict[int, object] = {}
        self.queue: list[_Forward] = []
        self._wake = None
        self.busy_s = 0.0
        self.iterations = 0
        self.batched_forwards = 0
        self.batched_tokens = 0
        self.kv: KvBlocks | None = None            # set by use_kv_blocks (cloud.kv_cache_gib != 0)
        self.kv_tokens: dict[int, int] = {}        # per owner: tokens to reserve at admission
        self.admitted: set[int] = set()
        self._admission: list = []                 # (owner, event) waiting for blocks, FIFO
        env.process(self._loop())

    def use_kv_blocks(self, total_blocks: int) -> None:
        self.kv = KvBlocks(total_blocks, self.cfg.kv_block_tokens)

    def admit(self, owner: int):
        """SimPy process body: wait (FIFO) until ``owner``'s KV reservation fits (no-op without
        a KV limit or once admitted)."""
        if self.kv is None or owner in self.admitted:
            return
        t0 = self.env.now
        if self._admission or not self.kv.try_reserve(owner, self.kv_tokens.get(owner, 0)):
            ev = self.env.event()
            self._admission.append((owner, ev))
            yield ev
        self.admitted.add(owner)
        self.ledgers[owner].admission_wait_s += self.env.now - t0

    def release(self, owner: int) -> None:
        """``owner`` is done: free its blocks and admit waiting owners in order while they fit."""
        if self.kv is None or owner not in self.admitted:
            return
        self.kv.release(owner)
        self.admitted.discard(owner)
        while self._admission:
            o, ev = self._admission[0]
            if not self.kv.try_reserve(o, self.kv_tokens.get(o, 0)):
                break
            self._admission.pop(0)
            ev.succeed()

    def attach(self, owner: int, collector=None) -> CloudLedger:
        self.ledgers[owner] = CloudLedger()
        if collector is not None:
            self.collectors[owner] = collector
        return self.ledgers[owner]

    def queue_wait_s(self, service_s: float) -> float:
        wait = self.cfg.queue_delay_ms * 1e-3
        rho = self.cfg.utilization
        if rho > 0 and self.rng.random() < rho:
            wait += float(self.rng.exponential(service_s / (1.0 - rho)))
        return wait

    def batch_cost(self, kind: str, forwards: list[tuple[int, int]]):
        """(duration s, dynamic energy J) of one iteration over ``forwards`` [(n_tokens, kv_len)]."""
        if len(forwards) == 1:
            c = self.forward_cost(kind, *forwards[0])
            return c.duration_s, sum(c.energy_j.values())
        base = self.forward_cost(kind, sum(n for n, _ in forwards), 0)
        t, e = base.duration_s, sum(base.energy_j.values())
        for n, kv in forwards:
            full, empty = self.forward_cost(kind, n, kv), self.forward_cost(kind, n, 0)
            t += max(0.0, full.duration_s - empty.duration_s)
            e += max(0.0, sum(full.energy_j.values()) - sum(empty.energy_j.values()))
        return t, e

    def run(self, owner: int, kind: str, n_tokens: int, kv_len: int, label: str, new_call: bool = True):
        """SimPy process body: one forward of ``owner``; ``new_call``: it starts a request (waits
        once, counted as a call). Returns (start, end) of the iteration that ran it."""
        led = self.ledgers[owner]
        if self.kv is not None and owner not in self.admitted:
            yield from self.admit(owner)
        if new_call:
            wait = self.queue_wait_s(self.forward_cost(kind, n_tokens, kv_len).duration_s)
            led.queue_wait_s += wait
            led.calls += 1
            if wait > 0:
                yield self.env.timeout(wait)
        f = _Forward(owner, kind, int(n_tokens), int(kv_len), label, self.env.event(), self.env.now)
        self.queue.append(f)
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()
        start, end = yield f.done
        return start, end

    def _loop(self):
        env, cap = self.env, self.cfg.max_batch
        while True:
            if not self.queue:
                self._wake = env.event()
                yield self._wake
                continue
            win = self.cfg.batch_window_ms * 1e-3
            if win > 0:        # hold the iteration until the head forward has waited the window
                wait = self.queue[0].enqueued_s + win - env.now
                if wait > 0:
                    yield env.timeout(wait)
            kind = self.queue[0].kind
            batch = [f for f in self.queue if f.kind == kind][:cap]
            taken = set(map(id, batch))
            self.queue = [f for f in self.queue if id(f) not in taken]
            dur, energy = self.batch_cost(kind, [(f.n_tokens, f.kv_len) for f in batch])
            start = env.now
            yield env.timeout(dur)
            end = env.now
            self.busy_s += dur
            self.iterations += 1
            self.batched_forwards += len(batch)
            tokens = sum(f.n_tokens for f in batch)
            self.batched_tokens += tokens
            seen = set()
            for f in batch:
                led = self.ledgers[f.owner]
                share = f.n_tokens / tokens
                led.gpu_share_s += dur * share
                led.energy_j += energy * share
                led.batch_wait_s += start - f.enqueued_s
                led.forwards += 1
                led.tokens_processed += f.n_tokens
                led.by_task_s[f.label] = led.by_task_s.get(f.label, 0.0) + dur * share
                if f.owner not in seen:
                    seen.add(f.owner)
                    led.gpu_busy_s += dur
                    col = self.collectors.get(f.owner)
                    if col is not None:
                        col.busy(self.device, start, end, f.label)
            for f in batch:
                f.done.succeed((start, end))
            # let the forwards just released queue their next step (same instant) before the next
            # batch forms: a sequence that finished an iteration is eligible for the next one
            yield env.timeout(0)

    def costs_usd(self, owner: int, wall_s: float) -> dict[str, float]:
        """The phone's cloud bill under each pricing."""
        c, led = self.cfg, self.ledgers[owner]
        per_s = c.usd_per_gpu_hour / 3600.0
        return {"shared_busy": led.gpu_share_s * per_s,
                "dedicated_wall": wall_s * per_s / c.phones_per_gpu,
                "per_token_api": led.tokens_processed * c.usd_per_1m_tokens * 1e-6 + led.calls * c.usd_per_call}

    def cost_usd(self, owner: int, wall_s: float) -> float:
        return self.costs_usd(owner, wall_s)[self.cfg.pricing]
