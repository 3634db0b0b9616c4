"""YAML config loading: ``extends`` (deep merge), ``--set`` overrides, strict typed build.

The resolved config is a :class:`SimConfig` whose sections are the dataclasses
registered with :func:`~ahasd_sim.config.registry.config_section`. Anything that
is not in the schema, has the wrong type or is out of range raises
:class:`~ahasd_sim.config.errors.ConfigError` naming the file and dotted key.
"""
from __future__ import annotations

import copy
import dataclasses
import importlib
import math
import pickle
import types
import typing
from pathlib import Path
from typing import Any, Iterable

import yaml

from ..memo import BoundedMemo
from . import yamlio
from .errors import ConfigError, did_you_mean
from .registry import SECTIONS

# Modules that declare config sections; importing them fills SECTIONS.
_SECTION_MODULES = (
    "ahasd_sim.config.run",
    "ahasd_sim.hw",
    "ahasd_sim.modes",
    "ahasd_sim.policies",
)

OVERRIDE_SOURCE = "--set"


def _ensure_sections() -> dict[str, type]:
    """All registered sections in a canonical order (``run`` first, then by name), so resolved
    configs, their hashes and the reference do not depend on module import order."""
    for mod in _SECTION_MODULES:
        importlib.import_module(mod)
    names = sorted(SECTIONS, key=lambda n: (n != "run", n))
    return {n: SECTIONS[n] for n in names}


class SimConfig:
    """The fully resolved configuration of one run: one attribute per section."""

    def __init__(self, sections: dict[str, Any], source_file: str, provenance: dict[str, str] | None = None):
        self._sections = sections
        self.source_file = source_file
        # dotted key -> where it was set (a file or ``--set``), so errors found after the build
        # (a trace too short, a mode's option) blame the place that set the key
        self._provenance = dict(provenance or {})

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_sections"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __getstate__(self) -> dict[str, Any]:
        # the remembered fingerprint stays behind (7.6 kB: it would almost double what a sweep
        # sends a worker per unit); the copy makes it again if asked
        state = dict(self.__dict__)
        state.pop("_fingerprint", None)
        return state

    def source_of(self, key: str) -> str:
        """Where ``key`` (``run.trace_start_prompt``, ``hyco``) was set: ``--set``, the file that
        set it, or the run's config file for defaults."""
        return _source_of(self._provenance, key) or self.source_file

    def section_names(self) -> list[str]:
        return list(self._sections)

    def to_dict(self) -> dict[str, Any]:
        return {name: _to_plain(sec) for name, sec in self._sections.items()}

    def fingerprint(self) -> str:
        """Every value of the config as one deterministic text (the sections' dataclass reprs
        show every field), e.g. to key caches; a fifth of the time of ``repr(to_dict())``.
        Made once per config object: a config is a value, never changed once built (a change
        is a new config: :meth:`replace`, ``dataclasses.replace`` of a section), and every
        window of a run and its cost tables ask for it (1.5% of a sweep point made it anew)."""
        fp = self.__dict__.get("_fingerprint")
        if fp is None:
            fp = self.__dict__["_fingerprint"] = repr(sorted(self._sections.items()))
        return fp

    def replace(self, overrides: Iterable[str], source: str | None = OVERRIDE_SOURCE) -> "SimConfig":
        """A new config with dotted ``key=value`` overrides applied; errors about them name
        ``source`` (None: the simulator's own choice, the key keeps the source it had)."""
        tree = self.to_dict()
        prov: dict[str, str] = dict(self._provenance)
        for item in overrides:
            _apply_override(tree, item, prov, source)
        return build_config(tree, prov, self.source_file)


def _to_plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj):
        return {f.name: _to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {k: _to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_to_plain(v) for v in obj]
    return obj


# ---------------------------------------------------------------- YAML + extends
def _read_yaml(path: Path) -> dict[str, Any]:
    data = yamlio.load_file(path, "file")
    if data is None:
        # an empty (or comments-only) file is refused, not run with every default: it is almost
        # always a wrong file name or an unsaved editor buffer; `{}` says "defaults" on purpose
        raise ConfigError(str(path), "", "holds no settings (empty or only comments); give at least "
                          "`extends: FILE` or one section, or `{}` for every default (see python -m "
                          "ahasd_sim config-reference)")
    if not isinstance(data, dict):
        raise ConfigError(str(path), "", f"expected a mapping at the top level, got {type(data).__name__}")
    return data


def _deep_merge(base: dict, over: dict, prov: dict[str, str], source: str, prefix: str = "") -> dict:
    out = dict(base)
    for key, value in over.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value, prov, source, path + ".")
        else:
            out[key] = copy.deepcopy(value)
            _mark(prov, path, value, source)
    return out


def _mark(prov: dict[str, str], path: str, value: Any, source: str) -> None:
    prov[path] = source
    if isinstance(value, dict):
        for k, v in value.items():
            _mark(prov, f"{path}.{k}", v, source)


def load_tree(path: str | Path, _chain: tuple[Path, ...] = ()) -> tuple[dict, dict[str, str]]:
    """Read ``path`` following ``extends``; return (merged tree, key -> source file)."""
    path = Path(path)
    try:
        resolved = path.resolve()
    except (RuntimeError, OSError) as exc:     # a symlink loop before Python 3.13 (3.13's resolve()
        # passes over a loop: yamlio.read_text then names it)
        raise ConfigError(str(path), "", f"cannot be opened: symlink loop or unreadable path ({exc})") from None
    if resolved in _chain:
        cycle = " -> ".join(str(p) for p in (*_chain, resolved))
        raise ConfigError(str(path), "extends", f"circular extends: {cycle}")
    data = _read_yaml(path)
    parents = data.pop("extends", None)
    tree: dict = {}
    prov: dict[str, str] = {}
    if parents is not None:
        if isinstance(parents, str):
            parents = [parents]
        if not isinstance(parents, list) or not all(isinstance(p, str) for p in parents):
            raise ConfigError(str(path), "extends", "expected a file name or a list of file names")
        for parent in parents:
            ppath = (path.parent / parent)
            if not ppath.is_file():
                raise ConfigError(str(path), "extends", f"parent config '{parent}' not found (looked in {path.parent})")
            ptree, pprov = load_tree(ppath, (*_chain, resolved))
            tree = _deep_merge(tree, ptree, prov, "")
            prov.update(pprov)
    tree = _deep_merge(tree, data, prov, str(path))
    return tree, prov


# ---------------------------------------------------------------- overrides
def _apply_override(tree: dict, item: str, prov: dict[str, str], source: str | None = OVERRIDE_SOURCE) -> None:
    if "=" not in item:
        raise ConfigError(OVERRIDE_SOURCE, item, "expected KEY=VALUE, e.g. --set npu.freq_ghz=1.2")
    key, _, raw = item.partition("=")
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(OVERRIDE_SOURCE, key, "expected a dotted key such as npu.freq_ghz")
    try:
        value = yamlio.loads(raw, OVERRIDE_SOURCE, key) if raw.strip() else ""
    except ConfigError as exc:
        if "duplicate key" in exc.message or "nested too deeply" in exc.message:
            raise
        value = raw   # not YAML: the typed build reports it as a string where a number was expected
    node = tree
    parts = key.split(".")
    for part in parts[:-1]:
        nxt = node.get(part)
        if nxt is None:
            nxt = node[part] = {}
        if not isinstance(nxt, dict):
            raise ConfigError(OVERRIDE_SOURCE, key, f"'{part}' is a value, not a section")
        node = nxt
    if isinstance(node.get(parts[-1]), dict) and not isinstance(value, dict):
        raise ConfigError(OVERRIDE_SOURCE, key, f"is a section, not a value: set one of its keys, e.g. "
                          f"{key}.{next(iter(node[parts[-1]]), 'KEY')}=...")
    node[parts[-1]] = value
    if source is not None:
        _mark(prov, key, value, source)


# ---------------------------------------------------------------- typed build
_NONE = type(None)


def _type_name(tp: Any) -> str:
    if tp is float:
        return "a number"
    if tp is int:
        return "an integer"
    if tp is bool:
        return "true or false"
    if tp is str:
        return "a string"
    origin = typing.get_origin(tp)
    if origin in (list, tuple):
        return "a list"
    if origin is dict:
        return "a mapping"
    if dataclasses.is_dataclass(tp):
        return "a mapping (section)"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if tp is _NONE:
        return "null"
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, key: str, prov: dict[str, str]) -> Any:
    src = _source_of(prov, key)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and _NONE in args:
            return None
        errors = []
        for arg in args:
            if arg is _NONE:
                continue
            try:
                return _coerce(value, arg, key, prov)
            except ConfigError as exc:
                errors.append(exc)
        raise ConfigError(src, key, f"expected {_type_name(tp)}, got {value!r}")
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(src, key, f"expected a mapping (section), got {value!r}")
        return _build_dataclass(tp, value, key + ".", prov)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(src, key, f"expected true or false, got {value!r}")
    if tp is int:
        if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 63:
            value = int(value)   # 1e3 written for an integer: scientific notation is a float in YAML
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(src, key, f"expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(src, key, f"expected a number, got {value!r}")
        if not math.isfinite(float(value)):
            raise ConfigError(src, key, f"expected a finite number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(src, key, f"expected a string, got {value!r}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(src, key, f"expected a list, got {value!r}")
        (item_tp, *_rest) = typing.get_args(tp) or (Any,)
        items = [_coerce(v, item_tp, f"{key}[{i}]", prov) for i, v in enumerate(value)]
        return items if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(src, key, f"expected a mapping, got {value!r}")
        _ktp, vtp = typing.get_args(tp) or (str, Any)
        return {str(k): _coerce(v, vtp, f"{key}.{k}", prov) for k, v in value.items()}
    return value


def _source_of(prov: dict[str, str], key: str) -> str:
    """Where the value at ``key`` (``a.b.c``, ``a.b[2]``) was set: the nearest key on its path
    that a file or ``--set`` gave."""
    k = key
    while k:
        if k in prov:
            return prov[k]
        k = k[:k.rindex("[")] if k.endswith("]") and "[" in k else k.rpartition(".")[0]
    return prov.get("", "")


def _source_of_section(prov: dict[str, str], section: str) -> str:
    """Where the values a whole (sub)section's check reads were set: the sources of the keys
    set in it (``FILE + --set`` when both set some), else where the section itself was set."""
    inner = (section + ".", section + "[")
    sources = list(dict.fromkeys(src for k, src in prov.items() if k == section or k.startswith(inner)))
    return " + ".join(sources) if sources else _source_of(prov, section)


def _check_range(value: Any, meta: dict, key: str, prov: dict[str, str]) -> None:
    if value is None:
        return
    src = _source_of(prov, key)
    choices = meta.get("choices")
    if choices is not None and value not in choices:
        raise ConfigError(src, key, f"expected one of {', '.join(map(str, choices))}, got {value!r}"
                          + (did_you_mean(str(value), map(str, choices)) if isinstance(value, str) else ""))
    if isinstance(value, (list, tuple)) and meta.get("length") is not None:
        lo, hi = meta["length"]
        if not lo <= len(value) <= hi:
            want = f"{lo} item(s)" if lo == hi else f"{lo} to {hi} items"
            raise ConfigError(src, key, f"expected a list of {want}, got {len(value)}: {list(value)!r}")
        for i, v in enumerate(value):
            if meta.get("item_choices") is not None and v not in meta["item_choices"]:
                raise ConfigError(src, f"{key}[{i}]", f"expected one of {', '.join(map(str, meta['item_choices']))}, "
                                  f"got {v!r}")
            if meta.get("item_ge") is not None and v < meta["item_ge"]:
                raise ConfigError(src, f"{key}[{i}]", f"expected >= {meta['item_ge']:g}, got {v}")
            if meta.get("item_le") is not None and v > meta["item_le"]:
                raise ConfigError(src, f"{key}[{i}]", f"expected <= {meta['item_le']:g}, got {v}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        unit = f" {meta['unit']}" if meta.get("unit") else ""
        why = f" ({meta['bound_reason']})" if meta.get("bound_reason") else ""
        low = f" ({meta['low_reason']})" if meta.get("low_reason") else ""
        if meta.get("ge") is not None and value < meta["ge"]:
            raise ConfigError(src, key, f"expected >= {meta['ge']}{unit}, got {value}{low}")
        if meta.get("gt") is not None and value <= meta["gt"]:
            raise ConfigError(src, key, f"expected > {meta['gt']}{unit}, got {value}{low}")
        if meta.get("le") is not None and value > meta["le"]:
            raise ConfigError(src, key, f"expected <= {meta['le']}{unit}, got {value}{why}")
        if meta.get("lt") is not None and value >= meta["lt"]:
            raise ConfigError(src, key, f"expected < {meta['lt']}{unit}, got {value}{why}")


_CLASS_SHAPES: dict[type, tuple[dict, dict]] = {}


def _class_shape(cls: type) -> tuple[dict, dict]:
    """(init fields by name, resolved type hints) of a config dataclass, once per class: resolving
    the hints (``typing.get_type_hints``) was a third of every config build, and a sweep builds one
    config per point."""
    shape = _CLASS_SHAPES.get(cls)
    if shape is None:
        shape = _CLASS_SHAPES[cls] = ({f.name: f for f in dataclasses.fields(cls) if f.init},
                                      typing.get_type_hints(cls))
    return shape


def _build_dataclass(cls: type, data: dict, prefix: str, prov: dict[str, str]) -> Any:
    fields, hints = _class_shape(cls)
    for key in data:
        if key not in fields:
            raise ConfigError(_source_of(prov, prefix + str(key)), prefix + str(key),
                              f"unknown key{did_you_mean(str(key), fields)}; valid keys: {', '.join(sorted(fields))}")
    kwargs = {}
    for name, f in fields.items():
        key = prefix + name
        if name in data:
            value = _coerce(data[name], hints[name], key, prov)
        elif f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            value = f.default_factory()  # type: ignore[misc]
        elif dataclasses.is_dataclass(hints[name]):
            value = _build_dataclass(hints[name], {}, key + ".", prov)
        else:
            raise ConfigError(_source_of(prov, prefix.rstrip(".")), key, "required key is missing")
        _check_range(value, dict(f.metadata), key, prov)
        kwargs[name] = value
    try:
        obj = cls(**kwargs)
    except (ValueError, TypeError) as exc:
        raise ConfigError(_source_of_section(prov, prefix.rstrip(".")), prefix.rstrip("."), str(exc)) from None
    validate = getattr(obj, "validate", None)
    if callable(validate):
        try:
            validate()
        except ConfigError:
            raise
        except ValueError as exc:
            raise ConfigError(_source_of_section(prov, prefix.rstrip(".")), prefix.rstrip("."), str(exc)) from None
    return obj


def build_config(tree: dict, prov: dict[str, str], source_file: str) -> SimConfig:
    sections = _ensure_sections()
    for key in tree:
        if key not in sections:
            raise ConfigError(_source_of_section(prov, key) or source_file, key,
                              f"unknown section{did_you_mean(key, sections)}; valid sections: {', '.join(sorted(sections))}")
    built = {}
    for name, cls in sections.items():
        data = tree.get(name) or {}
        if not isinstance(data, dict):
            raise ConfigError(_source_of(prov, name) or source_file, name, f"expected a mapping (section), got {data!r}")
        # A section is a pure function of its values (where they were set only words the errors),
        # so one built before from the same values is unpickled: a fresh object in the same
        # state, a sixteenth of a build; a sweep's or study's points share most sections.
        key = f"{cls.__module__}.{cls.__qualname__}={data!r}"
        state = _SECTION_PICKLES.get(key)
        if state is not None:
            built[name] = pickle.loads(state)
            continue
        built[name] = _build_dataclass(cls, data, name + ".", prov)
        try:
            state = pickle.dumps(built[name], protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):   # pragma: no cover - plain data
            continue
        _SECTION_PICKLES.put(key, state)
    return SimConfig(built, source_file, prov)


# Built sections by their values (build_config), pickled: each hit is a new object.
_SECTION_PICKLES: BoundedMemo = BoundedMemo(1024)


def load_config(path: str | Path, overrides: Iterable[str] = (), seed: int | None = None) -> SimConfig:
    """Load ``path`` (following ``extends``), apply ``--set`` overrides and an optional seed."""
    from ..paths import resolve_input_file
    path = resolve_input_file(path)
    tree, prov = load_tree(path)
    overrides = list(overrides)
    for item in overrides:
        _apply_override(tree, item, prov)
    if seed is not None:
        run = tree.get("run") if isinstance(tree.get("run"), dict) else {}
        if prov.get("run.seed") == OVERRIDE_SOURCE and run.get("seed") != seed:
            raise ConfigError("--seed", "run.seed", f"--seed {seed} conflicts with --set run.seed={run.get('seed')!r}; "
                              "give only one of them")
        _apply_override(tree, f"run.seed={int(seed)}", prov)
    # Every key without a recorded source came from the named file.
    prov.setdefault("", str(path))
    return build_config(tree, prov, str(path))


# libyaml's emitter writes what PyYAML's pure-Python one writes for a config tree (same safe
# representer; tests/test_config.py compares both on every shipped config) about 4x faster: a
# sweep dumps every point's config to hash it.
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


# YAML of one top-level section by its dataclass repr (every field's value, as
# SimConfig.fingerprint uses it): a block mapping's text is its keys' texts one after another, so
# a config's YAML is its sections' YAML joined, and a sweep's or study's points share most
# sections. Bounded: cleared when full (a study touches few distinct sections).
_SECTION_YAML: BoundedMemo = BoundedMemo(1024)


def dump_config(cfg: SimConfig) -> str:
    """The resolved config as YAML (loadable again with :func:`load_config`)."""
    parts = []
    for name, sec in cfg._sections.items():
        key = f"{name}={sec!r}"
        text = _SECTION_YAML.get(key)
        if text is None:
            text = _SECTION_YAML.put(key, yaml.dump({name: _to_plain(sec)}, Dumper=_DUMPER, sort_keys=False,
                                                     default_flow_style=False))
        parts.append(text)
    return "".join(parts)


def describe_sections() -> list[dict[str, Any]]:
    """Rows of (section, key, type, default, unit, range, doc, source) for documentation."""
    rows = []

    def walk(cls: type, prefix: str) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            tp = hints[f.name]
            if dataclasses.is_dataclass(tp):
                walk(tp, f"{prefix}{f.name}.")
                continue
            meta = dict(f.metadata)
            default = f.default if f.default is not dataclasses.MISSING else (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else None)  # type: ignore[misc]
            rng = []
            for op, sym in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
                if meta.get(op) is not None:
                    rng.append(f"{sym}{meta[op]:g}")
            if meta.get("choices"):
                rng.append("|".join(map(str, meta["choices"])))
            if meta.get("length") is not None:
                rng.append(f"{meta['length'][0]}-{meta['length'][1]} items")
            for op, sym in (("item_ge", ">="), ("item_le", "<=")):
                if meta.get(op) is not None:
                    rng.append(f"each {sym}{meta[op]:g}")
            if meta.get("item_choices"):
                rng.append("each " + "|".join(map(str, meta["item_choices"])))
            for why in ("low_reason", "bound_reason"):
                if meta.get(why):
                    rng.append(f"({meta[why]})")
            rows.append({"key": prefix + f.name, "type": _type_name(tp), "default": default,
                         "unit": meta.get("unit") or "", "range": " ".join(rng),
                         "doc": meta.get("doc", ""), "source": meta.get("source") or ""})

    for name, cls in _ensure_sections().items():
        walk(cls, name + ".")
    return rows
