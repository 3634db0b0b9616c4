"""One run = a pure function of (resolved config, trace, seed).

``run_simulation`` builds the platform, the workload costs, the trace replay,
the drafting policy and the execution mode, runs the SimPy environment until
the requested tokens are committed, then charges static energy over the
makespan and assembles the summary. Writing files is :mod:`ahasd_sim.output`'s job.
"""
from __future__ import annotations

import functools
import gc
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import simpy

from . import __version__
from .config.errors import ConfigError
from .errors import reported_in_one_line
from .config.loader import SimConfig
from .hw.platform import Platform
from .metrics.collector import Collector
from .metrics.combine import merge_summaries
from .metrics.timeline import chrome_trace, merge_windows
from .modes import RunContext, get_mode
from .modes.costs import StepCosts
from .modes.replay import TraceReplay
from .policies import make_policy, policy_needs_fit_data
from .workload.drafters import describe_acceptance, make_drafter, resolve_kind
from .workload.models import get_model
from .traces.format import Trace
from .paths import resolve_data_path  # noqa: F401 - re-exported (callers import it from here)
from .traces.load import chosen_by, load_run_trace  # noqa: F401 - re-exported (callers import them from here)
from .traces.load import load_full_trace as _load_full_trace

if TYPE_CHECKING:
    import pandas as pd
# pandas is imported where tables are built, not here: simulating needs none, and a run whose
# tables are only written (the command line) never imports it (CombinedRun, csvrows).




class SimulationError(RuntimeError):
    """The simulation itself failed (a deadlock or time limit): a bug or an impossible setup."""


@reported_in_one_line
class SimulationTimeLimit(SimulationError):
    """``run.max_sim_time_s`` passed before the run finished (valid but very slow hardware):
    reported like bad input, naming how far the run got and the busiest device."""


@dataclass
class RunResult:
    summary: dict[str, Any]
    events: pd.DataFrame
    energy: pd.DataFrame
    timeline: dict[str, Any] | None
    policy_stats: dict[str, Any] = field(default_factory=dict)
    windows: pd.DataFrame | None = None     # one row per trace window (windows.csv)


def _config_error(cfg: SimConfig, key: str, message: str) -> ConfigError:
    """An error about ``key``, blaming where it was set (``--set`` or the file that set it)."""
    return ConfigError(cfg.source_of(key), key, message)


def _in_config_file(cfg: SimConfig, exc: ConfigError) -> ConfigError:
    """A hardware-model error (raised without a file) re-attributed to where its key was set."""
    return ConfigError(exc.source or cfg.source_of(exc.key_path), exc.key_path, exc.message)


def build_platform(cfg: SimConfig, mode_cls) -> Platform:
    """The configured hardware, checked to hold every device the mode needs (config errors
    are re-attributed to the config file)."""
    try:
        platform = Platform.build(cfg)
    except ConfigError as exc:
        raise _in_config_file(cfg, exc) from None
    missing = [d for d in mode_cls.required_devices if getattr(platform, d, None) is None]
    if missing:
        raise _config_error(cfg, "run.mode", f"mode '{cfg.run.mode}' needs device(s) {', '.join(missing)}, "
                            f"which this platform does not enable (set {missing[0]}.enabled: true)")
    dev = cfg.baseline.device
    if getattr(mode_cls, "uses_baseline_device", False):
        # here, not when the first step is costed, so the dry run refuses it with the run's line
        if dev != "auto" and getattr(platform, dev, None) is None:
            raise _config_error(cfg, "baseline.device", f"is {dev}, but this platform has no {dev.upper()} "
                                f"({dev}.enabled is false); use auto or a device the platform has")
        if dev == "auto" and not any(getattr(platform, d, None) is not None for d in ("gpu", "npu", "pim")):
            raise _config_error(cfg, "baseline.device", "autoregressive decoding needs a GPU, an NPU or PIM")
    if platform.npu is not None and cfg.run.precision != "w8a8":
        from .workload.precision import get_precision
        prec = get_precision(cfg.run.precision)
        # weights stored narrower than the array type are widened on the vector unit
        platform.npu.dequant_ops_per_weight = prec.dequant_ops_per_weight if prec.dequant else 0.0
    if platform.pim is not None:
        # the package power cap keeps host I/O only for a mode whose host streams while PIM computes
        platform.pim.apply_power_cap(bool(getattr(mode_cls, "pim_overlaps_host", False)))
    return platform


def window_start_prompts(cfg: SimConfig, trace: Trace) -> list[int]:
    """First prompt of each trace window (``run.windows``). Windows start at prompt boundaries and
    never overlap (each window is one independent sample): window i+1 starts at or after the end
    of window i. They are spread evenly over the prompts at which a window fits (window i aims at
    the prompt round(i x (fitting prompts - 1) / (windows - 1))), each moved later only as far as
    the previous window's end needs, and earlier only as far as the later windows need to fit.
    ``run.windows: 0`` takes the most disjoint windows the trace holds (the greedy count from the
    first prompt); more windows than that is a ConfigError."""
    run = cfg.run
    n, T = len(trace), run.generated_tokens
    bounds = trace.prompt_bounds()
    if not 0 <= run.trace_start_prompt < max(len(bounds), 1):   # checked even where unused (windows != 1)
        raise _config_error(cfg, "run.trace_start_prompt", f"prompt {run.trace_start_prompt} is out of range: "
                            f"the trace {run.trace} has {len(bounds)} prompts (0..{len(bounds) - 1})")
    if run.windows == 1:
        return [run.trace_start_prompt]
    starts = [int(b[0]) for b in bounds]
    if not any(n - s >= T for s in starts):
        raise _config_error(cfg, "run.generated_tokens",
                            f"{T} tokens do not fit in the trace ({n} positions); lower it")
    most = max_disjoint_windows(starts, n, T)
    k = run.windows or most
    from .modes import MODES
    if getattr(MODES.get(run.mode), "replays_own_windows", False):   # they use the first window only
        k = min(k, most)
    if k > most:
        raise _config_error(cfg, "run.windows",
                            f"{k} disjoint windows of {T} tokens (run.generated_tokens) starting at prompt "
                            f"boundaries do not fit in the trace ({n} positions, {len(starts)} prompts): at most "
                            f"{most}; lower run.windows or run.generated_tokens, or set run.windows: 0 (as many "
                            f"as fit)")
    return [starts.index(s) for s in disjoint_window_starts(starts, n, T, k)]


def max_disjoint_windows(starts: list[int], n: int, T: int) -> int:
    """The most windows of ``T`` positions, each starting at one of ``starts`` (sorted prompt
    start positions), that fit disjointly in ``n`` positions (greedy: earliest first is optimal)."""
    count, free = 0, 0
    for s in starts:
        if s >= free and s + T <= n:
            count, free = count + 1, s + T
    return count


def disjoint_window_starts(starts: list[int], n: int, T: int, k: int) -> list[int]:
    """``k`` disjoint window start positions among ``starts``, spread evenly (see
    :func:`window_start_prompts`; where the evenly spread prompts are already disjoint, exactly
    them); requires ``k <= max_disjoint_windows(starts, n, T)``."""
    # latest[i]: the latest start window i may take so that windows i+1..k-1 still fit after it
    latest = [0] * k
    limit = n - T
    for i in range(k - 1, -1, -1):
        latest[i] = max(s for s in starts if s <= limit)
        limit = latest[i] - T
    fits = [s for s in starts if s + T <= n]
    aims = [fits[int(round(x))] for x in np.linspace(0, len(fits) - 1, k)]
    out, free = [], 0
    for i in range(k):
        nxt = [s for s in starts if s >= max(free, aims[i])]
        pick = min(nxt[0], latest[i]) if nxt else latest[i]
        out.append(pick)
        free = pick + T
    return out


def load_run_windows(cfg: SimConfig) -> list[tuple[int, tuple[Trace, Trace, Trace | None]]]:
    """[(start prompt, (full trace, replayed slice, held-out part))] for every window of the run
    (one, at ``run.trace_start_prompt``, for a mode that cuts its own windows from its own trace)."""
    from .modes import MODES
    trace = _load_full_trace(cfg)
    if getattr(MODES.get(cfg.run.mode), "replays_own_windows", False):
        return [(cfg.run.trace_start_prompt, load_run_trace(cfg, None, trace))]
    return [(p, load_run_trace(cfg, p, trace)) for p in window_start_prompts(cfg, trace)]


_FORK_JOBS: list = []   # (function, argument) handed to forked workers (never pickled)


def _window_worker_init(parent_pid: int | None = None) -> None:
    """Forked workers leave signals to the parent (its handlers would fire in each child), and
    die quietly with it: a parent killed by SIGKILL would otherwise leave each worker to finish
    its window and print a BrokenPipeError traceback when it sends the result."""
    import os
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:   # Linux: the kernel sends SIGTERM (default action: exit, no traceback) when the parent dies
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError, TypeError):    # not Linux (Windows: CDLL(None) is a TypeError)
        pass
    if parent_pid is not None and os.getppid() != parent_pid:   # died before prctl took effect
        os._exit(1)


def _fork_job(i: int):
    fn, arg = _FORK_JOBS[i]
    return fn(arg)


def _fork_context():
    """multiprocessing's fork context, or None where the platform has no fork (Windows) or
    ``AHASD_SIM_START_METHOD=spawn`` asks for none (macOS, where forking a process that loaded
    system frameworks can crash)."""
    import multiprocessing as mp
    import os
    if os.environ.get("AHASD_SIM_START_METHOD", "fork") == "spawn":
        return None
    try:
        return mp.get_context("fork")
    except ValueError:
        return None


def fork_map(fn, args: list, workers: int, on_result=None) -> list:
    """``[fn(a) for a in args]``, in up to ``workers`` forked processes when there are several
    (the function and arguments reach the children by fork, never pickled; only the results
    travel back). Without fork, a spawn pool when ``fn`` and the arguments pickle (a module-level
    function or a :func:`functools.partial` of one), else serially. Each call must be a pure
    function of its argument, so the results are those of the serial loop. ``on_result(r)`` is
    called as each result arrives (in order; progress)."""
    def serial():
        out = []
        for a in args:
            out.append(fn(a))
            if on_result is not None:
                on_result(out[-1])
        return out

    def collect(results):
        out = []
        for r in results:
            out.append(r)
            if on_result is not None:
                on_result(r)
        return out

    if workers > 1 and len(args) > 1:
        import multiprocessing as mp
        ctx = _fork_context()
        if ctx is None:
            import pickle
            try:
                pickle.dumps(fn)
            except (pickle.PicklingError, AttributeError, TypeError):
                return serial()
            with mp.get_context("spawn").Pool(min(workers, len(args)), initializer=_window_worker_init) as pool:
                out = collect(pool.imap(fn, args, chunksize=1))
                pool.close()
                pool.join()
            return out
        if ctx is not None:
            _FORK_JOBS[:] = [(fn, a) for a in args]
            try:
                import os
                with ctx.Pool(min(workers, len(args)), initializer=_window_worker_init,
                              initargs=(os.getpid(),)) as pool:
                    out = collect(pool.imap(_fork_job, range(len(args)), chunksize=1))
                    pool.close()
                    pool.join()
                return out
            finally:
                _FORK_JOBS.clear()
    return serial()


def replayed_windows(cfg: SimConfig, windows: list) -> list:
    """The windows of ``windows`` that ``cfg``'s mode replays: all, or the first alone for a mode
    that replays its whole trace once and cuts its own windows."""
    from .modes import MODES
    if getattr(MODES.get(cfg.run.mode), "replays_own_windows", False):
        return windows[:1]
    return windows


def run_simulation(cfg: SimConfig, trace_parts=None, workers: int = 1, intervals: bool = True,
                   audit: bool = True, events: bool = True, progress=None) -> RunResult:
    """Run every trace window of ``cfg`` (``run.windows``) and combine them (mean and 95% CI over
    windows). ``trace_parts``: the result of :func:`load_run_windows` (reused across modes), or
    one window's :func:`load_run_trace` tuple (a single window). ``workers`` > 1 runs windows in
    that many forked processes (results are identical: each window is a pure function).
    ``intervals=False``: the rates' bootstrap intervals are not computed (``_ci95`` fields None,
    ``ci_method`` "none"), for runs whose point estimates alone are read (placement tuning).
    ``audit=False``: the modes' self-checks after each window are skipped (AHASD's KV causality
    audit, 6.6% of a one-process ``pim_design_space`` sweep; ``kv_causality_violations`` None),
    for the same runs. ``events=False``: the per-step event rows (events.csv) are not built, for
    runs that write no events.csv (a sweep point by default, placement tuning); the result's
    ``events`` then raises. ``progress``: told the number of windows (``set_total``) and each
    finished one (``update``)."""
    if trace_parts is None:
        windows = load_run_windows(cfg)
    elif isinstance(trace_parts, tuple):
        windows = [(cfg.run.trace_start_prompt, trace_parts)]
    else:
        windows = list(trace_parts)
    if cfg.pim.enabled:
        # choose the placement here, once: forked window workers inherit the choice instead of
        # each tuning it again (the tuning runs' windows use the same workers)
        from .modes.placement import resolve_placement
        try:
            resolve_placement(cfg, workers)
        except ConfigError as exc:
            raise _in_config_file(cfg, exc) from None
    windows = replayed_windows(cfg, windows)
    if audit and cfg.pim.enabled:   # once, here: not per forked worker, not for placement tuning
        _warn_kv_beyond_reserve(cfg, [parts[1] for _p, parts in windows])
    if progress is not None:
        progress.set_total(len(windows))
    # each window's event and energy rows come back as plain lists (tables are framed in the
    # parent, and only when used: CombinedRun)
    results = fork_map(functools.partial(_window_job, cfg, audit, events),
                       [(i, parts) for i, (_p, parts) in enumerate(windows)], workers,
                       None if progress is None else (lambda _r: progress.update("ok")))
    return combine_windows(cfg, results, [p for p, _ in windows], intervals)


def _window_job(cfg: SimConfig, audit: bool, events: bool, job: tuple):
    """One window of :func:`run_simulation` (module level: a spawn pool pickles it)."""
    return _run_window_rows(cfg, job[1], job[0], audit, events)


@contextmanager
def gc_paused():
    """Pause Python's cyclic garbage collector (restored as it was on exit): for work that makes
    many short-lived objects freed by reference counting, such as a window's event loop (~10^5
    per 1024 tokens) or writing a run's files, whose allocations would otherwise trigger
    collections that walk them and every long-lived object (the trace's tables)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _window_collected(fn):
    """Run one window (``fn``: build, simulate, assemble) under :func:`gc_paused`, then collect
    the young generation once, before the collector is back on. What is left of a finished
    window after :meth:`WindowEnvironment.release` is young; collections triggered while the
    window is still referenced (assembling the result) would walk all of it and promote it, and
    older generations walk it again: about a tenth of a sweep point's time before (docs/performance.md, sweeps).
    Switched on first, the collector would be set off by the next allocation (its counter is
    far past the threshold after a window), often for an older generation."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        collect = gc.isenabled()
        with gc_paused():
            try:
                return fn(*args, **kwargs)
            finally:
                if collect:
                    gc.collect(0)
    return run


def run_window(cfg: SimConfig, trace_parts: tuple[Trace, Trace, Trace | None], index: int = 0) -> RunResult:
    """One window: a pure function of (config, trace slice, seed, window index). Window 0 uses
    ``run.seed``; window i > 0 the seed sequence (run.seed, i), so windows draw independently."""
    return _framed(_run_window_rows(cfg, trace_parts, index))


_ENERGY_COLUMNS = ["device", "kind", "energy_j"]


def _framed(result: RunResult) -> RunResult:
    """``result`` with its event and energy rows (lists of dicts) as tables."""
    import pandas as pd
    if result.events is not None:   # None: simulated without event rows (events=False)
        result.events = pd.DataFrame(result.events)
    result.energy = pd.DataFrame(result.energy, columns=_ENERGY_COLUMNS)
    return result


def mode_and_models(cfg: SimConfig):
    """(mode class, draft model shape, target model shape) named by the run section."""
    run = cfg.run
    try:
        mode_cls = get_mode(run.mode)
    except ValueError as exc:
        raise _config_error(cfg, "run.mode", str(exc)) from None
    models = []
    kind = drafter_kind(cfg, mode_cls)
    for key in ("draft_model", "target_model"):
        if key == "draft_model" and kind != "model":
            continue       # the head is derived from the target; lookup has no model
        try:
            models.append(run_model(cfg, getattr(run, key)))
        except ValueError as exc:
            raise _config_error(cfg, f"run.{key}", str(exc).strip('"')) from None
    if kind == "lookup" and cfg.lookup.min_ngram > cfg.lookup.max_ngram:
        raise _config_error(cfg, "lookup.min_ngram", f"is {cfg.lookup.min_ngram}, above lookup.max_ngram "
                            f"{cfg.lookup.max_ngram}; expected min_ngram <= max_ngram")
    if kind != "model":
        models.insert(0, make_drafter(kind, run.draft_model, models[0], cfg.lookup))
    return mode_cls, models[0], models[1]


def run_model(cfg: SimConfig, name: str):
    """The shape of model ``name`` at the run's precision (``run.precision``)."""
    spec = get_model(name, cfg.source_file)
    if cfg.run.precision == "w8a8":       # the model zoo's own widths
        return spec
    from .workload.precision import apply_precision
    return apply_precision(spec, cfg.run.precision)


def drafter_kind(cfg: SimConfig, mode_cls=None) -> str:
    """``run.drafter`` resolved for the run's mode: ``auto`` is ``model`` here; head and lookup
    are modelled on the mobile SoC modes (moe_offload resolves its own, the mobile-cloud modes
    draft with their model)."""
    if mode_cls is None:
        mode_cls = get_mode(cfg.run.mode)
    if getattr(mode_cls, "family", "") != "soc":
        return "model"
    return resolve_kind(cfg.run.drafter)


def acceptance_source(cfg: SimConfig, kind: str, trace) -> str:
    """Where the run's acceptance comes from, in words (summary.json and the printed summary)."""
    return describe_acceptance(kind, trace_models(trace).get("drafter"))


def check_models_fit_memory(cfg: SimConfig, platform: Platform, mode_cls, draft, target) -> None:
    """On an NPU platform without PIM the weights live in plain LPDDR5: the models the phone holds
    (both, or only the drafter when the target runs in the cloud) must fit ``memory.capacity_gib``.
    (PIM platforms check their ranks when placing the models; GPUs check their own memory.)"""
    if platform.pim is not None or platform.npu is None or platform.gpu is not None:
        return
    if getattr(mode_cls, "uses_cloud", False):
        held = [draft]                       # the target runs in the cloud
    elif not getattr(mode_cls, "loads_drafter", True):
        held = [target]                      # no drafter
    else:
        held = [draft, target]
    need = sum(m.weight_bytes() for m in held)
    cap = platform.memory.model_capacity_bytes
    if need > cap:
        names = " + ".join(f"{m.name} {m.weight_bytes() / 2**30:.1f} GiB" for m in held)
        reserve = cfg.memory.reserved_gib
        left = f" ({reserve:g} GiB of it held by the OS and apps, memory.reserved_gib)" if reserve else ""
        raise _config_error(cfg, "memory.capacity_gib", f"the weights ({names}) do not fit the "
                            f"{platform.memory.capacity_bytes / 2**30:g} GiB of LPDDR5{left} of this platform "
                            "without PIM")


class WindowEnvironment(simpy.Environment):
    """A window's SimPy environment that keeps its processes' generators, so that
    :meth:`release` can take the finished window apart: the processes still waiting (a drafter
    blocked on a queue) and the events still scheduled hold the mode, its collector and the
    sharing model's progress curves in reference cycles that only the garbage collector would
    free."""

    def __init__(self):
        super().__init__()
        self.generators: list = []

    def process(self, generator):
        self.generators.append(generator)
        return super().process(generator)

    def release(self) -> None:
        """Close the generators (a finished one: a no-op) and drop the scheduled events (the
        window is over: nothing reads them again); reference counting then frees most of the
        window at once."""
        for g in self.generators:
            g.close()
        self.generators.clear()
        self._queue.clear()


@dataclass
class WindowSetup:
    """Everything one window simulates with, built and checked but not started."""

    env: simpy.Environment
    mode: Any
    platform: Platform
    collector: Collector
    policy: Any
    draft: Any
    target: Any
    sim_trace: Trace


def build_window(cfg: SimConfig, trace_parts: tuple[Trace, Trace, Trace | None], index: int = 0,
                 audit: bool = True, events: bool = True) -> WindowSetup:
    """Build a window's mode, models, platform, cost model and policy: every check a run makes
    before simulating. The run and ``--dry-run`` both call this (one validation path)."""
    run = cfg.run
    mode_cls, draft, target = mode_and_models(cfg)
    platform = build_platform(cfg, mode_cls)
    check_models_fit_memory(cfg, platform, mode_cls, draft, target)
    _full, sim_trace, heldout = trace_parts
    if run.extra_context_tokens:                      # a long-context what-if: longer KV, longer prefill
        from .traces.format import with_extra_context
        sim_trace = with_extra_context(sim_trace, run.extra_context_tokens)
    if getattr(draft, "kind", "model") == "lookup":    # the lookup's exact verdicts on the same tokens
        from .traces.lookup import lookup_trace
        lc = cfg.lookup
        sim_trace = lookup_trace(sim_trace, lc.max_ngram, lc.min_ngram)
        heldout = None if heldout is None else lookup_trace(heldout, lc.max_ngram, lc.min_ngram)
    seed = run.seed if index == 0 else np.random.SeedSequence([run.seed, index])
    rng = np.random.default_rng(seed)
    try:
        costs = StepCosts(platform, draft, target, cfg)
    except ConfigError as exc:
        raise _in_config_file(cfg, exc) from None
    try:
        fit = heldout if policy_needs_fit_data(run.policy) else None
        policy = make_policy(run.policy, cfg.policy, rng, fit)
    except ValueError as exc:
        raise _config_error(cfg, "run.policy", str(exc)) from None

    collector = Collector(devices=sorted(platform.devices()), keep_intervals=run.timeline,
                          keep_events=events)
    replay = TraceReplay(sim_trace, run.generated_tokens, run.seed * 1_000_003 + index)
    env = WindowEnvironment()
    ctx = RunContext(cfg=cfg, platform=platform, costs=costs, replay=replay, policy=policy,
                     collector=collector, rng=rng, n_tokens=run.generated_tokens, audit=audit)
    try:
        mode = mode_cls(env, ctx)
    except ConfigError as exc:
        raise _in_config_file(cfg, exc) from None
    return WindowSetup(env, mode, platform, collector, policy, draft, target, sim_trace)


_KV_WARNED: set[str] = set()


def _warn_kv_beyond_reserve(cfg: SimConfig, sim_traces) -> None:
    """Warn (once per config) when a window's context outgrows the KV the capacity check kept
    beside each model in the PIM ranks (``pim.kv_reserve_tokens``): the memory check then holds
    less KV than the run reads."""
    longest = 0
    for tr in sim_traces:
        replay = TraceReplay(tr, cfg.run.generated_tokens)
        if replay.n_positions:
            longest = max(longest, max(replay.kv_len_at(p) for p in range(replay.n_positions)) + 1
                          + cfg.run.extra_context_tokens)
    reserve = cfg.pim.kv_reserve_tokens
    key = cfg.fingerprint()
    if longest > reserve and key not in _KV_WARNED:
        _KV_WARNED.add(key)
        from .cli_common import warn
        warn(f"{cfg.source_of('pim.kv_reserve_tokens')}: pim.kv_reserve_tokens is {reserve}, but the run's context "
             f"reaches {longest} tokens: the capacity check reserved KV for fewer tokens than the run holds; "
             "raise pim.kv_reserve_tokens")


@_window_collected
def _run_window_rows(cfg: SimConfig, trace_parts: tuple[Trace, Trace, Trace | None], index: int = 0,
                     audit: bool = True, events: bool = True) -> RunResult:
    """:func:`run_window` with the event and energy rows left as lists of dicts (see :func:`_framed`);
    ``audit``, ``events``: see :func:`run_simulation` (without events, the result's event rows
    are None)."""
    run = cfg.run
    w = build_window(cfg, trace_parts, index, audit, events)
    env, mode, platform, collector, policy = w.env, w.mode, w.platform, w.collector, w.policy
    draft, target, sim_trace = w.draft, w.target, w.sim_trace
    done = mode.start()
    try:
        env.run(until=simpy.AnyOf(env, [done, env.timeout(run.max_sim_time_s)]))
    except ConfigError as exc:   # a setting found unusable only when a task is costed
        raise _in_config_file(cfg, exc) from None
    if not done.triggered:
        devs = set(platform.devices()) | set(collector._busy_s)
        busy = {d: collector.busy_until(d, env.now) for d in sorted(devs)}
        net = getattr(mode, "net", None)
        if net is not None:   # the phone-cloud link: time a message was in flight
            busy["network link"] = net.in_flight_s(env.now)
        busiest = max(busy, key=lambda d: busy[d]) if busy else None
        if busiest is not None and busy[busiest] > 0 and env.now > 0:
            where = f"; bottleneck: {busiest} ({busy[busiest] / env.now:.0%} busy)"
        else:
            where = "; no device finished a single task in that time"
        raise SimulationTimeLimit(
            f"{cfg.source_of('run.max_sim_time_s')}: run.max_sim_time_s: mode '{run.mode}' committed only {mode.committed} of "
            f"{run.generated_tokens} tokens in {run.max_sim_time_s:g} s of simulated time{where}; the hardware "
            "is too slow for this run: raise run.max_sim_time_s, or check the hardware values")
    makespan = env.now
    mode.finalize()
    result = _assemble(cfg, platform, collector, mode, policy, makespan, draft, target, sim_trace, index)
    env.release()
    return result


#: per-window columns of windows.csv: the totals of the ratio estimators (metrics.stats.RATIOS)
#: and each window's own rates (for reading; the reported rates are ratios of the totals)
WINDOW_COLUMNS = ["window", "start_prompt", "generated_tokens", "makespan_s", "prefill_s", "decode_makespan_s",
                  "energy_j", "decode_energy_j", "throughput_tok_s", "throughput_e2e_tok_s", "tokens_per_j",
                  "tokens_per_j_e2e", "energy_per_token_j", "acceptance_rate", "mean_accepted_per_verify",
                  "drafted_tokens", "wasted_draft_tokens", "duplicate_drafter_forwards", "offpath_synthetic_tokens"]
#: summary rates that are ratio estimators over windows, each with a bootstrap 95% interval
WINDOW_RATES = ("throughput_tok_s", "tokens_per_j", "energy_per_token_j", "throughput_e2e_tok_s", "tokens_per_j_e2e")
#: summary fields recomputed from the pooled counters of all windows
_POOLED = ("acceptance_rate", "mean_accepted_per_verify", "preverify_accepted_tokens")


def combine_windows(cfg: SimConfig, results: list[RunResult], start_prompts: list[int],
                    intervals: bool = True) -> RunResult:
    """One result for the run: totals over windows, rates as ratios of the totals with bootstrap
    95% CIs over windows (metrics.stats; ``intervals=False``: the points alone), windows.csv rows.
    Its tables are framed on first use (:class:`CombinedRun`)."""
    rows = []
    for i, (r, p) in enumerate(zip(results, start_prompts)):
        row = {c: r.summary.get(c) for c in WINDOW_COLUMNS[2:]}
        rows.append({"window": i, "start_prompt": int(p), **row})
    if len(results) == 1:
        summary = dict(results[0].summary)
    else:
        # every entry combined by its declared rule (metrics.combine.RULES)
        summary = merge_summaries([r.summary for r in results])
        for k in ("generated_tokens", "makespan_s", "energy_j"):
            summary[k] = sum(r.summary[k] for r in results)
        mk = summary["makespan_s"]
        summary["device_idle_s"] = {d: max(0.0, mk - b) for d, b in summary["device_busy_s"].items()}
        summary["device_utilization"] = {d: (b / mk if mk > 0 else 0.0) for d, b in summary["device_busy_s"].items()}
        summary["trace_sha256"] = results[0].summary["trace_sha256"]
        summary["policy"], summary["mode"], summary["seed"] = (results[0].summary[k] for k in ("policy", "mode", "seed"))
        acc = summary["accepted_tokens"]
        dv = acc + summary["rejected_tokens"] + summary["killed_tokens"]
        summary["acceptance_rate"] = acc / dv if dv else 0.0
        npu_acc = acc - summary.get("preverify_accepted_tokens", 0)
        summary["mean_accepted_per_verify"] = npu_acc / summary["verifications"] if summary["verifications"] else 0.0
        summary["platform"] = results[0].summary["platform"]
    if "pim_placement" in summary.get("platform", {}):
        summary["pim_placement"] = summary["platform"]["pim_placement"]
    summary["windows"] = len(results)
    summary["window_tokens"] = cfg.run.generated_tokens
    summary["window_start_prompts"] = [int(p) for p in start_prompts]
    own = summary.pop("mode_windows", None) if len(results) == 1 else None
    own_table = None
    if own is not None:   # a mode that cuts its own windows (e.g. rounds of a tree trace)
        import pandas as pd
        own_table = pd.DataFrame({"window": range(own["n"]), **{k: own[k] for k in own if k not in ("n", "basis")}})
        summary["windows"], summary["window_basis"] = own["n"], own["basis"]
    from .metrics.stats import METHOD, ci_fields, has_totals, metric_ci, pooled_rate
    table = {c: [row[c] for row in rows] for c in WINDOW_COLUMNS} if own is None else own_table
    for k in WINDOW_RATES:
        if own is not None and not has_totals(table, k):
            continue
        # the ratio estimator over the windows' totals (= the run's totals), and its bootstrap
        # interval over whole windows; a mode's own windows only give the interval (its point is
        # the run's own total ratio)
        if intervals:
            point, ci = metric_ci(table, k)
        else:
            point, ci = pooled_rate(table, k), None
        summary.update(ci_fields(k, point if own is None else summary[k], ci))
    summary["ci_method"] = METHOD if intervals else "none"
    return CombinedRun(summary, [r.events for r in results], [r.energy for r in results], rows, own_table,
                       merge_windows([r.timeline for r in results]), summary["policy_stats"])


class CombinedRun(RunResult):
    """A run's result whose tables (``events``, ``energy``, ``windows``) are framed from the
    windows' rows on first use: writing a run folder needs no pandas (:mod:`ahasd_sim.csvrows`
    writes the same bytes from the rows), and importing and framing cost more than the run's
    writing. Each table is exactly what :func:`combine_windows` framed before."""

    def __init__(self, summary, window_events: list, window_energy: list, window_rows: list[dict],
                 own_windows_table, timeline, policy_stats):
        self.summary, self.timeline, self.policy_stats = summary, timeline, policy_stats
        self.window_events = window_events        # per window: a list of event dicts or a table
        self.window_energy = window_energy        # per window: (device, kind, energy_j) rows or a table
        self.window_rows = window_rows            # windows.csv rows (dicts over WINDOW_COLUMNS)
        # tables handed out (framed on use, set by a caller, or a mode's own windows table)
        self._tables: dict[str, Any] = {} if own_windows_table is None else {"windows": own_windows_table}

    def _table(self, name: str):
        t = self._tables.get(name)
        if t is None:
            t = self._tables[name] = getattr(self, f"_frame_{name}")()
        return t

    def _frame_events(self):
        import pandas as pd
        if any(e is None for e in self.window_events):
            raise ValueError("this run was simulated without its event rows (run_simulation(..., events=False)): "
                             "it has no events table; run it with events=True")
        frames = [e if isinstance(e, pd.DataFrame) else pd.DataFrame(e) for e in self.window_events]
        events = [f.assign(window=i) for i, f in enumerate(frames) if len(f)]
        # one window: its (already RangeIndex-ed) table as is
        return (events[0] if len(events) == 1 else pd.concat(events, ignore_index=True)) if events else frames[0]

    def _frame_energy(self):
        import pandas as pd
        frames = [e if isinstance(e, pd.DataFrame) else pd.DataFrame(e, columns=_ENERGY_COLUMNS)
                  for e in self.window_energy]
        if len(frames) == 1:   # one row per (device, kind) already: what the group-by sum gives back
            return frames[0]
        return pd.concat(frames).groupby(["device", "kind"], sort=False, as_index=False)["energy_j"].sum()

    def _frame_windows(self):
        import pandas as pd
        return pd.DataFrame(self.window_rows, columns=WINDOW_COLUMNS)

    def csv_tables(self, events: bool = True) -> dict[str, Any] | None:
        """{file name: (header, rows)} of the CSV files, straight from the rows
        (:mod:`ahasd_sim.csvrows`); None when some table needs pandas to be written, and once
        a table was handed out (a caller may have changed or replaced it: it is written as is).
        ``events=False``: without events.csv (a sweep point's default files)."""
        from . import csvrows
        written = (self.window_events if events else []) + self.window_energy
        if self._tables or not all(type(e) is list for e in written):
            return None
        out = {"events.csv": csvrows.events_rows(self.window_events)} if events else {}
        out.update({"energy_breakdown.csv": csvrows.energy_rows(self.window_energy),
                    "windows.csv": csvrows.windows_rows(self.window_rows, WINDOW_COLUMNS)})
        return None if any(t is None for t in out.values()) else out

    events = property(lambda self: self._table("events"), lambda self, v: self._tables.__setitem__("events", v))
    energy = property(lambda self: self._table("energy"), lambda self, v: self._tables.__setitem__("energy", v))
    windows = property(lambda self: self._table("windows"), lambda self, v: self._tables.__setitem__("windows", v))


def trace_models(trace) -> dict[str, str | None]:
    """The drafter and target that recorded the trace (acceptance comes from them)."""
    models = trace.header.get("models") or {}
    return {role: (models.get(role) or {}).get("name") for role in ("drafter", "target")}


def _by_task(by_label: dict[tuple[str, str], float]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for (dev, label), e in sorted(by_label.items()):
        out.setdefault(label, {})[dev] = e
    return out


def describe_platform(platform, mode) -> dict[str, Any]:
    """Derived hardware figures worth printing next to results (all computed)."""
    out: dict[str, Any] = {
        "memory_peak_bandwidth_gb_s": platform.memory.peak_bandwidth_bytes_s / 1e9,
        "memory_effective_bandwidth_gb_s": platform.memory.effective_bandwidth_bytes_s / 1e9,
    }
    if platform.npu is not None:
        out["npu_peak_tops"] = platform.npu.peak_tops
    if platform.gpu is not None:
        out["gpu_effective_bandwidth_gb_s"] = platform.gpu.effective_bandwidth_bytes_s / 1e9
    part = getattr(mode.costs, "partition", None)
    if part is not None:
        out["pim_draft_ranks"] = part.draft_ranks
        out["pim_target_ranks"] = part.target_ranks
        out["pim_shared_ranks"] = part.shared_ranks
    placement = getattr(mode.costs, "placement", None)
    if placement is not None:
        out["pim_placement"] = placement.as_dict()
    return out


def _dram_power(platform, breakdown: dict, makespan: float, dilation: float) -> dict:
    """The memory package's power against ``pim.dram_power_limit_w``: the budget the cap set (W),
    the bound on the package's power at any moment (instantaneous caps), the mean over the run
    (its energy / makespan) and the factor a mean cap slowed the run by."""
    from .hw.pim import PACKAGE_DEVICES
    b = platform.pim.power_budget()
    e = sum(v["dynamic"] + v["static"] for d, v in breakdown.items() if d in PACKAGE_DEVICES)
    out = {k: b[k] for k in ("limit_w", "kind", "static_w", "background_w", "host_io_w", "pim_achieved_w",
                             "pim_full_rate_w", "host_overlaps_pim", "pim_budget_w", "host_io_budget_w",
                             "host_rate_fraction")}
    peak = None
    if b["pim_budget_w"] is not None:
        both = b["pim_budget_w"] + b["host_io_budget_w"]
        peak = b["static_w"] + (both if b["host_overlaps_pim"] else max(b["pim_budget_w"], b["host_io_budget_w"]))
    out.update({"peak_bound_w": peak, "mean_w": e / makespan if makespan > 0 else 0.0,
                "mean_dilation": dilation})
    return out


def _assemble(cfg, platform, col: Collector, mode, policy, makespan, draft, target, trace,
              index: int = 0) -> RunResult:
    run = cfg.run
    ctr = col.counters
    # a mean package power cap slows the whole run uniformly until its energy over its makespan
    # meets the limit (a rate limiter over a window longer than a token)
    dilation = platform.pim.mean_power_dilation(col.dynamic_energy_j, makespan) if platform.pim is not None else 1.0
    makespan *= dilation
    # a mode that resolves its own drafter kind (moe_offload: a head for EAGLE-family policies) says so
    kind = getattr(mode, "drafter_kind", None) or drafter_kind(cfg, type(mode))
    # Energy: dynamic (logged per action) + static (power x makespan) per device.
    rows = []
    static_w = platform.devices()
    devices = sorted(set(static_w) | set(col.dynamic_energy_j))
    breakdown: dict[str, dict[str, float]] = {}
    for dev in devices:
        dyn = float(col.dynamic_energy_j.get(dev, 0.0))
        sta = float(static_w.get(dev, 0.0) * makespan)
        breakdown[dev] = {"dynamic": dyn, "static": sta}
        rows.append({"device": dev, "kind": "dynamic", "energy_j": dyn})
        rows.append({"device": dev, "kind": "static", "energy_j": sta})
    energy_j = float(sum(v["dynamic"] + v["static"] for v in breakdown.values()))
    busy_devices = sorted({*(d for d in ("npu", "pim", "gpu") if getattr(platform, d, None) is not None),
                           *col._busy_s})
    busy = {d: col.busy_s(d) for d in busy_devices}
    n = ctr.committed_tokens
    # Prefill (all devices wait for it): decode-only figures leave out its time and energy.
    prefill_s = float(getattr(mode, "prefill_s", 0.0)) * dilation
    prefill_dyn_j = sum(e for (_d, lab), e in col.dynamic_energy_by_label_j.items() if lab.startswith("prefill"))
    prefill_j = prefill_dyn_j + sum(static_w.values()) * prefill_s
    decode_s = makespan - prefill_s
    decode_j = energy_j - prefill_j
    drafted_verified = ctr.accepted_tokens + ctr.rejected_tokens + ctr.killed_tokens
    summary: dict[str, Any] = {
        "ahasd_sim_version": __version__,
        "mode": run.mode,
        "policy": run.policy,
        "draft_model": run.draft_model if kind == "model" else draft.name,
        "target_model": run.target_model,
        "drafter": kind,
        "acceptance_source": acceptance_source(cfg, kind, trace),
        "trace": run.trace,
        "trace_sha256": (trace.header.get("sha256") or trace.header.get("file_sha256")
                         or getattr(trace, "file_sha256", None)),
        # acceptance comes from the trace's real pair, time and energy from the model shapes above
        "trace_models": trace_models(trace),
        "seed": run.seed,
        "generated_tokens": n,
        "makespan_s": makespan,
        "decode_makespan_s": decode_s,
        "prefill_s": prefill_s,
        "prefills": int(getattr(mode, "prefills", 0)),
        "throughput_tok_s": n / decode_s if decode_s > 0 else 0.0,
        "throughput_e2e_tok_s": n / makespan if makespan > 0 else 0.0,
        "energy_j": energy_j,
        "prefill_energy_j": prefill_j,
        "decode_energy_j": decode_j,
        "energy_per_token_j": decode_j / n if n else 0.0,
        "tokens_per_j": n / decode_j if decode_j > 0 else 0.0,
        "tokens_per_j_e2e": n / energy_j if energy_j > 0 else 0.0,
        "acceptance_rate": ctr.accepted_tokens / drafted_verified if drafted_verified else 0.0,
        "mean_accepted_per_verify": ((ctr.accepted_tokens - ctr.preverify_accepted_tokens) / ctr.verifications
                                     if ctr.verifications else 0.0),
        "preverify_accepted_tokens": ctr.preverify_accepted_tokens,
        "drafted_tokens": ctr.drafted_tokens,
        "accepted_tokens": ctr.accepted_tokens,
        "rejected_tokens": ctr.rejected_tokens,
        "killed_tokens": ctr.killed_tokens,
        "wasted_draft_tokens": ctr.wasted_draft_tokens,
        "unverified_at_end": ctr.unverified_at_end,
        "discarded_draft_forwards": ctr.discarded_draft_forwards,
        "verifications": ctr.verifications,
        "rollbacks": ctr.rollbacks,
        "offpath_drafted_tokens": ctr.offpath_drafted_tokens,
        "offpath_synthetic_tokens": ctr.offpath_synthetic_tokens,
        "drafter_forwards": ctr.drafter_forwards,
        "reused_drafter_forwards": ctr.reused_drafter_forwards,
        "duplicate_drafter_forwards": ctr.duplicate_drafter_forwards,
        "npu_idle_draft_exhausted_s": ctr.npu_idle_draft_exhausted_s,
        "device_busy_s": busy,
        "device_idle_s": {d: max(0.0, makespan - b) for d, b in busy.items()},
        "device_utilization": {d: (b / makespan if makespan > 0 else 0.0) for d, b in busy.items()},
        "energy_breakdown_j": breakdown,
        "dynamic_energy_by_task_j": _by_task(col.dynamic_energy_by_label_j),
        "offchip_bytes": float(sum(col.offchip_bytes_by_task.values())),
        "offchip_bytes_by_task": dict(sorted(col.offchip_bytes_by_task.items())),
        "policy_stats": policy.stats(),
        "mode_stats": mode.stats(),
        "platform": describe_platform(platform, mode),
    }
    if platform.pim is not None:
        summary["dram_power"] = _dram_power(platform, breakdown, makespan, dilation)
    extra = getattr(mode, "summary_fields", None)   # mode-specific top-level metrics (mobile-cloud)
    if extra is not None:
        summary.update(extra(summary))
    timeline = (chrome_trace(col.busy_intervals, f"{run.mode}/{run.policy}", col.task_marks, index)
                if col.keep_intervals else None)
    # the rows as lists: framed by run_window, or on first use of a combined run's tables
    return RunResult(summary, col.events if col.keep_events else None, rows, timeline, policy.stats())


# pim.partition_policy auto tunes each mode's placement by simulating it: the placement code
# (below this module) reaches the engine through this registration, not an import
from .modes import placement as _placement  # noqa: E402
_placement.use_engine(sys.modules[__name__])
