"""Errors raised for bad user input.

Every error the CLI turns into a one-line message (exit code 2) derives from
:class:`InputError`; the message names the file, the dotted key path and what
was expected.
"""
from __future__ import annotations

import difflib
from typing import Iterable


class InputError(ValueError):
    """Bad user input (config, trace, CLI). ``str()`` is a single line."""


class ConfigError(InputError):
    """A config file or override is invalid.

    ``source`` is the YAML file (or ``--set``) the offending value came from and
    ``key_path`` the dotted path of the key inside the resolved config.
    """

    def __init__(self, source: str, key_path: str, message: str):
        self.source = source
        self.key_path = key_path
        self.message = message
        # args are the constructor's, so the error can be re-raised from its args (SimPy
        # does that for an exception inside a process) and pickled
        super().__init__(source, key_path, message)

    def __str__(self) -> str:
        where = f"{self.source}: " if self.source else ""
        key = f"{self.key_path}: " if self.key_path else ""
        return f"{where}{key}{self.message}"


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest candidate, or ``""``."""
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


class OutputError(InputError):
    """An output location that cannot be used (a file, read-only, full, in use, foreign)."""


#: exception types the command lines report in one line with exit code 2 (see
#: :func:`reported_in_one_line`)
_ONE_LINE_ERRORS: list[type[BaseException]] = [InputError]


def reported_in_one_line(cls):
    """Class decorator: errors of ``cls`` mean bad input or a run that cannot finish (a trace
    that does not parse, an unknown model, the simulated-time limit) and are reported in one
    line like :class:`InputError`. Each type registers itself where it is defined, so the
    command-line layer names them without importing the simulator (an upward import)."""
    if cls not in _ONE_LINE_ERRORS:
        _ONE_LINE_ERRORS.append(cls)
    return cls


def one_line_errors() -> tuple[type[BaseException], ...]:
    """The registered one-line error types (a type can only be raised once its module is
    imported, and importing it registers it)."""
    return tuple(_ONE_LINE_ERRORS)
