"""Bounded memos: process-wide caches of what is made again and again from the same inputs (a
config section's YAML or pickled state, a config's YAML). A full memo is emptied before it takes
a new entry: the simplest bound that keeps a long sweep's or study's memory flat, and what a
point needs (a few configs) is made again at once."""
from __future__ import annotations

from typing import Any


class BoundedMemo(dict):
    """A dict of at most ``max_entries`` entries, filled with :meth:`put`."""

    def __init__(self, max_entries: int):
        super().__init__()
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self.max_entries = max_entries

    def put(self, key: Any, value: Any) -> Any:
        """Remember ``value`` under ``key`` (emptying the memo first if it is full); return it."""
        if len(self) >= self.max_entries:
            self.clear()
        self[key] = value
        return value
