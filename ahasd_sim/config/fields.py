"""Declarative config fields: default, unit, valid range and source in one place.

Hardware sections use :func:`param` so that every constant carries its unit and
where it comes from, and the loader can check ranges and print a reference.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence


def param(
    default: Any = dataclasses.MISSING,
    *,
    doc: str,
    unit: str | None = None,
    source: str | None = None,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    choices: Sequence[Any] | None = None,
) -> Any:
    """A dataclass field with metadata used for validation and documentation.

    ``unit`` is informative (units also appear in field names); ``source`` is a
    URL or a derivation note; ``ge/gt/le/lt`` bound numeric values; ``choices``
    restricts strings.
    """
    meta = {
        "doc": doc,
        "unit": unit,
        "source": source,
        "ge": ge,
        "gt": gt,
        "le": le,
        "lt": lt,
        "choices": tuple(choices) if choices is not None else None,
    }
    if isinstance(default, (list, dict, set)):
        value = default
        return dataclasses.field(default_factory=lambda: type(value)(value), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)
