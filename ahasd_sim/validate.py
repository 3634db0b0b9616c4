"""``python -m ahasd_sim validate``: the GPU timing model against measured H200 latencies (docs/validation.md).

Every measured **bf16 decode/verify** row of the CSV (``validation/h200_measured.csv`` by
default, written by ``python -m ahasd_sim measure gpu``) is simulated with the platform's GPU model:
``Gpu.forward_cost(forward_ops(model in bf16, k, kv_len)).duration_s``. Every
**h2d_pinned** row is simulated with the ``h2d`` link model (``max(latency, latency -
overlapped + bytes / bandwidth)``, :meth:`Link.isolated_transfer_time_s`). ``--peers``
(``validate_peers.py``) fits the free GPU/H2D parameters on run 1 and reports run 2 out-of-sample. The command prints one line per point (measured,
simulated, signed error) and the median absolute percentage error (MdAPE):

* the headline: bf16 steps replayed from CUDA graphs -- the regime the config is calibrated
  for (overall, per kind, per model);
* H2D pinned copies;
* bf16 steps run eagerly (no CUDA graphs): reported, not in the headline -- the GPU model
  has one per-kernel overhead, the graphed one, and no eager/graph switch;
* ``int8wo`` rows are skipped: they time the stock ``torch._weight_int8pack_mm`` kernel,
  which runs far below memory bandwidth, not int8 weight streaming (validation/README.md).

Errors are ``(simulated - measured) / measured``. ``--out DIR`` also writes
``validation_errors.csv`` (every simulated point) and ``validation_plot.{pdf,png}``
(simulated vs measured, log-log, with y = x and the +-15% band). Bad input (missing or
corrupt CSV, unknown model, config without a GPU) raises :class:`InputError`, which the
CLI prints as one line with exit code 2.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from .config.errors import InputError

from .paths import REPO_ROOT  # noqa: E402 - re-exported (data files resolve through paths.py)
DEFAULT_CONFIG = "hw_configs/platform_server_h200_pcie5.yaml"
DEFAULT_MEASURED = "validation/h200_measured.csv"
ERRORS_CSV = "validation_errors.csv"
PLOT_STEM = "validation_plot"
BAND = 0.15  # the +-15% band of the plot and the goal on the headline MdAPE

REQUIRED_COLUMNS = ("model", "dtype", "kind", "k_tokens", "kv_len", "bytes", "latency_s_median", "cuda_graph")
STEP_KINDS = ("decode", "verify")
H2D_KIND = "h2d_pinned"
# bytes per weight / KV element / activation element of the dtypes the GPU model simulates
DTYPE_BYTES = {"bf16": 2.0}

GROUP_GRAPH = "graph"  # bf16 decode/verify replayed from CUDA graphs: the headline
GROUP_EAGER = "eager"  # bf16 decode/verify without graphs: reported, not calibrated
GROUP_H2D = "h2d"      # pinned host-to-device copies


# ----------------------------------------------------------------------------- input
def resolve_path(path: str | None, default: str) -> Path:
    """``path`` (or ``default``) as given relative to the cwd, else the shipped copy."""
    from .paths import resolve_input_file
    return resolve_input_file(path if path is not None else default)


def _bool(v) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no", "", "nan"):
        return False
    raise ValueError(f"expected True/False, got {v!r}")


def load_measured(path: str | Path) -> pd.DataFrame:
    """Read and check a measured CSV. Raises :class:`InputError` (one line) when it is bad."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: measured CSV not found")
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{path}: not a readable CSV ({first})") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)} "
                         f"(expected the columns written by python -m ahasd_sim measure gpu)")
    return df


#: the largest value a measured row may hold per column, with its reason: past it the row is a
#: unit mix-up or a corrupt file, not a measurement (it entered the error statistics)
_MOST = {"latency_s_median": (3600.0, "an hour for one measured step or copy is no measurement of one"),
         "k_tokens": (float(2 ** 24), "16.7 M tokens in one step is 1000x any model's context"),
         "kv_len": (float(2 ** 24), "16.7 M cached tokens is 1000x any model's context")}


def _num(row, col: str, path: Path, line: int, *, positive: bool = False, integer: bool = False) -> float:
    raw = row[col]
    import numbers
    shown = repr(float(raw)) if isinstance(raw, numbers.Real) and not isinstance(raw, bool) else repr(raw)
    try:
        v = float(raw)
    except (TypeError, ValueError):
        raise InputError(f"{path}: line {line}: {col} must be a number, got {shown}") from None
    if not math.isfinite(v) or v < 0 or (positive and v <= 0) or (integer and v != int(v)):
        what = "a positive" if positive else "a non-negative"
        raise InputError(f"{path}: line {line}: {col} must be {what}{' integer' if integer else ' number'}, "
                         f"got {shown}")
    most = _MOST.get(col)
    if most is not None and v > most[0]:
        raise InputError(f"{path}: line {line}: {col} must be <= {most[0]:g}, got {shown} ({most[1]})")
    return v


# ----------------------------------------------------------------------------- simulation
def _model_spec(name: str, dtype: str, path: Path, line: int):
    from .workload.models import get_model, with_precision
    try:
        spec = get_model(str(name))
    except ValueError as exc:  # UnknownModelError
        raise InputError(f"{path}: line {line}: {str(exc).strip(chr(34))}") from None
    b = DTYPE_BYTES[dtype]
    return with_precision(spec, weight_bytes_per_param=b, kv_bytes_per_elem=b, act_bytes_per_elem=b)


def step_ops(model: str, dtype: str, k: int, kv_len: int, path: Path = Path("-"), line: int = 0):
    """Operators of one measured decode/verify step (k new tokens over kv_len cached)."""
    from .workload.ops import forward_ops
    return forward_ops(_model_spec(model, dtype, path, line), int(k), int(kv_len))


def simulate_points(df: pd.DataFrame, platform, path: Path = Path("-")) -> tuple[pd.DataFrame, dict]:
    """Simulate every bf16 decode/verify row and every h2d_pinned row of ``df``.

    Returns (points, skipped) where ``points`` has one row per simulated point and
    ``skipped`` counts the rows that were not simulated, by reason."""
    gpu, h2d = platform.gpu, platform.h2d
    rows: list[dict] = []
    skipped: dict[str, int] = {}

    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1

    for idx, r in df.iterrows():
        line = int(idx) + 2  # header is line 1
        kind = str(r["kind"]).strip()
        dtype = str(r["dtype"]).strip()
        if kind in STEP_KINDS:
            if dtype not in DTYPE_BYTES:
                skip(f"{dtype} {kind} (not simulated: " + (
                    "stock torch._weight_int8pack_mm kernel, not int8 weight streaming)" if dtype == "int8wo"
                    else "dtype not modelled)"))
                continue
            k = int(_num(r, "k_tokens", path, line, positive=True, integer=True))
            kv = int(_num(r, "kv_len", path, line, integer=True))
            meas = _num(r, "latency_s_median", path, line, positive=True)
            try:
                graph = _bool(r["cuda_graph"])
            except ValueError as exc:
                raise InputError(f"{path}: line {line}: cuda_graph: {exc}") from None
            sim = gpu.forward_cost(step_ops(r["model"], dtype, k, kv, path, line)).duration_s
            rows.append({"group": GROUP_GRAPH if graph else GROUP_EAGER, "model": str(r["model"]),
                         "dtype": dtype, "kind": kind, "cuda_graph": graph, "k_tokens": k, "kv_len": kv,
                         "bytes": _num(r, "bytes", path, line), "measured_s": meas, "simulated_s": sim})
        elif kind == H2D_KIND:
            if h2d is None:
                skip("h2d_pinned (the config has no h2d link)")
                continue
            nbytes = _num(r, "bytes", path, line, positive=True)
            meas = _num(r, "latency_s_median", path, line, positive=True)
            rows.append({"group": GROUP_H2D, "model": "-", "dtype": dtype, "kind": kind, "cuda_graph": False,
                         "k_tokens": np.nan, "kv_len": np.nan, "bytes": nbytes, "measured_s": meas,
                         "simulated_s": h2d.isolated_transfer_time_s(nbytes)})
        else:
            skip("not step/H2D-pinned rows (ceilings, pageable copies, microbenchmarks): "
                 "context only")
    pts = pd.DataFrame(rows, columns=["group", "model", "dtype", "kind", "cuda_graph", "k_tokens", "kv_len",
                                      "bytes", "measured_s", "simulated_s"])
    pts["error_pct"] = (pts["simulated_s"] / pts["measured_s"] - 1.0) * 100.0
    pts["abs_error_pct"] = pts["error_pct"].abs()
    return pts, skipped


def mdape(errors_pct: Iterable[float]) -> float:
    """Median absolute percentage error (NaN for no points)."""
    a = np.abs(np.asarray(list(errors_pct), dtype=float))
    return float(np.median(a)) if a.size else float("nan")


def summarize(points: pd.DataFrame) -> dict:
    """MdAPE overall (graphed steps), per kind and per model, and for the other groups."""
    g = points[points["group"] == GROUP_GRAPH]
    out = {
        "overall": mdape(g["error_pct"]), "n": int(len(g)),
        "within_band": int((g["abs_error_pct"] <= BAND * 100).sum()),
        "max_abs": float(g["abs_error_pct"].max()) if len(g) else float("nan"),
        "median_signed": float(g["error_pct"].median()) if len(g) else float("nan"),
        "by_kind": {k: (mdape(s["error_pct"]), len(s)) for k, s in g.groupby("kind", sort=False)},
        "by_model": {m: (mdape(s["error_pct"]), len(s)) for m, s in g.groupby("model", sort=False)},
    }
    for grp in (GROUP_EAGER, GROUP_H2D):
        s = points[points["group"] == grp]
        out[grp] = (mdape(s["error_pct"]), len(s), float(s["error_pct"].median()) if len(s) else float("nan"))
    return out


def fit_launch_overhead_us(points: pd.DataFrame, platform) -> float:
    """Least-squares per-kernel overhead (us) on the relative error of the graphed steps, all
    other GPU parameters as configured. The step time is affine in the overhead
    (``t = rest + n_layers x kernels_per_layer(architecture) x overhead``), so the fit is
    closed-form."""
    g = points[points["group"] == GROUP_GRAPH]
    gpu = platform.gpu
    if g.empty or (gpu.cfg.kernels_per_layer == 0 and gpu.cfg.kernels_per_layer_plain_mlp == 0):
        return float("nan")
    num = den = 0.0
    for _, r in g.iterrows():
        ops = step_ops(r["model"], r["dtype"], r["k_tokens"], r["kv_len"])
        n_layers = max(int(op.layer_repeat) for op in ops)
        kpl = gpu.kernels_per_layer_for(ops)
        per_kernel = n_layers * kpl * gpu.cfg.launch_overhead_us * 1e-6
        rest = gpu.forward_cost(ops).duration_s - per_kernel
        per_us = n_layers * kpl * 1e-6 / r["measured_s"]
        num += (1.0 - rest / r["measured_s"]) * per_us
        den += per_us * per_us
    return num / den if den else float("nan")


def measured_ceilings(df: pd.DataFrame, path: Path = Path("-")) -> dict:
    """The measured copy bandwidth and GEMM rate (the first row of each ceiling kind); a NaN,
    infinite, zero or negative number there is the file's error with its line (it printed
    "nan" or a negative TB/s)."""
    out = {}
    for kind, key, scale in (("ceiling_membw", "D2D copy TB/s", 1e12), ("ceiling_gemm", "bf16 GEMM TFLOP/s", 1e12)):
        s = df[df["kind"] == kind]
        if len(s) and ("bytes" if kind == "ceiling_membw" else "flops") in s.columns:
            col = "bytes" if kind == "ceiling_membw" else "flops"
            line = int(s.index[0]) + 2
            r = s.iloc[0]
            out[key] = _num(r, col, path, line, positive=True) / _num(r, "latency_s_median", path, line,
                                                                      positive=True) / scale
    return out


# ----------------------------------------------------------------------------- output
def _fmt_table(points: pd.DataFrame) -> str:
    head = f"{'model':<20} {'kind':<11} {'mode':<5} {'k':>3} {'kv':>5} {'bytes':>10} " \
           f"{'measured ms':>12} {'simulated ms':>13} {'error %':>8}"
    lines = [head, "-" * len(head)]
    for _, r in points.iterrows():
        k = "" if pd.isna(r["k_tokens"]) else f"{int(r['k_tokens'])}"
        kv = "" if pd.isna(r["kv_len"]) else f"{int(r['kv_len'])}"
        mode = {GROUP_GRAPH: "graph", GROUP_EAGER: "eager", GROUP_H2D: ""}[r["group"]]
        lines.append(f"{r['model']:<20} {r['kind']:<11} {mode:<5} {k:>3} {kv:>5} {_fmt_bytes(r['bytes']):>10} "
                     f"{r['measured_s'] * 1e3:>12.4f} {r['simulated_s'] * 1e3:>13.4f} {r['error_pct']:>+8.1f}")
    return "\n".join(lines)


def _fmt_bytes(b: float) -> str:
    for unit, s in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= s:
            return f"{b / s:.3g} {unit}"
    return f"{b:.0f} B"


def format_summary(summary: dict, fitted_us: float, cfg_us: float, skipped: dict) -> str:
    s = summary
    lines = [
        f"Median absolute error, bf16 decode+verify steps with CUDA graphs ({s['n']} points): "
        f"{s['overall']:.2f}%  (goal <= {BAND * 100:.0f}%)",
        f"  within +-{BAND * 100:.0f}%: {s['within_band']}/{s['n']}   max |error| {s['max_abs']:.1f}%   "
        f"median signed error {s['median_signed']:+.1f}%",
        "  by kind:  " + "   ".join(f"{k} {v:.2f}% (n={n})" for k, (v, n) in s["by_kind"].items()),
        "  by model:",
    ]
    lines += [f"    {m:<20} {v:6.2f}%  (n={n})" for m, (v, n) in s["by_model"].items()]
    v, n, sg = s[GROUP_H2D]
    lines.append(f"H2D pinned copies ({n} points): median absolute error {v:.2f}% (median signed {sg:+.1f}%)")
    v, n, sg = s[GROUP_EAGER]
    if n:
        lines.append(f"Not in the headline: bf16 steps without CUDA graphs ({n} points): median absolute error "
                     f"{v:.2f}% (median signed {sg:+.1f}%); the GPU model has one per-kernel overhead, "
                     f"the graphed one")
    for reason, cnt in skipped.items():
        lines.append(f"Skipped {cnt} rows: {reason}")
    if math.isfinite(fitted_us):
        lines.append(f"Least-squares gpu.launch_overhead_us for this config's other parameters: {fitted_us:.3f} us "
                     f"(config: {cfg_us:g} us)")
    return "\n".join(lines)


def write_plot(points: pd.DataFrame, out_dir: Path, title: str) -> list[Path]:
    """Simulated vs measured, log-log, y = x and the +-BAND band. Left: every simulated point;
    right: the graphed bf16 steps only (the headline), zoomed."""
    from matplotlib.ticker import FuncFormatter

    from .plots.style import apply_style, color, figure_size, plain_number, plt, save_figure
    apply_style()
    fig, axes = plt.subplots(1, 2, figsize=figure_size("two", aspect=0.55))
    steps = points[points["group"] == GROUP_GRAPH]
    eager = points[points["group"] == GROUP_EAGER]
    h2d = points[points["group"] == GROUP_H2D]
    markers = {"decode": "o", "verify": "^"}
    def colors(i):
        return color(i)
    for ax, sel, sub in ((axes[0], points, "all simulated points"),
                         (axes[1], steps, "bf16 decode/verify with CUDA graphs")):
        ms = np.concatenate([sel["measured_s"].to_numpy(), sel["simulated_s"].to_numpy()]) * 1e3
        lo, hi = float(ms.min()) / 1.3, float(ms.max()) * 1.3
        x = np.geomspace(lo, hi, 50)
        ax.fill_between(x, x * (1 - BAND), x * (1 + BAND), color="0.87", label=f"\u00b1{BAND * 100:.0f}%")
        ax.plot(x, x, color="0.3", lw=1, label="y = x")
        for i, (model, s) in enumerate(steps.groupby("model", sort=False)):
            for j, (kind, sk) in enumerate(s.groupby("kind", sort=False)):
                ax.scatter(sk["measured_s"] * 1e3, sk["simulated_s"] * 1e3, s=16, marker=markers.get(kind, "o"),
                           color=colors(i), alpha=0.8, label=model if j == 0 else None)
        if sel is points:
            if len(eager):
                ax.scatter(eager["measured_s"] * 1e3, eager["simulated_s"] * 1e3, s=14, marker="x", color="0.5",
                           label="bf16 eager (not modelled)")
            if len(h2d):
                ax.scatter(h2d["measured_s"] * 1e3, h2d["simulated_s"] * 1e3, s=22, marker="s",
                           facecolors="none", edgecolors="k", label="H2D pinned copy")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(FuncFormatter(plain_number))
            if sel is steps:
                axis.set_minor_formatter(FuncFormatter(plain_number))
        ax.set_xlabel("measured latency (ms)")
        ax.set_ylabel("simulated latency (ms)")
        ax.set_title(sub, fontsize=9)
        ax.grid(True, which="both", lw=0.3, alpha=0.5)
    axes[0].legend(fontsize=5, loc="upper left", title="o decode, \u25b3 verify", title_fontsize=5)
    fig.suptitle(title, fontsize=8)
    fig.tight_layout()
    return save_figure(fig, out_dir / PLOT_STEM)


# ----------------------------------------------------------------------------- command
def validate(config: str | None = None, measured: str | None = None, overrides: Iterable[str] = ()):
    """Load the config and the CSV, simulate. Returns (points, summary, skipped, fitted_us, platform, paths)."""
    from .config import load_config
    from .hw.platform import Platform
    cfg_path = resolve_path(config, DEFAULT_CONFIG)
    csv_path = resolve_path(measured, DEFAULT_MEASURED)
    cfg = load_config(cfg_path, list(overrides))
    if not cfg.gpu.enabled:
        raise InputError(f"{cfg_path}: gpu.enabled is false: validate needs a platform with a GPU")
    platform = Platform.build(cfg)
    df = load_measured(csv_path)
    points, skipped = simulate_points(df, platform, csv_path)
    if not (points["group"] == GROUP_GRAPH).any():
        raise InputError(f"{csv_path}: no bf16 decode/verify rows with cuda_graph True to compare against")
    summary = summarize(points)
    fitted = fit_launch_overhead_us(points, platform)
    return points, summary, skipped, fitted, platform, (cfg_path, csv_path, df)


def run_validate(args) -> int:
    from .outdir import OutputFolder
    out = getattr(args, "out", None)
    if out:
        OutputFolder(out, "validate").check()   # before any work
    points, summary, skipped, fitted, platform, (cfg_path, csv_path, df) = validate(
        getattr(args, "config", None), getattr(args, "measured", None), getattr(args, "overrides", []) or [])
    g = platform.gpu
    c = g.cfg
    ceil = measured_ceilings(df, Path(csv_path))
    print(f"config   {cfg_path}")
    print(f"measured {csv_path}")
    print(f"GPU model {c.name}: {c.mem_bw_gb_s:g} GB/s x bandwidth_efficiency {c.bandwidth_efficiency:g} = "
          f"{g.effective_bandwidth_bytes_s / 1e12:.3f} TB/s; {g.peak_ops_s / 1e12:g} T{c.compute_dtype} op/s x "
          f"compute_efficiency {c.compute_efficiency:g}; {c.kernels_per_layer} kernels/layer x "
          f"{c.launch_overhead_us:g} us")
    if platform.h2d is not None:
        print(f"h2d link: {platform.h2d.cfg.effective_gb_s:g} GB/s + {platform.h2d.cfg.latency_us:g} us per copy")
    if ceil:
        print("measured ceilings: " + ", ".join(f"{k} {v:.3g}" for k, v in ceil.items()))
    print()
    print(_fmt_table(points))
    print()
    print(format_summary(summary, fitted, c.launch_overhead_us, skipped))
    if out:
        out_dir = Path(out)
        with OutputFolder(out_dir, "validate") as folder:
            points.to_csv(folder.stage / ERRORS_CSV, index=False, float_format="%.6g")
            title = (f"{c.name} GPU model vs {csv_path.name}: MdAPE {summary['overall']:.1f}% "
                     f"over {summary['n']} graphed bf16 steps")
            paths = write_plot(points, folder.stage, title)
            folder.commit()
        print(f"wrote {out_dir / ERRORS_CSV}, " + ", ".join(str(out_dir / p.name) for p in paths))
    return 0
