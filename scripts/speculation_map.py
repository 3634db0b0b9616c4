#!/usr/bin/env python3
"""Where speculation pays: run a speculation map and write its document.

  python scripts/speculation_map.py --config hw_configs/studies/speculation_map.yaml --workers 2
  python scripts/speculation_map.py --config hw_configs/studies/speculation_map_cheap.yaml --workers 2 --no-docs

Every cell of every plane of the map file runs every decoder of the platform with each of its
tunings (``ahasd_sim.dse.speculation_map``); each decoder's tuning is chosen on the selection
windows and its result reported on the others. Then the ablation ladder (``ladder:``) runs at
the base platform and at the cell where the best speculative decoder gains most over plain
decoding on PIM. Resumable: a rerun reuses every finished simulation in ``--out``.

With the shipped map (``hw_configs/studies/speculation_map.yaml``) and without ``--no-docs`` it
writes docs/studies/speculation_map.md (stamped with the result fingerprint), its tables under
docs/studies/speculation_map/ and its figures under docs/studies/figures/; the README's headline
is then regenerated from them by ``python scripts/docs.py``.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ahasd_sim.cli_common import run_script, script_parser  # noqa: E402

DOC = ROOT / "docs" / "studies" / "speculation_map.md"
TABLES = ROOT / "docs" / "studies" / "speculation_map"
FIGURES = ROOT / "docs" / "studies" / "figures"
SHIPPED = "hw_configs/studies/speculation_map.yaml"


def parser():
    p = script_parser(__doc__.split("\n")[1])
    p.add_argument("--config", default=SHIPPED, help=f"map file (default {SHIPPED})")
    p.add_argument("--workers", type=int, default=2, help="parallel processes (default 2)")
    p.add_argument("--out", default=None, help="folder of the simulations (default studies/<map name>)")
    p.add_argument("--no-docs", action="store_true", help="print the summary only; write no document")
    p.add_argument("--no-progress", action="store_true", help="no progress display")
    return p


def _fmt(v, d=2) -> str:
    import math
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.{d}f}"


def _ci(row, col, d=2) -> str:
    import math
    v, lo, hi = row.get(col), row.get(f"{col}_ci95_low"), row.get(f"{col}_ci95_high")
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if lo is None or (isinstance(lo, float) and math.isnan(lo)):
        return _fmt(v, d)
    return f"{v:.{d}f} [{lo:.{d}f}, {hi:.{d}f}]"


def _md_table(head: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def run_ladders(sm, spec, cells, out: Path, workers: int, progress: bool):
    """The ladder at the base platform and at the best cell; {tag: (cell overrides, table)}."""
    from ahasd_sim.sweep.runner import run_sweep
    if not spec.ladder:
        return {}
    at = {"base": []}
    if "spec_vs_ref" in cells and cells["spec_vs_ref"].notna().any():
        best = cells.loc[cells["spec_vs_ref"].idxmax()]
        ovr = sm.cell_overrides(spec, best)
        if ovr:
            at["best_cell"] = ovr
    res = {}
    for tag, ovr in at.items():
        lspec = sm.ladder_spec(spec, spec.ladder, ovr, tag)
        run_sweep(lspec, out / f"ladder_{tag}", workers=workers, progress=progress)
        res[tag] = (ovr, sm.ladder_table(spec, list(spec.ladder), out / f"ladder_{tag}"))
    return res


def simulation_seconds(out: Path) -> float:
    """Sum of the map's simulations' own wall times (each point's meta.json), whichever invocation
    ran them: the cost of the map on one core, as a reused run would not show it."""
    import json

    import pandas as pd
    total = 0.0
    for results in out.glob("*/results.csv"):         # the points this map uses, not stale folders
        for point in pd.read_csv(results)["point"].dropna().unique():
            try:
                meta = json.loads((results.parent / "points" / str(point) / "meta.json").read_text())
                total += float(meta.get("wall_time_s") or 0.0)
            except (OSError, ValueError):
                continue
    return total


def write_docs(sm, spec, per, cells, ladders, wall_s: float, workers: int, sim_s: float = 0.0) -> None:
    import pandas as pd

    from ahasd_sim import fingerprint
    from ahasd_sim.output import atomic_write, atomic_write_text, git_revision
    from ahasd_sim.plots.region_map import pareto_plot, region_map
    sys.path.insert(0, str(ROOT / "scripts"))
    import docs as docs_script  # noqa: E402

    TABLES.mkdir(parents=True, exist_ok=True)
    labels = {n: d.label for n, d in spec.decoders.items()}
    order = list(spec.decoders)
    pub = sm.public(per)
    front = sm.pareto_rows(per)
    fmt = "%.6g"
    atomic_write(TABLES / "decoders.csv", lambda fh: pub.to_csv(fh, index=False, float_format=fmt))
    atomic_write(TABLES / "cells.csv", lambda fh: cells.to_csv(fh, index=False, float_format=fmt))
    atomic_write(TABLES / "pareto.csv", lambda fh: sm.public(front).to_csv(fh, index=False, float_format=fmt))
    lad_rows = []
    for tag, (ovr, t) in ladders.items():
        t = t.assign(at=tag, cell=" ".join(ovr) or "base platform")
        lad_rows.append(t)
    if lad_rows:
        lad = pd.concat(lad_rows, ignore_index=True)
        atomic_write(TABLES / "ladder.csv", lambda fh: lad.to_csv(fh, index=False, float_format=fmt))
    figs = []
    for pname, plane in spec.planes.items():
        sub = cells[cells["plane"] == pname]
        if plane.axis_cols and not sub.empty:
            region_map(sub, plane.axis_cols, order, labels, FIGURES / f"speculation_map_{pname}", plane.title,
                       plane.labels)
            figs.append((pname, plane.title))
    pareto_plot(sm.public(front), order, labels, FIGURES / "speculation_map_pareto")

    lines = [docs_script.stamp_line(fingerprint.compute()[0], docs_script.STAMPED["docs/studies/speculation_map.md"]),
             "# Where speculation pays on a phone-class NPU + LPDDR5-PIM SoC", ""]
    intro = ROOT / "docs" / "studies" / "intros" / "speculation_map.md"
    if intro.is_file():
        lines += [intro.read_text().rstrip(), ""]
    nw = int(per["report_windows"].dropna().max()) if "report_windows" in per and per["report_windows"].notna().any() \
        else 0
    lines += [f"Made by `python scripts/speculation_map.py --config {_rel(spec.source)} "
              f"--workers {workers}` at revision {git_revision() or 'unknown'}: {wall_s:.0f} s of wall time for this "
              f"invocation (simulations reused from an earlier run count with no time) and {sim_s / 60:.0f} minutes "
              f"of simulation in all (the sum of every simulation's own wall time: the map's cost on one core) "
              f"for {len(cells)} cells x {len(spec.decoders)} decoders. Each decoder's tuning (its drafting policy and draft length) is chosen per cell on "
              f"the first {spec.selection_windows} trace windows of its run; every number below comes from the "
              f"other {nw} windows (ratios of totals; 95% intervals by a percentile bootstrap over whole windows, "
              f"paired between decoders of the same cell). Rank placement is chosen on the tuning trace as in every "
              f"run. Speculation *wins* in a cell when the lower end of the best speculative decoder's interval "
              f"against plain decoding on PIM (`{spec.reference}`) is above 1.", ""]
    wins = cells[cells.get("speculation_wins", pd.Series(dtype=bool)).fillna(False).astype(bool)] \
        if "speculation_wins" in cells else cells.iloc[0:0]
    lines += ["## The answer", ""]
    small = sm.smallest_winning_changes(cells)
    if wins.empty:
        lines += [f"**No cell of this map has a speculative decoder beating {labels[spec.reference]} beyond its "
                  f"interval** ({len(cells)} cells).", ""]
    else:
        lines += [f"Speculation beats {labels[spec.reference]} beyond its interval in **{len(wins)} of {len(cells)} "
                  f"cells**. The smallest change{'s' if len(small) > 1 else ''} to the base platform under which "
                  f"it does ({int(small['n_changed'].iloc[0])} axis/axes changed):", ""]
        lines.append(_md_table(["plane", "changed", "cell", "best speculative", "its tok/s / AR on PIM",
                                "best decoder", "best tok/s"],
                               [[r["plane"], r["changed_from_base"], _cell_text(spec, r), labels.get(r["best_speculative"], ""),
                                 _ci(r, "spec_vs_ref"), labels.get(r["best_decoder"], ""), _ci(r, "best_throughput_tok_s", 1)]
                                for _, r in small.iterrows()]))
        lines.append("")
    for pname, plane in spec.planes.items():
        sub = cells[cells["plane"] == pname]
        if sub.empty:
            continue
        lines += [f"## {plane.title}", ""]
        if any(p == pname for p, _ in figs):
            lines += [f"![{plane.title}](figures/speculation_map_{pname}.png)", ""]
        rows = []
        for _, r in sub.iterrows():
            rows.append([_cell_text(spec, r) or "base", labels.get(r.get("best_decoder"), "none fits"),
                         _ci(r, "best_throughput_tok_s", 1), _ci(r, "best_tokens_per_j", 2),
                         f"{labels.get(r.get('runner_up'), '-')} {_ci(r, 'margin')}",
                         f"{labels.get(r.get('best_speculative'), '-')} {_ci(r, 'spec_vs_ref')}",
                         _ci(r, "ahasd_vs_best"), _fmt(r.get("pim_logic_area_mm2"), 2),
                         (r.get("decoders_failed") or "").replace("|", "/")])
        lines.append(_md_table(["cell", "best decoder", "tok/s", "tok/J", "margin over runner-up",
                                "best speculative / AR on PIM", "AHASD / best", "PIM logic mm^2",
                                "decoders that do not run"], rows))
        lines.append("")
    lines += ["## Pareto front (throughput, tokens/J, PIM logic area)", "",
              "![Pareto front](figures/speculation_map_pareto.png)", "",
              f"{len(front)} (cell, decoder) pairs are on the interval-level front (no other pair's intervals lie "
              "wholly on the better side in every objective): `docs/studies/speculation_map/pareto.csv`.", ""]
    if ladders:
        lines += ["## Ablation ladder", "",
                  "One switch per rung; each rung's ratio is to the rung before it (paired, same windows).", ""]
        for tag, (ovr, t) in ladders.items():
            lines += [f"At {'the base platform' if tag == 'base' else 'the best cell (' + ' '.join(ovr) + ')'}:", ""]
            rows = []
            for _, r in t.iterrows():
                rows.append([r["rung"], " ".join(spec.ladder[r["rung"]]) or "-", _ci(r, "throughput_tok_s", 2),
                             _ci(r, "tokens_per_j", 2), _ci(r, "vs_previous"), _ci(r, "vs_previous_tok_j"),
                             r.get("error", "") if r.get("status") != "ok" else ""])
            lines.append(_md_table(["rung", "overrides", "tok/s", "tok/J", "tok/s vs previous rung",
                                    "tok/J vs previous rung", "error"], rows))
            lines.append("")
    atomic_write_text(DOC, "\n".join(lines).rstrip() + "\n")


def _rel(path: Path) -> str:
    p = Path(path).resolve()
    try:
        return p.relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def _cell_text(spec, r) -> str:
    import math
    plane = spec.planes[r["plane"]]
    parts = []
    for col, _keys in plane.axis_keys():
        v = r.get(col)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        parts.append(f"{plane.labels.get(col, col)}={v}")
    return ", ".join(parts)


def main(args) -> int:
    from ahasd_sim.config.errors import InputError
    from ahasd_sim.dse import speculation_map as sm
    if args.workers < 1:
        raise InputError(f"--workers: expected an integer >= 1, got {args.workers}")
    spec = sm.load_map_spec(args.config)
    out = Path(args.out) if args.out else Path("studies") / spec.name
    t0 = time.perf_counter()
    sm.run_map(spec, out, workers=args.workers, progress=not args.no_progress)
    per, cells = sm.analyse(spec, out)
    ladders = run_ladders(sm, spec, cells, out, args.workers, not args.no_progress)
    wall = time.perf_counter() - t0
    wins = int(cells["speculation_wins"].fillna(False).astype(bool).sum()) if "speculation_wins" in cells else 0
    print(f"speculation map {spec.name}: {len(cells)} cells, speculation wins in {wins}; {wall:.0f} s")
    for _, r in sm.smallest_winning_changes(cells).iterrows():
        print(f"  smallest change: {r['plane']}: {_cell_text(spec, r)} -> {r['best_speculative']} "
              f"{_ci(r, 'spec_vs_ref')}x AR on PIM")
    if not args.no_docs:
        write_docs(sm, spec, per, cells, ladders, wall, args.workers, simulation_seconds(out))
        print(f"  wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(run_script(parser(), main))
