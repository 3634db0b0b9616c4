"""EDC and TVC: exact table contents and decisions derived by hand (issue 19).

Each case pins a detail that a one-line change would break without changing any
"plausible range": TVC's floor of L_pv, the mean of per-unit ratios in its tables,
its FIFO replacement, and every write EDC makes into LEHT/LCEHT/PHT.
"""
from __future__ import annotations

import pytest

from ahasd_sim.modes.config import EdcConfig, TvcConfig
from ahasd_sim.modes.soc.controls.edc import EntropyHistoryControl
from ahasd_sim.modes.soc.controls.tvc import TimeAwarePreverifyControl


def _tvc():
    # preloaded: NPU 100 ns per KV token, drafting 10 ns/token (batches of 4), pre-verify 30 ns/token
    return TimeAwarePreverifyControl(TvcConfig(), preload_npu_ns=100.0 * 500, preload_kv_len=500,
                                     preload_draft_ns=40.0, preload_draft_len=4, preload_pv_ns=120.0,
                                     preload_pv_len=4)


# ------------------------------------------------------------------ TVC
def test_tvc_lpv_is_floored_not_rounded_or_ceiled():
    t = _tvc()
    # NPU predicted 100 ns/token x 500 = 50,000 ns; one draft of mean length 4 at 10 ns/token = 40 ns;
    # pre-verify 30 ns/token.  elapsed 49,870 ns -> C_left = 50,000 - 49,910 = 90 ns -> 90/30 = 3 exactly
    assert t.decide(49_870e-9, 500) == 3
    # elapsed 49,875 ns -> C_left = 85 ns -> 85/30 = 2.83 -> floor 2 (round: 3, ceil: 3)
    assert t.decide(49_875e-9, 500) == 2
    # elapsed 49,905 ns -> C_left = 55 ns -> 1.83 -> 1 (round 2)
    assert t.decide(49_905e-9, 500) == 1
    # elapsed 49,935 ns -> C_left = 25 ns -> 0.83 -> 0 (ceil would pre-verify 1 token it has no time for)
    assert t.decide(49_935e-9, 500) == 0
    # C_left exactly 0 and negative -> 0
    assert t.decide(49_960e-9, 500) == 0
    assert t.decide(60_000e-9, 500) == 0
    assert t.stats.decisions == 6


def test_tvc_cap_is_max_preverify_tokens():
    t = TimeAwarePreverifyControl(TvcConfig(max_preverify_tokens=5), 100.0 * 500, 500, 40.0, 4, 120.0, 4)
    # C_left = 50,000 - 40 = 49,960 ns -> 1665 tokens, capped at 5
    assert t.decide(0.0, 500) == 5
    # C_left = 50,000 - (49,800 + 40) = 160 -> 5.33 -> 5 (equal to the cap: min picks 5)
    assert t.decide(49_800e-9, 500) == 5
    # C_left = 130 -> 4.33 -> 4, below the cap
    assert t.decide(49_830e-9, 500) == 4


def test_tvc_tables_average_per_unit_ratios_not_totals():
    # 2-entry tables. NVCT after two records: (1000 ns, 10 tokens) and (1000 ns, 40 tokens):
    # mean of ratios = (100 + 25) / 2 = 62.5 ns/token (sum/sum would be 2000/50 = 40, last entry 25).
    t = TimeAwarePreverifyControl(TvcConfig(table_entries=2), 7.0, 1, 7.0, 1, 7.0, 1)
    t.record_npu(1000e-9, 10)
    t.record_npu(1000e-9, 40)
    assert t.predicted_npu_ns(100) == pytest.approx(6250.0, rel=1e-12, abs=0)     # seconds -> ns exactly
    # PDCT: (30 ns, 3) and (80 ns, 2): mean ratio (10 + 40)/2 = 25 ns/token; mean length 2.5
    t.record_draft(30e-9, 3)
    t.record_draft(80e-9, 2)
    assert t.pdct.mean_per_unit() == pytest.approx(25.0, rel=1e-12, abs=0)
    assert t.pdct.mean_length() == pytest.approx(2.5, rel=1e-12, abs=0)
    # PVCT: (20 ns, 1) and (60 ns, 4): (20 + 15)/2 = 17.5 ns/token
    t.record_preverify(20e-9, 1)
    t.record_preverify(60e-9, 4)
    # decide(elapsed 5000 ns, kv 100): C_npu 6250, C_draft1 = 25 x 2.5 = 62.5, C_left = 1187.5
    # -> 1187.5 / 17.5 = 67.86 -> capped at 8.
    # next draft of 10 tokens given, elapsed 6000: C_left = 6250 - 6000 - 250 = 0 -> 0
    assert t.decide(5000e-9, 100) == 8
    assert t.decide(6000e-9, 100, next_draft_len=10) == 0
    # elapsed 6100 ns, next draft 2 tokens: C_left = 6250 - 6100 - 50 = 100 -> 100/17.5 = 5.71 -> 5
    assert t.decide(6100e-9, 100, next_draft_len=2) == 5
    # mean length (2.5) is used when no next length is given: C_left = 6250 - 6100 - 62.5 = 87.5 -> 5.0 -> 5
    assert t.decide(6100e-9, 100) == 5
    # elapsed 6110: 6250 - 6110 - 62.5 = 77.5 -> 4.43 -> 4
    assert t.decide(6110e-9, 100) == 4


def test_tvc_fifo_replaces_oldest_and_ignores_empty_records():
    t = TimeAwarePreverifyControl(TvcConfig(table_entries=3), 300.0, 3, 1.0, 1, 1.0, 1)  # preload 100 ns/token
    assert t.predicted_npu_ns(1) == pytest.approx(100.0, rel=1e-12, abs=0)
    t.record_npu(400e-9, 1)          # [100, 100, 400] -> mean 200
    assert t.predicted_npu_ns(1) == pytest.approx(200.0, rel=1e-12, abs=0)
    t.record_npu(1e-6, 0)            # a zero-length record carries no rate: ignored
    assert t.predicted_npu_ns(1) == pytest.approx(200.0, rel=1e-12, abs=0)
    t.record_npu(700e-9, 1)          # [100, 400, 700] -> 400
    t.record_npu(1000e-9, 1)         # [400, 700, 1000] -> 700 (oldest preload gone)
    assert t.predicted_npu_ns(1) == pytest.approx(700.0, rel=1e-12, abs=0)
    assert len(t.nvct.items) == 3


def test_tvc_storage_scales_with_table_entries():
    # 3 tables x n entries x (64-bit time + 32-bit length) + 64-bit NCR + 200 control bits
    assert TimeAwarePreverifyControl(TvcConfig(table_entries=2), 1, 1, 1, 1, 1, 1).storage_bits() == 3 * 2 * 96 + 264
    assert TimeAwarePreverifyControl(TvcConfig(table_entries=8), 1, 1, 1, 1, 1, 1).storage_bits() == 3 * 8 * 96 + 264


# ------------------------------------------------------------------ EDC
def test_edc_commit_history_gets_exactly_the_fully_accepted_buckets():
    e = EntropyHistoryControl(EdcConfig(pht_counter_init=2))
    # entropies 1.3 (bucket 1), 2.6 (bucket 2), 5.1 (bucket 4): 8 bins of 1.25 nats over [0, 10]
    preds = [e.predict(h, live_unverified_batches=i + 1) for i, h in enumerate((1.3, 2.6, 5.1))]
    assert [p[2] for p in preds] == [1, 2, 4]
    assert e.leht == [4, 2, 1, 0, 0, 0, 0, 0]          # newest in H0
    assert e.lceht == [0] * 8                           # nothing committed yet
    e.resolve(preds[0][1], preds[0][2], preds[0][0], fully_accepted=True)
    e.resolve(preds[1][1], preds[1][2], preds[1][0], fully_accepted=True)
    assert e.lceht == [2, 1, 0, 0, 0, 0, 0, 0]
    assert e.leht == [4, 2, 1, 0, 0, 0, 0, 0]          # accepting does not touch LEHT
    # batch 3 rejected: LEHT <- LCEHT (bucket 4 was speculative history), LCEHT unchanged
    e.resolve(preds[2][1], preds[2][2], preds[2][0], fully_accepted=False)
    assert e.leht == [2, 1, 0, 0, 0, 0, 0, 0]
    assert e.lceht == [2, 1, 0, 0, 0, 0, 0, 0]
    assert e.stats.rollbacks == 1
    # after the restore, the next index uses the restored history: recent half (2,1,0,0) -> floor(3/4) = 0,
    # a new batch of bucket 7 makes it (7,2,1,0) -> floor(10/4) = 2; older (0,0,0,0) -> 0; LLR = 3
    cont, idx, b = e.predict(9.0, 3)
    assert b == 7 and idx == (0 << 6) | (2 << 3) | 3
    # a killed batch never reaches LCEHT
    e.resolve(idx, b, cont, fully_accepted=False, killed=True)
    assert e.lceht == [2, 1, 0, 0, 0, 0, 0, 0]


def test_edc_pht_counter_walk_is_exact():
    e = EntropyHistoryControl(EdcConfig(pht_counter_init=1))
    cont, idx, b = e.predict(0.1, 0)
    assert idx == 0 and cont is False and e.pht[0] == 1      # 1 < 2: MSB clear -> stop
    e.resolve(idx, b, cont, fully_accepted=True)             # 1 -> 2, wrong prediction
    assert e.pht[0] == 2 and e.stats.correct_predictions == 0
    cont, idx, b = e.predict(0.1, 0)
    assert cont is True and idx == 0                        # counter 2: MSB set -> continue
    e.resolve(idx, b, cont, fully_accepted=True)             # 2 -> 3, right prediction
    e.resolve(idx, b, cont, fully_accepted=True)             # saturates at 3
    assert e.pht[0] == 3 and e.stats.correct_predictions == 2 and e.stats.resolved_predictions == 3
    assert (e.stats.predictions, e.stats.continue_predictions, e.stats.suppressed_batches) == (2, 1, 1)
    # all other 511 entries are untouched
    assert e.pht[1:] == [1] * 511
    assert e.stats.accuracy == pytest.approx(2 / 3, rel=1e-12, abs=0)


def test_edc_circular_history_layout():
    e = EntropyHistoryControl(EdcConfig(history_order="circular", history_len=4))
    for h in (1.3, 2.6, 5.1, 6.3, 9.0):                     # buckets 1, 2, 4, 5, 7
        e.predict(h, 0)
    # circular buffer of 4: slots written 0,1,2,3 then slot 0 again
    assert e.leht == [7, 2, 4, 5]
    _, idx, b = e.predict(0.1, 0)                           # bucket 0 into slot 1
    assert e.leht == [7, 0, 4, 5]
    e.resolve(idx, b, True, fully_accepted=True)            # LCEHT slot 0
    e.resolve(idx, 3, True, fully_accepted=True)            # LCEHT slot 1
    e.resolve(idx, 5, True, fully_accepted=True)            # LCEHT slot 2
    assert e.lceht == [0, 3, 5, 0]
    e.resolve(idx, b, True, fully_accepted=False)           # restore: LEHT and its pointer (3) from LCEHT
    assert e.leht == [0, 3, 5, 0] and e._leht_ptr == 3
    e.predict(9.0, 0)                                       # next write goes to slot 3, not slot 2
    assert e.leht == [0, 3, 5, 7]
    # index: recent half = slots 0,1 -> floor(3/2) = 1, older = slots 2,3 -> floor(12/2) = 6; LLR 0
    assert e.index() == (6 << 6) | (1 << 3) | 0


def test_tvc_sub_nanosecond_rates_and_zero_rate_tables():
    # pre-verification at 0.5 ns/token (PVCT preload 2 ns for 4 tokens), no drafting time,
    # NPU 1 ns/token at KV 10: C_left = 10 - 9 = 1 ns -> floor(1 / 0.5) = 2 tokens
    t = TimeAwarePreverifyControl(TvcConfig(), 10.0, 10, 0.0, 4, 2.0, 4)
    assert t.decide(9e-9, 10) == 2
    # C_left = 10 - 8 = 2 ns -> 4
    assert t.decide(8e-9, 10) == 4
    # a pre-verification table of zero times (free pre-verification) is no reason to divide by 0
    z = TimeAwarePreverifyControl(TvcConfig(), 10.0, 10, 0.0, 4, 0.0, 4)
    assert z.decide(0.0, 10) == 0


def test_edc_counters_accumulate_and_killed_decrement_reaches_zero():
    e = EntropyHistoryControl(EdcConfig(pht_counter_init=3))
    for _ in range(3):                                       # counter 3: continue, three times
        cont, idx, b = e.predict(0.1, 0)
        assert cont
    assert e.stats.continue_predictions == 3 and e.stats.predictions == 3
    for _ in range(2):                                       # two rejections: two LEHT restores
        e.resolve(idx, b, True, fully_accepted=False)
    assert e.stats.rollbacks == 2 and e.pht[idx] == 1
    e.resolve(idx, b, True, fully_accepted=False, killed=True)   # a killed batch: 1 -> 0
    assert e.pht[idx] == 0
    e.resolve(idx, b, True, fully_accepted=False, killed=True)   # saturates at 0
    assert e.pht[idx] == 0 and e.stats.resolved_predictions == 2


def test_edc_llr_starts_at_zero_and_follows_live_batches():
    e = EntropyHistoryControl(EdcConfig())
    assert e.index() == 0                       # empty history, LLR 0
    for live, llr in ((5, 5), (0, 0), (-2, 0), (9, 7)):
        e.set_live_batches(live)
        assert e.llr == llr and e.index() == llr


def test_edc_bucket_with_a_smaller_entropy_range():
    e = EntropyHistoryControl(EdcConfig(entropy_max_nats=4.0))     # 8 bins of 0.5 nats
    assert [e.bucket(h) for h in (-1.0, 0.0, 0.49, 0.6, 1.0, 3.99, 4.0)] == [0, 0, 0, 1, 2, 7, 7]


def test_tvc_extra_tokens_and_next_draft_length():
    # C_left 90 ns at 30 ns/token -> 3 tokens of time; tokens the same pass must also process
    # (the NPU's in-flight tokens under preverify_kv: recompute) come off that budget
    t = _tvc()
    assert [t.decide(49_870e-9, 500, extra_tokens=k) for k in (0, 1, 2, 3, 5)] == [3, 2, 1, 0, 0]
    # the cap applies to what is left: C_left 160 ns -> 5 tokens of time, 1 extra -> 4 (cap 5)
    capped = TimeAwarePreverifyControl(TvcConfig(max_preverify_tokens=5), 100.0 * 500, 500, 40.0, 4, 120.0, 4)
    assert capped.decide(49_800e-9, 500, extra_tokens=1) == 4
    assert capped.decide(0.0, 500, extra_tokens=100) == 5
    # the next draft's own length instead of the table's mean: 8 tokens x 10 ns = 80 ns
    # -> C_left = 50,000 - (49,870 + 80) = 50 ns -> 1 token
    assert t.decide(49_870e-9, 500, next_draft_len=8) == 1
    assert t.decide(49_870e-9, 500, next_draft_len=0) == 4       # 130 ns -> 4
