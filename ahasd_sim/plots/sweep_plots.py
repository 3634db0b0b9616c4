"""Heat maps and line plots over sweep axes, from a sweep's ``results.csv``."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from ..config.errors import InputError
from ..metrics.stats import RATIOS
from ..metrics.tables import ok_rows
from .style import apply_style, color, save_figure

MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]

#: readable axis labels with units for common metric columns
METRIC_LABELS = {
    "throughput_tok_s": "Throughput (tokens/s)",
    "tokens_per_j": "Energy efficiency (tokens/J)",
    "energy_per_token_j": "Energy per token (J/token)",
    "energy_j": "Energy (J)",
    "makespan_s": "Makespan (s)",
    "acceptance_rate": "Acceptance rate (accepted / drafted)",
    "mean_accepted_per_verify": "Accepted tokens per verification",
    "device_utilization.npu": "NPU utilisation (fraction)",
    "device_utilization.pim": "PIM utilisation (fraction)",
    "device_utilization.gpu": "GPU utilisation (fraction)",
    "wasted_draft_tokens": "Wasted draft tokens",
}


#: column-name suffix -> unit (the config and summary name their units, see config-reference)
UNIT_SUFFIXES = {
    "_tok_s": "tokens/s", "_gb_s": "GB/s", "_gops_int8": "GOPS", "_tops": "TOPS", "_ghz": "GHz", "_mts": "MT/s",
    "_gib": "GiB", "_gb": "GB", "_mm2": "mm^2", "_j": "J", "_w": "W", "_mw": "mW", "_pj": "pJ", "_nj": "nJ",
    "_uj": "uJ", "_s": "s", "_ms": "ms", "_us": "us", "_ns": "ns", "_tokens": "tokens", "_bytes": "B",
    "_mbps": "Mbit/s", "_pj_per_bit": "pJ/bit", "_pj_per_mac": "pJ/MAC",
}


#: words of column names printed in capitals (device and model names)
ACRONYMS = {"npu", "pim", "gpu", "cpu", "h2d", "soc", "lpddr5", "ahasd", "dram", "sram", "moe", "kv", "eos", "edc",
            "aau", "io", "llm", "tok", "mac", "int8", "ci"}


def words(name: str) -> str:
    """A column or config key as words: ``ahasd.max_verify_tokens`` -> ``AHASD max verify tokens``
    (an axis label an author keeps names the quantity, not the key)."""
    parts = [w for w in re.split(r"[._\s]+", str(name)) if w]
    out = [w.upper() if w.lower() in ACRONYMS else w for w in parts]
    text = " ".join(out)
    return text[:1].upper() + text[1:] if text and not out[0].isupper() else text


def level_label(value) -> str:
    """A level of a swept column in a legend: an identifier (``gpu_only``) as words, any other
    value (a model pair ``llama2-7b/llama2-13b``, a number) as it is."""
    text = str(value)
    return words(text) if "_" in text else text


def metric_label(col: str) -> str:
    """Axis label with units of a metric or config column: the table :data:`METRIC_LABELS`,
    ``<metric>_ratio`` as "x baseline", else the name's unit suffix (:data:`UNIT_SUFFIXES`) as
    the unit and the rest as words; a name without a unit suffix is a count or a choice."""
    if col in METRIC_LABELS:
        return METRIC_LABELS[col]
    if col.endswith("_ratio"):
        base = col[: -len("_ratio")]
        label = METRIC_LABELS.get(base, words(base)).split(" (")[0]
        return f"{label} (x baseline)"
    for suffix, unit in sorted(UNIT_SUFFIXES.items(), key=lambda kv: -len(kv[0])):
        if col.endswith(suffix) or col.endswith("." + suffix[1:]):
            stem = col if unit == suffix[1:] else col[: -len(suffix)]   # "_tokens": the word stays
            return f"{words(stem) or words(col)} ({unit})"
    return words(col)


def _filter(df: pd.DataFrame, where: Mapping[str, object] | None) -> pd.DataFrame:
    d = ok_rows(df)
    if d.empty:
        raise InputError("the results table has no finished (status ok) points to plot")
    for k, v in (where or {}).items():
        if k not in d.columns:
            raise InputError(f"--where {k}={v}: no column '{k}' in the results table")
        kept = d[d[k].astype(str) == str(v)]
        if kept.empty:
            levels = ", ".join(map(str, list(dict.fromkeys(d[k].astype(str)))[:12]))
            raise InputError(f"--where {k}={v}: no finished point has {k} == {v} (values: {levels})")
        d = kept
    return d


def _check_columns(d: pd.DataFrame, cols: Mapping[str, str | None]) -> None:
    for flag, c in cols.items():
        if c and c not in d.columns:
            raise InputError(f"{flag} {c}: no column '{c}' in the results table")
    metric = cols.get("--metric")
    if metric and not pd.api.types.is_numeric_dtype(d[metric]) and \
            pd.to_numeric(d[metric], errors="coerce").isna().any() and d[metric].notna().any():
        # a text column (run.mode, variant) has no mean to plot
        numeric = [c for c in d.columns if pd.api.types.is_numeric_dtype(d[c]) and d[c].notna().any()
                   and c not in ("seed", "wall_time_s")][:6]
        raise InputError(f"--metric {metric}: column '{metric}' holds text (e.g. {str(d[metric].dropna().iloc[0])!r}), "
                         f"not numbers; numeric columns include {', '.join(numeric)}")


def sweep_axis_columns(df: pd.DataFrame) -> list[str]:
    """The sweep's axis columns: those between ``status`` and ``error_type`` in results.csv
    (else the usual shortcut axes present)."""
    cols = list(df.columns)
    if "status" in cols and "error_type" in cols and cols.index("status") < cols.index("error_type"):
        return cols[cols.index("status") + 1: cols.index("error_type")]
    return [c for c in ("variant", "model_pair", "run.mode", "run.policy", "seed") if c in cols]


def averaged_over(d: pd.DataFrame, shown: list[str | None]) -> dict[str, int]:
    """Axis columns not shown in a figure that still vary in ``d``: the figure averages over
    them. Returns column -> number of distinct values."""
    out = {}
    for c in sweep_axis_columns(d):
        if c in shown or c not in d.columns:
            continue
        n = d[c].astype(str).nunique()
        if n > 1:
            out[c] = n
    return out


def _note_averaged(fig, over: dict[str, int], what: str) -> None:
    """Say in the figure what each mark summarises (so nobody reads a mean as one point)."""
    if not over:
        return
    text = ", ".join(f"{c} ({n} values)" for c, n in over.items())
    fig.text(0.01, 0.005, f"{what} over {text}", fontsize=6, ha="left", va="bottom", color="#444444")


def cell_values(d: pd.DataFrame, by: str | list[str], metric: str) -> pd.Series:
    """``metric`` per group of ``by``: for a rate with its totals in the table
    (metrics.stats.RATIOS) the ratio estimator over the group's points (total / total, the
    definition of summary.json), else the mean of the points' values."""
    from ..metrics.stats import has_totals, ratio_of_totals, totals
    if metric in RATIOS and has_totals(d, metric):
        num, den = RATIOS[metric]
        t = pd.DataFrame({"n": totals(d, num), "d": totals(d, den)}, index=d.index)
        keys = [d[c] for c in ([by] if isinstance(by, str) else by)]
        return t.groupby(keys, sort=False).apply(lambda g: ratio_of_totals(g["n"], g["d"]))
    return d.groupby(by, sort=False)[metric].mean()


def _sorted_levels(s: pd.Series) -> list:
    vals = list(dict.fromkeys(s.dropna()))
    try:
        return sorted(vals, key=float)
    except (TypeError, ValueError):
        return vals


def heatmap(df: pd.DataFrame, x: str, y: str, metric: str, out: str | Path, *, where: Mapping[str, object] | None = None,
            agg: str = "mean", title: str | None = None, fmt: str = "{:.3g}", cmap: str = "cividis",
            xlabel: str | None = None, ylabel: str | None = None, clabel: str | None = None) -> list[Path]:
    """``metric`` aggregated over seeds and other axes unless fixed by ``where`` on an ``x`` by
    ``y`` grid: ``agg`` "mean" is :func:`cell_values` (a rate: total / total over the cell's points),
    other pandas aggregations apply as named. ``cividis`` is perceptually uniform and colour-blind safe."""
    import matplotlib.pyplot as plt
    apply_style()
    _check_columns(df, {"--x": x, "--y": y, "--metric": metric})
    d = _filter(df, where)
    over = averaged_over(d, [x, y])
    if agg == "mean":
        piv = cell_values(d, [y, x], metric).unstack(x)
        agg = "total / total" if metric in RATIOS else agg
    else:
        piv = d.pivot_table(index=y, columns=x, values=metric, aggfunc=agg)
    piv = piv.reindex(index=_sorted_levels(d[y]), columns=_sorted_levels(d[x]))
    fig, ax = plt.subplots(figsize=(1.0 + 0.75 * piv.shape[1] + 1.2, 0.9 + 0.45 * piv.shape[0]))
    arr = piv.to_numpy(dtype=float)
    im = ax.imshow(arr, cmap=cmap, aspect="auto", origin="lower")
    ax.set_xticks(range(piv.shape[1]))
    ax.set_xticklabels([str(c) for c in piv.columns])
    ax.set_yticks(range(piv.shape[0]))
    ax.set_yticklabels([str(r) for r in piv.index])
    ax.set_xlabel(xlabel or metric_label(x))
    ax.set_ylabel(ylabel or metric_label(y))
    ax.grid(False)
    finite = arr[np.isfinite(arr)]
    mid = (finite.min() + finite.max()) / 2 if finite.size else 0
    for i in range(arr.shape[0]):
        for j in range(arr.shape[1]):
            if np.isfinite(arr[i, j]):
                ax.text(j, i, fmt.format(arr[i, j]), ha="center", va="center", fontsize=7,
                        color="black" if arr[i, j] > mid else "white")
    cb = fig.colorbar(im, ax=ax)
    cb.set_label(clabel or metric_label(metric))
    if title:
        ax.set_title(title)
    fig.tight_layout()
    _note_averaged(fig, over, f"cell = {agg}")
    return save_figure(fig, out)


def _powers_of_two(vals) -> bool:
    """Levels of a knob swept in doublings (8, 16, 32): a log2 axis spaces them evenly."""
    v = np.asarray(vals, dtype=float)
    return v.size >= 3 and bool((v > 0).all()) and np.allclose(np.log2(v), np.round(np.log2(v))) \
        and v.max() / v.min() >= 4


def cell_interval(windows: pd.DataFrame, cell: Mapping[str, object], metric: str,
                  strata_cols: list[str]) -> tuple[float, list[float] | None, int]:
    """(ratio estimator, 95% interval, windows) of ``metric`` over the windows of one plotted cell
    (``cell``: column -> value): seeds averaged within each window (seeds are not samples),
    then a percentile bootstrap over whole windows (metrics.stats.ratio_ci), stratified by the
    configurations the cell summarises (``strata_cols`` that vary in it), never pooled."""
    from ..metrics.stats import RATIOS, ratio_ci, seed_averaged, totals
    w = windows
    for k, v in cell.items():
        w = w[w[k].astype(str) == str(v)]
    if w.empty:
        return float("nan"), None, 0
    cols = [c for c in strata_cols if c in w.columns and w[c].astype(str).nunique() > 1]
    w = seed_averaged(w, [*cell, *cols, "window"])
    num, den = RATIOS[metric]
    strata = [tuple(r) for r in w[cols].astype(str).itertuples(index=False)] if cols else None
    point, ci = ratio_ci(totals(w, num), totals(w, den), strata=strata)
    return point, ci, len(w)


def lines(df: pd.DataFrame, x: str, metric: str, out: str | Path, *, hue: str | None = None,
          where: Mapping[str, object] | None = None, title: str | None = None, logx: bool = False,
          xlabel: str | None = None, ylabel: str | None = None, legend_title: str | None = None,
          windows: pd.DataFrame | None = None) -> list[Path]:
    """``metric`` against ``x``, one line per ``hue`` level: :func:`cell_values` over the points of
    each (x, hue) (a rate: total / total over seeds and other axes). Error bars are 95% intervals
    over whole trace windows: with ``windows`` (one row per point and window, carrying the
    sweep's axis columns, e.g. metrics.windows.window_table) the bootstrap of :func:`cell_interval`
    (the mark is then that windows' ratio estimator), else a one-point cell's own CI from
    results.csv; a cell without an interval gets none, and the figure says so (never a
    min-max range). Numeric x with few levels is ticked at exactly those levels (a log2 axis
    when they are doublings)."""
    import matplotlib.pyplot as plt
    apply_style()
    _check_columns(df, {"--x": x, "--metric": metric, "--hue": hue})
    d = _filter(df, where)
    over = averaged_over(d, [x, hue])
    if windows is not None:
        missing = [c for c in [x, hue, "window", *(where or {})] if c and c not in windows.columns]
        if missing:
            raise InputError(f"window samples: no column {', '.join(missing)} in the windows table "
                             "(it needs the sweep's axis columns)")
        if metric not in RATIOS:
            windows = None      # a window interval exists for ratio estimators only
        else:
            for k, v in (where or {}).items():
                windows = windows[windows[k].astype(str) == str(v)]
    fig, ax = plt.subplots(figsize=(7.0 if hue else 4.8, 3.2))   # two columns: room for the legend beside the axes
    levels = _sorted_levels(d[hue]) if hue else [None]
    xlevels = _sorted_levels(d[x])
    numeric_x = _numeric(xlevels)
    pos = {v: (float(v) if numeric_x else float(i)) for i, v in enumerate(xlevels)}
    strata_cols = [c for c in over if c != "seed"]
    n_ci = n_cells = 0
    for i, lv in enumerate(levels):
        sel = d if lv is None else d[d[hue] == lv]
        g = pd.DataFrame({"size": sel.groupby(x).size(), "mean": cell_values(sel, x, metric)})
        g = g.reindex([v for v in xlevels if v in g.index])
        g["lo"], g["hi"] = np.nan, np.nan
        lo, hi = f"{metric}_ci95_low", f"{metric}_ci95_high"
        for xv in g.index:
            if windows is not None:
                cell = {x: xv, **({} if lv is None else {hue: lv})}
                m, ci, _n = cell_interval(windows, cell, metric, strata_cols)
                if np.isfinite(m):
                    g.loc[xv, "mean"] = m
            elif lo in sel.columns and hi in sel.columns and g.loc[xv, "size"] == 1:   # one point: its CI
                r = sel[sel[x] == xv].iloc[0]
                ci = [float(r[lo]), float(r[hi])] if np.isfinite(r[lo]) and np.isfinite(r[hi]) and r[hi] >= r[lo] \
                    else None
            else:
                ci = None
            if ci:
                g.loc[xv, ["lo", "hi"]] = ci
        xs = np.array([pos[v] for v in g.index], dtype=float)
        ax.plot(xs, g["mean"], marker=MARKERS[i % len(MARKERS)], markersize=4, color=color(i),
                label=None if lv is None else level_label(lv))
        has = g["lo"].notna().to_numpy()
        n_ci += int(has.sum())
        n_cells += len(g)
        if has.any():
            ax.errorbar(xs[has], g["mean"][has], yerr=[(g["mean"] - g["lo"])[has].clip(lower=0),
                                                      (g["hi"] - g["mean"])[has].clip(lower=0)],
                        fmt="none", ecolor=color(i), elinewidth=0.8, capsize=2)
    if logx:
        ax.set_xscale("log")     # before the ticks: setting the scale resets the locators
    elif numeric_x and _powers_of_two(xlevels):
        ax.set_xscale("log", base=2)
    if not numeric_x:
        ax.set_xticks([pos[v] for v in xlevels])
        ax.set_xticklabels([str(v) for v in xlevels])
    elif len(xlevels) <= 12:
        # a swept knob has few values: tick exactly those (8 and 32, not 9, 12, ... 33)
        from matplotlib.ticker import NullLocator
        ax.set_xticks([pos[v] for v in xlevels])
        ax.set_xticklabels([f"{float(v):g}" for v in xlevels])
        ax.xaxis.set_minor_locator(NullLocator())
    elif np.allclose(list(pos.values()), np.round(list(pos.values()))):
        from matplotlib.ticker import MaxNLocator
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel or metric_label(x))
    ax.set_ylabel(ylabel or metric_label(metric))
    if hue:
        # beside the axes, not over them ("best" inside the axes covered the curves of a ladder)
        ax.legend(title=legend_title or metric_label(hue), loc="upper left", bbox_to_anchor=(1.02, 1.0),
                  borderaxespad=0.0)
    if title:
        ax.set_title(title)
    fig.tight_layout(rect=(0, 0.06 if over or n_ci < n_cells else 0, 1, 1))
    line = "line = total / total" if metric in RATIOS else "line = mean"
    if n_ci == n_cells:
        line += ", bars = 95% CI (bootstrap over whole windows)"
    elif n_ci:
        from ..metrics.stats import MIN_BOOTSTRAP_WINDOWS
        line += (f", bars = 95% CI over windows ({n_cells - n_ci} of {n_cells} marks without: "
                 f"n<{MIN_BOOTSTRAP_WINDOWS} windows)")
    else:
        line += ", no interval (one sample per mark" + ("" if windows is not None else
                                                        ", window samples not given") + ")"
    if over:
        line += "; over " + ", ".join(f"{c} ({n} values)" for c, n in over.items())
    fig.text(0.01, 0.005, line, fontsize=6, ha="left", va="bottom", color="#444444")
    return save_figure(fig, out)


def _numeric(idx) -> bool:
    try:
        np.asarray(idx, dtype=float)
        return True
    except (TypeError, ValueError):
        return False
