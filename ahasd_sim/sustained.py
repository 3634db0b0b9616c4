"""Runs of a duration: a decoder on a phone for minutes, its temperature carried from second to
second (section ``thermal``; docs/modeling.md 'Thermals over minutes').

A decoder's token loop is milliseconds, a phone's thermal time constants are tens of seconds to
minutes: the run is quasi-static. Each DVFS state of the governor (``thermal.npu_clock_fractions``,
``thermal.pim_rate_fractions``), with and without the JEDEC refresh derating above 85 C, is one
operating point, simulated once per trace window (``run.windows``): its decode throughput and its
power (decode energy / decode time: NPU, memory package, PIM, the rest of the SoC). Repetition r
then steps the RC network (:class:`~ahasd_sim.hw.thermal.RcNetwork`, exact steps of
``thermal.step_s``) from the ambient for ``duration_s``, at every step running at the operating
point of the governor's state (and of the package temperature's refresh regime) on window r, so
a repetition's statistics come from its own window and repetitions are independent samples:
intervals are Student-t over repetitions, never over steps.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .hw.lpddr5 import REFRESH_DERATING_ABOVE_C
from .hw.thermal import Governor, RcNetwork
from .metrics.stats import mean_t_interval
from .simulation import load_run_windows, run_simulation

#: share of a run's duration at its end whose mean rate is its sustained throughput
SUSTAINED_TAIL = 0.25
#: DRAM temperature a derated operating point is simulated at (any value above 85 C derates alike)
_HOT_DRAM_C = REFRESH_DERATING_ABOVE_C + 5.0

#: per-repetition figures (columns of :attr:`SustainedResult.repetitions`)
FIGURES = ("burst_tok_s", "sustained_tok_s", "mean_tok_s", "time_to_first_throttle_s", "time_to_deepest_state_s",
           "max_skin_c",
           "max_package_c", "final_skin_c", "energy_per_token_j", "mean_power_w")


@dataclass
class SustainedResult:
    """A run of ``duration_s``: one row per repetition, the time series of every repetition,
    and the operating points (state, derated) -> per-window (tok/s, W)."""

    duration_s: float
    repetitions: pd.DataFrame
    series: pd.DataFrame
    points: dict = field(default_factory=dict)

    def summary(self) -> dict:
        """Mean and 95% Student-t half-width over repetitions of each figure (time to first
        throttle: over the repetitions that throttled; ``throttled_repetitions`` counts them)."""
        out: dict = {"duration_s": self.duration_s, "repetitions": len(self.repetitions)}
        for col in FIGURES:
            xs = [x for x in self.repetitions[col] if not (isinstance(x, float) and math.isnan(x))]
            m, hw = mean_t_interval(xs)
            out[col] = m
            out[col + "_ci95_half"] = hw
        out["throttled_repetitions"] = int(self.repetitions["time_to_first_throttle_s"].notna().sum())
        return out


def state_overrides(cfg, state: int, derated: bool) -> list[str]:
    """Config overrides of DVFS ``state`` (NPU clock, PIM rate) and the refresh regime."""
    t = cfg.thermal
    out = [f"pim.dvfs_rate_fraction={t.pim_rate_fractions[state]!r}"]
    if cfg.npu.enabled:
        out.append(f"npu.freq_ghz={cfg.npu.freq_ghz * t.npu_clock_fractions[state]!r}")
    out.append(f"memory.dram_temperature_c={_HOT_DRAM_C if derated else min(cfg.memory.dram_temperature_c, REFRESH_DERATING_ABOVE_C)!r}")
    return out


def operating_point(cfg, windows, state: int, derated: bool, workers: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(decode tok/s, decoder power W) per trace window at DVFS ``state`` (derated or not)."""
    scfg = cfg.replace(state_overrides(cfg, state, derated), source="thermal")
    w = run_simulation(scfg, windows, workers=workers, intervals=False, events=False).windows
    tok_s = w["throughput_tok_s"].to_numpy(dtype=float)
    power = (w["decode_energy_j"] / w["decode_makespan_s"]).to_numpy(dtype=float)
    return tok_s, power


def run_sustained(cfg, duration_s: float, windows=None, workers: int = 1) -> SustainedResult:
    """``cfg``'s decoder for ``duration_s`` seconds on its phone, one repetition per trace window."""
    if windows is None:
        windows = load_run_windows(cfg)
    t = cfg.thermal
    points: dict[tuple[int, bool], tuple[np.ndarray, np.ndarray]] = {}

    def point(state: int, derated: bool):
        key = (state, derated)
        if key not in points:
            points[key] = operating_point(cfg, windows, state, derated, workers)
        return points[key]

    reps = len(point(0, False)[0])
    rows, series = [], []
    for r in range(reps):
        row, ser = trajectory(t, lambda state, derated, r=r: tuple(float(a[r]) for a in point(state, derated)),
                              duration_s)
        rows.append({"repetition": r, **row})
        series.extend({"repetition": r, **x} for x in ser)
    steps = max(1, int(round(duration_s / float(t.step_s))))
    return SustainedResult(steps * float(t.step_s), pd.DataFrame(rows), pd.DataFrame(series),
                           {f"{s}{'_derated' if d else ''}": {"tok_s": v[0].tolist(), "power_w": v[1].tolist()}
                            for (s, d), v in sorted(points.items())})


def trajectory(t, point, duration_s: float) -> tuple[dict, list[dict]]:
    """One repetition: the phone (thermal section ``t``) from the ambient for ``duration_s``, at
    every governor period running at ``point(state, refresh_derated) -> (tok/s, decoder W)``; the
    decoder's power heats the package node, ``t.other_power_w`` the skin. Returns (its figures,
    its time series: one dict per period)."""
    net, dt = RcNetwork(t), float(t.step_s)
    steps = max(1, int(round(duration_s / dt)))
    temps = np.full(3, t.ambient_c)
    gov = Governor(t)
    state, tokens, energy, first, deepest, tail_tokens = 0, 0.0, 0.0, None, None, 0.0
    max_skin = max_pkg = t.ambient_c
    tail_from = steps - max(1, int(round(steps * SUSTAINED_TAIL)))
    last = len(t.npu_clock_fractions) - 1
    series = []
    burst = point(0, False)[0]
    for k in range(steps):
        derated = bool(temps[0] > REFRESH_DERATING_ABOVE_C)
        tok_s, power = point(state, derated)
        series.append({"time_s": k * dt, "state": state, "refresh_derated": derated, "tok_s": tok_s,
                       "power_w": power, "package_c": temps[0], "board_c": temps[1], "skin_c": temps[2]})
        temps = net.step(temps, (power, 0.0, t.other_power_w), dt)
        tokens += tok_s * dt
        energy += power * dt
        if k >= tail_from:
            tail_tokens += tok_s * dt
        max_skin, max_pkg = max(max_skin, temps[2]), max(max_pkg, temps[0])
        state = gov.update(float(temps[2]))
        if state > 0 and first is None:
            first = (k + 1) * dt
        if state == last and deepest is None:
            deepest = (k + 1) * dt
    row = {"burst_tok_s": burst, "sustained_tok_s": tail_tokens / ((steps - tail_from) * dt),
           "mean_tok_s": tokens / (steps * dt),
           "time_to_first_throttle_s": float("nan") if first is None else first,
           "time_to_deepest_state_s": float("nan") if deepest is None else deepest,
           "max_skin_c": max_skin, "max_package_c": max_pkg, "final_skin_c": float(temps[2]),
           "energy_per_token_j": energy / tokens if tokens > 0 else float("nan"),
           "mean_power_w": energy / (steps * dt), "final_state": state}
    return row, series
