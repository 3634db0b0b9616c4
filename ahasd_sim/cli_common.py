"""What every entry point shares: one-line errors, exit codes, signals, warnings.

``python -m ahasd_sim`` and the ``scripts/*.py`` command lines all run their body through
:func:`run_guarded`, so bad input anywhere ends the same way: one line ``error: ...`` on
stderr naming the file and key, exit code 2, no traceback (``--debug`` shows it).

Exit codes: 0 ok; 1 some sweep points failed; 2 bad input or unusable output location;
130 interrupted (Ctrl-C); 143 terminated (SIGTERM).
"""
from __future__ import annotations

import argparse
import os
import signal
from contextlib import contextmanager
import sys
from typing import Callable, NoReturn

from . import __version__
from .errors import one_line_errors

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143


class Terminated(KeyboardInterrupt):
    """SIGTERM (or SIGHUP) received: unwind like Ctrl-C, so finished work is written out."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse with a one-line error (``error: PROG: message (see PROG --help)``, exit 2)."""

    def error(self, message: str) -> NoReturn:  # noqa: D401 - argparse API
        print(f"error: {self.prog}: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(EXIT_USAGE)


#: the most processes or trials a count option takes: 2^20 trials of even a 1 s simulation are
#: 12 days of CPU, and 2^20 processes no machine runs
MAX_COUNT = 2 ** 20


def positive_int(text: str) -> int:
    """argparse type of a count of processes or trials: an integer in [1, MAX_COUNT] (0 and -1
    are refused: they would silently mean 'all cores' or nothing; 1e20 is unbounded work)."""
    try:
        n = int(text)
    except ValueError:
        try:
            f = float(text)
        except ValueError:
            f = None
        if f is None or not f.is_integer():
            raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
        n = int(f)   # 1e3 written for 1000
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {n}")
    if n > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_COUNT} (2^20; more is no run that ends), got {text}")
    return n


def positive_float(text: str) -> float:
    """argparse type of a duration: a finite number > 0."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not (x > 0 and x < float("inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text}")
    return x


def out_path(text: str) -> str:
    """argparse type of an ``--out`` folder or file: a name (an empty one used to mean the default
    folder without a word, so the results went somewhere the user did not name)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a folder or file name, got an empty string (leave --out out "
                                         "for the default place)")
    return text


def add_version(p: argparse.ArgumentParser) -> None:
    p.add_argument("--version", action="version", version=f"ahasd_sim {__version__}")


def user_errors() -> tuple[type[BaseException], ...]:
    """Exception types that mean bad input (reported in one line, exit 2)."""
    return one_line_errors()


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().strip('"')
    return " ".join(line.strip() for line in text.splitlines() if line.strip()) or type(exc).__name__


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


class _PendingSignal:
    """The stop signal received and not yet handled. Python raises a signal handler's exception
    wherever the main thread happens to be; inside a ``__del__``, a weakref callback or an sqlite
    callback (SQLAlchemy and optuna run many) it is printed as "Exception ignored" and lost, and
    a study or sweep would run to its end after Ctrl-C. Long loops call
    :func:`raise_if_interrupted` between units of work, so a lost exception is raised again."""

    signum: int | None = None


def _stop_exception(signum: int) -> KeyboardInterrupt:
    if signum == signal.SIGINT:
        return KeyboardInterrupt()
    return Terminated(signal.Signals(signum).name)


def _on_stop_signal(signum, _frame):
    _PendingSignal.signum = signum
    raise _stop_exception(signum)


def raise_if_interrupted() -> None:
    """Raise the stop signal's exception again if one was received and not handled (a no-op
    unless :func:`install_signal_handlers` runs, as in every command line)."""
    if _PendingSignal.signum is not None:
        raise _stop_exception(_PendingSignal.signum)


def _record_stop_signal(signum, _frame):
    _PendingSignal.signum = signum


@contextmanager
def deferred_stop_signals():
    """Inside: a stop signal handled by :func:`install_signal_handlers` is only recorded, for the
    caller's loop to raise with :func:`raise_if_interrupted` at a safe point. A loop that
    submits to and waits on a process pool many times a second would otherwise take the
    exception inside the pool's own locking (``concurrent.futures.wait`` holding the futures'
    conditions), leaving a lock held that the pool's manager thread then waits on forever."""
    saved = {}
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None), signal.SIGINT):
        if sig is not None and signal.getsignal(sig) is _on_stop_signal:
            try:
                saved[sig] = signal.signal(sig, _record_stop_signal)
            except (ValueError, OSError):   # not the main thread
                pass
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def install_signal_handlers() -> None:
    """SIGTERM/SIGHUP unwind like Ctrl-C (sweeps then write results.csv and stop their workers);
    all three are remembered until handled (:func:`raise_if_interrupted`). A SIGINT that the
    parent process ignores (a background job) stays ignored."""
    _PendingSignal.signum = None
    sigs = [signal.SIGTERM, getattr(signal, "SIGHUP", None)]
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        sigs.append(signal.SIGINT)
    for sig in sigs:
        if sig is not None:
            try:
                signal.signal(sig, _on_stop_signal)
            except (ValueError, OSError):  # not the main thread
                pass


def run_guarded(body: Callable[[], int], debug: bool = False) -> int:
    """Run a command body; map bad input to one stderr line and exit code 2."""
    install_signal_handlers()
    try:
        code = int(body() or 0)
        raise_if_interrupted()   # a stop signal whose exception a library swallowed
        return code
    except ModuleNotFoundError as exc:
        # before user_errors(): evaluating that clause imports the simulator (and pandas), which
        # would fail again with a traceback when a dependency is what is missing
        if debug:
            raise
        print(f"error: Python module '{exc.name}' is not installed; install ahasd_sim with its "
              f"dependencies (pip install -e . , plus the extra a feature names)", file=sys.stderr)
        return EXIT_USAGE
    except user_errors() as exc:
        if debug:
            raise
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except Terminated as exc:
        _PendingSignal.signum = None
        print(f"terminated ({exc})", file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        _PendingSignal.signum = None
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # output piped into `head`: the results are already written
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - no flush error at exit
        except OSError:
            pass
        return EXIT_OK
    except MemoryError:
        if debug:
            raise
        print("error: out of memory (a smaller sweep or fewer --workers may help)", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        # a file system problem outside the checked paths (disk filled up mid-run, ...)
        if debug:
            raise
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE


def run_script(parser: argparse.ArgumentParser, body: Callable[[argparse.Namespace], int],
               argv=None) -> int:
    """Entry point of a ``scripts/*.py`` command line: parse (one-line usage errors), then run
    ``body(args)`` with the shared error handling."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:   # --help / --version (0) or a usage error (2, one line)
        return int(exc.code or 0)
    return run_guarded(lambda: body(args), debug=getattr(args, "debug", False))


def script_parser(description: str, **kw) -> ArgumentParser:
    """The parser of a script: one-line errors, --version and --debug."""
    p = ArgumentParser(description=description, **kw)
    add_version(p)
    p.add_argument("--debug", action="store_true", help="show Python tracebacks instead of one-line errors")
    return p
