"""``compare`` for mode ``moe_offload``: SpecFit and EcoSpec against tuned baselines.

The tree trace's rounds are split three ways, once, from the trace alone:

* **profile**: the last ``moe.profile_rounds`` rounds -- popularity for the cache's initial
  contents (and the static policy), the same for every run;
* **tuning**: the ``tune_fraction`` of the remaining rounds after the reported ones -- every
  baseline's configuration is chosen there: EAGLE (dynamic top-N x depth, and fixed shapes) and
  the expert budget (MoE-Spec style), and which baseline is the best;
* **reported**: the first rounds; every row replays exactly these rounds (the round budget
  binds, not the token budget), so window i of every row covers the same rounds.

Every policy is tuned on the tuning rounds, each over its own small grid: EAGLE (dynamic top-N x
depth, fixed shapes), the expert budget, SpecFit (``max_nodes``), EcoSpec (``mu``), expert-blind
SpecFit (``max_nodes``) and CPU-expert decoding (autoregressive or SpecFit, experts on the host
CPU or mixed). Rows: each family's tuned configuration, autoregressive decoding (``no_draft``;
every committed token decoded), and references at their defaults (SpecFit without cost
calibration, eagle_dynamic at 60 nodes). The best baseline is the best tuned
family that is not expert-aware (autoregressive, EAGLE, expert budget, expert-blind SpecFit,
CPU experts). Throughput is a ratio estimator (total tokens / total time); 95% intervals by
resampling whole windows, paired for ratios (to the best baseline and to expert-blind SpecFit:
the margin expert awareness adds).
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from .config.errors import ConfigError
from .metrics.stats import paired_ratio_ci, ratio_ci

EAGLE_NODES = (4, 8, 16, 32, 64)
EAGLE_DEPTHS = (6,)
EAGLE_SHAPES = ([1, 1, 1, 1], [2, 2, 1, 1])
BUDGETS = (4, 8, 16, 32)
SPECFIT_NODES = (8, 16, 32, 64)
ECOSPEC_MU = (0.25, 1.0, 4.0, 16.0)
# families whose policy sees the experts a node routes to (the rest are baselines)
EXPERT_AWARE = ("specfit_tuned", "ecospec_tuned")


def candidates() -> dict[str, list[tuple[str, list[str]]]]:
    """Families -> [(label, overrides)]: the tuning grid."""
    eagle = [(f"eagle_dynamic N={n} depth={d}", ["run.policy=eagle_dynamic", f"tree_policy.eagle_dynamic.total_nodes={n}",
                                                 f"tree_policy.eagle_dynamic.max_depth={d}"])
             for n in EAGLE_NODES for d in EAGLE_DEPTHS]
    eagle += [(f"eagle_fixed {b}", ["run.policy=eagle_fixed", f"tree_policy.eagle_fixed.branching={b}".replace(" ", "")])
              for b in EAGLE_SHAPES]
    budget = [(f"expert_budget B={b}", ["run.policy=expert_budget",
                                         f"tree_policy.expert_budget.budget_experts_per_layer={b}"]) for b in BUDGETS]
    specfit = [(f"specfit max_nodes={n}", ["run.policy=specfit", f"tree_policy.specfit.max_nodes={n}"])
               for n in SPECFIT_NODES]
    blind = [(f"specfit expert-blind max_nodes={n}", ["run.policy=specfit", "tree_policy.specfit.expert_term=false",
                                                      f"tree_policy.specfit.max_nodes={n}"]) for n in SPECFIT_NODES]
    eco = [(f"ecospec mu={m:g}", ["run.policy=ecospec", f"tree_policy.ecospec.mu={m}"]) for m in ECOSPEC_MU]
    cpu = [(f"{p} experts={ex}", [f"run.policy={p}", f"moe.expert_execution={ex}"] +
            (["tree_policy.specfit.max_nodes=16"] if p == "specfit" else []))
           for p in ("no_draft", "specfit") for ex in ("cpu", "mixed")]
    return {"autoregressive": [("no_draft", ["run.policy=no_draft"])], "eagle_tuned": eagle,
            "expert_budget_tuned": budget, "specfit_tuned": specfit, "ecospec_tuned": eco,
            "specfit_blind_tuned": blind, "cpu_experts_tuned": cpu}


REPORTED = [("specfit_uncalibrated", ["run.policy=specfit", "moe.cost_calibration=none"]),
            ("eagle_dynamic_default", ["run.policy=eagle_dynamic"])]


def split_rounds(cfg, tt, tune_fraction: float, max_rounds: int = 0) -> dict[str, tuple[int, int]]:
    """``max_rounds`` > 0: only the first max_rounds rounds are tuned on and reported (the profile
    rounds stay the trace's last)."""
    n, p = len(tt), int(cfg.moe.profile_rounds)
    avail = n - p
    if max_rounds:
        avail = min(avail, int(max_rounds))
    n_tune = int(round(avail * tune_fraction))
    if avail - n_tune < 2 * cfg.moe.ci_windows or n_tune < 4:
        raise ConfigError(cfg.source_file, "moe.profile_rounds",
                          f"the tree trace's {n} rounds leave too few for tuning ({n_tune}) and reporting "
                          f"({avail - n_tune}) after {p} profile rounds")
    return {"reported": (0, avail - n_tune), "tuning": (avail - n_tune, avail), "profile": (n - p, n)}


def _slice_overrides(tt, lo: int, hi: int, prof: tuple[int, int]) -> list[str]:
    # a token budget no row can reach in these rounds (each commits at most its recorded tokens)
    cap = int(np.asarray(tt.round_n_commit[lo:hi]).sum()) + 1
    return [f"moe.trace_start_round={lo}", f"moe.trace_end_round={hi}", f"moe.profile_start_round={prof[0]}",
            f"moe.profile_rounds={prof[1] - prof[0]}", f"run.generated_tokens={cap}"]


def planned_configs(cfg, tune_fraction: float = 1 / 3) -> list[tuple[str, object]]:
    """[(label, config)] of every run :func:`run_compare_moe` would make (the tuning grid on the
    tuning rounds, the reported rows on the reported rounds; the tuned families' winners are
    among the grid's configs), for a dry run to check without simulating."""
    from .modes.moe.offload import load_tree_trace_cached
    from .simulation import resolve_data_path
    tt = load_tree_trace_cached(resolve_data_path(cfg.moe.tree_trace, cfg.source_file))
    parts = split_rounds(cfg, tt, tune_fraction)
    tune_o = _slice_overrides(tt, *parts["tuning"], parts["profile"])
    rep_o = _slice_overrides(tt, *parts["reported"], parts["profile"])
    out = [(f"tuning: {label}", cfg.replace(o + tune_o, source=None)) for cands in candidates().values()
           for label, o in cands]
    return out + [(f"reported: {label}", cfg.replace(o + rep_o, source=None)) for label, o in REPORTED]


def run_compare_moe(cfg, out: str | Path | None, tune_fraction: float = 1 / 3, n_boot: int = 4000,
                    progress=None, grid: dict | None = None, max_rounds: int = 0, references: bool = True):
    """(table, tuning table, output dir). ``progress(done, total, label)`` is called before each run;
    ``grid``: families -> candidates instead of :func:`candidates` (must hold autoregressive and
    specfit_blind_tuned); ``max_rounds``: see :func:`split_rounds`; ``references``: the default-
    parameter reference rows too."""
    from .compare import default_compare_dir
    from .modes.moe.offload import load_tree_trace_cached
    from .outdir import OutputFolder
    from .output import atomic_write, write_run
    from .simulation import resolve_data_path, run_simulation
    tt = load_tree_trace_cached(resolve_data_path(cfg.moe.tree_trace, cfg.source_file))
    parts = split_rounds(cfg, tt, tune_fraction, max_rounds)
    tune_o = _slice_overrides(tt, *parts["tuning"], parts["profile"])
    rep_o = _slice_overrides(tt, *parts["reported"], parts["profile"])
    out_dir = Path(out) if out else default_compare_dir(cfg)
    with OutputFolder(out_dir, "compare") as folder:
        tuning, best = [], {}
        cands_all = candidates() if grid is None else grid
        reported = REPORTED if references else []
        total = (sum(len(c) for c in cands_all.values() if len(c) > 1) + len(reported) + len(cands_all)
                 + sum(1 for f, c in cands_all.items() if len(c) == 1 and f not in EXPERT_AWARE))
        done = 0
        for fam, cands in cands_all.items():
            for label, o in cands:
                if len(cands) == 1:            # nothing to choose: no tuning run
                    tuning.append({"family": fam, "config": label, "tuning_throughput_tok_s": float("nan"),
                                   "overrides": " ".join(o)})
                    best[fam] = (label, o, float("nan"))
                    continue
                if progress is not None:
                    progress(done, total, f"tuning {label}")
                done += 1
                s = run_simulation(cfg.replace(o + tune_o)).summary
                w = s["mode_windows"] if "mode_windows" in s else None
                tput = s["generated_tokens"] / s["decode_makespan_s"]
                tuning.append({"family": fam, "config": label, "tuning_throughput_tok_s": tput, "overrides": " ".join(o)})
                if fam not in best or tput > best[fam][2]:
                    best[fam] = (label, o, tput)
                del w
        rows_spec = [(fam, best[fam][1]) for fam in best] + reported
        per_window = {}
        rows = []
        for label, o in rows_spec:
            if progress is not None:
                progress(done, total, f"reported {label}")
            done += 1
            mcfg = cfg.replace(o + rep_o)
            t0 = time.perf_counter()
            res = run_simulation(mcfg)
            write_run(res, mcfg, folder.stage / label, time.perf_counter() - t0)
            w = res.windows
            per_window[label] = w
            s = res.summary
            thr, thr_ci = ratio_ci(w.generated_tokens, w.makespan_s, n_resamples=n_boot)
            rows.append({"row": label, "config": best[label][0] if label in best else " ".join(o),
                         "throughput_tok_s": thr, "ci95": thr_ci or [float("nan")] * 2,
                         "nodes_verified": s["policy_stats"].get("mean_nodes_verified", 0.0),
                         "accepted_per_round": s.get("accepted_length_per_round", 0.0),
                         "expert_h2d_gb": s.get("expert_h2d_bytes", 0.0) / 1e9,
                         "hit_rate": s.get("expert_cache_hit_rate", 0.0), "windows": len(w)})
        # the best baseline: the expert-blind family with the best throughput on the TUNING rounds
        # (families with one candidate get a tuning run here for that comparison)
        for fam in best:
            if fam not in EXPERT_AWARE and best[fam][2] != best[fam][2]:
                if progress is not None:
                    progress(done, total, f"tuning {best[fam][0]}")
                done += 1
                s = run_simulation(cfg.replace(best[fam][1] + tune_o)).summary
                best[fam] = (best[fam][0], best[fam][1], s["generated_tokens"] / s["decode_makespan_s"])
                tuning[[t["family"] for t in tuning].index(fam)]["tuning_throughput_tok_s"] = best[fam][2]
        best_fam = max((f for f in best if f not in EXPERT_AWARE), key=lambda f: best[f][2])
        ref = per_window[best_fam]
        blind = per_window.get("specfit_blind_tuned")
        for r in rows:
            w = per_window[r["row"]]
            if list(w.first_round) != list(ref.first_round):
                raise RuntimeError("moe compare: rows replayed different rounds; ratios would not be paired")
            vs, vs_ci = paired_ratio_ci(w.generated_tokens, w.makespan_s, ref.generated_tokens, ref.makespan_s,
                                        n_resamples=n_boot)
            r["vs_best_baseline"], r["vs_best_baseline_ci95"] = vs, vs_ci or [float("nan")] * 2
            vb, vb_ci = (paired_ratio_ci(w.generated_tokens, w.makespan_s, blind.generated_tokens, blind.makespan_s,
                                         n_resamples=n_boot) if blind is not None else (float("nan"), None))
            r["vs_expert_blind"], r["vs_expert_blind_ci95"] = vb, vb_ci or [float("nan")] * 2
        table = pd.DataFrame(rows)
        table["best_baseline"] = f"{best_fam} ({best[best_fam][0]})"
        table["reported_rounds"] = "{}-{}".format(*parts["reported"])
        table["tuning_rounds"] = "{}-{}".format(*parts["tuning"])
        table["profile_rounds"] = "{}-{}".format(*parts["profile"])
        table["routing"] = "synthetic" if cfg.moe.routing == "synthetic" else "recorded"
        tune_t = pd.DataFrame(tuning)
        flat = table.assign(ci95_low=[c[0] for c in table.ci95], ci95_high=[c[1] for c in table.ci95],
                            vs_best_baseline_ci95_low=[c[0] for c in table.vs_best_baseline_ci95],
                            vs_best_baseline_ci95_high=[c[1] for c in table.vs_best_baseline_ci95],
                            vs_expert_blind_ci95_low=[c[0] for c in table.vs_expert_blind_ci95],
                            vs_expert_blind_ci95_high=[c[1] for c in table.vs_expert_blind_ci95]
                            ).drop(columns=["ci95", "vs_best_baseline_ci95", "vs_expert_blind_ci95"])
        atomic_write(folder.stage / "compare.csv", lambda fh: flat.to_csv(fh, index=False))
        atomic_write(folder.stage / "tuning.csv", lambda fh: tune_t.to_csv(fh, index=False))
        folder.commit()
    return table, tune_t, out_dir


def format_compare_moe(table: pd.DataFrame) -> str:
    def ci(m, c, d=1):
        return f"{m:.{d}f} [{c[0]:.{d}f}, {c[1]:.{d}f}]"
    head = ["row", "config", "tok/s [95% CI]", "vs best baseline [95% CI]", "vs expert-blind [95% CI]", "nodes",
            "acc/round", "H2D GB", "hit"]
    body = [[r.row, r.config, ci(r.throughput_tok_s, r.ci95), ci(r.vs_best_baseline, r.vs_best_baseline_ci95, 3),
             ci(r.vs_expert_blind, r.vs_expert_blind_ci95, 3),
             f"{r.nodes_verified:.1f}", f"{r.accepted_per_round:.2f}", f"{r.expert_h2d_gb:.2f}", f"{r.hit_rate:.3f}"]
            for r in table.itertuples()]
    from .compare import text_table
    lines = text_table([head] + body)
    t = table.iloc[0]
    lines.append(f"best baseline: {t.best_baseline}, chosen on tuning rounds {t.tuning_rounds}; reported rounds "
                 f"{t.reported_rounds} ({int(t.windows)} windows: ratio estimators, 95% intervals by resampling whole "
                 f"windows, paired for ratios); profile rounds {t.profile_rounds}")
    if t.routing == "synthetic":
        lines.append("ROUTING IS SYNTHETIC (moe.routing synthetic): expert choices drawn from the synthetic_* "
                     "statistics on the recorded trees, not recorded from the target")
    return "\n".join(lines)
