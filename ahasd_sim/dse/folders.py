"""Which folder a study command may write into (kept apart from the search code).

``optimize`` and ``sensitivity`` accumulate into one study folder. Before either writes, the
folder must be new, empty, or one this study wrote: a folder of another study (its
``study.db`` holds another study name, or its ``study.yaml`` names another study), a sweep
folder, or a folder of files this tool does not write is refused with one line, and nothing
is written.
"""
from __future__ import annotations

import contextlib
import errno
import sqlite3
from pathlib import Path

from ..config.errors import InputError, OutputError

#: every entry a study folder holds (optimize, sensitivity, the SQLite side files, the lock)
STUDY_ENTRIES = frozenset({
    "study.db", "study.db-wal", "study.db-shm", "study.db-journal", "study.yaml", "study.lock",
    "points", "sensitivity", "trials.csv", "pareto.csv", "figures", "report.md", "hypervolume.csv",
    "seeds.csv", "oat.csv", "tornado.csv", "sobol.csv", "sobol_convergence.csv", "sensitivity.md",
})
#: folders a multi-seed study (optimize --seeds) keeps, one per search seed
STUDY_SEED_PREFIX = "seed-"
#: files that only a sweep folder holds (ahasd_sim.sweep.runner)
SWEEP_MARKERS = ("sweep.json", "spec.yaml", "results.csv", "points.csv")


def stored_study_names(db: Path) -> list[str]:
    """Names of the optuna studies in ``db`` (read-only; [] when it cannot be read)."""
    try:
        con = sqlite3.connect(f"file:{db.resolve()}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return []
    try:
        return [r[0] for r in con.execute("SELECT study_name FROM studies")]
    except sqlite3.Error:
        return []
    finally:
        con.close()


def _yaml_name(path: Path) -> str | None:
    from ..config import yamlio
    from ..config.errors import ConfigError
    try:
        data = yamlio.load_file(path, "study file")
    except ConfigError:
        return None
    return str(data.get("name")) if isinstance(data, dict) and data.get("name") is not None else None


def check_study_folder(out: Path, study_name: str, command: str, flag: str = "--out") -> None:
    """Refuse ``out`` unless it is new, empty or this study's folder (raises OutputError)."""
    out = Path(out)
    if not out.exists():
        return
    if not out.is_dir():
        raise OutputError(f"{flag} {out}: is a file, not a study folder; {command} needs a folder")
    names = {p.name for p in out.iterdir() if not p.name.startswith(".")}
    sweep = [m for m in SWEEP_MARKERS if m in names]
    if sweep:
        raise OutputError(f"{flag} {out}: is a sweep folder (it holds {sweep[0]}); {command} writes a study "
                          "folder: use a new --out")
    foreign = sorted(n for n in names - STUDY_ENTRIES if not n.startswith(STUDY_SEED_PREFIX))
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise OutputError(f"{flag} {out}: holds files that are not a study's ({shown}); {command} writes only "
                          "into a new, empty or its own study folder: use a new --out")
    others = [n for n in stored_study_names(out / "study.db") if n != study_name] \
        if (out / "study.db").is_file() else []
    yaml_name = _yaml_name(out / "study.yaml") if (out / "study.yaml").is_file() else None
    if yaml_name is not None and yaml_name != study_name:
        others.append(yaml_name)
    if others:
        raise OutputError(f"{flag} {out}: holds study '{others[0]}', not '{study_name}'; {command} refuses to "
                          "mix two studies in one folder: use a new --out")


@contextlib.contextmanager
def names_the_folder(out: Path, command: str, flag: str = "--out"):
    """A write that fails inside (a full disk: ENOSPC from write() carries no file name) is one
    line naming the study folder, not a bare "No space left on device"."""
    try:
        yield
    except OSError as exc:
        if isinstance(exc, InputError) or exc.errno not in _DISK_ERRNOS:
            raise
        name = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        raise OutputError(f"{flag} {out}: {command} cannot write the study{name}: {exc.strerror or exc}; what was "
                          "finished is kept (the same command resumes once there is room)") from None


#: errors of a file system that cannot take more (full, over quota, read-only)
_DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG}


#: Saltelli base samples accepted: one sample gives no variance (every index is 0/0); above
#: 2^16 the design (N x (D + 2) points) is days of simulation
SOBOL_MIN_SAMPLES, SOBOL_MAX_SAMPLES = 2, 2 ** 16


def check_sobol_samples(n: int, n_params: int, where: str) -> None:
    """``n`` Saltelli base samples for ``n_params`` parameters: 0 (none) or a power of two in
    [SOBOL_MIN_SAMPLES, SOBOL_MAX_SAMPLES] (raises InputError naming ``where``)."""
    from ..config.errors import InputError
    if n == 0:
        return
    if n < 0 or n & (n - 1):
        raise InputError(f"{where}: expected 0 or a power of two (Saltelli), got {n}")
    if n < SOBOL_MIN_SAMPLES:
        raise InputError(f"{where}: expected 0 or at least {SOBOL_MIN_SAMPLES} samples (one sample has no "
                         f"variance to split into Sobol indices), got {n}")
    if n > SOBOL_MAX_SAMPLES:
        raise InputError(f"{where}: {n} samples would be {n * (n_params + 2)} design points; at most "
                         f"{SOBOL_MAX_SAMPLES} samples are accepted")


def clean_stale_points(points_dir: Path) -> None:
    """Remove what killed workers left in the study's point folders (``.staging-*`` folders,
    ``.running`` markers, ``.*.tmp`` files); call it holding the study lock. One implementation
    with the sweep's (:func:`ahasd_sim.sweep.executors.clean_stale`)."""
    from ..sweep.executors import clean_stale
    clean_stale(points_dir)
