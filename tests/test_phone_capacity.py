"""Phone-sized memory: each mode checks the models it loads (the autoregressive modes the target
alone), ``memory.reserved_gib`` comes off the top, ``run.precision`` w4a8 halves the weights, and
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
INT8_NO_RESERVE = ["run.precision=w8a8", "memory.reserved_gib=0"]


def _cfg(*overrides):
    return load_config(PHONE16, [*SHORT, *overrides])


def test_w4a8_halves_the_weight_bytes():
    cfg = _cfg()
    assert cfg.run.precision == "w4a8"
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
        run_simulation(_cfg("run.precision=w8a8", "run.mode=autoregressive", "baseline.device=pim"))
    assert e.value.key_path == "pim.ranks" and "memory.reserved_gib" in e.value.message


def test_a_reserve_as_large_as_the_memory_is_a_config_error():
    with pytest.raises(ConfigError) as e:
        _cfg("memory.reserved_gib=16")
    assert e.value.key_path == "memory"


def test_non_pim_platform_checks_the_reserve():
    from ahasd_sim.simulation import check_models_fit_memory
    from ahasd_sim.modes import MODES
    cfg = _cfg("pim.enabled=false", "run.precision=w8a8", "memory.reserved_gib=4")
    p = Platform.build(cfg)
    draft, target = run_model(cfg, "llama2-7b"), run_model(cfg, "llama2-13b")
    with pytest.raises(ConfigError) as e:     # 13.0 GB > 12 GiB left
        check_models_fit_memory(cfg, p, MODES["autoregressive"], draft, target)
    assert "memory.reserved_gib" in e.value.message
    cfg0 = _cfg("pim.enabled=false", "run.precision=w8a8", "memory.reserved_gib=0")
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


def test_run_precision_names_are_the_registry():
    from ahasd_sim.config.run import PRECISION_NAMES
    from ahasd_sim.workload.precision import PRECISIONS
    assert set(PRECISION_NAMES) == set(PRECISIONS)


def test_widened_weights_are_charged_on_the_npu_vector_unit_and_native_int4_is_not():
    """w4afp16 widens every INT4 weight to FP16 on the vector unit (2 ops each,
    workload/precision.py); w4a8 and w4a16 feed the array INT4 directly (no widening)."""
    from ahasd_sim.simulation import build_platform
    from ahasd_sim.workload.ops import forward_ops
    from ahasd_sim.modes import MODES
    for prec, per_weight in (("w4a8", 0.0), ("w4a16", 0.0), ("w4afp16", 2.0)):
        cfg = _cfg(f"run.precision={prec}")
        npu = build_platform(cfg, MODES["ahasd"]).npu
        m = run_model(cfg, "llama2-13b")
        op = next(o for o in forward_ops(m, 1, 256) if o.kind.value in ("gemv", "gemm") and o.weight_bytes > 0)
        assert npu.dequant_ops(op) == pytest.approx(per_weight * op.weight_bytes / 0.5)
        bw = npu.memory.effective_bandwidth_bytes_s
        b = npu.analyse(op, bw)
        e = npu.op_cost(op, bw).energy_j_by_device["npu"]
        npu.dequant_ops_per_weight = 0.0
        e0 = npu.op_cost(op, bw).energy_j_by_device["npu"]
        assert e - e0 == pytest.approx(per_weight * op.weight_bytes / 0.5 * b.weight_reads
                                       * cfg.npu.vector_pj_per_op * 1e-12)
    # INT4 halves the bytes a decode GEMV streams
    m8 = get_model("llama2-13b")
    op8 = next(o for o in forward_ops(m8, 1, 256) if o.name == op.name)
    assert op.weight_bytes == pytest.approx(op8.weight_bytes / 2)


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


def test_a_mode_that_tunes_no_placement_takes_the_first_layout_that_fits():
    """On the 16 GB phone with single-die placement (pim.die_lockstep false) and a 2048-token KV
    reserve, the drafter and target striped over every rank overflow a shared rank (1.32 GB in
    0.81 GB), so npu_sync (which tunes no placement) under pim.partition_policy auto takes the next
    layout of placement.UNTUNED_ORDER that holds both; pinning striped is still an error naming
    the key."""
    from ahasd_sim.config.loader import load_config
    from ahasd_sim.config.errors import ConfigError
    from ahasd_sim.simulation import run_simulation
    short = ["run.mode=npu_sync", "run.generated_tokens=16", "run.windows=1", "run.timeline=false",
             "pim.die_lockstep=false", "pim.kv_reserve_tokens=2048"]
    cfg = load_config(ROOT / "hw_configs" / "phone_16gb.yaml", short)
    res = run_simulation(cfg)
    assert res.summary["pim_placement"]["policy"] != "striped"
    assert res.summary["generated_tokens"] == 16
    with pytest.raises(ConfigError, match="pim.partition_policy"):
        run_simulation(load_config(ROOT / "hw_configs" / "phone_16gb.yaml", [*short, "pim.partition_policy=striped"]))
