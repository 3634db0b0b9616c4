"""Running one sweep point (in a worker process, a Dask worker or in-process).

A point folder holds the files of :func:`ahasd_sim.output.write_run`; ``summary.json``
(written last) marks it complete and such a folder is never recomputed. A point that
raises writes ``error.json`` (``type``, one-line ``message``, ``traceback``) instead,
and is retried when the sweep is run again.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from ..output import atomic_write, atomic_write_text, to_json

SUMMARY = "summary.json"
RUNNING = ".running"   # marker a worker keeps in a point folder while it computes the point
ERROR = "error.json"
RESOLVED = "config.resolved.yaml"


def one_line(exc: BaseException) -> str:
    """A single-line message for ``exc`` (its first non-empty line, else its type)."""
    text = str(exc).strip().strip('"')
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__


def error_record(exc: BaseException, wall_time_s: float | None = None, tb: str | None = None) -> dict[str, Any]:
    from ..config.errors import InputError
    try:
        from ..traces.format import TraceError
        input_errors: tuple[type, ...] = (InputError, TraceError)
    except ImportError:  # pragma: no cover
        input_errors = (InputError,)
    return {
        "type": type(exc).__name__,
        "message": one_line(exc),
        "input_error": isinstance(exc, input_errors),
        "wall_time_s": wall_time_s,
        "traceback": tb if tb is not None else "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    }


def write_error(point_dir: Path, record: dict[str, Any]) -> None:
    atomic_write_text(Path(point_dir) / ERROR, to_json(record))


def is_done(point_dir: Path, events: bool = False) -> bool:
    """The point folder is complete (``events``: and holds events.csv, which a sweep writes only
    with ``--full-points``)."""
    d = Path(point_dir)
    return (d / SUMMARY).is_file() and (not events or (d / EVENTS).is_file())


EVENTS = "events.csv"


def _simulate_into(cfg, out_dir: Path, events: bool = False) -> tuple[str, dict[str, Any]]:
    """Run ``cfg`` and write its files into ``out_dir``; return (status, info)."""
    from ..config.loader import dump_config
    from ..output import write_run
    from ..simulation import run_simulation

    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        result = run_simulation(cfg, events=events)   # event rows only when events.csv is written
        wall = time.perf_counter() - t0
        write_run(result, cfg, out_dir, wall, events=events)
        return "ok", {"wall_time_s": wall}
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - a failing point must not stop the sweep
        wall = time.perf_counter() - t0
        rec = error_record(exc, wall)
        try:
            atomic_write_text(out_dir / RESOLVED, dump_config(cfg))
        except Exception:  # pragma: no cover - the config dumped fine when it was hashed
            pass
        write_error(out_dir, rec)
        return "failed", {"error_type": rec["type"], "error": rec["message"], "wall_time_s": wall}


def run_point(task: dict[str, Any]) -> dict[str, Any]:
    """Run one point into ``task['dir']`` (skipped if it already has summary.json).

    ``task``: ``hash``, ``dir``, ``config`` (a resolved SimConfig), ``events`` (write events.csv;
    default no: a sweep needs summary.json, windows.csv and energy_breakdown.csv). Returns
    ``{"hash", "status": ok|failed|cached, "wall_time_s", "error_type", "error"}``.
    Never raises for a failing simulation (only for KeyboardInterrupt/SystemExit).
    """
    out = Path(task["dir"])
    events = bool(task.get("events", False))
    if is_done(out, events):
        return {"hash": task["hash"], "status": "cached"}
    err = out / ERROR
    if err.exists():
        err.unlink()
    status, info = _simulate_into(task_config(task), out, events)
    return {"hash": task["hash"], "status": status, **info}


def task_config(task: dict[str, Any]):
    """The task's resolved config: given, or resolved here from its file, overrides and seed
    (the runner does not keep every point's config in memory)."""
    if task.get("config") is not None:
        return task["config"]
    from .spec import resolve_point_config
    return resolve_point_config(Path(task["config_path"]), list(task["overrides"]), task.get("seed"),
                                source=task.get("source"))


def run_point_files(task: dict[str, Any]) -> dict[str, Any]:
    """Like :func:`run_point` but in a private temporary folder; the files come back as
    bytes (``files``: name -> bytes) so the client can write them where it likes. Used by
    the Dask executor, whose workers need not share the client's file system."""
    tmp = Path(tempfile.mkdtemp(prefix=f"ahasd-point-{task['hash']}-"))
    try:
        status, info = _simulate_into(task_config(task), tmp, bool(task.get("events", False)))
        files = {}
        for p in sorted(tmp.iterdir()):
            if p.is_file() and not p.name.startswith("."):
                files[p.name] = p.read_bytes()
        return {"hash": task["hash"], "status": status, "files": files, **info}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def materialise(files: dict[str, bytes], point_dir: Path) -> None:
    """Write returned files atomically into ``point_dir``; summary.json (or error.json) last."""
    point_dir = Path(point_dir)
    point_dir.mkdir(parents=True, exist_ok=True)
    last = [n for n in (SUMMARY, ERROR) if n in files]
    if SUMMARY in files and (point_dir / ERROR).exists():
        os.unlink(point_dir / ERROR)
    for name in [n for n in files if n not in last] + last:
        data = files[name]
        atomic_write(point_dir / name, lambda fh, d=data: fh.write(d), mode="wb")
