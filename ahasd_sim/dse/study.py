"""Study file: a strict YAML schema for design-space exploration (``optimize``, ``sensitivity``).

A study file looks like::

    name: where_ahasd_wins              # study folder name (default output: studies/<name>/)
    description: free text              # optional
    base:                               # like a sweep's base: config file + overrides
      config: ../ahasd_mobile.yaml
      set: {run.generated_tokens: 256, run.timeline: false}
    runs:                               # named simulator runs per design point (default: one, "main")
      ahasd: {run.mode: ahasd}
      operator_sync: {run.mode: operator_sync}
    windows: [0, 20, 40]                # optional run.trace_start_prompt values: one sample each
    space:                              # dotted config key -> range or choices
      pim.unit_gops_int8: {low: 25.6, high: 819.2, log: true}
      memory.channels: {choices: [2, 4, 8]}
      "run.draft_model,run.target_model": {choices: [[opt-1.3b, opt-6.7b], [llama2-7b, llama2-13b]]}
    constraints:                        # feasible iff every expression lies in [min, max]
      - {expr: added_area_mm2, max: 3.0}
      - {expr: "pim.ranks * pim.rank_capacity_gib", min: 32}
    objectives:
      - {name: speedup, metric: throughput_tok_s, run: ahasd, over: operator_sync, direction: maximize}
      - {metric: added_area_mm2, direction: minimize}
    sampler: nsga2                      # nsga2 (default), tpe, random, grid; or {name:, population_size:}
    seed: 0
    trials: 200                         # default for --trials
    batch_size: 8                       # trials asked from the sampler at a time (default 4 x workers)
    color_by: run.draft_model,run.target_model   # optional: colour of the cloud in the figures
    sensitivity: {windows: [0, 20, 40], sobol_samples: 16}   # optional, see ahasd_sim.dse.sensitivity

Every key is checked before anything runs: an unknown key, an unknown config key, an empty or
inverted range, a log range with ``low <= 0``, an objective metric that the base point's
``summary.json`` does not have, an expression naming an unknown quantity all raise
:class:`~ahasd_sim.config.errors.ConfigError` naming the study file and the key (exit 2).
"""
from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.errors import ConfigError, InputError, did_you_mean
from ..config.loader import SimConfig
from ..sweep.spec import (NAME_RE, check_config_key, check_keys, dotted_keys, format_value, parse_set,
                          read_spec_header)

STUDY_KEYS = ("name", "description", "base", "runs", "windows", "space", "constraints", "objectives",
              "sampler", "seed", "trials", "batch_size", "color_by", "sensitivity")
BASE_KEYS = ("config", "set")
PARAM_KEYS = ("low", "high", "log", "step", "type", "choices", "base")
CONSTRAINT_KEYS = ("name", "expr", "min", "max")
OBJECTIVE_KEYS = ("name", "metric", "run", "over", "direction")
SAMPLER_KEYS = ("name", "population_size", "n_startup_trials")
SENSITIVITY_KEYS = ("windows", "sobol_samples", "oat_points", "sobol_tolerance", "sobol_max_samples")
SAMPLERS = ("nsga2", "tpe", "random", "grid")
DIRECTIONS = ("maximize", "minimize")
DEFAULT_RUN = "main"

#: quantities computed from the resolved config without running (area model, model sizes)
DERIVED = {
    "added_area_mm2": "area of AHASD's added hardware (EDC, TVC, queues, GTS, AAUs), ahasd_sim.hw.area",
    "added_area_pct_of_die": "added area in % of one LPDDR5-PIM die",
    "draft_weights_gb": "draft model weights (GB = 1e9 B)",
    "target_weights_gb": "target model weights (GB = 1e9 B)",
    "pim_capacity_gb": "PIM capacity: pim.ranks x pim.rank_capacity_gib (GB = 1e9 B)",
}


def _err(src: Path, key: str, msg: str) -> ConfigError:
    return ConfigError(str(src), key, msg)


@dataclass
class Param:
    """One dimension of the search space."""

    name: str                   # as written in the study (may be "a,b" for keys moved together)
    keys: tuple[str, ...]       # config keys it sets
    kind: str                   # int | float | categorical
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: list[Any] = field(default_factory=list)   # categorical: the values (tuples for multi-key)
    labels: list[Any] = field(default_factory=list)    # categorical: what optuna and the tables show
    base: Any = None            # sensitivity base value (a label for categorical); None = from the base config

    def overrides(self, value: Any) -> list[str]:
        """``key=value`` overrides for the sampled ``value`` (a label for categorical params)."""
        if self.kind == "categorical":
            v = self.choices[self.labels.index(value)]
        else:
            v = int(value) if self.kind == "int" else float(value)
        vals = v if len(self.keys) > 1 else (v,)
        return [f"{k}={format_value(x)}" for k, x in zip(self.keys, vals)]

    def from_unit(self, u: float) -> Any:
        """Map ``u`` in [0, 1] onto the range (log-uniform for log ranges; choice index for categorical)."""
        u = min(max(float(u), 0.0), 1.0)
        if self.kind == "categorical":
            return self.labels[min(int(u * len(self.labels)), len(self.labels) - 1)]
        if self.log:
            x = math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
        else:
            x = self.low + u * (self.high - self.low)
        if self.step:
            x = self.low + round((x - self.low) / self.step) * self.step
        x = min(max(x, self.low), self.high)
        return int(round(x)) if self.kind == "int" else float(x)


@dataclass
class Constraint:
    name: str
    expr: str
    tree: ast.Expression
    names: set[str]
    min: float | None
    max: float | None

    def violation(self, value: float) -> float:
        """<= 0 when satisfied (optuna's convention): the largest signed distance past a bound."""
        parts = []
        if self.min is not None:
            parts.append(self.min - value)
        if self.max is not None:
            parts.append(value - self.max)
        return float(max(parts))


@dataclass
class Objective:
    name: str
    metric: str
    run: str
    over: str | None
    direction: str

    @property
    def is_ratio(self) -> bool:
        return self.over is not None

    def describe(self) -> str:
        if self.over:
            return f"{self.metric} of {self.run} / {self.over}"
        return f"{self.metric}" + (f" of {self.run}" if self.run != DEFAULT_RUN else "")


@dataclass
class Study:
    name: str
    source: Path
    base_config: Path
    base_set: list[str]
    runs: dict[str, list[str]]
    windows: list[int] | None
    space: list[Param]
    constraints: list[Constraint]
    objectives: list[Objective]
    sampler: dict[str, Any]
    seed: int
    trials: int | None
    batch_size: int | None
    color_by: str | None
    sensitivity: dict[str, Any]
    description: str = ""
    base: SimConfig | None = None      # the resolved base config (base.set applied)

    @property
    def directions(self) -> list[str]:
        return [o.direction for o in self.objectives]

    def param(self, name: str) -> Param:
        return next(p for p in self.space if p.name == name)


# ---------------------------------------------------------------- expressions
def _float_pow(a: float, b: float) -> float:
    """``a ** b`` in floating point: an integer power such as ``9 ** 9 ** 9`` would be computed
    exactly, digit by digit, for minutes; a float one overflows at once (OverflowError)."""
    try:
        r = float(a) ** float(b)
    except OverflowError:
        raise OverflowError(f"{a:g} ** {b:g} overflows a float (above 1.8e308)") from None
    if isinstance(r, complex):   # a negative number to a fractional power
        raise ValueError(f"{a!r} ** {b!r} is not a real number")
    return r


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.Pow: _float_pow, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_FUNCS = {"min": min, "max": max, "abs": abs, "log2": math.log2, "ceil": math.ceil, "floor": math.floor}


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def parse_expr(src: Path, where: str, text: Any, known: set[str]) -> tuple[ast.Expression, set[str]]:
    """Parse an arithmetic expression over dotted config keys and :data:`DERIVED` quantities."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        text = repr(text)
    if not isinstance(text, str) or not text.strip():
        raise _err(src, where, "expected an arithmetic expression over config keys, e.g. 'pim.ranks * 4'")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise _err(src, where, f"cannot parse expression {text!r}") from None
    names: set[str] = set()

    def check(node: ast.AST) -> None:
        if isinstance(node, ast.Expression):
            return check(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return None
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            check(node.left)
            return check(node.right)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return check(node.operand)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS \
                and not node.keywords:
            for a in node.args:
                check(a)
            return None
        name = _dotted(node)
        if name is not None:
            if name not in known and name not in DERIVED:
                hint = did_you_mean(name, [*known, *DERIVED])
                raise _err(src, where, f"unknown quantity '{name}' in {text!r}{hint}; use dotted config keys "
                           f"or one of {', '.join(DERIVED)}")
            names.add(name)
            return None
        raise _err(src, where, f"unsupported syntax in {text!r}: only numbers, + - * / ** // %, "
                   f"parentheses, {', '.join(_FUNCS)}() and names")

    check(tree)
    return tree, names


def eval_expr(tree: ast.Expression, values: dict[str, float]) -> float:
    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.BinOp):
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.Call):
            return _FUNCS[node.func.id](*[ev(a) for a in node.args])
        return values[_dotted(node)]
    return float(ev(tree))


def derived_values(cfg: SimConfig, names: set[str]) -> dict[str, float]:
    """Values of the :data:`DERIVED` quantities in ``names`` for a resolved config."""
    out: dict[str, float] = {}
    if names & {"added_area_mm2", "added_area_pct_of_die"}:
        from ..hw.area import area_table
        tot = area_table(cfg).set_index("unit").loc["total"]
        out["added_area_mm2"] = float(tot["area_mm2"])
        out["added_area_pct_of_die"] = float(tot["pct_of_die"])
    if names & {"draft_weights_gb", "target_weights_gb"}:
        from ..simulation import run_model     # at the run's precision (run.precision)
        try:
            out["draft_weights_gb"] = run_model(cfg, cfg.run.draft_model).weight_bytes() / 1e9
            out["target_weights_gb"] = run_model(cfg, cfg.run.target_model).weight_bytes() / 1e9
        except ValueError as exc:
            raise InputError(str(exc)) from None
    if "pim_capacity_gb" in names:
        out["pim_capacity_gb"] = cfg.pim.ranks * cfg.pim.rank_capacity_gib * 2**30 / 1e9
    return out


def config_value(cfg: SimConfig, key: str) -> Any:
    node: Any = cfg.to_dict()
    for part in key.split("."):
        node = node[part]
    return node


def quantities(cfg: SimConfig, names: set[str]) -> dict[str, float]:
    vals = derived_values(cfg, names & set(DERIVED))
    for n in names - set(DERIVED):
        v = config_value(cfg, n)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise InputError(f"config key '{n}' is {v!r}, not a number, and cannot be used in an expression")
        vals[n] = float(v)
    return vals


# ---------------------------------------------------------------- parsing
def _number(src: Path, where: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
        raise _err(src, where, f"expected a finite number, got {v!r}")
    return v


def _label(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return "/".join(format_value(x) for x in v)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return format_value(v)


def _parse_param(src: Path, name: Any, body: Any, known: set[str]) -> Param:
    where = f"space.{name}"
    if not isinstance(name, str) or not name:
        raise _err(src, "space", f"parameter names must be dotted config keys, got {name!r}")
    keys = tuple(k.strip() for k in name.split(","))
    for k in keys:
        check_config_key(src, where, k, known)
    if len(set(keys)) != len(keys):
        raise _err(src, where, "a key appears twice in one parameter")
    if isinstance(body, list):
        body = {"choices": body}
    if not isinstance(body, dict):
        raise _err(src, where, "expected {low:, high:[, log:, step:, type:]} or {choices: [...]} or a list of choices")
    check_keys(src, where, body, PARAM_KEYS)
    kind = body.get("type")
    if kind is not None and kind not in ("int", "float", "categorical"):
        raise _err(src, f"{where}.type", f"expected int, float or categorical, got {kind!r}")
    if "choices" in body:
        if kind not in (None, "categorical"):
            raise _err(src, f"{where}.type", "choices make a categorical parameter")
        bad = [k for k in ("low", "high", "log", "step") if k in body]
        if bad:
            raise _err(src, f"{where}.{bad[0]}", "a parameter has either choices or a low/high range")
        ch = body["choices"]
        if not isinstance(ch, list) or not ch:
            raise _err(src, f"{where}.choices", "expected a non-empty list of values")
        choices = []
        for i, c in enumerate(ch):
            if len(keys) > 1:
                if not isinstance(c, (list, tuple)) or len(c) != len(keys):
                    raise _err(src, f"{where}.choices[{i}]", f"expected a list of {len(keys)} values (one per key)")
                choices.append(tuple(c))
            else:
                choices.append(c)
        labels = [_label(c) for c in choices]
        if len(set(map(repr, labels))) != len(labels):
            raise _err(src, f"{where}.choices", "duplicate choice")
        base = body.get("base")
        if base is not None:
            b = _label(base)
            if b not in labels:
                raise _err(src, f"{where}.base", f"{base!r} is not one of the choices")
            base = b
        return Param(name, keys, "categorical", choices=choices, labels=labels, base=base)
    if len(keys) > 1:
        raise _err(src, where, "a parameter over several keys needs choices")
    for k in ("low", "high"):
        if k not in body:
            raise _err(src, f"{where}.{k}", "required for a range (or give choices)")
    low, high = _number(src, f"{where}.low", body["low"]), _number(src, f"{where}.high", body["high"])
    if not low < high:
        raise _err(src, where, f"empty range: low {low!r} must be below high {high!r}")
    log = body.get("log", False)
    if not isinstance(log, bool):
        raise _err(src, f"{where}.log", f"expected true or false, got {log!r}")
    if log and low <= 0:
        raise _err(src, f"{where}.low", f"a log range needs low > 0, got {low!r}")
    if kind is None:
        kind = "int" if isinstance(low, int) and isinstance(high, int) else "float"
    if kind == "categorical":
        raise _err(src, f"{where}.type", "a categorical parameter needs choices")
    step = body.get("step")
    if step is not None:
        step = _number(src, f"{where}.step", step)
        if step <= 0 or step > high - low:
            raise _err(src, f"{where}.step", f"expected 0 < step <= high - low, got {step!r}")
        if log:
            raise _err(src, f"{where}.step", "step and log cannot be combined")
    if kind == "int":
        if float(low) != int(low) or float(high) != int(high):
            raise _err(src, where, "an int range needs integer low and high")
        if step is not None and float(step) != int(step):
            raise _err(src, f"{where}.step", "an int range needs an integer step")
    base = body.get("base")
    if base is not None:
        base = _number(src, f"{where}.base", base)
        if not low <= base <= high:
            raise _err(src, f"{where}.base", f"{base!r} is outside [{low}, {high}]")
    return Param(name, keys, kind, low=low, high=high, log=log, step=step, base=base)


def _parse_runs(src: Path, value: Any, known: set[str], base_set: list[str]) -> dict[str, list[str]]:
    if value is None:
        return {DEFAULT_RUN: []}
    if not isinstance(value, dict) or not value:
        raise _err(src, "runs", "expected a mapping run name -> {dotted.key: value} overrides")
    out = {}
    for name, body in value.items():
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise _err(src, "runs", f"run names must be folder-safe names, got {name!r}")
        out[name] = parse_set(src, f"runs.{name}", body or {}, known)
    return out


def _int(src: Path, where: str, v: Any, lo: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise _err(src, where, f"expected an integer >= {lo}, got {v!r}")
    return v


def _windows(src: Path, where: str, v: Any) -> list[int] | None:
    if v is None:
        return None
    if not isinstance(v, list) or not v:
        raise _err(src, where, "expected a non-empty list of run.trace_start_prompt values")
    out = [_int(src, f"{where}[{i}]", x) for i, x in enumerate(v)]
    if len(set(out)) != len(out):
        raise _err(src, where, "duplicate window")
    return out


def load_study(path: str | Path, *, check_metrics: bool = True) -> Study:
    """Read and strictly validate a study file. ``check_metrics`` runs the base point once
    (short) so that objective metrics are checked against a real summary.json."""
    src, raw, name, desc, base, base_cfg, plain = read_spec_header(path, "study file", STUDY_KEYS)
    known = set(dotted_keys(plain.to_dict()))
    base_set = parse_set(src, "base.set", base.get("set"), known)
    try:
        resolved = plain.replace(base_set)
        resolved.source_file = str(base_cfg)
    except InputError as exc:
        raise _err(src, "base.set", str(exc)) from None

    runs = _parse_runs(src, raw.get("runs"), known, base_set)
    windows = _windows(src, "windows", raw.get("windows"))

    space_raw = raw.get("space")
    if not isinstance(space_raw, dict) or not space_raw:
        raise _err(src, "space", "required: a mapping of dotted config keys to ranges or choices")
    space = [_parse_param(src, k, v, known) for k, v in space_raw.items()]
    owner: dict[str, str] = {}
    for p in space:
        for k in p.keys:
            if k in owner:
                raise _err(src, f"space.{p.name}", f"config key '{k}' is searched twice (also by '{owner[k]}')")
            owner[k] = p.name
    for p in space:   # every value must resolve on the base config (types, ranges, choices)
        vals = p.labels if p.kind == "categorical" else [p.low, p.high]
        for v in vals:
            try:
                resolved.replace(p.overrides(v))
            except InputError as exc:
                msg = str(exc).strip().strip('"').splitlines()[0]
                raise _err(src, f"space.{p.name}", f"value {v!r} does not resolve: {msg} (if it is valid only "
                           "together with another parameter, move both keys into one parameter: "
                           "'a,b': {choices: [[..., ...]]})") from None
    for rname, ovr in runs.items():
        clash = sorted({o.partition("=")[0].strip() for o in ovr} & set(owner))
        if clash:
            raise _err(src, f"runs.{rname}", f"'{clash[0]}' is also in the search space")
    for k in ("run.trace_start_prompt", "run.windows"):
        if windows and k in owner:
            raise _err(src, "windows", f"{k} is also in the search space; use one of them")

    constraints = []
    cons_raw = raw.get("constraints") or []
    if not isinstance(cons_raw, list):
        raise _err(src, "constraints", "expected a list of {expr:, min:, max:}")
    for i, c in enumerate(cons_raw):
        where = f"constraints[{i}]"
        if not isinstance(c, dict):
            raise _err(src, where, "expected {expr:, min:, max:}")
        check_keys(src, where, c, CONSTRAINT_KEYS)
        tree, names = parse_expr(src, f"{where}.expr", c.get("expr"), known)
        lo = _number(src, f"{where}.min", c["min"]) if c.get("min") is not None else None
        hi = _number(src, f"{where}.max", c["max"]) if c.get("max") is not None else None
        if lo is None and hi is None:
            raise _err(src, where, "expected min and/or max")
        if lo is not None and hi is not None and not lo <= hi:
            raise _err(src, where, f"empty range: min {lo!r} > max {hi!r}")
        cname = c.get("name") or str(c["expr"])
        constraints.append(Constraint(str(cname), str(c["expr"]), tree, names, lo, hi))

    objs_raw = raw.get("objectives")
    if not isinstance(objs_raw, list) or not objs_raw:
        raise _err(src, "objectives", "required: a list of {metric:, direction:[, run:, over:, name:]}")
    objectives: list[Objective] = []
    for i, o in enumerate(objs_raw):
        where = f"objectives[{i}]"
        if not isinstance(o, dict):
            raise _err(src, where, "expected {metric:, direction:[, run:, over:, name:]}")
        check_keys(src, where, o, OBJECTIVE_KEYS)
        metric = o.get("metric")
        if not isinstance(metric, str) or not metric:
            raise _err(src, f"{where}.metric", "required: a summary.json field (dotted for nested) or "
                       + ", ".join(DERIVED))
        direction = o.get("direction")
        if direction not in DIRECTIONS:
            raise _err(src, f"{where}.direction", f"expected maximize or minimize, got {direction!r}")
        run = o.get("run", DEFAULT_RUN if DEFAULT_RUN in runs else None)
        if run is None and len(runs) == 1:
            run = next(iter(runs))
        if run not in runs:
            raise _err(src, f"{where}.run", f"expected one of the runs ({', '.join(runs)}), got {run!r}")
        over = o.get("over")
        if over is not None and over not in runs:
            raise _err(src, f"{where}.over", f"expected one of the runs ({', '.join(runs)}), got {over!r}")
        if over == run:
            raise _err(src, f"{where}.over", "a ratio needs two different runs")
        oname = o.get("name") or (f"{metric}_{run}_over_{over}" if over else
                                  metric if len(runs) == 1 else f"{metric}_{run}")
        if not isinstance(oname, str) or not NAME_RE.match(oname):
            raise _err(src, f"{where}.name", f"expected a name of letters, digits, _ . -, got {oname!r}")
        if any(x.name == oname for x in objectives):
            raise _err(src, f"{where}.name", f"duplicate objective name '{oname}'")
        objectives.append(Objective(oname, metric, run, over, direction))

    sampler = raw.get("sampler", "nsga2")
    if isinstance(sampler, str):
        sampler = {"name": sampler}
    if not isinstance(sampler, dict):
        raise _err(src, "sampler", f"expected one of {', '.join(SAMPLERS)} or {{name:, population_size:}}")
    check_keys(src, "sampler", sampler, SAMPLER_KEYS)
    if sampler.get("name", "nsga2") not in SAMPLERS:
        raise _err(src, "sampler.name", f"expected one of {', '.join(SAMPLERS)}, got {sampler.get('name')!r}"
                   + did_you_mean(str(sampler.get("name")), SAMPLERS))
    sampler = {"name": sampler.get("name", "nsga2"), **{k: v for k, v in sampler.items() if k != "name"}}
    for k in ("population_size", "n_startup_trials"):
        if k in sampler:
            _int(src, f"sampler.{k}", sampler[k], 2 if k == "population_size" else 0)
    if sampler["name"] == "grid" and any(p.kind != "categorical" for p in space):
        bad = next(p for p in space if p.kind != "categorical")
        raise _err(src, f"space.{bad.name}", "the grid sampler needs choices for every parameter")
    seed = _int(src, "seed", raw.get("seed", 0))
    trials = _int(src, "trials", raw["trials"], 1) if raw.get("trials") is not None else None
    batch = _int(src, "batch_size", raw["batch_size"], 1) if raw.get("batch_size") is not None else None
    from ..cli_common import MAX_COUNT
    for key, n in (("trials", trials), ("batch_size", batch)):
        if n is not None and n > MAX_COUNT:   # as --trials: 2^20 trials of a 1 s simulation are 12 days
            raise _err(src, key, f"expected at most {MAX_COUNT} (2^20; more is no study that ends), got {n}")
    color_by = raw.get("color_by")
    if color_by is not None and color_by not in owner.values():
        raise _err(src, "color_by", f"expected a parameter of the search space, got {color_by!r}")

    sens = raw.get("sensitivity") or {}
    if not isinstance(sens, dict):
        raise _err(src, "sensitivity", "expected a mapping")
    check_keys(src, "sensitivity", sens, SENSITIVITY_KEYS)
    sens = dict(sens)
    if "windows" in sens:
        sens["windows"] = _windows(src, "sensitivity.windows", sens["windows"])
    if "sobol_samples" in sens:
        n = _int(src, "sensitivity.sobol_samples", sens["sobol_samples"], 0)
        if n and n & (n - 1):
            raise _err(src, "sensitivity.sobol_samples", f"expected 0 or a power of two (Saltelli), got {n}")
    if "oat_points" in sens:
        _int(src, "sensitivity.oat_points", sens["oat_points"], 2)
    if "sobol_max_samples" in sens:
        m = _int(src, "sensitivity.sobol_max_samples", sens["sobol_max_samples"], 1)
        if m & (m - 1) or m < sens.get("sobol_samples", 0):
            raise _err(src, "sensitivity.sobol_max_samples", f"expected a power of two >= sobol_samples, got {m}")
    if "sobol_tolerance" in sens:
        tv = _number(src, "sensitivity.sobol_tolerance", sens["sobol_tolerance"])
        if not 0 < tv < 1:
            raise _err(src, "sensitivity.sobol_tolerance", f"expected a number in (0, 1), got {tv!r}")
        if not sens.get("sobol_samples"):
            raise _err(src, "sensitivity.sobol_tolerance", "needs sobol_samples (the first N)")

    study = Study(name=name, source=src, base_config=base_cfg, base_set=base_set, runs=runs, windows=windows,
                  space=space, constraints=constraints, objectives=objectives, sampler=sampler, seed=seed,
                  trials=trials, batch_size=batch, color_by=color_by, sensitivity=sens, description=desc,
                  base=resolved)
    _check_windows(study)
    _check_constraints(study)
    if check_metrics:
        _check_metrics(study)
    return study


def _check_windows(study: Study) -> None:
    """Every window of ``windows`` (and ``sensitivity.windows``) starts at a prompt of the base
    trace: an error now (exit 2), not every trial failing after it ran."""
    from ..simulation import window_start_prompts
    from ..traces.load import load_full_trace
    lists = [("windows", study.windows), ("sensitivity.windows", study.sensitivity.get("windows"))]
    if not any(ws for _, ws in lists):
        return
    trace = load_full_trace(study.base)
    for where, ws in lists:
        for i, w in enumerate(ws or []):
            cfg = study.base.replace(["run.windows=1", f"run.trace_start_prompt={w}"], source=None)
            try:
                window_start_prompts(cfg, trace)
            except InputError as exc:
                msg = getattr(exc, "message", None) or str(exc)
                raise _err(study.source, f"{where}[{i}]", msg) from None


def _check_constraints(study: Study) -> None:
    """Every constraint evaluates to a finite number at design points of the space: each searched
    value of each parameter, the others at their first value (``low`` or the first choice), and
    every parameter at its ``high``; a division by zero, an overflow or a key that is no number
    there is the study file's error (exit 2) before any trial runs. Only points the search can
    sample are evaluated (not the base config's own values)."""
    if not study.constraints:
        return
    values = {p.name: (p.labels if p.kind == "categorical" else [p.low, p.high]) for p in study.space}
    first = {p.name: values[p.name][0] for p in study.space}

    def at(choice: dict) -> tuple[str, list[str]]:
        label = ", ".join(f"{p.name}={choice[p.name]}" for p in study.space) or "the base point"
        return label, [o for p in study.space for o in p.overrides(choice[p.name])]

    points = [at(first)]
    for p in study.space:
        for v in values[p.name][1:]:
            points.append(at({**first, p.name: v}))
    points.append(at({p.name: values[p.name][-1] for p in study.space}))
    cfgs = []
    for label, ovr in points:
        try:
            cfg = study.base.replace(ovr, source=None)
        except InputError:
            continue   # reported by the space check
        cfgs.append((label, cfg))
    for i, c in enumerate(study.constraints):
        for label, cfg in cfgs:
            try:
                v = eval_expr(c.tree, quantities(cfg, c.names))
            except (InputError, ArithmeticError, ValueError) as exc:
                msg = getattr(exc, "message", None) or str(exc) or type(exc).__name__
                raise _err(study.source, f"constraints[{i}].expr", f"{c.expr!r} cannot be evaluated at {label}: "
                           f"{msg}") from None
            if not math.isfinite(v):
                raise _err(study.source, f"constraints[{i}].expr", f"{c.expr!r} is {v} at {label}; expected a "
                           "finite number")


def _probe_summary(cfg: SimConfig) -> dict[str, Any]:
    """Flattened summary.json of a short run of ``cfg`` (what a trial's summary.json holds)."""
    from ..simulation import run_simulation
    from ..sweep.results import flatten
    one = ["run.windows=1"] if hasattr(cfg.run, "windows") else []   # one short window, not the whole trace
    probe = cfg.replace(["run.generated_tokens=" + str(min(16, cfg.run.generated_tokens)), "run.timeline=false", *one], source=None)
    probe.source_file = cfg.source_file
    return flatten(run_simulation(probe).summary)


def _check_metrics(study: Study) -> None:
    """Every objective metric must be a numeric summary.json field of its run(s) (or derived)."""
    cache: dict[str, dict[str, Any]] = {}
    for i, o in enumerate(study.objectives):
        if o.metric in DERIVED:
            continue
        for run in [o.run, *([o.over] if o.over else [])]:
            if run not in cache:
                cfg = study.base.replace(study.runs[run], source=None)
                cfg.source_file = study.base.source_file
                try:
                    cache[run] = _probe_summary(cfg)
                except InputError as exc:
                    raise _err(study.source, f"runs.{run}", f"the base point does not run: {exc}") from None
            fields = cache[run]
            v = fields.get(o.metric)
            if o.metric not in fields:
                hint = did_you_mean(o.metric, [*fields, *DERIVED])
                raise _err(study.source, f"objectives[{i}].metric", f"'{o.metric}' is not a field of summary.json "
                           f"(run '{run}'){hint}; numeric fields include throughput_tok_s, energy_per_token_j, "
                           f"tokens_per_j, makespan_s, acceptance_rate, and {', '.join(DERIVED)}")
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise _err(study.source, f"objectives[{i}].metric", f"'{o.metric}' is {v!r}, not a number")
