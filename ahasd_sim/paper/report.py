"""The AHASD paper reproduction's tables and markdown report, from the sweeps' result files.

What is compared with what comes from the experiment definition (``hw_configs/paper/experiments.yaml``,
read by :mod:`ahasd_sim.paper.experiments` into the ``exp`` every function here takes). Every
number in the report is computed from the sweep's result files; the paper's reported ratios
(references.md#ahasd-results) are printed next to them for comparison only. Nothing is fitted or
tuned to them.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from ..metrics.tables import device_energy_j, memory_energy_j, normalise, ok_rows
from ..metrics.stats import fmt_ci, pooled_rate, ratio_of_totals
from ..metrics.windows import CONFIG_KEYS, config_ratios, paired_ratio, window_table
from .experiments import POWER_COLUMNS, PaperExperiments


# ---------------------------------------------------------------- per-window samples and 95% CIs
# window_table, CONFIG_KEYS, seed_averaged_windows, paired_windows, paired_ratio and config_ratios
# live in metrics/windows.py (the figures use them too, and plots sit below the studies)


def ratio_cell(wt: pd.DataFrame, num: str, den: str, metric: str, where: dict | None = None) -> str:
    """'ratio [95% CI]' of :func:`paired_ratio`."""
    from ..metrics.stats import fmt_ci
    m, ci, n, _k = paired_ratio(wt, num, den, metric, where)
    return "n/a" if n == 0 else fmt_ci(m, ci)


def range_cell(wt: pd.DataFrame, num: str, den: str, metric: str, where: dict | None = None) -> str:
    """'min-max (a above, b below)': the per-configuration ratios and how many of their
    intervals lie wholly above / below 1."""
    r = config_ratios(wt, num, den, metric, where)
    if not r:
        return "n/a"
    vals = [m for m, _ in r.values()]
    above = sum(1 for _m, ci in r.values() if ci and ci[0] > 1)
    below = sum(1 for _m, ci in r.values() if ci and ci[1] < 1)
    return f"{min(vals):.2f}-{max(vals):.2f} ({above} above 1, {below} below)"


def with_best_variants(exp: PaperExperiments, wt: pd.DataFrame) -> pd.DataFrame:
    """``wt`` plus pseudo-variants best_soc / best_gpu (best by throughput) and best_soc_eff /
    best_gpu_eff (best by tokens/J), both ratio estimators over all the configuration's windows and
    seeds: per (model pair, algorithm), the
    windows of the candidate (``exp.best_decoders``) that is best there, so that every
    configuration's ratio is against each competitor's best decoder on its hardware.
    The best is picked on the same windows, which can only favour the baseline."""
    if wt.empty:
        return wt
    keys = [c for c in CONFIG_KEYS if c in wt.columns]
    extra = []
    for name, cands in exp.best_decoders.items():
        d = wt[wt["variant"].isin(cands)]
        if d.empty:
            continue
        for metric, suffix in (("throughput_tok_s", ""), ("tokens_per_j", "_eff")):
            for _k, g in d.groupby(keys, sort=False):
                score = {v: pooled_rate(gv, metric) for v, gv in g.groupby("variant")}
                best = max(score, key=lambda v: (score[v], -cands.index(v)))
                pick = g[g["variant"] == best].copy()
                pick["best_of"] = best
                pick["variant"] = name + suffix
                extra.append(pick)
    return pd.concat([wt, *extra], ignore_index=True) if extra else wt


def best_choices(exp: PaperExperiments, wt: pd.DataFrame, name: str) -> str:
    """Which decoder was best how often (e.g. 'pim_ar 12/12')."""
    if wt.empty or "best_of" not in wt.columns:
        return "n/a"
    d = wt[wt["variant"] == name].drop_duplicates([c for c in CONFIG_KEYS if c in wt.columns])
    if d.empty:
        return "n/a"
    counts = d["best_of"].value_counts()
    return ", ".join(f"{exp.short.get(v, v)} {n}/{len(d)}" for v, n in counts.items())


def _ratio_row(wt, num, den, den_eff, label, name) -> list[str]:
    _m, _ci, n, k = paired_ratio(wt, num, den, "throughput_tok_s")
    return [label, name, ratio_cell(wt, num, den, "throughput_tok_s"), range_cell(wt, num, den, "throughput_tok_s"),
            ratio_cell(wt, num, den_eff, "tokens_per_j"), range_cell(wt, num, den_eff, "tokens_per_j"),
            f"{k} x {n // k if k else 0}"]


def ci_comparisons(exp: PaperExperiments, wt: pd.DataFrame) -> list[list[str]]:
    """AHASD (and each KV option) vs the best decoders, operator_sync, async and GPU, with 95% CIs."""
    rows = []
    have = set(wt["variant"]) if not wt.empty else set()
    nums = [("ahasd", "AHASD (default)")] + [(v, f"AHASD ({kv})") for kv, v in exp.kv_variants.items()]
    dens = [("best_soc", "best_soc_eff", "best decoder of the same hardware"),
            ("best_gpu", "best_gpu_eff", "best GPU decoder (max of GPU-only, AR on GPU)"),
            ("operator_sync", "operator_sync", "operator_sync (same hardware, own placement)"),
            ("specpim", "specpim", "SpecPIM-style (no AAU/GTS)"),
            ("plus_aau", "plus_aau", "async (+AAU rung)"),
            ("pim_ar", "pim_ar", "autoregressive on PIM"),
            ("gpu_only", "gpu_only", "GPU-only speculative")]
    for num, label in nums:
        if num not in have:
            continue
        for den, den_eff, name in dens:
            if den in have and den_eff in have:
                rows.append(_ratio_row(wt, num, den, den_eff, label, name))
    return rows


def ci_ladder(exp: PaperExperiments, wt: pd.DataFrame, metric: str) -> list[list[str]]:
    """The ablation ladders (x GPU-only, 95% CIs), one row per EDC-stop semantics; each rung
    changes one switch from the previous one."""
    have = set(wt["variant"]) if not wt.empty else set()
    rows = []
    for stop, ladder in exp.ladders.items():
        rungs = [v for v in ladder if v != "gpu_only"]
        if not all(v in have for v in rungs):
            continue
        rows.append([stop, *(ratio_cell(wt, v, "gpu_only", metric) for v in rungs)])
    return rows


def ci_rung_steps(exp: PaperExperiments, wt: pd.DataFrame) -> list[list[str]]:
    """Each rung over the previous rung of its ladder (the effect of one switch), 95% CIs."""
    have = set(wt["variant"]) if not wt.empty else set()
    rows = []
    for stop, ladder in exp.ladders.items():
        rungs = [v for v in ladder if v != "gpu_only"]
        for prev, nxt in zip(rungs, rungs[1:]):
            if prev in have and nxt in have:
                rows.append([stop, f"{exp.short[nxt]} / {exp.short[prev]}",
                             ratio_cell(wt, nxt, prev, "throughput_tok_s"),
                             range_cell(wt, nxt, prev, "throughput_tok_s"),
                             ratio_cell(wt, nxt, prev, "tokens_per_j"),
                             range_cell(wt, nxt, prev, "tokens_per_j")])
    return rows


def ci_per_config(wt: pd.DataFrame, num: str, den: str, den_eff: str) -> list[list[str]]:
    """One row per (model pair, algorithm): the paired ratio of ``num`` to ``den`` (throughput) and
    to ``den_eff`` (tokens/J) over that configuration's windows, 95% CI."""
    from ..metrics.stats import fmt_ci
    rows = []
    if wt.empty:
        return rows
    t = config_ratios(wt, num, den, "throughput_tok_s")
    e = config_ratios(wt, num, den_eff, "tokens_per_j")
    for st in t:
        rows.append([*st, fmt_ci(*t[st]), fmt_ci(*e[st]) if st in e else "n/a"])
    return rows


STATS_NOTE = (
    "Every rate is a ratio estimator (total tokens / total decode time; total tokens / total decode energy) over "
    "trace windows, which are disjoint; seeds are averaged within a window. A ratio between two variants of one "
    "(model pair, drafting algorithm) configuration is the ratio of their rates over the same windows, with a "
    "95% paired percentile bootstrap over whole windows (docs/modeling.md, Statistics). **Suite** = all "
    "configurations together: the ratio of the suite's total tokens / total decode time (or energy), i.e. "
    "weighted by each configuration's time, with a *stratified* paired bootstrap (windows resampled within each "
    "configuration, never across: the model pairs and algorithms are fixed effects, not samples); the range "
    "column gives the per-configuration ratios and how many of their own intervals lie wholly above or below 1.")


def ci_section(exp: PaperExperiments, wt: pd.DataFrame) -> list[str]:
    wt = with_best_variants(exp, wt)
    soc, gpu = (", ".join(exp.short[v] for v in exp.best_decoders[k]) for k in ("best_soc", "best_gpu"))
    lines = ["## Headline ratios with 95% confidence intervals", "", STATS_NOTE, "",
             "**Best decoder**: per (model pair, algorithm), the fastest (for throughput) or most efficient (for "
             f"tokens/J) of {soc} on the NPU + LPDDR5-PIM hardware, and of {gpu} on the GPU; it is picked on the "
             "same windows, which can only favour the baseline. Every PIM mode uses its own best rank placement "
             "(pim.partition_policy: auto, chosen on the tuning trace).", ""]
    if wt.empty:
        return lines + ["(no windows.csv found)", ""]
    lines.append(md_table(["configuration", "vs", "throughput, suite [95% CI]", "per configuration",
                           "tokens/J, suite [95% CI]", "per configuration", "configurations x windows"],
                          ci_comparisons(exp, wt)))
    lines += ["", f"Best decoder of the same hardware: throughput {best_choices(exp, wt, 'best_soc')}; tokens/J "
              f"{best_choices(exp, wt, 'best_soc_eff')}. Best GPU decoder: throughput "
              f"{best_choices(exp, wt, 'best_gpu')}; tokens/J {best_choices(exp, wt, 'best_gpu_eff')}.", ""]
    head = ["EDC stop", "NPU+PIM", "+AAU", "+EDC", "+TVC", "+GTS (AHASD)"]
    lines += ["Ablation ladders, throughput x GPU-only, suite [95% CI]; each rung switches one thing on:", ""]
    lines.append(md_table(head, ci_ladder(exp, wt, "throughput_tok_s")))
    lines += ["", "Ablation ladders, energy efficiency (tokens/J) x GPU-only, suite [95% CI]:", ""]
    lines.append(md_table(head, ci_ladder(exp, wt, "tokens_per_j")))
    lines += ["", "The effect of each switch (rung / previous rung), suite [95% CI] and per configuration:", ""]
    lines.append(md_table(["EDC stop", "rung", "throughput", "per configuration", "tokens/J", "per configuration"],
                          ci_rung_steps(exp, wt)))
    for den, den_eff, name in (("best_soc", "best_soc_eff", "the best decoder of the same hardware"),
                               ("best_gpu", "best_gpu_eff", "the best GPU decoder")):
        if not {den, den_eff} <= set(wt["variant"]) or "ahasd" not in set(wt["variant"]):
            continue
        lines += ["", f"AHASD vs {name}, per configuration (model pair, algorithm) [95% CI]:", ""]
        lines.append(md_table(["model pair", "algorithm", "throughput", "tokens/J"],
                              ci_per_config(wt, "ahasd", den, den_eff)))
    lines.append("")
    return lines


def _rates_label(label: str) -> str:
    """'null/null/per_unit/per_unit' -> 'derived (pim.preset)'; '102.4/256.0/total/per_unit' ->
    'typed: 102.4 GOPS total, 256 GB/s per unit'."""
    parts = str(label).split("/")
    if len(parts) != 4 or parts[0] in ("null", "None", "nan"):
        return "derived (pim.preset)"
    g, b, gs, bs = parts
    return f"typed: {float(g):g} GOPS {gs.replace('_', ' ')}, {float(b):g} GB/s {bs.replace('_', ' ')}"


def regime_windows(exp: PaperExperiments, table: pd.DataFrame, points_dir: Path) -> pd.DataFrame:
    """The regimes sweep's window table (one row per point and window, with the regime axes)."""
    return window_table(table, points_dir, exp.regime_axes)


def regime_rows(exp: PaperExperiments, rwt: pd.DataFrame) -> list[dict[str, Any]]:
    """Per regime (one configuration each): the best decoders and AHASD's paired ratios (to the
    best, to operator_sync, TVC on/off) as (ratio, ci) pairs, ratio estimators over the regime's
    windows with a paired bootstrap, and whether AHASD beats the best on both metrics."""
    from ..metrics.stats import paired_metric_ci, seed_averaged
    rows = []
    axes = exp.regime_axes
    if rwt.empty or not all(a in rwt.columns for a in axes):
        return rows
    rwt = seed_averaged(rwt, ["variant", *axes, "window"])
    for key, g in rwt.groupby(axes, sort=False):
        w = {v: gv.set_index("window") for v, gv in g.groupby("variant")}
        if not {"ahasd", "operator_sync"} <= set(w):
            continue
        dec = [v for v in exp.regime_decoders if v in w]
        best_t = max(dec, key=lambda v: pooled_rate(w[v], "throughput_tok_s"))
        best_e = max(dec, key=lambda v: pooled_rate(w[v], "tokens_per_j"))
        row: dict[str, Any] = {"regime": dict(zip(axes, key)), "best_throughput": best_t,
                               "best_efficiency": best_e}
        for tag, den_t, den_e in (("best", best_t, best_e), ("operator_sync", "operator_sync", "operator_sync"),
                                  ("tvc", "ahasd_no_tvc", "ahasd_no_tvc")):
            if den_t not in w:
                continue
            for m, den in (("throughput_tok_s", den_t), ("tokens_per_j", den_e)):
                a, b = w["ahasd"].align(w[den], join="inner", axis=0)
                row[f"{tag}/{m}"] = paired_metric_ci(a, b, m)
        wins = [row["best/" + m][1] is not None and row["best/" + m][1][0] > 1
                for m in ("throughput_tok_s", "tokens_per_j")]
        row["beats_best"] = wins
        row["beats_best_on_both"] = all(wins)
        rows.append(row)
    return rows


def regime_section_from_windows(exp: PaperExperiments, rwt: pd.DataFrame) -> list[str]:
    lines = ["## AHASD with derived PIM rates and under each Table-2 reading (regimes sweep)", "",
             "LLaMA2-7B/13B shapes, AdaEDL, 5 windows; every decoder on the same NPU + LPDDR5-PIM platform with "
             "AAU and GTS, each PIM mode with its own best placement. PIM rates: derived from the memory "
             "(`pim.preset`, the default), or Table 2's typed 102.4 GOPS and 256 GB/s read per PIM unit or as "
             "the device total. Each regime is one configuration: ratios of ratio estimators over its windows, "
             "95% paired bootstrap over whole windows [95% CI]. "
             "**both** = the whole interval is above 1 for throughput and for tokens/J. Best decoder = the "
             "fastest (tokens/J: most efficient) of " + ", ".join(exp.regime_decoders) + " in that regime.", ""]
    rows = regime_rows(exp, rwt)
    if not rows:
        return lines + ["(regimes sweep missing)", ""]
    out = []
    for row in rows:
        reg = row["regime"]
        cells = [_rates_label(reg[exp.regime_rates_axis]), str(reg[exp.regime_contention_axis])]
        cells.append(f"{exp.short.get(row['best_throughput'], row['best_throughput'])} / "
                     f"{exp.short.get(row['best_efficiency'], row['best_efficiency'])}")
        for tag in ("best", "operator_sync", "tvc"):
            for m in ("throughput_tok_s", "tokens_per_j"):
                cells.append(fmt_ci(*row[f"{tag}/{m}"]) if f"{tag}/{m}" in row else "n/a")
        fb = row["beats_best"]
        cells.append("**both**" if all(fb) else ("throughput only" if fb[0] else ("energy only" if fb[1] else "no")))
        out.append(cells)
    lines.append(md_table(["PIM rates", "contention", "best decoder (tok/s / tok/J)", "AHASD/best tok/s",
                           "AHASD/best tok/J", "AHASD/opsync tok/s", "AHASD/opsync tok/J", "TVC on/off tok/s",
                           "TVC on/off tok/J", "AHASD beats best"], out))
    lines.append("")
    return lines


# ---------------------------------------------------------------- tables
def normalised_table(exp: PaperExperiments, df: pd.DataFrame, baseline: str = "gpu_only") -> pd.DataFrame:
    d = ok_rows(df)
    d = d.assign(memory_energy_j=memory_energy_j(d), npu_energy_j=device_energy_j(d, "npu"))
    d = d.assign(memory_power_w=d["memory_energy_j"] / d["makespan_s"], npu_power_w=d["npu_energy_j"] / d["makespan_s"])
    return normalise(d, by="variant", baseline=baseline, group=[c for c in exp.match if c in d.columns],
                     metrics=["throughput_tok_s", "tokens_per_j", "energy_per_token_j", "acceptance_rate",
                              "memory_power_w", "npu_power_w"])


#: rates of results.csv rows that are not in metrics.stats.RATIOS: (numerator, denominator) totals
_ROW_RATIOS = {"acceptance_rate": (lambda d: d["accepted_tokens"],
                                   lambda d: d["accepted_tokens"] + d["rejected_tokens"] + d["killed_tokens"]),
               "memory_power_w": (memory_energy_j, lambda d: d["makespan_s"]),
               "npu_power_w": (lambda d: device_energy_j(d, "npu"), lambda d: d["makespan_s"])}


def _row_totals(d: pd.DataFrame, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Per results.csv row: the two totals of ``metric``'s ratio estimator."""
    from ..metrics.stats import RATIOS, totals
    if metric in RATIOS:
        n, m = RATIOS[metric]
        return totals(d, n), totals(d, m)
    fn, fd = _ROW_RATIOS[metric]
    return np.asarray(fn(d), dtype=float), np.asarray(fd(d), dtype=float)


def _matched(exp: PaperExperiments, df: pd.DataFrame, num: str, den: str, metric: str, where: dict | None):
    """Matched points (same ``exp.match`` columns: model pair, policy, seed) of ``num`` and ``den``:
    their totals, aligned."""
    d = ok_rows(df)
    for k, v in (where or {}).items():
        d = d[d[k] == v]
    keys = [c for c in exp.match if c in d.columns]
    parts = []
    for v in (num, den):
        x = d[d["variant"] == v]
        n, m = _row_totals(x, metric)
        parts.append(pd.DataFrame({"n": n, "d": m}, index=pd.MultiIndex.from_frame(x[keys])))
    a, b = parts[0].align(parts[1], join="inner")
    return a.dropna(), b.loc[a.dropna().index]


def pair_ratio(exp: PaperExperiments, df: pd.DataFrame, num: str, den: str, metric: str,
               where: dict | None = None) -> pd.Series:
    """metric(num) / metric(den) per configuration (model pair, policy): each the ratio of the two
    variants' ratio estimators over the configuration's points (seeds summed)."""
    a, b = _matched(exp, df, num, den, metric, where)
    if a.empty:
        return pd.Series(dtype=float)
    cfg = [c for c in a.index.names if c != "seed"]
    ga, gb = a.groupby(level=cfg, sort=False).sum(), b.groupby(level=cfg, sort=False).sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (ga["n"] / ga["d"]) / (gb["n"] / gb["d"])
    return r.replace([np.inf, -np.inf], np.nan).dropna()


def suite_ratio(exp: PaperExperiments, df: pd.DataFrame, num: str, den: str, metric: str,
                where: dict | None = None) -> float:
    """metric(num) / metric(den) over the whole suite of matched points: the ratio of the two
    variants' ratio estimators over all those points' totals (not a mean of ratios)."""
    from ..metrics.stats import ratio_of_totals
    a, b = _matched(exp, df, num, den, metric, where)
    if a.empty:
        return float("nan")
    rb = ratio_of_totals(b["n"], b["d"])
    return ratio_of_totals(a["n"], a["d"]) / rb if rb > 0 else float("nan")


def _fmt(x: float, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and (math.isnan(x) or math.isinf(x))):
        return "n/a"
    return f"{x:.{digits}f}"


def _sig(x: float, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and (math.isnan(x) or math.isinf(x))):
        return "n/a"
    return f"{x:.{digits}g}"


def _stat(s: pd.Series, how: str = "max") -> float:
    if s is None or len(s) == 0:
        return float("nan")
    return float(s.max()) if how == "max" else float(s.min())


def _range(s: pd.Series) -> str:
    if s is None or len(s) == 0:
        return "n/a"
    return f"{s.min():.2f}-{s.max():.2f}"


def _pct(x: float) -> str:
    return "n/a" if x is None or math.isnan(x) else f"{(x - 1) * 100:+.1f}%"


def md_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(lines)


def comparison_rows(exp: PaperExperiments, df: pd.DataFrame) -> list[dict[str, Any]]:
    """The paper's headline claims next to ours: list of {claim, ours, paper, detail}. "Suite"
    claims are ratios of the suite's totals (:func:`suite_ratio`), "up to" claims the largest
    per-configuration ratio (:func:`pair_ratio`)."""
    rows: list[dict[str, Any]] = []

    def add(claim: str, ours: float, paper: float, detail: str, kind: str = "x") -> None:
        rows.append({"claim": claim, "ours": ours, "paper": paper, "detail": detail, "kind": kind})

    def suite(num, den, metric, where=None):
        s = pair_ratio(exp, df, num, den, metric, where)
        return (suite_ratio(exp, df, num, den, metric, where),
                f"suite total over {len(s)} configurations, each {_range(s)}")

    paper = exp.reported
    for v in paper["ladder_throughput"]:
        r, det = suite(v, "gpu_only", "throughput_tok_s")
        add(f"{exp.short[v]} throughput vs GPU-only", r, paper["ladder_throughput"][v], det)
        r, det = suite(v, "gpu_only", "tokens_per_j")
        add(f"{exp.short[v]} energy efficiency vs GPU-only", r, paper["ladder_energy_eff"][v], det)
    r, det = suite("npu_pim", "gpu_only", "acceptance_rate")
    add("NPU+PIM mean acceptance vs GPU-only", r, 1 + paper["acceptance_npu_pim_vs_gpu_pct"] / 100,
        f"acceptance rate (accepted / drafted), {det}", "pct")
    r, det = suite("plus_edc", "plus_aau", "acceptance_rate")
    add("+EDC acceptance vs +AAU", r, 1 + paper["acceptance_edc_vs_aau_pct"] / 100, det, "pct")
    r, det = suite("plus_edc", "plus_aau", "acceptance_rate", {"model_pair": "llama2-7b/llama2-13b",
                                                               "run.policy": "adaedl"})
    add("+EDC acceptance vs +AAU, LLaMA2 + AdaEDL", r, 1 + paper["acceptance_edc_vs_aau_llama_adaedl_pct"] / 100,
        det, "pct")
    r, det = suite("plus_edc", "plus_aau", "acceptance_rate", {"model_pair": "opt-1.3b/opt-6.7b"})
    add("+EDC acceptance vs +AAU, OPT group (paper: < +10%)", r, 1 + paper["acceptance_edc_vs_aau_opt_max_pct"] / 100,
        f"{det}; paper gives an upper bound", "pct")
    for den, what in (("gpu_only", "GPU-only"), ("specpim", "SpecPIM-style"),
                      ("specpim_gpu", "SpecPIM on GPU+PIM hardware")):
        if den not in set(df["variant"]):
            continue
        for metric, name, key in (("throughput_tok_s", "throughput", "throughput"),
                                  ("tokens_per_j", "energy efficiency", "energy_eff")):
            pk = f"ahasd_vs_{'gpu' if den == 'gpu_only' else 'specpim'}_max_{key}"
            if pk in paper:
                s = pair_ratio(exp, df, "ahasd", den, metric)
                add(f"AHASD vs {what}, best {name} ('up to')", _stat(s, "max"), paper[pk],
                    f"largest of {len(s)} configurations; suite total "
                    f"{_fmt(suite_ratio(exp, df, 'ahasd', den, metric))}")
        if den != "gpu_only":
            r, det = suite("ahasd", den, "tokens_per_j")
            add(f"AHASD vs {what}, mean energy efficiency", r, paper["ahasd_vs_specpim_mean_energy_eff"], det)
    for den, what, metric, key in (
            ("npu_lpddr5", "NPU+LPDDR5, throughput", "throughput_tok_s", "ahasd_vs_npu_lpddr5_throughput"),
            ("npu_lpddr5", "NPU+LPDDR5, energy per token", "energy_per_token_j", "ahasd_vs_npu_lpddr5_energy_per_token"),
            ("plus_aau", "NPU+LPDDR5-PIM (+AAU), throughput", "throughput_tok_s", "ahasd_vs_npu_pim_throughput"),
            ("plus_aau", "NPU+LPDDR5-PIM (+AAU), energy efficiency", "tokens_per_j", "ahasd_vs_npu_pim_energy_eff")):
        r, det = suite("ahasd", den, metric)
        add(f"AHASD vs {what}", r, paper[key], det)
    return rows


def power_rows(exp: PaperExperiments, df: pd.DataFrame) -> list[list[str]]:
    """The paper's power table (vs NPU+LPDDR5) from our runs: memory (LPDDR5 + PIM units + AAU
    + GTS) and NPU average power, throughput, energy per token; ratios of the suite's totals."""
    d = ok_rows(df)
    out = []
    for v, name in (("npu_lpddr5", "NPU + LPDDR5"), ("plus_aau", "NPU + LPDDR5-PIM (+AAU rung)"), ("ahasd", "AHASD")):
        cells = [name]
        for metric in ("memory_power_w", "npu_power_w", "throughput_tok_s", "energy_per_token_j"):
            cells.append(_fmt(suite_ratio(exp, d, v, "npu_lpddr5", metric)))
        p = exp.reported["power_table"][v]
        cells.append(" / ".join(f"{p[c]:.2f}" for c in POWER_COLUMNS))
        out.append(cells)
    return out


def per_pair_table(exp: PaperExperiments, df: pd.DataFrame, variants: Sequence[str], metric: str,
                   baseline: str | None = "gpu_only") -> list[list[str]]:
    """Per model pair: each variant's ratio to ``baseline`` (or, without one, its rate), ratio
    estimators over the totals of the pair's algorithms and seeds."""
    from ..metrics.stats import ratio_of_totals
    d = ok_rows(df)
    pairs = list(dict.fromkeys(d["model_pair"]))
    rows = []
    for p in pairs:
        cells = [p]
        for v in variants:
            if baseline:
                cells.append(_fmt(suite_ratio(exp, d, v, baseline, metric, {"model_pair": p})))
            else:
                x = d[(d["variant"] == v) & (d["model_pair"] == p)]
                cells.append(_sig(ratio_of_totals(*_row_totals(x, metric)) if len(x) else float("nan")))
        rows.append(cells)
    return rows


def _per_pair_sections(exp: PaperExperiments, df: pd.DataFrame, variants: Sequence[str], throughput_title: str,
                       energy_title: str) -> list[str]:
    """Report lines: the :func:`per_pair_table` of ``variants`` in throughput, then in tokens/J,
    each under its title."""
    header = ["model pair", *[exp.short[v] for v in variants]]
    out: list[str] = []
    for title, metric in ((throughput_title, "throughput_tok_s"), (energy_title, "tokens_per_j")):
        out += [title, "", md_table(header, per_pair_table(exp, df, variants, metric)), ""]
    return out


def per_policy_table(exp: PaperExperiments, df: pd.DataFrame, variant: str, baseline: str,
                     metric: str) -> list[list[str]]:
    d = ok_rows(df)
    pairs = list(dict.fromkeys(d["model_pair"]))
    pols = list(dict.fromkeys(d["run.policy"]))
    rows = []
    for p in pairs:
        cells = [p]
        for pol in pols:
            cells.append(_fmt(suite_ratio(exp, d, variant, baseline, metric, {"model_pair": p, "run.policy": pol})))
        rows.append(cells)
    return [["model pair", *pols]] + rows


def build_report(exp: PaperExperiments, df: pd.DataFrame, *, meta: dict[str, Any], figures: dict[str, list[Path]],
                 out_dir: Path,
                 windows: pd.DataFrame | None = None, regimes: list[str] | None = None) -> str:
    """The markdown report (relative links to figures under ``out_dir``)."""
    lines: list[str] = []
    lines.append("# AHASD paper reproduction on ahasd_sim")
    lines.append("")
    lines.append("Generated by `scripts/reproduce_paper.py`. Every number in the *ours* columns is computed from "
                 "this run's result files; the *paper* columns are the ratios the AHASD paper reports "
                 f"({exp.reported_source}), shown for comparison only. Nothing was tuned to match them.")
    lines.append("")
    lines.append("## Setup")
    lines.append("")
    for k, v in meta.items():
        lines.append(f"- **{k}**: {v}")
    lines.append("")
    lines.append("Configurations (sweep variants of `hw_configs/paper/reproduce.yaml`):")
    lines.append("")
    lines.append(md_table(["variant", "meaning"], [[f"`{k}`", label] for k, label in exp.labels.items()]))
    lines.append("")

    if windows is not None:
        lines += ci_section(exp, windows)
    if regimes:
        lines += regimes

    comp = comparison_rows(exp, df)
    lines.append("## Headline comparison with the paper")
    lines.append("")
    rows = []
    for r in comp:
        if r["kind"] == "pct":
            rows.append([r["claim"], _pct(r["ours"]), _pct(r["paper"]), r["detail"]])
        else:
            rows.append([r["claim"], f"{_fmt(r['ours'])}x", f"{_fmt(r['paper'])}x", r["detail"]])
    lines.append(md_table(["claim", "ours", "paper", "how ours is computed"], rows))
    lines.append("")
    lines.append("Rates are ratio estimators (total / total); a suite ratio is that of the suite's totals over every "
                 "matched (model pair, drafting algorithm, seed) point, an 'up to' the largest per-configuration ratio. "
                 "Energy efficiency = tokens per joule (whole platform: static + dynamic energy of every device).")
    lines.append("")

    lines.append("## Ablation ladder per model pair (ratio of totals over algorithms, x GPU-only)")
    lines.append("")
    short = exp.short
    lad = [v for v in exp.ladder if v != "gpu_only"]
    lines += _per_pair_sections(exp, df, lad, "Throughput:", "Energy efficiency (tokens/J):")
    lines.append("Acceptance rate (accepted / drafted tokens, absolute, ratio of totals over algorithms):")
    lines.append("")
    acc_vars = [v for v in exp.ladder] + ["specpim"]
    d = ok_rows(df)
    acc_rows = []
    for p in dict.fromkeys(d["model_pair"]):
        cells = [p]
        for v in acc_vars:
            x = d[(d["variant"] == v) & (d["model_pair"] == p)]
            cells.append(_fmt(ratio_of_totals(*_row_totals(x, "acceptance_rate")) if len(x) else float("nan"), 3))
        acc_rows.append(cells)
    lines.append(md_table(["model pair", *[short[v] for v in acc_vars]], acc_rows))
    lines.append("")

    lines.append("## Comparison with the baselines (ratio of totals over algorithms)")
    lines.append("")
    sota = [v for v in ("specpim", "specpim_gpu", "npu_lpddr5", "ahasd") if v in set(df["variant"])]
    lines += _per_pair_sections(exp, df, sota, "Throughput, x GPU-only:", "Energy efficiency, x GPU-only:")
    lines.append("AHASD throughput per drafting algorithm, x SpecPIM-style:")
    lines.append("")
    t = per_policy_table(exp, df, "ahasd", "specpim", "throughput_tok_s")
    lines.append(md_table(t[0], t[1:]))
    lines.append("")
    lines.append("AHASD throughput per drafting algorithm, x GPU-only:")
    lines.append("")
    t = per_policy_table(exp, df, "ahasd", "gpu_only", "throughput_tok_s")
    lines.append(md_table(t[0], t[1:]))
    lines.append("")

    lines.append("## Power table (x NPU+LPDDR5)")
    lines.append("")
    lines.append("Memory power = (LPDDR5 + PIM units + AAU + GTS energy) / makespan; NPU power = NPU energy / "
                 "makespan. The paper's \"NPU + LPDDR5-PIM\" row is matched with our +AAU rung (its throughput "
                 f"2.20x NPU+LPDDR5 = the +AAU step, {exp.reported_source} checks).")
    lines.append("")
    lines.append(md_table(["configuration", "memory power", "NPU power", "throughput", "energy/token",
                           "paper (mem / NPU / thr / E/tok)"], power_rows(exp, df)))
    lines.append("")

    lines.append("## Absolute numbers (ratio of totals over algorithms)")
    lines.append("")
    allv = [v for v in exp.labels if v in set(d["variant"])]
    lines.append("Throughput (tokens/s):")
    lines.append("")
    lines.append(md_table(["model pair", *[short[v] for v in allv]],
                          per_pair_table(exp, df, allv, "throughput_tok_s", None)))
    lines.append("")
    lines.append("Energy efficiency (tokens/J):")
    lines.append("")
    lines.append(md_table(["model pair", *[short[v] for v in allv]],
                          per_pair_table(exp, df, allv, "tokens_per_j", None)))
    lines.append("")

    if figures:
        lines.append("## Figures")
        lines.append("")
        for name, paths in figures.items():
            png = [p for p in paths if p.suffix == ".png"]
            pdf = [p for p in paths if p.suffix == ".pdf"]
            if png:
                rel = png[0].relative_to(out_dir) if png[0].is_relative_to(out_dir) else png[0]
                relpdf = pdf[0].relative_to(out_dir) if pdf and pdf[0].is_relative_to(out_dir) else (pdf[0] if pdf else "")
                lines.append(f"**{name}** ([PDF]({relpdf}))")
                lines.append("")
                lines.append(f"![{name}]({rel})")
                lines.append("")

    failed = df[df["status"] != "ok"] if "status" in df.columns else df.iloc[0:0]
    lines.append("## Failed or missing points")
    lines.append("")
    if failed.empty:
        lines.append("None: every point finished.")
    else:
        lines.append(md_table(["variant", "model pair", "algorithm", "status", "error"],
                              [[r.get("variant"), r.get("model_pair"), r.get("run.policy"), r["status"],
                                f"{r.get('error_type') or ''}: {r.get('error') or ''}"] for _, r in failed.iterrows()]))
    lines.append("")

    lines.append("## How to read this (differences from the paper's setup)")
    lines.append("")
    for c in exp.caveats:
        lines.append(f"- {c}")
    lines.append("")
    return "\n".join(lines)

