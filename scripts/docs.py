#!/usr/bin/env python3
"""Regenerate the result blocks of README.md and docs/ from the code at HEAD (issues 23, 31).

A generated block is delimited by ``<!-- generated: NAME (COMMAND) -->`` and
``<!-- end generated: NAME -->``; everything between the two lines is replaced by what the
block's generator computes now. Never hand-edit inside a block.

Blocks:
  default-run   the default job's printed summary (`python -m ahasd_sim --config hw_configs/ahasd_mobile.yaml`)
  compare       `python -m ahasd_sim compare --config hw_configs/ahasd_mobile.yaml` (every decoder vs the best)
  moe-baselines docs/moe_offload.md: SpecFit / EcoSpec vs tuned baselines per setting, from the
                committed docs/moe-offload/moe_baselines.csv (python scripts/moe_study.py)
  moe-validation  docs/moe_offload.md: `python -m ahasd_sim validate --moe`
  headline      the README's headline ratios, from the committed reproduction
                (docs/reproduction/windows.csv and regimes_windows.csv, written by --reproduction)

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
BEGIN = re.compile(r"^<!-- generated: (?P<name>[a-z0-9-]+) \((?P<cmd>[^)]*)\) -->$")


def _cli(argv: list[str]) -> str:
    from ahasd_sim.__main__ import main
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = main(argv)
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


def block_headline() -> str:
    import pandas as pd
    from ahasd_sim.sweep import paper
    wt_path, reg_path = REPRO / "windows.csv", REPRO / "regimes_windows.csv"
    for p in (wt_path, reg_path):
        if not p.is_file():
            raise InputError(f"docs: {p} is missing; run scripts/reproduce_paper.py and "
                             "`python scripts/docs.py --reproduction DIR` first")
    wt = paper.with_best_variants(pd.read_csv(wt_path))
    r = paper.window_ratios

    def cell(num, den, metric):
        return paper.ci_cell(r(wt, num, den, metric))
    n = len(r(wt, "ahasd", "best_soc", "throughput_tok_s"))
    rows = paper.regime_rows(pd.read_csv(reg_path))
    bt = sum(r["beats_best"][0] for r in rows)
    be = sum(r["beats_best"][1] for r in rows)
    both = sum(r["beats_best_on_both"] for r in rows)
    text = (
        f"On the AHASD paper's own platform (NPU + 16-rank LPDDR5-PIM, PIM rates derived from the memory), with every "
        f"competitor given its best decoder and rank placement (issue 23), AHASD reaches "
        f"**{cell('ahasd', 'best_soc', 'throughput_tok_s')}x the throughput and "
        f"{cell('ahasd', 'best_soc_eff', 'tokens_per_j')}x the energy efficiency of the best decoder of the same "
        f"hardware** (which decoder is best, per model pair and algorithm: {paper.best_choices(wt, 'best_soc')} "
        f"by throughput, {paper.best_choices(wt, 'best_soc_eff')} by tokens/J), "
        f"{cell('ahasd', 'operator_sync', 'throughput_tok_s')}x / {cell('ahasd', 'operator_sync', 'tokens_per_j')}x "
        f"operator_sync on the same hardware, and {cell('ahasd', 'best_gpu', 'throughput_tok_s')}x / "
        f"{cell('ahasd', 'best_gpu_eff', 'tokens_per_j')}x the best RTX 4090 Laptop decoder "
        f"(throughput / tokens per joule; geometric means of paired per-window ratios with 95% CIs, n = {n} "
        f"windows over 3 model pairs x 4 drafting algorithms). Over the {len(rows)} regimes of the regimes sweep "
        f"(PIM rates derived from the memory, or Table 2's typed compute and bandwidth read per unit or as the "
        f"device total; host/PIM contention on or off; LLaMA2 pair, AdaEDL) AHASD's interval lies above the "
        f"best decoder's on throughput in {bt}, on "
        f"tokens/J in {be} and on both in {both}. The paper reports 3.8x the throughput and 5.2x the energy "
        f"efficiency of GPU-only.")
    return text


def block_study() -> str:
    """The README's summary of the committed where_ahasd_wins study (docs/studies/*_trials.csv)."""
    import pandas as pd
    f = ROOT / "docs" / "studies" / "where_ahasd_wins_trials.csv"
    if not f.is_file():
        raise InputError(f"docs: {f} is missing; publish the study first (docs/studies/intros/where_ahasd_wins.md)")
    t = pd.read_csv(f)
    ok = t[t["status"] == "ok"]
    both = ok[(ok["throughput_ratio"] > 1) & (ok["energy_efficiency_ratio"] > 1)]
    front = ok[ok["pareto"] == True]  # noqa: E712
    pts = "; ".join(f"{r.throughput_ratio:.2f}x throughput at {r.energy_efficiency_ratio:.2f}x energy efficiency"
                    for r in front.drop_duplicates(["throughput_ratio", "energy_efficiency_ratio"])
                    .sort_values("throughput_ratio", ascending=False).itertuples())
    return (f"With per-mode placement AHASD beats operator_sync on both throughput and energy efficiency at "
            f"**{len(both)}** of the {len(ok)} design points of the search (the front: {pts}; median ratios "
            f"{ok['throughput_ratio'].median():.2f} and {ok['energy_efficiency_ratio'].median():.2f}).")


def block_moe_baselines() -> str:
    """docs/moe_offload.md: SpecFit, EcoSpec and the tuned baselines per setting, from the committed
    docs/moe-offload/moe_baselines.csv (scripts/moe_study.py)."""
    import pandas as pd
    f = ROOT / "docs" / "moe-offload" / "moe_baselines.csv"
    if not f.is_file():
        raise InputError(f"docs: {f} is missing; run python scripts/moe_study.py first")
    t = pd.read_csv(f)
    out = []
    for setting, g in t.groupby("setting", sort=False):
        g = g.set_index("row")
        b = g.best_baseline.iloc[0]

        def cell(r):
            x = g.loc[r]
            return (f"{x.throughput_tok_s:.1f} [{x.ci95_low:.1f}, {x.ci95_high:.1f}]",
                    f"{x.vs_best_baseline:.3f} [{x.vs_best_baseline_ci95_low:.3f}, {x.vs_best_baseline_ci95_high:.3f}]")
        out.append(f"**{setting}** -- best baseline (chosen on tuning rounds {g.tuning_rounds.iloc[0]}): {b}; "
                   f"tuned EAGLE = {g.loc['eagle_tuned', 'config']}, expert budget = "
                   f"{g.loc['expert_budget_tuned', 'config']}")
        out.append("")
        out.append("| row | tok/s [95% CI] | vs best baseline [95% CI] | nodes | accepted/round | H2D GB | hit rate |")
        out.append("|---|---|---|---|---|---|---|")
        for r in g.index:
            tput, ratio = cell(r)
            x = g.loc[r]
            out.append(f"| {r} | {tput} | {ratio} | {x.nodes_verified:.1f} | {x.accepted_per_round:.2f} | "
                       f"{x.expert_h2d_gb:.1f} | {x.hit_rate:.3f} |")
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
              "study": block_study, "moe-baselines": block_moe_baselines, "moe-validation": block_moe_validation}


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
    header = (f"<!-- fingerprint: {fp} (python scripts/reproduce_paper.py; python scripts/docs.py --reproduction DIR) -->\n"
              f"> Generated by `python scripts/reproduce_paper.py` at revision {git_revision() or 'unknown'} "
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


def stamp_file(path: Path, fp: str, made_by: str) -> None:
    if not path.is_file():
        raise InputError(f"docs: --stamp {path}: no such file")
    if not made_by or ")" in made_by:
        raise InputError("docs: --stamp needs --made-by COMMAND (without ')')")
    text = STAMP.sub("", path.read_text()).lstrip("\n")
    atomic_write_text(path, f"<!-- fingerprint: {fp} ({made_by}) -->\n" + text)


def stale_stamps(fp: str) -> list[str]:
    """Docs whose fingerprint stamp is not ``fp``."""
    out = []
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
