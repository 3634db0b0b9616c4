"""What both measurements share: the torch check, the environment columns, the CSV written
row by row, the time budget, timing loops and quantiles.

Nothing here imports torch at module level; the functions that need it (on CUDA) import it
when called, which is only after :func:`require_torch` succeeded.
"""
from __future__ import annotations

import csv
import datetime as _dt
import math
import os
import subprocess
import time
from typing import Callable, Sequence

from ..errors import InputError

INSTALL_HINT = "pip install 'ahasd_sim[measure]'"
#: the columns every measured CSV starts with: where and when it was measured
ENV_COLUMNS = ["gpu_name", "driver", "torch_version", "cuda_version", "date_utc"]
MIN_REPS_UNDER_CAP = 5   # time_fn never cuts the repetitions of a point below this


def refuse_shipped_out(command: str, out: str, force: bool) -> None:
    """Refuse to overwrite a file shipped with the package (the reference measurements
    ``validate`` reads) unless ``--force``: a measurement on another GPU would silently replace
    the H200 data."""
    from pathlib import Path

    from ..paths import DATA_DIRS, data_roots
    target = Path(out).resolve()
    if force or not target.exists():
        return
    for root in data_roots():
        for d in DATA_DIRS:
            folder = (root / d).resolve()
            if folder in target.parents:
                raise InputError(f"{command}: --out {out}: is a file shipped with ahasd_sim (reference data "
                                 "that validate reads); refusing to overwrite it: write elsewhere with --out, "
                                 "or add --force to replace it")


def require_torch(command: str):
    """The ``torch`` module, or a one-line :class:`InputError` saying how to install it."""
    try:
        import torch
    except ImportError:
        raise InputError(f"{command}: needs PyTorch: {INSTALL_HINT}") from None
    return torch


def log(msg: str) -> None:
    print(msg, flush=True)


def env_info(device) -> dict[str, str]:
    """The environment columns (:data:`ENV_COLUMNS`) of a run on ``device`` (a torch.device)."""
    import torch
    info = {
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda or "none",
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if device.type == "cuda":
        info["gpu_name"] = torch.cuda.get_device_name(device)
        info["driver"] = _driver_version()
    else:
        info["gpu_name"] = "cpu"
        info["driver"] = "none"
    return info


def _driver_version() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
        return out[0].strip() if out else "unknown"
    except Exception:  # noqa: BLE001 - informational only: a missing nvidia-smi must not stop a run
        return "unknown"


def quantiles(ts: Sequence[float]) -> tuple[float, float, float]:
    """(median, p10, p90) of ``ts``, linearly interpolated between order statistics."""
    if not ts:
        raise ValueError("quantiles of no timings")
    ts = sorted(ts)

    def q(p):
        pos = p * (len(ts) - 1)
        lo = int(math.floor(pos))
        hi = min(lo + 1, len(ts) - 1)
        return ts[lo] + (ts[hi] - ts[lo]) * (pos - lo)

    return q(0.5), q(0.1), q(0.9)


class MeasurementCsv:
    """A measured CSV written as the run goes: each :meth:`row` is flushed at once, so a run
    cut short (time budget, out of memory, killed) leaves every row measured so far.

    ``columns`` are the file's columns; ``constant`` the cells every row shares (the
    environment). A cell a row does not give is written empty; an unknown one is an error.
    """

    def __init__(self, path: str | os.PathLike, columns: Sequence[str], constant: dict):
        unknown = sorted(set(constant) - set(columns))
        if unknown:
            raise ValueError(f"constant cells {unknown} are not columns of the CSV")
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.path = path
        self._fh = open(path, "w", newline="")   # noqa: SIM115 - closed by close()/__exit__
        self._w = csv.DictWriter(self._fh, fieldnames=list(columns))
        self._w.writeheader()
        self._fh.flush()
        self._constant = dict(constant)
        self.n_rows = 0

    def row(self, ts: Sequence[float], **cells) -> float:
        """Write one measurement (timings ``ts`` in s and its other cells); return the median."""
        med, p10, p90 = quantiles(ts)
        self._w.writerow({**self._constant, **cells, "latency_s_median": f"{med:.9g}",
                          "latency_s_p10": f"{p10:.9g}", "latency_s_p90": f"{p90:.9g}", "n_reps": len(ts)})
        self._fh.flush()
        self.n_rows += 1
        return med

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> "MeasurementCsv":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Budget:
    """A wall-clock budget of ``seconds`` from now: :meth:`expired` once it is spent."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.perf_counter):
        self._clock = clock
        self.deadline = clock() + seconds

    def expired(self) -> bool:
        return self._clock() > self.deadline


def _sync(device) -> None:
    if device.type == "cuda":
        import torch
        torch.cuda.synchronize()


def time_fn(fn: Callable[[], object], device, n_warm: int, n_rep: int,
            max_total_s: float | None = None) -> list[float]:
    """Time ``fn`` ``n_rep`` times after ``n_warm`` warm-ups; the seconds of each repetition.

    On CUDA every repetition is bracketed by CUDA events, with a device synchronize *before*
    each repetition, so the host cannot run ahead: like a real decode loop (each step waits for
    the previous token), the time includes any launch overhead the GPU waits for. On CPU,
    perf_counter. If ``max_total_s`` is set, n_rep is reduced (not below
    :data:`MIN_REPS_UNDER_CAP`) so that the timed part stays about under that many seconds.
    """
    t0 = time.perf_counter()
    for _ in range(n_warm):
        fn()
    _sync(device)
    if max_total_s is not None and n_warm > 0:
        per = (time.perf_counter() - t0) / n_warm
        if per * n_rep > max_total_s:
            n_rep = max(MIN_REPS_UNDER_CAP, int(max_total_s / max(per, 1e-9)))
    if device.type != "cuda":
        ts = []
        for _ in range(n_rep):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        return ts
    import torch
    evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n_rep)]
    for a, b in evs:
        torch.cuda.synchronize()
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) / 1e3 for a, b in evs]


def time_wall(fn: Callable[[], object], device, n_warm: int, n_rep: int) -> list[float]:
    """Host wall clock around ``fn`` + synchronize, per repetition (for pageable copies, whose
    host-side staging happens before the stream even sees the copy, and for host-bound loops)."""
    for _ in range(n_warm):
        fn()
    _sync(device)
    ts = []
    for _ in range(n_rep):
        _sync(device)
        t = time.perf_counter()
        fn()
        _sync(device)
        ts.append(time.perf_counter() - t)
    return ts
