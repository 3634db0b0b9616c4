"""The speculation map (ahasd_sim/dse/speculation_map.py, scripts/speculation_map.py): strict map
files, tuning chosen on the selection windows only, the per-cell winner and its paired ratios,
the smallest winning change, the ladder's one-switch ratios."""
from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ahasd_sim.config.errors import InputError
from ahasd_sim.dse import speculation_map as sm
from ahasd_sim.metrics.stats import metric_ci, paired_metric_ci, pooled_rate

ROOT = Path(__file__).resolve().parent.parent


def _write(tmp_path: Path, body: str) -> Path:
    f = tmp_path / "map.yaml"
    f.write_text(textwrap.dedent(body).replace("BASE", str(ROOT / "hw_configs" / "ahasd_mobile.yaml")))
    return f


TINY = """\
name: tiny_map
base:
  config: BASE
  set: {run.generated_tokens: 32, run.windows: 7, run.timeline: false, tuning.generated_tokens: 32}
selection_windows: 2
reference: ar_pim
decoders:
  ar_pim: {set: {run.mode: autoregressive, baseline.device: pim}}
  operator_sync:
    set: {run.mode: operator_sync}
    tunings:
      k1: {run.policy: fixed, policy.fixed.k: 1}
      k4: {run.policy: fixed, policy.fixed.k: 4}
planes:
  paper: {}
  k:
    axes: {pim.vectors_per_weight_read: [null, 8]}
ladder:
  rungs:
    async: {run.mode: async, run.policy: fixed}
    ahasd: {run.mode: ahasd, run.policy: fixed}
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("map")
    spec = sm.load_map_spec(_write(tmp, TINY))
    out = tmp / "out"
    sm.run_map(spec, out, workers=1, progress=False)
    per, cells = sm.analyse(spec, out)
    return spec, out, per, cells


@pytest.mark.parametrize("change, key", [
    ("reference: ar_pim", "reference: operator_sync"),
    ("selection_windows: 2", "selection_windows: 3"),   # leaves 4 report windows: too few for intervals
    ("planes:", "plnes: {}\nplanes:"),
    ("  k:\n    axes: {", "  k:\n    axes: {run.mode: [async], "),
    ("  paper: {}", "  paper: {config: no_such.yaml}"),
    ("tunings:", "tunings:\n      bad: {no.such.key: 1}"),
])
def test_a_bad_map_file_is_one_line_naming_the_file_and_key(tmp_path, change, key):
    f = _write(tmp_path, TINY.replace(change, key, 1))
    with pytest.raises(InputError) as exc:
        sm.load_map_spec(f)
    msg = str(exc.value)
    assert "\n" not in msg and str(f) in msg


def test_tuning_is_chosen_on_the_selection_windows_and_reported_on_the_others(tiny):
    """Per (cell, decoder): the tuning with the highest pooled throughput over windows 0..1 is
    chosen, and every reported rate is the ratio of totals over windows 2..6 alone (the report
    windows never decide the tuning)."""
    spec, out, per, cells = tiny
    results = pd.read_csv(out / "paper" / "results.csv")
    sel = spec.selection_windows
    row = per[(per["plane"] == "paper") & (per["decoder"] == "operator_sync")].iloc[0]
    by_tuning = {}
    for t in ("k1", "k4"):
        point = results[results["variant"] == f"operator_sync~{t}"].iloc[0]["point"]
        w = pd.read_csv(out / "paper" / "points" / point / "windows.csv").set_index("window").sort_index()
        by_tuning[t] = w
    chosen = max(by_tuning, key=lambda t: pooled_rate(by_tuning[t].iloc[:sel], "throughput_tok_s"))
    assert row["tuning"] == chosen
    rep = by_tuning[chosen].iloc[sel:]
    t, ci = metric_ci(rep, "throughput_tok_s")
    assert row["report_windows"] == len(by_tuning[chosen]) - sel == 5
    assert row["throughput_tok_s"] == pytest.approx(t, rel=1e-12)
    assert (row["throughput_tok_s_ci95_low"], row["throughput_tok_s_ci95_high"]) == pytest.approx(tuple(ci), rel=1e-12)


def test_each_cell_names_its_best_decoder_and_paired_ratios(tiny):
    """The best decoder has the largest report throughput; the best speculative decoder's ratio
    to the reference is the paired ratio of their report windows; 'wins' = its lower bound > 1."""
    spec, out, per, cells = tiny
    assert len(cells) == 3 and set(cells["plane"]) == {"paper", "k"}
    for _, c in cells.iterrows():
        rows = per[(per["plane"] == c["plane"]) & per["status"].eq("ok")]
        if c["plane"] == "k":
            k = c["pim.vectors_per_weight_read"]
            rows = rows[rows["pim.vectors_per_weight_read"].isna() if pd.isna(k) else rows["pim.vectors_per_weight_read"] == k]
        best = rows.sort_values("throughput_tok_s", ascending=False).iloc[0]
        assert c["best_decoder"] == best["decoder"]
        spec_row = rows[rows["decoder"] == "operator_sync"].iloc[0]
        ref_row = rows[rows["decoder"] == "ar_pim"].iloc[0]
        m, ci = paired_metric_ci(*spec_row["_windows"].align(ref_row["_windows"], join="inner", axis=0),
                                 "throughput_tok_s")
        assert c["spec_vs_ref"] == pytest.approx(m, rel=1e-12)
        assert c["speculation_wins"] == (ci[0] > 1.0)
    base = cells[cells["plane"] == "paper"].iloc[0]
    assert base["n_changed"] == 0
    k8 = cells[(cells["plane"] == "k") & (cells["pim.vectors_per_weight_read"] == 8)].iloc[0]
    assert k8["changed_from_base"] == "pim.vectors_per_weight_read" and k8["n_changed"] == 1
    k1 = cells[(cells["plane"] == "k") & cells["pim.vectors_per_weight_read"].isna()].iloc[0]
    assert k1["n_changed"] == 0                      # null is the base platform's own k


def test_smallest_winning_changes_hand_case():
    """Wins at 1 and 2 changed axes: only the 1-change cells are returned, larger margin first;
    no win at all gives an empty table."""
    cells = pd.DataFrame({"plane": ["a", "a", "b", "b"], "n_changed": [2, 1, 1, 0],
                          "speculation_wins": [True, True, True, False], "spec_vs_ref": [3.0, 1.2, 1.5, 0.5]})
    got = sm.smallest_winning_changes(cells)
    assert list(got["spec_vs_ref"]) == [1.5, 1.2]
    assert sm.smallest_winning_changes(cells.assign(speculation_wins=False)).empty


def test_pareto_keeps_rows_not_dominated_at_the_interval_level():
    """B is dominated by A (A's worst ends beat B's best ends, same area); C has a smaller area and
    stays; D overlaps A's intervals and stays."""
    def row(t, e, a, h=0.1):
        return {"status": "ok", "throughput_tok_s": t, "throughput_tok_s_ci95_low": t - h,
                "throughput_tok_s_ci95_high": t + h, "tokens_per_j": e, "tokens_per_j_ci95_low": e - h,
                "tokens_per_j_ci95_high": e + h, "pim_logic_area_mm2": a}
    per = pd.DataFrame([row(10, 5, 1.0), row(5, 2, 1.0), row(4, 1, 0.5), row(9.9, 5.1, 1.0)], index=list("ABCD"))
    assert list(sm.pareto_rows(per).index) == ["A", "C", "D"]


def test_the_ladder_reports_each_rung_against_the_one_before(tiny, tmp_path):
    spec, out, per, cells = tiny
    from ahasd_sim.sweep.runner import run_sweep
    lspec = sm.ladder_spec(spec, spec.ladder, [], "base")
    run_sweep(lspec, tmp_path / "ladder", workers=1, progress=False)
    t = sm.ladder_table(spec, list(spec.ladder), tmp_path / "ladder")
    assert list(t["rung"]) == ["async", "ahasd"] and (t["status"] == "ok").all()
    assert pd.isna(t["vs_previous"].iloc[0])
    assert t["vs_previous"].iloc[1] == pytest.approx(t["throughput_tok_s"].iloc[1] / t["throughput_tok_s"].iloc[0],
                                                     rel=1e-12)


def test_the_shipped_maps_load():
    for f in sorted((ROOT / "hw_configs" / "studies").glob("speculation_map*.yaml")):
        spec = sm.load_map_spec(f)
        assert spec.planes and any(d.speculative for d in spec.decoders.values())


def test_a_region_map_draws_a_null_axis_value_as_the_default(tmp_path):
    """A null axis value (the platform's derived default) reads back from results.csv as NaN,
    which equals nothing: the map labels it 'default' instead of failing to place it."""
    from ahasd_sim.plots.region_map import region_map
    cells = pd.DataFrame({"plane": ["k"] * 2, "pim.vectors_per_weight_read": [float("nan"), 8.0],
                          "best_decoder": ["ar_pim", "operator_sync"], "spec_vs_ref": [0.6, 1.2],
                          "spec_vs_ref_ci95_low": [0.5, 1.1], "spec_vs_ref_ci95_high": [0.7, 1.3],
                          "speculation_wins": [False, True]})
    paths = region_map(cells, ["pim.vectors_per_weight_read"], ["ar_pim", "operator_sync"], {}, tmp_path / "m")
    assert all(p.is_file() and p.stat().st_size > 0 for p in paths)
