"""OpCost composition, energy ledger conservation, Platform build, area table, shipped configs."""
from __future__ import annotations

from pathlib import Path

import pytest
import simpy

from ahasd_sim.config import ConfigError, load_config
from ahasd_sim.hw import EnergyLedger, OpCost, Platform, area_table, par, seq
from ahasd_sim.hw.area import edc_bits, queue_bits, tvc_bits
from test_hw_helpers import dense_decoder_ops, elementwise, linear, make_cfg

REPO = Path(__file__).resolve().parents[1]
CONFIGS = sorted((REPO / "hw_configs").glob("*.yaml"))


# ------------------------------------------------------------------ OpCost
def test_opcost_seq_par_repeat():
    a = OpCost(1.0, {"npu": 2.0}, bus_bytes=10, macs=5)
    b = OpCost(3.0, {"npu": 1.0, "pim": 4.0}, bus_bytes=1, macs=1)
    s = seq(a, b)
    assert (s.duration_s, dict(s.energy_j_by_device), s.bus_bytes, s.macs) == (4.0, {"npu": 3.0, "pim": 4.0}, 11, 6)
    p = par(a, b)
    assert (p.duration_s, dict(p.energy_j_by_device), p.bus_bytes, p.macs) == (3.0, {"npu": 3.0, "pim": 4.0}, 11, 6)
    assert (par().duration_s, par().energy_j, par().macs) == (0.0, 0.0, 0.0)
    r = a.repeat(3)
    assert (r.duration_s, r.energy_of("npu"), r.bus_bytes, r.macs) == (3.0, 6.0, 30, 15)
    z = a.repeat(0)
    assert (z.duration_s, z.energy_j, z.bus_bytes, z.macs) == (0.0, 0.0, 0, 0)
    with pytest.raises(ValueError, match="repeat count must be >= 0, got -1"):
        a.repeat(-1)
    assert a.energy_of("pim") == 0.0 and b.energy_of("pim") == 4.0
    w = b.with_energy("pim", 0.5).with_energy("gts", 0.25)
    assert (w.duration_s, dict(w.energy_j_by_device), w.bus_bytes, w.macs) == (3.0, {"npu": 1.0, "pim": 4.5, "gts": 0.25}, 1, 1)
    assert (a + b).duration_s == 4.0 and a.then(b) == seq(a, b)
    with pytest.raises(ValueError, match="OpCost.duration_s must be >= 0, got -1.0"):
        OpCost(-1.0)
    with pytest.raises(ValueError, match="OpCost.bus_bytes and OpCost.macs must be >= 0"):
        OpCost(1.0, bus_bytes=-1)
    with pytest.raises(ValueError, match="OpCost.bus_bytes and OpCost.macs must be >= 0"):
        OpCost(1.0, macs=-1)
    with pytest.raises(ValueError, match="OpCost energy of 'npu' must be >= 0, got -1.0"):
        OpCost(1.0, {"npu": -1.0})
    with pytest.raises(TypeError):
        a.energy_j_by_device["npu"] = 0.0  # frozen


# ------------------------------------------------------------------ energy
def test_ledger_total_is_sum_of_actions_plus_static_power_times_time():
    p = Platform.build(make_cfg())
    ledger = EnergyLedger()
    ops = dense_decoder_ops(d=1024, ffn=4096, layers=2)
    actions = [p.npu_op_cost(o) for o in ops] + [p.pim_op_cost(o, 2) for o in ops] + [p.gts.switch_cost()]
    for i, c in enumerate(actions):
        ledger.add_cost(c, f"action{i}")
    makespan = 0.123
    ledger.charge_static_all(p.devices(), makespan)
    # expected per device, summed here from the actions' own per-device energies
    dyn_by_dev: dict[str, float] = {}
    for c in actions:
        for dev, e in c.energy_j_by_device.items():
            dyn_by_dev[dev] = dyn_by_dev.get(dev, 0.0) + e
    br = ledger.breakdown()
    assert set(br) == set(p.devices()) | set(dyn_by_dev)
    for dev in br:
        assert br[dev]["dynamic"] == pytest.approx(dyn_by_dev.get(dev, 0.0), rel=1e-12), dev
        assert ledger.device_j(dev, "dynamic") == pytest.approx(dyn_by_dev.get(dev, 0.0), rel=1e-12), dev
    # static = the configured power x the time span (NPU 0.14 W, LPDDR5 0.08 W in make_cfg)
    assert br["npu"]["static"] == pytest.approx(0.14 * makespan, rel=1e-12)
    assert br["lpddr5"]["static"] == pytest.approx(0.08 * makespan, rel=1e-12)
    assert ledger.device_j("npu", "static") == pytest.approx(0.14 * makespan, rel=1e-12)
    assert ledger.device_j("npu") == pytest.approx(0.14 * makespan + dyn_by_dev["npu"], rel=1e-12)
    total = sum(dyn_by_dev.values()) + sum(p.devices().values()) * makespan
    assert ledger.total_j() == pytest.approx(total, rel=1e-12)
    assert ledger.by_label()["static"] == pytest.approx(sum(p.devices().values()) * makespan, rel=1e-12)
    assert ledger.by_label()["action0"] == pytest.approx(actions[0].energy_j, rel=1e-12)
    assert ledger.charge_static("npu", 2.0, 0.5) == 1.0            # returns the joules charged
    assert ledger.device_j("npu", "static") == pytest.approx(0.14 * makespan + 1.0, rel=1e-12)
    other = EnergyLedger()
    other.add("pim", "dynamic", 0.25, "x")
    ledger.merge([other])
    assert ledger.total_j() == pytest.approx(total + 1.0 + 0.25, rel=1e-12)
    with pytest.raises(ValueError, match="finite and >= 0 J"):
        ledger.add("npu", "dynamic", float("nan"))
    with pytest.raises(ValueError, match=r"static power and time must be >= 0, got -1.0 W x 1.0 s"):
        ledger.charge_static("npu", -1.0, 1.0)
    with pytest.raises(ValueError, match="static power and time"):
        ledger.charge_static("npu", -1.0, 0.0)     # -1 W x 0 s is 0 J, but the power is still wrong
    with pytest.raises(ValueError, match="static power and time"):
        ledger.charge_static("npu", 1.0, -1.0)
    # zero is a valid energy, power and time (a link with no idle power, an empty run)
    n = len(ledger.entries)
    assert ledger.charge_static("h2d", 0.0, 1.0) == 0.0 and ledger.charge_static("npu", 1.0, 0.0) == 0.0
    ledger.add("npu", "dynamic", 0.0)
    assert len(ledger.entries) == n + 3 and ledger.entries[-1].label == ""
    ledger.add_cost(actions[0])
    assert {e.label for e in ledger.entries[-len(actions[0].energy_j_by_device):]} == {""}
    assert set(ledger.by_label()) >= {"action0", "static"}
    with pytest.raises(ValueError):
        ledger.add("npu", "dynamic", -1.0)
    with pytest.raises(ValueError, match="energy kind must be one of"):
        ledger.add("npu", "leakage", 1.0)


def test_no_unit_reports_zero_energy_for_work():
    cfg = make_cfg({"gpu": {"enabled": True}, "h2d": {"enabled": True}, "network": {"enabled": True}})
    p = Platform.build(cfg)
    env = simpy.Environment()
    proc = env.process(p.h2d.transfer(env, 1e6))
    env.run()
    gemv, soft = linear(1, 1024, 1024), elementwise("softmax", 1024)
    costs = {
        "npu gemv": (p.npu_op_cost(gemv), ("npu", "lpddr5")),
        "npu vector": (p.npu_op_cost(soft), ("npu",)),
        "pim gemv": (p.pim_op_cost(gemv, 1), ("pim",)),
        "aau": (p.pim_op_cost(soft, 1), ("aau",)),
        "gts": (p.gts.switch_cost(), ("gts",)),
        "h2d": (proc.value, ("h2d",)),
        "gpu": (p.gpu.op_cost(gemv), ("gpu",)),
        "network": (p.network.transfer_cost(100, "up"), ("network",)),
    }
    for name, (c, devices) in costs.items():
        assert c.duration_s > 0, name
        for d in devices:
            assert c.energy_of(d) > 0, f"{name}: {d}"
    assert p.memory.read_energy_j(1) > 0 and p.memory.write_energy_j(1) > 0
    off = Platform.build(make_cfg({"pim": {"aau": {"enabled": False}, "gts": {"enabled": False}}}))
    assert off.pim_op_cost(soft, 1).energy_of("lpddr5") > 0
    assert off.gts.switch_cost().energy_of("gts") > 0


# ------------------------------------------------------------------ platform
def test_default_platform_is_the_paper_platform():
    p = Platform.build(make_cfg())
    assert p.npu is not None and p.pim is not None and p.aau.enabled and p.gts.enabled
    assert p.gpu is None and p.h2d is None and p.network is None
    assert set(p.devices()) == {"lpddr5", "npu", "pim", "aau", "gts"}
    assert p.has("pim") and not p.has("gpu")
    assert p.devices()["aau"] == pytest.approx(16 * 5e-3)
    d = p.describe()
    assert d["memory"]["peak_bandwidth_gb_s"] == pytest.approx(51.2)
    assert d["npu"]["peak_tops"] == pytest.approx(16.384)
    assert d["pim"]["total_tops"] == pytest.approx(1.6384)


def test_platform_rejects_impossible_hardware():
    with pytest.raises(ConfigError) as e:
        Platform.build(make_cfg({"npu": {"enabled": False}}))
    assert e.value.key_path == "npu.enabled"
    with pytest.raises(ConfigError) as e:
        Platform.build(make_cfg({"pim": {"ranks": 32}}))  # 128 GiB of PIM in 64 GiB of memory
    assert e.value.key_path == "pim.ranks" and e.value.source == "test.yaml"
    with pytest.raises(ConfigError, match="pim.gops_scope"):
        make_cfg({"pim": {"gops_scope": "per_rank"}})
    with pytest.raises(ConfigError, match="pim.aau.lanes"):
        make_cfg({"pim": {"aau": {"lanes": 0}}})


def test_pim_forward_routes_nonlinear_ops_to_the_aaus_of_the_ranks():
    p = Platform.build(make_cfg())
    ops = dense_decoder_ops(layers=3)
    c = p.forward_cost(ops, "pim", ranks=2)
    expected = sum(p.pim_op_cost(o, 2).duration_s * o.layer_repeat for o in ops)
    assert c.duration_s == pytest.approx(expected, rel=1e-12)
    gelu = [o for o in ops if o.nonlinear_class == "gelu"][0]
    assert p.pim_op_cost(gelu, 2).duration_s == pytest.approx(p.aau.op_cost(gelu, n_aau=2).duration_s)


# ------------------------------------------------------------------ area
def test_area_table_rows_and_percent_of_die():
    cfg = make_cfg()
    t = area_table(cfg)
    assert list(t.columns)[:4] == ["unit", "area_mm2", "pct_of_die", "basis"]
    assert list(t.unit) == ["EDC", "TVC", "async_queues", "GTS", "AAU", "total"]
    assert (t.pct_of_die == 100 * t.area_mm2 / 50.0).all()
    body = t[t.unit != "total"]
    assert t.set_index("unit").area_mm2["total"] == pytest.approx(body.area_mm2.sum())
    assert edc_bits() == 1075 and tvc_bits(cfg.area) == 1416 and queue_bits(cfg.area) == 64 * 48 + 32 * 32 + 16 * 32
    # EDC by hand: 1075 bits x (2.5 + 2.3 x 0.5) um^2 + 3000 NAND2 x 0.5 um^2
    assert t.set_index("unit").area_mm2["EDC"] == pytest.approx((1075 * 3.65 + 1500) * 1e-6)
    # AAU: 16 x (16 x 1660 + 1024 x 3.65 + 5000 x 0.5) x 2.5
    aau = 16 * (16 * 1660 + 1024 * 3.65 + 2500) * 2.5 * 1e-6
    assert t.set_index("unit").area_mm2["AAU"] == pytest.approx(aau)
    # one AAU per rank; the die-area parameter only rescales the percentages
    t8 = area_table(make_cfg({"pim": {"ranks": 8}, "area": {"die_area_mm2": 25.0}}))
    assert t8.set_index("unit").area_mm2["AAU"] == pytest.approx(aau / 2)
    assert t8.set_index("unit").pct_of_die["AAU"] == pytest.approx(100 * (aau / 2) / 25.0)
    sram = area_table(make_cfg({"area": {"storage": "sram"}})).set_index("unit").area_mm2
    assert sram["EDC"] == pytest.approx((1075 * 0.127 / 0.076 + 1500) * 1e-6)


# ------------------------------------------------------------------ shipped configs
def test_all_shipped_configs_exist_load_and_build():
    names = {p.name for p in CONFIGS}
    assert {"platform_mobile_npu_lpddr5.yaml", "platform_mobile_npu_lpddr5_pim.yaml", "platform_mobile_gpu.yaml",
            "platform_laptop_rtx4090.yaml", "platform_specpim_gpu_pim.yaml",
            "platform_server_h200_pcie5.yaml"} <= names
    for path in CONFIGS:
        Platform.build(load_config(path))


def test_shipped_configs_platform_shapes():
    def build(name):
        return Platform.build(load_config(REPO / "hw_configs" / name))

    paper = build("platform_mobile_npu_lpddr5_pim.yaml")
    default = Platform.build(make_cfg())
    assert paper.describe() == default.describe()  # the paper platform is the default
    plain = build("platform_mobile_npu_lpddr5.yaml")
    assert plain.pim is None and plain.npu is not None
    mgpu = build("platform_mobile_gpu.yaml")
    assert mgpu.npu is None and mgpu.gpu.effective_bandwidth_bytes_s == pytest.approx(
        mgpu.memory.effective_bandwidth_bytes_s)
    laptop = build("platform_laptop_rtx4090.yaml")
    assert laptop.gpu.overflow_bytes(6.738e9 + 13.016e9) == pytest.approx(6.738e9 + 13.016e9 - 15 * 2**30)
    assert laptop.h2d.cfg.generation == 4
    spec = build("platform_specpim_gpu_pim.yaml")
    assert spec.gpu is not None and spec.pim is not None and not spec.aau.enabled and not spec.gts.enabled
    h200 = build("platform_server_h200_pcie5.yaml")
    assert h200.h2d.cfg.generation == 5 and h200.gpu.cfg.mem_bw_gb_s == 4800.0
