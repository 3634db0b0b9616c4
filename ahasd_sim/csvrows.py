"""The run's CSV files written straight from its rows, byte-identical to pandas' ``to_csv``.

A run's tables (events, energy, windows) are pandas DataFrames built from per-window lists of
dicts. The command line only writes them, and importing pandas and framing the rows costs more
than the writing itself, so a combined run keeps the rows (``simulation.CombinedRun``) and
:func:`events_rows`, :func:`energy_rows` and :func:`windows_rows` produce the exact cells
pandas would write: the same column order, the same dtype of each column (an int column
that some row lacks is a float column: ``1`` is written ``1.0``), the same sort and sums.
Whatever they do not recognise (a None value, numpy scalars, a column mixing strings and
numbers, ...) returns None and the caller frames the tables with pandas as before.
``tests/test_run_speed_paths.py`` checks every function against pandas on random rows.
"""
from __future__ import annotations

import csv
import itertools
import math
import operator
import os
from pathlib import Path
from typing import Any, Iterable, Sequence

_INT64_MIN, _INT64_MAX = -2**63, 2**63 - 1

Table = tuple[list[str], list[list[Any]]]   # (header, rows of cells for csv.writer)


def write_rows(path: Path, table: Table) -> None:
    """Write (header, rows) as ``to_csv(index=False)`` does: ',' separated, '"' quoting only
    where needed, the platform's line ends; floats, ints and bools formatted by csv itself
    (``repr`` / ``str``: what pandas writes for float64, int64 and bool columns)."""
    header, rows = table
    with open(path, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, lineterminator=os.linesep)
        w.writerow(header)
        w.writerows(rows)


_MISSING = object()   # a row without the key (pandas: NaN)
_NUMBERS = frozenset((int, float))


def _kind(types: set, complete: bool) -> str | None:
    """Kind of a column whose present values have these types: 'int' (every row holds an int:
    int64), 'num' (numbers, or ints some row lacks: float64), 'str' or 'bool' (written as such,
    missing cells empty); None for anything else (None, numpy scalars, mixed kinds: pandas)."""
    if types <= _NUMBERS:
        return "int" if types == {int} and complete else "num"
    if types == {str}:
        return "str"
    if types == {bool}:
        return "bool"
    return None


def events_rows(windows: Sequence[list[dict]]) -> Table | None:
    """events.csv of a run from each window's event dicts: pandas frames each window (columns:
    keys in order of first appearance), adds a ``window`` column, concatenates the windows that
    have events (a later window's new keys come after ``window``: the union of the columns) and
    sorts by ``time_s`` (stable). A column's dtype is that of the concatenation: int64 only if
    every row of every window holds an int."""
    windows_with = [(i, rows) for i, rows in enumerate(windows) if rows]
    if not windows_with:
        return None
    order: dict[str, None] = {}
    per_window = []                                  # (index, n rows, {key: column})
    types: dict[str, set] = {}
    complete: dict[str, bool] = {}
    for i, rows in windows_with:
        keys = dict.fromkeys(itertools.chain.from_iterable(rows))   # in order of first appearance
        if "window" in keys:
            return None
        cols = {}
        for k in keys:
            col = [r.get(k, _MISSING) for r in rows]
            ts = set(map(type, col))
            has_missing = object in ts
            ts.discard(object)
            types.setdefault(k, set()).update(ts)
            complete[k] = complete.get(k, True) and not has_missing
            cols[k] = col
        per_window.append((i, len(rows), cols))
        order.update(keys)
        order["window"] = None
    for k in order:                                  # a window without the key: missing there
        if k != "window" and any(k not in cols for _i, _n, cols in per_window):
            complete[k] = False
    kinds = {}
    for k, ts in types.items():
        kind = kinds[k] = _kind(ts, complete[k])
        if kind is None:
            return None
        if kind == "int" and not all(_INT64_MIN <= min(c[k]) and max(c[k]) <= _INT64_MAX
                                     for _i, _n, c in per_window):
            return None                              # beyond int64: pandas keeps objects
    header = list(order)
    out: list[tuple] = []
    for i, n, cols in per_window:
        columns = []
        for k in header:
            if k == "window":
                columns.append(itertools.repeat(i, n))
                continue
            col = cols.get(k)
            if col is None:
                columns.append(itertools.repeat("", n))
            elif kinds[k] == "num":
                if complete[k] and not any(map(math.isnan, col)) and type(col[0]) is float \
                        and all(type(v) is float for v in col):
                    columns.append(col)
                else:                                # ints as floats, NaN and missing empty
                    columns.append(["" if v is _MISSING or v != v else float(v) for v in col])
            elif kinds[k] == "int":
                columns.append(col)
            else:                                    # str, bool: missing cells empty
                columns.append(["" if v is _MISSING else v for v in col] if not complete[k] else col)
        out.extend(zip(*columns))
    if "time_s" in kinds:
        t = header.index("time_s")
        if kinds["time_s"] not in ("int", "num") or any(type(row[t]) is str for row in out):
            return None                              # a missing or NaN time: pandas sorts it last
        out.sort(key=operator.itemgetter(t))         # list.sort is stable, as sort_values(kind="stable")
    return header, out


def _kahan_sums(keys_values: Iterable[tuple[tuple[str, str], float]]) -> dict[tuple[str, str], float]:
    """Per key, the compensated (Kahan) sum pandas' group-by ``sum`` takes of float64 values, in
    the order given; keys in order of first appearance (``sort=False``)."""
    sums: dict[tuple[str, str], float] = {}
    comp: dict[tuple[str, str], float] = {}
    for key, val in keys_values:
        s = sums.get(key, 0.0)
        c = comp.get(key, 0.0)
        y = val - c
        t = s + y
        c = t - s - y
        if c != c:                       # an infinite value: pandas drops the compensation
            c = 0.0
        sums[key], comp[key] = t, c
    return sums


def energy_rows(windows: Sequence[list[dict]]) -> Table | None:
    """energy_breakdown.csv from each window's (device, kind, energy_j) rows: one window's rows
    as they are, several windows' summed per (device, kind) as pandas' group-by does."""
    header = ["device", "kind", "energy_j"]
    for rows in windows:
        if not rows:
            return None
        for row in rows:
            if list(row) != header or type(row["device"]) is not str or type(row["kind"]) is not str \
                    or type(row["energy_j"]) is not float or row["energy_j"] != row["energy_j"]:
                return None
    if len(windows) == 1:
        return header, [[r["device"], r["kind"], r["energy_j"]] for r in windows[0]]
    sums = _kahan_sums(((r["device"], r["kind"]), r["energy_j"]) for rows in windows for r in rows)
    return header, [[d, k, e] for (d, k), e in sums.items()]


def windows_rows(rows: list[dict], columns: list[str]) -> Table | None:
    """windows.csv: ``pd.DataFrame(rows, columns=columns)`` written (numbers, missing values as
    None: a column of ints is int64 unless a value is missing, a column of only None is empty)."""
    kinds = {}
    for c in columns:
        vals = [r.get(c) for r in rows]
        ts = {type(v) for v in vals}
        if not ts <= {int, float, type(None)}:
            return None
        if any(type(v) is int and not _INT64_MIN <= v <= _INT64_MAX for v in vals):
            return None
        kinds[c] = "int" if ts == {int} else ("none" if ts == {type(None)} else "num")
    out = []
    for r in rows:
        cells = []
        for c in columns:
            v = r.get(c)
            if v is None or (type(v) is float and v != v):
                cells.append("")
            elif kinds[c] == "num":
                cells.append(float(v))
            else:
                cells.append(v)
        out.append(cells)
    return list(columns), out
