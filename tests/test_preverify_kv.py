"""Pre-verification respects the target-KV data dependency (issue 12, item 1)."""
from __future__ import annotations

import pytest

from ahasd_sim.config import load_config
from ahasd_sim.modes.soc.ahasd import AhasdMode, KvLedger
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
    # Pre-verification that ignores the NPU's layer progress (reading the in-flight tokens' KV
    # at once) must be flagged.
    read = KvLedger.read
    monkeypatch.setattr(KvLedger, "read", lambda self, hi, lo, reads: read(self, hi, lo, [reads[0] + 0.01 * i
                                                                                          for i in range(len(reads))]))
    m, _, _ = _scenario(tmp_path, "layer_pipelined")
    m.finalize()
    assert m.stats()["preverify"]["kv_causality_violations"] > 0


class _Shared(FixedCosts):
    host_share = 0.5     # PIM work on the target's ranks halves the NPU pass's rate meanwhile


def test_layer_reads_wait_for_npu_layers_slowed_by_contention(tmp_path):
    # Planted contention: each pre-verification layer (0.5 s of work) runs next to the NPU pass
    # at half rate and slows it, so the pass writes its layers (5 s of work each) later than
    # planned: at 7, 12.5, 18, 23.5 instead of 7, 12, 17, 22 (2..8: 5.5 s done; each later layer
    # 4.5 s alone after the previous PIM layer). Every PIM layer must read no earlier than the
    # NPU really wrote it: a gate on the planned (unslowed) times reads at 12, 17, 22 and fails.
    m, col, _ = run_mode(tmp_path, "ahasd", [True] * 40, 8,
                         ["run.policy=fixed", "policy.fixed.k=2", "ahasd.edc_config.pht_counter_init=0",
                          "ahasd.tvc_config.preload_kv_len=100", "ahasd.preverify_kv=layer_pipelined"],
                         costs=_Shared(draft_s=1.0, verify_s=20.0, preverify_per_token_s=2.0))
    m.finalize()
    w = m.kv_ledger.writes[0]
    actual = [KvLedger.layer_written_s(w, layer) for layer in range(4)]   # off the pass's progress
    reads = m.kv_ledger.reads[0][2]
    assert all(r >= t - 1e-9 for r, t in zip(reads, actual)), (reads, actual)
    assert m.stats()["preverify"]["kv_causality_violations"] == 0
    assert actual == pytest.approx([7.0, 12.5, 18.0, 23.5])      # by hand, as above
    # the pass really was slowed (else this test would not test the gate)
    assert [(s, e) for s, e, lab in col.busy_intervals["npu"] if lab == "verify"][0] == (2.0, 23.5)


@pytest.mark.parametrize("kv", KV)
def test_no_violation_with_contention_on_the_paper_platform(kv):
    cfg = load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml",
                      [f"ahasd.preverify_kv={kv}", "run.windows=1", "run.generated_tokens=256"])
    st = run_simulation(cfg).summary["mode_stats"]
    assert st["preverify"]["kv_reads_checked"] > 0
    assert st["preverify"]["kv_causality_violations"] == 0
    assert st["shared_rank_contention"]["contended_preverifications"] > 0 or kv == "wait"


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


def test_placement_tuning_runs_skip_the_audit_and_change_nothing_else():
    """The KV causality audit runs after every reported window; a placement-tuning run (only its
    objective is read) skips it, and its results are otherwise those of the audited run."""
    from ahasd_sim.modes import placement
    from ahasd_sim.simulation import load_run_windows
    cfg = load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml",
                      [f"run.trace={SMOKE_TRACE}", "run.generated_tokens=24", "run.windows=2",
                       "pim.partition_policy=striped", "run.timeline=false"])
    windows = load_run_windows(cfg)
    audited = run_simulation(cfg, windows, intervals=False).summary
    quiet = run_simulation(cfg, windows, intervals=False, audit=False).summary
    assert audited["mode_stats"]["preverify"]["kv_causality_violations"] == 0
    assert quiet["mode_stats"]["preverify"]["kv_causality_violations"] is None
    assert quiet["mode_stats"]["preverify"]["kv_reads_checked"] == audited["mode_stats"]["preverify"]["kv_reads_checked"] > 0
    for s in (audited, quiet):
        s["mode_stats"]["preverify"].pop("kv_causality_violations")
        s.pop("wall_time_s", None)
    assert quiet == audited
    tuned = placement._candidate(cfg)                 # what a tuning run returns
    assert tuned["mode_stats"]["preverify"]["kv_causality_violations"] is None
    assert tuned["throughput_tok_s"] == audited["throughput_tok_s"]
