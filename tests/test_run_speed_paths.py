"""The default job's speed mechanisms keep every output byte (issue 12, task i12wall).

* window workers return plain rows; the parent frames them (and imports pandas meanwhile):
  the files written from a run in forked workers equal those of a serial run;
* setting up a run (config, trace windows, one window's simulation) imports no pandas;
* ``output.write_csv`` writes exactly what ``DataFrame.to_csv(index=False)`` writes.
"""
from __future__ import annotations

import math
import random
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from ahasd_sim.config import load_config
from ahasd_sim.output import config_hash, config_text, write_csv, write_run
from ahasd_sim.simulation import _run_window_rows, load_run_windows, run_simulation

from conftest import ROOT, SMOKE_TRACE

FILES = ("summary.json", "windows.csv", "events.csv", "energy_breakdown.csv", "timeline.json",
         "config.resolved.yaml")


def _smoke_cfg():
    return load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml",
                       [f"run.trace={SMOKE_TRACE}", "run.generated_tokens=24", "run.windows=3"])


def test_windows_in_forked_workers_write_the_serial_run_bytes(tmp_path):
    cfg = _smoke_cfg()
    serial = run_simulation(cfg, workers=1)
    forked = run_simulation(cfg, workers=2)
    assert serial.summary["windows"] == 3
    assert len(serial.events) > 3 and isinstance(forked.events, pd.DataFrame)
    write_run(serial, cfg, tmp_path / "a", 0.0)
    write_run(forked, cfg, tmp_path / "b", 0.0)
    for name in FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_a_window_job_returns_rows_not_tables():
    cfg = _smoke_cfg()
    (_p, parts), *_ = load_run_windows(cfg)
    raw = _run_window_rows(cfg, parts, 0)
    assert type(raw.events) is list and type(raw.energy) is list and raw.events
    assert isinstance(raw.events[0], dict) and set(raw.energy[0]) == {"device", "kind", "energy_j"}


def test_setting_up_and_simulating_a_window_imports_no_pandas():
    code = (f"import sys\nfrom ahasd_sim.config import load_config\n"
            f"from ahasd_sim.simulation import _run_window_rows, load_run_windows\n"
            f"cfg = load_config({str(ROOT / 'hw_configs' / 'ahasd_mobile.yaml')!r}, "
            f"['run.trace={SMOKE_TRACE}', 'run.generated_tokens=24'])\n"
            f"(_p, parts), *_ = load_run_windows(cfg)\n"
            f"r = _run_window_rows(cfg, parts, 0)\n"
            f"assert r.events, 'no events'\n"
            f"print('pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"   # the forked workers never pay for importing pandas


def test_config_text_is_dump_config_and_follows_changes():
    from ahasd_sim.config import dump_config
    a = _smoke_cfg()
    b = load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml",
                    [f"run.trace={SMOKE_TRACE}", "run.generated_tokens=25", "run.windows=3"])
    assert config_text(a) == dump_config(a) and config_text(b) == dump_config(b)
    assert config_text(a) != config_text(b) and config_hash(a) != config_hash(b)


def _random_table(rng: random.Random) -> pd.DataFrame:
    n = rng.randint(1, 40)
    specials = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e16, 1e15, 9999999999999998.0, 1e-4, 1e-5,
                0.1, 1 / 3, 5e-324, 1.7976931348623157e308, 123456789.125, -2.5e-7]

    def number():
        if rng.random() < 0.3:
            return rng.choice(specials)
        return rng.uniform(-1, 1) * 10.0 ** rng.randint(-30, 30)

    texts = ["plain", "with,comma", 'with "quote"', "line\nbreak", "", " spaced ", "ünïcode", "tab\there"]
    cols = {
        "f": lambda: number(),
        "i": lambda: rng.randint(-2**62, 2**62),
        "b": lambda: rng.random() < 0.5,
        "s": lambda: rng.choice(texts),
        "int_or_float": lambda: rng.choice([rng.randint(-5, 5), number()]),
        "mixed": lambda: rng.choice([1, 2.5, "x", True, None, math.nan]),   # object column
        "numpy": lambda: rng.choice([np.float64(0.1), np.int64(3), "y"]),     # left to pandas
    }
    names = rng.sample(sorted(cols), rng.randint(1, len(cols)))
    p_missing = rng.choice([0.0, 0.0, 0.1, 0.5])     # missing from a row: NaN / empty
    rows = []
    for _ in range(n):
        rows.append({name: cols[name]() for name in names if rng.random() >= p_missing})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("seed", range(60))
def test_write_csv_writes_what_to_csv_writes(tmp_path, seed):
    table = _random_table(random.Random(seed))
    write_csv(table, tmp_path / "fast.csv")
    table.to_csv(tmp_path / "pandas.csv", index=False)
    assert (tmp_path / "fast.csv").read_bytes() == (tmp_path / "pandas.csv").read_bytes()


def test_write_csv_on_typed_columns_and_empty_tables(tmp_path):
    tables = [
        pd.DataFrame({"x": np.array([1.5, np.nan, 2.0], dtype=np.float32)}),   # float32: pandas' own format
        pd.DataFrame({"n": pd.array([1, None, 3], dtype="Int64")}),             # nullable ints: pandas
        pd.DataFrame({"s": pd.Series(["a", None, "b,c"], dtype="string")}),
        pd.DataFrame({"t": [0.25, 0.5]}, index=[7, 3]),                         # index not written
        pd.DataFrame(),
        pd.DataFrame(columns=["a", "b"]),
    ]
    for i, t in enumerate(tables):
        write_csv(t, tmp_path / f"fast{i}.csv")
        t.to_csv(tmp_path / f"pandas{i}.csv", index=False)
        assert (tmp_path / f"fast{i}.csv").read_bytes() == (tmp_path / f"pandas{i}.csv").read_bytes(), i


# ------------------------------------------------------------ csvrows: the CSVs from rows
def _pandas_events(windows, path):
    """What combine_windows + write_run did with pandas: frame, add ``window``, concat, sort."""
    frames = [pd.DataFrame(rows) for rows in windows]
    events = [f.assign(window=i) for i, f in enumerate(frames) if len(f)]
    ev = events[0] if len(events) == 1 else pd.concat(events, ignore_index=True)
    if "time_s" in ev.columns:
        ev = ev.sort_values("time_s", kind="stable")
    ev.to_csv(path, index=False)


def _random_windows(rng: random.Random) -> list[list[dict]]:
    times = [0.0, 0.5, 1.25, 3.0, 1e-7, 2.5e3]
    kinds = {
        "f": lambda: rng.uniform(-1, 1) * 10.0 ** rng.randint(-12, 12),
        "i": lambda: rng.randint(-10**12, 10**12),
        "if": lambda: rng.choice([rng.randint(-3, 3), rng.random()]),
        "s": lambda: rng.choice(["verify", "draft,token", 'q"x', ""]),
        "b": lambda: rng.random() < 0.5,
        "nan": lambda: rng.choice([math.nan, 1.5]),
        "odd": lambda: rng.choice([None, np.float64(0.5), "x", 3]),      # pandas' own cases
    }
    names = ["time_s"] + rng.sample(sorted(kinds), rng.randint(1, 4))
    windows = []
    for _w in range(rng.randint(1, 4)):
        present = {k: rng.choice([1.0, 1.0, 0.7, 0.0]) for k in names}
        if rng.random() < 0.85:
            present["time_s"] = 1.0                 # else some rows lack a time: left to pandas
        rows = []
        for _r in range(rng.choice([0, 1, 5, 20])):
            row = {}
            for k in rng.sample(names, len(names)) if rng.random() < 0.2 else names:
                if rng.random() < present[k]:
                    row[k] = rng.choice(times) if k == "time_s" else kinds[k[:3] if k != "time_s" else k]()
            rows.append(row)
        windows.append(rows)
    if not any(windows):
        windows[0].append({"time_s": 1.0})
    return windows


def test_events_rows_write_what_pandas_wrote(tmp_path):
    from ahasd_sim.csvrows import events_rows, write_rows
    fast = 0
    for seed in range(150):
        windows = _random_windows(random.Random(seed))
        table = events_rows(windows)
        if table is None:
            continue
        fast += 1
        write_rows(tmp_path / "rows.csv", table)
        _pandas_events(windows, tmp_path / "pandas.csv")
        assert (tmp_path / "rows.csv").read_bytes() == (tmp_path / "pandas.csv").read_bytes(), seed
    assert fast >= 50                                 # the fast path is what is being tested


def test_energy_rows_sum_as_pandas_groupby_does(tmp_path):
    from ahasd_sim.csvrows import energy_rows, write_rows
    rng = random.Random(7)
    for trial in range(60):
        devices = rng.sample(["npu", "pim", "aau", "lpddr5", "gts"], rng.randint(1, 5))
        windows = []
        for _w in range(rng.randint(1, 12)):
            order = rng.sample(devices, len(devices)) if rng.random() < 0.3 else devices
            windows.append([{"device": d, "kind": k, "energy_j": rng.uniform(0, 1) * 10.0 ** rng.randint(-9, 4)}
                            for d in order for k in ("dynamic", "static")])
        if trial % 10 == 0:
            windows[0][0]["energy_j"] = math.inf
        frames = [pd.DataFrame(w, columns=["device", "kind", "energy_j"]) for w in windows]
        ref = frames[0] if len(frames) == 1 else pd.concat(frames).groupby(
            ["device", "kind"], sort=False, as_index=False)["energy_j"].sum()
        ref.to_csv(tmp_path / "pandas.csv", index=False)
        write_rows(tmp_path / "rows.csv", energy_rows(windows))
        assert (tmp_path / "rows.csv").read_bytes() == (tmp_path / "pandas.csv").read_bytes(), trial


def test_windows_rows_write_what_pandas_wrote(tmp_path):
    from ahasd_sim.csvrows import windows_rows, write_rows
    from ahasd_sim.simulation import WINDOW_COLUMNS
    rng = random.Random(3)
    for trial in range(40):
        pick = {c: rng.choice(["int", "float", "mixed", "none", "some_none"]) for c in WINDOW_COLUMNS}
        value = {"int": lambda: rng.randint(0, 5000), "float": lambda: rng.random() * 100,
                 "mixed": lambda: rng.choice([rng.randint(0, 9), rng.random()]), "none": lambda: None,
                 "some_none": lambda: rng.choice([None, rng.randint(0, 9)])}
        rows = [{c: value[pick[c]]() for c in WINDOW_COLUMNS} for _ in range(rng.randint(1, 12))]
        pd.DataFrame(rows, columns=WINDOW_COLUMNS).to_csv(tmp_path / "pandas.csv", index=False)
        write_rows(tmp_path / "rows.csv", windows_rows(rows, WINDOW_COLUMNS))
        assert (tmp_path / "rows.csv").read_bytes() == (tmp_path / "pandas.csv").read_bytes(), trial


def test_combined_run_tables_are_framed_on_use_and_written_from_rows(tmp_path):
    cfg = _smoke_cfg()
    res = run_simulation(cfg, workers=1)
    assert res.csv_tables() is not None and not res._tables          # nothing framed yet
    write_run(res, cfg, tmp_path / "rows", 0.0)
    assert not res._tables                                            # written without tables
    framed = run_simulation(cfg, workers=1)
    assert len(framed.events) == sum(len(w) for w in framed.window_events) and framed._tables
    assert list(framed.events.columns)[-1] == "window"
    write_run(framed, cfg, tmp_path / "tables", 0.0)                 # csv_tables() -> None: pandas
    for name in FILES:
        assert (tmp_path / "rows" / name).read_bytes() == (tmp_path / "tables" / name).read_bytes(), name


def test_the_default_command_imports_no_pandas(tmp_path):
    code = ("import runpy, sys\n"
            f"sys.argv = ['ahasd_sim', '--config', {str(ROOT / 'hw_configs' / 'ahasd_mobile.yaml')!r}, "
            f"'--set', 'run.trace={SMOKE_TRACE}', '--set', 'run.generated_tokens=24', '--set', 'run.windows=3', "
            f"'--quiet', '--out', {str(tmp_path / 'run')!r}]\n"
            "try:\n    runpy.run_module('ahasd_sim', run_name='__main__')\n"
            "except SystemExit as e:\n    assert not e.code, e.code\n"
            "print('pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
    assert (tmp_path / "run" / "events.csv").stat().st_size > 100


def test_a_table_handed_out_is_written_as_it_is(tmp_path):
    cfg = _smoke_cfg()
    res = run_simulation(cfg, workers=1)
    res.events = res.events.head(2)          # a caller's own table: written, not the rows
    write_run(res, cfg, tmp_path / "replaced", 0.0)
    assert len((tmp_path / "replaced" / "events.csv").read_text().splitlines()) == 3
    res = run_simulation(cfg, workers=1)
    res.energy["energy_j"] = 0.5             # changed in place
    write_run(res, cfg, tmp_path / "changed", 0.0)
    assert (tmp_path / "changed" / "energy_breakdown.csv").read_text().splitlines()[1].endswith(",0.5")
