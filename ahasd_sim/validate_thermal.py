"""The phone thermal model against a published throttling measurement (arXiv 2603.23640 and its
code, github.com/conscious-engines/TinyBench): fitted on one phone, compared on another.

The measured phones decode Qwen2.5-1.5B (4-bit) on their GPUs in back-to-back iterations. The
model phone is the ``thermal`` section's RC network and skin governor driving a generic decoder
whose rate and power scale with its DVFS state's clock fraction (tok/s = burst x f, W = P x f).

* **Fit, iPhone 16 Pro** (MLX, 1000-token iterations, 1 s apart): ~40 tok/s at first, the drop
  under way within two iterations (first throttle by 2 x 1000 / 40 + 1 = 51 s) and a steady
  22.6 tok/s (0.565 of the burst). Two observables, two unknowns: the decoder's burst power P
  (sets the throttled steady state) and one scale kappa on the three heat capacities (sets how
  fast the skin gets there); the resistances stay the section's.
* **Compare, Galaxy S24 Ultra** (MLC-LLM, one warm-up + 700-token iterations, 1 s apart): the
  governor floored the GPU (231 of ~650 MHz, the model's deepest state 0.4) after the warm-up and
  5 iterations at ~10 tok/s: 6 x (700 / 10 + 1) = 426 s. The model, with the iPhone's kappa and
  (unmeasured for either phone) the same burst power, predicts its time to the deepest state.
"""
from __future__ import annotations

import dataclasses
import math

#: iPhone 16 Pro, arXiv 2603.23640 / TinyBench README: burst and steady-state tok/s
IPHONE_BURST_TOK_S = 40.0
IPHONE_STEADY_TOK_S = 22.6
#: tokens per iteration (TinyBench mlx-llm LLMEvaluator.swift: stop at 1000) and the gap (s)
IPHONE_ITERATION_TOKENS = 1000
ITERATION_GAP_S = 1.0
#: first throttle within two iterations
IPHONE_FIRST_THROTTLE_S = 2 * IPHONE_ITERATION_TOKENS / IPHONE_BURST_TOK_S + ITERATION_GAP_S
#: Galaxy S24 Ultra: warm-up + 5 iterations of 700 tokens (TinyBench BenchmarkService.kt) at ~10 tok/s
#: (an operator's write-up of the same runs, grade C) before the GPU floor
S24_TOK_S = 10.0
S24_FLOOR_S = 6 * (700 / S24_TOK_S + ITERATION_GAP_S)
#: the steady state is read over [STEADY_FROM_S, FIT_DURATION_S)
FIT_DURATION_S = 1800.0
STEADY_FROM_S = 900.0


def scaled(t, kappa: float):
    """Thermal section ``t`` with its three heat capacities scaled by ``kappa``."""
    return dataclasses.replace(t, c_package_j_per_k=t.c_package_j_per_k * kappa,
                               c_board_j_per_k=t.c_board_j_per_k * kappa, c_skin_j_per_k=t.c_skin_j_per_k * kappa)


def generic_run(t, power_w: float, duration_s: float = FIT_DURATION_S):
    """(figures, series) of a decoder drawing ``power_w`` x f at DVFS state f (tok/s = f)."""
    from .sustained import trajectory
    f = t.npu_clock_fractions
    row, series, _windows = trajectory(t, lambda s, _d, _w: (f[s], power_w * f[s]), duration_s)
    return row, series


def retained(t, power_w: float) -> float:
    """Steady-state rate as a fraction of the burst."""
    _row, series = generic_run(t, power_w)
    xs = [x["tok_s"] for x in series if x["time_s"] >= STEADY_FROM_S]
    return sum(xs) / len(xs)


def _bisect(fn, lo: float, hi: float, target: float, increasing: bool, iters: int = 40) -> float:
    for _ in range(iters):
        mid = math.sqrt(lo * hi)
        if (fn(mid) < target) == increasing:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def fit(t) -> dict:
    """Fit (P, kappa) on the iPhone 16 Pro; predict the Galaxy S24 Ultra's floor."""
    kappa, power = 1.0, 6.0
    for _ in range(4):
        power = _bisect(lambda p: retained(scaled(t, kappa), p), 1.0, 40.0,
                        IPHONE_STEADY_TOK_S / IPHONE_BURST_TOK_S, increasing=False)
        kappa = _bisect(lambda k: generic_run(scaled(t, k), power, 600.0)[0]["time_to_first_throttle_s"],
                        1e-3, 10.0, IPHONE_FIRST_THROTTLE_S, increasing=True)
    ft = scaled(t, kappa)
    row, _ = generic_run(ft, power)
    s24, _ = generic_run(ft, power, 1200.0)
    return {"power_w": power, "kappa": kappa, "c_package_j_per_k": ft.c_package_j_per_k,
            "c_board_j_per_k": ft.c_board_j_per_k, "c_skin_j_per_k": ft.c_skin_j_per_k,
            "iphone_first_throttle_s": row["time_to_first_throttle_s"], "iphone_target_first_throttle_s": IPHONE_FIRST_THROTTLE_S,
            "iphone_retained": retained(ft, power), "iphone_target_retained": IPHONE_STEADY_TOK_S / IPHONE_BURST_TOK_S,
            "s24_predicted_floor_s": s24["time_to_deepest_state_s"], "s24_measured_floor_s": S24_FLOOR_S}


def main() -> int:
    """Print the fit on the section's a-priori (whole-phone) parameters."""
    from .hw.thermal import ThermalConfig
    for k, v in fit(ThermalConfig()).items():
        print(f"{k:32s} {v:.4g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
