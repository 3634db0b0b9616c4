"""The public Python API: load a config with overrides, run it, compare modes, run a sweep.

Everything here is what the command line does, with results as typed objects and pandas
DataFrames instead of printed tables (docs/api.md)::

    from ahasd_sim import api

    cfg = api.load_config("hw_configs/ahasd_mobile.yaml", {"run.generated_tokens": 96})
    res = api.run(cfg)
    print(f"throughput {res.throughput_tok_s:.2f} tok/s")     # the CLI's summary line
    res.frame()                                               # one row, results.csv's columns

Names kept stable across releases: :func:`load_config`, :func:`run`, :func:`compare`,
:func:`sweep`, :func:`results_frame`, :class:`Result`, :data:`SUMMARY_KEYS` (the results
schema: unit and meaning of every summary key).
"""
from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .config.loader import SimConfig
from .config.loader import load_config as _load_config
from .metrics.schema import RESULTS_COLUMNS, SUMMARY_KEYS, describe

__all__ = ["Result", "load_config", "run", "compare", "sweep", "results_frame", "SUMMARY_KEYS",
           "RESULTS_COLUMNS", "describe", "SimConfig"]

Overrides = "Mapping[str, Any] | Sequence[str] | None"


def _override_list(overrides) -> list[str]:
    """``{"npu.freq_ghz": 1.2}`` or ``["npu.freq_ghz=1.2"]`` -> ``--set`` strings (values are YAML;
    a non-string value is written as JSON, which YAML reads back as the same value)."""
    if overrides is None:
        return []
    if isinstance(overrides, Mapping):
        return [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in overrides.items()]
    if isinstance(overrides, str):
        return [overrides]
    return list(overrides)


def load_config(config: str | Path | SimConfig, overrides: Overrides = None, seed: int | None = None,
                *, warn: bool = True) -> SimConfig:
    """A resolved config: ``config`` (a YAML file; shipped names such as
    ``hw_configs/ahasd_mobile.yaml`` work from any folder) with ``overrides`` applied (a dict of
    dotted keys, or ``KEY=VALUE`` strings as ``--set`` takes them) and ``seed``. A
    :class:`SimConfig` given is copied with the overrides. Bad input raises
    :class:`ahasd_sim.errors.InputError` (one line naming the file or override and the key). The
    command line's ``warning:`` lines become :class:`UserWarning` (``warn=False``: none)."""
    ov = _override_list(overrides)
    if isinstance(config, SimConfig):
        cfg = config.replace([*ov, *([f"run.seed={int(seed)}"] if seed is not None else [])]) \
            if ov or seed is not None else config
    else:
        cfg = _load_config(config, ov, seed)
    if warn:
        from .checks import config_warnings
        for w in config_warnings(cfg):
            warnings.warn(w, UserWarning, stacklevel=2)
    return cfg


@dataclass
class Result:
    """One run: its config, ``summary`` (summary.json as a dict), per-window and energy tables."""

    config: SimConfig
    summary: dict[str, Any]
    windows: Any            # pandas DataFrame, one row per trace window (windows.csv)
    energy: Any             # pandas DataFrame: device, kind, energy_j (energy_breakdown.csv)
    wall_time_s: float
    raw: Any = field(repr=False, default=None)   # the simulation's own result object

    # the headline metrics, typed (units in the names; SUMMARY_KEYS describes every key)
    @property
    def mode(self) -> str:
        return self.summary["mode"]

    @property
    def policy(self) -> str:
        return self.summary["policy"]

    @property
    def throughput_tok_s(self) -> float:
        return float(self.summary["throughput_tok_s"])

    @property
    def throughput_tok_s_ci95(self) -> tuple[float, float] | None:
        ci = self.summary.get("throughput_tok_s_ci95")
        return (float(ci[0]), float(ci[1])) if ci else None

    @property
    def tokens_per_j(self) -> float:
        return float(self.summary["tokens_per_j"])

    @property
    def tokens_per_j_ci95(self) -> tuple[float, float] | None:
        ci = self.summary.get("tokens_per_j_ci95")
        return (float(ci[0]), float(ci[1])) if ci else None

    @property
    def energy_j(self) -> float:
        return float(self.summary["energy_j"])

    @property
    def energy_per_token_j(self) -> float:
        return float(self.summary["energy_per_token_j"])

    @property
    def makespan_s(self) -> float:
        return float(self.summary["makespan_s"])

    @property
    def acceptance_rate(self) -> float:
        return float(self.summary["acceptance_rate"])

    @property
    def generated_tokens(self) -> int:
        return int(self.summary["generated_tokens"])

    def __getitem__(self, key: str) -> Any:
        """A summary value by its dotted key: ``res["device_utilization.npu"]``."""
        v: Any = self.summary
        for part in key.split("."):
            v = v[part]
        return v

    def flat(self) -> dict[str, Any]:
        """The summary flattened with dots, as results.csv's columns (lists left out)."""
        from .sweep.results import flatten
        return flatten(self.summary)

    def frame(self):
        """A one-row DataFrame of :meth:`flat`."""
        import pandas as pd
        return pd.DataFrame([self.flat()])

    def save(self, out: str | Path) -> Path:
        """Write the run folder the command line writes (summary.json, windows.csv, ...); an
        existing run folder is replaced as a whole, any other existing folder is refused."""
        from .outdir import OutputFolder
        from .output import write_run
        out = Path(out)
        with OutputFolder(out, "run") as folder:
            write_run(self.raw, self.config, folder.stage, self.wall_time_s)
            folder.commit()
        return out


def run(config: str | Path | SimConfig, overrides: Overrides = None, seed: int | None = None, *,
        jobs: int = 1, out: str | Path | None = None) -> Result:
    """Simulate ``config`` (a file or a :class:`SimConfig`, with ``overrides`` and ``seed``, see
    :func:`load_config`). ``jobs``: processes running trace windows in parallel (the result is the
    same for any number). ``out``: also write the run folder there."""
    from .simulation import run_simulation
    cfg = config if isinstance(config, SimConfig) and not overrides and seed is None \
        else load_config(config, overrides, seed)
    t0 = time.perf_counter()
    raw = run_simulation(cfg, workers=jobs)
    res = Result(cfg, raw.summary, raw.windows, raw.energy, time.perf_counter() - t0, raw)
    if out is not None:
        res.save(out)
    return res


def compare(config: str | Path | SimConfig, modes: Iterable[str] | str | None = None, *,
            overrides: Overrides = None, baseline: str | None = None, out: str | Path | None = None):
    """Run several execution modes on the same config, trace windows and seed (``modes``: names as
    ``compare --modes`` takes them; default: the command line's default set). Returns the
    comparison table as a DataFrame (one row per mode: throughput, tokens/J, ratios to the best
    decoder with 95% intervals); the run folders and compare.csv go to ``out`` (default: a new
    folder under results/). An MoE-offload config without ``modes`` runs the command line's MoE
    comparison (every baseline tuned on rounds the reported ones do not use)."""
    from .compare import run_compare
    cfg = load_config(config, overrides)
    if cfg.run.mode == "moe_offload" and modes is None:
        from .compare_moe import run_compare_moe
        return run_compare_moe(cfg, out)[0]
    if isinstance(modes, str):
        modes = modes.split(",")
    table, _out = run_compare(cfg, list(modes) if modes is not None else None, baseline, out)
    return table


def sweep(spec: str | Path, out: str | Path | None = None, *, workers: int | None = None,
          recompute: bool = False, progress: bool = False):
    """Run a sweep file (docs/sweeps.md); finished points are reused unless ``recompute``.
    Returns the sweep result: ``.table`` is results.csv as a DataFrame (one row per point),
    ``.out_dir`` the folder."""
    from .sweep.runner import run_sweep
    return run_sweep(spec, out, workers=workers, progress=progress, recompute=recompute)


def results_frame(results: Iterable[Result]):
    """One DataFrame row per :class:`Result` (results.csv's columns)."""
    import pandas as pd
    return pd.DataFrame([r.flat() for r in results])
