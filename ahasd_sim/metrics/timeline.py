"""Chrome-trace / Perfetto JSON export of device busy intervals.

Open the file at https://ui.perfetto.dev or chrome://tracing.
"""
from __future__ import annotations

from typing import Any


def chrome_trace(busy_intervals: dict[str, list[tuple[float, float, str]]], run_name: str) -> dict[str, Any]:
    events: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0,
                                     "args": {"name": run_name}}]
    for tid, device in enumerate(sorted(busy_intervals), start=1):
        events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": device}})
        for start, end, label in busy_intervals[device]:
            events.append({"name": label, "cat": device, "ph": "X", "pid": 1, "tid": tid,
                           "ts": round(start * 1e6, 3), "dur": round((end - start) * 1e6, 3)})
    return {"traceEvents": events, "displayTimeUnit": "ms"}
