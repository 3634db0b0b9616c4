"""Registry of top-level config sections.

A module that owns a config section declares it with ``@config_section("name")``
on a dataclass; the root :class:`~ahasd_sim.config.loader.SimConfig` has exactly
the registered sections, so an unknown top-level key is an error.
"""
from __future__ import annotations

from typing import Callable, TypeVar

T = TypeVar("T")

SECTIONS: dict[str, type] = {}


def config_section(name: str) -> Callable[[type[T]], type[T]]:
    def register(cls: type[T]) -> type[T]:
        if name in SECTIONS and SECTIONS[name] is not cls:
            raise RuntimeError(f"config section '{name}' registered twice")
        SECTIONS[name] = cls
        return cls

    return register
