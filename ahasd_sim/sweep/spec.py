"""Sweep specification: a strict YAML schema and its expansion into points.

A sweep file looks like::

    name: pim_compute                 # sweep folder name (default output: sweeps/<name>/)
    description: PIM compute vs verify cap   # optional, free text
    base:                             # or just `base: ../ahasd_mobile.yaml`
      config: ../ahasd_mobile.yaml    # relative to this sweep file
      set:                            # overrides applied to every point
        run.timeline: false
        run.generated_tokens: 256
    axes:                             # dotted config key -> list of values
      pim.unit_gops_int8: [51.2, 102.4, 204.8]
      ahasd.max_verify_tokens: [8, 16, 32]
    combine: product                  # product (default) or zip over `axes`
    seeds: [0, 1]                     # run.seed values (default: the base config's seed)
    modes: [async, ahasd]             # shortcut: axis on run.mode
    policies: [adaedl, svip]          # shortcut: axis on run.policy
    model_pairs:                      # shortcut: axis on (run.draft_model, run.target_model)
      - [opt-1.3b, opt-6.7b]
      - llama2-7b/llama2-13b
    variants:                         # named bundles of overrides (an ablation ladder)
      gpu_only: {config: ../platform_laptop_rtx4090.yaml, set: {run.mode: gpu_only}}
      ahasd:    {set: {run.mode: ahasd}}

``axes`` are combined with ``combine``; ``variants``, ``model_pairs``, ``modes``,
``policies`` and ``seeds`` are always crossed (full product) with them, in that
nesting order (variants outermost, seeds innermost). An axis key may name several
config keys separated by commas (``run.draft_model,run.target_model``); its values
are then lists of that length, which keeps those keys together inside a product.

A point's identity is the hash of its fully resolved config
(:func:`ahasd_sim.output.run_identity_hash`: config + simulator code + trace file), so two combinations that resolve to the same
config share one run folder. Unknown spec keys, unknown config keys in ``axes`` or
``set`` and malformed values raise :class:`~ahasd_sim.config.errors.ConfigError`
naming the sweep file and the key. A value that is well-formed but cannot be run
(an unknown mode, a model that does not fit) is not a spec error: that point fails
on its own and the sweep goes on.
"""
from __future__ import annotations

import hashlib
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import yaml

from ..config.errors import ConfigError, InputError, did_you_mean
from ..config.loader import SimConfig, load_config

SPEC_KEYS = ("name", "description", "base", "axes", "combine", "seeds", "modes", "policies",
             "model_pairs", "variants")
BASE_KEYS = ("config", "set")
VARIANT_KEYS = ("config", "set")
COMBINE = ("product", "zip")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

#: column names of the shortcut axes in the results table
VARIANT_COL = "variant"
MODEL_PAIR_COL = "model_pair"
SEED_COL = "seed"


@dataclass
class Axis:
    """One dimension of the sweep: ``keys`` (dotted config keys) and the value tuples."""

    name: str                      # column name in results.csv
    keys: tuple[str, ...]          # config keys set by this axis (empty for variants)
    values: list[tuple]            # one tuple per level, len == len(keys)
    labels: list[Any]              # what results.csv shows for each level


@dataclass
class Variant:
    name: str
    config: Path | None
    overrides: list[str]


@dataclass
class Point:
    """One simulation of the sweep."""

    index: int
    labels: dict[str, Any]                 # results.csv column -> value
    config_path: Path
    overrides: list[str]                   # base.set + variant.set + axes, in that order
    seed: int | None
    config: SimConfig | None = None        # resolved config (None if it did not resolve)
    hash: str | None = None                # run_identity_hash(config), or "invalid-<sha>" if unresolved
    error: BaseException | None = None     # config resolution error (the point fails)

    @property
    def valid(self) -> bool:
        return self.error is None and self.hash is not None


@dataclass
class SweepSpec:
    name: str
    source: Path
    base_config: Path
    base_set: list[str]
    axes: list[Axis] = field(default_factory=list)
    shortcut_axes: list[Axis] = field(default_factory=list)   # model_pairs, modes, policies
    combine: str = "product"
    seeds: list[int] | None = None
    variants: list[Variant] = field(default_factory=list)
    description: str = ""
    raw: dict = field(default_factory=dict)

    def axis_columns(self) -> list[str]:
        cols: list[str] = []
        if self.variants:
            cols.append(VARIANT_COL)
        for ax in [*self.shortcut_axes, *self.axes]:
            for c in ([ax.name] if ax.name not in ax.keys else []) + list(ax.keys):
                if c not in cols:
                    cols.append(c)
        return cols


# ------------------------------------------------------------------ helpers
def format_value(value: Any) -> str:
    """YAML text of ``value`` that the config loader's ``--set`` parser reads back unchanged."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    if text.endswith("\n..."):
        text = text[: -len("\n...")].strip()
    elif text.endswith("..."):
        text = text[:-3].strip()
    return text


def _override(key: str, value: Any) -> str:
    return f"{key}={format_value(value)}"


def _err(src: Path, key: str, msg: str) -> ConfigError:
    return ConfigError(str(src), key, msg)


def check_keys(src: Path, where: str, data: dict, allowed: tuple[str, ...]) -> None:
    """One-line error for the first key of the mapping ``data`` (at ``where`` of ``src``) not in ``allowed``."""
    for k in data:
        if k not in allowed:
            path = f"{where}.{k}" if where else str(k)
            raise _err(src, path, f"unknown key{did_you_mean(str(k), allowed)}; valid keys: {', '.join(allowed)}")


def dotted_keys(tree: dict, prefix: str = "") -> list[str]:
    """Every key path of a nested mapping, sections included: {"a": {"b": 1}} -> ["a", "a.b"]."""
    out = []
    for k, v in tree.items():
        path = f"{prefix}{k}"
        out.append(path)
        if isinstance(v, dict):
            out.extend(dotted_keys(v, path + "."))
    return out


def check_config_key(src: Path, where: str, key: str, known: set[str]) -> None:
    """One-line error (with a did-you-mean) unless ``key`` is a dotted config key in ``known``."""
    if not isinstance(key, str) or not key or any(not p for p in key.split(".")):
        raise _err(src, where, f"expected a dotted config key such as pim.ranks, got {key!r}")
    if key not in known:
        leaves = sorted(known)
        # Suggest among keys of the same section first, then among all.
        section = key.split(".")[0]
        same = [k for k in leaves if k.startswith(section + ".")]
        hint = did_you_mean(key, same) or did_you_mean(key, leaves)
        raise _err(src, where, f"unknown config key '{key}'{hint}")


def check_not_section(src: Path, where: str, key: str, values: list, known: set[str]) -> None:
    """A key that names a whole section (``npu``) takes mappings only: a plain value there fails
    every point it reaches, so it is the sweep file's error (exit 2) before anything runs."""
    children = sorted(k for k in known if k.startswith(key + ".") and "." not in k[len(key) + 1:])
    if children and not all(isinstance(v, dict) for v in values):
        raise _err(src, where, f"'{key}' is a section, not a value: name one of its keys, e.g. {children[0]}")


def parse_set(src: Path, where: str, data: Any, known: set[str]) -> list[str]:
    """``set:`` as a mapping {dotted.key: value} or a list of "key=value" strings."""
    if data is None:
        return []
    out: list[str] = []
    if isinstance(data, dict):
        for k, v in data.items():
            check_config_key(src, f"{where}.{k}", k, known)
            check_not_section(src, f"{where}.{k}", k, [v], known)
            out.append(_override(k, v))
    elif isinstance(data, list):
        for i, item in enumerate(data):
            if not isinstance(item, str) or "=" not in item:
                raise _err(src, f"{where}[{i}]", f"expected 'key=value', got {item!r}")
            k = item.partition("=")[0].strip()
            check_config_key(src, f"{where}[{i}]", k, known)
            out.append(item)
    else:
        raise _err(src, where, f"expected a mapping of dotted keys to values, got {type(data).__name__}")
    return out


def _set_keys(overrides: list[str]) -> set[str]:
    return {o.partition("=")[0].strip() for o in overrides}


def _str_list(src: Path, key: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not value:
        raise _err(src, key, "expected a non-empty list")
    for i, v in enumerate(value):
        if not isinstance(v, str) or not v:
            raise _err(src, f"{key}[{i}]", f"expected a name, got {v!r}")
    return list(value)


def _parse_model_pairs(src: Path, value: Any) -> Axis:
    if not isinstance(value, list) or not value:
        raise _err(src, "model_pairs", "expected a non-empty list of [draft, target] pairs")
    vals: list[tuple] = []
    for i, item in enumerate(value):
        where = f"model_pairs[{i}]"
        if isinstance(item, str) and item.count("/") == 1:
            d, t = (s.strip() for s in item.split("/"))
        elif isinstance(item, (list, tuple)) and len(item) == 2:
            d, t = item
        elif isinstance(item, dict):
            check_keys(src, where, item, ("draft", "target"))
            if "draft" not in item or "target" not in item:
                raise _err(src, where, "expected both 'draft' and 'target'")
            d, t = item["draft"], item["target"]
        else:
            raise _err(src, where, f"expected [draft, target], 'draft/target' or {{draft:, target:}}, got {item!r}")
        if not (isinstance(d, str) and d and isinstance(t, str) and t):
            raise _err(src, where, f"model names must be strings, got {item!r}")
        vals.append((d, t))
    return Axis(MODEL_PAIR_COL, ("run.draft_model", "run.target_model"), vals, [f"{d}/{t}" for d, t in vals])


def _parse_axes(src: Path, value: Any, known: set[str]) -> list[Axis]:
    if value is None:
        return []
    if not isinstance(value, dict):
        raise _err(src, "axes", f"expected a mapping of dotted keys to lists of values, got {type(value).__name__}")
    axes = []
    for name, levels in value.items():
        where = f"axes.{name}"
        if not isinstance(name, str):
            raise _err(src, where, "axis names must be dotted config keys")
        keys = tuple(k.strip() for k in name.split(","))
        for k in keys:
            check_config_key(src, where, k, known)
        if len(set(keys)) != len(keys):
            raise _err(src, where, "a key appears twice in one axis")
        if not isinstance(levels, list) or not levels:
            raise _err(src, where, "expected a non-empty list of values")
        vals: list[tuple] = []
        for i, lv in enumerate(levels):
            if len(keys) == 1:
                vals.append((lv,))
            else:
                if not isinstance(lv, (list, tuple)) or len(lv) != len(keys):
                    raise _err(src, f"{where}[{i}]", f"expected a list of {len(keys)} values (one per key), got {lv!r}")
                vals.append(tuple(lv))
        for j, k in enumerate(keys):
            check_not_section(src, where, k, [v[j] for v in vals], known)
        labels = [v[0] if len(keys) == 1 else "/".join(format_value(x) for x in v) for v in vals]
        axes.append(Axis(name if len(keys) > 1 else keys[0], keys, vals, labels))
    return axes


def parse_axes(src: Path, value: Any, known: set[str]) -> list[Axis]:
    """The ``axes:`` mapping of a sweep-like file (also a speculation map's plane), strictly checked."""
    return _parse_axes(src, value, known)


def parse_model_pairs(src: Path, value: Any) -> Axis:
    """The ``model_pairs:`` shortcut of a sweep-like file, as an axis."""
    return _parse_model_pairs(src, value)


def _parse_variants(src: Path, value: Any, known: set[str]) -> list[Variant]:
    if value is None:
        return []
    items: list[tuple[str, Any]]
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        items = []
        for i, v in enumerate(value):
            if not isinstance(v, dict) or "name" not in v:
                raise _err(src, f"variants[{i}]", "expected a mapping with 'name' (and 'config' and/or 'set')")
            v = dict(v)
            items.append((v.pop("name"), v))
    else:
        raise _err(src, "variants", "expected a mapping name -> {config:, set:} or a list of {name:, config:, set:}")
    if not items:
        raise _err(src, "variants", "expected at least one variant")
    out = []
    seen = set()
    for name, body in items:
        where = f"variants.{name}"
        if not isinstance(name, str) or not name:
            raise _err(src, "variants", f"variant names must be non-empty strings, got {name!r}")
        if name in seen:
            raise _err(src, where, "duplicate variant name")
        seen.add(name)
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise _err(src, where, f"expected a mapping with 'config' and/or 'set', got {body!r}")
        check_keys(src, where, body, VARIANT_KEYS)
        cfg = None
        if body.get("config") is not None:
            if not isinstance(body["config"], str):
                raise _err(src, f"{where}.config", "expected a file name")
            cfg = (src.parent / body["config"])
            if not cfg.is_file():
                raise _err(src, f"{where}.config", f"config file '{body['config']}' not found (looked in {src.parent})")
        out.append(Variant(name, cfg, parse_set(src, f"{where}.set", body.get("set"), known)))
    return out


# ------------------------------------------------------------------ loading
def read_spec_header(path: str | Path, what: str, top_keys: tuple[str, ...]):
    """The common head of sweep and study files, strictly validated: ``(source path, raw
    mapping, name, description, base mapping, base config path, loaded base SimConfig)``."""
    from ..config import yamlio
    from ..paths import resolve_input_file
    src = resolve_input_file(path)
    if not src.is_file() and not src.is_dir():
        raise _err(src, "", f"{what} not found")
    raw = yamlio.load_file(src, what)
    if not isinstance(raw, dict):
        raise _err(src, "", "expected a mapping at the top level")
    check_keys(src, "", raw, top_keys)

    name = raw.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise _err(src, "name", f"expected a folder-safe name (letters, digits, _ . -), got {name!r}")
    desc = raw.get("description") or ""
    if not isinstance(desc, str):
        raise _err(src, "description", "expected a string")

    base = raw.get("base")
    if base is None:
        raise _err(src, "base", f"required: the base config file (relative to the {what})")
    if isinstance(base, str):
        base = {"config": base}
    if not isinstance(base, dict):
        raise _err(src, "base", "expected a file name or a mapping with 'config' and optional 'set'")
    check_keys(src, "base", base, BASE_KEYS)
    if not isinstance(base.get("config"), str):
        raise _err(src, "base.config", "required: a config file name")
    base_cfg = src.parent / base["config"]
    if not base_cfg.is_file():
        raise _err(src, "base.config", f"config file '{base['config']}' not found (looked in {src.parent})")
    try:
        plain = load_config(base_cfg)
    except InputError as exc:
        raise _err(src, "base.config", f"cannot load: {exc}") from None
    return src, raw, name, desc, base, base_cfg, plain


def load_sweep_spec(path: str | Path) -> SweepSpec:
    """Read and strictly validate a sweep YAML file."""
    src, raw, name, desc, base, base_cfg, plain_cfg = read_spec_header(path, "sweep file", SPEC_KEYS)
    plain = plain_cfg.to_dict()
    known = set(dotted_keys(plain))
    base_set = parse_set(src, "base.set", base.get("set"), known)

    combine = raw.get("combine", "product")
    if combine not in COMBINE:
        raise _err(src, "combine", f"expected one of {', '.join(COMBINE)}, got {combine!r}"
                   + (did_you_mean(str(combine), COMBINE) if isinstance(combine, str) else ""))
    axes = _parse_axes(src, raw.get("axes"), known)
    if combine == "zip" and axes:
        lens = {len(a.values) for a in axes}
        if len(lens) > 1:
            detail = ", ".join(f"{a.name}: {len(a.values)}" for a in axes)
            raise _err(src, "combine", f"zip needs axes of equal length ({detail})")

    shortcut_axes: list[Axis] = []
    if "model_pairs" in raw:
        shortcut_axes.append(_parse_model_pairs(src, raw["model_pairs"]))
    if "modes" in raw:
        vals = _str_list(src, "modes", raw["modes"])
        shortcut_axes.append(Axis("run.mode", ("run.mode",), [(v,) for v in vals], vals))
    if "policies" in raw:
        vals = _str_list(src, "policies", raw["policies"])
        shortcut_axes.append(Axis("run.policy", ("run.policy",), [(v,) for v in vals], vals))

    seeds = raw.get("seeds")
    if seeds is not None:
        if (not isinstance(seeds, list) or not seeds
                or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)):
            raise _err(src, "seeds", f"expected a non-empty list of integers >= 0, got {seeds!r}")
        if len(set(seeds)) != len(seeds):
            raise _err(src, "seeds", "duplicate seed")

    variants = _parse_variants(src, raw.get("variants"), known)

    # Each config key may be driven by one axis only; variants may not set an axis key.
    owner: dict[str, str] = {}
    all_axes = shortcut_axes + axes
    for ax in all_axes:
        for k in ax.keys:
            if k in owner:
                raise _err(src, f"axes.{ax.name}" if ax in axes else ax.name, f"config key '{k}' is swept twice "
                           f"(also by '{owner[k]}')")
            owner[k] = ax.name
    if seeds is not None and "run.seed" in owner:
        raise _err(src, "seeds", "run.seed is also an axis; use one of them")
    for v in variants:
        clash = sorted(_set_keys(v.overrides) & set(owner))
        if clash:
            raise _err(src, f"variants.{v.name}.set", f"'{clash[0]}' is also swept by '{owner[clash[0]]}'; "
                       "a key is either in a variant or on an axis")

    spec = SweepSpec(name=name, source=src, base_config=base_cfg, base_set=base_set, axes=axes,
                     shortcut_axes=shortcut_axes, combine=combine, seeds=seeds, variants=variants,
                     description=desc, raw=raw)
    return spec


# ------------------------------------------------------------------ expansion
def _axis_levels(spec: SweepSpec) -> list[list[tuple[dict, list[str]]]]:
    """Per dimension, the levels as (labels, overrides)."""
    dims: list[list[tuple[dict, list[str]]]] = []

    def levels_of(ax: Axis) -> list[tuple[dict, list[str]]]:
        out = []
        for vals, label in zip(ax.values, ax.labels):
            labels = {}
            if ax.name not in ax.keys:
                labels[ax.name] = label
            for k, v in zip(ax.keys, vals):
                labels[k] = v
            out.append((labels, [_override(k, v) for k, v in zip(ax.keys, vals)]))
        return out

    for ax in spec.shortcut_axes:
        dims.append(levels_of(ax))
    if spec.axes:
        per_axis = [levels_of(ax) for ax in spec.axes]
        if spec.combine == "zip":
            combos = zip(*per_axis)
        else:
            combos = itertools.product(*per_axis)
        merged = []
        for combo in combos:
            labels: dict = {}
            ovr: list[str] = []
            for lab, o in combo:
                labels.update(lab)
                ovr.extend(o)
            merged.append((labels, ovr))
        dims.append(merged)
    return dims


def count_points(spec: SweepSpec) -> int:
    """Number of points of the sweep, without resolving any (cheap, for huge specs too)."""
    n = max(1, len(spec.variants))
    for ax in spec.shortcut_axes:
        n *= len(ax.values)
    if spec.axes:
        if spec.combine == "zip":
            n *= len(spec.axes[0].values)
        else:
            for ax in spec.axes:
                n *= len(ax.values)
    return n * (len(spec.seeds) if spec.seeds is not None else 1)


def expand(spec: SweepSpec) -> list[Point]:
    """All points of the sweep, in order, with resolved configs and hashes."""
    return list(iter_points(spec))


def iter_points(spec: SweepSpec, keep_config: bool = True) -> Iterator[Point]:
    """The points of the sweep, in order, resolved one at a time (a large sweep never holds
    every resolved config in memory; with ``keep_config=False`` only the hash is kept and a
    worker resolves the config again from ``config_path``, ``overrides`` and ``seed``).

    A point whose config does not resolve (a value out of range, a wrong type) gets
    ``error`` set and a ``hash`` of the form ``invalid-<sha>`` (from its overrides)."""
    variants = spec.variants or [Variant("", None, [])]
    dims = _axis_levels(spec)
    seeds: list[int | None] = list(spec.seeds) if spec.seeds is not None else [None]
    base_cache: dict[Path, SimConfig | BaseException] = {}
    index = 0
    for var in variants:
        cfg_path = var.config or spec.base_config
        for combo in itertools.product(*dims) if dims else [()]:
            labels: dict[str, Any] = {}
            if spec.variants:
                labels[VARIANT_COL] = var.name
            ovr = list(spec.base_set) + list(var.overrides)
            for lab, o in combo:
                labels.update(lab)
                ovr.extend(o)
            for seed in seeds:
                pt = Point(index=index, labels=dict(labels), config_path=cfg_path, overrides=ovr, seed=seed)
                index += 1
                _resolve(pt, base_cache, str(spec.source) if spec.source else None)
                shown = seed
                if pt.config is not None:
                    shown = pt.config.run.seed
                elif seed is None and isinstance(base_cache.get(cfg_path), SimConfig):
                    shown = base_cache[cfg_path].run.seed
                pt.labels[SEED_COL] = shown
                if not keep_config:
                    pt.config = None
                yield pt


def resolve_point_config(config_path: Path, overrides: list[str], seed: int | None,
                         cache: dict | None = None, source: str | None = None) -> SimConfig:
    """The resolved config of one point (raises InputError when it does not resolve).
    ``source``: the sweep file, which errors about the point's overrides then name (they come
    from its base, axes, variants and seeds, not from the config file)."""
    cache = _WORKER_CACHE if cache is None else cache
    if config_path not in cache:
        try:
            cache[config_path] = load_config(config_path)
        except InputError as exc:
            cache[config_path] = exc
    base = cache[config_path]
    if isinstance(base, BaseException):
        raise base
    extra = [f"run.seed={int(seed)}"] if seed is not None else []
    cfg = base.replace([*overrides, *extra], source=source)
    cfg.source_file = str(config_path)
    return cfg


_WORKER_CACHE: dict = {}


def _resolve(pt: Point, cache: dict, source: str | None = None) -> None:
    from ..output import run_identity_hash
    try:
        cfg = resolve_point_config(pt.config_path, pt.overrides, pt.seed, cache, source)
        pt.config = cfg
        pt.hash = run_identity_hash(cfg)
    except InputError as exc:
        pt.error = exc
        key = "\n".join([str(pt.config_path), *pt.overrides, f"seed={pt.seed}"])
        pt.hash = "invalid-" + hashlib.sha256(key.encode()).hexdigest()[:12]


def spec_identity(spec: SweepSpec) -> str:
    """sha256 (12 hex) of what defines the sweep's points: the parsed spec file (comments and
    formatting do not count) and the effective base overrides, axes, variants and seeds (a
    script may add overrides)."""
    parts = [yaml.safe_dump(spec.raw, sort_keys=True), spec.name, repr(spec.base_set),
             str(spec.base_config.name), spec.combine, repr(spec.seeds),
             repr([(a.name, a.keys, a.values) for a in [*spec.shortcut_axes, *spec.axes]]),
             repr([(v.name, v.config.name if v.config else None, v.overrides) for v in spec.variants])]
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:12]
