"""EDC: Entropy-History-Aware Drafting Control (AHASD paper, section "EDC").

Structures (paper): LEHT 8 x 3-bit local entropy history, LCEHT 8 x 3-bit
commit entropy history, LLR 3-bit leading length register, PHT 512 x 2-bit
saturating counters. Decisions taken where the paper is ambiguous are those of
modeling.md decision 1 (LEHT is a shift register with
the newest bucket in H0; 2: the PHT index used at prediction is checkpointed per
batch and that entry is updated when the batch is resolved; 3: LLR is
recomputed as min(7, live unverified batches) on every event).
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class EdcStats:
    predictions: int = 0
    continue_predictions: int = 0
    suppressed_batches: int = 0          # predictions that stopped look-ahead
    resolved_predictions: int = 0        # predictions whose batch was verified
    correct_predictions: int = 0
    rollbacks: int = 0                   # LEHT <- LCEHT restores

    @property
    def accuracy(self) -> float:
        return self.correct_predictions / self.resolved_predictions if self.resolved_predictions else 0.0


class EntropyHistoryControl:
    """Predicts after each drafted batch whether look-ahead drafting should continue."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.n_buckets = 1 << cfg.bucket_bits
        self.llr_max = (1 << cfg.llr_bits) - 1
        self.history_len = cfg.history_len
        self.leht = [0] * self.history_len
        self.lceht = [0] * self.history_len
        self._leht_ptr = 0   # only used by the circular layout
        self._lceht_ptr = 0
        self.llr = 0
        self.pht = [cfg.pht_counter_init] * (1 << (2 * cfg.bucket_bits + cfg.llr_bits))
        self.stats = EdcStats()
        self._shift = cfg.history_order == "shift_newest_h0"
        self._half = self.history_len // 2
        self._older_len = self.history_len - self._half
        self._recent_shift = cfg.llr_bits
        self._older_shift = cfg.bucket_bits + cfg.llr_bits
        self._entropy_max = cfg.entropy_max_nats
        self._killed_decrement = cfg.killed_batch_update == "decrement"
        self._top_bucket = self.n_buckets - 1
        #: (sum of the recent half, sum of the older half) of LEHT; None: recompute (index())
        self._half_sums: tuple[int, int] | None = None

    # ---------------------------------------------------------------- helpers
    def bucket(self, mean_entropy_nats: float) -> int:
        """Bucket id of a batch: 8 equal bins over [0, H_max]."""
        h = mean_entropy_nats    # max(0.0, h) and min(n - 1, b) as comparisons (same values)
        b = math.floor(self.n_buckets * (h if h > 0.0 else 0.0) / self._entropy_max)
        top = self._top_bucket
        return b if b < top else top

    def _insert(self, table: list[int], bucket: int, which: str) -> None:
        if table is self.leht:
            self._half_sums = None     # index() recomputes them
        if self._shift:
            table.pop()
            table.insert(0, bucket)
        else:
            ptr = self._leht_ptr if which == "leht" else self._lceht_ptr
            table[ptr] = bucket
            ptr = (ptr + 1) % self.history_len
            if which == "leht":
                self._leht_ptr = ptr
            else:
                self._lceht_ptr = ptr

    def index(self) -> int:
        """9-bit PHT index {avg(older half), avg(recent half), LLR} (averages rounded down)."""
        half = self._half
        leht = self.leht
        recent_sum, older_sum = sum(leht[:half]), sum(leht[half:])
        self._half_sums = (recent_sum, older_sum)   # kept up to date by predict (shift layout)
        recent = recent_sum // half                   # = floor(sum / half): small ints
        older = older_sum // self._older_len
        return (older << self._older_shift) | (recent << self._recent_shift) | self.llr

    # ---------------------------------------------------------------- protocol
    def predict(self, mean_entropy_nats: float, live_unverified_batches: int) -> tuple[bool, int, int]:
        """After a batch is drafted: returns (continue look-ahead?, PHT index, bucket)."""
        bucket = self.bucket(mean_entropy_nats)
        live = live_unverified_batches if live_unverified_batches > 0 else 0
        self.llr = live if live < self.llr_max else self.llr_max   # min(llr_max, max(0, live))
        sums = self._half_sums
        if self._shift and sums is not None and self._half:
            # _insert(self.leht, bucket, "leht") and index(), shift layout inlined: the newest bucket
            # enters the recent half, one moves from the recent to the older half, the oldest leaves
            leht = self.leht
            dropped = leht.pop()
            leht.insert(0, bucket)
            moved = leht[self._half]
            recent, older = sums[0] + bucket - moved, sums[1] + moved - dropped
            self._half_sums = (recent, older)
            idx = ((older // self._older_len) << self._older_shift) | ((recent // self._half) << self._recent_shift) \
                | self.llr
        else:
            self._insert(self.leht, bucket, "leht")
            idx = self.index()
        cont = self.pht[idx] >= 2  # counter MSB
        st = self.stats
        st.predictions += 1
        if cont:
            st.continue_predictions += 1
        else:
            st.suppressed_batches += 1
        return cont, idx, bucket

    def resolve(self, pht_index: int, bucket: int, predicted_continue: bool, fully_accepted: bool,
                killed: bool = False) -> None:
        """Update on the verification result of one batch (called in batch order)."""
        if killed:
            if self._killed_decrement:
                self.pht[pht_index] = max(0, self.pht[pht_index] - 1)
            return
        self.stats.resolved_predictions += 1
        if predicted_continue == fully_accepted:
            self.stats.correct_predictions += 1
        if fully_accepted:
            self.pht[pht_index] = min(3, self.pht[pht_index] + 1)
            self._insert(self.lceht, bucket, "lceht")
        else:
            self.pht[pht_index] = max(0, self.pht[pht_index] - 1)
            self.leht[:] = self.lceht
            self._half_sums = None
            self._leht_ptr = self._lceht_ptr
            self.stats.rollbacks += 1

    def set_live_batches(self, live_unverified_batches: int) -> None:
        self.llr = min(self.llr_max, max(0, live_unverified_batches))

    def storage_bits(self) -> int:
        return (2 * self.history_len * self.cfg.bucket_bits + self.cfg.llr_bits + 2 * len(self.pht))
