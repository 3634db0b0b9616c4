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
        raise _config_error(cfg, "run.trace", f"trace file '{run.trace}' not found")
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
    n_prompts = len(trace.prompt_bounds())
    if not 0 <= first < max(n_prompts, 1):
        raise _config_error(cfg, "run.trace_start_prompt", f"prompt {first} is out of range: the trace "
                            f"{run.trace} has {n_prompts} prompts (0..{n_prompts - 1})")
    try:
        sim = trace.take(run.generated_tokens, first)
    except TraceError as exc:
        raise _config_error(cfg, "run.generated_tokens", f"{exc.message} in trace {run.trace}; lower "
                            "run.generated_tokens or run.trace_start_prompt") from None
    bounds = trace.prompt_bounds()
    start = int(bounds[first, 0])
    end = start + run.generated_tokens
    # Held-out part for fitted predictors: whole prompts after the replayed slice, else before it.
    after = [b for b in bounds if b[0] >= end]
    before = [b for b in bounds if b[1] <= start]
    heldout = None
    if after:
        heldout = trace.slice_positions(int(after[0][0]), len(trace))
    elif before:
        heldout = trace.slice_positions(0, int(before[-1][1]))
    return trace, sim, heldout
