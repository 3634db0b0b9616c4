"""Output locations: checked before any simulation, locked, replaced atomically.

Every command that writes (run, compare, sweep, validate, traces stats, the scripts) calls
these helpers **before** it starts working, so an unusable ``--out`` costs nothing:

* :func:`check_writable_dir` -- the folder can be created or written: not an existing file,
  not under a file, on a writable file system with free space. Raises :class:`OutputError`.
* :func:`check_output_file` -- the same for a file (or file stem) such as a plot's ``--out``.
* :class:`OutputFolder` -- a folder that holds exactly one result (a run, a compare, ...):
  the new content is built in a staging folder next to it and swapped in at the end, so the
  folder never mixes files of two runs; a lock refuses a second writer while one is working;
  an existing folder is only replaced if it holds a result of the same kind (never a folder
  of your own files).
* :func:`lock_dir` -- an exclusive lock for a folder that accumulates (a sweep).
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from .config.errors import OutputError

try:                    # POSIX: flock(2) on the lock file
    import fcntl
except ImportError:     # Windows: the filelock package (a dependency there), see _portable_lock
    fcntl = None

#: refuse to start when the file system has less free space than this
MIN_FREE_BYTES = 16 * 1024 * 1024

#: what identifies an existing folder as one of ours, per kind (one file that kind always writes)
SIGNATURES: dict[str, Callable[[Path], bool]] = {
    "run": lambda p: (p / "meta.json").is_file() or (p / "summary.json").is_file(),
    "compare": lambda p: (p / "compare.csv").is_file() or (p / "compare_sustained.csv").is_file(),
    "validate": lambda p: (p / "validation_errors.csv").is_file(),
    "trace-stats": lambda p: any(p.glob("*_stats.png")) or any(p.glob("*_accept_len.csv")),
}


def umask() -> int:
    cur = os.umask(0)
    os.umask(cur)
    return cur


def apply_umask(path: Path, directory: bool = False) -> None:
    """Give ``path`` the mode a plain ``open``/``mkdir`` would (mkstemp/mkdtemp use 0600/0700)."""
    os.chmod(path, (0o777 if directory else 0o666) & ~umask())


def _label(path: Path, flag: str) -> str:
    return f"{flag} {path}" if flag else str(path)


def _nearest_existing(path: Path, flag: str) -> Path:
    """The closest existing ancestor of ``path`` (which must be a folder)."""
    p = path.absolute()
    for anc in [p, *p.parents]:
        if anc.exists() or anc.is_symlink():
            if not anc.is_dir():
                if anc == p:
                    raise OutputError(f"{_label(path, flag)}: exists and is a file, not a folder")
                raise OutputError(f"{_label(path, flag)}: '{anc}' is a file, so nothing can be created under it")
            return anc
    return Path("/")


def _probe(folder: Path, path: Path, flag: str) -> None:
    """Create and remove a scratch file in ``folder``: the only reliable writability test
    (os.access is wrong for root, read-only mounts, ACLs)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".ahasd-probe-", dir=folder)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        why = {errno.EROFS: "read-only file system", errno.EACCES: "permission denied",
               errno.EPERM: "permission denied", errno.ENOSPC: "no space left on device",
               errno.EDQUOT: "disk quota exceeded"}.get(exc.errno, exc.strerror or str(exc))
        where = "" if folder == path.absolute() else f" (in '{folder}')"
        raise OutputError(f"{_label(path, flag)}: cannot write{where}: {why}") from None
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if free < MIN_FREE_BYTES:
        raise OutputError(f"{_label(path, flag)}: the disk is full ({free // 1024} KiB free in '{folder}', "
                          f"need at least {MIN_FREE_BYTES // (1024 * 1024)} MiB)")


def check_writable_dir(path: str | Path, flag: str = "--out") -> Path:
    """Check that folder ``path`` exists or can be created, and can be written. Creates nothing."""
    path = Path(path)
    anc = _nearest_existing(path, flag)
    _probe(anc, path, flag)
    return path


def check_output_file(path: str | Path, flag: str = "--out", suffixes: tuple[str, ...] = ("",)) -> Path:
    """Check that file ``path`` (+ each of ``suffixes``) can be written atomically."""
    path = Path(path)
    for suf in suffixes:
        f = path.with_name(path.name + suf) if suf else path
        if f.is_dir():
            raise OutputError(f"{_label(f, flag)}: is a folder, expected a file name")
    if path.name in ("", ".", ".."):
        raise OutputError(f"{_label(path, flag)}: expected a file name")
    check_writable_dir(path.parent if str(path.parent) else Path("."), flag="")
    return path


# ---------------------------------------------------------------- locking
def _lock_file(target: Path) -> Path:
    target = target.absolute()
    return target.parent / f".{target.name}.lock"


def _holder(fd: int) -> str:
    """The process id a lock's holder wrote into the lock file ("" when unreadable)."""
    try:
        return os.read(fd, 64).decode(errors="replace").strip()
    except OSError:
        return ""


def _in_use(what: str, holder: str = "") -> OutputError:
    who = f" (process {holder})" if holder else ""
    return OutputError(f"{what}: in use by another ahasd_sim command{who}; wait for it or use another "
                       "output folder")


@contextlib.contextmanager
def _portable_lock(lock_path: Path, what: str) -> Iterator[None]:
    """The lock where ``fcntl`` is missing (Windows): the ``filelock`` package's OS lock, taken
    without waiting; the lock file is removed on release where the OS lets us."""
    try:
        import filelock
    except ImportError:
        raise OutputError(f"{what}: this platform has no fcntl; install the filelock package "
                          "(pip install filelock) to lock output folders") from None
    lock = filelock.FileLock(str(lock_path), timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise _in_use(what) from None
    except OSError as exc:
        raise OutputError(f"{what}: cannot create the lock file {lock_path}: {exc.strerror}") from None
    try:
        yield
    finally:
        lock.release()
        try:
            os.unlink(lock_path)
        except OSError:
            pass


@contextlib.contextmanager
def _flock(lock_path: Path, what: str) -> Iterator[None]:
    """Exclusive, non-blocking lock on ``lock_path`` (created, and removed on release)."""
    if fcntl is None:
        with _portable_lock(lock_path, what):
            yield
        return
    while True:
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666 & ~umask())
        except OSError as exc:
            raise OutputError(f"{what}: cannot create the lock file {lock_path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise _in_use(what, holder) from None
        # The file may have been unlinked by its previous holder between our open and flock.
        try:
            same = os.fstat(fd).st_ino == os.stat(lock_path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        yield
    finally:
        try:
            os.unlink(lock_path)
        except OSError:
            pass
        os.close(fd)


def check_not_locked(lock_path: Path, what: str) -> None:
    """Raise the error :func:`_flock` would if another process holds ``lock_path``; takes no lock
    and creates nothing (a dry run into a folder another command is writing is refused too)."""
    try:
        fd = os.open(lock_path, os.O_RDONLY)
    except OSError:
        return   # no lock file: nobody holds it
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _in_use(what, _holder(fd)) from None
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextlib.contextmanager
def lock_dir(path: Path, flag: str = "--out") -> Iterator[None]:
    """Exclusive lock for a folder that accumulates results (a sweep folder)."""
    path = Path(path)
    created = _make_parents(path)
    ok = False
    try:
        with _flock(path / ".lock", _label(path, flag)):
            yield
        ok = True
    finally:
        if not ok:   # nothing was written: leave no empty folders behind
            for d in reversed(created):
                try:
                    d.rmdir()
                except OSError:
                    break


# ---------------------------------------------------------------- atomic folder swap
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False if unsupported (another
    OS, an old C library, a file system without it): the caller then renames twice."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError, TypeError):
        return False
    AT_FDCWD = -100
    rc = fn(AT_FDCWD, os.fsencode(str(a)), AT_FDCWD, os.fsencode(str(b)), _RENAME_EXCHANGE)
    return rc == 0


class OutputFolder:
    """A result folder written all at once. Usage::

        with OutputFolder(out, "run") as folder:     # checks + lock, before simulating
            ...simulate...
            write_files(folder.stage)                # a hidden sibling folder
            folder.commit()                          # swap it in: the folder holds only this result

    Leaving the block without ``commit`` (an error, Ctrl-C) removes the staging folder and
    leaves any previous content of ``out`` untouched.
    """

    def __init__(self, path: str | Path, kind: str, flag: str = "--out"):
        self.given = Path(path)
        # "." and "a/.." name real folders; a symlinked --out is written where it points (the
        # swap then replaces the target folder, and nothing is staged beside the link)
        self.path = Path(os.path.realpath(path) if Path(path).is_symlink() else os.path.abspath(path))
        self.kind = kind
        self.flag = flag
        self.stage: Path | None = None
        self._lock = None
        self.committed = False

    def label(self) -> str:
        return _label(self.given, self.flag)

    def check(self, _under_own_lock: bool = False) -> None:
        """Raise OutputError if the folder cannot be used (a file, read-only, full, foreign, or
        held by another command); creates nothing."""
        if self.given.is_symlink():
            if self.path.exists() and not self.path.is_dir():
                raise OutputError(f"{self.label()}: is a link to the file {self.path}, not to a folder")
            if not self.path.exists() and not getattr(self, "_told_dangling", False):
                from .cli_common import warn
                self._told_dangling = True
                warn(f"{self.label()}: is a link to {self.path}, which does not exist yet: the results are "
                     "written there")
        check_writable_dir(self.path if self.given.is_symlink() else self.given, self.flag)
        p = self.path
        if not _under_own_lock:
            check_not_locked(_lock_file(p), self.label())
        cwd = Path.cwd()
        if p == cwd or p in cwd.parents or p == Path(p.anchor):
            raise OutputError(f"{self.label()}: is the current folder or one above it; name a folder for the "
                              "results instead")
        if p.is_dir() and any(p.iterdir()) and not SIGNATURES[self.kind](p):
            first = sorted(x.name for x in p.iterdir())[0]
            raise OutputError(f"{self.label()}: folder exists and does not hold an ahasd_sim {self.kind} result "
                              f"(it contains '{first}'); refusing to replace it: choose a new folder or empty it")

    def __enter__(self) -> "OutputFolder":
        self.check()
        self._created = _make_parents(self.path.parent)
        try:
            lock = _flock(_lock_file(self.path), self.label())
            lock.__enter__()
            self._lock = lock
            self.check(_under_own_lock=True)   # again, under the lock
            for stale in self.path.parent.glob(f".{self.path.name}.staging-*"):   # left by a killed run
                shutil.rmtree(stale, ignore_errors=True)
            for stale in self.path.parent.glob(f".{self.path.name}.old-*"):
                shutil.rmtree(stale, ignore_errors=True)
            self.stage = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.staging-", dir=self.path.parent))
            apply_umask(self.stage, directory=True)
        except BaseException:
            self.__exit__(None, None, None)   # releases the lock, removes folders it created
            raise
        return self

    def commit(self) -> Path:
        """Move the staging folder into place (atomic exchange where the OS allows)."""
        assert self.stage is not None
        for f in self.stage.rglob("*"):
            if f.is_file():
                with open(f, "rb") as fh:
                    os.fsync(fh.fileno())
        if self.path.is_dir():
            if _exchange(self.stage, self.path):
                shutil.rmtree(self.stage, ignore_errors=True)   # now holds the old content
            else:
                old = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.old-", dir=self.path.parent))
                os.replace(self.path, old / "x")
                os.replace(self.stage, self.path)
                shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(self.stage, self.path)
        self.stage = None
        self.committed = True
        return self.path

    def __exit__(self, exc_type=None, exc=None, tb=None) -> None:
        try:
            if self.stage is not None:
                shutil.rmtree(self.stage, ignore_errors=True)
                self.stage = None
        finally:
            if self._lock is not None:
                self._lock.__exit__(None, None, None)
                self._lock = None
            if not self.committed:   # a failed run leaves no empty parent folders behind
                for d in reversed(getattr(self, "_created", [])):
                    try:
                        d.rmdir()
                    except OSError:
                        break
        if isinstance(exc, OSError) and not self.committed:
            # a write that failed (a full disk: ENOSPC from write() carries no file name) names
            # the folder; the staging folder is gone and the previous content is untouched
            what = exc.strerror or str(exc)
            name = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
            raise OutputError(f"{self.label()}: cannot write the results{name}: {what}; nothing was written "
                              "(any previous content is kept)") from None


def _make_parents(folder: Path) -> list[Path]:
    """mkdir -p ``folder``; return the folders it created, outermost first."""
    created = []
    for anc in reversed([folder, *folder.parents]):
        if not anc.exists():
            anc.mkdir()
            created.append(anc)
    return created
