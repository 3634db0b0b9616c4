"""Windows of a tree-trace replay: contiguous blocks of verification rounds, one sample each.

The mode hands them to the project-wide window statistics (``simulation.combine_windows``,
``metrics.stats``: bootstrap over these windows' totals) as ``mode_windows``.
"""
from __future__ import annotations

import numpy as np


def window_samples(round_tokens, round_time_s, round_energy_j, n_windows: int) -> dict[str, list[float]]:
    """Per window of consecutive rounds: its totals (tokens, decode time, decode energy: the
    ratio estimators' inputs) and, for reading, its throughput (tok/s) and energy per token (J)."""
    tok = np.asarray(round_tokens, dtype=float)
    dur = np.asarray(round_time_s, dtype=float)
    en = np.asarray(round_energy_j, dtype=float)
    k = max(1, min(int(n_windows), tok.size))
    thr, ept, tokens, times, energies = [], [], [], [], []
    for idx in np.array_split(np.arange(tok.size), k):
        if idx.size == 0:
            continue
        t, d, e = tok[idx].sum(), dur[idx].sum(), en[idx].sum()
        tokens.append(float(t))
        times.append(float(d))
        energies.append(float(e))
        thr.append(t / d if d > 0 else float("nan"))
        ept.append(e / t if t > 0 else float("nan"))
    return {"throughput_tok_s": thr, "energy_per_token_j": ept, "generated_tokens": tokens,
            "decode_makespan_s": times, "decode_energy_j": energies}

