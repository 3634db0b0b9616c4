"""The reproduction's sweeps as the command line runs them: the shipped sweep files with the
run's overrides, a restricted copy (the timeline sweep), and the token budget a trace allows."""
from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Iterable, Sequence

from ..config.errors import InputError
from ..sweep.spec import SweepSpec


def with_overrides(spec: SweepSpec, overrides: Iterable[str], name: str | None = None) -> SweepSpec:
    """A copy of ``spec`` whose base ``set`` ends with ``overrides`` (they win over base.set;
    variants and axes still apply after them)."""
    new = copy.copy(spec)
    new.base_set = [*spec.base_set, *overrides]
    if name:
        new.name = name
    return new


def restrict(spec: SweepSpec, *, model_pairs: Sequence[str] | None = None, policies: Sequence[str] | None = None,
             variants: Sequence[str] | None = None, name: str | None = None) -> SweepSpec:
    """A copy of ``spec`` keeping only the given model pairs ('draft/target'), policies, variants."""
    new = copy.copy(spec)
    axes = []
    for ax in spec.shortcut_axes:
        keep = None
        if ax.name == "model_pair" and model_pairs is not None:
            keep = [i for i, lab in enumerate(ax.labels) if lab in model_pairs]
        elif ax.name == "run.policy" and policies is not None:
            keep = [i for i, lab in enumerate(ax.labels) if lab in policies]
        if keep is not None:
            if not keep:
                raise InputError(f"restrict: none of {model_pairs if ax.name == 'model_pair' else policies} "
                                 f"in the sweep's {ax.name} values {ax.labels}")
            ax = dataclasses.replace(ax, values=[ax.values[i] for i in keep], labels=[ax.labels[i] for i in keep])
        axes.append(ax)
    new.shortcut_axes = axes
    if variants is not None:
        new.variants = [v for v in spec.variants if v.name in variants]
    if name:
        new.name = name
    return new


def trace_token_budget(trace_path: Path, wanted: int, min_fit_positions: int = 200) -> tuple[int, str | None]:
    """Largest token count <= ``wanted`` that leaves whole prompts with at least
    ``min_fit_positions`` positions after the replayed slice (SpecDec++ fits its acceptance
    predictor on them). Returns (tokens, reason it was reduced or None)."""
    from ..traces.format import load_trace
    t = load_trace(trace_path)
    n = len(t)
    starts = [int(b[0]) for b in t.prompt_bounds()]
    ok = [s for s in starts if n - s >= min_fit_positions and s > 0]
    if n - wanted >= min_fit_positions and any(s >= wanted and n - s >= min_fit_positions for s in starts):
        return wanted, None
    if not ok:
        raise InputError(f"{trace_path}: {n} positions in {len(starts)} prompts cannot give both replayed tokens and "
                         f"a held-out part of {min_fit_positions} positions for SpecDec++")
    best = min(wanted, max(ok))
    return best, (f"the trace {trace_path.name} has {n} positions in {len(starts)} prompts; SpecDec++ needs whole "
                  f"prompts with >= {min_fit_positions} positions after the replayed slice to fit its acceptance "
                  f"predictor, so every point replays {best} tokens instead of {wanted}")
