"""Where speculation pays: a design-space map of every decoder of the platform.

A *map file* (``hw_configs/studies/speculation_map*.yaml``) names a base platform, the decoders
the platform supports (each with its tuning candidates) and *planes*: small sweeps over the axes
that decide the winner (PIM input-vector slots, drafter kind and size, model pair, phone memory,
power, context). Every cell of every plane runs every decoder with every tuning candidate on the
same trace windows (one sweep per plane on the sweep engine: resumable, parallel, one folder per
distinct configuration).

Per cell and decoder, the tuning is chosen on the **selection windows** (the first
``selection_windows`` windows of each run) and every reported number comes from the **report
windows** (the others): a decoder's tuning never sees the data its result is reported on. Rank
placement is chosen on the tuning trace as in every run (``pim.partition_policy: auto``).

Per cell the report gives the best decoder by throughput (ratio of totals over the report
windows), its throughput and tokens/J with 95% bootstrap intervals over whole windows, the
margin over the runner-up and the best speculative decoder's ratio to the reference (plain
decoding on PIM) as paired ratios with paired bootstrap intervals, AHASD's ratio to the best,
and the PIM logic area of the cell's platform. Speculation *wins* in a cell when the lower end
of the best speculative decoder's interval against the reference is above 1.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..config.errors import ConfigError
from ..metrics.stats import metric_ci, paired_metric_ci, pooled_rate
from ..sweep.spec import (SweepSpec, Variant, check_keys, parse_axes, parse_model_pairs,
                          dotted_keys, parse_set, read_spec_header)

MAP_KEYS = ("name", "description", "base", "selection_windows", "reference", "decoders", "planes", "ladder")
LADDER_KEYS = ("rungs",)
DECODER_KEYS = ("set", "tunings", "speculative", "label")
PLANE_KEYS = ("axes", "model_pairs", "combine", "title", "labels", "config")
#: separator of decoder and tuning in a variant name (folder-safe, not in decoder names)
SEP = "~"
#: the fewest report windows a cell's intervals need (a bootstrap over fewer has too few distinct
#: resamples to give a 95% interval: 4 windows have 35 distinct resamples)
MIN_REPORT_WINDOWS = 5


def _err(src: Path, key: str, msg: str) -> ConfigError:
    return ConfigError(str(src), key, msg)


@dataclass
class Decoder:
    name: str
    label: str
    overrides: list[str]
    tunings: dict[str, list[str]]     # tuning name -> overrides (at least one: "default")
    speculative: bool


@dataclass
class Plane:
    name: str
    title: str
    spec: SweepSpec
    axis_cols: list[str]              # results.csv columns that identify a cell (one per axis)
    labels: dict[str, str] = field(default_factory=dict)   # axis column -> how tables and figures name it
    platform: str = ""                # the plane's own base config (its file name) when not the map's
    base_values: dict[str, Any] = field(default_factory=dict)   # axis key -> the plane's base value

    def axis_keys(self) -> list[tuple[str, tuple[str, ...]]]:
        """(cell column, config keys it sets) per axis, in order."""
        return [(ax.name, ax.keys) for ax in [*self.spec.shortcut_axes, *self.spec.axes]]


@dataclass
class MapSpec:
    name: str
    source: Path
    description: str
    base_config: Path
    base_set: list[str]
    selection_windows: int
    reference: str
    decoders: dict[str, Decoder]
    planes: dict[str, Plane]
    ladder: dict[str, list[str]] = field(default_factory=dict)   # rung -> overrides (one switch each)
    base_values: dict[str, Any] = field(default_factory=dict)   # axis key -> the base platform's value
    raw: dict = field(default_factory=dict)

    def decoder_of(self, variant: str) -> tuple[str, str]:
        d, _, t = variant.partition(SEP)
        return d, t


def _dotted(tree: dict, key: str):
    for part in key.split("."):
        tree = tree.get(part) if isinstance(tree, dict) else None
    return tree


def _decoders(src: Path, raw: Any, known: set[str]) -> dict[str, Decoder]:
    if not isinstance(raw, dict) or not raw:
        raise _err(src, "decoders", "expected a mapping of decoder name -> {set:, tunings:}")
    out: dict[str, Decoder] = {}
    for name, body in raw.items():
        where = f"decoders.{name}"
        if not isinstance(name, str) or not name or SEP in name or "/" in name:
            raise _err(src, "decoders", f"decoder names must be non-empty strings without '{SEP}' or '/', got {name!r}")
        if not isinstance(body, dict):
            raise _err(src, where, f"expected a mapping with 'set' (and optional 'tunings'), got {body!r}")
        check_keys(src, where, body, DECODER_KEYS)
        ovr = parse_set(src, f"{where}.set", body.get("set"), known)
        tunings_raw = body.get("tunings") or {"default": {}}
        if not isinstance(tunings_raw, dict):
            raise _err(src, f"{where}.tunings", "expected a mapping of tuning name -> overrides")
        tunings = {}
        for tname, tset in tunings_raw.items():
            if not isinstance(tname, str) or not tname or SEP in tname:
                raise _err(src, f"{where}.tunings", f"tuning names must be non-empty strings without '{SEP}'")
            tunings[tname] = parse_set(src, f"{where}.tunings.{tname}", tset, known)
        mode = next((o.partition("=")[2].strip() for o in ovr if o.partition("=")[0].strip() == "run.mode"), None)
        spec_default = mode not in (None, "autoregressive", "gpu_only")
        speculative = body.get("speculative", spec_default)
        if not isinstance(speculative, bool):
            raise _err(src, f"{where}.speculative", f"expected true or false, got {speculative!r}")
        label = body.get("label", name)
        if not isinstance(label, str) or not label:
            raise _err(src, f"{where}.label", f"expected a non-empty string, got {label!r}")
        out[name] = Decoder(name, label, ovr, tunings, speculative)
    return out


def load_map_spec(path: str | Path) -> MapSpec:
    """Read and strictly validate a map file (one-line errors naming the file and the key)."""
    src, raw, name, desc, base, base_cfg, plain_cfg = read_spec_header(path, "map file", MAP_KEYS)
    plain = plain_cfg.to_dict()
    known = set(dotted_keys(plain))
    base_set = parse_set(src, "base.set", base.get("set"), known)
    sel = raw.get("selection_windows", 2)
    if not isinstance(sel, int) or isinstance(sel, bool) or sel < 1:
        raise _err(src, "selection_windows", f"expected an integer >= 1, got {sel!r}")
    decoders = _decoders(src, raw.get("decoders"), known)
    ref = raw.get("reference")
    if ref not in decoders:
        raise _err(src, "reference", f"expected one of the decoders ({', '.join(decoders)}), got {ref!r}")
    if decoders[ref].speculative:
        raise _err(src, "reference", f"the reference '{ref}' must be a plain (non-speculative) decoder")
    if not any(d.speculative for d in decoders.values()):
        raise _err(src, "decoders", "expected at least one speculative decoder")
    base_resolved = plain_cfg.replace(base_set, source=str(src)) if base_set else plain_cfg
    windows = int(base_resolved.run.windows or 0)
    if windows and windows - sel < MIN_REPORT_WINDOWS:
        raise _err(src, "selection_windows", f"{sel} selection windows leave {windows - sel} of run.windows={windows} "
                   f"to report; at least {MIN_REPORT_WINDOWS} are needed for intervals")
    variants = [Variant(f"{d.name}{SEP}{t}", None, [*d.overrides, *tov])
                for d in decoders.values() for t, tov in d.tunings.items()]
    planes_raw = raw.get("planes")
    if not isinstance(planes_raw, dict) or not planes_raw:
        raise _err(src, "planes", "expected a mapping of plane name -> {axes:, model_pairs:}")
    planes: dict[str, Plane] = {}
    base_values: dict[str, Any] = {}
    for pname, body in planes_raw.items():
        where = f"planes.{pname}"
        if not isinstance(pname, str) or not pname.replace("_", "").replace("-", "").isalnum():
            raise _err(src, "planes", f"plane names must be folder-safe, got {pname!r}")
        body = body or {}
        if not isinstance(body, dict):
            raise _err(src, where, "expected a mapping with 'axes' and/or 'model_pairs'")
        check_keys(src, where, body, PLANE_KEYS)
        plane_cfg, plane_known, plane_resolved, platform = base_cfg, known, base_resolved, ""
        if body.get("config") is not None:
            if not isinstance(body["config"], str):
                raise _err(src, f"{where}.config", "expected a config file name (relative to the map file)")
            plane_cfg = src.parent / body["config"]
            if not plane_cfg.is_file():
                raise _err(src, f"{where}.config", f"config file '{body['config']}' not found (looked in {src.parent})")
            from ..config.loader import load_config
            try:
                plain_plane = load_config(plane_cfg)
            except ConfigError as exc:
                raise _err(src, f"{where}.config", f"cannot load: {exc}") from None
            plane_known = set(dotted_keys(plain_plane.to_dict()))
            plane_resolved = plain_plane.replace(base_set, source=str(src)) if base_set else plain_plane
            platform = Path(body["config"]).stem
        try:
            axes = parse_axes(src, body.get("axes"), plane_known)
            shortcut = [parse_model_pairs(src, body["model_pairs"])] if "model_pairs" in body else []
        except ConfigError as exc:
            raise _err(src, where, str(exc).split(": ", 2)[-1]) from None
        combine = body.get("combine", "product")
        if combine not in ("product", "zip"):
            raise _err(src, f"{where}.combine", f"expected product or zip, got {combine!r}")
        if combine == "zip" and len({len(a.values) for a in axes}) > 1:
            raise _err(src, f"{where}.combine", "zip needs axes of equal length")
        for d in decoders.values():
            for ax in [*axes, *shortcut]:
                clash = set(ax.keys) & {o.partition("=")[0].strip() for o in d.overrides}
                if clash:
                    raise _err(src, f"{where}.axes", f"'{sorted(clash)[0]}' is set by decoder '{d.name}' too; "
                               "a key is either a decoder's or a plane axis")
        plane_base = {}
        for ax in [*axes, *shortcut]:
            for k in ax.keys:
                plane_base[k] = _dotted(plane_resolved.to_dict(), k)
                base_values.setdefault(k, _dotted(base_resolved.to_dict(), k))
        spec = SweepSpec(name=f"{name}-{pname}", source=src, base_config=plane_cfg, base_set=base_set, axes=axes,
                         shortcut_axes=shortcut, combine=combine, variants=variants, description=desc,
                         raw={"base": raw.get("base"), "decoders": raw.get("decoders"),
                              "plane": {k: body.get(k) for k in ("axes", "model_pairs", "combine", "config")}})
        cols = [ax.name for ax in [*shortcut, *axes]]
        title = body.get("title", pname)
        labels = body.get("labels") or {}
        if not isinstance(labels, dict) or any(k not in cols or not isinstance(v, str) for k, v in labels.items()):
            raise _err(src, f"{where}.labels", f"expected a mapping of this plane's axes ({', '.join(cols)}) to names")
        planes[pname] = Plane(pname, str(title), spec, cols, dict(labels), platform, plane_base)
    ladder: dict[str, list[str]] = {}
    if raw.get("ladder") is not None:
        lraw = raw["ladder"]
        if not isinstance(lraw, dict):
            raise _err(src, "ladder", "expected a mapping with 'rungs'")
        check_keys(src, "ladder", lraw, LADDER_KEYS)
        rungs = lraw.get("rungs")
        if not isinstance(rungs, dict) or len(rungs) < 2:
            raise _err(src, "ladder.rungs", "expected a mapping of at least two rung names -> overrides")
        for rname, rset in rungs.items():
            if not isinstance(rname, str) or not rname:
                raise _err(src, "ladder.rungs", f"rung names must be non-empty strings, got {rname!r}")
            ladder[rname] = parse_set(src, f"ladder.rungs.{rname}", rset, known)
    return MapSpec(name=name, source=src, description=desc, base_config=base_cfg, base_set=base_set,
                   selection_windows=sel, reference=ref, decoders=decoders, planes=planes, ladder=ladder,
                   base_values=base_values, raw=raw)


# ------------------------------------------------------------------ running
def run_map(spec: MapSpec, out: Path, *, workers: int = 1, progress: bool = True, stream=None,
            planes: list[str] | None = None) -> dict[str, Any]:
    """Run every plane's sweep into ``out/<plane>/`` (resumable); return {plane: SweepResult}."""
    from ..sweep.runner import run_sweep
    results = {}
    for pname, plane in spec.planes.items():
        if planes and pname not in planes:
            continue
        results[pname] = run_sweep(plane.spec, out / pname, workers=workers, progress=progress, stream=stream)
    return results


# ------------------------------------------------------------------ analysis
def _windows(point_dir: Path) -> pd.DataFrame | None:
    f = point_dir / "windows.csv"
    if not (point_dir / "summary.json").is_file() or not f.is_file():
        return None
    return pd.read_csv(f).set_index("window").sort_index()


def _error(point_dir: Path) -> str:
    f = point_dir / "error.json"
    if f.is_file():
        try:
            return str(json.loads(f.read_text()).get("message", "failed")).splitlines()[0]
        except (OSError, ValueError):
            return "failed"
    return "not run"


def _cell_key(row: pd.Series, cols: list[str]) -> tuple:
    return tuple(row[c] for c in cols)


def _ci_pair(ci) -> tuple[float, float]:
    return (float(ci[0]), float(ci[1])) if ci else (math.nan, math.nan)


def pim_logic_area_mm2(cfg) -> float:
    """PIM-side logic area of a platform (mm^2, all dies): the PIM units' MAC lanes, global
    buffer and result registers of every die (``hw/pim_unit.py``, the unit microarchitecture,
    which grows with the input-vector slots k) plus the AAUs and the GTS (``hw/area.py``);
    0 without PIM."""
    if not cfg.pim.enabled:
        return 0.0
    from ..hw import pim_spec as _spec
    from ..hw import pim_unit as _unit
    from ..hw.area import area_table
    t = area_table(cfg)
    rows = t[t["basis"].astype(str).str.contains("PIM die|DRAM process", regex=True) & (t["unit"] != "total")]
    unit = _unit.from_config(cfg.pim)
    per_die = _unit.area_breakdown_mm2(unit, _spec.preset(cfg.pim.preset), cfg.area)["total"]
    return float(rows["area_mm2"].sum()) + per_die * cfg.pim.ranks * cfg.pim.units_per_rank


def analyse_plane(spec: MapSpec, plane: Plane, out: Path) -> pd.DataFrame:
    """One row per (cell, decoder): the tuning chosen on the selection windows and the report
    windows' rates with intervals; ``status`` ok / does-not-fit (error text) otherwise."""
    from ..sweep.results import point_row  # noqa: F401  (the sweep folder layout)
    table = pd.read_csv(out / plane.name / "results.csv")
    sel = spec.selection_windows
    rows = []
    area_cache: dict[str, float] = {}
    for key, grp in table.groupby(plane.axis_cols, sort=False, dropna=False) if plane.axis_cols else [((), table)]:
        key = key if isinstance(key, tuple) else (key,)
        cell = dict(zip(plane.axis_cols, key))
        for _col, keys in plane.axis_keys():
            for k in keys:
                if k in grp.columns:
                    cell[k] = grp.iloc[0][k]
        for dname, dec in spec.decoders.items():
            best_t, best_sel, best_win, errors = None, -math.inf, None, []
            for tname in dec.tunings:
                hit = grp[grp["variant"] == f"{dname}{SEP}{tname}"]
                if hit.empty:
                    continue
                pdir = out / plane.name / "points" / str(hit.iloc[0]["point"])
                w = _windows(pdir)
                if w is None:
                    errors.append(_error(pdir))
                    continue
                sel_rate = pooled_rate(w.iloc[:sel], "throughput_tok_s")
                if sel_rate > best_sel:
                    best_t, best_sel, best_win = tname, sel_rate, w
            row: dict[str, Any] = {"plane": plane.name, **cell, "decoder": dname, "speculative": dec.speculative}
            if best_win is None:
                row.update(status="failed", error=errors[0] if errors else "not run")
                rows.append(row)
                continue
            rep = best_win.iloc[sel:]
            t, tci = metric_ci(rep, "throughput_tok_s")
            e, eci = metric_ci(rep, "tokens_per_j")
            pdir_key = str(grp[grp["variant"] == f"{dname}{SEP}{best_t}"].iloc[0]["point"])
            if pdir_key not in area_cache:
                from ..config.loader import load_config
                cfg = load_config(out / plane.name / "points" / pdir_key / "config.resolved.yaml")
                area_cache[pdir_key] = pim_logic_area_mm2(cfg)
            row.update(status="ok", error="", tuning=best_t, point=pdir_key, report_windows=len(rep),
                       throughput_tok_s=t, throughput_tok_s_ci95_low=_ci_pair(tci)[0], throughput_tok_s_ci95_high=_ci_pair(tci)[1],
                       tokens_per_j=e, tokens_per_j_ci95_low=_ci_pair(eci)[0], tokens_per_j_ci95_high=_ci_pair(eci)[1],
                       pim_logic_area_mm2=area_cache[pdir_key], _windows=rep)
            rows.append(row)
    return pd.DataFrame(rows)


def _paired(a: pd.DataFrame, b: pd.DataFrame, metric: str) -> tuple[float, float, float]:
    a, b = a.align(b, join="inner", axis=0)
    m, ci = paired_metric_ci(a, b, metric)
    lo, hi = _ci_pair(ci)
    return float(m), lo, hi


def cells_table(spec: MapSpec, per_decoder: pd.DataFrame, plane: Plane) -> pd.DataFrame:
    """One row per cell: best decoder, its rates, margin over the runner-up, the best speculative
    decoder against the reference, AHASD against the best, the axes changed from the base."""
    out = []
    if per_decoder.empty:
        return pd.DataFrame()
    groups = per_decoder.groupby(plane.axis_cols, sort=False, dropna=False) if plane.axis_cols \
        else [((), per_decoder)]
    for key, grp in groups:
        key = key if isinstance(key, tuple) else (key,)
        cell = dict(zip(plane.axis_cols, key))
        ok = grp[grp["status"] == "ok"].sort_values("throughput_tok_s", ascending=False)
        row: dict[str, Any] = {"plane": plane.name, **cell}
        first = grp.iloc[0]
        for _col, keys in plane.axis_keys():
            for k in keys:
                if k not in row:
                    row[k] = first.get(k)
        # changes from the map's base platform: the plane's own platform (one change: a preset),
        # then each axis whose value differs from that platform's
        changed = (["platform"] if plane.platform else []) + [
            col for col, keys in plane.axis_keys() if any(not _same(first.get(k), plane.base_values.get(k)) for k in keys)]
        row["platform"] = plane.platform or "base"
        row["changed_from_base"] = ";".join(changed)
        row["n_changed"] = len(changed)
        row["changed_from_base_label"] = "; ".join(
            (f"platform {plane.platform}" if c == "platform" else plane.labels.get(c, c)) for c in changed)
        row["decoders_failed"] = ";".join(f"{r.decoder}: {r.error}" for r in grp.itertuples() if r.status != "ok")
        if ok.empty:
            row["best_decoder"] = ""
            out.append(row)
            continue
        best = ok.iloc[0]
        row.update(best_decoder=best["decoder"], best_tuning=best["tuning"], best_throughput_tok_s=best["throughput_tok_s"],
                   best_throughput_tok_s_ci95_low=best["throughput_tok_s_ci95_low"], best_throughput_tok_s_ci95_high=best["throughput_tok_s_ci95_high"],
                   best_tokens_per_j=best["tokens_per_j"], best_tokens_per_j_ci95_low=best["tokens_per_j_ci95_low"],
                   best_tokens_per_j_ci95_high=best["tokens_per_j_ci95_high"], pim_logic_area_mm2=best["pim_logic_area_mm2"])
        row["best_decoder_label"] = spec.decoders[best["decoder"]].label
        eff = ok.sort_values("tokens_per_j", ascending=False).iloc[0]
        row["best_efficiency_decoder"] = eff["decoder"]
        if len(ok) > 1:
            run2 = ok.iloc[1]
            m, lo, hi = _paired(best["_windows"], run2["_windows"], "throughput_tok_s")
            row.update(runner_up=run2["decoder"], margin=m, margin_ci95_low=lo, margin_ci95_high=hi)
        ref = ok[ok["decoder"] == spec.reference]
        spec_ok = ok[ok["speculative"]]
        if not spec_ok.empty:
            bs = spec_ok.iloc[0]
            row["best_speculative"] = bs["decoder"]
            row["best_speculative_label"] = spec.decoders[bs["decoder"]].label
            row["best_speculative_throughput_tok_s"] = bs["throughput_tok_s"]
            if not ref.empty:
                m, lo, hi = _paired(bs["_windows"], ref.iloc[0]["_windows"], "throughput_tok_s")
                row.update(spec_vs_ref=m, spec_vs_ref_ci95_low=lo, spec_vs_ref_ci95_high=hi)
                m, lo, hi = _paired(bs["_windows"], ref.iloc[0]["_windows"], "tokens_per_j")
                row.update(spec_vs_ref_tok_j=m, spec_vs_ref_tok_j_ci95_low=lo, spec_vs_ref_tok_j_ci95_high=hi)
        if not ref.empty:
            row["reference_throughput_tok_s"] = ref.iloc[0]["throughput_tok_s"]
        ah = ok[ok["decoder"] == "ahasd"]
        if not ah.empty:
            m, lo, hi = _paired(ah.iloc[0]["_windows"], best["_windows"], "throughput_tok_s")
            row.update(ahasd_vs_best=m, ahasd_vs_best_ci95_low=lo, ahasd_vs_best_ci95_high=hi)
        row["speculation_wins"] = bool(row.get("spec_vs_ref_ci95_low", math.nan) > 1.0)
        out.append(row)
    return pd.DataFrame(out)


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _same(a, b) -> bool:
    """Whether a cell's axis value (as results.csv reads it back) is the base platform's value;
    null (a derived default) reads back as NaN."""
    if _missing(a) or _missing(b):
        return _missing(a) and _missing(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9)
    return str(a) == str(b)


def analyse(spec: MapSpec, out: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per decoder table, per cell table) over every plane that has results."""
    dec_tables, cell_tables = [], []
    for plane in spec.planes.values():
        if not (out / plane.name / "results.csv").is_file():
            continue
        per = analyse_plane(spec, plane, out)
        dec_tables.append(per)
        cell_tables.append(cells_table(spec, per, plane))
    per_decoder = pd.concat(dec_tables, ignore_index=True) if dec_tables else pd.DataFrame()
    cells = pd.concat(cell_tables, ignore_index=True) if cell_tables else pd.DataFrame()
    return per_decoder, cells


def smallest_winning_changes(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells where speculation wins with the fewest axes changed from the base platform
    (ties: all of them, largest margin first); empty when no cell wins."""
    if cells.empty or "speculation_wins" not in cells:
        return cells.iloc[0:0]
    win = cells[cells["speculation_wins"].fillna(False).astype(bool)]
    if win.empty:
        return win
    fewest = win["n_changed"].min()
    return win[win["n_changed"] == fewest].sort_values("spec_vs_ref", ascending=False)


def pareto_rows(per_decoder: pd.DataFrame) -> pd.DataFrame:
    """The (cell, decoder) rows not dominated at the interval level in (tok/s up, tok/J up, PIM
    logic area down): a row drops only when another's interval lies wholly on the better side in
    every objective (area has no interval)."""
    from ..metrics.pareto import ci_pareto_mask
    ok = per_decoder[per_decoder.get("status", pd.Series(dtype=str)) == "ok"].copy()
    if ok.empty:
        return ok
    vals = ok[["throughput_tok_s", "tokens_per_j", "pim_logic_area_mm2"]].to_numpy(dtype=float)
    half = np.column_stack([
        (ok["throughput_tok_s_ci95_high"] - ok["throughput_tok_s_ci95_low"]).to_numpy(dtype=float) / 2,
        (ok["tokens_per_j_ci95_high"] - ok["tokens_per_j_ci95_low"]).to_numpy(dtype=float) / 2,
        np.zeros(len(ok))])
    mask = ci_pareto_mask(vals, half, ["maximize", "maximize", "minimize"])
    return ok[mask]


def public(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` without the in-memory window tables."""
    return table.drop(columns=[c for c in table.columns if c.startswith("_")], errors="ignore")


# ------------------------------------------------------------------ ablation ladder
def ladder_spec(spec: MapSpec, rungs: dict[str, list[str]], cell_overrides: list[str], tag: str) -> SweepSpec:
    """A sweep of the ladder's rungs (each changes one switch from the one before) at one cell."""
    variants = [Variant(name, None, [*cell_overrides, *ovr]) for name, ovr in rungs.items()]
    return SweepSpec(name=f"{spec.name}-ladder-{tag}", source=spec.source, base_config=spec.base_config,
                     base_set=spec.base_set, variants=variants, description=spec.description,
                     raw={"base": spec.raw.get("base"), "ladder": spec.raw.get("ladder"), "cell": cell_overrides})


def ladder_table(spec: MapSpec, rungs: list[str], result_dir: Path) -> pd.DataFrame:
    """Per rung: throughput and tokens/J over the report windows, and the paired ratio to the rung
    before (the effect of the one switch it changes)."""
    table = pd.read_csv(result_dir / "results.csv")
    rows, prev = [], None
    for name in rungs:
        hit = table[table["variant"] == name]
        w = _windows(result_dir / "points" / str(hit.iloc[0]["point"])) if not hit.empty else None
        row: dict[str, Any] = {"rung": name}
        if w is None:
            row["status"] = "failed"
            row["error"] = _error(result_dir / "points" / str(hit.iloc[0]["point"])) if not hit.empty else "not run"
            rows.append(row)
            prev = None
            continue
        rep = w.iloc[spec.selection_windows:]
        t, tci = metric_ci(rep, "throughput_tok_s")
        e, eci = metric_ci(rep, "tokens_per_j")
        row.update(status="ok", throughput_tok_s=t, throughput_tok_s_ci95_low=_ci_pair(tci)[0],
                   throughput_tok_s_ci95_high=_ci_pair(tci)[1], tokens_per_j=e, tokens_per_j_ci95_low=_ci_pair(eci)[0],
                   tokens_per_j_ci95_high=_ci_pair(eci)[1])
        if prev is not None:
            m, lo, hi = _paired(rep, prev, "throughput_tok_s")
            row.update(vs_previous=m, vs_previous_ci95_low=lo, vs_previous_ci95_high=hi)
            m, lo, hi = _paired(rep, prev, "tokens_per_j")
            row.update(vs_previous_tok_j=m, vs_previous_tok_j_ci95_low=lo, vs_previous_tok_j_ci95_high=hi)
        prev = rep
        rows.append(row)
    return pd.DataFrame(rows)


def cell_overrides(spec: MapSpec, cell: pd.Series) -> list[str]:
    """The config overrides that make a plane's cell (its axes' values)."""
    from ..sweep.spec import format_value
    plane = spec.planes[cell["plane"]]
    out = []
    for _col, keys in plane.axis_keys():
        for k in keys:
            v = cell.get(k)
            if v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            if isinstance(v, np.generic):
                v = v.item()
            out.append(f"{k}={format_value(v)}")
    return out
