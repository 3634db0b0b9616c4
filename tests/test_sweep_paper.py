"""The paper reproduction: shipped experiment and sweep files, ratio arithmetic, end-to-end script on
the smoke trace."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ahasd_sim.config.errors import InputError
from ahasd_sim.metrics.stats import RATIOS, paired_ratio_ci
from ahasd_sim.paper import report
from ahasd_sim.paper.experiments import load_experiments
from ahasd_sim.paper.sweeps import restrict, trace_token_budget, with_overrides
from ahasd_sim.sweep import expand, load_sweep_spec

ROOT = Path(__file__).resolve().parent.parent
SMOKE_TRACE = ROOT / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz"
REPRODUCE = ROOT / "hw_configs" / "paper" / "reproduce.yaml"


@pytest.fixture(scope="module")
def exp():
    return load_experiments()


def test_shipped_reproduction_spec_resolves(exp):
    spec = load_sweep_spec(REPRODUCE)
    pts = expand(spec)
    assert len(pts) == 21 * 3 * 4   # 21 configurations x 3 model pairs x 4 algorithms
    assert all(p.valid for p in pts), [str(p.error) for p in pts if not p.valid][:3]
    by = {}
    for p in pts:
        by.setdefault(p.labels["variant"], p.config)
    assert set(by) == set(exp.labels)
    assert by["gpu_only"].run.mode == "gpu_only" and by["gpu_only"].gpu.enabled
    sg = by["specpim_gpu"]
    assert sg.run.mode == "operator_sync" and sg.gpu.enabled and sg.pim.enabled and not sg.npu.enabled
    # the ladder runs mode ahasd throughout (EDC and TVC off = async), one switch per rung
    assert by["npu_pim"].run.mode == "ahasd" and not by["npu_pim"].pim.aau.enabled
    assert not by["npu_pim"].ahasd.edc and not by["npu_pim"].ahasd.tvc
    assert by["plus_aau"].run.mode == "ahasd" and by["plus_aau"].pim.aau.enabled
    assert by["plus_edc"].run.mode == "ahasd" and by["plus_edc"].ahasd.edc and not by["plus_edc"].ahasd.tvc
    assert by["plus_tvc"].ahasd.tvc and not by["plus_tvc"].pim.gts.enabled
    assert by["pim_ar"].run.mode == "autoregressive" and by["pim_ar"].baseline.device == "pim"
    assert by["gpu_ar"].run.mode == "autoregressive" and by["gpu_ar"].gpu.enabled
    a = by["ahasd"]
    assert a.run.mode == "ahasd" and a.ahasd.edc and a.ahasd.tvc and a.pim.aau.enabled and a.pim.gts.enabled
    assert by["specpim"].run.mode == "operator_sync" and not by["specpim"].pim.aau.enabled
    assert by["npu_lpddr5"].run.mode == "autoregressive" and not by["npu_lpddr5"].pim.enabled
    assert all(p.config.run.generated_tokens == 1024 and not p.config.run.timeline for p in pts)
    assert {p.labels["model_pair"] for p in pts} == {"opt-1.3b/opt-6.7b", "llama2-7b/llama2-13b",
                                                     "palm-like-8b/palm-like-30b"}
    assert {p.labels["run.policy"] for p in pts} == {"specdecpp", "svip", "adaedl", "banditspec"}


def test_restrict_and_overrides():
    spec = load_sweep_spec(REPRODUCE)
    small = restrict(with_overrides(spec, ["run.generated_tokens=24"]),
                           model_pairs=["llama2-7b/llama2-13b"], policies=["adaedl"], variants=["gpu_only", "ahasd"])
    pts = expand(small)
    assert len(pts) == 2 and all(p.config.run.generated_tokens == 24 for p in pts)
    assert len(expand(spec)) == 252      # the original is untouched
    with pytest.raises(InputError):
        restrict(spec, policies=["nope"])


def test_token_budget_keeps_a_held_out_part():
    # smoke trace: 3 prompts x 24 positions; nothing can leave 200 held-out positions
    with pytest.raises(InputError):
        trace_token_budget(SMOKE_TRACE, 48)
    tokens, why = trace_token_budget(SMOKE_TRACE, 10, min_fit_positions=24)
    assert tokens == 10 and why is None
    tokens, why = trace_token_budget(SMOKE_TRACE, 60, min_fit_positions=24)
    assert tokens == 48 and "48" in why


def _synthetic():
    rows = []
    for pair in ("opt-1.3b/opt-6.7b", "llama2-7b/llama2-13b"):
        for pol in ("svip", "adaedl"):
            for v, thr, tpj, acc in (("gpu_only", 10.0, 1.0, 0.8), ("npu_pim", 22.0, 1.9, 0.6),
                                     ("plus_aau", 27.0, 2.6, 0.6), ("plus_edc", 34.0, 4.5, 0.75),
                                     ("ahasd", 38.0, 5.2, 0.7), ("specpim", 25.0, 4.0, 0.8),
                                     ("npu_lpddr5", 12.0, 2.0, 0.0)):
                # 100 tokens per point: the totals of the ratio estimators give back thr, tpj, acc
                rows.append({"point": f"{pair}{pol}{v}", "status": "ok", "variant": v, "model_pair": pair,
                             "run.policy": pol, "seed": 0, "throughput_tok_s": thr, "tokens_per_j": tpj,
                             "energy_per_token_j": 1 / tpj, "acceptance_rate": acc, "makespan_s": 100 / thr,
                             "generated_tokens": 100, "decode_makespan_s": 100 / thr, "decode_energy_j": 100 / tpj,
                             "accepted_tokens": 100 * acc, "rejected_tokens": 100 * (1 - acc), "killed_tokens": 0,
                             "energy_breakdown_j.lpddr5.dynamic": 10.0, "energy_breakdown_j.npu.dynamic": 5.0})
    rows.append({"point": "x", "status": "failed", "variant": "ahasd", "model_pair": "opt-1.3b/opt-6.7b",
                 "run.policy": "banditspec", "seed": 0, "error_type": "ConfigError", "error": "boom"})
    return pd.DataFrame(rows)


def test_ratio_arithmetic_on_synthetic_results(exp):
    df = _synthetic()
    rows = {r["claim"]: r for r in report.comparison_rows(exp, df)}
    assert rows["AHASD throughput vs GPU-only"]["ours"] == pytest.approx(3.8)
    assert rows["AHASD energy efficiency vs GPU-only"]["ours"] == pytest.approx(5.2)
    assert rows["NPU+PIM throughput vs GPU-only"]["ours"] == pytest.approx(2.2)
    assert rows["NPU+PIM mean acceptance vs GPU-only"]["ours"] == pytest.approx(0.75)
    assert rows["+EDC acceptance vs +AAU"]["ours"] == pytest.approx(1.25)
    assert rows["AHASD vs SpecPIM-style, best throughput ('up to')"]["ours"] == pytest.approx(38 / 25)
    assert rows["AHASD vs NPU+LPDDR5, throughput"]["ours"] == pytest.approx(38 / 12)
    assert rows["AHASD vs NPU+LPDDR5, energy per token"]["ours"] == pytest.approx(2.0 / 5.2)
    norm = report.normalised_table(exp, df)
    assert len(norm) == 28 and norm.loc[norm["variant"] == "ahasd", "throughput_tok_s_ratio"].tolist() == \
        pytest.approx([3.8] * 4)
    text = report.build_report(exp, df, meta={"trace": "synthetic"}, figures={}, out_dir=Path("."))
    assert "| AHASD throughput vs GPU-only | 3.80x | 3.80x |" in text
    assert "boom" in text      # the failed point is listed


def _capture_figures(monkeypatch) -> dict:
    """Record every figure the code saves, by file stem (``save_figure`` writes each format
    through ``ahasd_sim.output.atomic_write``, whose path names the figure)."""
    from matplotlib.figure import Figure
    import ahasd_sim.output as output
    captured: dict = {}
    writing: list = []
    orig_savefig, orig_write = Figure.savefig, output.atomic_write

    def atomic_write(path, writer, mode="w"):
        writing.append(Path(path).stem)
        try:
            return orig_write(path, writer, mode)
        finally:
            writing.pop()

    def savefig(self, fname, *args, **kwargs):
        captured[writing[-1] if writing else Path(str(fname)).stem] = self
        return orig_savefig(self, fname, *args, **kwargs)

    monkeypatch.setattr(output, "atomic_write", atomic_write)
    monkeypatch.setattr(Figure, "savefig", savefig)
    return captured


def _bar_containers(ax):
    from matplotlib.container import BarContainer
    return [c for c in ax.containers if isinstance(c, BarContainer)]


def test_reproduce_script_end_to_end_small(exp, tmp_path, monkeypatch):
    """The script on a one-pair, one-algorithm copy of the shipped spec and the smoke trace."""
    import ahasd_sim.metrics.stats as stats_mod
    monkeypatch.setattr(stats_mod, "MIN_BOOTSTRAP_WINDOWS", 2)   # few windows keep the test short
    figs = _capture_figures(monkeypatch)
    text = REPRODUCE.read_text().replace("../", str(ROOT / "hw_configs") + "/")
    text = text.replace("policies: [specdecpp, svip, adaedl, banditspec]", "policies: [adaedl]")
    text = text.replace("  - [opt-1.3b, opt-6.7b]\n", "").replace("  - [palm-like-8b, palm-like-30b]\n", "")
    spec = tmp_path / "repro.yaml"
    spec.write_text(text)
    mod_spec = importlib.util.spec_from_file_location("reproduce_paper", ROOT / "scripts" / "reproduce_paper.py")
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    out = tmp_path / "paper"
    rc = mod.main(["--spec", str(spec), "--out", str(out), "--trace", str(SMOKE_TRACE), "--tokens", "24",
                   "--timeline-tokens", "24", "--workers", "2", "--no-progress", "--windows", "2", "--no-regimes"])
    assert rc == 0
    report_md = (out / "report.md").read_text()
    assert "## Headline comparison with the paper" in report_md and "AHASD throughput vs GPU-only" in report_md
    df = pd.read_csv(out / "results.csv")
    assert len(df) == 21 and (df["status"] == "ok").all() and (df["windows"] == 2).all()
    assert (df["generated_tokens"] == 48).all()
    # intervals: paired per-window ratios with 95% CIs, for every pre-verification KV option
    assert "## Headline ratios with 95% confidence intervals" in report_md
    for kv in ("default", "recompute", "wait", "layer_pipelined"):
        assert f"| AHASD ({kv}) | SpecPIM-style (no AAU/GTS) |" in report_md
        assert f"| AHASD ({kv}) | best decoder of the same hardware |" in report_md
    wt = pd.read_csv(out / "windows.csv")
    assert len(wt) == 42 and set(wt["window"]) == {0, 1}
    norm = pd.read_csv(out / "normalised.csv")
    assert norm.loc[norm["variant"] == "gpu_only", "throughput_tok_s_ratio"].tolist() == pytest.approx([1.0])
    files = sorted(p.name for p in (out / "figures").iterdir())
    for stem in ("ci_ratios", "ablation", "sota", "timeline", "distributions", "heatmap_ahasd_vs_gpu", "ladder_lines"):
        assert f"{stem}.pdf" in files and f"{stem}.png" in files and stem in figs
    # ablation / sota / ladder lines carry the windows' 95% intervals (issue 33), not a min-max band
    from matplotlib.collections import LineCollection
    for stem in ("ablation", "sota", "ladder_lines"):
        assert any(isinstance(c, LineCollection) and len(c.get_segments()) for ax in figs[stem].axes
                   for c in ax.collections), stem
        assert any("95% CI" in t.get_text() for t in figs[stem].texts), stem

    # ci_ratios: one bar per (KV option, baseline) at the geomean of the paired per-window ratios of
    # windows.csv, error bars spanning their 95% t interval (recomputed here from the window values)
    by = {v: wt[wt["variant"] == v].sort_values("window") for v in set(wt["variant"])}
    kvs = [v for v in ("ahasd", "ahasd_recompute", "ahasd_wait", "ahasd_layer_pipelined") if v in by]
    assert kvs == ["ahasd", "ahasd_recompute", "ahasd_wait", "ahasd_layer_pipelined"]
    best = report.with_best_variants(exp, wt)
    by = {v: best[best["variant"] == v].sort_values("window") for v in set(best["variant"])}
    fig = figs["ci_ratios"]
    assert len(fig.axes) == 2
    for ax, metric, label in zip(fig.axes, ("throughput_tok_s", "tokens_per_j"),
                                 ("Throughput ratio", "Energy-efficiency ratio")):
        assert ax.get_ylabel() == f"{label}\n(suite total, 95% CI)"
        assert [t.get_text() for t in ax.get_xticklabels()] == ["vs best SoC", "vs operator_sync", "vs async",
                                                                "vs best GPU"]
        bars = _bar_containers(ax)
        assert [c.get_label() for c in bars] == [f"AHASD ({kv})" for kv in ("default", "recompute", "wait",
                                                                            "layer_pipelined")]
        dens = ("best_soc", "operator_sync", "plus_aau", "best_gpu")
        if metric == "tokens_per_j":
            dens = ("best_soc_eff", "operator_sync", "plus_aau", "best_gpu_eff")
        for v, cont in zip(kvs, bars):
            assert len(cont.patches) == 4
            segs = cont.errorbar.lines[2][0].get_segments()
            for patch, seg, den in zip(cont.patches, segs, dens):
                # ratio of totals over the same windows (tokens / decode time or decode energy), the
                # interval a paired bootstrap of those windows (one configuration here)
                nc, dc = RATIOS[metric]
                a, b = by[v], by[den]
                g = (a[nc].sum() / a[dc].sum()) / (b[nc].sum() / b[dc].sum())
                _g, (lo, hi) = paired_ratio_ci(a[nc], a[dc], b[nc], b[dc])
                assert patch.get_height() == pytest.approx(g, rel=1e-12, abs=0)
                assert sorted(seg[:, 1]) == pytest.approx([lo, hi], rel=1e-9, abs=0)

    # ablation / sota: one bar series per variant, bars at the variant's metric over GPU-only's
    # (one model pair, one policy, one seed: the pair's group and the geo-mean group are that ratio)
    ok = df.set_index("variant")
    for stem, variants in (("ablation", exp.ladder), ("sota", exp.sota)):
        fig = figs[stem]
        assert len(fig.axes) == 2
        for ax, metric, label in zip(fig.axes, ("throughput_tok_s", "tokens_per_j"),
                                     ("Throughput", "Energy efficiency")):
            assert ax.get_ylabel() == f"{label}\n(x GPU-only)"
            bars = _bar_containers(ax)
            assert [c.get_label() for c in bars] == [exp.short[v] for v in variants]
            for v, cont in zip(variants, bars):
                want = ok.loc[v, metric] / ok.loc["gpu_only", metric]
                assert [p.get_height() for p in cont.patches] == pytest.approx([want, want], rel=1e-9, abs=0)
