"""EDC and TVC exactly as specified (references.md#ahasd-controls; modeling.md decisions 1-4)."""
from __future__ import annotations

import pytest

from ahasd_sim.modes.config import EdcConfig, TvcConfig
from ahasd_sim.modes.soc.controls.edc import EntropyHistoryControl
from ahasd_sim.modes.soc.controls.tvc import TimeAwarePreverifyControl


def test_edc_bucket_mapping():
    e = EntropyHistoryControl(EdcConfig())
    # 8 equal bins over [0, 10] nats, clamped to 7
    assert [e.bucket(h) for h in (0.0, 1.24, 1.25, 2.5, 9.99, 10.0, 42.0)] == [0, 0, 1, 2, 7, 7, 7]


def test_edc_index_layout_and_storage():
    e = EntropyHistoryControl(EdcConfig())
    assert len(e.pht) == 512 and e.storage_bits() == 1075
    # newest bucket goes to H0; recent half H0..3, older half H4..7
    for b in (7, 7, 7, 7):
        e._insert(e.leht, b, "leht")
    e.llr = 5
    assert e.leht == [7, 7, 7, 7, 0, 0, 0, 0]
    assert e.index() == (0 << 6) | (7 << 3) | 5


def test_edc_predict_update_and_rollback():
    e = EntropyHistoryControl(EdcConfig(pht_counter_init=2))
    cont, idx, b = e.predict(0.1, live_unverified_batches=1)
    assert cont and b == 0 and e.llr == 1 and e.pht[idx] == 2
    e.resolve(idx, b, cont, fully_accepted=True)          # +1, LCEHT gets the bucket
    assert e.pht[idx] == 3 and e.lceht[0] == 0
    e.resolve(idx, b, cont, fully_accepted=True)          # saturates at 3
    assert e.pht[idx] == 3
    cont2, idx2, b2 = e.predict(9.0, 2)                   # high entropy batch
    assert b2 == 7
    e.resolve(idx2, b2, cont2, fully_accepted=False)      # -1 and LEHT <- LCEHT
    assert e.pht[idx2] == 1 and e.leht == e.lceht and e.stats.rollbacks == 1
    e.resolve(idx2, b2, cont2, fully_accepted=False)
    e.resolve(idx2, b2, cont2, fully_accepted=False)      # saturates at 0
    assert e.pht[idx2] == 0
    assert e.stats.resolved_predictions == 5 and e.stats.correct_predictions == 2
    # killed batches decrement by default, or are skipped
    e.resolve(idx, b, True, fully_accepted=False, killed=True)
    assert e.pht[idx] == 2
    skip = EntropyHistoryControl(EdcConfig(killed_batch_update="skip"))
    _, i3, b3 = skip.predict(0.1, 1)
    skip.resolve(i3, b3, True, False, killed=True)
    assert skip.pht[i3] == 2


def test_edc_llr_saturates():
    e = EntropyHistoryControl(EdcConfig())
    e.predict(0.1, 12)
    assert e.llr == 7


def test_tvc_decision_rule():
    # Preloaded: NPU 100 ns per KV token, drafting 10 ns/token, pre-verify 30 ns/token.
    t = TimeAwarePreverifyControl(TvcConfig(), preload_npu_ns=100.0 * 500, preload_kv_len=500,
                                  preload_draft_ns=40.0, preload_draft_len=4,
                                  preload_pv_ns=120.0, preload_pv_len=4)
    # NPU at KV 500 predicted 50,000 ns; elapsed 20,000 ns; one draft of 4 tokens 40 ns.
    # C_left = 50000 - (20000 + 40) = 29960 -> floor(29960 / 30) = 998, capped at 8.
    assert t.decide(20_000e-9, 500) == 8
    # nearly done: C_left = 50000 - (49900 + 40) = 60 -> 2 tokens
    assert t.decide(49_900e-9, 500) == 2
    # out of time -> 0 (keep drafting)
    assert t.decide(49_990e-9, 500) == 0
    # measured values replace the preload FIFO entries (4 entries): NPU twice as slow now
    for _ in range(4):
        t.record_npu(200.0 * 500 * 1e-9, 500)
    assert t.predicted_npu_ns(500) == pytest.approx(100_000.0)
    assert t.storage_bits() == 1416
