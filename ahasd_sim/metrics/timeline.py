"""Chrome-trace / Perfetto JSON export of device busy intervals, with power and bandwidth counters.

Open the file at https://ui.perfetto.dev or chrome://tracing. A run's timeline.json has one
process (track group) per trace window, ``window N: mode/policy``, each on its own simulated
clock from 0; in it one thread per device (its busy intervals, labelled by task) and counter
tracks: ``<device> dynamic power (W)`` (each task's dynamic energy on the device spread evenly over
the device's busy interval of that task, or over the task's span for a device without one, such
as the memory; static power is not drawn) and ``off-chip bandwidth (GB/s)`` (each task's off-chip
bytes spread over the task's span). Integrated over time they give the tasks' dynamic energy and
off-chip bytes (tests/test_timeline_counters.py).
"""
from __future__ import annotations

from typing import Any, Iterable


def _steps(pieces: Iterable[tuple[float, float, float]]) -> list[tuple[float, float]]:
    """(t, value) of the sum of rectangles (start, end, height), at every change."""
    deltas: dict[float, float] = {}
    for a, b, h in pieces:
        if b > a and h:
            deltas[a] = deltas.get(a, 0.0) + h
            deltas[b] = deltas.get(b, 0.0) - h
    out, level, peak = [], 0.0, 0.0
    for t in sorted(deltas):
        level += deltas[t]
        peak = max(peak, abs(level))
        out.append((t, level))
    tol = 1e-9 * peak
    return [(t, 0.0 if abs(v) <= tol else v) for t, v in out]   # no -1e-16 left by float sums


def counter_events(task_marks, pid: int) -> list[dict[str, Any]]:
    """Counter ("C") events of one window: dynamic power per device and off-chip bandwidth."""
    power: dict[str, list[tuple[float, float, float]]] = {}
    bandwidth = []
    for start, ends, energy, nbytes in task_marks:
        span_end = max(ends.values()) if ends else start
        for dev, e in energy.items():
            end = ends.get(dev, span_end)        # a device without a busy interval (the memory): the task's span
            if end > start and e > 0:
                power.setdefault(dev, []).append((start, end, e / (end - start)))
        if nbytes and span_end > start:
            bandwidth.append((start, span_end, nbytes / (span_end - start) / 1e9))
    events = []
    series = {f"{dev} dynamic power (W)": pieces for dev, pieces in sorted(power.items())}
    if bandwidth:
        series["off-chip bandwidth (GB/s)"] = bandwidth
    for name, pieces in series.items():
        key = "GB/s" if name.startswith("off-chip") else "W"
        last = None
        for t, v in _steps(pieces):
            if last is not None and abs(v - last) <= 1e-12 * max(abs(v), abs(last)):
                continue             # back-to-back tasks at the same rate: one step, not two
            events.append({"name": name, "ph": "C", "pid": pid, "ts": round(t * 1e6, 3),
                           "args": {key: float(f"{v:.6g}")}})     # 6 digits: a drawing, not a result
            last = v
    return events


def chrome_trace(busy_intervals: dict[str, list[tuple[float, float, str]]], run_name: str,
                 task_marks=None, window: int = 0) -> dict[str, Any]:
    """One window's trace: process ``window + 1`` named ``window N: run_name``."""
    pid = window + 1
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": f"window {window}: {run_name}"}},
        {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": window}}]
    for tid, device in enumerate(sorted(busy_intervals), start=1):
        events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": device}})
        for start, end, label in busy_intervals[device]:
            events.append({"name": label, "cat": device, "ph": "X", "pid": pid, "tid": tid,
                           "ts": round(start * 1e6, 3), "dur": round((end - start) * 1e6, 3)})
    if task_marks:
        events.extend(counter_events(task_marks, pid))
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def merge_windows(timelines: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The windows' traces in one file (each already its own process)."""
    parts = [t for t in timelines if t is not None]
    if not parts:
        return None
    return {"traceEvents": [e for t in parts for e in t["traceEvents"]], "displayTimeUnit": "ms"}
