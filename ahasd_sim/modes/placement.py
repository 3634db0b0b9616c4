"""Per-mode PIM rank placement (``pim.partition_policy: auto``; docs/modeling.md).

A mode that drafts on PIM while the target runs elsewhere (async, ahasd) and one that never
runs its two models at the same time (operator_sync) want different placements: the best of
one is not the best of the other. With ``auto`` every PIM mode is run once per candidate
placement on the tuning data (section ``tuning``: another trace than the reported one) and
keeps the best by ``tuning.objective``; a pinned ``pim.partition_policy`` is used as it is.
The choice and the candidates' measured values are reported in summary.json
(``pim_placement``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ..config.errors import ConfigError
from ..config.loader import SimConfig

#: candidates of ``auto``, in the order ties are broken
CANDIDATES = ("all_ranks", "striped", "min_fit", "proportional")

#: config errors that make one placement unusable (capacity), not the whole configuration
_PLACEMENT_KEYS = ("pim.partition_policy", "pim.ranks", "pim.rank_capacity_gib", "gpu.memory_gib", "h2d.enabled")

_CHOICES: dict[str, "Placement"] = {}   # tuning_key -> the choice
_WARNED: set[str] = set()

#: the simulation engine that tuning runs (``ahasd_sim.simulation``, which registers itself with
#: :func:`use_engine` when imported): the engine imports this module, so this one must not import it
_engine = None


def use_engine(engine) -> None:
    """Tune with ``engine``'s ``fork_map``, ``load_run_windows`` and ``run_simulation``."""
    global _engine
    _engine = engine


def _the_engine():
    if _engine is None:
        raise RuntimeError("pim.partition_policy auto tunes by simulating: import ahasd_sim.simulation first")
    return _engine


@dataclass(frozen=True)
class Placement:
    """The partition policy a run uses and how it was chosen."""

    policy: str
    chosen_by: str                                      # "pinned" | "tuned" | "not used by this mode"
    candidates: dict[str, float | None] = field(default_factory=dict)   # tuning objective per candidate
    objective: str | None = None
    tuning_trace: str | None = None

    def as_dict(self) -> dict:
        return {"policy": self.policy, "chosen_by": self.chosen_by, "objective": self.objective,
                "tuning_trace": self.tuning_trace, "candidates": dict(self.candidates)}


def place_models(pim, draft, target, cfg, policy: str):
    """The :class:`~ahasd_sim.hw.pim.RankPartition` of the draft and target model (weights plus
    ``pim.kv_reserve_tokens`` of KV each) under ``policy``."""
    tokens = cfg.pim.kv_reserve_tokens
    return pim.partition(draft.weight_bytes(), target.weight_bytes(), draft.kv_bytes_per_token() * tokens,
                         target_kv_reserve_bytes=target.kv_bytes_per_token() * tokens, policy=policy)


def mode_loads_drafter(mode_name: str) -> bool:
    """Whether ``mode_name`` keeps the draft model in memory next to the target."""
    from . import MODES
    return bool(getattr(MODES.get(mode_name), "loads_drafter", True))


def place_for_mode(pim, draft, target, cfg, policy: str):
    """The partition of what ``cfg.run.mode`` loads: the target alone (over every rank, with its KV
    reserve) for a mode without a drafter, else :func:`place_models` under ``policy``."""
    if not mode_loads_drafter(cfg.run.mode):
        return pim.place_target(target.weight_bytes(), target.kv_bytes_per_token() * cfg.pim.kv_reserve_tokens)
    return place_models(pim, draft, target, cfg, policy)


#: the order in which a mode that does not tune its placement tries the layouts under
#: ``pim.partition_policy: auto`` (striped first: it was the only layout before phone-sized memory)
UNTUNED_ORDER = ("striped", "proportional", "min_fit", "all_ranks")


def place_untuned(pim, draft, target, cfg, placement: "Placement"):
    """(partition, placement) of a mode that does not tune its placement: the pinned policy, or
    under ``auto`` the first layout of :data:`UNTUNED_ORDER` that holds what the mode loads (a
    phone's ranks may not hold a striped pair that a 64 GiB platform does); the last layout's
    error when none fits."""
    if cfg.pim.partition_policy != "auto" or placement.chosen_by != "not used by this mode":
        return place_for_mode(pim, draft, target, cfg, placement.policy), placement
    from ..config.errors import ConfigError
    err = None
    for policy in UNTUNED_ORDER:
        try:
            part = place_for_mode(pim, draft, target, cfg, policy)
        except ConfigError as exc:
            err = exc
            continue
        return part, Placement(policy, placement.chosen_by if policy == "striped" else
                               "not used by this mode (first layout that fits)")
    raise err


def mode_uses_placement(mode_name: str) -> bool:
    from . import MODES
    return bool(getattr(MODES.get(mode_name), "uses_pim_placement", False))


def resolve_placement(cfg, workers: int = 1) -> Placement:
    """The placement of ``cfg.run.mode`` on ``cfg``'s hardware (memoised per :func:`tuning_key`; ``workers``:
    processes for the tuning runs' windows)."""
    policy = cfg.pim.partition_policy
    if not cfg.pim.enabled or not mode_uses_placement(cfg.run.mode):
        # a mode that places no model pair on PIM ranks: any valid layout, never tuned
        # (a mode without a drafter holds the target alone over every rank: place_for_mode)
        return Placement("striped" if policy == "auto" else policy, "not used by this mode")
    if policy != "auto":
        return Placement(policy, "pinned")
    key = tuning_key(cfg)
    hit = _CHOICES.get(key)
    if hit is None:
        hit = _CHOICES[key] = _tune(cfg, workers)
    return hit


def _tune(cfg, workers: int = 1) -> Placement:
    fork_map = _the_engine().fork_map
    cfgs = tuning_configs(cfg)
    return choose_placement(cfg, fork_map(_candidate, [cfgs[c] for c in CANDIDATES], workers))


def needs_tuning(cfg) -> bool:
    """Whether :func:`resolve_placement` runs the tuning simulations for ``cfg``."""
    return bool(cfg.pim.enabled and mode_uses_placement(cfg.run.mode) and cfg.pim.partition_policy == "auto")


def tuning_configs(cfg) -> dict:
    """The candidate placements' tuning configs of ``cfg`` (in :data:`CANDIDATES` order): its
    hardware and mode on the tuning trace, each with one pinned partition policy. A sweep
    that spreads a point over several workers runs each with :func:`_candidate`."""
    t = cfg.tuning
    if t.trace == cfg.run.trace and t.trace not in _WARNED:
        _WARNED.add(t.trace)
        from ..cli_common import warn
        warn(f"{cfg.source_file}: tuning.trace is run.trace ({t.trace}): the placement is chosen on "
             "the data it is reported on; set tuning.trace to another trace")
    # run.trace_start_prompt: the tuning runs' windows (tuning.windows >= 2) are spread over the
    # tuning trace and never start there; 0 keeps its range check from testing the reported
    # run's start prompt against the tuning trace's prompts (and makes :func:`tuning_key` exact)
    base = [f"run.trace={t.trace}", f"run.windows={t.windows}", f"run.generated_tokens={t.generated_tokens}",
            "run.timeline=false", "run.trace_start_prompt=0"]
    # one validated replace, then the candidates differ in one field of a known choice set (a full
    # replace re-validates the whole tree: ~0.1 s each, per sweep point)
    tuned = cfg.replace(base + [f"pim.partition_policy={CANDIDATES[0]}"], source=None)
    return {cand: SimConfig({**tuned._sections, "pim": dataclasses.replace(tuned.pim, partition_policy=cand)},
                            tuned.source_file, tuned._provenance) for cand in CANDIDATES}


def choose_placement(cfg, outcomes: list) -> Placement:
    """The best placement of ``cfg`` from its candidates' tuning outcomes (:func:`_candidate`'s
    results, in :data:`CANDIDATES` order); raises the ConfigError of a configuration no candidate
    can run."""
    t = cfg.tuning
    scores: dict[str, float | None] = {}
    first_error = None
    for cand, outcome in zip(CANDIDATES, outcomes):
        if isinstance(outcome, ConfigError):   # this layout does not fit or cannot run: not a candidate
            exc = outcome
            if exc.key_path in ("run.trace", "run.generated_tokens", "run.windows", "tuning.trace"):
                raise ConfigError(cfg.source_of("tuning.trace"), "tuning.trace", f"{exc.message} (the trace pim.partition_policy "
                                  "auto chooses the placement on)") from None
            if exc.key_path not in _PLACEMENT_KEYS:
                # not about where the models sit: the reported run would fail the same way
                raise ConfigError(exc.source or cfg.source_of(exc.key_path), exc.key_path, exc.message) from None
            scores[cand] = None
            if first_error is None or (exc.key_path == "pim.ranks" and first_error.key_path != "pim.ranks"):
                first_error = exc            # the capacity error says most about why nothing fits
            continue
        scores[cand] = float(outcome[t.objective])
    valid = [c for c in CANDIDATES if scores[c] is not None]
    if not valid:
        key = first_error.key_path if first_error else "pim.partition_policy"
        raise ConfigError(cfg.source_of(key), key,
                          "no rank placement (" + ", ".join(CANDIDATES) + ") can run this mode: "
                          + (first_error.message if first_error else ""))
    best = max(valid, key=lambda c: (scores[c], -CANDIDATES.index(c)))
    return Placement(best, "tuned", scores, t.objective, t.trace)


def remember_placement(cfg, placement: Placement) -> None:
    """Make ``placement`` what :func:`resolve_placement` returns for ``cfg`` (and every config of
    the same :func:`tuning_key`) in this process (a worker that runs a window or the combination
    of a point tuned elsewhere)."""
    _CHOICES[tuning_key(cfg)] = placement


#: the run fields the tuning runs set for themselves (:func:`tuning_configs`): the reported run's
#: values of these do not enter the choice
_TUNING_SETS_RUN = ("trace", "windows", "generated_tokens", "timeline", "trace_start_prompt")


def tuning_key(cfg) -> str:
    """A text equal for two configs whose tuning runs are the same simulations (so their
    placement choice is the same): ``cfg`` without what :func:`tuning_configs` replaces (the
    reported trace, its window, window count and length). Points of a sweep or a study that
    differ only there, e.g. a study's trace windows, tune once."""
    run = dataclasses.replace(cfg.run, **{f: None for f in _TUNING_SETS_RUN})
    # the config's fingerprint with the run section's entry swapped: the fingerprint of
    # SimConfig({**cfg._sections, "run": run}), without making every other section's text again
    # (cfg's own is made once per config; this is asked once per window)
    fp, own = cfg.fingerprint(), f"('run', {cfg.run!r})"
    if fp.count(own) == 1:
        fp = fp.replace(own, f"('run', {run!r})")
    else:   # pragma: no cover - a section whose text contains the run section's entry
        fp = SimConfig({**cfg._sections, "run": run}, cfg.source_file).fingerprint()
    # the config file too: tuning.trace (and the model files) may be paths relative to it
    return f"{cfg.source_file}\n" + fp


def _candidate(ccfg):
    """One candidate's tuning run (its summary), or the ConfigError that rules it out."""
    engine = _the_engine()
    load_run_windows, run_simulation = engine.load_run_windows, engine.run_simulation
    try:
        # the objective's point estimate is all the choice reads: no bootstrap intervals, no
        # KV causality audit (the reported run's windows run the same code and are audited) and
        # no event rows
        return dict(run_simulation(ccfg, load_run_windows(ccfg), intervals=False, audit=False,
                                   events=False).summary)
    except ConfigError as exc:
        return exc


def dry_run_lines(cfg, platform, draft, target) -> tuple[list[str], str | None]:
    """(report lines, a candidate policy that fits) for ``--dry-run``: which placements fit the
    models, without running the tuning simulations; the tuning trace is checked to exist."""
    if platform.pim is None or not mode_uses_placement(cfg.run.mode) or cfg.pim.partition_policy != "auto":
        return [], None
    from ..paths import resolve_data_path
    path = resolve_data_path(cfg.tuning.trace, cfg.source_file)
    if not path.is_file():
        raise ConfigError(cfg.source_of("tuning.trace"), "tuning.trace", f"trace file '{cfg.tuning.trace}' not found "
                          "(pim.partition_policy auto chooses each mode's placement on it)")
    fits, first_error = [], None
    for cand in CANDIDATES:
        try:
            place_models(platform.pim, draft, target, cfg, cand)
        except ConfigError as exc:
            # the run's tuning keeps the same error (choose_placement): the dry run says the same line
            if first_error is None or (exc.key_path == "pim.ranks" and first_error.key_path != "pim.ranks"):
                first_error = exc
            continue
        fits.append(cand)
    if not fits:
        key = first_error.key_path if first_error else "pim.ranks"
        raise ConfigError(cfg.source_of(key), key, "no rank placement (" + ", ".join(CANDIDATES) + ") can run this "
                          "mode: " + (first_error.message if first_error else ""))
    return [f"  pim placement: auto; fitting candidates {', '.join(fits)}; the best is chosen on "
            f"{cfg.tuning.trace} when the run starts"], fits[0]
