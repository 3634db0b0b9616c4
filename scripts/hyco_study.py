#!/usr/bin/env python3
"""Mobile-cloud study: TPOT, cloud cost and device energy of every mode vs RTT and vs link trace.

  python scripts/hyco_study.py --traces DIR [--out sweeps/hyco_study] [--workers 2]

Runs the shipped sweep ``hw_configs/sweeps/hyco_rtt.yaml`` (constant-rate LTE link, RTT axis)
and the same variants on the real mahimahi traces found in DIR (RTT 50 ms; pairs
``NAME.up`` + ``NAME.down``, or an uplink-only trace with the constant downlink), then writes

* ``OUT/summary.csv`` -- per (condition, variant): TPOT mean and 95% CI (samples: the TPOT
  windows of every seed), cloud USD per 1k tokens and device J/token (mean, 95% CI over seeds);
* ``OUT/pareto.md`` -- per condition, the variants not dominated in (TPOT, cost, energy);
* the figure (``--figure``, default ``docs/figures/hyco_mobile_cloud.png``) and its data CSV.

The traces are not part of the project (GPL-3.0 data): get them from
https://github.com/ravinet/mahimahi/tree/master/traces (e.g. ``TMobile-LTE-short.up/.down``,
``Verizon-LTE-short.up/.down``, ``ATT-LTE-driving-2016.up/.down``, ``ATT-LTE-driving.up``).
DIR may also come from the environment variable AHASD_SIM_NETWORK_TRACES. Without traces
only the RTT part runs.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import yaml  # noqa: E402

from ahasd_sim.modes.mobile_cloud import mean_ci95  # noqa: E402
from ahasd_sim.output import atomic_write_text  # noqa: E402
from ahasd_sim.sweep import run_sweep  # noqa: E402
from ahasd_sim.sweep.spec import load_sweep_spec  # noqa: E402

RTT_SPEC = ROOT / "hw_configs" / "sweeps" / "hyco_rtt.yaml"
TRACE_PAIRS = ("TMobile-LTE-short", "Verizon-LTE-short", "ATT-LTE-driving-2016")
UP_ONLY = ("ATT-LTE-driving", "TMobile-UMTS-driving", "Verizon-EVDO-driving")
TRACE_KEYS = "network.uplink_trace,network.downlink_trace"


def trace_spec(traces: Path, out: Path) -> Path | None:
    """A sweep file over the traces found in ``traces`` (same variants as the RTT sweep)."""
    rtt = yaml.safe_load(RTT_SPEC.read_text())
    values = []
    for name in TRACE_PAIRS:
        up, down = traces / f"{name}.up", traces / f"{name}.down"
        if up.is_file() and down.is_file():
            values.append([str(up), str(down)])
    for name in UP_ONLY:
        up = traces / f"{name}.up"
        if up.is_file():
            values.append([str(up), ""])
    if not values:
        return None
    spec = {"name": "hyco_traces", "description": "mobile-cloud modes on real mahimahi traces, RTT 50 ms",
            "base": {"config": str(ROOT / "hw_configs" / "hyco_mobile_cloud.yaml"),
                     "set": {**rtt["base"]["set"], "network.rtt_ms": 50.0}},
            "variants": rtt["variants"], "axes": {TRACE_KEYS: values}, "seeds": rtt["seeds"]}
    path = out / "hyco_traces.yaml"
    atomic_write_text(path, yaml.safe_dump(spec, sort_keys=False))
    return path


def _trace_label(cfg: dict) -> str:
    up = Path(cfg["network"]["uplink_trace"]).name
    down = cfg["network"]["downlink_trace"]
    return up.removesuffix(".up") + ("" if down else " (up; const down)")


def collect(sweep_dir: Path, condition: str) -> pd.DataFrame:
    """One row per point: variant, condition value, seed and the metrics (+ TPOT windows)."""
    manifest = pd.read_csv(sweep_dir / "results.csv")
    rows = []
    for _, r in manifest[manifest.status == "ok"].iterrows():
        pdir = sweep_dir / "points" / r.point
        s = json.loads((pdir / "summary.json").read_text())
        cfg = yaml.safe_load((pdir / "config.resolved.yaml").read_text())
        cond = cfg["network"]["rtt_ms"] if condition == "rtt_ms" else _trace_label(cfg)
        n = s["generated_tokens"]
        rows.append({"variant": r.variant, "condition": cond, "seed": r.seed,
                     "tpot_windows": s.get("tpot_window_s") or [s["makespan_s"] / n],
                     "tpot_s": s.get("tpot_s", s["makespan_s"] / n),
                     "cost_usd_per_1k": s.get("cloud_cost_usd_per_1k_tokens", 0.0),
                     "energy_j_per_tok": s.get("device_energy_per_token_j", s["energy_per_token_j"]),
                     "uplink_bytes": s.get("uplink_bytes", 0), "downlink_bytes": s.get("downlink_bytes", 0),
                     "round_trips": s.get("round_trips", 0), "tokens_not_uploaded": s.get("tokens_not_uploaded", 0),
                     "acceptance_rate": s["acceptance_rate"],
                     "rounds_by_option": json.dumps(s.get("mode_stats", {}).get("rounds_by_option", {}))})
    return pd.DataFrame(rows)


def aggregate(df: pd.DataFrame, axis: str) -> pd.DataFrame:
    out = []
    for (variant, cond), g in df.groupby(["variant", "condition"], sort=False):
        tpot, tpot_ci = mean_ci95(np.concatenate([np.asarray(w, float) for w in g.tpot_windows]))
        cost, cost_ci = mean_ci95(g.cost_usd_per_1k)
        e, e_ci = mean_ci95(g.energy_j_per_tok)
        out.append({"axis": axis, "condition": cond, "variant": variant, "seeds": len(g),
                    "tpot_ms": tpot * 1e3, "tpot_ci95_ms": tpot_ci * 1e3,
                    "cloud_usd_per_1k_tokens": cost, "cloud_usd_per_1k_ci95": cost_ci,
                    "device_mj_per_token": e * 1e3, "device_mj_per_token_ci95": e_ci * 1e3,
                    "uplink_kb": g.uplink_bytes.mean() / 1e3, "downlink_kb": g.downlink_bytes.mean() / 1e3,
                    "round_trips": g.round_trips.mean(), "tokens_not_uploaded": g.tokens_not_uploaded.mean(),
                    "acceptance_rate": g.acceptance_rate.mean(), "rounds_by_option_seed0": g.rounds_by_option.iloc[0]})
    return pd.DataFrame(out)


def pareto(agg: pd.DataFrame) -> str:
    """Per condition, the variants not dominated in (TPOT, cloud cost, device energy)."""
    keys = ("tpot_ms", "cloud_usd_per_1k_tokens", "device_mj_per_token")
    lines = ["# Pareto fronts (TPOT, cloud USD per 1k tokens, device mJ per token; lower is better)", "",
             "Mean +- 95% CI (TPOT: over the TPOT windows of all seeds; cost, energy: over seeds).", ""]
    for (axis, cond), g in agg.groupby(["axis", "condition"], sort=False):
        front = []
        for i, a in g.iterrows():
            dominated = any(all(b[k] <= a[k] for k in keys) and any(b[k] < a[k] for k in keys)
                            for j, b in g.iterrows() if j != i)
            if not dominated:
                front.append(a)
        lines += [f"## {axis} = {cond}", "", "| variant | TPOT ms | cloud USD/1k tok | device mJ/tok |",
                  "|---|---|---|---|"]
        for a in sorted(front, key=lambda r: r.tpot_ms):
            lines.append(f"| {a.variant} | {a.tpot_ms:.2f} +- {a.tpot_ci95_ms:.2f} | "
                         f"{a.cloud_usd_per_1k_tokens:.5f} +- {a.cloud_usd_per_1k_ci95:.5f} | "
                         f"{a.device_mj_per_token:.1f} +- {a.device_mj_per_token_ci95:.1f} |")
        lines.append("")
    return "\n".join(lines)


def figure(agg: pd.DataFrame, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    traces = agg[agg.axis == "trace"]
    ncol = 2 if len(traces) else 1
    fig, axes = plt.subplots(2, ncol, figsize=(6.5 * ncol, 7.5), squeeze=False)
    rtt = agg[agg.axis == "rtt_ms"]
    variants = list(dict.fromkeys(agg.variant))
    for v in variants:
        g = rtt[rtt.variant == v].sort_values("condition")
        if g.empty:
            continue
        axes[0][0].errorbar(g.condition, g.tpot_ms, yerr=g.tpot_ci95_ms, marker="o", capsize=3, label=v)
        axes[1][0].errorbar(g.condition, g.cloud_usd_per_1k_tokens * 1e3, yerr=g.cloud_usd_per_1k_ci95 * 1e3,
                            marker="o", capsize=3, label=v)
    for ax, ylab in ((axes[0][0], "TPOT (ms)"), (axes[1][0], "cloud cost (milli-USD / 1k tokens)")):
        ax.set_xscale("log")
        ax.set_xlabel("RTT (ms), constant-rate LTE link 6/13 Mbit/s")
        ax.set_ylabel(ylab)
        ax.grid(alpha=0.3)
    axes[0][0].set_yscale("log")
    if len(traces):
        conds = list(dict.fromkeys(traces.condition))
        x = np.arange(len(conds))
        wdt = 0.8 / len(variants)
        for i, v in enumerate(variants):
            g = traces[traces.variant == v].set_index("condition").reindex(conds)
            axes[0][1].bar(x + i * wdt, g.tpot_ms, wdt, yerr=g.tpot_ci95_ms, capsize=2, label=v)
            axes[1][1].bar(x + i * wdt, g.cloud_usd_per_1k_tokens * 1e3, wdt, yerr=g.cloud_usd_per_1k_ci95 * 1e3,
                           capsize=2, label=v)
        for ax, ylab in ((axes[0][1], "TPOT (ms)"), (axes[1][1], "cloud cost (milli-USD / 1k tokens)")):
            ax.set_xticks(x + 0.4 - wdt / 2, conds, rotation=20, ha="right", fontsize=7)
            ax.set_ylabel(ylab)
            ax.grid(alpha=0.3, axis="y")
        axes[0][1].set_yscale("log")
        axes[0][1].set_title("mahimahi traces, RTT 50 ms", fontsize=9)
    fig.suptitle("Mobile-cloud speculative decoding: LLaMA2-7B drafter (phone NPU+PIM) / LLaMA2-13B target "
                 "(H200), 1024 tokens; error bars 95% CI", fontsize=9)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    fig.savefig(tmp, dpi=130)
    os.replace(tmp, path)
    plt.close(fig)


def parser():
    from ahasd_sim.cli_common import script_parser
    p = script_parser(__doc__.split("\n")[0])
    p.add_argument("--traces", default=os.environ.get("AHASD_SIM_NETWORK_TRACES"),
                   help="folder with mahimahi traces (default: $AHASD_SIM_NETWORK_TRACES)")
    p.add_argument("--out", default=str(ROOT / "sweeps" / "hyco_study"), help="study folder (sweeps inside)")
    p.add_argument("--workers", type=int, default=1, help="parallel worker processes (>= 1)")
    p.add_argument("--figure", default=str(ROOT / "docs" / "figures" / "hyco_mobile_cloud.png"),
                   help="figure path (its data goes next to it as .csv)")
    return p


def body(a) -> int:
    from ahasd_sim.config.errors import InputError
    from ahasd_sim.outdir import check_output_file, check_writable_dir
    if a.workers < 1:
        raise InputError(f"--workers {a.workers}: expected >= 1")
    out = Path(a.out)
    check_writable_dir(out)                       # every output location before any work
    check_output_file(a.figure, flag="--figure")
    tdir = None
    if a.traces:
        tdir = Path(a.traces)
        if not tdir.is_dir():
            raise InputError(f"--traces: '{tdir}' is not a folder")
    frames = []
    run_sweep(load_sweep_spec(RTT_SPEC), out / "rtt", workers=a.workers, progress=False)
    frames.append(aggregate(collect(out / "rtt", "rtt_ms"), "rtt_ms"))
    if tdir is not None:
        spec = trace_spec(tdir, out)
        if spec is None:
            raise InputError(f"--traces: no known mahimahi traces in '{tdir}'")
        run_sweep(load_sweep_spec(spec), out / "traces", workers=a.workers, progress=False)
        frames.append(aggregate(collect(out / "traces", "trace"), "trace"))
    agg = pd.concat(frames, ignore_index=True)
    atomic_write_text(out / "summary.csv", agg.to_csv(index=False))
    atomic_write_text(out / "pareto.md", pareto(agg))
    fig = Path(a.figure)
    figure(agg, fig)
    atomic_write_text(fig.with_suffix(".csv"), agg.to_csv(index=False))
    print(f"wrote {out / 'summary.csv'}, {out / 'pareto.md'}, {fig}")
    return 0


def main(argv=None) -> int:
    from ahasd_sim.cli_common import run_script
    return run_script(parser(), body, argv)


if __name__ == "__main__":
    sys.exit(main())
