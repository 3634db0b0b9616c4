"""The AHASD paper reproduction's figures, from the sweeps' result files: the ablation ladder and
baseline bars (the paper's reported ratios as markers, for comparison only), device timelines,
draft/acceptance distributions, the per-configuration heat map, the ladder lines and the 95%-CI
ratios of each pre-verification KV option."""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ..metrics.windows import paired_ratio, window_table
from .experiments import PaperExperiments
from .report import pair_ratio, suite_ratio, with_best_variants


def make_figures(exp: PaperExperiments, df: pd.DataFrame, out: Path, main_points: Path,
                 tl_result) -> dict[str, list[Path]]:
    """The report's figures under ``out/figures`` from the main sweep's results (``df``, its
    points in ``main_points``) and the timeline sweep's (``tl_result``, a SweepResult or None):
    figure title -> the files written (PDF + PNG)."""
    from .. import plots
    from ..plots.distributions import plot_distributions
    fig_dir = out / "figures"
    figs: dict[str, list[Path]] = {}
    wt = window_table(df, main_points)      # the bars' 95% intervals: bootstrap over these windows
    wt = wt if len(wt) else None
    figs["Ablation ladder (x GPU-only)"] = plots.normalised_bars(
        df, fig_dir / "ablation", bars=exp.ladder, bar_labels=exp.short, baseline_label="GPU-only", windows=wt,
        paper={"throughput_tok_s": exp.reported["ladder_throughput"],
               "tokens_per_j": exp.reported["ladder_energy_eff"]})
    figs["Comparison with baselines (x GPU-only)"] = plots.normalised_bars(
        df, fig_dir / "sota", bars=exp.sota, bar_labels=exp.short, baseline_label="GPU-only", windows=wt,
        paper={"throughput_tok_s": {"ahasd": exp.reported["ladder_throughput"]["ahasd"]},
               "tokens_per_j": {"ahasd": exp.reported["ladder_energy_eff"]["ahasd"]}})
    # Gantt: the timeline sweep's points, one per variant.
    if tl_result is not None:
        t = tl_result.table
        runs = {}
        for v in exp.ladder + ["specpim", "npu_lpddr5"]:
            row = t[(t["variant"] == v) & (t["status"] == "ok")]
            if len(row):
                p = tl_result.out_dir / "points" / row["point"].iloc[0] / "timeline.json"
                if p.is_file():
                    runs[exp.short[v]] = p
        if runs:
            pair = t["model_pair"].iloc[0] if "model_pair" in t.columns else ""
            pol = t["run.policy"].iloc[0] if "run.policy" in t.columns else ""
            figs["Device timelines"] = plots.plot_gantt(runs, fig_dir / "timeline",
                                                        title=f"Device activity, {pair}, {pol} (window 10-30% of the shortest run)")
    # Distributions: LLaMA2 pair + AdaEDL, one line per variant that drafts.
    d = df[(df["status"] == "ok") & (df["model_pair"] == "llama2-7b/llama2-13b") & (df["run.policy"] == "adaedl")]
    runs = {}
    for v in ["gpu_only", "specpim", "npu_pim", "plus_aau", "plus_edc", "ahasd"]:
        row = d[d["variant"] == v]
        if len(row):
            p = main_points / row["point"].iloc[0] / "events.csv"
            if p.is_file():
                runs[exp.short[v]] = p
    if runs:
        figs["Draft length and acceptance (LLaMA2-7B/13B, AdaEDL)"] = plot_distributions(
            runs, fig_dir / "distributions", title="LLaMA2-7B/13B, AdaEDL", max_len=32)
    # one cell per configuration: the ratio of AHASD's and GPU-only's ratio estimators (seeds
    # summed), the report's per-configuration value
    r = pair_ratio(exp, df, "ahasd", "gpu_only", "throughput_tok_s")
    a = r.rename("throughput_tok_s_ratio").reset_index() if len(r) else pd.DataFrame()
    if len(a):
        figs["AHASD throughput x GPU-only per pair and algorithm"] = plots.heatmap(
            a, x="run.policy", y="model_pair", metric="throughput_tok_s_ratio", fmt="{:.2f}",
            out=fig_dir / "heatmap_ahasd_vs_gpu", xlabel="Drafting algorithm", ylabel="Model pair (draft/target)",
            title="AHASD throughput (x GPU-only)", clabel="Throughput (x GPU-only)")
    # one mark per (rung, model pair): the ratio of totals over the pair's algorithms, the value of
    # the report's per-pair ladder table
    ok = df[df["status"] == "ok"] if "status" in df.columns else df
    lad = pd.DataFrame([{"model_pair": p, "configuration": exp.short[v],
                         "throughput_tok_s_ratio": suite_ratio(exp, df, v, "gpu_only", "throughput_tok_s",
                                                               {"model_pair": p})}
                        for v in exp.ladder if v in set(ok["variant"]) for p in dict.fromkeys(ok["model_pair"])])
    lad = lad.dropna() if len(lad) else lad
    if len(lad) and wt is not None:
        # each mark's 95% interval: the paired bootstrap over the pair's windows, stratified by
        # algorithm (metrics.windows.paired_ratio, the report's per-pair interval)
        inv = {s: v for v, s in exp.short.items()}
        cis = [paired_ratio(wt, inv[r["configuration"]], "gpu_only", "throughput_tok_s",
                            {"model_pair": r["model_pair"]})[1] for _, r in lad.iterrows()]
        lad["throughput_tok_s_ratio_ci95_low"] = [c[0] if c else float("nan") for c in cis]
        lad["throughput_tok_s_ratio_ci95_high"] = [c[1] if c else float("nan") for c in cis]
    if len(lad):
        paths = plots.lines(lad, x="configuration", metric="throughput_tok_s_ratio", hue="model_pair",
                            out=fig_dir / "ladder_lines", xlabel="Ablation step",
                            ylabel="Throughput (x GPU-only)", legend_title="model pair (draft/target)",
                            title="Ablation ladder: ratio of totals over algorithms")
        figs["Ablation ladder per model pair"] = paths
    return figs


def ci_figure(exp: PaperExperiments, wt: pd.DataFrame, out: Path) -> list[Path]:
    """Ratios of AHASD (each KV option) to async / operator_sync / GPU-only with 95% CI error bars."""
    import matplotlib.pyplot as plt
    from ..plots.style import apply_style, color, figure_size, save_figure
    apply_style()
    wt = with_best_variants(exp, wt)
    dens = [("best_soc", "best SoC"), ("operator_sync", "operator_sync"), ("plus_aau", "async"),
            ("best_gpu", "best GPU")]
    kvs = [(kv, v) for kv, v in [("default", "ahasd"), *exp.kv_variants.items()]
           if not wt.empty and v in set(wt["variant"])]
    fig, axes = plt.subplots(2, 1, figsize=figure_size("two", height_in=5.2), squeeze=False)
    for ax, (metric, label) in zip(axes[:, 0], (("throughput_tok_s", "Throughput ratio"),
                                                ("tokens_per_j", "Energy-efficiency ratio"))):
        width = 0.8 / max(1, len(kvs))
        for i, (kv, v) in enumerate(kvs):
            xs, ys, lo, hi = [], [], [], []
            for j, (den, _name) in enumerate(dens):
                den_m = den + "_eff" if metric == "tokens_per_j" and den.startswith("best_") else den
                g, ci, _n, _k = paired_ratio(wt, v, den_m, metric)   # the report's suite ratio
                if math.isnan(g):
                    continue
                xs.append(j + (i - (len(kvs) - 1) / 2) * width)
                ys.append(g)
                lo.append(g - (ci[0] if ci else g))
                hi.append((ci[1] if ci else g) - g)
            ax.bar(xs, ys, width=width * 0.9, color=color(i), label=f"AHASD ({kv})", yerr=[lo, hi], capsize=3)
        ax.axhline(1.0, color="0.3", linewidth=0.8, linestyle="--")
        ax.set_xticks(range(len(dens)))
        ax.set_xticklabels([f"vs {n}" for _d, n in dens])
        ax.set_ylabel(f"{label}\n(suite total, 95% CI)")
        ax.set_yscale("log")
    # the legend under the panels: inside them it covered bars
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return save_figure(fig, out)
