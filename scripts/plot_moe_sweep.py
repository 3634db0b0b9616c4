#!/usr/bin/env python3
"""Figure + table of the MoE expert-offload sweeps.

Reads the results tables of ``hw_configs/sweeps/moe_cache_capacity.yaml`` and
``moe_pcie_bandwidth.yaml`` (run them first with ``python -m ahasd_sim sweep``) and writes

* ``<out>/moe_policies_sweep.png``: throughput (tok/s, 95% CI over windows as error bars) of each
  tree policy vs expert-cache capacity and vs H2D bandwidth;
* ``<out>/moe_policies_sweep.md``: the numbers, SpecFit's gain over the acceptance-maximising
  selection (eagle_dynamic) at every point, accepted length per round and H2D GB.

    python scripts/plot_moe_sweep.py --cache sweeps/moe_cache_capacity --pcie sweeps/moe_pcie_bandwidth \
        --recall sweeps/moe_predictor_recall --out docs/moe-offload --note "$(sed -n 5p docs/moe-offload/moe_policies_sweep.md)"
"""
from __future__ import annotations

from pathlib import Path

import sys

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ahasd_sim.plots.style import apply_style, color, figure_size, plt, save_figure  # noqa: E402

POLICIES = ["eagle_fixed", "eagle_dynamic", "specfit", "ecospec"]
REF = "eagle_dynamic"


#: columns the figure and table read from every sweep's results.csv
NEEDED = ("status", "run.policy", "throughput_tok_s", "throughput_tok_s_ci95_low", "throughput_tok_s_ci95_high")


def _load(d: Path, axis: str, flag: str) -> pd.DataFrame:
    """The finished points of the sweep folder (or results.csv) ``d``; a missing folder, a
    table without the columns read here, or one without a finished point is one line."""
    from ahasd_sim.config.errors import InputError
    from ahasd_sim.sweep import read_results
    csv = d / "results.csv" if d.is_dir() else d
    if not csv.is_file():
        raise InputError(f"{flag} {d}: no results.csv there (run the sweep first: python -m ahasd_sim sweep "
                         "--config hw_configs/sweeps/<name>.yaml, or name its folder)")
    try:
        df = read_results(csv)
    except InputError as exc:
        raise InputError(f"{flag} {d}: {str(exc).partition(': ')[2] or exc}") from None
    missing = [c for c in (*NEEDED, axis) if c not in df.columns]
    if missing:
        raise InputError(f"{flag} {d}: the results table has no column {', '.join(missing)} (not a sweep of {axis}?)")
    df = df[df["status"] == "ok"].copy()
    if df.empty:
        raise InputError(f"{flag} {d}: no finished point (every point failed or is pending)")
    df["x"] = pd.to_numeric(df[axis], errors="coerce")
    if df["x"].isna().any():
        raise InputError(f"{flag} {d}: column {axis} holds values that are not numbers")
    return df


#: line style per eviction policy (the colour is the tree policy's)
EVICTION_STYLES = {"lru": "-", "lfu": (0, (5, 2)), "static": (0, (1, 1.5))}


def _panel(ax, df, xlabel, log=False):
    evictions = sorted(df["moe.cache_policy"].unique(), key=lambda e: ("lru", "lfu", "static").index(e)) \
        if "moe.cache_policy" in df else [None]
    colors = {pol: color(i) for i, pol in enumerate(POLICIES)}
    for ev in evictions:
        style = EVICTION_STYLES.get(ev, "-")
        for pol in POLICIES:
            sub = df[df["run.policy"] == pol]
            if ev is not None:
                sub = sub[sub["moe.cache_policy"] == ev]
            sub = sub.sort_values("x")
            if sub.empty:
                continue
            y = sub["throughput_tok_s"]
            err = [(y - sub["throughput_tok_s_ci95_low"]).clip(lower=0),
                   (sub["throughput_tok_s_ci95_high"] - y).clip(lower=0)]
            ax.errorbar(sub["x"], y, yerr=err, marker="o", ms=3, capsize=2, ls=style, color=colors[pol])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("throughput (tok/s)")
    if log:
        ax.set_xscale("log", base=2)
    ax.grid(alpha=0.3)
    return evictions


def legend_handles(evictions) -> tuple[list, list]:
    """Two keys instead of one entry per (policy, eviction): colour = tree policy, line style =
    eviction. One errorbar entry per pair drew each policy's LRU and LFU keys alike: a 12-point
    key is shorter than one dash period with the marker and the error bar over its middle."""
    from matplotlib.lines import Line2D
    hs = [Line2D([], [], color=color(i), marker="o", ms=3, ls="-") for i, _ in enumerate(POLICIES)]
    labs = list(POLICIES)
    if evictions != [None]:
        hs += [Line2D([], [], color="0.2", ls=EVICTION_STYLES.get(ev, "-"), lw=1.2) for ev in evictions]
        labs += [f"eviction {str(ev).upper()}" for ev in evictions]
    return hs, labs


def eviction_note(df) -> list[str]:
    """Why the eviction policies' lines (nearly) coincide, from the runs' own cache counters: a
    miss whose every resident candidate is pinned by the pass being verified is streamed, not
    cached, so the eviction policy chooses a victim only on the other misses."""
    need = {"moe.cache_policy", "mode_stats.cache.evictions", "mode_stats.cache.streamed_misses"}
    if not need <= set(df.columns) or df["moe.cache_policy"].nunique() < 2:
        return []
    g = df.groupby("x")[["mode_stats.cache.evictions", "mode_stats.cache.streamed_misses"]].sum()
    tot = g.sum(axis=1)
    parts = [f"{x:g}: {100 * r['mode_stats.cache.streamed_misses'] / t:.0f}%" for x, r in g.iterrows()
             for t in [tot[x]] if t > 0]
    hit = df.pivot_table(index=["run.policy", "x"], columns="moe.cache_policy", values="expert_cache_hit_rate")
    gap = float((hit.max(axis=1) - hit.min(axis=1)).max()) if len(hit) else float("nan")
    return ["Eviction policies: the curves of one tree policy under LRU and LFU (nearly) coincide (hit rates "
            f"at most {gap:.3f} apart) because the eviction policy only picks a victim among the resident "
            "experts the pass being verified does not pin; a miss with no such candidate is streamed (not "
            "cached). Streamed share of the misses, by capacity (all runs): " + ", ".join(parts)
            + "; at large capacity few unpinned candidates are left to choose from.", ""]


def _table(df, axis_name) -> list[str]:
    if "moe.cache_policy" in df and df["moe.cache_policy"].nunique() > 1:
        out = []
        for ev in sorted(df["moe.cache_policy"].unique()):
            out += [f"### eviction {ev}", ""] + _table(df[df["moe.cache_policy"] == ev].drop(
                columns=["moe.cache_policy"]), axis_name) + [""]
        return out
    lines = [f"| {axis_name} | policy | tok/s [95% CI] | accepted/round | nodes/round | levels drafted "
             f"| experts touched/verify | H2D GB | hit rate | vs {REF} |", "|---|---|---|---|---|---|---|---|---|---|"]
    for x in sorted(df["x"].unique()):
        at = df[df["x"] == x].drop_duplicates("run.policy").set_index("run.policy")
        ref = at["throughput_tok_s"].get(REF, float("nan"))
        for pol in POLICIES:
            if pol not in at.index:
                continue
            r = at.loc[pol]
            lines.append(f"| {x:g} | {pol} | {r['throughput_tok_s']:.1f} [{r['throughput_tok_s_ci95_low']:.1f}, "
                         f"{r['throughput_tok_s_ci95_high']:.1f}] | {r['accepted_length_per_round']:.2f} | "
                         f"{r['policy_stats.mean_nodes_verified']:.1f} | {r['policy_stats.mean_levels_drafted']:.2f} | "
                         f"{r['experts_touched_per_verify']:.0f} | "
                         f"{r['expert_h2d_bytes'] / 1e9:.2f} | {r['expert_cache_hit_rate']:.3f} | "
                         f"{r['throughput_tok_s'] / ref - 1:+.1%} |")
    return lines


def parser():
    from ahasd_sim.cli_common import script_parser
    ap = script_parser("Figure + table of the MoE expert-offload sweeps (cache capacity, H2D bandwidth)")
    ap.add_argument("--cache", default="sweeps/moe_cache_capacity", help="sweep folder of moe_cache_capacity.yaml")
    ap.add_argument("--pcie", default="sweeps/moe_pcie_bandwidth", help="sweep folder of moe_pcie_bandwidth.yaml")
    ap.add_argument("--recall", default="sweeps/moe_predictor_recall", help="optional predictor-recall sweep")
    ap.add_argument("--out", default="docs/moe-offload", help="folder of the figure and the table")
    ap.add_argument("--note", default="", help="a line printed under the table (e.g. which trace)")
    return ap


def main(argv=None) -> int:
    from ahasd_sim.cli_common import run_script
    return run_script(parser(), body, argv)


def body(a) -> int:
    from ahasd_sim.outdir import check_writable_dir
    out = Path(a.out)
    check_writable_dir(out)
    # every input is read and checked before the output folder is touched
    cache = _load(Path(a.cache), "moe.cache_capacity", "--cache")
    pcie = _load(Path(a.pcie), "h2d.effective_gb_s", "--pcie")
    out.mkdir(parents=True, exist_ok=True)
    apply_style()
    fig, axes = plt.subplots(1, 2, figsize=figure_size("two", aspect=0.45))
    ev = _panel(axes[0], cache, "expert-cache capacity (fraction of all experts)")
    _panel(axes[1], pcie, "H2D bandwidth (GB/s), cache 25%", log=True)
    hs, labs = legend_handles(ev)
    fig.legend(hs, labs, loc="lower center", ncol=len(labs), fontsize=6, handlelength=3.5, frameon=False)
    tr = cache["mode_stats.tree_trace"].iloc[0] if "mode_stats.tree_trace" in cache else ""
    fig.suptitle(f"MoE expert offload, tree policies (H200 + PCIe; {Path(str(tr)).name})", fontsize=8)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    save_figure(fig, out / "moe_policies_sweep", formats=("png",))
    lines = ["# MoE expert offload: tree policies vs cache capacity and H2D bandwidth", "",
             "Generated by `scripts/plot_moe_sweep.py` from the sweeps `hw_configs/sweeps/moe_cache_capacity.yaml` "
             "and `moe_pcie_bandwidth.yaml`. CIs: the runs' 95% intervals (`throughput_tok_s_ci95_low/high`: "
             "bootstrap over whole windows of rounds).", ""]
    if a.note:
        lines += [a.note, ""]
    lines += ["## vs expert-cache capacity", ""] + eviction_note(cache) + _table(cache, "capacity") + ["", "## vs H2D bandwidth (cache 25%)", ""] \
        + _table(pcie, "GB/s") + [""]
    rec_dir = Path(a.recall)
    if (rec_dir / "results.csv").is_file():
        rec = _load(rec_dir, "moe.predictor_recall", "--recall")
        ref = cache[(cache["run.policy"] == REF) & (cache["x"] == 0.25)]
        if "moe.cache_policy" in ref:
            ref = ref[ref["moe.cache_policy"] == "lru"]
        ref = ref["throughput_tok_s"]
        lines += ["## vs routing-predictor recall (cache 25%)", "",
                  f"eagle_dynamic at cache 25% (needs no predictor): {ref.iloc[0]:.1f} tok/s" if len(ref) else "", "",
                  "| recall | policy | tok/s [95% CI] | accepted/round | H2D GB |", "|---|---|---|---|---|"]
        for _, r in rec.sort_values(["run.policy", "x"]).iterrows():
            lines.append(f"| {r['x']:g} | {r['run.policy']} | {r['throughput_tok_s']:.1f} "
                         f"[{r['throughput_tok_s_ci95_low']:.1f}, {r['throughput_tok_s_ci95_high']:.1f}] | "
                         f"{r['accepted_length_per_round']:.2f} | {r['expert_h2d_bytes'] / 1e9:.2f} |")
        lines.append("")
    (out / "moe_policies_sweep.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
