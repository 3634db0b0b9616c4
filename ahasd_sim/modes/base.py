"""Execution-mode registry and the machinery every mode shares.

A mode is a class registered with ``@register_mode("name")``; it receives a
:class:`RunContext` and starts SimPy processes in :meth:`Mode.start`. Modes
differ in *which device runs what and when*; the token bookkeeping (what is
accepted, committed, rejected or killed) is shared here so that every mode
counts the same way.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np
import simpy

from ..config.errors import ConfigError, did_you_mean
from ..metrics.collector import Collector
from ..policies.base import DraftPolicy, RoundContext, VerifyOutcome, new_outcome
from .fastq import FastLock, advance
from .replay import TraceReplay

MODES: dict[str, type["Mode"]] = {}


def register_mode(name: str) -> Callable[[type["Mode"]], type["Mode"]]:
    def deco(cls: type[Mode]) -> type[Mode]:
        cls.name = name
        # the platform family is the folder of the mode's module (modes/soc/, modes/moe/, ...)
        parts = cls.__module__.split(".")
        cls.family = parts[parts.index("modes") + 1] if "modes" in parts[:-2] else ""
        MODES[name] = cls
        return cls

    return deco


def family_modes(family: str) -> tuple[str, ...]:
    """Registered modes of a platform family (``soc``, ``mobile_cloud``, ``moe``), in
    registration order (the family's ``__init__`` lists them from the simplest up)."""
    return tuple(n for n, c in MODES.items() if c.family == family)


def get_mode(name: str) -> type["Mode"]:
    try:
        return MODES[name]
    except KeyError:
        raise ValueError(f"unknown mode '{name}'{did_you_mean(name, MODES)}; valid modes: "
                         f"{', '.join(sorted(MODES))}") from None


@dataclass(frozen=True)
class TaskCost:
    """Time and energy of one task (a drafter forward, a verification pass, ...).

    ``busy_s`` gives, per device, how long it actually worked inside the task
    (a multi-device task occupies each device for its own share only).
    """

    duration_s: float
    energy_j: dict[str, float]
    busy_s: dict[str, float]
    offchip_bytes: float = 0.0   # bytes over the external memory interface (weights, KV, offloads)

    def __post_init__(self):
        if self.duration_s < 0:
            raise ValueError("negative task duration")
        for dev, b in self.busy_s.items():
            if b > self.duration_s * (1 + 1e-9) + 1e-15:
                raise ValueError(f"{dev} busy {b} s longer than its task ({self.duration_s} s)")


@dataclass(slots=True, init=False)
class Batch:
    """One drafting round pushed to the unverified-draft queue."""

    start: int
    length: int
    gen: int
    t_start_s: float
    mean_entropy_nats: float
    edc_index: int = -1
    edc_bucket: int = 0
    edc_continue: bool = True
    round_id: int | None = None
    #: first position after the batch (start + length; read on every queue and commit scan)
    end: int = field(repr=False, compare=False)

    def __init__(self, start: int, length: int, gen: int, t_start_s: float, mean_entropy_nats: float,
                 edc_index: int = -1, edc_bucket: int = 0, edc_continue: bool = True,
                 round_id: int | None = None):
        # written out (one per drafted round): the dataclass __init__ plus __post_init__ costs more
        self.start = start
        self.length = length
        self.gen = gen
        self.t_start_s = t_start_s
        self.mean_entropy_nats = mean_entropy_nats
        self.edc_index = edc_index
        self.edc_bucket = edc_bucket
        self.edc_continue = edc_continue
        self.round_id = round_id
        self.end = start + length


@dataclass
class RunContext:
    """Everything a mode needs, built once per run by :mod:`ahasd_sim.simulation`."""

    cfg: Any
    platform: Any
    costs: Any
    replay: TraceReplay
    policy: DraftPolicy
    collector: Collector
    rng: np.random.Generator
    n_tokens: int
    extras: dict[str, Any] = field(default_factory=dict)
    #: run the modes' self-checks after the window (AHASD's KV causality audit); off for runs
    #: whose objective alone is read (placement tuning), whose audit nobody would see
    audit: bool = True


class Mode:
    """Base class of execution modes; owns the shared commit logic."""

    name: ClassVar[str] = "base"
    #: platform family (the mode's folder under ``modes/``; set by :func:`register_mode`)
    family: ClassVar[str] = ""
    #: devices that must be present on the platform (names from Platform.devices())
    required_devices: ClassVar[tuple[str, ...]] = ()
    #: the mode places a draft and a target model on PIM ranks (``pim.partition_policy: auto``
    #: then chooses its placement on the tuning data, :mod:`ahasd_sim.modes.placement`)
    uses_pim_placement: ClassVar[bool] = False
    #: the mode loads the draft model next to the target (memory capacity is checked for what a
    #: mode loads: the autoregressive modes hold the target alone)
    loads_drafter: ClassVar[bool] = True
    #: the host streams from memory while PIM computes (a package power cap then splits its budget
    #: between the two: ``pim.dram_power_limit_w``)
    pim_overlaps_host: ClassVar[bool] = False
    #: True for modes that replay their whole trace in one run and report their own windows
    #: (summary field ``mode_windows``); ``run.windows`` then gives one simulation, not many
    replays_own_windows: ClassVar[bool] = False
    #: True for modes that draft trees (their policies select subtrees, chain policies do not fit)
    drafts_trees: ClassVar[bool] = False
    #: True for modes that decode on the device ``baseline.device`` names (checked against the
    #: platform before the run, by :func:`ahasd_sim.simulation.build_platform`)
    uses_baseline_device: ClassVar[bool] = False

    def __init__(self, env: simpy.Environment, ctx: RunContext):
        if getattr(ctx.policy, "is_tree_policy", False) and not self.drafts_trees:
            tree_modes = ", ".join(sorted(n for n, c in MODES.items() if c.drafts_trees))
            raise ConfigError(ctx.cfg.source_of("run.policy"), "run.policy",
                              f"policy '{ctx.cfg.run.policy}' selects draft trees; use it with run.mode "
                              f"{tree_modes}, not '{ctx.cfg.run.mode}'")
        self.env = env
        self.ctx = ctx
        self.replay = ctx.replay
        self.policy = ctx.policy
        self.col = ctx.collector
        self.costs = ctx.costs
        self.n_tokens = ctx.n_tokens
        self.committed = 0          # positions [0, committed) are committed
        self.frontier = 0           # positions [committed, frontier) are drafted and pending
        self.gen = 0                # incremented on every drafter restart (rollback)
        self.batches: list[Batch] = []  # pending batches of the current generation, in order
        self.done = env.event()
        self.resolving_preverify = False     # set while a pre-verification result is applied
        self.prefill_s = 0.0                 # time spent in prompt prefills (all devices wait)
        self.prefills = 0
        self._last_forward: tuple[int, int] | None = None   # (gen, position) of the last drafter forward
        self._held_forward: tuple[int, int] | None = None   # a discarded forward whose logits are kept
        pc = ctx.cfg.policy
        self.min_round_tokens = max(1, pc.min_tokens)
        self.max_round_tokens = max(self.min_round_tokens, pc.max_tokens)

    # ------------------------------------------------------------ lifecycle
    def start(self) -> simpy.Event:
        raise NotImplementedError

    def finalize(self) -> None:
        """Called once after the run, before metrics are assembled (charge batched energies)."""

    def stats(self) -> dict[str, Any]:
        """Mode-specific statistics merged into summary.json under ``mode_stats``."""
        return {}

    # ------------------------------------------------------------ devices
    def run_task(self, cost: TaskCost, label: str, resources: dict[str, simpy.Resource] | None = None,
                 delay_s: float = 0.0):
        """Occupy devices for ``cost`` (after waiting ``delay_s``); log busy intervals and energy.

        A SimPy generator returning the task's start time."""
        reqs = None
        if resources:
            reqs = []
            for res in resources.values():
                if type(res) is FastLock:
                    req = yield from res.acquire()
                else:
                    req = res.request()
                    yield req
                reqs.append((res, req))
        env, col = self.env, self.col
        start = env._now + delay_s      # env.now without the property call
        if (cost.duration_s > 0 or delay_s > 0) and not advance(env, delay_s + cost.duration_s):
            in_flight = col.in_flight
            token = object()
            in_flight[token] = (start, cost.busy_s)   # for the time-limit report
            yield env.timeout(delay_s + cost.duration_s)
            del in_flight[token]
        col.task(cost, label, start)
        if reqs:
            for res, req in reqs:
                res.release(req)
        return start

    def task_if_next(self, cost: TaskCost, label: str, delay_s: float = 0.0) -> bool:
        """:meth:`run_task` without resources, done at once (clock advanced, task recorded) when
        its timeout would be the next event processed (:func:`~.fastq.advance`); returns False,
        having done nothing, otherwise. Saves the generator of ``run_task`` on per-token paths:
        ``if not self.task_if_next(c, l): yield from self.run_task(c, l)``."""
        env = self.env
        now = env._now                  # env.now without the property call
        d = cost.duration_s
        if d > 0 or delay_s > 0:        # fastq.advance(env, delay_s + d), inlined
            t = now + (delay_s + d)
            q = env._queue
            if q and q[0][0] <= t:
                return False
            env._now = t
        self.col.task(cost, label, now + delay_s)
        return True

    # ------------------------------------------------------------ prompts
    def prefill_costs(self, prompt_len: int) -> list[tuple[str, TaskCost]]:
        """Prefill of a new prompt: both models over its prompt tokens, on the host (the NPU,
        else the GPU) as GEMMs, as SpecPIM does (prefill on the xPU); the drafter's KV is then
        in its ranks. Modes on other hardware override this."""
        return [("prefill_target", self.costs.prefill("target", prompt_len)),
                ("prefill_draft", self.costs.prefill("draft", prompt_len))]

    def prefill(self, pos: int, resources=None):
        """Run the prefill of the prompt starting at ``pos`` (a generator); counts its time."""
        if not self.ctx.cfg.run.prefill:
            return
        t0 = self.env.now
        for label, cost in self.prefill_costs(self.replay.prompt_len_at(pos)):
            yield from self.run_task(cost, label, resources)
        self.prefill_s += self.env.now - t0
        self.prefills += 1

    def prefill_if_prompt_start(self, resources=None):
        """After a commit: if the committed point starts a new prompt, prefill it."""
        if self.prompt_starts_at_commit():
            yield from self.prefill(self.committed, resources)

    def prompt_starts_at_commit(self) -> bool:
        """Whether the committed point starts a new prompt (not the first, not past the run)."""
        c = self.committed
        return c < self.n_tokens and c > 0 and self.replay.is_prompt_start(c)

    # ------------------------------------------------------------ drafter forwards
    def drafter_forward_needed(self, pos: int, gen: int | None = None) -> bool:
        """Whether the drafter must run a forward for ``pos`` in the current chain.

        A forward whose token a policy discarded (AdaEDL stops *after* computing the
        distribution) leaves its logits in the drafter; if the next round starts at the same
        position of the same chain (no rollback), those logits are reused instead of running
        the identical forward again (``reused_drafter_forwards``)."""
        key = (self.gen if gen is None else gen, pos)   # gen: the chain the drafter is on
        if self._held_forward == key:
            self._held_forward = None
            self.col.counters.reused_drafter_forwards += 1
            return False
        return True

    def note_drafter_forward(self, pos: int, gen: int, discarded: bool = False, ran: bool = True) -> None:
        """Book one drafter forward (``ran``: charged, else its logits were reused); a second
        charged forward on the same (chain, position) is a duplicate
        (``duplicate_drafter_forwards``, which the modes keep at 0)."""
        key = (gen, pos)
        if ran:
            ctr = self.col.counters
            ctr.drafter_forwards += 1
            if self._last_forward == key:
                ctr.duplicate_drafter_forwards += 1
            self._last_forward = key
        self._held_forward = key if discarded else None

    # ------------------------------------------------------------ commit logic
    def round_context(self) -> RoundContext:
        return RoundContext(self.env._now, self.min_round_tokens, self.max_round_tokens)

    def resolve(self, new_committed: int) -> bool:
        """Advance the committed point to ``new_committed`` (capped at the run length).

        Classifies the drafts in [committed, new_committed) as accepted/rejected
        from the trace, restarts the drafter if its chain is broken, resolves
        batches (EDC + policy feedback) and returns True if a restart happened.
        """
        c_old = self.committed
        c_new = min(new_committed, self.n_tokens)
        if c_new <= c_old:
            return False
        q = self.replay.first_wrong(c_old)
        decided_end = min(c_new, self.frontier)
        ctr = self.col.counters
        n_acc = max(0, min(decided_end, q) - c_old)
        ctr.accepted_tokens += n_acc
        if self.resolving_preverify:
            ctr.preverify_accepted_tokens += n_acc
        rejected = c_old <= q < decided_end
        if rejected:
            ctr.rejected_tokens += 1
        self.col.commit(range(c_old, c_new))
        self.committed = c_new
        # a new prompt starts a new draft chain (after its prefill)
        restart = rejected or self.frontier < c_new or self.replay.is_prompt_start(c_new)
        if restart and c_new < self.n_tokens:
            killed = max(0, self.frontier - c_new)
            ctr.killed_tokens += killed
            if rejected or killed:
                ctr.rollbacks += 1
            self.gen += 1
            self.frontier = c_new
        elif self.frontier < c_new:
            self.frontier = c_new
        self._resolve_batches(q, c_new, restart)
        if self.committed >= self.n_tokens and not self.done.triggered:
            ctr.unverified_at_end = max(0, self.frontier - self.committed)
            self.done.succeed()
        return restart

    def _resolve_batches(self, q: int, c_new: int, restart: bool) -> None:
        keep: list[Batch] = []
        now = self.env._now
        resolved, on_verify = self.on_batch_resolved, self.policy.on_verify
        # hooks called with positional arguments: (batch, n_accepted, fully_accepted, killed)
        for b in self.batches:
            if b.end <= c_new and q >= b.end:            # fully accepted
                resolved(b, b.length, True, False)
                # the target's token at b.end (bonus) was committed with this batch if it is the
                # last committed token and no later batch drafted that position (else it counts there)
                bonus = b.end == c_new - 1 and not any(o.start <= b.end < o.end for o in self.batches)
                on_verify(new_outcome(b.length, b.length, b.length + (1 if bonus else 0),
                                      now - b.t_start_s, now, b.round_id))
            elif b.start <= q < b.end and q < c_new:      # contains the rejected token
                acc = q - b.start
                resolved(b, acc, False, False)
                on_verify(new_outcome(b.length, acc, acc + 1, now - b.t_start_s, now, b.round_id))
            elif restart and b.start > q:                # built on a rejected token
                resolved(b, 0, False, True)
            else:
                keep.append(b)
        self.batches = keep
        self.on_batches_changed()

    def on_batches_changed(self) -> None:
        """Hook: the set of pending batches changed (after a verification result)."""

    def on_batch_resolved(self, batch: Batch, n_accepted: int, fully_accepted: bool, killed: bool) -> None:
        """Hook for controls that learn from batch outcomes (EDC)."""

    def verify_span(self, start: int, n: int) -> int:
        """Committed point after a target pass verified drafts [start, start+n)."""
        return self.replay.commit_point(start, n)  # + correction (a < n) or bonus (a == n) token
