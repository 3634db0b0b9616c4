"""``python -m ahasd_sim validate --mobile``: the phone NPU model against measured phones (docs/validation.md).

Every row of a measured CSV (``validation/mobile/measured.csv`` by default; columns
:data:`COLUMNS`) is matched to a SoC preset (``hw_configs/soc/*.yaml``), a zoo model and a
precision (:mod:`ahasd_sim.workload.precision`), names compared case- and
punctuation-insensitively; a row that does not match is *skipped with its reason*, never guessed.

**Model** (the simulator's own workload: :func:`~ahasd_sim.workload.ops.forward_totals` of the
model at the row's byte widths):

* bandwidth the NPU gets = bus peak (channels x width x data rate) x the LPDDR5 model's
  sequential-read efficiency (all-bank refresh tRFC/tREFI: 0.91 at the default timings;
  :meth:`~ahasd_sim.hw.lpddr5.Lpddr5Memory.class_breakdown`) x ``eta_bw`` (**free**: the share of
  the DRAM's sustained bandwidth one unit's DMA can pull -- outstanding requests per unit, the
  NoC port; HeteroInfer reads 40-45 GB/s for one unit of a 76.8 GB/s part);
* decode step = max(bytes / bandwidth, flops / NPU peak of the array dtype), bytes = every weight
  (LM head included, at ``head_weight_bytes_per_param`` where the precision keeps it wider;
  embedding gathered) + the KV cache of the graph's whole context (QNN graphs
  are static: a step attends over ``graph_context`` positions, masked);
* prefill = ceil(prompt / ar) graph calls of ``ar`` tokens over the static graph's
  ``graph_context`` positions (both read from ``ar=N graph_context=N`` in the row's notes; default
  one call over the prompt), each max(bytes / bandwidth, flops / (peak x ``u_prefill``)) with
  ``u_prefill`` **free** (NPU matrix utilisation in prefill);
* precisions whose weights are widened before the array (``dequant``) are charged on the NPU's
  vector peak when the preset has one; none of the presets does, so that cost is reported as not
  modelled (it is where the w4afp16 rows miss).

The two free parameters are fitted on the rows of one SoC (``FIT_SOC``: the only one with every
model and both precisions) by minimising the median absolute log error, ``eta_bw`` on decode rows
and then ``u_prefill`` on prefill rows; every other SoC is out of sample. Errors are
``(predicted - measured) / measured``; the summary gives the median absolute error (MdAPE) in
and out of sample, per SoC, phase and precision. J/token is compared where a row measures it.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .config.errors import InputError

DEFAULT_MEASURED = "validation/mobile/measured.csv"
SOC_DIR = "hw_configs/soc"
ERRORS_CSV = "mobile_errors.csv"
PLOT_STEM = "mobile_validation"
FIT_SOC = "Snapdragon 8 Elite"
GOAL_DECODE = 0.15
COLUMNS = ("source,year,device,soc,unit,memory,mem_gb_s,model,params_b,precision,phase,context_or_prompt,"
           "tok_s,j_per_tok,power_w,spec_decoding,notes").split(",")
PHASES = ("decode", "prefill")
_SOC_KEYS = {"name", "form_factor", "aliases", "memory", "npu", "on_chip"}
FORM_FACTORS = ("phone", "laptop")
_MEM_KEYS = {"standard", "data_rate_mts", "channels", "channel_width_bits", "source"}
_NPU_KEYS = {"name", "int8_tops", "int16_tops", "fp16_tops", "int4_tops", "vector_gops", "source", "conflicts"}


def squash(s) -> str:
    """Lower case, alphanumerics only: the key names are matched on."""
    return re.sub(r"[^a-z0-9]", "", str(s).lower())


def _model_key(s) -> str:
    k = squash(s)
    k = re.sub(r"^meta", "", k)
    k = re.sub(r"(instruct|chat|hf)+$", "", k)
    return k.replace("llamav", "llama")


# ----------------------------------------------------------------------------- SoC presets
@dataclass(frozen=True)
class SocPreset:
    name: str
    aliases: tuple[str, ...]
    data_rate_mts: float
    channels: int
    channel_width_bits: int
    standard: str
    npu_tops: dict = field(default_factory=dict)   # array dtype -> TOPS (None: not sourced)
    vector_gops: float | None = None
    form_factor: str = "phone"
    path: str = ""

    @property
    def bus_peak_bytes_s(self) -> float:
        return self.channels * self.channel_width_bits / 8 * self.data_rate_mts * 1e6

    def dram_efficiency(self) -> float:
        """Sequential-read efficiency of the LPDDR5 model at this data rate (refresh, protocol)."""
        from .hw.lpddr5 import Lpddr5Memory, MemoryConfig
        m = Lpddr5Memory(MemoryConfig(standard=self.standard, data_rate_mts=self.data_rate_mts,
                                      channels=self.channels, channel_width_bits=self.channel_width_bits))
        return m.class_breakdown("sequential_read").total_efficiency

    def peak_ops_s(self, dtype: str) -> float | None:
        v = self.npu_tops.get(dtype)
        return None if v is None else float(v) * 1e12


def _need(d: dict, key: str, path: Path, where: str, kind=(int, float)):
    if key not in d:
        raise InputError(f"{path}: {where}{key}: missing")
    v = d[key]
    if kind is not None and (isinstance(v, bool) or not isinstance(v, kind)):
        raise InputError(f"{path}: {where}{key}: expected {getattr(kind, '__name__', 'a number')}, got {v!r}")
    return v


def _check_memory(path: Path, mem: dict) -> None:
    """``mem`` against the config schema of the ``memory`` section (ranges, choices, integers,
    the LPDDR5 rate limit); a bad value is one line naming the preset file and the key."""
    from .config.loader import _build_dataclass
    from .hw.lpddr5 import MemoryConfig
    _build_dataclass(MemoryConfig, dict(mem), "memory.", {"": str(path)})


def load_soc(path: str | Path) -> SocPreset:
    """One preset; unknown keys, missing keys and non-positive numbers are one-line errors."""
    from .config import yamlio
    path = Path(path)
    doc = yamlio.load_file(path, "SoC preset")
    if not isinstance(doc, dict):
        raise InputError(f"{path}: expected a mapping")
    for keys, sub, where in ((_SOC_KEYS, doc, ""), (_MEM_KEYS, doc.get("memory") or {}, "memory."),
                             (_NPU_KEYS, doc.get("npu") or {}, "npu.")):
        unknown = sorted(set(sub) - keys)
        if unknown:
            raise InputError(f"{path}: {where}{unknown[0]}: unknown key (expected one of {', '.join(sorted(keys))})")
    mem, npu = doc.get("memory"), doc.get("npu") or {}
    if not isinstance(mem, dict):
        raise InputError(f"{path}: memory: missing (expected a mapping)")
    if not isinstance(npu, dict):
        raise InputError(f"{path}: npu: expected a mapping, got {npu!r}")
    vals = {k: _need(mem, k, path, "memory.") for k in ("data_rate_mts", "channels", "channel_width_bits")}
    for k, v in vals.items():
        if not (math.isfinite(v) and v > 0):
            raise InputError(f"{path}: memory.{k}: expected a positive number, got {v!r}")
    # the memory is the simulator's LPDDR5 model: the same schema, ranges and cross-checks as a
    # config's memory section (whole channels, x8/x16/x32 channels, LPDDR5/5X rates, no DDR4)
    _check_memory(path, {k: mem[k] for k in ("data_rate_mts", "channels", "channel_width_bits", "standard")
                         if k in mem} | ({} if "standard" in mem else {"standard": "LPDDR5X"}))
    tops = {}
    from .config.fields import UNIT_CEILINGS
    top_max, top_why = UNIT_CEILINGS["TOPS"]
    for dt in ("int4", "int8", "int16", "fp16"):
        v = npu.get(f"{dt}_tops")
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                              or not 0 < v <= top_max):
            raise InputError(f"{path}: npu.{dt}_tops: expected a positive number <= {top_max:g} or null, got {v!r} "
                             f"(above: {top_why})")
        tops[dt] = v
    vg = npu.get("vector_gops")
    gops_max, gops_why = UNIT_CEILINGS["GOPS"]
    if vg is not None and (isinstance(vg, bool) or not isinstance(vg, (int, float)) or not math.isfinite(vg)
                           or not 0 < vg <= gops_max):
        raise InputError(f"{path}: npu.vector_gops: expected a positive number <= {gops_max:g} or null, got {vg!r} "
                         f"(above: {gops_why})")
    aliases = doc.get("aliases") or []
    if not isinstance(aliases, list) or not all(isinstance(a, (str, int)) and str(a).strip() for a in aliases):
        raise InputError(f"{path}: aliases: expected a list of names, e.g. [SM8650, Galaxy S24], got {aliases!r}")
    name = _need(doc, "name", path, "", str)
    ff = doc.get("form_factor", "phone")
    if ff not in FORM_FACTORS:
        raise InputError(f"{path}: form_factor: expected one of {', '.join(FORM_FACTORS)}, got {ff!r}")
    return SocPreset(form_factor=ff, name=name, aliases=tuple(str(a) for a in aliases),
                     data_rate_mts=float(vals["data_rate_mts"]), channels=int(vals["channels"]),
                     channel_width_bits=int(vals["channel_width_bits"]),
                     standard=str(mem.get("standard", "LPDDR5X")), npu_tops=tops,
                     vector_gops=npu.get("vector_gops"), path=str(path))


def load_socs(soc_dir: str | Path | None = None) -> dict[str, SocPreset]:
    """Every preset of ``soc_dir`` keyed by the squashed name and aliases."""
    from .paths import resolve_input_file
    d = Path(soc_dir) if soc_dir else resolve_input_file(SOC_DIR)
    out: dict[str, SocPreset] = {}
    for f in sorted(d.glob("*.yaml")):
        p = load_soc(f)
        for n in (p.name, *p.aliases):
            other = out.get(squash(n))
            if other is not None and other.path != p.path:
                raise InputError(f"{f}: name or alias {n!r} is also used by {other.path}")
            out[squash(n)] = p
    return out


# ----------------------------------------------------------------------------- CSV
def load_measured(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: measured CSV not found")
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{path}: not a readable CSV ({first})") from None
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)} (expected {','.join(COLUMNS)})")
    return df


#: largest measured rate and context a row may hold (each with its reason in the error)
MAX_TOK_S = 1e5
MAX_CONTEXT_TOKENS = 2 ** 24


def _pos(v: str, col: str, path: Path, line: int, optional: bool = False,
         most: tuple[float, str] | None = None) -> float | None:
    if optional and str(v).strip() == "":
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise InputError(f"{path}: line {line}: {col} must be a positive number, got {v!r}") from None
    if not (math.isfinite(x) and x > 0):
        raise InputError(f"{path}: line {line}: {col} must be a positive number, got {v!r}")
    if most is not None and x > most[0]:
        raise InputError(f"{path}: line {line}: {col} must be <= {most[0]:g}, got {v!r} ({most[1]})")
    return x


# ----------------------------------------------------------------------------- model
_NOTE_INT = re.compile(r"\b(ar|graph_context)=(\d+)\b")


def graph_shape(notes: str, n: int, phase: str) -> tuple[int, int]:
    """(graph_context, ar) of a row: the static graph's positions and the tokens per prompt-processor
    call, from ``graph_context=N`` / ``ar=N`` in its notes; defaults: the row's own context or prompt,
    and the whole prompt in one call."""
    kv = {k: int(v) for k, v in _NOTE_INT.findall(str(notes))}
    ctx = max(kv.get("graph_context", n), n)
    ar = kv.get("ar", n) if phase == "prefill" else 1
    return ctx, max(1, min(ar, ctx))


def head_extra_bytes(spec, prec) -> float:
    """Extra bytes per forward when the precision stores the LM head wider than the other weights."""
    if prec is None or prec.head_weight_bytes_per_param is None:
        return 0.0
    return spec.vocab_size * spec.d_model * (prec.head_weight_bytes_per_param - spec.weight_bytes_per_param)


def row_work(spec, phase: str, n: int, context: int, chunk: int, prec=None) -> dict:
    """Bytes and flops of one decode step or one prefill chunk, and how many there are."""
    from .workload.ops import forward_totals
    extra = head_extra_bytes(spec, prec)
    if phase == "decode":
        t = forward_totals(spec, 1, max(context - 1, 0))
        return {"steps": 1, "tokens": 1, "bytes": t.weight_bytes + t.kv_bytes + extra, "flops": t.flops,
                "weights": spec.param_count()}
    c = min(chunk, context)
    t = forward_totals(spec, c, max(context - c, 0))
    return {"steps": math.ceil(n / c), "tokens": n, "bytes": t.weight_bytes + t.kv_bytes + extra,
            "flops": t.flops, "weights": spec.param_count()}


BW_MODELS = ("fraction", "port_cap")


def npu_bandwidth_bytes_s(soc: SocPreset, bw_param: float, bw_model: str = "fraction") -> float:
    """What the NPU streams at: the DRAM's sustained bandwidth capped at the unit's port
    (``port_cap``, ``bw_param`` in GB/s), or a fixed fraction of it (``fraction``)."""
    dram = soc.bus_peak_bytes_s * soc.dram_efficiency()
    if bw_model == "fraction":
        return dram * bw_param
    if bw_model != "port_cap":
        raise ValueError(f"bw_model must be one of {BW_MODELS}, got {bw_model!r}")
    return min(dram, bw_param * 1e9)


def predict_tok_s(w: dict, soc: SocPreset, prec, eta_bw: float, u_prefill: float, phase: str,
                  bw_model: str = "fraction") -> float:
    """Tokens per second of one row under the two efficiency parameters (see module docstring)."""
    bw = npu_bandwidth_bytes_s(soc, eta_bw, bw_model)
    peak = soc.peak_ops_s(prec.array_dtype)
    util = u_prefill if phase == "prefill" else 1.0
    t_comp = w["flops"] / (peak * util) if peak else 0.0
    t_deq = 0.0
    if prec.dequant and soc.vector_gops:
        t_deq = w["weights"] * prec.dequant_ops_per_weight / (soc.vector_gops * 1e9)
    t_step = max(w["bytes"] / bw, t_comp) + t_deq
    return w["tokens"] / (w["steps"] * t_step)


@dataclass
class MobileResult:
    points: pd.DataFrame
    skipped: list[tuple[int, str]]
    eta_bw: float
    u_prefill: float
    socs: dict
    bw_model: str = "fraction"


def match_rows(df: pd.DataFrame, socs: dict, path: Path):
    """(matched rows with their spec/preset/precision, skipped (line, reason))."""
    from .workload.models import MODELS
    from .workload.precision import apply_precision, get_precision
    models = {}
    for k, m in MODELS.items():
        models.setdefault(_model_key(m.display_name), k)
        models.setdefault(_model_key(k), k)
    rows, skipped = [], []
    for i, r in df.iterrows():
        line = int(i) + 2
        phase = str(r["phase"]).strip().lower()
        if phase not in PHASES:
            skipped.append((line, f"phase {r['phase']!r} is not decode or prefill"))
            continue
        soc = socs.get(squash(r["soc"]))
        if soc is None:
            skipped.append((line, f"unknown SoC {r['soc']!r} (no preset in {SOC_DIR})"))
            continue
        mkey = models.get(_model_key(r["model"]))
        if mkey is None:
            skipped.append((line, f"unknown model {r['model']!r} (not in the zoo)"))
            continue
        try:
            prec = get_precision(r["precision"])
        except KeyError as exc:
            skipped.append((line, str(exc).strip('"')))
            continue
        if str(r["unit"]).strip().upper() != "NPU":
            skipped.append((line, f"unit {r['unit']!r}: only NPU rows are modelled"))
            continue
        tok_s = _pos(r["tok_s"], "tok_s", path, line, most=(MAX_TOK_S, "100x any phone's prefill rate"))
        ctx_v = _pos(r["context_or_prompt"], "context_or_prompt", path, line,
                     most=(MAX_CONTEXT_TOKENS, "16.7 M tokens is 1000x any model's context window"))
        if not ctx_v.is_integer():
            raise InputError(f"{path}: line {line}: context_or_prompt must be a whole number of tokens, "
                             f"got {r['context_or_prompt']!r}")
        ctx = int(ctx_v)
        if phase == "prefill" and soc.peak_ops_s(prec.array_dtype) is None:
            skipped.append((line, f"{soc.name}: no sourced NPU {prec.array_dtype} peak for a prefill row"))
            continue
        spec = apply_precision(MODELS[mkey], prec)
        graph_ctx, ar = graph_shape(r["notes"], ctx, phase)
        w = row_work(spec, phase, ctx, graph_ctx, ar, prec)
        rows.append(dict(line=line, soc=soc.name, form_factor=soc.form_factor, model=mkey, precision=prec.name, phase=phase,
                         context_or_prompt=ctx, measured_tok_s=tok_s,
                         measured_j_per_tok=_pos(r["j_per_tok"], "j_per_tok", path, line, optional=True),
                         source=r["source"], _w=w, _soc=soc, _prec=prec))
    return rows, skipped


def _mdape(err) -> float:
    e = np.abs(np.asarray(err, dtype=float))
    return float(np.median(e)) * 100 if len(e) else float("nan")


def fit_parameters(rows: list[dict], bw_model: str = "fraction") -> tuple[float, float]:
    """``eta_bw`` on the fitting decode rows, then ``u_prefill`` on the fitting prefill rows, each the
    grid value minimising the median |log(predicted / measured)|. Only rows with ``fit`` True count."""
    unit = np.geomspace(0.02, 1.0, 1200)
    bw_grid = np.geomspace(5.0, 300.0, 1200) if bw_model == "port_cap" else unit

    def best(sel, make, grid):
        if not sel:
            return float("nan")
        costs = [np.median([abs(math.log(make(g, r) / r["measured_tok_s"])) for r in sel]) for g in grid]
        return float(grid[int(np.argmin(costs))])

    dec = [r for r in rows if r["fit"] and r["phase"] == "decode"]
    eta = best(dec, lambda g, r: predict_tok_s(r["_w"], r["_soc"], r["_prec"], g, 1.0, "decode", bw_model),
               bw_grid)
    if not math.isfinite(eta):
        raise InputError("validate --mobile: no decode rows of the fitting SoC "
                         f"{FIT_SOC!r}: cannot fit eta_bw")
    pre = [r for r in rows if r["fit"] and r["phase"] == "prefill"]
    u = best(pre, lambda g, r: predict_tok_s(r["_w"], r["_soc"], r["_prec"], eta, g, "prefill", bw_model), unit)
    return eta, (u if math.isfinite(u) else 1.0)


def validate_mobile(measured: str | None = None, soc_dir: str | None = None,
                    bw_model: str = "fraction") -> MobileResult:
    from .paths import resolve_input_file
    path = resolve_input_file(measured or DEFAULT_MEASURED)
    df = load_measured(path)
    socs = load_socs(soc_dir)
    rows, skipped = match_rows(df, socs, Path(path))
    if not rows:
        raise InputError(f"{path}: no row matched a SoC preset, a zoo model and a precision")
    for r in rows:
        r["fit"] = r["soc"] == FIT_SOC
    eta, u = fit_parameters(rows, bw_model)
    for r in rows:
        r["predicted_tok_s"] = predict_tok_s(r["_w"], r["_soc"], r["_prec"], eta, u, r["phase"], bw_model)
        r["error"] = (r["predicted_tok_s"] - r["measured_tok_s"]) / r["measured_tok_s"]
        bw = r["_w"]["bytes"] * r["measured_tok_s"] / r["_w"]["tokens"] * r["_w"]["steps"]
        r["implied_gb_s"] = bw / 1e9 if r["phase"] == "decode" else float("nan")
        r["bytes_per_step"] = r["_w"]["bytes"]
        r["sample"] = "in" if r["fit"] else "out"
    cols = ["line", "soc", "form_factor", "model", "precision", "phase", "context_or_prompt", "measured_tok_s",
            "predicted_tok_s", "error", "sample", "implied_gb_s", "bytes_per_step", "measured_j_per_tok", "source"]
    pts = pd.DataFrame([{c: r[c] for c in cols} for r in rows])
    return MobileResult(pts, skipped, eta, u, {r["soc"]: r["_soc"] for r in rows}, bw_model)


# ----------------------------------------------------------------------------- report
def summarize(pts: pd.DataFrame) -> dict:
    """MdAPE (%, n) by (sample, phase) over phones -- the headline -- and by (sample, phase, "all")
    including the laptop control; per SoC and per precision."""
    s = {}
    phones = pts[pts["form_factor"] == "phone"]
    for sample in ("in", "out"):
        for phase in PHASES:
            sel = phones[(phones["sample"] == sample) & (phones["phase"] == phase)]
            s[(sample, phase)] = (_mdape(sel["error"]), len(sel))
            sel = pts[(pts["sample"] == sample) & (pts["phase"] == phase)]
            s[(sample, phase, "all")] = (_mdape(sel["error"]), len(sel))
            w = phones[(phones["sample"] == sample) & (phones["phase"] == phase) & (phones["precision"] == "w4a16")]
            s[(sample, phase, "w4a16")] = (_mdape(w["error"]), len(w))
    s["per_soc"] = {(soc, ph): (_mdape(g["error"]), len(g)) for (soc, ph), g in pts.groupby(["soc", "phase"])}
    s["per_precision"] = {(p, ph): (_mdape(g["error"]), len(g))
                          for (p, ph), g in pts.groupby(["precision", "phase"])}
    return s


def format_report(res: MobileResult, path_label: str) -> str:
    pts, s = res.points, summarize(res.points)
    out = [f"measured {path_label}: {len(pts)} rows modelled, {len(res.skipped)} skipped",
           f"fitted on {FIT_SOC} (in sample); every other SoC is out of sample",
           (f"  npu_port_gb_s = {res.eta_bw:.1f}  (bandwidth model port_cap: the NPU streams at "
            "min(DRAM sustained, this))" if res.bw_model == "port_cap" else
            f"  eta_bw    = {res.eta_bw:.3f}  (bandwidth model fraction: share of the DRAM's sustained bandwidth)"),
           f"  u_prefill = {res.u_prefill:.3f}  (NPU matrix utilisation in prefill, of the array dtype's peak)",
           "", "where decode bandwidth goes (bus peak -> DRAM model -> NPU, GB/s):"]
    for soc in sorted(res.socs.values(), key=lambda p: p.name):
        peak = soc.bus_peak_bytes_s / 1e9
        eff = soc.dram_efficiency()
        dec = pts[(pts["soc"] == soc.name) & (pts["phase"] == "decode") & (pts["precision"] != "w4afp16")]
        implied = (f"; its non-dequant decode rows imply {dec['implied_gb_s'].min():.1f}-"
                   f"{dec['implied_gb_s'].max():.1f}" if len(dec) else "")
        out.append(f"  {soc.name:24s} {soc.channels}x{soc.channel_width_bits}b @ {soc.data_rate_mts:g} MT/s = "
                   f"{peak:.1f}; x {eff:.3f} refresh/protocol = {peak * eff:.1f}; NPU = "
                   f"{npu_bandwidth_bytes_s(soc, res.eta_bw, res.bw_model) / 1e9:.1f}{implied}")
    out += ["", f"{'line':>4s} {'soc':24s} {'model':13s} {'prec':8s} {'phase':7s} {'ctx':>5s} "
                f"{'measured':>9s} {'predicted':>9s} {'error':>7s} {'set':>3s}"]
    for r in pts.sort_values(["sample", "phase", "soc", "model"]).itertuples():
        out.append(f"{r.line:4d} {r.soc:24s} {r.model:13s} {r.precision:8s} {r.phase:7s} {r.context_or_prompt:5d} "
                   f"{r.measured_tok_s:9.2f} {r.predicted_tok_s:9.2f} {r.error * 100:+6.1f}% {r.sample:>3s}")
    out += ["", "MdAPE of tok/s (median |predicted - measured| / measured), phones:"]
    for sample in ("in", "out"):
        out.append("  " + ", ".join(f"{sample}-sample {ph} {s[(sample, ph)][0]:.1f}% (n={s[(sample, ph)][1]})"
                                    for ph in PHASES)
                   + "; w4a16 only: " + ", ".join(f"{ph} {s[(sample, ph, 'w4a16')][0]:.1f}% "
                                                 f"(n={s[(sample, ph, 'w4a16')][1]})" for ph in PHASES))
    out.append("  with the laptop control: " + ", ".join(
        f"out-of-sample {ph} {s[('out', ph, 'all')][0]:.1f}% (n={s[('out', ph, 'all')][1]})" for ph in PHASES))
    out.append("  per SoC: " + "; ".join(f"{soc} {ph} {v[0]:.1f}% (n={v[1]})"
                                          for (soc, ph), v in sorted(s["per_soc"].items())))
    out.append("  per precision: " + "; ".join(f"{p} {ph} {v[0]:.1f}% (n={v[1]})"
                                                for (p, ph), v in sorted(s["per_precision"].items())))
    phone_socs = set(pts.loc[pts["form_factor"] == "phone", "soc"])
    worst = max(((v[0], soc) for (soc, ph), v in s["per_soc"].items()
                 if ph == "decode" and soc != FIT_SOC and soc in phone_socs), default=(float("nan"), "-"))
    out.append(f"  goal: out-of-sample phone decode MdAPE <= {GOAL_DECODE * 100:.0f}%: "
               f"{'met' if s[('out', 'decode')][0] <= GOAL_DECODE * 100 else 'NOT met'}; "
               f"worst out-of-sample phone SoC (decode) {worst[1]} {worst[0]:.1f}% (goal 25%)")
    ej = pts["measured_j_per_tok"].notna().sum()
    out.append(f"  energy: {ej} modelled rows measure J/token" + ("" if ej else " -- no energy comparison"))
    if res.skipped:
        out += ["", "skipped:"] + [f"  line {ln}: {why}" for ln, why in res.skipped]
    return "\n".join(out)


def write_plot(pts: pd.DataFrame, out_dir: Path, title: str) -> list[Path]:
    from .plots.style import apply_style, color, figure_size, plt, save_figure
    apply_style()
    fig, axes = plt.subplots(1, 2, figsize=figure_size("two", aspect=0.55))

    def colors(i):
        return color(i)
    socs = sorted(pts["soc"].unique())
    for ax, phase in zip(axes, PHASES):
        sel = pts[pts["phase"] == phase]
        if not len(sel):
            ax.set_visible(False)
            continue
        v = np.concatenate([sel["measured_tok_s"], sel["predicted_tok_s"]])
        x = np.geomspace(v.min() / 1.3, v.max() * 1.3, 50)
        ax.fill_between(x, x * 0.85, x * 1.15, color="0.88", label="\u00b115%")
        ax.plot(x, x, color="0.3", lw=1, label="y = x")
        for i, soc in enumerate(socs):
            for sample, mk in (("in", "o"), ("out", "^")):
                g = sel[(sel["soc"] == soc) & (sel["sample"] == sample)]
                if not len(g):
                    continue
                tag = " laptop control" if (g["form_factor"] == "laptop").any() else ""
                full = g[g["precision"] != "w4afp16"]
                hollow = g[g["precision"] == "w4afp16"]
                ax.scatter(full["measured_tok_s"], full["predicted_tok_s"], marker=mk, color=colors(i),
                           s=30, label=f"{soc} ({sample}-sample{tag})")
                if len(hollow):
                    ax.scatter(hollow["measured_tok_s"], hollow["predicted_tok_s"], marker=mk, s=30,
                               facecolors="none", edgecolors=colors(i))
        ax.scatter([], [], marker="o", facecolors="none", edgecolors="0.4", label="hollow: w4afp16 (dequant not modelled)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        from matplotlib.ticker import NullFormatter
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("measured tok/s")
        ax.set_ylabel("predicted tok/s")
        ax.set_title(phase)
    # one legend under both panels: inside a panel it covered the points
    seen: dict = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    fig.legend(list(seen.values()), list(seen.keys()), loc="lower center", ncol=2, fontsize=6, frameon=False)
    fig.suptitle(title, fontsize=8)
    fig.tight_layout(rect=(0, 0.06 * ((len(seen) + 1) // 2) / 1.5, 1, 1))
    return save_figure(fig, out_dir / PLOT_STEM, formats=("png", "pdf"))


DEFAULT_PLATFORM = "hw_configs/platform_mobile_npu_lpddr5_pim.yaml"


def default_platform_comparison(res: MobileResult, config: str = DEFAULT_PLATFORM) -> str:
    """How the default AHASD platform's NPU bandwidth and compute compare with the fitted phones."""
    from .config import load_config
    from .hw.platform import Platform
    from .paths import resolve_input_file
    plat = Platform.build(load_config(resolve_input_file(config), []))
    mem, npu = plat.memory, plat.npu
    bus = mem.peak_bandwidth_bytes_s
    frac = npu.cfg.dram_bw_fraction if npu is not None else 1.0
    sim = mem.effective_bandwidth_bytes_s * frac
    lines = [f"default AHASD platform ({config}): the NPU streams at {sim / 1e9:.1f} GB/s = "
             f"{sim / bus:.3f} of its {bus / 1e9:.1f} GB/s bus (npu.dram_bw_fraction {frac:g} x the "
             f"LPDDR5's sustained {mem.effective_bandwidth_bytes_s / 1e9:.1f} GB/s)"]
    if res.bw_model == "fraction":
        phone = [p.dram_efficiency() * res.eta_bw for p in res.socs.values() if p.form_factor == "phone"]
        lines.append(f"  measured phones (fit): the NPU streams at {min(phone):.3f}-{max(phone):.3f} of the bus peak "
                     f"(eta_bw {res.eta_bw:.3f} x DRAM efficiency): the default's NPU bandwidth is "
                     f"{sim / bus / max(phone):.2f}x what the phones reach")
    if npu is not None:
        lines.append(f"  default NPU: {npu.peak_tops:.1f} TOPS INT8 x matrix_util {npu.cfg.matrix_util:g}; phones (fit): "
                     f"prefill at u_prefill {res.u_prefill:.3f} of the (derived) 16-bit peak")
    return "\n".join(lines)


def run_validate_mobile(args) -> int:
    from .outdir import OutputFolder
    if getattr(args, "config", None) or getattr(args, "overrides", None) or getattr(args, "peers", False):
        raise InputError("validate --mobile: --config, --set and --peers do not apply (the SoC presets are "
                         f"{SOC_DIR}/*.yaml; the data is --measured CSV)")
    out = getattr(args, "out", None)
    if out:
        OutputFolder(out, "validate").check()
    res = validate_mobile(getattr(args, "measured", None))
    label = getattr(args, "measured", None) or DEFAULT_MEASURED
    print(format_report(res, label))
    alt = validate_mobile(getattr(args, "measured", None), bw_model="port_cap")
    sa = summarize(alt.points)
    print(f"  alternative bandwidth model 'port_cap' (NPU = min(DRAM sustained, {alt.eta_bw:.1f} GB/s) fitted the "
          f"same way): out-of-sample decode MdAPE {sa[('out', 'decode')][0]:.1f}%, prefill "
          f"{sa[('out', 'prefill')][0]:.1f}%")
    print()
    print(default_platform_comparison(res))
    if out:
        with OutputFolder(Path(out), "validate") as folder:
            res.points.to_csv(folder.stage / ERRORS_CSV, index=False, float_format="%.6g")
            s = summarize(res.points)
            paths = write_plot(res.points, folder.stage,
                               f"phone NPU model vs {Path(label).name}: out-of-sample phone decode MdAPE "
                               f"{s[('out', 'decode')][0]:.1f}%, prefill {s[('out', 'prefill')][0]:.1f}%")
            folder.commit()
        print(f"wrote {Path(out) / ERRORS_CSV}, " + ", ".join(str(Path(out) / p.name) for p in paths))
    return 0
