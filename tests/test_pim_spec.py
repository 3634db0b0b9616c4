"""PIM device specs (hw/pim_spec.py): rates derived by hand from the timings, the GEMV
command-sequence time against the AiM simulator's committed outputs, topology limits."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from ahasd_sim.config.errors import ConfigError
from ahasd_sim.hw import pim_spec as P
from ahasd_sim.validate_peers import AIM_CSV, PIM_MEDIAN_GOAL_PCT, PIM_WORST_GOAL_PCT, pim_gemv_time_s, pim_vs_aim


# ------------------------------------------------------------------ derived rates by hand
def test_lpddr5_aim_internal_bandwidth_by_hand():
    # LPDDR5_AiM_timing: MAC16 -> MAC16 nCCD = 4 nCK of 1.25 ns; 16 banks each read one
    # 32 B column (x16 x BL16) per MAC16: 16 x 32 B / 5 ns = 102.4 GB/s per channel
    banks, col_b, nccd, tck = 16, 32, 4, 1.25e-9
    per_ch = banks * col_b / (nccd * tck)
    r = P.derive(P.preset("lpddr5_aim"))
    assert r.internal_bytes_s_per_channel == pytest.approx(per_ch, rel=1e-12)
    assert per_ch == pytest.approx(102.4e9)
    assert r.internal_bytes_s == pytest.approx(32 * per_ch)


def test_gddr6_aim_rates_match_the_chip():
    # GDDR6-AiM: MAC16 every nCCDL = 2 nCK of 0.5 ns -> 16 x 32 B / 1 ns = 512 GB/s per
    # channel; 16 lanes x 16 banks at 1 GHz = 256 GMAC/s = 512 GFLOPS per channel,
    # 1 TFLOPS per 2-channel chip (ISSCC 2022)
    r = P.derive(P.preset("gddr6_aim"))
    assert r.internal_bytes_s_per_channel == pytest.approx(16 * 32 / 1e-9)
    assert 2 * r.ops_s_per_die == pytest.approx(1.024e12)


def test_lpddr5_pim_is_table2_consistent():
    # 4 x16 channels at 6400 MT/s = 51.2 GB/s off-chip; 16 dies (4 ch x 2 ranks x 2 x8 dies)
    # of 4 GiB = 64 GiB; one x8 die: 16 banks x 16 B / (tCCD_L 4 x 1.25 ns) = 51.2 GB/s, and
    # 102.4 GOPS INT8 = 51.2 GMAC/s consumes exactly that (balanced)
    s = P.preset("lpddr5_pim")
    r = P.derive(s)
    assert s.dies == 16 and s.capacity_gib == pytest.approx(64.0)
    assert r.internal_bytes_s_per_die == pytest.approx(16 * 16 / 5e-9)
    assert r.ops_s_per_die == pytest.approx(102.4e9)
    assert r.macs_s_per_die * s.element_bytes == pytest.approx(r.internal_bytes_s_per_die)
    assert r.internal_bytes_s == pytest.approx(819.2e9)
    assert r.internal_bytes_s / 51.2e9 == pytest.approx(16.0)


def test_hbm_pim_reproduces_the_papers_figures():
    r = P.derive(P.preset("hbm_pim"))
    assert r.internal_bytes_s == pytest.approx(1.2288e12, rel=1e-9)   # 4 x 307.2 GB/s
    assert r.ops_s == pytest.approx(1.2288e12, rel=1e-9)              # "1.2 TFLOPS"


# ------------------------------------------------------------------ GEMV sequence by hand
def test_gemv_cycles_by_hand_lpddr5_aim():
    # 1 channel, cols 1024 = one chunk of opsize 64, g output groups of 16 rows.
    # WR_GB = CAS 1 + 63 x 4 + 1 = 254; per group: WR_BIAS 1 + 1 = 2,
    # MAC_ABK 17 + 56 + 63 x 4 + 1 = 326, RD_MAC 1 + 0 + 4 + 1 = 6; mode switch 32.
    # per_group: two mode switches per group (+ the first one);
    # reuse_gb: two per batch of up to 32 groups (the preset's 32 result registers, CENT's
    # balanced batches of ceil(g / ceil(g / 32))); inside a batch the WR_BIAS go back to back
    # at nCCD 4 (not 2) apart, and a MAC_ABK after a MAC_ABK waits nRTP 4 (not 1) before PREA
    s = P.preset("lpddr5_aim")
    for g in (1, 5, 32, 33, 64):
        assert P.gemv_cycles(s, 16 * g, 1024, 1, 1, refresh=False, order="per_group") == \
            32 + 254 + g * (2 + 32 + 326 + 32 + 6)
        b = -(-g // 32)
        size = -(-g // b)
        sizes = [size] * (b - 1) + [g - size * (b - 1)]
        per_batch = sum(2 * 32 + (4 * m - 2) + m * 326 + 3 * (m - 1) + m * 6 for m in sizes)
        assert P.gemv_cycles(s, 16 * g, 1024, 1, 1, refresh=False) == 32 + 254 + per_batch


def test_mode_switch_counts_of_a_4096_square_gemv_on_one_channel():
    """4 chunks x 256 output groups: per_group switches mode twice per group, 1 + 4 x 256 x 2
    = 2,049 (the AiM simulator counted 2,049 TMOD for this trace on GDDR6, which it never
    refreshes; gemv.csv); reuse_gb twice per batch of 32 groups, 1 + 4 x 8 x 2 = 65."""
    s = P.preset("gddr6_aim")
    assert P.gemv_counts(s, 4096, 4096, 1, 1, order="per_group")["TMOD"] == 2049
    assert P.gemv_counts(s, 4096, 4096, 1, 1)["TMOD"] == 65
    ref = pd.read_csv(AIM_CSV)
    r = ref[(ref.rows == 4096) & (ref.cols == 4096) & (ref.channels == 1) & (ref.vectors == 1)
            & (ref.preset == "gddr6_aim")]
    assert set(r["max_ch_num_TMOD_commands"]) == {2049}


def test_refresh_stretches_by_the_stated_factor():
    s = P.preset("gddr6_aim")
    on, off = P.gemv_cycles(s, 4096, 4096), P.gemv_cycles(s, 4096, 4096, refresh=False)
    assert on / off == pytest.approx(1 / (1 - (210 + 32 + 56) / 3333))
    on, off = (P.gemv_cycles(s, 4096, 4096, order="per_group"),
               P.gemv_cycles(s, 4096, 4096, refresh=False, order="per_group"))
    assert on / off == pytest.approx(1 / (1 - (210 + 32 + 56) / 3333))


@pytest.mark.parametrize("name", sorted(P.PRESETS))
def test_gemv_time_scales(name):
    s = P.preset(name)
    t = lambda r, c, v=1, ch=1: P.gemv_time_s(s, r, c, v, ch)  # noqa: E731
    # one-vector overhead (first mode switch) is tiny: vectors scale linearly
    assert t(4096, 4096, 4) == pytest.approx(4 * t(4096, 4096), rel=1e-3)
    # rows in whole output groups: linear in rows, less the WR_GB broadcast per chunk, which
    # does not grow with the rows (amortised: a bit under 2x)
    assert t(8192, 4096) == pytest.approx(2 * t(4096, 4096), rel=2e-2)
    assert t(8192, 4096) < 2 * t(4096, 4096)
    # cols in whole chunks: linear in cols (every term is per chunk)
    assert t(4096, 8192) == pytest.approx(2 * t(4096, 4096), rel=1e-3)
    # twice the channels about halves the time while the rows fill every bank; the
    # broadcast is paid in every channel, so a bit more than half
    assert t(4096, 4096, 1, 2) == pytest.approx(t(4096, 4096) / 2, rel=2e-2)
    assert t(4096, 4096, 1, 2) > t(4096, 4096) / 2
    # never below the weight bytes at the derived internal rate
    assert t(4096, 4096) > P.gemv_stream_time_s(s, 4096, 4096, 1, 1)
    # a ragged output group costs a whole group
    assert t(4096 + 1, 4096) > t(4096, 4096)


def test_slow_mac_unit_makes_the_gemv_compute_bound():
    s = P.preset("lpddr5_pim")
    slow = P.with_topology("lpddr5_pim", mac_clock_ghz=0.4)   # half the MAC clock
    assert P.mac_spacing_cycles(slow) == pytest.approx(2 * P.mac_spacing_cycles(s))
    assert P.gemv_time_s(slow, 4096, 4096) > 1.5 * P.gemv_time_s(s, 4096, 4096)


# ------------------------------------------------------------------ vs the AiM simulator
def test_pim_gemv_time_matches_the_committed_aim_runs():
    t = pim_vs_aim(AIM_CSV)
    ref = pd.read_csv(AIM_CSV)
    assert len(t) == len(ref) and set(t["preset"]) == {"lpddr5_aim", "gddr6_aim"}
    assert set(t["order"]) == {"per_group"}
    for p, s in t.groupby("preset"):
        a = s["error_pct"].abs()
        assert a.median() <= PIM_MEDIAN_GOAL_PCT, p
        assert a.max() <= PIM_WORST_GOAL_PCT, p
    # the public function is what the table uses (time_s = cycles x the preset's tCK)
    r = ref.iloc[0]
    assert pim_gemv_time_s(r["preset"], int(r["rows"]), int(r["cols"]), int(r["vectors"]), int(r["channels"]),
                           refresh=False, order="per_group") == pytest.approx(t.iloc[0]["predicted_s"])
    assert r["time_s"] == pytest.approx(r["cycles"] * r["tCK_ns"] * 1e-9)


def test_default_reuse_order_matches_the_committed_reuse_runs():
    """Independent AiM runs of CENT's reuse-GB order (gemv_reuse_gb.csv): the default order of
    pim_gemv_time_s (refresh off, as the peer runs) meets the goal per preset, and the mode
    switches the simulator counted are the ones we count."""
    from ahasd_sim.validate_peers import AIM_REUSE_CSV
    t = pim_vs_aim(AIM_REUSE_CSV)
    assert set(t["order"]) == {"reuse_gb"} and set(t["preset"]) == {"lpddr5_aim", "gddr6_aim"}
    for p, s in t.groupby("preset"):
        a = s["error_pct"].abs()
        assert a.median() <= PIM_MEDIAN_GOAL_PCT and a.max() <= PIM_WORST_GOAL_PCT, p
    ref = pd.read_csv(AIM_REUSE_CSV)
    r = ref[(ref.preset == "gddr6_aim") & (ref.rows == 4096) & (ref.cols == 4096) & (ref.channels == 1)
            & (ref.vectors == 1)].iloc[0]
    assert int(r["max_ch_num_TMOD_commands"]) == P.gemv_counts(P.preset("gddr6_aim"), 4096, 4096, 1, 1)["TMOD"] == 65
    assert pim_gemv_time_s("gddr6_aim", 4096, 4096, channels=1, refresh=False) == pytest.approx(
        t[(t.preset == "gddr6_aim") & (t.rows == 4096) & (t.cols == 4096) & (t.channels == 1)
          & (t.vectors == 1)]["predicted_s"].iloc[0])


# ------------------------------------------------------------------ bad input
def test_ranks_beyond_jedec_are_a_config_error_naming_the_key():
    with pytest.raises(ConfigError) as e:
        P.with_topology("lpddr5_pim", ranks_per_channel=4)
    assert e.value.key_path == "pim_spec.lpddr5_pim.ranks_per_channel"
    assert "\n" not in str(e.value) and "at most 2" in str(e.value)


def test_dies_and_unknown_preset_and_field():
    with pytest.raises(ConfigError) as e:
        P.with_topology("lpddr5_pim", dies_per_rank=3)
    assert e.value.key_path.endswith("dies_per_rank")
    with pytest.raises(ConfigError) as e:
        P.preset("lpddr5-pim")
    assert e.value.key_path == "pim.preset" and "lpddr5_pim" in str(e.value)
    with pytest.raises(ConfigError) as e:
        P.with_topology("gddr6_aim", bank_groups=2)
    assert e.value.key_path == "pim_spec.gddr6_aim.bank_groups"
    with pytest.raises(ValueError):
        pim_gemv_time_s("gddr6_aim", 4096, 4096, channels=33)
    assert math.isfinite(pim_gemv_time_s("hbm_pim", 1, 1))


def test_contention_runs_and_our_bank_time_rule():
    from ahasd_sim.validate_peers import pim_contention
    df = pim_contention()
    for p, s in df.groupby("preset"):
        s = s.sort_values("host_reads_per_pim_isr")
        # no host reads: no slowdown; more host reads: the GEMV slows monotonically (peer and ours)
        assert s["gemv_slowdown"].iloc[0] == pytest.approx(1.0)
        assert s["gemv_slowdown"].is_monotonic_increasing and s["ours_gemv_slowdown"].is_monotonic_increasing
        # ours within 10% of the peer's slowdown at every interleaving rate
        assert ((s["ours_gemv_slowdown"] / s["gemv_slowdown"] - 1).abs() <= 0.10).all(), p
