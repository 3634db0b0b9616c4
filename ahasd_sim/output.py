"""Atomic, reproducible run outputs.

A run directory holds ``config.resolved.yaml``, ``summary.json`` (a pure
function of config + trace + seed: byte-identical across reruns), tidy CSVs
(``events.csv``, ``energy_breakdown.csv``), ``timeline.json`` (Perfetto) and
``meta.json`` (version, git revision, wall-clock time: everything that is not
reproducible). Each file is written to a temporary name and renamed, so an
interrupted run never leaves a half-written file; ``summary.json`` is renamed
last and marks a complete run. The command line writes a run into the staging folder of an
:class:`ahasd_sim.outdir.OutputFolder` and swaps it in whole, so a folder never mixes runs.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import platform as _platform
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable

from . import __version__
from .config.loader import SimConfig, dump_config
from .memo import BoundedMemo
from .outdir import apply_umask
from .paths import REPO_ROOT


def atomic_write(path: Path, writer: Callable[[Any], None], mode: str = "w") -> None:
    """Write ``path`` via a temporary file in the same directory and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        apply_umask(Path(tmp))   # mkstemp creates 0600; results are shared like any other file
        with os.fdopen(fd, mode) as fh:
            writer(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda fh: fh.write(text))


def to_json(obj: Any) -> str:
    """Strict JSON (RFC 8259): a NaN or infinite number -- a statistic that is undefined, such as
    the interval of one window or the TPOT of no tokens -- is written as null, as the intervals of
    summary.json already were; Python's default ``NaN``/``Infinity`` literals are not JSON, and
    jq, JavaScript and most other readers refuse the whole file."""
    return json.dumps(_finite_or_null(obj), indent=2, sort_keys=True, allow_nan=False,
                      default=lambda o: _finite_or_null(_json_default(o))) + "\n"


def _finite_or_null(o: Any) -> Any:
    if isinstance(o, float):             # numpy's float64 is a float
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: _finite_or_null(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite_or_null(v) for v in o]
    return o


def _json_default(o: Any):
    try:
        import numpy as np
        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(o, (set, tuple)):
        return list(o)
    if hasattr(o, "items"):
        return dict(o.items())
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


_CONFIG_TEXT = BoundedMemo(64)   # SimConfig.fingerprint() -> its YAML (dumping is the slow part)


def config_text(cfg: SimConfig) -> str:
    """:func:`dump_config` of ``cfg``, remembered per resolved content: a run names its folder
    after the config's hash, writes config.resolved.yaml and hashes it into meta.json."""
    key = cfg.fingerprint()
    text = _CONFIG_TEXT.get(key)
    if text is None:
        text = _CONFIG_TEXT.put(key, dump_config(cfg))
    return text


def config_hash(cfg: SimConfig) -> str:
    return hashlib.sha256(config_text(cfg).encode()).hexdigest()[:12]


def _csv_cells(column) -> list | None:
    """A table column's cells for ``csv.writer`` such that it writes what pandas' ``to_csv``
    writes by default (floats as their shortest repr, missing values empty), or None for a
    column type left to pandas itself. The writer formats Python floats, ints and bools itself."""
    import numpy as np
    import pandas as pd
    dtype = column.dtype
    values = column.tolist()        # Python floats, ints, bools, strings
    if isinstance(dtype, np.dtype):
        kind = dtype.kind
        if kind == "f" and dtype.itemsize == 8:
            return [v if v == v else "" for v in values]     # NaN (the only v != v) -> empty
        if kind in "iub":
            return values
        if kind != "O":
            return None
    elif not isinstance(dtype, pd.StringDtype):
        return None
    out = []
    for v in values:                # object cells: as csv writes them, missing ones empty
        t = type(v)
        if t is str or t is bool or t is int:
            out.append(v)
        elif t is float:
            out.append(v if v == v else "")
        elif v is None:
            out.append("")
        else:                       # anything else (numpy scalars, pd.NA, ...): pandas writes it
            return None
    return out


def write_csv(table, path: Path) -> None:
    """``table.to_csv(path, index=False)``, byte for byte, several times faster for the column
    types a run's tables hold (plain csv rows from per-column cells); other tables go to pandas."""
    from .csvrows import write_rows
    cols = [_csv_cells(table[c]) for c in table.columns] if len(table.columns) and len(table) \
        and all(type(c) is str for c in table.columns) and table.columns.is_unique else None
    if cols is None or any(c is None for c in cols):
        table.to_csv(path, index=False)
        return
    write_rows(path, (list(table.columns), zip(*cols)))


_CODE_FP: str | None = None
_RUN_CODE_FP: str | None = None
_FILE_FP: dict[tuple[str, float, int], str] = {}

#: the modules that run one simulation and write its files (a sweep point included); the code a
#: run executes is these and every package module they import, at any depth
RUN_ROOT_MODULES = ("ahasd_sim.simulation", "ahasd_sim.config.loader", "ahasd_sim.output",
                    "ahasd_sim.sweep.worker", "ahasd_sim.sweep.split")


def code_fingerprint() -> str:
    """sha256 (12 hex) of every source file of the package (provenance in meta.json)."""
    global _CODE_FP
    if _CODE_FP is None:
        h = hashlib.sha256(__version__.encode())
        pkg = Path(__file__).resolve().parent
        for f in sorted(pkg.rglob("*.py")):
            if "_data" in f.relative_to(pkg).parts:     # an installed copy's shipped scripts
                continue
            h.update(str(f.relative_to(pkg)).encode())
            h.update(f.read_bytes())
        _CODE_FP = h.hexdigest()[:12]
    return _CODE_FP


def run_modules(roots=RUN_ROOT_MODULES) -> list[Path]:
    """Source files of the package modules a run executes: ``roots`` and, transitively, every
    ``ahasd_sim`` module they import (at module level or inside a function, and the dotted
    module names a registry imports by string). Read from the source (no import), so a module no
    run imports -- a new policy not registered yet, a plot, the sweep's scheduler -- is not among
    them and editing it keeps every cached result. The ``__init__`` of each package on the way to
    a module counts too (Python runs it), but what it imports is followed only where a run imports
    that package by name (the registries of modes and policies): ``ahasd_sim.sweep``'s re-exports
    the scheduler, which decides no result."""
    import ast
    pkg = Path(__file__).resolve().parent
    top = pkg.name

    def source(name: str) -> Path | None:
        p = pkg.joinpath(*name.split(".")[1:])
        if (p / "__init__.py").is_file():
            return p / "__init__.py"
        f = p.with_suffix(".py")
        return f if f.is_file() else None

    seen: dict[str, Path] = {}
    passed: set[Path] = set()
    stack = list(roots)
    while stack:
        name = stack.pop()
        if name in seen or not (name == top or name.startswith(top + ".")):
            continue
        f = source(name)
        if f is None:          # a name imported from a module (a class, a function), not a module
            continue
        seen[name] = f
        parts = name.split(".")
        for i in range(1, len(parts)):     # the packages Python runs on the way: hashed, not followed
            parent = source(".".join(parts[:i]))
            if parent is not None:
                passed.add(parent)
        here = parts if f.name == "__init__.py" else parts[:-1]
        for node in ast.walk(ast.parse(f.read_bytes(), str(f))):
            if isinstance(node, ast.Import):
                stack.extend(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = (".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else []))
                        if node.level else node.module or "")
                stack.append(base)
                stack.extend(f"{base}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and node.value.startswith(top + ".") and node.value.replace(".", "").replace("_", "").isalnum():
                stack.append(node.value)       # importlib.import_module("ahasd_sim.modes")
    return sorted(set(seen.values()) | passed)


def run_code_fingerprint() -> str:
    """sha256 (12 hex) of the version and the source of :func:`run_modules`: the code that decides
    a run's results. Cached sweep points are keyed on it, not on every file of the package."""
    global _RUN_CODE_FP
    if _RUN_CODE_FP is None:
        h = hashlib.sha256(__version__.encode())
        pkg = Path(__file__).resolve().parent
        for f in run_modules():
            h.update(str(f.relative_to(pkg).as_posix()).encode())
            h.update(f.read_bytes())
        _RUN_CODE_FP = h.hexdigest()[:12]
    return _RUN_CODE_FP


def file_fingerprint(path: str | Path) -> str:
    """sha256 (12 hex) of a data file's bytes (cached by path, mtime and size)."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        return "missing"
    key = (str(p.resolve()), st.st_mtime, st.st_size)
    if key not in _FILE_FP:
        _FILE_FP[key] = hashlib.sha256(p.read_bytes()).hexdigest()[:12]
    return _FILE_FP[key]


def run_identity_hash(cfg: SimConfig) -> str:
    """Identity of a run's results: resolved config (with the shapes of the models it names, which
    may come from model files) + the code a run executes (:func:`run_code_fingerprint`) + trace
    file contents.

    Sweeps name point folders by it, so a finished point is reused only when none of these
    changed; an edit to a module no run imports keeps every point."""
    from .simulation import resolve_data_path
    from .workload.models import models_identity
    trace = file_fingerprint(resolve_data_path(cfg.run.trace, cfg.source_file))
    text = config_text(cfg) + run_code_fingerprint() + trace + models_identity(cfg)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def default_out_dir(cfg: SimConfig, base: str | Path = "results") -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path(base) / f"{stamp}_{cfg.run.mode}_{cfg.run.policy}_{config_hash(cfg)}"


def git_revision() -> str | None:
    """Short commit id of the checkout; ``AHASD_SIM_GIT_REVISION`` overrides it for a copy of a
    tree whose own .git is absent or stale (e.g. a working tree shipped to another host)."""
    env = os.environ.get("AHASD_SIM_GIT_REVISION")
    if env:
        return env
    if not (REPO_ROOT / ".git").exists():   # an installed copy: no revision to report
        return None
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def write_run(result, cfg: SimConfig, out_dir: Path, wall_time_s: float, events: bool = True) -> Path:
    """Write a run directory (``events=False``: without events.csv, as a sweep point by default). Every file is first written into a staging folder inside
    ``out_dir``; only when all of them exist are they moved into place (``summary.json``
    last), so a crash never leaves a half-written file or a mix of two runs' files behind
    a new summary."""
    from .simulation import gc_paused
    # tens of thousands of short-lived rows and cells, no cycles: the collections they would
    # trigger only walk the long-lived objects (a full one: ~20 ms of the default job's writing)
    with gc_paused():
        return _write_run(result, cfg, out_dir, wall_time_s, events)


def _write_run(result, cfg: SimConfig, out_dir: Path, wall_time_s: float, events_csv: bool = True) -> Path:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".staging-", dir=out_dir))
    try:
        config_yaml = config_text(cfg)
        (stage / "config.resolved.yaml").write_text(config_yaml)
        names = ["config.resolved.yaml", *(["events.csv"] if events_csv else []), "energy_breakdown.csv"]
        rows = result.csv_tables(events=events_csv) if hasattr(result, "csv_tables") else None
        if rows is not None:   # straight from the windows' rows: the same bytes, no pandas needed
            from .csvrows import write_rows
            for name, table in rows.items():
                write_rows(stage / name, table)
            names.append("windows.csv")
        else:
            if events_csv:
                events = result.events
                if "time_s" in events.columns:   # processes log at different moments: sort by simulated time
                    events = events.sort_values("time_s", kind="stable")
                write_csv(events, stage / "events.csv")
            write_csv(result.energy, stage / "energy_breakdown.csv")
            if getattr(result, "windows", None) is not None:      # one row per trace window (samples)
                write_csv(result.windows, stage / "windows.csv")
                names.append("windows.csv")
        if result.timeline is not None:
            (stage / "timeline.json").write_text(json.dumps(result.timeline))
            names.append("timeline.json")
        meta = {
            "ahasd_sim_version": __version__,
            "git_revision": git_revision(),
            "config_file": cfg.source_file,
            "config_sha256_12": config_hash(cfg),
            "code_sha256_12": code_fingerprint(),
            "run_code_sha256_12": run_code_fingerprint(),
            "started_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "wall_time_s": wall_time_s,
            "python": _platform.python_version(),
            "host": _platform.node(),
        }
        (stage / "meta.json").write_text(to_json(meta))
        (stage / "summary.json").write_text(to_json(result.summary))
        names += ["meta.json", "summary.json"]
        for name in names:
            with open(stage / name, "rb") as fh:
                os.fsync(fh.fileno())
        for name in names:   # summary.json last: its presence marks a complete run
            os.replace(stage / name, out_dir / name)
    finally:
        for leftover in stage.glob("*"):
            leftover.unlink()
        stage.rmdir()
    return out_dir
