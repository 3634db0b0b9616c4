#!/usr/bin/env python3
"""Regenerate the result blocks of README.md and docs/ from the code at HEAD.

A generated block is delimited by ``<!-- generated: NAME (COMMAND) -->`` and
``<!-- end generated: NAME -->``; everything between the two lines is replaced by what the
block's generator computes now. Never hand-edit inside a block.

Blocks:
  default-run   the default job's printed summary (`python -m ahasd_sim --config hw_configs/ahasd_mobile.yaml`)
  compare       `python -m ahasd_sim compare --config hw_configs/ahasd_mobile.yaml` (every decoder vs the best)
  mobile-validation  `python -m ahasd_sim validate --mobile` (docs/validation.md: the phone NPU model
                against validation/mobile/measured.csv)
  moe-baselines docs/moe_offload.md: every tuned family per setting and expert awareness's margin, from the
                committed docs/moe-offload/moe_baselines.csv (python scripts/moe_study.py)
  moe-validation  docs/moe_offload.md: `python -m ahasd_sim validate --moe`
  headline      the README's headline ratios, from the committed reproduction
                (docs/reproduction/windows.csv and regimes_windows.csv, written by --reproduction)
  study         the README's summary of the committed where_ahasd_wins study
  peers-*       docs/validation.md's peer tables (`python -m ahasd_sim validate --peers`)
  validate-h200 docs/validation.md's GPU-vs-H200 summary (`python -m ahasd_sim validate`, runs 1 and 2)
  pim-timing-effect  docs/validation.md: the default job's compare under pim.gemv_timing roofline
                and command_sequence
  hyco-study    docs/mobile_cloud.md's tables, from the committed docs/studies/hyco/windows.csv
                (written by `python scripts/hyco_study.py`, which also regenerates both hyco blocks)
  hyco-smoke    docs/mobile_cloud.md's cheap part: a fresh 2-window x 128-token run of every mode

Blocks too slow to regenerate here (the paper reproduction, the studies) carry a stamp
``<!-- fingerprint: HASH (COMMAND) -->``: the result fingerprint (ahasd_sim.fingerprint, a
hash of small reference runs) of the code they were made with. ``--check`` fails when a stamp
is not the current fingerprint, so a change that moves results cannot land with stale docs.

Usage:
  python scripts/docs.py                      # rewrite every block in place (atomically)
  python scripts/docs.py --fingerprint        # print the current result fingerprint
  python scripts/docs.py --stamp FILE --made-by "COMMAND"   # stamp FILE with the current fingerprint
  python scripts/docs.py --check              # exit 1 and name the stale blocks, change nothing
  python scripts/docs.py --only headline      # some blocks
  python scripts/docs.py --reproduction DIR   # first copy a scripts/reproduce_paper.py output folder
                                              # (report.md, windows.csv, regimes*.csv, figures/) into
                                              # docs/reproduction/, then rewrite the blocks
"""
from __future__ import annotations

import io
import re
import shutil
import sys
import tempfile
from contextlib import redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ahasd_sim.cli_common import run_script, script_parser  # noqa: E402
from ahasd_sim.config.errors import InputError  # noqa: E402
from ahasd_sim.output import atomic_write_text, git_revision  # noqa: E402

DOC_FILES = [ROOT / "README.md"]
REPRO = ROOT / "docs" / "reproduction"
STAMP = re.compile(r"^<!-- fingerprint: (?P<hash>[0-9a-f]{16}) \((?P<cmd>[^)]*)\) -->$", re.M)
#: the documents made by runs too slow for CI, which must carry a stamp: one regenerated without
#: it (publish_study.py writes the study page afresh) would otherwise pass --check unchecked
STAMPED = {
    "docs/mobile_cloud.md": "python scripts/hyco_study.py",
    "docs/moe-offload/moe_baselines.md": "python scripts/moe_study.py",
    "docs/reproduction/report.md": "python scripts/reproduce_paper.py; python scripts/docs.py --reproduction DIR",
    "docs/studies/where_ahasd_wins.md": "docs/studies/intros/where_ahasd_wins.md lists the commands",
    "docs/studies/sustained_phone.md": "python scripts/sustained_study.py",
    "docs/studies/modern_speculation.md": "python scripts/study_modern_speculation.py",
    "docs/studies/pim_microarchitecture.md": "python scripts/pim_microarchitecture_study.py",
    "docs/studies/speculation_map.md": "python scripts/speculation_map.py",
}
BEGIN = re.compile(r"^<!-- generated: (?P<name>[a-z0-9-]+) \((?P<cmd>[^)]*)\) -->$")


def _cli(argv: list[str]) -> str:
    from ahasd_sim.__main__ import main
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(argv)
    from ahasd_sim.cli_common import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated
    # a stop signal the inner command handled ends this command the same way (130 / 143), not as
    # bad input (2)
    if rc == EXIT_TERMINATED:
        raise Terminated("SIGTERM")
    if rc == EXIT_INTERRUPTED:
        raise KeyboardInterrupt
    if rc != 0:
        raise InputError(f"docs: `python -m ahasd_sim {' '.join(argv)}` exited {rc}")
    return buf.getvalue()


def block_default_run() -> str:
    with tempfile.TemporaryDirectory() as d:
        out = _cli(["--config", str(ROOT / "hw_configs" / "ahasd_mobile.yaml"), "--out", str(Path(d) / "run")])
    lines = [ln for ln in out.splitlines() if not ln.strip().startswith("results")]   # a temporary folder
    return "```\n" + "\n".join(lines).rstrip() + "\n```"


def block_compare() -> str:
    with tempfile.TemporaryDirectory() as d:
        out = _cli(["compare", "--config", str(ROOT / "hw_configs" / "ahasd_mobile.yaml"),
                    "--out", str(Path(d) / "cmp")])
    lines = [ln for ln in out.splitlines() if not ln.strip().startswith("results")]
    return "```\n" + "\n".join(lines).rstrip() + "\n```"


def block_mobile_validation() -> str:
    out = _cli(["validate", "--mobile"])
    return "```\n" + out.rstrip() + "\n```"


def block_headline() -> str:
    import pandas as pd
    from ahasd_sim.paper import report
    from ahasd_sim.paper.experiments import load_experiments
    wt_path, reg_path = REPRO / "windows.csv", REPRO / "regimes_windows.csv"
    for p in (wt_path, reg_path):
        if not p.is_file():
            raise InputError(f"docs: {p} is missing; run scripts/reproduce_paper.py and "
                             "`python scripts/docs.py --reproduction DIR` first")
    exp = load_experiments()
    wt = report.with_best_variants(exp, pd.read_csv(wt_path))

    def cell(num, den, metric):
        return report.ratio_cell(wt, num, den, metric)

    def per(num, den, metric):
        return report.range_cell(wt, num, den, metric)
    _m, _ci, n, k = report.paired_ratio(wt, "ahasd", "best_soc", "throughput_tok_s")
    rows = report.regime_rows(exp, pd.read_csv(reg_path))
    bt = sum(r["beats_best"][0] for r in rows)
    be = sum(r["beats_best"][1] for r in rows)
    both = sum(r["beats_best_on_both"] for r in rows)
    text = (
        f"On the AHASD paper's own platform (NPU + 16-rank LPDDR5-PIM, PIM rates derived from the memory), with every "
        f"competitor given its best decoder and rank placement, AHASD reaches "
        f"**{cell('ahasd', 'best_soc', 'throughput_tok_s')}x the throughput and "
        f"{cell('ahasd', 'best_soc_eff', 'tokens_per_j')}x the energy efficiency of the best decoder of the same "
        f"hardware** (per configuration {per('ahasd', 'best_soc', 'throughput_tok_s')} and "
        f"{per('ahasd', 'best_soc_eff', 'tokens_per_j')}; which decoder is best, per model pair and algorithm: "
        f"{report.best_choices(exp, wt, 'best_soc')} by throughput, {report.best_choices(exp, wt, 'best_soc_eff')} "
        f"by tokens/J), "
        f"{cell('ahasd', 'operator_sync', 'throughput_tok_s')}x / {cell('ahasd', 'operator_sync', 'tokens_per_j')}x "
        f"operator_sync on the same hardware, and {cell('ahasd', 'best_gpu', 'throughput_tok_s')}x / "
        f"{cell('ahasd', 'best_gpu_eff', 'tokens_per_j')}x the best RTX 4090 Laptop decoder (per configuration "
        f"{per('ahasd', 'best_gpu', 'throughput_tok_s')} / {per('ahasd', 'best_gpu_eff', 'tokens_per_j')}) "
        f"(throughput / tokens per joule; ratios of the suite's total tokens / total decode time or energy over "
        f"the {k} configurations (3 model pairs x 4 drafting algorithms), 95% CIs by a paired bootstrap of whole "
        f"windows stratified by configuration, {n // k if k else 0} windows each). Over the {len(rows)} regimes "
        f"of the regimes sweep "
        f"(PIM rates derived from the memory, or Table 2's typed compute and bandwidth read per unit or as the "
        f"device total; host/PIM contention on or off; LLaMA2 pair, AdaEDL) AHASD's interval lies above the "
        f"best decoder's on throughput in {bt}, on "
        f"tokens/J in {be} and on both in {both}. The paper reports 3.8x the throughput and 5.2x the energy "
        f"efficiency of GPU-only.")
    return text


def block_study() -> str:
    """The README's summary of the committed where_ahasd_wins study (docs/studies/*_trials.csv,
    *_sobol.csv): winners by mean and by interval, the interval-level front, the largest Sobol ST."""
    import numpy as np
    import pandas as pd

    from ahasd_sim.metrics.pareto import ci_pareto_mask
    f = ROOT / "docs" / "studies" / "where_ahasd_wins_trials.csv"
    if not f.is_file():
        raise InputError(f"docs: {f} is missing; publish the study first (docs/studies/intros/where_ahasd_wins.md)")
    t = pd.read_csv(f)
    ok = t[t["status"] == "ok"]
    objs = ["throughput_ratio", "energy_efficiency_ratio"]
    both = ok[(ok[objs[0]] > 1) & (ok[objs[1]] > 1)]
    from ahasd_sim.plots.pareto import interval_bounds
    bounds = np.stack([np.c_[tuple(interval_bounds(ok, o)[e] for o in objs)] for e in (0, 1)], axis=-1)
    sure = (bounds[..., 0] > 1).all(axis=1)          # NaN (no interval): not sure
    # the interval-level front (an older trials.csv has no pareto_ci column: computed the same way)
    cfront = ok["pareto_ci"].astype(bool).to_numpy() if "pareto_ci" in ok else \
        ci_pareto_mask(ok[objs].to_numpy(), bounds, ["maximize", "maximize"])
    front = ok[ok["pareto"] == True]  # noqa: E712
    pts = "; ".join(f"{r.throughput_ratio:.2f}x throughput at {r.energy_efficiency_ratio:.2f}x energy efficiency"
                    for r in front.drop_duplicates(objs).sort_values(objs[0], ascending=False).itertuples())
    text = (f"With per-mode placement AHASD beats operator_sync on both throughput and energy efficiency at "
            f"**{len(both)}** of the {len(ok)} design points of the search by the mean over windows, and at "
            f"**{int(sure.sum())}** with both 95% intervals above 1. {int(np.sum(cfront))} designs are on the "
            f"interval-level Pareto front (no design beats them with non-overlapping intervals); the front of "
            f"the means: {pts}; median ratios {ok[objs[0]].median():.2f} and {ok[objs[1]].median():.2f}.")
    sf = ROOT / "docs" / "studies" / "where_ahasd_wins_sobol.csv"
    if sf.is_file():
        sob = pd.read_csv(sf)
        parts = []
        for o in objs:
            r = sob[sob["objective"] == o].sort_values("ST", ascending=False).iloc[0]
            lo, hi = (r.ST_ci95_low, r.ST_ci95_high) if "ST_ci95_low" in sob else (r.ST - r.ST_conf, r.ST + r.ST_conf)
            parts.append(f"`{r.parameter}` for {o} (ST {r.ST:.2f} [{lo:.2f}, {hi:.2f}])")
        text += " Largest total Sobol index: " + "; ".join(parts) + "."
    return text


def block_map_headline() -> str:
    """The README's headline: where speculation beats plain decoding on PIM, from the committed
    speculation map (docs/studies/speculation_map/cells.csv, written by scripts/speculation_map.py)."""
    import math

    import pandas as pd
    f = ROOT / "docs" / "studies" / "speculation_map" / "cells.csv"
    if not f.is_file():
        raise InputError(f"docs: {f} is missing; run python scripts/speculation_map.py first")
    cells = pd.read_csv(f)
    k_col = "pim.vectors_per_weight_read"

    def num(v):
        return int(v) if isinstance(v, float) and v.is_integer() else v

    def ci(r, col, d=2):
        v, lo, hi = r.get(col), r.get(f"{col}_ci95_low"), r.get(f"{col}_ci95_high")
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "n/a"
        if lo is None or (isinstance(lo, float) and math.isnan(lo)):
            return f"{v:.{d}f}"
        return f"{v:.{d}f} [{lo:.{d}f}, {hi:.{d}f}]"

    def k_of(r):
        v = r.get(k_col)
        return 1 if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)

    def others(r):
        """The changed axes other than k, as 'name value' (the platform preset by its name)."""
        cols = [c for c in str(r["changed_from_base"]).split(";") if c and c != k_col]
        out = []
        for c in cols:
            if c == "platform":
                out.append(f"the {r['platform']} preset")
            elif c in r.index:
                out.append(f"{c.split('.')[-1].replace('_', ' ')} {num(r[c])}")
        return " and ".join(out)

    wins = cells[cells["speculation_wins"].fillna(False).astype(bool)]
    planes = cells["plane"].nunique()
    text = (f"**Where speculation pays.** Over the {len(cells)} cells of the speculation map ({planes} planes of "
            f"the design space; every decoder of the platform in every cell, each with its own rank placement and "
            f"its drafting policy chosen on held-out trace windows), a speculative decoder beats plain decoding on "
            f"PIM beyond its 95% interval in **{len(wins)}** cells")
    if not len(wins):
        text += ": in none."
    else:
        one_vector = int(sum(k_of(r) == 1 for _, r in wins.iterrows()))
        text += (f", {'none' if one_vector == 0 else one_vector} of them with the paper's one-vector PIM units "
                 f"(k = 1). The smallest changes to the paper's platform under which it does "
                 f"({int(wins['n_changed'].min())} at once): ")
        fewest = wins[wins["n_changed"] == wins["n_changed"].min()]
        groups: dict[str, list] = {}
        for _, r in fewest.iterrows():
            groups.setdefault(others(r), []).append(r)
        parts = []
        for what, rows in sorted(groups.items(), key=lambda kv: min(k_of(r) for r in kv[1])):
            best = max(rows, key=lambda r: r["spec_vs_ref"])
            kmin = min(k_of(r) for r in rows)
            parts.append(f"{what or 'nothing else'} with PIM input-vector slots k >= {kmin} "
                         f"({best['best_speculative_label']} up to {ci(best, 'spec_vs_ref')}x AR on PIM)")
        text += "; ".join(parts) + "."
    base = cells[cells["n_changed"] == 0]
    if len(base):
        b = base.iloc[0]
        text += (f" On the AHASD paper's own platform the best decoder is {b['best_decoder_label']} "
                 f"({ci(b, 'best_throughput_tok_s', 1)} tok/s) and AHASD reaches {ci(b, 'ahasd_vs_best')}x of it "
                 f"(the paper reproduction below). Region maps, the Pareto front and the ablation ladder: "
                 f"[docs/studies/speculation_map.md](docs/studies/speculation_map.md).")
    return text


_PEER_SECTIONS = {            # block name -> first words of its table's title in `validate --peers`
    "peers-npu": "NPU GEMM cycles vs SCALE-Sim",
    "peers-lpddr5": "LPDDR5-6400 x16 vs Ramulator 2",
    "peers-pim": "PIM GEMV time vs the AiM simulator",
    "peers-pim-contention": "PIM GEMV 4096x4096 on 4 channels",
    "peers-gpu": "GPU step latency (H200",
    "peers-h2d": "H2D pinned copies",
}


def _peer_tables(cache: dict = {}) -> dict[str, str]:      # noqa: B006 (one run per process)
    """`python -m ahasd_sim validate --peers`, split into its tables (a title line at column 0)."""
    if not cache:
        text = _cli(["validate", "--peers"])
        sections, title = {}, None
        for ln in text.splitlines():
            if ln and not ln.startswith(" "):
                title = ln
                sections[title] = [ln]
            elif title is not None:
                sections[title].append(ln)
        for name, head in _PEER_SECTIONS.items():
            hits = [t for t in sections if t.startswith(head)]
            if len(hits) != 1:
                raise InputError(f"docs: block '{name}': `validate --peers` printed {len(hits)} tables titled '{head}...'")
            cache[name] = "```\n" + "\n".join(sections[hits[0]]).rstrip() + "\n```"
    return cache


def _peer_block(name: str):
    return lambda: _peer_tables()[name]


def block_validate_h200() -> str:
    """The summary of `python -m ahasd_sim validate` (GPU model vs the H200 measurements, run 1)
    and of the same against run 2 (out-of-sample): every line but the per-point table."""
    out = []
    for extra, label in (([], "run 1 (h200_measured.csv, the fit's data: in-sample)"),
                         (["--measured", "validation/h200_repeat.csv"], "run 2 (h200_repeat.csv: out-of-sample)")):
        text = _cli(["validate", *extra])
        lines = text.splitlines()
        start = next(i for i, ln in enumerate(lines) if ln.startswith("Median absolute error"))
        out += [f"# {label}", *lines[start:]]
    return "```\n" + "\n".join(out).rstrip() + "\n```"


def block_pim_timing_effect() -> str:
    """The default job's compare under the v0.1 PIM roofline and under the command sequence."""
    rows = []
    for timing in ("roofline", "command_sequence"):
        with tempfile.TemporaryDirectory() as d:
            out = _cli(["compare", "--config", str(ROOT / "hw_configs" / "ahasd_mobile.yaml"),
                        "--out", str(Path(d) / "cmp"), "--set", f"pim.gemv_timing={timing}"])
        rows += [f"# pim.gemv_timing: {timing}"] + [ln for ln in out.splitlines()
                                                     if not ln.strip().startswith("results")]
    return "```\n" + "\n".join(rows).rstrip() + "\n```"


def _hyco():
    import importlib.util
    spec = importlib.util.spec_from_file_location("hyco_study_script", ROOT / "scripts" / "hyco_study.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def block_hyco_study() -> str:
    return _hyco().study_block()


def block_hyco_smoke() -> str:
    return _hyco().render_smoke()


def block_moe_baselines() -> str:
    """docs/moe_offload.md: every tuned family per setting, from the committed
    docs/moe-offload/moe_baselines.csv (scripts/moe_study.py), and per setting whether expert
    awareness (SpecFit, EcoSpec) adds a margin over expert-blind SpecFit beyond its interval."""
    import pandas as pd
    f = ROOT / "docs" / "moe-offload" / "moe_baselines.csv"
    if not f.is_file():
        raise InputError(f"docs: {f} is missing; run python scripts/moe_study.py first")
    t = pd.read_csv(f)
    blind = "vs_expert_blind" in t.columns
    out = []
    for setting, g in t.groupby("setting", sort=False):
        g = g.set_index("row")
        b = g.best_baseline.iloc[0]
        synthetic = "routing" in g.columns and g.routing.iloc[0] == "synthetic"

        def ci(r, col, d=3):
            x = g.loc[r]
            return f"{x[col]:.{d}f} [{x[col + '_ci95_low']:.{d}f}, {x[col + '_ci95_high']:.{d}f}]"
        out.append(f"**{setting}**{' (ROUTING IS SYNTHETIC)' if synthetic else ''} -- best baseline (chosen on "
                   f"tuning rounds {g.tuning_rounds.iloc[0]}): {b}")
        out.append("")
        head = "| row | config | tok/s [95% CI] | vs best baseline [95% CI] |" + (" vs expert-blind [95% CI] |" if blind else "")
        out.append(head + " nodes | accepted/pass | H2D GB | hit rate |")
        out.append("|---|---|---|---|" + ("---|" if blind else "") + "---|---|---|---|")
        for r in g.index:
            x = g.loc[r]
            tput = f"{x.throughput_tok_s:.1f} [{x.ci95_low:.1f}, {x.ci95_high:.1f}]"
            out.append(f"| {r} | {x.config} | {tput} | {ci(r, 'vs_best_baseline')} |"
                       + (f" {ci(r, 'vs_expert_blind')} |" if blind else "")
                       + f" {x.nodes_verified:.1f} | {x.accepted_per_round:.2f} | {x.expert_h2d_gb:.1f} | {x.hit_rate:.3f} |")
        if blind:
            verdicts = []
            for r in ("specfit_tuned", "ecospec_tuned"):
                if r not in g.index:
                    continue
                x = g.loc[r]
                lo, hi = x.vs_expert_blind_ci95_low, x.vs_expert_blind_ci95_high
                if lo > 1:
                    v = f"adds {100 * (x.vs_expert_blind - 1):.1f}% [{100 * (lo - 1):.1f}, {100 * (hi - 1):.1f}]"
                elif hi < 1:
                    v = f"loses {100 * (1 - x.vs_expert_blind):.1f}% [{100 * (1 - hi):.1f}, {100 * (1 - lo):.1f}]"
                else:
                    v = "no margin beyond its interval"
                verdicts.append(f"{r}: {v}")
            out.append("")
            out.append("Expert awareness vs tuned expert-blind SpecFit: " + "; ".join(verdicts) + ".")
        out.append("")
    t0 = t.iloc[0]
    out.append(f"Reported rounds {t0.reported_rounds} ({int(t0.windows)} windows), profile rounds {t0.profile_rounds}; "
               f"throughput = total tokens / total time; 95% intervals by resampling whole windows (4000 "
               f"resamples), paired for the ratios.")
    return "\n".join(out).rstrip()


def block_moe_validation() -> str:
    out = _cli(["validate", "--moe"])
    return "```\n" + out.rstrip() + "\n```"


GENERATORS = {"default-run": block_default_run, "compare": block_compare, "headline": block_headline,
              "map-headline": block_map_headline,
              "study": block_study, "mobile-validation": block_mobile_validation,
              "validate-h200": block_validate_h200, "pim-timing-effect": block_pim_timing_effect,
              "hyco-study": block_hyco_study, "hyco-smoke": block_hyco_smoke,
              "moe-baselines": block_moe_baselines, "moe-validation": block_moe_validation,
              **{name: _peer_block(name) for name in _PEER_SECTIONS}}


def render(text: str, only: set[str] | None, cache: dict[str, str]) -> tuple[str, list[str]]:
    """``text`` with every (selected) block regenerated; the names of the blocks that changed."""
    out, changed = [], []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = BEGIN.match(lines[i])
        out.append(lines[i])
        if not m:
            i += 1
            continue
        name = m["name"]
        end = f"<!-- end generated: {name} -->"
        try:
            j = lines.index(end, i + 1)
        except ValueError:
            raise InputError(f"docs: block '{name}' has no line '{end}'") from None
        old = "\n".join(lines[i + 1:j])
        if name not in GENERATORS:
            raise InputError(f"docs: unknown block '{name}'; known: {', '.join(GENERATORS)}")
        if only is None or name in only:
            if name not in cache:
                cache[name] = GENERATORS[name]()
            new = cache[name]
            if new != old:
                changed.append(name)
            out.append(new)
        else:
            out.append(old)
        out.append(end)
        i = j + 1
    return "\n".join(out), changed


def copy_reproduction(src: Path) -> None:
    src = Path(src)
    for f in ("report.md", "windows.csv", "regimes.csv", "regimes_windows.csv"):
        if not (src / f).is_file():
            raise InputError(f"docs: --reproduction {src}: {f} is missing (not a reproduce_paper.py output folder?)")
    REPRO.mkdir(parents=True, exist_ok=True)
    report = (src / "report.md").read_text()
    from ahasd_sim import fingerprint
    fp, _ = fingerprint.compute()
    header = (stamp_line(fp, STAMPED["docs/reproduction/report.md"])
              + f"> Generated by `python scripts/reproduce_paper.py` at revision {git_revision() or 'unknown'} "
              f"(result fingerprint {fp}) and copied here by `python scripts/docs.py --reproduction DIR`; "
              f"regenerate both at the commit that changes a number (`python scripts/docs.py --check` fails "
              f"until then).\n\n")
    atomic_write_text(REPRO / "report.md", header + report.replace(str(src) + "/", "results/paper/"))
    for f in ("windows.csv", "regimes.csv", "regimes_windows.csv"):
        shutil.copyfile(src / f, REPRO / f)
    if (src / "figures").is_dir():
        dst = REPRO / "figures"
        if dst.is_dir():
            shutil.rmtree(dst)
        shutil.copytree(src / "figures", dst)


def parser():
    p = script_parser(__doc__.split("\n")[1])
    p.add_argument("--check", action="store_true", help="report stale blocks (exit 1), change nothing")
    p.add_argument("--only", default=None, help="comma-separated block names")
    p.add_argument("--reproduction", default=None, metavar="DIR",
                   help="copy a reproduce_paper.py output folder into docs/reproduction first")
    p.add_argument("--fingerprint", action="store_true", help="print the current result fingerprint and exit")
    p.add_argument("--stamp", default=None, metavar="FILE", help="stamp FILE (first line) with the current fingerprint")
    p.add_argument("--made-by", default=None, metavar="COMMAND", help="with --stamp: the command that made FILE")
    return p


def stamp_line(fp: str, made_by: str) -> str:
    """The first line of a stamped document (what :data:`STAMP` reads back)."""
    return f"<!-- fingerprint: {fp} ({made_by}) -->\n"


def stamp_file(path: Path, fp: str, made_by: str) -> None:
    if not path.is_file():
        raise InputError(f"docs: --stamp {path}: no such file")
    if not made_by or ")" in made_by:
        raise InputError("docs: --stamp needs --made-by COMMAND (without ')')")
    text = STAMP.sub("", path.read_text()).lstrip("\n")
    atomic_write_text(path, stamp_line(fp, made_by) + text)


def stale_stamps(fp: str) -> list[str]:
    """Docs whose fingerprint stamp is not ``fp``, and the :data:`STAMPED` ones without a stamp."""
    out = []
    for name, made_by in STAMPED.items():
        f = ROOT / name
        if not f.is_file():
            out.append(f"{name}: listed in STAMPED but missing")
        elif not STAMP.search(f.read_text()):
            out.append(f"{name}: no fingerprint stamp (rerun: {made_by}; then python scripts/docs.py --stamp "
                       f"{name} --made-by \"{made_by}\")")
    for f in [*DOC_FILES, *sorted((ROOT / "docs").rglob("*.md"))]:
        for m in STAMP.finditer(f.read_text()):
            if m["hash"] != fp:
                out.append(f"{f.relative_to(ROOT)}: made at fingerprint {m['hash']} (rerun: {m['cmd']})")
    return out


def main(args) -> int:
    from ahasd_sim import fingerprint
    if args.fingerprint:
        print(fingerprint.compute()[0])
        return 0
    if args.stamp:
        stamp_file(Path(args.stamp), fingerprint.compute()[0], args.made_by)
        return 0
    only = set(args.only.split(",")) if args.only else None
    if only and not only <= set(GENERATORS):
        raise InputError(f"docs: --only: unknown block(s) {', '.join(sorted(only - set(GENERATORS)))}; "
                         f"known: {', '.join(GENERATORS)}")
    if args.reproduction:
        if args.check:
            raise InputError("docs: --reproduction and --check exclude each other")
        copy_reproduction(Path(args.reproduction))
    cache: dict[str, str] = {}
    stale = []
    for f in DOC_FILES + sorted((ROOT / "docs").glob("*.md")):
        text = f.read_text()
        new, changed = render(text, only, cache)
        if changed:
            stale += [f"{f.relative_to(ROOT)}: {c}" for c in changed]
            if not args.check:
                atomic_write_text(f, new)
    if args.check and only is None:
        stale += stale_stamps(fingerprint.compute()[0])
    if args.check:
        if stale:
            print("stale generated blocks (run python scripts/docs.py):\n  " + "\n  ".join(stale))
            return 1
        print("every generated block is current")
        return 0
    print("\n".join(f"regenerated {s}" for s in stale) or "every generated block was current")
    return 0


if __name__ == "__main__":
    sys.exit(run_script(parser(), main))
