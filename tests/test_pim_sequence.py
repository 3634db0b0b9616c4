"""The simulator's PIM GEMV cost is the driver's command sequence on the preset (issue 25).

Expected numbers are derived by hand in each docstring from the lpddr5_pim preset
(hw/pim_spec.py): tCK 1.25 ns; a die has 16 banks, one MAC unit each, 16 B per column
access, 1 KB rows; nCCD(MAC) = nCCD(WR) = 4, nRPab 15, nRCDRDMAC 56, nMODCH 32, CAS 1,
nBL 4, nCLREG 0; refresh tRFCab 224 / tREFI 3125 nCK; MAC unit 4 lanes at 0.8 GHz; a JEDEC
die: the all-bank ACT obeys tRRD 4 / tFAW 16 nCK, so its 16 banks spread over 3 x 16 + 3 x 4
= 60 nCK; 32-bit result registers: 16 banks x 4 B = 64 B = 4 bursts of 16 B per WR_BIAS /
RD_MAC; the aim unit's 32 result registers per bank; default driver order reuse_gb (two
mode switches per batch of up to 32 output groups); a MAC_ABK right after another waits
tRTP 4 nCK before its PREA, 3 more than after a mode switch.

Per ISR (mode switches counted apart): WR_GB(n) = 1 + (n - 1) x 4 + 1; WR_BIAS = 1 + 3 x 4
+ 1 = 14; MAC_ABK(n) = 15 + 60 + 56 + (n - 1) x 4 + 1; RD_MAC = 1 + 0 + 4 x 4 + 1 = 18.
"""
from __future__ import annotations

import dataclasses

import pytest

from ahasd_sim.hw import Lpddr5Memory, PimMemory, pim_spec
from ahasd_sim.workload.models import get_model
from ahasd_sim.workload.ops import forward_ops
from test_hw_helpers import make_cfg

TCK = 1.25e-9
#: refresh stretch: every 3125 nCK the die loses tRFCab 224 + re-opening the row (15 + 56)
STRETCH = 3125 / (3125 - 224 - 15 - 56)


def _pim(**pim) -> PimMemory:
    cfg = make_cfg({"pim": pim})
    return PimMemory(cfg.pim, Lpddr5Memory(cfg.memory))


def _op(model: str, name: str, n: int = 1, kv: int = 128):
    return next(o for o in forward_ops(get_model(model), n, kv) if o.name == name)


def test_a_4096_square_int8_gemv_on_two_dies_is_the_hand_counted_isr_sequence():
    """LLaMA2-7B q_proj (4096 x 4096 INT8), one token, on 2 dies (32 MAC units):

    * input chunks: 4096 / 1024 elements per row = 4, opsize 1024 / 16 = 64 MAC commands;
    * output groups: 4096 / 32 = 128 per chunk;
    * WR_GB(64) = 254; WR_BIAS = 14; MAC_ABK(64) = 15 + 60 + 56 + 252 + 1 = 384; RD_MAC = 18;
    * 128 groups in ceil(128 / 32) = 4 batches: 2 x 4 = 8 mode switches of 32 per chunk, and
      4 x 31 MAC_ABK after a MAC_ABK (+3 each: 372);
    * cycles = 32 (first mode switch) + 4 x (254 + 256 + 372 + 128 x (14 + 384 + 18)) = 216,552;
    * time = 216,552 x 1.25 ns x 3125 / 2830 (refresh) = 298.91 us.
    """
    op = _op("llama2-7b", "q_proj")
    assert op.pim_gemv == (4096, 4096, 1, 1.0)
    c = _pim().gemv_cost(op, 2)
    assert c.duration_s == pytest.approx(216_552 * TCK * STRETCH, rel=1e-12, abs=0)
    assert c.duration_s == pytest.approx(298.91e-6, rel=1e-4)
    # every weight byte is read once, bank-locally; the data buses carry only the protocol I/O
    # (WR_GB 4,096 B + WR_BIAS / RD_MAC 2 x 512 x 64 B, per die)
    assert _pim().bytes_read(op) == 4096 * 4096 and c.bus_bytes == 2 * (4096 + 2 * 512 * 64)
    assert _pim(protocol_io="free").gemv_cost(op, 2).bus_bytes == 0


def test_each_input_vector_repeats_the_sequence_after_one_mode_switch():
    """4 tokens pre-verified: the global buffer holds one vector, so 4 x the per-vector
    cycles (216,520) after the one initial mode switch: 32 + 4 x 216,520 = 866,112."""
    op = _op("llama2-7b", "q_proj", n=4)
    assert op.pim_gemv == (4096, 4096, 4, 1.0)
    assert _pim().gemv_cost(op, 2).duration_s == pytest.approx(866_112 * TCK * STRETCH, rel=1e-12, abs=0)
    assert _pim().bytes_read(op) == 4 * 4096 * 4096


def test_gqa_attention_layout_and_its_cost():
    """Qwen2.5-Coder-1.5B: 12 query heads, 2 KV heads of 128 dims, INT8 KV. At KV length 127 and
    one token, attn_score is the 128 keys x 2 KV heads = 256 rows of 128 elements, multiplied by
    12 / 2 = 6 query vectors; on 16 dies (256 MAC units) one output group per chunk (at KV 128
    the 258 rows need two in one batch, 32 + 6 x (30 + 64 + 2 x 192 + 3) = 2,918 cycles):
    opsize 128 / 16 = 8; per vector WR_GB(8) = 1 + 7 x 4 + 1 = 30, one batch (2 x 32 mode
    switches), one group 14 + (15 + 60 + 56 + 7 x 4 + 1) + 18 = 192;
    cycles = 32 + 6 x (30 + 64 + 192) = 1,748."""
    op = _op("qwen2.5-coder-1.5b", "attn_score", kv=127)
    assert op.pim_gemv == (256, 128, 6, 1.0)
    p = _pim()
    new_kv = op.kv_write_bytes
    expect = 1_748 * TCK * STRETCH + new_kv / (16 * 51.2e9)
    assert p.gemv_cost(op, 16).duration_s == pytest.approx(expect, rel=1e-12, abs=0)
    # each query head re-reads its KV head's keys: 6 x 258 x 128 bytes + the new K/V written
    assert p.bytes_read(op) == 6 * 256 * 128 + new_kv
    two_groups = _op("qwen2.5-coder-1.5b", "attn_score", kv=128)
    assert p.gemv_cost(two_groups, 16).duration_s == pytest.approx(
        2_918 * TCK * STRETCH + new_kv / (16 * 51.2e9), rel=1e-12, abs=0)
    ctx = _op("qwen2.5-coder-1.5b", "attn_context", kv=127)
    assert ctx.pim_gemv == (256, 128, 6, 1.0)           # V transposed: kv_dim rows of 128 tokens


def test_a_typed_bandwidth_sets_the_mac_command_spacing():
    """A typed 25.6 GB/s per unit: spacing = 16 units x 16 B / (25.6 GB/s x 1.25 ns) = 8 nCK
    (the derived 51.2 GB/s gives 4), so MAC_ABK(64) = 131 + 63 x 8 + 1 = 636 and the 4096^2
    GEMV on 2 dies takes 32 + 4 x (254 + 256 + 372 + 128 x (14 + 636 + 18)) = 345,576 cycles."""
    op = _op("llama2-7b", "q_proj")
    p = _pim(internal_bw_gb_s=25.6)
    assert p.gemv_cost(op, 2).duration_s == pytest.approx(345_576 * TCK * STRETCH, rel=1e-12, abs=0)
    # a typed MAC rate of half the derived one (51.2 GOPS) makes each MAC command take 8 nCK too
    q = _pim(unit_gops_int8=51.2)
    assert q.gemv_cost(op, 2).duration_s == pytest.approx(345_576 * TCK * STRETCH, rel=1e-12, abs=0)


def test_the_sequence_is_never_faster_than_streaming_at_the_derived_rate():
    """Lower bound: bytes / (dies x 51.2 GB/s). Large weight GEMVs reach 45-75% of it (the
    ACT spread over tFAW, mode switches and blocking RD_MAC per output group: a full 64-column
    MAC_ABK streams 256 of about 420 cycles, a half chunk 128 of about 290), short KV rows far less."""
    p = _pim()
    for model in ("llama2-7b", "qwen2.5-coder-1.5b", "llama2-13b"):
        for op in forward_ops(get_model(model), 1, 512):
            if op.kind.value not in ("gemv", "gemm", "attention"):
                continue
            for dies in (1, 4, 16):
                t = p.gemv_cost(op, dies).duration_s
                stream = p.bytes_read(op) / (dies * 51.2e9)
                assert t >= stream
                if op.weight_bytes > 4 * 2**20 and dies <= 4:
                    assert 0.45 < stream / t < 0.75, (model, op.name, dies, stream / t)


def test_roofline_timing_is_the_v01_model():
    op = _op("llama2-7b", "q_proj")
    p = _pim(gemv_timing="roofline")
    assert p.gemv_cost(op, 2).duration_s == pytest.approx(4096 * 4096 / (2 * 51.2e9) + 100e-9, rel=1e-12, abs=0)


def test_the_driver_sequence_is_the_one_validated_against_the_aim_simulator():
    """The simulator's cost and validate_peers.pim_gemv_time_s are the same function: a
    validated shape costs the same in both (lpddr5_aim preset, 16-bit elements, all 32 channels
    = 32 dies of one rank each)."""
    from ahasd_sim.validate_peers import pim_gemv_time_s
    cfg = make_cfg({"pim": {"preset": "lpddr5_aim", "ranks": 32, "rank_capacity_gib": 4.0}})
    p = PimMemory(cfg.pim, Lpddr5Memory(cfg.memory))
    op = dataclasses.replace(_op("llama2-7b", "q_proj"), pim_gemv=(4096, 4096, 1, 2.0), kv_write_bytes=0.0)
    assert p.gemv_cost(op, 32).duration_s == pytest.approx(pim_gemv_time_s("lpddr5_aim", 4096, 4096), rel=1e-12)
