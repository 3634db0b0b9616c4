"""``python -m ahasd_sim sensitivity``: which knobs of a study's search space matter.

Two measures over the study's objectives:

* **One-at-a-time (OAT)** around a base point (each parameter's ``base:``, else the value in
  the base config, else the middle of its range): every parameter in turn is moved to the ends
  of its range (``oat_points`` evenly spaced values, log-spaced on log ranges; every choice of
  a categorical one) with the others at the base. Every point runs on the same trace windows
  (``sensitivity.windows``, else the study's ``windows``) as the base point, so each OAT effect
  is a **paired difference**: per window, the point's objective minus the base point's, then
  the mean difference and its 95% interval ``[low, high]`` over windows (Student t on the
  differences, one window = one sample, none below
  :data:`~ahasd_sim.metrics.stats.MIN_T_SAMPLES` windows); an effect "excludes zero" only
  beyond :data:`~ahasd_sim.metrics.stats.ZERO_REL_TOL` of the base value (smaller differences
  are rounding noise). The tornado chart shows, per objective, the lowest and highest value
  each parameter reaches (base + mean difference), widest span on top, with the intervals of
  the differences as error bars.
* **Sobol indices** (variance-based, global) with SALib: Saltelli blocks from a scrambled
  Sobol' sequence of ``2 D`` dimensions (seed ``seed``), parameters mapped from [0, 1] onto
  their ranges (log-uniform on log ranges; equal-width bins over the choices of a categorical
  one). **Constraint-aware sampling**: a block (``A_j``, the ``D`` points ``AB_ij``, ``B_j``) is
  kept only when all its ``D + 2`` points are feasible (checked before running: the study's
  constraints and :data:`~ahasd_sim.dse.evaluate.MEMORY_FIT`); the first ``N`` feasible blocks
  of the sequence are run, so the indices are those of the feasible part of the space (said in
  the report with the number of blocks skipped). A block with a point whose simulation fails
  is left out of the indices, the failure listed and the command exits 1. First-order ``S1``
  and total ``ST`` indices with bootstrap 95% intervals ``[low, high]``, clipped to [0, 1], the
  range of an index (an estimate itself may fall slightly below 0: sampling noise around 0).
  **Sample size by convergence, within a budget**: the indices are computed on the first N/4,
  N/2 and N blocks (``sobol_convergence.csv``); with ``sobol_tolerance`` the sample starts at
  ``sobol_samples`` and is doubled until no ``ST`` moves by more than the tolerance from N/2 to
  N, never past the budget (``--sobol-samples``, else ``sobol_max_samples``, a hard cap); the
  report says whether the indices converged within it. Optional extra ``dse``
  (``pip install 'ahasd_sim[dse]'``).

Outputs in ``<study folder>/sensitivity/`` (``--out``, default ``studies/<name>``; simulations are stored and reused in the
study folder's ``points/``, shared with ``optimize``): ``oat.csv`` (every OAT point with its
paired difference), ``tornado.csv`` (per objective and parameter: low/high ends, their paired
differences and intervals), ``sobol.csv``, ``sobol_convergence.csv``,
``figures/tornado_<objective>``, ``figures/sobol_<objective>``, ``sensitivity.md``.
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..config.errors import InputError
from ..output import atomic_write, atomic_write_text
from ..sweep.progress import Progress, fmt_duration
from ..metrics.stats import excludes_zero, t_interval
from .evaluate import DesignPoint, Executor, count_computed, evaluate, plan
from .study import Param, Study, config_value, load_study


def base_value(study: Study, p: Param) -> Any:
    """The OAT base value of ``p``: its ``base:``, else the base config's value if it lies in the
    range (or among the choices), else the middle of the range (geometric on log) / first choice."""
    if p.base is not None:
        return p.base
    try:
        vals = tuple(config_value(study.base, k) for k in p.keys)
    except KeyError:   # pragma: no cover - keys were validated
        vals = None
    if p.kind == "categorical":
        want = vals if len(p.keys) > 1 else (vals[0] if vals else None)
        for c, lab in zip(p.choices, p.labels):   # compare values (6400 == 6400.0), not their labels
            if vals is not None and (tuple(c) == tuple(want) if len(p.keys) > 1 else c == want):
                return lab
        return p.labels[0]
    v = vals[0] if vals else None
    if isinstance(v, (int, float)) and not isinstance(v, bool) and p.low <= v <= p.high:
        return v
    return p.from_unit(0.5)


def oat_values(p: Param, n: int) -> list[Any]:
    if p.kind == "categorical":
        return list(p.labels)
    us = np.linspace(0.0, 1.0, max(2, n))
    return list(dict.fromkeys(p.from_unit(u) for u in us))


def _progress_points(study, pts, points_dir, ex, prog, runs: dict[str, int]) -> None:
    """Evaluate ``pts``; ``runs["computed"]`` counts the simulations run (not found finished)."""
    evaluate(study, pts, points_dir, ex, on_point=lambda pt: prog.update("failed" if pt.error else "ok"),
             on_run=count_computed(runs, "computed"))


def paired_difference(pt: DesignPoint, base: DesignPoint, j: int) -> tuple[float, list[float] | None]:
    """``pt``'s objective ``j`` minus ``base``'s (each the study's estimator over the same windows:
    a ratio of totals for a rate), and the 95% interval ``[low, high]`` around it from the
    per-window differences (Student t; None below MIN_T_SAMPLES windows): both points ran on the
    same windows, so the interval is paired."""
    if pt.samples is None or base.samples is None:
        return float("nan"), None
    if pt.windows != base.windows:
        raise ValueError(f"point {pt.key} ran on windows {pt.windows}, the base point on {base.windows}")
    if pt.values is None or base.values is None:
        return float("nan"), None
    d = [a - b for a, b in zip(pt.samples[j], base.samples[j])]
    return t_interval(d, center=pt.values[j] - base.values[j])


def saltelli_blocks(d: int, n: int, seed: int, start: int = 0) -> np.ndarray:
    """Rows ``start .. start + n - 1`` of the Saltelli design without second-order terms, as
    blocks of ``d + 2`` rows each (``A_j``, ``AB_1j`` .. ``AB_dj``, ``B_j``; SALib's order), from a
    scrambled Sobol' sequence in ``2 d`` dimensions; shape (n, d + 2, d)."""
    import warnings

    from scipy.stats import qmc
    eng = qmc.Sobol(d=2 * d, scramble=True, seed=seed)
    if start:
        eng.fast_forward(start)
    with warnings.catch_warnings():   # a chunk past a power of two: the sequence goes on all the same
        warnings.simplefilter("ignore", UserWarning)
        base = eng.random(n)
    out = np.empty((n, d + 2, d))
    for j, row in enumerate(base):
        a, b = row[:d], row[d:]
        out[j, 0] = a
        for i in range(d):
            ab = a.copy()
            ab[i] = b[i]
            out[j, 1 + i] = ab
        out[j, d + 1] = b
    return out


class SobolDesign:
    """Feasible Saltelli blocks drawn in sequence order (see the module docstring)."""

    def __init__(self, study: Study, windows, max_candidates_per_block: int = 8):
        self.study, self.windows = study, windows
        self.d = len(study.space)
        self.blocks: list[list[DesignPoint]] = []     # kept (every point feasible)
        self.skipped = 0                              # candidate blocks with an infeasible point
        self.first_skip: str | None = None
        self.drawn = 0
        self.ratio = max_candidates_per_block

    def extend_to(self, n: int) -> None:
        while len(self.blocks) < n:
            need = n - len(self.blocks)
            chunk = max(need, 8)
            if self.drawn > self.ratio * max(n, 8):
                raise InputError(f"{self.study.source}: sensitivity: only {len(self.blocks)} of {self.drawn} Sobol "
                                 f"blocks are feasible (e.g. {self.first_skip}); narrow the space")
            X = saltelli_blocks(self.d, chunk, self.study.seed, start=self.drawn)
            for j, blk in enumerate(X):
                idx = self.drawn + j
                pts = [plan(self.study, ("sobol", idx, k), {p.name: p.from_unit(u) for p, u in zip(self.study.space, row)},
                            self.windows) for k, row in enumerate(blk)]
                bad = next((q for q in pts if q.infeasible), None)
                if bad is not None:
                    self.skipped += 1
                    self.first_skip = self.first_skip or bad.infeasible
                elif len(self.blocks) < n:
                    self.blocks.append(pts)
            self.drawn += chunk

    def points(self, n: int) -> list[DesignPoint]:
        return [q for blk in self.blocks[:n] for q in blk]


def salib_seed(seed: int) -> int:
    """The seed SALib's bootstrap of the Sobol intervals gets for the study's ``seed``: seed + 1.
    SALib seeds only a truthy seed (``if seed:``), so a study's default seed 0 left the intervals
    to numpy's unseeded global generator: ``S1_conf``/``ST_conf`` changed from run to run."""
    return int(seed) + 1


def sobol_indices(study: Study, blocks: list[list[DesignPoint]], j: int) -> dict[str, np.ndarray] | None:
    """SALib's S1/ST (with bootstrap 95% intervals) of objective ``j`` over the blocks whose every
    point has a result; None with fewer than 2 such blocks."""
    from SALib.analyze import sobol as sobol_analyze
    good = [blk for blk in blocks if all(q.values is not None for q in blk)]
    if len(good) < 2:
        return None
    Y = np.array([q.values[j] for blk in good for q in blk], dtype=float)
    problem = {"num_vars": len(study.space), "names": [p.name for p in study.space],
               "bounds": [[0.0, 1.0]] * len(study.space)}
    res = sobol_analyze.analyze(problem, Y, calc_second_order=False, conf_level=0.95,
                                print_to_console=False, seed=salib_seed(study.seed))
    out = {k: np.asarray(res[k], dtype=float) for k in ("S1", "S1_conf", "ST", "ST_conf")} | {"n": len(good)}
    for k in ("S1", "ST"):      # [low, high] within [0, 1], the range of an index
        out[f"{k}_ci95_low"] = np.clip(out[k] - out[f"{k}_conf"], 0.0, 1.0)
        out[f"{k}_ci95_high"] = np.clip(out[k] + out[f"{k}_conf"], 0.0, 1.0)
    return out


def sobol_budget(cfg: dict, cli_samples: int | None) -> tuple[int, int]:
    """(first N, budget) of the Sobol sample in Saltelli blocks. The budget is a hard cap:
    ``--sobol-samples`` when given, else ``sobol_max_samples``, else ``sobol_samples``. With a
    ``sobol_tolerance`` the sample starts at ``sobol_samples`` (at most the budget) and doubles
    while the indices move; without one, the whole budget is run at once."""
    start = int(cfg.get("sobol_samples", 0))
    budget = cli_samples if cli_samples is not None else int(cfg.get("sobol_max_samples", start))
    if cfg.get("sobol_tolerance") is None or not start:
        return budget, budget
    return min(start, budget), budget


def run_sensitivity(study: Study | str | Path, out_dir: str | Path | None = None, *, workers: int | None = None,
                    executor: str = "local", scheduler: str | None = None, sobol_samples: int | None = None,
                    progress: bool = True, dask_client: Any = None, stream=None) -> dict[str, Any]:
    if not isinstance(study, Study):
        study = load_study(study)
    from .optimize import StudyLock, default_out_dir
    study_dir = Path(out_dir) if out_dir is not None else default_out_dir(study)
    out = study_dir / "sensitivity"
    points_dir = study_dir / "points"
    from .folders import check_study_folder
    check_study_folder(study_dir, study.name, "sensitivity")
    cfg = study.sensitivity
    windows = cfg.get("windows") or study.windows
    n_oat = int(cfg.get("oat_points", 2))
    tol = cfg.get("sobol_tolerance")
    n_sobol, n_max = sobol_budget(cfg, sobol_samples)
    from .folders import check_sobol_samples
    check_sobol_samples(n_max, len(study.space), "--sobol-samples" if sobol_samples is not None
                        else f"{study.source}: sensitivity.sobol_max_samples")
    if n_sobol:
        try:
            import SALib  # noqa: F401
        except ImportError:
            raise InputError("Sobol indices need SALib: pip install 'ahasd_sim[dse]' (or --sobol-samples 0)") from None
    ex = Executor(executor, workers, scheduler, dask_client)
    t0 = time.perf_counter()
    base = {p.name: base_value(study, p) for p in study.space}
    # ---- OAT design
    base_pt = plan(study, ("base", "", ""), base, windows)
    if base_pt.infeasible or base_pt.error:
        raise InputError(f"{study.source}: sensitivity: the base point {base} cannot run: "
                         f"{base_pt.infeasible or base_pt.error}; set the parameters' base: values")
    oat_pts: list[DesignPoint] = [base_pt]
    for p in study.space:
        for v in oat_values(p, n_oat):
            if v == base[p.name]:
                continue
            oat_pts.append(plan(study, ("oat", p.name, v), {**base, p.name: v}, windows))
    design = SobolDesign(study, windows) if n_sobol else None
    conv_rows: list[dict] = []
    sob = pd.DataFrame()
    converged = None
    runs = {"computed": 0}
    with StudyLock(study_dir):
        from .folders import clean_stale_points
        clean_stale_points(points_dir)      # staging folders of points whose process was killed
        try:
            n = n_sobol
            if design is not None:
                design.extend_to(n)
            first = oat_pts + (design.points(n) if design else [])
            prog = Progress(len(first), enabled=progress, stream=stream, desc=f"{study.name} sensitivity")
            try:
                _progress_points(study, first, points_dir, ex, prog, runs)
            finally:
                prog.close()
            while design is not None:
                conv_rows = _convergence(study, design.blocks[:n])
                moved = max((r["max_abs_dST"] for r in conv_rows if r["n"] == n and r["max_abs_dST"] == r["max_abs_dST"]),
                            default=float("nan"))
                converged = bool(moved <= tol) if tol is not None and moved == moved else None
                if tol is None or converged or 2 * n > n_max:
                    break
                design.extend_to(2 * n)
                more = design.points(2 * n)[len(design.points(n)):]
                prog = Progress(len(more), enabled=progress, stream=stream, desc=f"{study.name} Sobol N={2 * n}")
                try:
                    _progress_points(study, more, points_dir, ex, prog, runs)
                finally:
                    prog.close()
                n *= 2
        finally:
            ex.close()
    wall = time.perf_counter() - t0
    onames = [o.name for o in study.objectives]
    sob_pts = design.points(n) if design else []

    # ---- OAT tables (paired differences from the base point)
    rows = []
    for pt in oat_pts:
        kind, pname, _ = pt.key
        r = {"kind": kind, "parameter": pname or "(base)", "value": pt.params.get(pname, "") if pname else "",
             "status": pt.status, "error": pt.error or pt.infeasible}
        for j, o in enumerate(onames):
            r[o] = pt.values[j] if pt.values else float("nan")
            ci = pt.ci95[j] if pt.ci95 else None
            r[f"{o}_ci95_low"], r[f"{o}_ci95_high"] = ci if ci else (float("nan"), float("nan"))
            dm, dci = paired_difference(pt, base_pt, j) if pt.values else (float("nan"), None)
            r[f"{o}_diff"] = dm
            r[f"{o}_diff_ci95_low"], r[f"{o}_diff_ci95_high"] = dci if dci else (float("nan"), float("nan"))
        rows.append(r)
    oat = pd.DataFrame(rows)
    base_row = oat.iloc[0]
    if base_row["status"] != "ok":
        raise InputError(f"{study.source}: the sensitivity base point {base} did not run: {base_row['error']}")
    torn_rows = []
    for p in study.space:
        d = pd.concat([oat.iloc[[0]].assign(value=base[p.name]), oat[(oat["parameter"] == p.name)]])
        d = d[d["status"] == "ok"]
        for o in onames:
            lo_i, hi_i = d[f"{o}_diff"].idxmin(), d[f"{o}_diff"].idxmax()
            lo, hi = d.loc[lo_i], d.loc[hi_i]
            sig = any(excludes_zero([x[f"{o}_diff_ci95_low"], x[f"{o}_diff_ci95_high"]], scale=base_row[o])
                      for x in (lo, hi))
            torn_rows.append({"objective": o, "parameter": p.name,
                              "low": base_row[o] + lo[f"{o}_diff"], "low_label": _lab(lo["value"]),
                              "low_diff": lo[f"{o}_diff"], "low_diff_ci95_low": lo[f"{o}_diff_ci95_low"],
                              "low_diff_ci95_high": lo[f"{o}_diff_ci95_high"],
                              "high": base_row[o] + hi[f"{o}_diff"], "high_label": _lab(hi["value"]),
                              "high_diff": hi[f"{o}_diff"], "high_diff_ci95_low": hi[f"{o}_diff_ci95_low"],
                              "high_diff_ci95_high": hi[f"{o}_diff_ci95_high"],
                              "span": hi[f"{o}_diff"] - lo[f"{o}_diff"], "base": base_row[o],
                              "base_ci95_low": base_row[f"{o}_ci95_low"], "base_ci95_high": base_row[f"{o}_ci95_high"],
                              "effect_excludes_zero": bool(sig),
                              "failed_points": int((oat["parameter"] == p.name).sum() - (len(d) - 1))})
    torn = pd.DataFrame(torn_rows)
    if len(torn):
        torn = torn.sort_values(["objective", "span"], ascending=[True, False])

    # ---- Sobol
    sobol_note = ""
    if design is not None:
        srows = []
        n_good = 0
        for j, o in enumerate(onames):
            res = sobol_indices(study, design.blocks[:n], j)
            if res is None:
                continue
            n_good = res["n"]
            for k, p in enumerate(study.space):
                srows.append({"objective": o, "parameter": p.name, "S1": res["S1"][k],
                              "S1_ci95_low": res["S1_ci95_low"][k], "S1_ci95_high": res["S1_ci95_high"][k],
                              "ST": res["ST"][k], "ST_ci95_low": res["ST_ci95_low"][k],
                              "ST_ci95_high": res["ST_ci95_high"][k], "blocks": res["n"]})
        sob = pd.DataFrame(srows)
        sobol_note = (f"Sobol sample: N = {n} feasible Saltelli blocks of {len(study.space) + 2} points "
                      f"({n * (len(study.space) + 2)} design points) from the first {design.drawn} blocks of the "
                      f"Sobol' sequence; {design.skipped} blocks skipped because a point is infeasible"
                      + (f" (e.g. {design.first_skip})" if design.first_skip else "")
                      + "; the indices describe the feasible part of the space"
                      + (f"; {n - n_good} blocks left out because a simulation failed" if n_good < n else "") + ". ")
        if not len(sob):
            sobol_note += "Sobol indices not computed: fewer than 2 complete blocks. "
        if tol is not None:
            sobol_note += (f"Convergence: largest change of an ST from N/2 to N = {n} is "
                           + (f"{max(r['max_abs_dST'] for r in conv_rows if r['n'] == n):.3g}" if conv_rows else "n/a")
                           + f" (tolerance {tol:g}: " + ("converged" if converged else
                                                        f"NOT converged within the budget of {n_max} blocks"
                                                        if converged is False else
                                                        f"not measured: the check compares N/2 with N and needs "
                                                        f"N >= 4 blocks") + ").")
        else:
            sobol_note += "No sobol_tolerance given: N was not chosen by the convergence check (table below)."

    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "oat.csv", lambda fh: oat.to_csv(fh, index=False))
    atomic_write(out / "tornado.csv", lambda fh: torn.to_csv(fh, index=False))
    if len(sob):
        atomic_write(out / "sobol.csv", lambda fh: sob.to_csv(fh, index=False))
    conv = pd.DataFrame(conv_rows)
    if len(conv):
        atomic_write(out / "sobol_convergence.csv", lambda fh: conv.to_csv(fh, index=False))
    figs = _figures(study, torn, sob, out / "figures")
    failed = [pt for pt in oat_pts + sob_pts if pt.error and not pt.infeasible]
    stats = {"out_dir": out, "oat_points": len(oat_pts), "sobol_points": len(sob_pts), "wall_s": wall,
             "computed_runs": runs["computed"],
             "windows": windows, "sobol_samples": n if design else 0, "failed": len(failed),
             "failed_points": [(pt.key, pt.error) for pt in failed],
             "infeasible": int(sum(bool(pt.infeasible) for pt in oat_pts)),
             "sobol_skipped_blocks": design.skipped if design else 0, "sobol_converged": converged, "sobol_budget": n_max if design else 0,
             "base_placements": dict(base_pt.placements)}
    atomic_write_text(out / "sensitivity.md", _report(study, base, torn, sob, sobol_note, figs, out, stats, conv))
    stats["tornado"], stats["sobol"], stats["oat"], stats["convergence"] = torn, sob, oat, conv
    return stats


def _convergence(study: Study, blocks: list[list[DesignPoint]]) -> list[dict]:
    """ST and S1 of every objective and parameter on the first N/4, N/2 and N blocks, and per N
    the largest |ST(N) - ST(N/2)| over the parameters."""
    n = len(blocks)
    sizes = sorted({k for k in (n // 4, n // 2, n) if k >= 2})
    rows: list[dict] = []
    for j, o in enumerate(study.objectives):
        prev = None
        for k in sizes:
            res = sobol_indices(study, blocks[:k], j)
            if res is None:
                continue
            moved = float(np.max(np.abs(res["ST"] - prev))) if prev is not None else float("nan")
            for i, p in enumerate(study.space):
                rows.append({"objective": o.name, "n": k, "parameter": p.name, "S1": float(res["S1"][i]),
                             "ST": float(res["ST"][i]), "ST_ci95_low": float(res["ST_ci95_low"][i]),
                             "ST_ci95_high": float(res["ST_ci95_high"][i]), "max_abs_dST": moved})
            prev = res["ST"]
    return rows


def _lab(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _figures(study: Study, torn: pd.DataFrame, sob: pd.DataFrame, fig_dir: Path) -> list[Path]:
    from ..plots.pareto import objective_label, sobol_bars, tornado
    paths = []
    for o in study.objectives:
        label = objective_label(o.metric, o.run, o.over)
        d = torn[torn["objective"] == o.name]
        if len(d):
            paths += tornado(d, o.name, float(d["base"].iloc[0]), fig_dir / f"tornado_{o.name}",
                             ref=1.0 if o.is_ratio else None, label=label,
                             title=f"One-at-a-time sensitivity: {label}")
        if len(sob):
            s = sob[sob["objective"] == o.name]
            paths += sobol_bars(s, o.name, fig_dir / f"sobol_{o.name}", label=label)
    return paths


def _report(study, base, torn, sob, sobol_note, figs, out, stats, conv=None) -> str:
    from ..metrics.stats import ZERO_REL_TOL, fmt_ci, too_few
    from .report import md_table
    n_w = len(stats["windows"] or [None])
    lines = [f"# Sensitivity of study `{study.name}`", "",
             "Generated by `python -m ahasd_sim sensitivity`. One-at-a-time (OAT) around the base point, "
             f"{stats['oat_points']} design points; "
             + (f"Sobol indices from {stats['sobol_points']} design points (N = {stats['sobol_samples']}); "
                if stats["sobol_points"] else "no Sobol indices; ")
             + f"trace windows {stats['windows'] or 'of the base config'} (OAT intervals: 95% intervals of the "
             "paired per-window differences from the base point); "
             f"this invocation ran {stats['computed_runs']} simulations (the others were found finished in "
             f"`points/`) in {fmt_duration(stats['wall_s'])}.", "", "Base point: "
             + ", ".join(f"`{k}` = {_lab(v)}" for k, v in base.items())
             + ("; PIM placements at the base point: " + ", ".join(f"`{r}` {pol}" for r, pol in
                                                                  stats["base_placements"].items())
                if stats.get("base_placements") else ""), ""]
    for o in study.objectives:
        d = torn[torn["objective"] == o.name]
        if not len(d):
            continue
        lines += [f"## `{o.name}` ({o.describe()})", "",
                  f"Base point: {fmt_ci(d['base'].iloc[0], [d['base_ci95_low'].iloc[0], d['base_ci95_high'].iloc[0]], 4, too_few(n_w, 't'))} "
                  "(95% over windows). "
                  "`low_diff`/`high_diff`: difference from the base point's value (same windows), `*_diff_ci95_low`/"
                  "`*_diff_ci95_high` its 95% interval from the paired per-window differences; "
                  "`effect_excludes_zero`: an end's interval excludes 0 by more than "
                  f"{ZERO_REL_TOL:g} of the base value.", "",
                  md_table(d, ["parameter", "low_label", "low", "low_diff", "low_diff_ci95_low", "low_diff_ci95_high",
                               "high_label", "high", "high_diff", "high_diff_ci95_low", "high_diff_ci95_high",
                               "span", "effect_excludes_zero"]), ""]
        if len(sob):
            s = sob[sob["objective"] == o.name].sort_values("ST", ascending=False)
            lines += ["Sobol indices (95% bootstrap intervals `[low, high]`, clipped to [0, 1], the range of an index):", "",
                      md_table(s, ["parameter", "S1", "S1_ci95_low", "S1_ci95_high", "ST", "ST_ci95_low",
                                   "ST_ci95_high"]), ""]
    if sobol_note:
        lines += [sobol_note, ""]
    if conv is not None and len(conv):
        c = conv.groupby(["objective", "n"], as_index=False)["max_abs_dST"].first()
        lines += ["Convergence of the Sobol indices (largest |ST(N) - ST(N/2)| over the parameters; every index "
                  "at every N in `sobol_convergence.csv`):", "", md_table(c, ["objective", "n", "max_abs_dST"]), ""]
    if stats.get("failed_points"):
        lines += [f"Failed design points ({stats['failed']}):", ""]
        lines += [f"* {_key(k)}: {e}" for k, e in stats["failed_points"]]
        lines.append("")
    for f in figs:
        if f.suffix == ".png":
            lines.append(f"![{f.stem}]({f.relative_to(out).as_posix()})")
    return "\n".join(lines) + "\n"


def _key(key) -> str:
    kind, a, b = key
    return f"{kind} {a}={_lab(b)}" if kind == "oat" else f"{kind} block {a} point {b}" if kind == "sobol" else kind


def run_sensitivity_cli(args) -> int:
    study = load_study(args.config)
    from ..cli_common import warn
    from .folders import names_the_folder
    from .optimize import default_out_dir, windows_warning
    if (msg := windows_warning(study, study.sensitivity.get("windows") or study.windows, "sensitivity.windows")):
        warn(msg)
    with names_the_folder(Path(args.out) if args.out else default_out_dir(study), "sensitivity"):
        stats = run_sensitivity(study, args.out, workers=args.workers, executor=args.executor,
                                scheduler=args.scheduler, sobol_samples=args.sobol_samples,
                                progress=not args.no_progress)
    out = stats["out_dir"]
    print(f"sensitivity {out}: {stats['oat_points']} OAT + {stats['sobol_points']} Sobol design points "
          f"({stats['failed']} without result; {stats['computed_runs']} simulations run) in "
          f"{fmt_duration(stats['wall_s'])}")
    t = stats["tornado"]
    for o in study.objectives:
        d = t[t["objective"] == o.name].head(3)
        top = ", ".join(f"{r.parameter} ({r.span:.3g})" for r in d.itertuples())
        print(f"  {o.name}: widest OAT spans: {top}")
    if stats["sobol_points"]:
        conv = {True: "converged", False: "NOT converged",
                None: "convergence not measured (no sobol_tolerance, or N < 4 blocks)"}
        print(f"  Sobol: N = {stats['sobol_samples']} blocks of budget {stats['sobol_budget']} "
              f"({stats['sobol_points']} design points): {conv[stats['sobol_converged']]}")
    print(f"report: {out / 'sensitivity.md'}")
    if stats["failed"]:
        print(f"{stats['failed']} design point(s) failed or were infeasible; see oat.csv", file=sys.stderr)
        for k, e in stats["failed_points"]:       # one line each, with why
            print(f"error: {_key(k)} failed: {' '.join(str(e).split())}", file=sys.stderr)
        return 1
    return 0
