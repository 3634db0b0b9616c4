"""TVC: Time-Aware Pre-Verification Control (AHASD paper, section "TVC").

Three FIFO tables of (time, length) pairs and one register, all kept in one
timebase (nanoseconds; modeling.md decision 4):

* NVCT: NPU verification time and the KV length it ran at;
* PDCT: PIM drafting time of a batch and its draft length;
* PVCT: PIM pre-verification time and its length;
* NCR: time the current NPU verification has been running (``now - start``).

Decision rule (paper)::

    C_npu    = mean_j(C_npu/L_kv)_j * L_kv_i
    C_draft1 = mean_j(C_draft/L_draft)_j * L_draft_i
    C_left   = C_npu - (C_now + C_draft1)
    L_pv     = floor(C_left / mean_j(C_pv/L)_j)

The tables are preloaded with offline-profiled values (from the analytic cost
model) and updated with every measured task.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass


@dataclass
class TvcStats:
    decisions: int = 0
    inserted: int = 0                  # pre-verifications started
    successful: int = 0                # pre-verifications whose result was applied
    wasted: int = 0                    # result discarded (rollback or NPU overtook it)
    tokens_preverified: int = 0
    tokens_committed: int = 0          # tokens committed by pre-verification
    early_rejections: int = 0          # rejections found by PIM before the NPU
    npu_wait_for_preverify_s: float = 0.0


class _Fifo:
    def __init__(self, n: int, preload: tuple[float, float]):
        self.items: deque[tuple[float, float]] = deque([preload] * n, maxlen=n)
        self._per_unit: float | None = None     # means cached until the next push (read per batch)
        self._length: float | None = None

    def push(self, time_ns: float, length: float) -> None:
        if length > 0:
            self.items.append((time_ns, length))
            self._per_unit = self._length = None

    def mean_per_unit(self) -> float:
        v = self._per_unit
        if v is None:
            total = 0               # sum(t / l for t, l in items), as a loop (the same float sums)
            for t, l in self.items:
                total += t / l
            v = self._per_unit = total / len(self.items)
        return v

    def mean_length(self) -> float:
        v = self._length
        if v is None:
            total = 0
            for _t, l in self.items:
                total += l
            v = self._length = total / len(self.items)
        return v


class TimeAwarePreverifyControl:
    """Decides how many of the earliest unverified tokens PIM pre-verifies."""

    def __init__(self, cfg, preload_npu_ns: float, preload_kv_len: int, preload_draft_ns: float,
                 preload_draft_len: int, preload_pv_ns: float, preload_pv_len: int):
        self.cfg = cfg
        n = cfg.table_entries
        self.nvct = _Fifo(n, (preload_npu_ns, preload_kv_len))
        self.pdct = _Fifo(n, (preload_draft_ns, preload_draft_len))
        self.pvct = _Fifo(n, (preload_pv_ns, preload_pv_len))
        self._max_tokens = cfg.max_preverify_tokens
        self.stats = TvcStats()

    def record_npu(self, time_s: float, kv_len: int) -> None:
        self.nvct.push(time_s * 1e9, kv_len)

    def record_draft(self, time_s: float, draft_len: int) -> None:
        self.pdct.push(time_s * 1e9, draft_len)

    def record_preverify(self, time_s: float, n_tokens: int) -> None:
        self.pvct.push(time_s * 1e9, n_tokens)

    def predicted_npu_ns(self, kv_len: int) -> float:
        return self.nvct.mean_per_unit() * kv_len

    def decide(self, npu_elapsed_s: float, npu_kv_len: int, next_draft_len: float | None = None,
               extra_tokens: int = 0) -> int:
        """L_pv for an NPU verification that has run ``npu_elapsed_s`` at ``npu_kv_len``.

        ``extra_tokens`` are tokens the same PIM pass must also process (``preverify_kv:
        recompute`` rebuilds the KV of the NPU's in-flight tokens): L_pv = floor(C_left / C_pv)
        - extra_tokens."""
        self.stats.decisions += 1
        c_npu = self.nvct.mean_per_unit() * npu_kv_len       # predicted_npu_ns(npu_kv_len)
        l_draft = self.pdct.mean_length() if next_draft_len is None else next_draft_len
        c_draft1 = self.pdct.mean_per_unit() * l_draft
        c_left = c_npu - (npu_elapsed_s * 1e9 + c_draft1)
        per_token_pv = self.pvct.mean_per_unit()
        if c_left <= 0 or per_token_pv <= 0:
            return 0
        n = math.floor(c_left / per_token_pv) - int(extra_tokens)
        cap = self._max_tokens           # max(0, min(cap, n)) as comparisons (the same value)
        if n > cap:
            n = cap
        return n if n > 0 else 0

    def storage_bits(self) -> int:
        # three (64-bit time, 32-bit length) tables, the 64-bit NCR and 200 bits of control = 1416 bits for 4 entries
        return 3 * self.cfg.table_entries * (64 + 32) + 64 + 200
