"""Phone-sized memory: each mode checks the models it loads (the autoregressive modes the target
alone), ``memory.reserved_gib`` comes off the top, ``run.weight_bits`` 4 halves the weights, and
``compare`` on a phone reports a decoder that does not fit as a row saying why."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from ahasd_sim.config import load_config
from ahasd_sim.config.errors import ConfigError
from ahasd_sim.hw.platform import Platform
from ahasd_sim.modes.placement import place_for_mode
from ahasd_sim.simulation import run_model, run_simulation
from ahasd_sim.workload.models import get_model

ROOT = Path(__file__).resolve().parent.parent
PHONE16 = ROOT / "hw_configs" / "phone_16gb.yaml"
SMOKE = ROOT / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz"
SHORT = [f"run.trace={SMOKE}", "run.generated_tokens=24", "run.windows=1", "run.timeline=false",
         f"tuning.trace={SMOKE}", "tuning.generated_tokens=16", "tuning.windows=2"]
#: the paper's INT8 pair on the 16 GB phone with nothing held by the OS
INT8_NO_RESERVE = ["run.weight_bits=8", "memory.reserved_gib=0"]


def _cfg(*overrides):
    return load_config(PHONE16, [*SHORT, *overrides])


def test_int4_halves_the_weight_bytes():
    cfg = _cfg()
    assert cfg.run.weight_bits == 4
    for name in ("llama2-7b", "llama2-13b"):
        assert run_model(cfg, name).weight_bytes() == pytest.approx(get_model(name).weight_bytes() / 2, abs=1)


def test_reserve_comes_off_every_rank_by_hand():
    # 16 ranks x 1 GiB, all of the 16 GiB is PIM: a 4 GiB reserve leaves 1 - 4/16 = 0.75 GiB per rank
    pim = Platform.build(_cfg()).pim
    assert pim.model_rank_capacity_bytes == pytest.approx(0.75 * 2**30)
    assert Platform.build(_cfg("memory.reserved_gib=0")).pim.model_rank_capacity_bytes == 2**30
    # plain DRAM beside the PIM ranks holds the reserve first: 20 GiB with 16 GiB of PIM holds 4 GiB
    assert Platform.build(_cfg("memory.capacity_gib=20")).pim.model_rank_capacity_bytes == 2**30


def test_autoregressive_places_the_target_alone_over_every_rank():
    cfg = _cfg(*INT8_NO_RESERVE, "run.mode=autoregressive", "baseline.device=pim")
    p = Platform.build(cfg)
    draft, target = run_model(cfg, "llama2-7b"), run_model(cfg, "llama2-13b")
    part = place_for_mode(p.pim, draft, target, cfg, "striped")
    assert (part.draft_ranks, part.target_ranks, part.shared_ranks) == (0, 16, 0)
    kv = target.kv_bytes_per_token() * cfg.pim.kv_reserve_tokens
    assert part.target_bytes == pytest.approx(target.weight_bytes() + kv)
    # the pair does not fit distinct ranks: 13.0 + 6.7 GB + KV need > 16 ranks of 1 GiB
    assert math.ceil((draft.weight_bytes() + kv / 2) / 2**30) + math.ceil((target.weight_bytes() + kv) / 2**30) > 16
    s = run_simulation(cfg).summary
    assert s["throughput_tok_s"] > 0 and s["platform"]["pim_target_ranks"] == 16
    with pytest.raises(ConfigError) as e:          # a speculative mode loads both: it does not fit
        run_simulation(_cfg(*INT8_NO_RESERVE, "run.mode=ahasd"))
    assert e.value.key_path == "pim.ranks" and "need" in e.value.message


def test_the_reserve_can_make_the_target_not_fit():
    # 13.0 GB INT8 target + KV > 16 x 0.75 GiB = 12.9 GB: refused, naming the reserve
    with pytest.raises(ConfigError) as e:
        run_simulation(_cfg("run.weight_bits=8", "run.mode=autoregressive", "baseline.device=pim"))
    assert e.value.key_path == "pim.ranks" and "memory.reserved_gib" in e.value.message


def test_a_reserve_as_large_as_the_memory_is_a_config_error():
    with pytest.raises(ConfigError) as e:
        _cfg("memory.reserved_gib=16")
    assert e.value.key_path == "memory"


def test_non_pim_platform_checks_the_reserve():
    from ahasd_sim.simulation import check_models_fit_memory
    from ahasd_sim.modes import MODES
    cfg = _cfg("pim.enabled=false", "run.weight_bits=8", "memory.reserved_gib=4")
    p = Platform.build(cfg)
    draft, target = run_model(cfg, "llama2-7b"), run_model(cfg, "llama2-13b")
    with pytest.raises(ConfigError) as e:     # 13.0 GB > 12 GiB left
        check_models_fit_memory(cfg, p, MODES["autoregressive"], draft, target)
    assert "memory.reserved_gib" in e.value.message
    cfg0 = _cfg("pim.enabled=false", "run.weight_bits=8", "memory.reserved_gib=0")
    check_models_fit_memory(cfg0, Platform.build(cfg0), MODES["autoregressive"], draft, target)


def test_compare_on_a_phone_shows_what_fits_and_says_why_the_rest_does_not(tmp_path):
    from ahasd_sim.compare import format_compare, run_compare
    table, _out = run_compare(_cfg(*INT8_NO_RESERVE), ["autoregressive", "ahasd"], None, tmp_path / "c")
    rows = table.set_index("mode")
    assert rows.loc["autoregressive@pim", "throughput_tok_s"] > 0
    assert isinstance(rows.loc["ahasd", "not_run"], str) and "does not fit" in rows.loc["ahasd", "not_run"]
    assert math.isnan(rows.loc["ahasd", "throughput_vs_best"])
    text = format_compare(table, "best")
    assert "ahasd: does not fit: pim.ranks" in text


def test_int4_weights_are_dequantised_on_the_npu_vector_unit():
    from ahasd_sim.workload.ops import forward_ops
    cfg = _cfg()
    npu = Platform.build(cfg).npu
    m4, m8 = run_model(cfg, "llama2-13b"), get_model("llama2-13b")
    op4 = next(o for o in forward_ops(m4, 1, 256) if o.kind.value in ("gemv", "gemm") and o.weight_bytes > 0)
    op8 = next(o for o in forward_ops(m8, 1, 256) if o.name == op4.name)
    assert npu.dequant_ops(op8) == 0.0
    # one unpack + scale per INT4 weight: 2 ops x (weight bytes / 0.5 B)
    assert npu.dequant_ops(op4) == pytest.approx(2.0 * op4.weight_bytes / 0.5)
    bw = Platform.build(cfg).memory.effective_bandwidth_bytes_s
    no_deq = Platform.build(_cfg("npu.dequant_ops_per_weight=0")).npu
    e4, e0 = npu.op_cost(op4, bw).energy_j_by_device["npu"], no_deq.op_cost(op4, bw).energy_j_by_device["npu"]
    b = npu.analyse(op4, bw)
    assert e4 - e0 == pytest.approx(npu.dequant_ops(op4, b.weight_reads) * cfg.npu.vector_pj_per_op * 1e-12)
    # INT4 halves the bytes a decode GEMV streams
    assert b.bus_bytes == pytest.approx(npu.analyse(op8, bw).bus_bytes / 2, rel=1e-3)


def test_a_context_beyond_the_kv_reserve_is_warned_once(capsys):
    import ahasd_sim.simulation as sim
    sim._KV_WARNED.clear()
    cfg = _cfg("pim.kv_reserve_tokens=16", "run.mode=autoregressive", "baseline.device=pim")
    run_simulation(cfg)
    run_simulation(cfg)
    err = capsys.readouterr().err
    assert err.count("pim.kv_reserve_tokens is 16, but the run's context reaches") == 1
    sim._KV_WARNED.clear()
    run_simulation(_cfg("run.mode=autoregressive", "baseline.device=pim"))   # 2048 reserved: quiet
    assert "kv_reserve_tokens" not in capsys.readouterr().err
