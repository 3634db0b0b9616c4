"""Figures: every plot function and CLI writes non-empty vector PDF + PNG from result files."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

from ahasd_sim import plots
from ahasd_sim.sweep import run_sweep

ROOT = Path(__file__).resolve().parent.parent
SMOKE_TRACE = ROOT / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz"
HW = ROOT / "hw_configs"


def check_outputs(paths):
    paths = [Path(p) for p in paths]
    assert {p.suffix for p in paths} == {".pdf", ".png"}
    for p in paths:
        data = p.read_bytes()
        assert len(data) > 1000, p
        if p.suffix == ".pdf":
            assert data.startswith(b"%PDF")
        else:
            assert data.startswith(b"\x89PNG")


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """A small sweep with timelines: GPU-only and AHASD variants x 2 policies x 2 verify caps."""
    d = tmp_path_factory.mktemp("plots")
    spec = d / "s.yaml"
    spec.write_text(f"""
name: plots
base:
  config: {HW / 'platform_mobile_npu_lpddr5_pim.yaml'}
  set: {{run.trace: {SMOKE_TRACE}, run.generated_tokens: 24, run.timeline: true}}
variants:
  gpu_only: {{config: {HW / 'platform_laptop_rtx4090.yaml'}, set: {{run.mode: gpu_only}}}}
  async: {{set: {{run.mode: async}}}}
  ahasd: {{set: {{run.mode: ahasd}}}}
policies: [adaedl, svip]
axes:
  ahasd.max_verify_tokens: [8, 32]
""")
    res = run_sweep(spec, d / "out", workers=2, progress=False, full_points=True)   # events.csv for the distributions
    assert res.n_failed == 0
    return d / "out"


def test_normalised_bars(sweep_dir, tmp_path):
    df = pd.read_csv(sweep_dir / "results.csv")
    paths = plots.normalised_bars(df, tmp_path / "bars", baseline="gpu_only", bars=["gpu_only", "async", "ahasd"],
                                  match=["model_pair", "run.policy", "ahasd.max_verify_tokens", "seed"],
                                  group="run.policy", paper={"throughput_tok_s": {"ahasd": 3.8}})
    check_outputs(paths)
    tab = plots.ratio_table(df, by="variant", baseline="gpu_only", group="run.policy",
                            match=["run.policy", "ahasd.max_verify_tokens", "seed"], metrics=["throughput_tok_s"])
    base = tab[tab["bar"] == "gpu_only"]["ratio"]
    assert base.tolist() == pytest.approx([1.0] * len(base))


def test_gantt_and_distributions(sweep_dir, tmp_path):
    df = pd.read_csv(sweep_dir / "results.csv")
    runs = {}
    for v in ("gpu_only", "async", "ahasd"):
        h = df[df["variant"] == v]["point"].iloc[0]
        runs[v] = sweep_dir / "points" / h
    tl = plots.load_timeline(runs["ahasd"] / "timeline.json")
    assert {"npu", "pim"} <= set(tl["device"]) and (tl["end_s"] >= tl["start_s"]).all()
    check_outputs(plots.plot_gantt({k: p / "timeline.json" for k, p in runs.items()}, tmp_path / "gantt"))
    check_outputs(plots.plot_gantt({"ahasd": runs["ahasd"] / "timeline.json"}, tmp_path / "gantt2",
                                   start_s=0.0, window_s=0.5))
    check_outputs(plots.plot_distributions({k: p / "events.csv" for k, p in runs.items()}, tmp_path / "dist"))


def test_distribution_extraction():
    from ahasd_sim.plots.distributions import accepted_per_verify, draft_lengths
    ev = pd.DataFrame({"event": ["batch_pushed", "batch_pushed", "verify", "draft_token"],
                       "n_tokens": [3, 5, 8, None], "accepted": [None, None, 6, None]})
    assert draft_lengths(ev).tolist() == [3, 5]
    assert accepted_per_verify(ev).tolist() == [6]
    sync = pd.DataFrame({"event": ["draft_token", "verify", "verify"], "n_tokens": [None, 4, 2],
                         "accepted": [None, 4, 0]})
    assert draft_lengths(sync).tolist() == [4, 2]


def test_heatmap_and_lines(sweep_dir, tmp_path):
    df = pd.read_csv(sweep_dir / "results.csv")
    check_outputs(plots.heatmap(df, "ahasd.max_verify_tokens", "run.policy", "throughput_tok_s", tmp_path / "heat",
                                where={"variant": "ahasd"}))
    check_outputs(plots.lines(df, "ahasd.max_verify_tokens", "tokens_per_j", tmp_path / "lines", hue="variant"))
    with pytest.raises(ValueError):
        plots.heatmap(df, "ahasd.max_verify_tokens", "run.policy", "throughput_tok_s", tmp_path / "none",
                      where={"variant": "nope"})


def _script(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_plot_clis(sweep_dir, tmp_path, capsys):
    df = pd.read_csv(sweep_dir / "results.csv")
    a = sweep_dir / "points" / df[df["variant"] == "ahasd"]["point"].iloc[0]
    g = sweep_dir / "points" / df[df["variant"] == "gpu_only"]["point"].iloc[0]
    assert _script("plot_bars").main(["--results", str(sweep_dir), "--baseline", "gpu_only", "--group", "run.policy",
                                      "--match", "run.policy,ahasd.max_verify_tokens,seed",
                                      "--out", str(tmp_path / "b")]) == 0
    assert _script("plot_timeline").main([str(a), str(g), "--out", str(tmp_path / "t")]) == 0
    assert _script("plot_distributions").main([str(a), str(g), "--labels", "AHASD,GPU", "--out",
                                               str(tmp_path / "d")]) == 0
    ps = _script("plot_sweep")
    assert ps.main(["heatmap", "--results", str(sweep_dir / "results.csv"), "--x", "ahasd.max_verify_tokens",
                    "--y", "run.policy", "--metric", "throughput_tok_s", "--where", "variant=ahasd",
                    "--out", str(tmp_path / "h")]) == 0
    assert ps.main(["lines", "--results", str(sweep_dir), "--x", "ahasd.max_verify_tokens", "--metric",
                    "throughput_tok_s", "--hue", "variant", "--out", str(tmp_path / "l")]) == 0
    assert ps.main(["lines", "--results", str(sweep_dir), "--x", "nope", "--metric", "throughput_tok_s",
                    "--out", str(tmp_path / "x")]) == 2
    for stem in ("b", "t", "d", "h", "l"):
        check_outputs([tmp_path / f"{stem}.pdf", tmp_path / f"{stem}.png"])
