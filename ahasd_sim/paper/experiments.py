"""The AHASD paper's experiment definition, read from ``hw_configs/paper/experiments.yaml``.

The file names the two sweeps (the reproduction and the regimes), which of their variants form
the ablation ladders and the baselines, the report's labels, and the numbers the paper reports
(references.md#ahasd-results; for comparison only, never an input). It is checked strictly on
load, as sweep files are: an unknown key, a value of the wrong type, or a name that is not a
variant (or axis) of its sweep is a one-line :class:`~ahasd_sim.config.errors.ConfigError` naming
the file and the key path.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config.errors import did_you_mean
from ..paths import data_file, resolve_input_file
from ..sweep.spec import SEED_COL, SweepSpec, _err, _str_list, check_keys, load_sweep_spec

DEFAULT_EXPERIMENTS = data_file("hw_configs/paper/experiments.yaml")

TOP_KEYS = ("sweeps", "ladders", "ladder", "best_decoders", "sota", "kv_variants", "match", "variants", "regimes",
            "paper_reported", "caveats")
SWEEP_KEYS = ("main", "regimes")
#: the two best-decoder pseudo-variants the report compares with (each competitor at its best)
BEST_DECODER_KEYS = ("best_soc", "best_gpu")
VARIANT_KEYS = ("label", "short")
REGIME_KEYS = ("rates_axis", "contention_axis", "decoders")
#: the paper's power table: its rows (the variants report.power_rows compares) and its columns
#: (ratios x NPU+LPDDR5), in the report's order
POWER_ROWS = ("npu_lpddr5", "plus_aau", "ahasd")
POWER_COLUMNS = ("lpddr5_power", "npu_power", "throughput", "energy_per_token")
#: the reported numbers the report compares with: a ratio (or a percentage, ``_pct``) each
REPORTED_NUMBERS = ("acceptance_npu_pim_vs_gpu_pct", "acceptance_edc_vs_aau_pct",
                    "acceptance_edc_vs_aau_llama_adaedl_pct", "acceptance_edc_vs_aau_opt_max_pct",
                    "ahasd_vs_gpu_max_throughput", "ahasd_vs_gpu_max_energy_eff", "ahasd_vs_specpim_max_throughput",
                    "ahasd_vs_specpim_mean_energy_eff", "ahasd_vs_npu_lpddr5_throughput",
                    "ahasd_vs_npu_lpddr5_energy_per_token", "ahasd_vs_npu_pim_throughput",
                    "ahasd_vs_npu_pim_energy_eff")
REPORTED_KEYS = ("source", "ladder_throughput", "ladder_energy_eff", *REPORTED_NUMBERS, "power_table")


@dataclass(frozen=True)
class PaperExperiments:
    """The checked contents of an experiments file, with its two sweeps loaded."""

    source: Path
    main_sweep: SweepSpec
    regimes_sweep: SweepSpec
    ladders: dict[str, list[str]]        # EDC-stop semantics -> rungs (first: the baseline)
    ladder: list[str]                    # the rungs of the per-pair tables and figures
    best_decoders: dict[str, list[str]]  # best_soc / best_gpu -> candidate variants
    sota: list[str]
    kv_variants: dict[str, str]          # pre-verification KV option -> variant
    match: list[str]
    labels: dict[str, str]               # variant -> label, in the report's order
    short: dict[str, str]                # variant -> short label
    regime_rates_axis: str
    regime_contention_axis: str
    regime_decoders: list[str]
    reported: dict[str, Any]             # the paper's numbers (for comparison only)
    reported_source: str
    caveats: list[str]

    @property
    def regime_axes(self) -> list[str]:
        return [self.regime_rates_axis, self.regime_contention_axis]


# ------------------------------------------------------------------ typed readers
def _mapping(src: Path, key: str, value: Any, allowed: tuple[str, ...] | None = None,
             required: tuple[str, ...] = ()) -> dict:
    if not isinstance(value, dict):
        raise _err(src, key, f"expected a mapping, got {type(value).__name__}")
    if allowed is not None:
        check_keys(src, key, value, allowed)
    for k in required:
        if k not in value:
            raise _err(src, f"{key}.{k}" if key else k, "required")
    return value


def _text(src: Path, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _err(src, key, f"expected a non-empty string, got {value!r}")
    return value


def _number(src: Path, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _err(src, key, f"expected a number, got {value!r}")
    return value


def _texts(src: Path, key: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not value:
        raise _err(src, key, "expected a non-empty list")
    return [_text(src, f"{key}[{i}]", v) for i, v in enumerate(value)]


def _unique_names(src: Path, key: str, value: Any) -> list[str]:
    names = _str_list(src, key, value)
    for i, n in enumerate(names):
        if n in names[:i]:
            raise _err(src, f"{key}[{i}]", f"'{n}' appears twice")
    return names


def _names_of(src: Path, key: str, names: list[str], sweep: SweepSpec) -> None:
    """Every name in ``names`` is a variant of ``sweep``."""
    known = [v.name for v in sweep.variants]
    for i, n in enumerate(names):
        if n not in known:
            raise _err(src, f"{key}[{i}]", f"'{n}' is not a variant of the sweep {sweep.source}"
                                           f"{did_you_mean(n, known)}")


def _variant_of(src: Path, key: str, name: str, sweep: SweepSpec) -> None:
    known = [v.name for v in sweep.variants]
    if name not in known:
        raise _err(src, key, f"'{name}' is not a variant of the sweep {sweep.source}{did_you_mean(name, known)}")


def _sweep_file(src: Path, key: str, value: Any) -> Path:
    path = src.parent / _text(src, key, value)
    if not path.is_file():
        raise _err(src, key, f"sweep file '{value}' not found (looked in {src.parent})")
    return path


# ------------------------------------------------------------------ loading
def load_experiments(path: str | Path = DEFAULT_EXPERIMENTS, main_sweep: str | Path | None = None) -> PaperExperiments:
    """Read and check an experiments file; ``main_sweep`` (the command line's ``--spec``)
    replaces its ``sweeps.main``, and the names are checked against that sweep."""
    from ..config import yamlio
    src = resolve_input_file(path, "--experiments")
    if not src.is_file():
        raise _err(src, "", "experiments file not found")
    raw = _mapping(src, "", yamlio.load_file(src, "experiments file"), TOP_KEYS, TOP_KEYS)

    sweeps = _mapping(src, "sweeps", raw["sweeps"], SWEEP_KEYS, SWEEP_KEYS)
    main = load_sweep_spec(main_sweep if main_sweep is not None else _sweep_file(src, "sweeps.main", sweeps["main"]))
    regimes = load_sweep_spec(_sweep_file(src, "sweeps.regimes", sweeps["regimes"]))

    ladders = {}
    for stop, rungs in _mapping(src, "ladders", raw["ladders"]).items():
        where = f"ladders.{stop}"
        ladders[_text(src, where, stop)] = _unique_names(src, where, rungs)
        _names_of(src, where, ladders[stop], main)
    if not ladders:
        raise _err(src, "ladders", "expected at least one ladder")
    ladder = _text(src, "ladder", raw["ladder"])
    if ladder not in ladders:
        raise _err(src, "ladder", f"'{ladder}' is not one of the ladders ({', '.join(ladders)})"
                                  f"{did_you_mean(ladder, ladders)}")

    best = _mapping(src, "best_decoders", raw["best_decoders"], BEST_DECODER_KEYS, BEST_DECODER_KEYS)
    best_decoders = {}
    for name in BEST_DECODER_KEYS:
        best_decoders[name] = _unique_names(src, f"best_decoders.{name}", best[name])
        _names_of(src, f"best_decoders.{name}", best_decoders[name], main)

    sota = _unique_names(src, "sota", raw["sota"])
    _names_of(src, "sota", sota, main)

    kv_variants = {}
    for kv, name in _mapping(src, "kv_variants", raw["kv_variants"]).items():
        where = f"kv_variants.{kv}"
        kv_variants[_text(src, where, kv)] = _text(src, where, name)
        _variant_of(src, where, name, main)

    match = _unique_names(src, "match", raw["match"])
    columns = [*main.axis_columns(), SEED_COL]
    for i, col in enumerate(match):
        if col not in columns:
            raise _err(src, f"match[{i}]", f"'{col}' is not a results.csv column of the sweep {main.source} "
                                           f"(its axes: {', '.join(columns)}){did_you_mean(col, columns)}")

    labels, short = {}, {}
    for name, body in _mapping(src, "variants", raw["variants"]).items():
        where = f"variants.{name}"
        _variant_of(src, where, name, main)
        body = _mapping(src, where, body, VARIANT_KEYS, VARIANT_KEYS)
        labels[name] = _text(src, f"{where}.label", body["label"])
        s = _text(src, f"{where}.short", body["short"])
        if s in short.values():
            # the figures map a legend entry back to its variant
            raise _err(src, f"{where}.short", f"'{s}' is also another variant's short label")
        short[name] = s
    for v in main.variants:
        if v.name not in labels:
            raise _err(src, "variants", f"the sweep {main.source} has variant '{v.name}', which needs a label and a "
                                        "short label here (the report lists every variant)")

    reg = _mapping(src, "regimes", raw["regimes"], REGIME_KEYS, REGIME_KEYS)
    axis_names = [ax.name for ax in [*regimes.shortcut_axes, *regimes.axes]]
    for key in ("rates_axis", "contention_axis"):
        name = _text(src, f"regimes.{key}", reg[key])
        if name not in axis_names:
            raise _err(src, f"regimes.{key}", f"'{name}' is not an axis of the sweep {regimes.source} "
                                              f"(axes: {', '.join(axis_names)}){did_you_mean(name, axis_names)}")
    regime_decoders = _unique_names(src, "regimes.decoders", reg["decoders"])
    _names_of(src, "regimes.decoders", regime_decoders, regimes)

    rep = _mapping(src, "paper_reported", raw["paper_reported"], REPORTED_KEYS, REPORTED_KEYS)
    reported: dict[str, Any] = {}
    for key in ("ladder_throughput", "ladder_energy_eff"):
        reported[key] = {}
        # one throughput and one energy claim per rung (report.comparison_rows)
        rungs = tuple(reported["ladder_throughput"]) if key == "ladder_energy_eff" else None
        for name, x in _mapping(src, f"paper_reported.{key}", rep[key], rungs, rungs or ()).items():
            where = f"paper_reported.{key}.{name}"
            _variant_of(src, where, name, main)
            reported[key][name] = _number(src, where, x)
    for key in REPORTED_NUMBERS:
        reported[key] = _number(src, f"paper_reported.{key}", rep[key])
    reported["power_table"] = {}
    power = _mapping(src, "paper_reported.power_table", rep["power_table"], POWER_ROWS, POWER_ROWS)
    for name in POWER_ROWS:
        row = power[name]
        where = f"paper_reported.power_table.{name}"
        _variant_of(src, where, name, main)
        row = _mapping(src, where, row, POWER_COLUMNS, POWER_COLUMNS)
        reported["power_table"][name] = {c: _number(src, f"{where}.{c}", row[c]) for c in POWER_COLUMNS}

    caveats = _texts(src, "caveats", raw["caveats"])
    return PaperExperiments(
        source=src, main_sweep=main, regimes_sweep=regimes, ladders=ladders, ladder=ladders[ladder],
        best_decoders=best_decoders, sota=sota, kv_variants=kv_variants, match=match, labels=labels, short=short,
        regime_rates_axis=reg["rates_axis"], regime_contention_axis=reg["contention_axis"],
        regime_decoders=regime_decoders, reported=reported,
        reported_source=_text(src, "paper_reported.source", rep["source"]), caveats=caveats)
