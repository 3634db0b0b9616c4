"""Runs of a duration: a decoder on a phone for minutes, its temperature carried from second to
second and from trace window to trace window (section ``thermal``; docs/modeling.md 'Thermals
over minutes').

A decoder's token loop is milliseconds, a phone's thermal time constants are tens of seconds to
minutes: the run is quasi-static. Each DVFS state of the governor (``thermal.npu_clock_fractions``,
``thermal.pim_rate_fractions``, with ``thermal.voltage_scaling`` the NPU's energy per operation at
the state's voltage), with and without the JEDEC refresh derating above 85 C, is one operating
point, simulated once per trace window (``run.windows``): its decode throughput and its power
(decode energy / decode time: NPU, memory package, PIM, the rest of the SoC).

A repetition decodes the run's windows one after the other in trace order (wrapping around after
the last), starting from the ambient at its own window: each window's tokens at the operating
point of the governor's state on that window, the RC network
(:class:`~ahasd_sim.hw.thermal.RcNetwork`, exact for any step) carried across window boundaries,
the governor looking every ``thermal.step_s``. Repetitions start at distinct windows spread evenly
over the run's windows; their figures are the samples (Student-t intervals over repetitions,
never over steps or windows). A run that decodes more windows than the trace gives each
repetition shares windows with the others (``repetitions_share_windows``): its interval then
reflects the order the windows come in, not fresh trace content.
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
           "max_package_c", "final_skin_c", "energy_per_token_j", "mean_power_w", "junction_limited_s")


@dataclass
class SustainedResult:
    """A run of ``duration_s``: one row per repetition, the time series of every repetition (one
    row per governor period), every repetition's windows (one row per window decoded: its index
    among the run's windows, the trace prompt it starts at, its start and end time and the node
    temperatures there), and the operating points (state, derated) ->
    per-window (tok/s, W)."""

    duration_s: float
    repetitions: pd.DataFrame
    series: pd.DataFrame
    points: dict = field(default_factory=dict)
    windows: pd.DataFrame = field(default_factory=pd.DataFrame)

    def summary(self) -> dict:
        """Mean and 95% Student-t half-width over repetitions of each figure (time to first
        throttle: over the repetitions that throttled; ``throttled_repetitions`` counts them);
        ``windows_per_repetition`` (mean windows decoded, the last one partly) and
        ``repetitions_share_windows`` (some window was decoded by two repetitions)."""
        out: dict = {"duration_s": self.duration_s, "repetitions": len(self.repetitions)}
        for col in FIGURES:
            xs = [x for x in self.repetitions[col] if not (isinstance(x, float) and math.isnan(x))]
            m, hw = mean_t_interval(xs)
            out[col] = m
            out[col + "_ci95_half"] = hw
        out["throttled_repetitions"] = int(self.repetitions["time_to_first_throttle_s"].notna().sum())
        out["windows_per_repetition"] = float(self.repetitions["windows_decoded"].mean())
        sets = [set(g["window"]) for _r, g in self.windows.groupby("repetition")] if len(self.windows) else []
        out["repetitions_share_windows"] = any(a & b for i, a in enumerate(sets) for b in sets[i + 1:])
        return out


def state_overrides(cfg, state: int, derated: bool) -> list[str]:
    """Config overrides of DVFS ``state`` (NPU clock, PIM rate) and the refresh regime."""
    t = cfg.thermal
    out = [f"pim.dvfs_rate_fraction={t.pim_rate_fractions[state]!r}"]
    if cfg.npu.enabled:
        out.append(f"npu.freq_ghz={cfg.npu.freq_ghz * t.npu_clock_fractions[state]!r}")
        e = t.energy_scale(state)
        if e != 1.0:   # C V^2: the core's switching energies; DMA/fabric and leakage are not scaled
            n = cfg.npu
            out += [f"npu.pj_per_mac={n.pj_per_mac * e!r}", f"npu.vector_pj_per_op={n.vector_pj_per_op * e!r}",
                    f"npu.spm_pj_per_bit={n.spm_pj_per_bit * e!r}"]
    out.append(f"memory.dram_temperature_c={_HOT_DRAM_C if derated else min(cfg.memory.dram_temperature_c, REFRESH_DERATING_ABOVE_C)!r}")
    return out


def operating_point(cfg, windows, state: int, derated: bool, workers: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(decode tok/s, decoder power W) per trace window at DVFS ``state`` (derated or not)."""
    tok_s, power, _tokens = _operating_point(cfg, windows, state, derated, workers)
    return tok_s, power


def _operating_point(cfg, windows, state, derated, workers):
    scfg = cfg.replace(state_overrides(cfg, state, derated), source="thermal")
    w = run_simulation(scfg, windows, workers=workers, intervals=False, events=False).windows
    tok_s = w["throughput_tok_s"].to_numpy(dtype=float)
    power = (w["decode_energy_j"] / w["decode_makespan_s"]).to_numpy(dtype=float)
    return tok_s, power, w["generated_tokens"].to_numpy(dtype=float)


def repetition_starts(n_windows: int, repetitions: int) -> list[int]:
    """The window each of ``repetitions`` repetitions starts at: distinct, spread evenly over the
    ``n_windows`` windows in trace order (repetition r at floor(r n / R))."""
    return [r * n_windows // repetitions for r in range(repetitions)]


def run_sustained(cfg, duration_s: float, windows=None, workers: int = 1,
                  repetitions: int | None = None) -> SustainedResult:
    """``cfg``'s decoder for ``duration_s`` seconds on its phone: ``repetitions`` runs (default one
    per trace window, at most that many) through the run's windows in trace order, each from
    its own starting window (:func:`repetition_starts`)."""
    if windows is None:
        windows = load_run_windows(cfg)
    t = cfg.thermal
    points: dict[tuple[int, bool], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def point(state: int, derated: bool):
        key = (state, derated)
        if key not in points:
            points[key] = _operating_point(cfg, windows, state, derated, workers)
        return points[key]

    n = len(point(0, False)[0])
    reps = n if repetitions is None else int(repetitions)
    if not 1 <= reps <= n:
        raise ValueError(f"{reps} repetitions need as many distinct starting windows; the run has {n} "
                         f"(run.windows)")
    tokens = point(0, False)[2]
    rows, series, wins = [], [], []
    for r, start in enumerate(repetition_starts(n, reps)):
        row, ser, win = trajectory(t, lambda state, derated, w: tuple(float(a[w]) for a in point(state, derated)[:2]),
                                   duration_s, window_tokens=tokens, start_window=start)
        rows.append({"repetition": r, "start_window": start, **row})
        series.extend({"repetition": r, **x} for x in ser)
        wins.extend({"repetition": r, "start_prompt": windows[x["window"]][0], **x} for x in win)
    steps = max(1, int(round(duration_s / float(t.step_s))))
    return SustainedResult(steps * float(t.step_s), pd.DataFrame(rows), pd.DataFrame(series),
                           {f"{s}{'_derated' if d else ''}": {"tok_s": v[0].tolist(), "power_w": v[1].tolist()}
                            for (s, d), v in sorted(points.items())}, pd.DataFrame(wins))


_NODE_COLS = ("package_c", "board_c", "skin_c")


def trajectory(t, point, duration_s: float, window_tokens=None, start_window: int = 0) -> tuple[dict, list[dict], list[dict]]:
    """One repetition: the phone (thermal section ``t``) from the ambient for ``duration_s``,
    decoding trace windows one after the other from ``start_window`` (wrapping around after the
    last; ``window_tokens[i]`` tokens in window i), window w at ``point(state, refresh_derated,
    w) -> (tok/s, decoder W)`` for the governor's current state; ``window_tokens=None``: one
    endless window 0. The decoder's power heats the package node, ``t.other_power_w`` the skin;
    the network is stepped exactly over each piece of constant power (a governor period, cut
    where a window ends), so a window starts at the temperatures the previous one ended at; the
    governor looks at the end of every period. Returns (its figures, its time series: one dict
    per period, its windows: one dict per window decoded)."""
    net, dt = RcNetwork(t), float(t.step_s)
    steps = max(1, int(round(duration_s / dt)))
    temps = np.full(3, t.ambient_c)
    gov = Governor(t)
    state, tokens, energy, first, deepest, tail_tokens, junction_s = 0, 0.0, 0.0, None, None, 0.0, 0.0
    max_skin = max_pkg = t.ambient_c
    tail_from = steps - max(1, int(round(steps * SUSTAINED_TAIL)))
    last = len(t.npu_clock_fractions) - 1
    n_win = 1 if window_tokens is None else len(window_tokens)
    w = start_window % n_win
    left = math.inf if window_tokens is None else float(window_tokens[w])
    now = 0.0

    def opened(w):
        return {"seq": len(windows), "window": w, "start_s": now,
                **{f"start_{c}": float(x) for c, x in zip(_NODE_COLS, temps)}}

    windows: list[dict] = []
    cur = opened(w)
    series = []
    for k in range(steps):
        derated0, state0, w0, temps0 = bool(temps[0] > REFRESH_DERATING_ABOVE_C), state, w, temps.copy()
        remaining, step_tokens, step_energy = dt, 0.0, 0.0
        while remaining > dt * 1e-12:
            derated = bool(temps[0] > REFRESH_DERATING_ABOVE_C)
            tok_s, power = point(state, derated, w)
            ends = tok_s > 0 and left < tok_s * remaining          # the window ends within this period
            seg = left / tok_s if ends else remaining
            temps = net.step(temps, (power, 0.0, t.other_power_w), seg)
            step_tokens += tok_s * seg
            step_energy += power * seg
            left = 0.0 if ends else left - tok_s * seg
            remaining = remaining - seg if ends else 0.0
            now = k * dt + (dt - remaining)
            if ends:   # the next window starts where this one ended, at these temperatures
                windows.append({**cur, "end_s": now, "finished": True,
                                **{f"end_{c}": float(x) for c, x in zip(_NODE_COLS, temps)}})
                w = (w + 1) % n_win
                left = float(window_tokens[w])
                cur = opened(w)
        series.append({"time_s": k * dt, "state": state0, "refresh_derated": derated0, "window": w0,
                       "junction_limited": gov.junction_bound, "tok_s": step_tokens / dt,
                       "power_w": step_energy / dt, "package_c": temps0[0], "board_c": temps0[1],
                       "skin_c": temps0[2]})
        tokens += step_tokens
        energy += step_energy
        if gov.junction_bound:
            junction_s += dt
        if k >= tail_from:
            tail_tokens += step_tokens
        max_skin, max_pkg = max(max_skin, temps[2]), max(max_pkg, temps[0])
        state = gov.update(float(temps[2]), float(temps[0]))
        if state > 0 and first is None:
            first = (k + 1) * dt
        if state == last and deepest is None:
            deepest = (k + 1) * dt
    windows.append({**cur, "end_s": steps * dt, "finished": False,
                    **{f"end_{c}": float(x) for c, x in zip(_NODE_COLS, temps)}})
    row = {"burst_tok_s": series[0]["tok_s"], "sustained_tok_s": tail_tokens / ((steps - tail_from) * dt),
           "mean_tok_s": tokens / (steps * dt),
           "time_to_first_throttle_s": float("nan") if first is None else first,
           "time_to_deepest_state_s": float("nan") if deepest is None else deepest,
           "max_skin_c": max_skin, "max_package_c": max_pkg, "final_skin_c": float(temps[2]),
           "energy_per_token_j": energy / tokens if tokens > 0 else float("nan"),
           "mean_power_w": energy / (steps * dt), "junction_limited_s": junction_s, "final_state": state,
           "windows_decoded": len(windows)}
    return row, series, windows
