"""Pre-verification respects the target-KV data dependency (issue 12, item 1)."""
from __future__ import annotations

import pytest

from ahasd_sim.config import load_config
from ahasd_sim.modes.ahasd import AhasdMode, KvLedger
from ahasd_sim.simulation import run_simulation

from conftest import ROOT, SMOKE_TRACE
from modes_helpers import FixedCosts, run_mode

T, F = True, False
KV = ["recompute", "wait", "layer_pipelined"]
# EDC always says stop and TVC is on; a long NPU pass (20 s) leaves room to pre-verify (1 s/token).
SCENARIO = ["run.policy=fixed", "policy.fixed.k=2", "ahasd.edc_config.pht_counter_init=0",
            "ahasd.tvc_config.preload_kv_len=100"]


def _scenario(tmp_path, kv, accept=None, extra=()):
    return run_mode(tmp_path, "ahasd", accept or [T] * 60, 24, [*SCENARIO, f"ahasd.preverify_kv={kv}", *extra],
                    costs=FixedCosts(draft_s=1.0, verify_s=20.0, preverify_per_token_s=1.0))


def test_ledger_flags_a_read_before_the_write_ends():
    led = KvLedger()
    led.write(9, 13, t0=0.0, layer_s=1.0, layers=4)      # NPU pass: KV of 9..12, layer l done at l + 1
    led.read(14, 14, [4.0, 5.0, 6.0, 7.0])                # after the pass: fine
    assert led.violations() == 0
    led.read(14, 14, [0.5, 1.5, 2.5, 3.5])                # reads each layer before the NPU wrote it
    assert led.violations() == 1
    led2 = KvLedger()
    led2.write(9, 13, t0=0.0, layer_s=1.0, layers=4)
    led2.read(14, 8, [0.0, 0.1, 0.2, 0.3])                # recomputes 8.. itself: needs nothing in flight
    led2.read(14, 14, [1.0, 2.0, 3.0, 4.0])               # trails the NPU by exactly one layer
    assert led2.violations() == 0


@pytest.mark.parametrize("kv", KV)
def test_preverification_never_reads_kv_before_it_is_written(tmp_path, kv):
    m, col, _ = _scenario(tmp_path, kv)
    m.finalize()
    st = m.stats()["preverify"]
    # (a pre-verification still running when the last token commits is never read back)
    assert m.tvc.stats.inserted >= 2 and st["kv_reads_checked"] >= m.tvc.stats.inserted - 1
    assert st["kv_causality_violations"] == 0
    assert col.committed_positions == list(range(24))


def test_the_check_catches_a_noncausal_schedule(tmp_path, monkeypatch):
    # Pre-verification that ignores the NPU's layer progress (the old behaviour: it read the
    # in-flight tokens' KV at once) must be flagged.
    monkeypatch.setattr(AhasdMode, "_layer_reads",
                        lambda self, t0, n, kv, done: [t0 + 0.01 * i for i in range(4)])
    m, _, _ = _scenario(tmp_path, "layer_pipelined")
    m.finalize()
    assert m.stats()["preverify"]["kv_causality_violations"] > 0


def test_recompute_charges_the_in_flight_tokens(tmp_path):
    m, col, _ = _scenario(tmp_path, "recompute")
    st = m.stats()["preverify"]
    # every pre-verification also ran the NPU's n + 1 in-flight tokens (k = 2 -> >= 3 each)
    assert st["recomputed_tokens"] >= 3 * m.tvc.stats.inserted
    pv_busy = sum(e - s for s, e, lab in col.busy_intervals["pim"] if lab == "preverify")
    assert pv_busy == pytest.approx(m.tvc.stats.tokens_preverified + st["recomputed_tokens"])
    # and TVC's budget counted them: L_pv + in-flight tokens fit the time left (20 s - 1 draft)
    assert m.tvc.stats.tokens_preverified / m.tvc.stats.inserted + 3 <= 20


def test_wait_starts_only_after_the_npu_pass(tmp_path):
    m, col, _ = _scenario(tmp_path, "wait")
    verifies = [(s, e) for s, e, lab in col.busy_intervals["npu"] if lab == "verify"]
    for s, e, lab in col.busy_intervals["pim"]:
        if lab == "preverify":   # never overlaps an NPU pass
            assert all(e <= vs + 1e-9 or s >= ve - 1e-9 for vs, ve in verifies)
    assert m.stats()["preverify"]["pim_waiting_for_kv_s"] > 0


def test_layer_pipelined_holds_pim_for_the_npu_pass(tmp_path):
    m, col, _ = _scenario(tmp_path, "layer_pipelined")
    verifies = [(e["time_s"], e["time_s"] + e["duration_s"]) for e in col.events if e["event"] == "verify"]
    pvs = [(e["time_s"], e["time_s"] + e["duration_s"], e["n_tokens"]) for e in col.events if e["event"] == "preverify"]
    assert pvs
    for s, e, n in pvs:
        # trails the NPU pass it started in: ends one PIM layer (1/4 of n x 1 s) after that pass
        ve = min(ve for vs, ve in verifies if vs <= s + 1e-9 <= ve + 2e-9)
        assert e == pytest.approx(ve + n / 4, abs=1e-6)


@pytest.mark.parametrize("kv", KV)
def test_real_costs_are_causal(kv):
    cfg = load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml",
                      [f"run.trace={SMOKE_TRACE}", "run.generated_tokens=60", f"ahasd.preverify_kv={kv}",
                       "run.windows=1"])
    s = run_simulation(cfg).summary
    assert s["mode_stats"]["preverify"]["kv_causality_violations"] == 0
