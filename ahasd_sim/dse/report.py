"""Study outputs: trials.csv, pareto.csv, figures and report.md (all from the optuna storage)."""
from __future__ import annotations

import datetime as _dt
import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..output import atomic_write, atomic_write_text
from ..sweep.progress import fmt_duration
from .evaluate import MEMORY_FIT
from ..metrics.stats import MIN_T_SAMPLES
from ..metrics.pareto import ci_pareto_mask, hypervolume, pareto_mask
from .study import Study

STATE = {"COMPLETE": "ok", "FAIL": "failed", "PRUNED": "infeasible", "RUNNING": "pending", "WAITING": "pending"}


#: columns of trials.csv that are measured times (the only ones two seeded runs may differ in)
TIME_COLUMNS = ("duration_s", "ask_to_tell_s")


def interval_of(value: float, rec) -> tuple[float, float]:
    """(low, high) of a stored objective interval: ``[low, high]``, or a half-width stored by
    studies written before intervals were [low, high] (value -+ it); NaN twice for none."""
    if isinstance(rec, (list, tuple)) and len(rec) == 2 and all(x is not None for x in rec):
        return float(rec[0]), float(rec[1])
    if isinstance(rec, (int, float)) and not isinstance(rec, bool) and rec == rec and value == value:
        return float(value) - float(rec), float(value) + float(rec)
    return float("nan"), float("nan")


def trials_table(study: Study, ostudy) -> pd.DataFrame:
    """One row per trial: number, status, parameters, objectives (+ ci95 with windows),
    constraint values, per-run metrics, error, run folders, times; ``pareto`` marks the
    point-estimate front, ``pareto_ci`` the interval-level front (:func:`ci_pareto_mask`).

    ``duration_s`` is the trial's own evaluation time (the sum of its simulations' wall times,
    from their ``meta.json``; a simulation reused from ``points/`` counts with the time it took
    when it ran); ``ask_to_tell_s`` is from the sampler's ask to the tell (includes queueing
    behind the other trials of the batch)."""
    rows = []
    onames = [o.name for o in study.objectives]
    for t in ostudy.get_trials(deepcopy=False):
        ua = t.user_attrs.get("record") or {}
        status = STATE.get(t.state.name, t.state.name.lower())
        if ua.get("infeasible"):      # told as complete with placeholder values (constraints)
            status = "infeasible"
        row: dict[str, Any] = {"trial": t.number, "status": status}
        for p in study.space:
            row[p.name] = t.params.get(p.name)
        vals = t.values if t.values is not None and status == "ok" else [float("nan")] * len(onames)
        cis = [interval_of(v, c) for v, c in zip(vals, ua.get("ci95") or [None] * len(onames))]
        for name, v, ci in zip(onames, vals, cis):
            row[name] = v
            row[f"{name}_ci95_low"], row[f"{name}_ci95_high"] = ci
        for c in [MEMORY_FIT, *(c.name for c in study.constraints)]:
            row[f"constraint:{c}"] = (ua.get("constraints") or {}).get(c)
        for k, v in sorted((ua.get("metrics") or {}).items()):
            row[k] = v
        for run in study.runs:        # the rank placement each run used (pim.partition_policy auto picks it)
            row[f"{run}/placement"] = (ua.get("placements") or {}).get(run)
        row["error"] = ua.get("error") or ua.get("infeasible")
        row["runs"] = " ".join(f"{k}:{h}" for k, h in sorted((ua.get("hashes") or {}).items()))
        dur = (t.datetime_complete - t.datetime_start).total_seconds() if t.datetime_complete and t.datetime_start \
            else None
        row["duration_s"] = ua.get("eval_s")
        row["ask_to_tell_s"] = dur
        rows.append(row)
    df = pd.DataFrame(rows)
    if len(df):
        ok = (df["status"] == "ok").to_numpy()
        mask = np.zeros(len(df), dtype=bool)
        cmask = np.zeros(len(df), dtype=bool)
        if ok.any():
            vals = df.loc[ok, onames].to_numpy(dtype=float)
            mask[ok] = pareto_mask(vals, study.directions)
            bounds = np.stack([df.loc[ok, [f"{o}_ci95_{e}" for o in onames]].to_numpy(dtype=float)
                               for e in ("low", "high")], axis=-1)
            cmask[ok] = ci_pareto_mask(vals, bounds, study.directions)
        df.insert(2, "pareto", mask)
        df.insert(3, "pareto_ci", cmask)
    return df


def hypervolume_reference(study: Study, df: pd.DataFrame) -> list[float] | None:
    """The reference point of the hypervolume: per objective, the worst value among the study's
    evaluated (ok) designs (their nadir), so every evaluated design bounds a non-negative volume."""
    ok = df[df["status"] == "ok"] if len(df) else df
    if ok.empty:
        return None
    ref = []
    for o in study.objectives:
        col = ok[o.name].astype(float)
        ref.append(float(col.min() if o.direction == "maximize" else col.max()))
    return ref


def hypervolume_history(study: Study, df: pd.DataFrame, ref: list[float] | None = None) -> pd.DataFrame:
    """Hypervolume of the (point-estimate) front of trials 0..n, for every trial n, w.r.t. ``ref``
    (default :func:`hypervolume_reference`): how the search progressed."""
    ref = ref if ref is not None else hypervolume_reference(study, df)
    if ref is None:
        return pd.DataFrame(columns=["trial", "hypervolume", "front_size"])
    sign = np.array([1.0 if o.direction == "maximize" else -1.0 for o in study.objectives])
    onames = [o.name for o in study.objectives]
    d = df.sort_values("trial")
    rows, pts = [], np.zeros((0, len(onames)))
    for _, r in d.iterrows():
        if r["status"] == "ok":
            pts = np.vstack([pts, r[onames].to_numpy(dtype=float) * sign])
            pts = pts[pareto_mask(pts, ["maximize"] * len(onames))]
        rows.append({"trial": int(r["trial"]), "hypervolume": hypervolume(pts, np.asarray(ref) * sign),
                     "front_size": len(pts)})
    return pd.DataFrame(rows)


def _csv(df: pd.DataFrame, path: Path) -> None:
    atomic_write(path, lambda fh: df.to_csv(fh, index=False))


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        return f"{v:.4g}"
    return str(v)


def md_table(df: pd.DataFrame, cols: list[str], max_rows: int = 30) -> str:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.head(max_rows).iterrows():
        lines.append("| " + " | ".join(_fmt(r[c]).replace("|", "\\|") for c in cols) + " |")
    if len(df) > max_rows:
        lines.append(f"\n({len(df) - max_rows} more rows in the CSV)")
    return "\n".join(lines)


def write_figures(study: Study, df: pd.DataFrame, fig_dir: Path) -> list[Path]:
    from ..plots.pareto import objective_label, parallel_coordinates, pareto_2d
    ok = df[df["status"] == "ok"]
    if ok.empty:
        return []
    paths = []
    objs = study.objectives
    pairs = list(itertools.combinations(range(len(objs)), 2)) or [(0, 0)]
    for i, j in pairs[:6]:
        a, b = objs[i], objs[j]
        name = f"pareto_{a.name}" + (f"__{b.name}" if j != i else "")
        paths += pareto_2d(ok, a.name, b.name, a.direction, b.direction, fig_dir / name,
                           front=ok["pareto"].to_numpy(), color_by=study.color_by,
                           ref_x=1.0 if a.is_ratio else None, ref_y=1.0 if b.is_ratio else None,
                           xlabel=objective_label(a.metric, a.run, a.over, a.direction),
                           ylabel=objective_label(b.metric, b.run, b.over, b.direction))
    front = ok[ok["pareto"]]
    if len(front):
        axes = [p.name for p in study.space] + [o.name for o in objs]
        cats = {p.name: p.labels for p in study.space if p.kind == "categorical"}
        logs = {p.name for p in study.space if p.log}
        paths += parallel_coordinates(ok, front, axes, fig_dir / "parallel_front", categories=cats, log_axes=logs,
                                      limits={p.name: (p.low, p.high) for p in study.space if p.kind != "categorical"},
                                      labels={o.name: objective_label(o.metric, o.run, o.over).replace(", ", ",\n", 1)
                                              for o in objs})
    return paths


def write_outputs(study: Study, ostudy, out: Path, stats: dict[str, Any] | None = None) -> dict[str, Path]:
    df = trials_table(study, ostudy)
    _csv(df, out / "trials.csv")
    hv = hypervolume_history(study, df)
    _csv(hv, out / "hypervolume.csv")
    front = df[df["pareto_ci"]] if len(df) else df
    onames = [o.name for o in study.objectives]
    if len(front):
        front = front.sort_values(onames[0], ascending=study.objectives[0].direction == "minimize")
    _csv(front, out / "pareto.csv")
    figs = write_figures(study, df, out / "figures") if len(df) else []
    atomic_write_text(out / "report.md", report_md(study, df, front, figs, out, stats or {}, hv))
    return {"trials": out / "trials.csv", "pareto": out / "pareto.csv", "report": out / "report.md",
            "hypervolume": out / "hypervolume.csv"}


def report_md(study: Study, df: pd.DataFrame, front: pd.DataFrame, figs: list[Path], out: Path,
              stats: dict[str, Any], hv: pd.DataFrame | None = None) -> str:
    n = len(df)
    counts = df["status"].value_counts().to_dict() if n else {}
    lines = [f"# Study `{study.name}`", ""]
    if study.description:
        lines += [study.description.strip(), ""]
    lines += [f"Generated {_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} by "
              "`python -m ahasd_sim optimize`; study file copied to `study.yaml`.", "",
              f"* base config `{study.base_config.name}` with " + (", ".join(f"`{s}`" for s in study.base_set) or
                                                                     "no overrides"),
              "* runs per design point: " + ", ".join(f"`{r}`" + (f" ({', '.join(o)})" if o else "")
                                                      for r, o in study.runs.items()),
              f"* trace windows (run.trace_start_prompt): {study.windows or 'the base config one'}",
              f"* 95% intervals `[low, high]` (`*_ci95_low`, `*_ci95_high`): Student t over the "
              f"{len(study.windows or [None])} windows, one sample each, on the log scale for rates and ratios; "
              f"none below {MIN_T_SAMPLES} windows",
              f"* sampler `{study.sampler['name']}`, seed {study.seed}"
              + (f"; {stats['mode']} mode, batches of {stats['batch_size']} trials" if stats.get("mode") else ""),
              f"* trials: {n} ({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))})"]
    if stats.get("wall_s") is not None:
        lines.append(f"* this invocation: {sum(stats['told'].values())} trials, {stats['computed_runs']} "
                     f"simulations in {fmt_duration(stats['wall_s'])}"
                     + (f" ({stats['resumed']} interrupted trials resumed)" if stats.get("resumed") else ""))
    if n and "duration_s" in df and df["duration_s"].notna().any():
        lines.append(f"* simulation time of the trials (sum of their own evaluation times, `duration_s`): "
                     f"{fmt_duration(float(df['duration_s'].sum()))}")
    if counts.get("infeasible"):
        lines.append(f"* {counts['infeasible']} infeasible designs (a violated constraint or models that do not "
                     "fit the PIM ranks), not simulated; the sampler is told their constraint violations")
    lines += ["", "## Search space", "", "| parameter | range |", "|---|---|"]
    for p in study.space:
        rng = ", ".join(map(str, p.labels)) if p.kind == "categorical" else \
            f"[{p.low:g}, {p.high:g}] {p.kind}" + (" log" if p.log else "") + (f" step {p.step:g}" if p.step else "")
        lines.append(f"| `{p.name}` | {rng} |")
    if study.constraints:
        lines += ["", "Constraints (checked before running; a violating point is `infeasible`, not simulated): "
                  + "; ".join(f"`{c.expr}`" + (f" >= {c.min:g}" if c.min is not None else "")
                              + (f" <= {c.max:g}" if c.max is not None else "") for c in study.constraints)]
    lines += ["", "## Objectives", ""]
    for o in study.objectives:
        lines.append(f"* `{o.name}`: {o.direction} {o.describe()}")
    onames = [o.name for o in study.objectives]
    cols = ["trial", *[p.name for p in study.space], *onames]
    if len(df) and df[[f"{o}_ci95_low" for o in onames]].notna().any().any():
        cols += [f"{o}_ci95_{e}" for o in onames for e in ("low", "high")]
    n_point = int(df["pareto"].sum()) if n else 0
    lines += ["", f"## Pareto front ({len(front)} trials)", "",
              "A design is left off only when another one dominates it at the interval level (its 95% "
              "interval worse-end beats this design's better-end on every objective, strictly on one); "
              f"{n_point} of these are on the front of the point estimates (`pareto` in trials.csv; "
              "`pareto_ci` marks this one).", ""]
    if len(front):
        lines.append(md_table(front, [c for c in ["trial", "pareto", *cols[1:]] if c in front.columns]))
    else:
        lines.append("No finished trial yet.")
    if hv is not None and len(hv):
        ref = hypervolume_reference(study, df)
        step = max(1, int(stats.get("batch_size") or 0) or len(hv) // 10 or 1)
        sel = hv[(hv["trial"] + 1) % step == 0]
        if len(sel) == 0 or sel["trial"].iloc[-1] != hv["trial"].iloc[-1]:
            sel = pd.concat([sel, hv.iloc[[-1]]])
        lines += ["", "## Hypervolume history", "",
                  "Hypervolume of the point-estimate front of trials 0..n (all objectives as maximised), "
                  "reference point the worst evaluated value of each objective ("
                  + ", ".join(f"`{o.name}` {v:.4g}" for o, v in zip(study.objectives, ref or [])) + "); "
                  "every trial in `hypervolume.csv`.", "",
                  md_table(sel.assign(trials=sel["trial"] + 1), ["trials", "hypervolume", "front_size"], max_rows=40)]
    ratio = [o for o in study.objectives if o.is_ratio]
    ok = df[df["status"] == "ok"] if n else df
    if ratio and len(ok):
        win = np.ones(len(ok), dtype=bool)
        for o in ratio:
            good = ok[o.name] > 1.0 if o.direction == "maximize" else ok[o.name] < 1.0
            win &= good.to_numpy()
        names = " and ".join(f"`{o.name}`" for o in ratio)
        pairs = sorted({f"`{o.run}` over `{o.over}`" for o in ratio})
        sure = np.ones(len(ok), dtype=bool)
        for o in ratio:
            lo_b, hi_b = ok[f"{o.name}_ci95_low"], ok[f"{o.name}_ci95_high"]   # NaN: no interval, not sure
            good = lo_b > 1.0 if o.direction == "maximize" else hi_b < 1.0
            sure &= good.to_numpy()
        lines += ["", f"## Where {', '.join(pairs)} is better on every ratio objective", "",
                  f"{int(win.sum())} of {len(ok)} evaluated design points are better than 1 on {names} "
                  "(maximised ratios > 1, minimised ratios < 1); for "
                  f"{int(sure.sum())} of them the whole 95% interval is (lower bound > 1, upper bound < 1)."]
        if win.any():
            w = ok[win]
            for o in ratio:
                lines.append(f"* `{o.name}` among them: median {w[o.name].median():.4g}, "
                             f"max {w[o.name].max():.4g}")
            cats = [p for p in study.space if p.kind == "categorical"]
            for p in cats:
                vc = w[p.name].astype(str).value_counts()
                allc = ok[p.name].astype(str).value_counts()
                lines.append(f"* `{p.name}` among them: " + ", ".join(
                    f"{k} {v}/{allc.get(k, 0)}" for k, v in vc.items()) + " (winners / evaluated)")
            for p in [p for p in study.space if p.kind != "categorical"]:
                lines.append(f"* `{p.name}` among them: {w[p.name].min():.4g} .. {w[p.name].max():.4g} "
                             f"(evaluated {ok[p.name].min():.4g} .. {ok[p.name].max():.4g})")
            wcols = [c for c in cols if c in w.columns]
            lines += ["", md_table(w.sort_values(ratio[0].name, ascending=False), wcols, max_rows=15)]
    if figs:
        lines += ["", "## Figures", ""]
        for f in figs:
            if f.suffix == ".png":
                rel = f.relative_to(out)
                lines.append(f"![{f.stem}]({rel.as_posix()})")
    failed = df[df["status"] == "failed"] if n else df
    if len(failed):
        lines += ["", f"## Failed trials ({len(failed)})", ""]
        lines.append(md_table(failed, ["trial", "error"], max_rows=10))
    lines += ["", "Files: `trials.csv` (every trial), `pareto.csv` (the front), `points/<hash>/` (one run folder "
              "per simulation), `study.db` (optuna storage; resume or extend with `--trials N`).", ""]
    return "\n".join(lines)
