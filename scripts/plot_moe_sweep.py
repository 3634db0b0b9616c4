#!/usr/bin/env python3
"""Figure + table of the MoE expert-offload sweeps.

Reads the results tables of ``hw_configs/sweeps/moe_cache_capacity.yaml`` and
``moe_pcie_bandwidth.yaml`` (run them first with ``python -m ahasd_sim sweep``) and writes

* ``<out>/moe_policies_sweep.png``: throughput (tok/s, 95% CI over windows as error bars) of each
  tree policy vs expert-cache capacity and vs H2D bandwidth;
* ``<out>/moe_policies_sweep.md``: the numbers, SpecFit's gain over the acceptance-maximising
  selection (eagle_dynamic) at every point, accepted length per round and H2D GB.

    python scripts/plot_moe_sweep.py --cache sweeps/moe_cache_capacity --pcie sweeps/moe_pcie_bandwidth \
        --out docs/moe-offload
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

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


def _panel(ax, df, xlabel, log=False):
    evictions = sorted(df["moe.cache_policy"].unique(), key=lambda e: ("lru", "lfu", "static").index(e)) \
        if "moe.cache_policy" in df else [None]
    colors = {}
    for ev, style in zip(evictions, ("-", "--", ":")):
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
            lab = pol if ev is None else f"{pol} ({ev})"
            h = ax.errorbar(sub["x"], y, yerr=err, marker="o", ms=3, capsize=2, ls=style, label=lab,
                            color=colors.get(pol))
            colors.setdefault(pol, h.lines[0].get_color())
    ax.set_xlabel(xlabel)
    ax.set_ylabel("throughput (tok/s)")
    if log:
        ax.set_xscale("log", base=2)
    ax.grid(alpha=0.3)


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
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    _panel(axes[0], cache, "expert-cache capacity (fraction of all experts; solid LRU, dashed LFU)")
    _panel(axes[1], pcie, "H2D bandwidth (GB/s), cache 25%", log=True)
    axes[0].legend(fontsize=6, ncol=2)
    tr = cache["mode_stats.tree_trace"].iloc[0] if "mode_stats.tree_trace" in cache else ""
    fig.suptitle(f"MoE expert offload, tree policies (H200 + PCIe; {Path(str(tr)).name})", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "moe_policies_sweep.png", dpi=130)
    lines = ["# MoE expert offload: tree policies vs cache capacity and H2D bandwidth", "",
             "Generated by `scripts/plot_moe_sweep.py` from the sweeps `hw_configs/sweeps/moe_cache_capacity.yaml` "
             "and `moe_pcie_bandwidth.yaml`. CIs: 95% t-intervals over windows of rounds.", ""]
    if a.note:
        lines += [a.note, ""]
    lines += ["## vs expert-cache capacity", ""] + _table(cache, "capacity") + ["", "## vs H2D bandwidth (cache 25%)", ""] \
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
