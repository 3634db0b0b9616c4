"""A run's trace, from its configuration: the whole file ``run.trace`` names and one window's
replayed slice with its held-out part (the prompts a fitted policy may learn from).

The engine (``simulation``) chooses the windows; the modes that replay more than one phone
(mobile-cloud) load their peers' windows with the same functions.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..config.errors import ConfigError
from ..paths import resolve_data_path
from .format import Trace, TraceError, load_trace

if TYPE_CHECKING:
    from ..config.loader import SimConfig


def _config_error(cfg: "SimConfig", key: str, message: str) -> ConfigError:
    """An error about ``key``, blaming where it was set (``--set`` or the file that set it)."""
    return ConfigError(cfg.source_of(key), key, message)


def load_full_trace(cfg: SimConfig) -> Trace:
    """The whole trace ``run.trace`` names (looked up like every data file; a missing or bad file
    is an error naming ``run.trace`` and where it was set)."""
    run = cfg.run
    path = resolve_data_path(run.trace, cfg.source_file)
    if not path.is_file():
        what = "not found" if not path.exists() else "is not a regular file (a folder, device or pipe)"
        raise _config_error(cfg, "run.trace", f"trace file '{run.trace}' {what}")
    try:
        return load_trace(path)
    except TraceError as exc:
        raise chosen_by(cfg, "run.trace", exc) from None


def chosen_by(cfg: SimConfig, key: str, exc: TraceError) -> TraceError:
    """A trace error that also names the config key (and where it was set) that led to it."""
    return TraceError(exc.path, f"{exc.message} (from {key} in {cfg.source_of(key)})")


def load_run_trace(cfg: SimConfig, start_prompt: int | None = None,
                   trace: Trace | None = None) -> tuple[Trace, Trace, Trace | None]:
    """(full trace, the replayed slice, the held-out part used only for fitting policies) of the
    window starting at ``start_prompt`` (default ``run.trace_start_prompt``)."""
    run = cfg.run
    if trace is None:
        trace = load_full_trace(cfg)
    first = run.trace_start_prompt if start_prompt is None else start_prompt
    bounds = trace.prompt_bounds()
    n_prompts = len(bounds)
    if not 0 <= first < max(n_prompts, 1):
        raise _config_error(cfg, "run.trace_start_prompt", f"prompt {first} is out of range: the trace "
                            f"{run.trace} has {n_prompts} prompts (0..{n_prompts - 1})")
    # read-only columns (a file's, load_trace) only: a slice of writable arrays could be stale
    key = None
    if not any(a.flags.writeable for a in trace.columns.values()):
        key = (trace.path, trace.file_sha256, tuple((name, id(a)) for name, a in trace.columns.items()),
               run.generated_tokens, first)
        hit = _WINDOW_CACHE.get(key)
        if hit is not None:
            return trace, hit[0], hit[1]
    try:
        sim = trace.take(run.generated_tokens, first)
    except TraceError as exc:
        raise _config_error(cfg, "run.generated_tokens", f"{exc.message} in trace {run.trace}; lower "
                            "run.generated_tokens or run.trace_start_prompt") from None
    heldout = _heldout(trace, bounds, first, run.generated_tokens)
    if key is not None:
        if len(_WINDOW_CACHE) >= _WINDOW_CACHE_MAX:
            _WINDOW_CACHE.clear()
        # the columns are kept with the entry, so that their ids (the key) are not reused meanwhile
        _WINDOW_CACHE[key] = (sim, heldout, list(trace.columns.values()))
    return trace, sim, heldout


#: Window slices by (the full trace's path and column arrays, tokens, first prompt): every run of a sweep
#: (points, placement-tuning runs) replays the same few windows, and a slice carries its replay
#: tables (TraceReplay), built once per slice object. Slices are read-only and shared.
_WINDOW_CACHE: dict[tuple, tuple] = {}
_WINDOW_CACHE_MAX = 256


def _heldout(trace: Trace, bounds, first: int, n_tokens: int) -> Trace | None:
    """Held-out part for fitted predictors: whole prompts after the replayed slice, else before it
    (``bounds``: the trace's prompt bounds)."""
    start = int(bounds[first, 0])
    end = start + n_tokens
    after = [b for b in bounds if b[0] >= end]
    before = [b for b in bounds if b[1] <= start]
    if after:
        return trace.slice_positions(int(after[0][0]), len(trace))
    if before:
        return trace.slice_positions(0, int(before[-1][1]))
    return None
