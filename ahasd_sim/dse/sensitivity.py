"""``python -m ahasd_sim sensitivity``: which knobs of a study's search space matter.

Two measures over the study's objectives:

* **One-at-a-time (OAT)** around a base point (each parameter's ``base:``, else the value in
  the base config, else the middle of its range): every parameter in turn is moved to the ends
  of its range (``oat_points`` evenly spaced values, log-spaced on log ranges; every choice of
  a categorical one) with the others at the base. The tornado chart shows, per objective, the
  lowest and highest value each parameter reaches, widest span on top. Every point is run on
  each trace window (``sensitivity.windows``, else the study's ``windows``): the bars are
  means over windows and the error bars their 95% confidence intervals (Student t, one window
  = one sample).
* **Sobol indices** (variance-based, global) with SALib: Saltelli/Sobol' sampling of ``N``
  base samples (``sobol_samples``, a power of two; ``N x (D + 2)`` design points), parameters
  mapped from [0, 1] onto their ranges (log-uniform on log ranges; equal-width bins over the
  choices of a categorical one), first-order ``S1`` and total ``ST`` indices with bootstrap
  95% confidence intervals. Optional extra ``dse`` (``pip install 'ahasd_sim[dse]'``).

Outputs in ``<study folder>/sensitivity/`` (``--out``, default ``studies/<name>``; simulations are stored and reused in the
study folder's ``points/``, shared with ``optimize``): ``oat.csv`` (every OAT point),
``tornado.csv`` (per objective and parameter: low/high ends and their CIs), ``sobol.csv``,
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
from .evaluate import DesignPoint, Executor, evaluate, plan
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


def _progress_points(study, pts, points_dir, ex, prog) -> None:
    evaluate(study, pts, points_dir, ex, on_point=lambda pt: prog.update("failed" if pt.error else "ok"))


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
    n_sobol = sobol_samples if sobol_samples is not None else int(cfg.get("sobol_samples", 0))
    from .folders import check_sobol_samples
    check_sobol_samples(n_sobol, len(study.space), "--sobol-samples" if sobol_samples is not None
                        else f"{study.source}: sensitivity.sobol_samples")
    if n_sobol:
        try:
            import SALib  # noqa: F401
        except ImportError:
            raise InputError("Sobol indices need SALib: pip install 'ahasd_sim[dse]' (or --sobol-samples 0)") from None
    ex = Executor(executor, workers, scheduler, dask_client)
    t0 = time.perf_counter()
    base = {p.name: base_value(study, p) for p in study.space}
    # ---- OAT design
    oat_pts: list[DesignPoint] = [plan(study, ("base", "", ""), base, windows)]
    for p in study.space:
        for v in oat_values(p, n_oat):
            if v == base[p.name]:
                continue
            oat_pts.append(plan(study, ("oat", p.name, v), {**base, p.name: v}, windows))
    # ---- Sobol design
    sob_pts: list[DesignPoint] = []
    problem = None
    if n_sobol:
        from SALib.sample import sobol as sobol_sample
        problem = {"num_vars": len(study.space), "names": [p.name for p in study.space],
                   "bounds": [[0.0, 1.0]] * len(study.space)}
        X = sobol_sample.sample(problem, n_sobol, calc_second_order=False, scramble=True, seed=study.seed)
        for i, row in enumerate(X):
            params = {p.name: p.from_unit(u) for p, u in zip(study.space, row)}
            sob_pts.append(plan(study, ("sobol", i, ""), params, windows))
    with StudyLock(study_dir):
        from .folders import clean_stale_points
        clean_stale_points(points_dir)      # staging folders of points whose process was killed
        prog = Progress(len(oat_pts) + len(sob_pts), enabled=progress, stream=stream, desc=f"{study.name} sensitivity")
        try:
            _progress_points(study, oat_pts + sob_pts, points_dir, ex, prog)
        finally:
            prog.close()
            ex.close()
    wall = time.perf_counter() - t0
    onames = [o.name for o in study.objectives]

    # ---- OAT tables
    rows = []
    for pt in oat_pts:
        kind, pname, _ = pt.key
        r = {"kind": kind, "parameter": pname or "(base)", "value": pt.params.get(pname, "") if pname else "",
             "status": pt.status, "error": pt.error or pt.infeasible}
        for j, o in enumerate(onames):
            r[o] = pt.values[j] if pt.values else float("nan")
            r[f"{o}_ci95"] = pt.ci95[j] if pt.ci95 else float("nan")
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
            lo_i, hi_i = d[o].idxmin(), d[o].idxmax()
            torn_rows.append({"objective": o, "parameter": p.name,
                              "low": d.loc[lo_i, o], "low_ci95": d.loc[lo_i, f"{o}_ci95"],
                              "low_label": _lab(d.loc[lo_i, "value"]),
                              "high": d.loc[hi_i, o], "high_ci95": d.loc[hi_i, f"{o}_ci95"],
                              "high_label": _lab(d.loc[hi_i, "value"]),
                              "span": d.loc[hi_i, o] - d.loc[lo_i, o], "base": base_row[o],
                              "base_ci95": base_row[f"{o}_ci95"],
                              "failed_points": int((oat["parameter"] == p.name).sum() - (len(d) - 1))})
    torn = pd.DataFrame(torn_rows)
    if len(torn):
        torn = torn.sort_values(["objective", "span"], ascending=[True, False])

    # ---- Sobol
    sob = pd.DataFrame()
    sobol_note = ""
    if n_sobol:
        from SALib.analyze import sobol as sobol_analyze
        srows = []
        bad = [pt for pt in sob_pts if pt.values is None]
        if bad:
            sobol_note = (f"Sobol indices not computed: {len(bad)} of {len(sob_pts)} sample points have no result "
                          f"(failed or infeasible, e.g. {bad[0].error or bad[0].infeasible}); narrow the space.")
        else:
            for j, o in enumerate(onames):
                Y = np.array([pt.values[j] for pt in sob_pts], dtype=float)
                res = sobol_analyze.analyze(problem, Y, calc_second_order=False, conf_level=0.95,
                                            print_to_console=False, seed=study.seed)
                for k, p in enumerate(study.space):
                    srows.append({"objective": o, "parameter": p.name, "S1": res["S1"][k], "S1_conf": res["S1_conf"][k],
                                  "ST": res["ST"][k], "ST_conf": res["ST_conf"][k]})
            sob = pd.DataFrame(srows)

    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "oat.csv", lambda fh: oat.to_csv(fh, index=False))
    atomic_write(out / "tornado.csv", lambda fh: torn.to_csv(fh, index=False))
    if len(sob):
        atomic_write(out / "sobol.csv", lambda fh: sob.to_csv(fh, index=False))
    figs = _figures(study, torn, sob, out / "figures")
    stats = {"out_dir": out, "oat_points": len(oat_pts), "sobol_points": len(sob_pts), "wall_s": wall,
             "windows": windows, "sobol_samples": n_sobol, "failed": int(sum(pt.status != "ok" for pt in oat_pts + sob_pts))}
    atomic_write_text(out / "sensitivity.md", _report(study, base, torn, sob, sobol_note, figs, out, stats))
    stats["tornado"], stats["sobol"], stats["oat"] = torn, sob, oat
    return stats


def _lab(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _figures(study: Study, torn: pd.DataFrame, sob: pd.DataFrame, fig_dir: Path) -> list[Path]:
    from ..plots.pareto import sobol_bars, tornado
    paths = []
    for o in study.objectives:
        d = torn[torn["objective"] == o.name]
        if len(d):
            paths += tornado(d, o.name, float(d["base"].iloc[0]), fig_dir / f"tornado_{o.name}",
                             ref=1.0 if o.is_ratio else None,
                             title=f"{o.name}: {o.describe()} (one at a time)")
        if len(sob):
            s = sob[sob["objective"] == o.name]
            paths += sobol_bars(s, o.name, fig_dir / f"sobol_{o.name}")
    return paths


def _report(study, base, torn, sob, sobol_note, figs, out, stats) -> str:
    from .report import md_table
    lines = [f"# Sensitivity of study `{study.name}`", "",
             "Generated by `python -m ahasd_sim sensitivity`. One-at-a-time (OAT) around the base point, "
             f"{stats['oat_points']} design points; "
             + (f"Sobol indices from {stats['sobol_points']} design points (N = {stats['sobol_samples']}); "
                if stats["sobol_points"] else "no Sobol indices; ")
             + f"trace windows {stats['windows'] or 'of the base config'} (CIs: 95% over windows); "
             f"wall time {fmt_duration(stats['wall_s'])}.", "", "Base point: "
             + ", ".join(f"`{k}` = {_lab(v)}" for k, v in base.items()), ""]
    for o in study.objectives:
        d = torn[torn["objective"] == o.name]
        if not len(d):
            continue
        lines += [f"## `{o.name}` ({o.describe()})", "",
                  md_table(d, ["parameter", "low_label", "low", "low_ci95", "high_label", "high", "high_ci95",
                               "span"]), ""]
        if len(sob):
            s = sob[sob["objective"] == o.name].sort_values("ST", ascending=False)
            lines += ["Sobol indices (95% bootstrap CIs):", "",
                      md_table(s, ["parameter", "S1", "S1_conf", "ST", "ST_conf"]), ""]
    if sobol_note:
        lines += [sobol_note, ""]
    for f in figs:
        if f.suffix == ".png":
            lines.append(f"![{f.stem}]({f.relative_to(out).as_posix()})")
    return "\n".join(lines) + "\n"


def run_sensitivity_cli(args) -> int:
    study = load_study(args.config)
    stats = run_sensitivity(study, args.out, workers=args.workers, executor=args.executor, scheduler=args.scheduler,
                            sobol_samples=args.sobol_samples, progress=not args.no_progress)
    out = stats["out_dir"]
    print(f"sensitivity {out}: {stats['oat_points']} OAT + {stats['sobol_points']} Sobol design points "
          f"({stats['failed']} without result) in {fmt_duration(stats['wall_s'])}")
    t = stats["tornado"]
    for o in study.objectives:
        d = t[t["objective"] == o.name].head(3)
        top = ", ".join(f"{r.parameter} ({r.span:.3g})" for r in d.itertuples())
        print(f"  {o.name}: widest OAT spans: {top}")
    print(f"report: {out / 'sensitivity.md'}")
    if stats["failed"]:
        print(f"{stats['failed']} design point(s) failed or were infeasible; see oat.csv", file=sys.stderr)
        for r in stats["oat"][stats["oat"]["status"] != "ok"].itertuples():   # one line each, with why
            where = f"{r.parameter}={r.value}" if r.parameter != "(base)" else "the base point"
            print(f"error: OAT point {where} {r.status}: {' '.join(str(r.error).split())}", file=sys.stderr)
    return 0
