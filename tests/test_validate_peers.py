"""Hardware sub-models against the committed peer-simulator outputs (issue 13).

The peers (SCALE-Sim, Ramulator 2) are run by scripts/run_peers.py, never here; these
tests read their committed CSVs and fail when a model drifts away from them."""
from __future__ import annotations

import pandas as pd
import pytest

from ahasd_sim import validate_peers as vp


@pytest.fixture(scope="module")
def npu_table():
    return vp.npu_vs_scalesim()


@pytest.fixture(scope="module")
def mem_table():
    return vp.lpddr5_vs_ramulator()


def test_scalesim_outputs_cover_every_dataflow_and_array(npu_table):
    assert set(npu_table["dataflow"]) == {"ws", "os", "is"}
    assert set(npu_table["array"]) == {"32x32", "64x64", "128x128"}
    assert set(npu_table["m"]) == {1, 4, 16}


def test_npu_matches_scalesim_within_2_percent(npu_table):
    """Configured like SCALE-Sim (fold_model scalesim), every GEMM's cycle count is within 2%."""
    worst = npu_table.loc[npu_table["error_pct"].abs().idxmax()]
    assert abs(worst["error_pct"]) <= 2.0, worst.to_dict()


def test_overlap_fold_model_is_faster_than_scalesim_for_decode(npu_table):
    """The default ONNXim-style overlap pays fill/drain once per op, so on decode GEMMs with
    many folds it is far below SCALE-Sim (the gap the issue reported), never above."""
    assert (npu_table["overlap_predicted"] <= npu_table["predicted"]).all()
    ws = npu_table[(npu_table["dataflow"] == "ws") & (npu_table["m"] == 1)]
    assert ws["overlap_error_pct"].max() < -40.0


def test_lpddr5_matches_ramulator2_goals(mem_table):
    goals = {"sequential_read": 5.0, "random": 15.0, "latency_random_probe": 10.0}
    assert {"sequential_read", "random", "latency_random_probe"} <= set(mem_table["pattern"])
    assert set(mem_table["channels"]) == {1, 4}
    for _, r in mem_table[mem_table["pattern"].isin(goals)].iterrows():
        goal = goals[r["pattern"]]
        if (r["pattern"], r["channels"], r["mapping"]) == ("random", 4, "ChRaBaRoCo"):
            goal = 20.0  # documented miss (docs/validation.md): 8 banks reached, in-order frontend stalls
        if (r["pattern"], r["mapping"], r["refresh"]) == ("sequential_read", "RoBaRaCoCh", "PerBank"):
            goal = 10.0  # documented miss: REFpb stalls a stream that sits in one bank for a whole row
        assert abs(r["error_pct"]) <= goal, r.to_dict()


def test_lpddr5_mapping_mechanism_orders_like_ramulator2(mem_table):
    """Bank-group interleaving > row-interleaved > single-bank, in both tools."""
    seq = mem_table[(mem_table["pattern"] == "sequential_read") & (mem_table["channels"] == 1)
                    & (mem_table["refresh"] == "AllBank")].set_index("mapping")
    for col in ("reference", "predicted"):
        assert seq.loc["MOP4CLXOR", col] > seq.loc["RoBaRaCoCh", col] > seq.loc["ChRaBaRoCo", col]


def test_lpddr5_per_bank_refresh_and_mixed_traffic_move_like_ramulator2(mem_table):
    """Per-bank refresh raises a read stream's bandwidth and read/write turnarounds lower it,
    in both tools, for the same mapping."""
    one = mem_table[(mem_table["channels"] == 1) & (mem_table["mapping"] == "MOP4CLXOR")]
    ab = one[(one["pattern"] == "sequential_read") & (one["refresh"] == "AllBank")].iloc[0]
    pb = one[(one["pattern"] == "sequential_read") & (one["refresh"] == "PerBank")].iloc[0]
    mixed = one[one["pattern"] == "mixed"].iloc[0]
    for col in ("reference", "predicted"):
        assert pb[col] > ab[col] > mixed[col]


def test_h2d_fit_is_closed_form_least_squares():
    """setup = sum((1 - b/(bw m))/m) / sum(1/m^2) minimises sum((setup + b/bw)/m - 1)^2."""
    from ahasd_sim.config import load_config
    from ahasd_sim.hw.platform import Platform
    plat = Platform.build(load_config(vp.REPO_ROOT / vp.GPU_CONFIG))
    bw = plat.h2d.bandwidth_bytes_s
    pts = pd.DataFrame({"group": "h2d", "bytes": [2**20, 2**24, 2**28],
                        "measured_s": [2**20 / bw + 7e-6, 2**24 / bw + 7e-6, 2**28 / bw + 7e-6]})
    assert vp.fit_h2d_setup_us(plat, pts) == pytest.approx(7.0, rel=1e-9)


@pytest.fixture(scope="module")
def gpu_result():
    return vp.gpu_validation()


def test_gpu_fit_on_run1_reproduces_the_config(gpu_result):
    """The H200 config's free parameters are the run-1 least-squares values."""
    f, c = gpu_result["fitted"], gpu_result["configured"]
    assert c["launch_overhead_us"] == pytest.approx(f["launch_overhead_us"], abs=0.01)
    assert c["multi_token_layer_overhead_us"] == pytest.approx(f["multi_token_layer_overhead_us"], abs=0.05)
    assert c["multi_token_kv_bw_fraction"] == pytest.approx(f["multi_token_kv_bw_fraction"], abs=0.011)
    assert c["overlapped_us"] == pytest.approx(f["overlapped_us"], abs=0.05)


def test_gpu_out_of_sample_goals(gpu_result):
    pts = gpu_result["points"]
    out = pts[(pts["group"] == "graph") & (pts["run"] == vp.RUN2_CSV.name)]
    assert len(out) == 180
    assert out["abs_error_pct"].median() <= 8.0
    assert out.groupby("kv_len")["abs_error_pct"].median().max() <= 15.0
    h2d = pts[(pts["group"] == "h2d") & (pts["bytes"] >= vp.H2D_MIN_BYTES)]
    assert h2d["abs_error_pct"].max() <= 5.0


def test_validate_peers_cli_prints_all_tables(capsys, tmp_path):
    from ahasd_sim.__main__ import main
    assert main(["validate", "--peers", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    for needle in ("vs SCALE-Sim", "vs Ramulator 2", "out (run 2)", "in (run 1, fitted)", "H2D pinned copies",
                   "PIM GEMV time vs the AiM simulator", "lpddr5_aim: median |err|", "gddr6_aim: median |err|",
                   "conventional 32 B host reads"):
        assert needle in text
    assert (tmp_path / "peers_validation.png").stat().st_size > 10_000
    assert (tmp_path / "peers_pim.png").stat().st_size > 10_000
    pim = pd.read_csv(tmp_path / "peers_pim.csv")
    assert len(pim) == 384 and pim.groupby("order").size().to_dict() == {"per_group": 192, "reuse_gb": 192}
    assert len(pd.read_csv(tmp_path / "peers_npu.csv")) > 50


def test_missing_peer_output_is_a_one_line_input_error(tmp_path):
    from ahasd_sim.config.errors import InputError
    with pytest.raises(InputError, match="not found"):
        vp.npu_vs_scalesim(tmp_path / "nope.csv")
