"""``python -m ahasd_sim validate --peers``: hardware sub-models against peer simulators and
measurements (docs/validation.md), from committed outputs only (nothing is re-run here).

* **NPU vs SCALE-Sim** (``validation/peers/scalesim/gemm_cycles.csv``, written by
  ``scripts/run_peers.py scalesim``): our array cycles with the NPU configured like
  SCALE-Sim (one R x C array, same dataflow, ``fold_model: scalesim``, stall-free,
  ``matrix_util`` 1, ``min_stream_cycles`` 1) against SCALE-Sim's ``Total Cycles``. The
  default ``onnxim_overlap`` fold model is shown beside it. No parameter is fitted.
* **LPDDR5 vs Ramulator 2** (``validation/peers/ramulator2/lpddr5.csv``, written by
  ``scripts/run_peers.py ramulator2``): sequential and random read bandwidth and unloaded
  read latency, per channel count and address mapping, with our memory configured with
  Ramulator 2's LPDDR5-6400 preset timings. No parameter is fitted.
* **GPU step latency** (``validation/h200_measured.csv`` = run 1, ``h200_repeat.csv`` =
  run 2): the free parameters (``launch_overhead_us``, ``multi_token_layer_overhead_us``,
  ``multi_token_kv_bw_fraction``) are fitted on run 1 (in-sample) and the error is
  reported on run 2 (out-of-sample), by model, k and KV length.
* **PIM GEMV vs the AiM simulator** (``validation/peers/aim/gemv.csv``, written by
  ``scripts/run_peers.py aim``): our GEMV time from :mod:`ahasd_sim.hw.pim_spec` (the
  command sequence the driver issues, every timing from the simulator's own preset tables)
  against the simulator's cycles x the preset's tCK, per preset, shape, channel count and
  vector count. No parameter is fitted. :func:`pim_gemv_time_s` is the model side.
* **H2D copies**: the non-overlapped setup (``latency_us - overlapped_us``) fitted on run 1's pinned copies >= 1 MiB; error on run 2.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd

from .config.errors import InputError
from .paths import REPO_ROOT, data_file  # noqa: F401 - REPO_ROOT re-exported for callers

PEERS_DIR = data_file("validation/peers")
SCALESIM_CSV = PEERS_DIR / "scalesim" / "gemm_cycles.csv"
RAMULATOR_CSV = PEERS_DIR / "ramulator2" / "lpddr5.csv"
AIM_CSV = PEERS_DIR / "aim" / "gemv.csv"                        # driver order per_group (CENT no-reuse)
AIM_REUSE_CSV = PEERS_DIR / "aim" / "gemv_reuse_gb.csv"         # driver order reuse_gb (CENT reuse-GB)
AIM_CSVS = {"per_group": AIM_CSV, "reuse_gb": AIM_REUSE_CSV}
AIM_CONTENTION_CSV = PEERS_DIR / "aim" / "contention.csv"
PIM_MEDIAN_GOAL_PCT = 10.0
PIM_WORST_GOAL_PCT = 20.0
RUN1_CSV = data_file("validation/h200_measured.csv")
RUN2_CSV = data_file("validation/h200_repeat.csv")
GPU_CONFIG = "hw_configs/platform_server_h200_pcie5.yaml"

H2D_MIN_BYTES = 2**20          # the H2D goal covers copies >= 1 MiB
KV_BUCKETS = (128, 512, 1024, 2048, 4096)


def _read(path: Path, what: str) -> pd.DataFrame:
    if not path.is_file():
        raise InputError(f"{path}: {what} not found (run scripts/run_peers.py)")
    try:
        return pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{path}: not a readable CSV ({str(exc).splitlines()[0] if str(exc) else exc})") from None


# ----------------------------------------------------------------------------- NPU
@dataclasses.dataclass(frozen=True)
class _Gemm:
    """One GEMM as the NPU model sees it: M tokens x (K x N) weight."""

    n_tokens: int
    k_dim: int
    n_dim: int
    kind: str = "gemm"
    name: str = "gemm"

    @property
    def macs(self) -> float:
        return float(self.n_tokens * self.k_dim * self.n_dim)

    @property
    def weight_bytes(self) -> float:
        return float(self.k_dim * self.n_dim)

    @property
    def act_bytes_in(self) -> float:
        return float(self.n_tokens * self.k_dim)

    @property
    def act_bytes_out(self) -> float:
        return float(self.n_tokens * self.n_dim)


def npu_vs_scalesim(csv: Path = SCALESIM_CSV) -> pd.DataFrame:
    from .config.loader import build_config
    from .hw.npu import Npu
    df = _read(csv, "SCALE-Sim outputs")
    rows = []
    cache: dict = {}
    for _, r in df.iterrows():
        out = {}
        for fold_model in ("scalesim", "onnxim_overlap"):
            key = (r["dataflow"], int(r["array_rows"]), int(r["array_cols"]), fold_model)
            if key not in cache:
                cfg = build_config({"npu": {"chips": 1, "array_rows": key[1], "array_cols": key[2],
                                            "dataflow": key[0], "fold_model": fold_model, "matrix_util": 1.0,
                                            "min_stream_cycles": 1, "weight_preload_hidden": False}},
                                   {}, "validate --peers")
                cache[key] = Npu(cfg.npu)
            op = _Gemm(int(r["m_tokens"]), int(r["k_dim"]), int(r["n_dim"]))
            out[fold_model] = cache[key].analyse(op, 1e18).cycles
        ref = float(r["total_cycles"])
        rows.append({"dataflow": r["dataflow"], "array": f"{int(r['array_rows'])}x{int(r['array_cols'])}",
                     "layer": r["layer"], "m": int(r["m_tokens"]), "k": int(r["k_dim"]), "n": int(r["n_dim"]),
                     "reference": ref, "predicted": out["scalesim"],
                     "error_pct": (out["scalesim"] / ref - 1) * 100,
                     "overlap_predicted": out["onnxim_overlap"],
                     "overlap_error_pct": (out["onnxim_overlap"] / ref - 1) * 100,
                     "tool_version": r.get("tool_version", "")})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- LPDDR5
# Ramulator 2 LPDDR5_6400 preset (tCK 1.25 ns; python/ramulator/dram/lpddr5.py) in our units.
RAMULATOR_LPDDR5_6400 = {
    "standard": "LPDDR5", "data_rate_mts": 6400, "channel_width_bits": 16, "banks_per_channel": 16,
    "page_bytes": 2048, "burst_bytes": 32,
    "trcd_ns": 15 * 1.25, "trp_ns": 15 * 1.25, "tras_ns": 34 * 1.25, "trrd_ns": 4 * 1.25, "tfaw_ns": 16 * 1.25,
    "tccd_s_nck": 2, "tccd_l_nck": 4, "read_latency_nck": 17, "write_latency_nck": 9, "twtr_s_nck": 5,
    "trfc_ns": 280.0, "trfc_pb_ns": 140.0, "trefi_ns": 3906.0,
}
# What each Ramulator 2 address mapping means for a sequential stream, in our model's terms
# (the mapper's bit order, MSB -> LSB, as its name spells it):
#   RoBaRaCoCh: column bits lowest -> a stream fills a 2 KB row of one bank (all bursts in
#     one bank group: tCCD_L), then moves to the next bank: all 16 banks in rotation;
#   ChRaBaRoCo: column then ROW bits lowest -> a stream walks the rows of ONE bank (one bank
#     in rotation, tCCD_L spacing);
#   MOP4CLXOR: 4 cache lines per row then the bank / bank group bits (XOR-hashed): bank-group
#     interleaved, all banks in rotation.
# Random reads (scripts/run_peers.py RAM_RANDOM_SPAN_BYTES) cover 4 GiB; with channel
# interleaving each channel sees span / channels. A mapping with the bank bits ABOVE the row
# bits (ChRaBaRoCo) reaches only ceil(that / bank size) banks (bank = rows x page = 128 MiB
# for 16 Gb x16); the others put the bank bits below the row bits and reach all 16.
RAMULATOR_RANDOM_SPAN_BYTES = 4 * 2**30
RAMULATOR_BANK_BYTES = 2**16 * 2048
RAMULATOR_MAPPINGS = {
    "RoBaRaCoCh": {"interleaved_banks": 16, "bank_group_interleaved": False},
    "ChRaBaRoCo": {"interleaved_banks": 1, "bank_group_interleaved": False},
    "MOP4CLXOR": {"interleaved_banks": 16, "bank_group_interleaved": True},
    "PassThrough": {"interleaved_banks": 16, "bank_group_interleaved": True},  # latency probe: random banks
}


# Ramulator 2's LPDDR5 controller drains writes from its high to its low watermark (0.8 and
# 0.2 of a 32-entry write buffer): about 19 writes per read/write switch.
RAMULATOR_WRITE_BATCH = round((0.8 - 0.2) * 32)


def _memory_like_ramulator(channels: int, mapping: str, pattern: str = "sequential_read",
                           refresh: str = "AllBank"):
    from .config.loader import build_config
    from .hw.lpddr5 import Lpddr5Memory
    if mapping not in RAMULATOR_MAPPINGS:
        raise InputError(f"{RAMULATOR_CSV}: address mapping {mapping!r} has no model equivalent "
                         f"(known: {', '.join(RAMULATOR_MAPPINGS)})")
    mem = {**RAMULATOR_LPDDR5_6400, **RAMULATOR_MAPPINGS[mapping], "channels": int(channels),
           "refresh_mode": "per_bank" if refresh == "PerBank" else "all_bank"}
    if pattern == "mixed":
        mem.update(mixed_read_fraction=2 / 3, rw_batch_bursts=RAMULATOR_WRITE_BATCH)
    if pattern == "random":
        banks = mem["banks_per_channel"]
        if mapping == "ChRaBaRoCo":
            banks = min(banks, math.ceil(RAMULATOR_RANDOM_SPAN_BYTES / channels / RAMULATOR_BANK_BYTES))
        mem["interleaved_banks"] = banks
    cfg = build_config({"memory": mem}, {}, "validate --peers")
    return Lpddr5Memory(cfg.memory)


def lpddr5_vs_ramulator(csv: Path = RAMULATOR_CSV) -> pd.DataFrame:
    df = _read(csv, "Ramulator 2 outputs")
    rows = []
    for _, r in df.iterrows():
        pattern = str(r["pattern"])
        refresh = str(r["refresh"]) if "refresh" in r and isinstance(r["refresh"], str) else "AllBank"
        mem = _memory_like_ramulator(int(r["channels"]), str(r["mapping"]), pattern, refresh)
        if pattern in ("sequential_read", "random", "mixed"):
            ref = float(r["bandwidth_gb_s"])
            pred = mem.class_bandwidth_bytes_s(pattern) / 1e9
            metric = "bandwidth GB/s"
        elif pattern == "latency_random_probe":
            ref = float(r["latency_ns"])
            pred = mem.random_read_latency_ns()
            metric = "latency ns"
        else:
            raise InputError(f"{csv}: unknown pattern {pattern!r}")
        rows.append({"pattern": pattern, "channels": int(r["channels"]), "mapping": r["mapping"], "refresh": refresh,
                     "metric": metric,
                     "reference": ref, "predicted": pred, "error_pct": (pred / ref - 1) * 100,
                     "peak_gb_s": mem.peak_bandwidth_bytes_s / 1e9})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- PIM
def pim_gemv_time_s(preset: str, rows: int, cols: int, vectors: int = 1, channels: int | None = None,
                    refresh: bool = True, order: str = "reuse_gb") -> float:
    """Time of ``vectors`` GEMVs y = W . x on the PIM device ``preset``, in seconds.

    ``preset``: a name of :data:`ahasd_sim.hw.pim_spec.PRESETS` (``lpddr5_aim``,
    ``gddr6_aim``, ``lpddr5_pim``, ``hbm_pim``). ``rows`` x ``cols``: the weight matrix,
    ``rows`` output elements by ``cols`` input elements, in the preset's element size (16-bit
    for the AiM and HBM-PIM presets, as AiM stores them; INT8 for ``lpddr5_pim``).
    ``vectors``: input vectors, each re-reading the weights (the global buffer holds one).
    ``channels``: channels used (None = all of the preset). The time is the command
    sequence a PIM driver issues (WR_GB per input chunk, WR_BIAS / MAC_ABK / RD_MAC per
    output group; :func:`ahasd_sim.hw.pim_spec.gemv_cycles`) at the preset's tCK, all-bank
    refresh included unless ``refresh`` is False (the AiM simulator issues no refresh on
    GDDR6 and an undefined, near-free one on its 32 Gb LPDDR5 part: the comparison with it
    passes False; validation/peers/README.md). ``order``: the driver's command order,
    ``reuse_gb`` (default: CENT's global-buffer reuse, mode switches batched over the result
    registers) or ``per_group``. Raises ``ConfigError`` for an unknown preset, ``ValueError``
    for bad sizes.
    """
    from .hw import pim_spec
    return pim_spec.gemv_time_s(pim_spec.preset(preset), rows, cols, vectors, channels, refresh, order=order)


def pim_vs_aim(csv: Path | None = None) -> pd.DataFrame:
    """Our GEMV time against the AiM runs, each row in the driver order its trace used
    (column ``order``; ``gemv.csv`` predates the column: per_group). ``csv`` None: every
    committed order that exists (:data:`AIM_CSVS`)."""
    paths = [csv] if csv is not None else [p for o, p in AIM_CSVS.items() if o == "per_group" or p.is_file()]
    frames = []
    for path in paths:
        d = _read(path, "AiM simulator outputs")
        if "order" not in d.columns:
            d = d.assign(order="per_group")
        frames.append(d)
    df = pd.concat(frames, ignore_index=True)
    rows = []
    for _, r in df.iterrows():
        ref = float(r["time_s"])
        args = (str(r["preset"]), int(r["rows"]), int(r["cols"]), int(r["vectors"]), int(r["channels"]))
        order = str(r["order"])
        pred = pim_gemv_time_s(*args, refresh=False, order=order)   # configured as the peer runs (no refresh)
        with_refresh = pim_gemv_time_s(*args, order=order)
        other = "per_group" if order == "reuse_gb" else "reuse_gb"
        other_pred = pim_gemv_time_s(*args, refresh=False, order=other)
        rows.append({"order": order, "other_order_error_pct": (other_pred / ref - 1) * 100, "preset": r["preset"], "rows": int(r["rows"]), "cols": int(r["cols"]),
                     "vectors": int(r["vectors"]), "channels": int(r["channels"]), "cycles": int(r["cycles"]),
                     "tCK_ns": float(r["tCK_ns"]), "reference_s": ref, "predicted_s": pred,
                     "error_pct": (pred / ref - 1) * 100, "with_refresh_s": with_refresh,
                     "with_refresh_error_pct": (with_refresh / ref - 1) * 100, "commit": r.get("commit", "")})
    return pd.DataFrame(rows)


def format_pim(t: pd.DataFrame) -> str:
    commit = str(t["commit"].iloc[0])[:12] if len(t) else ""
    lines = [f"PIM GEMV time vs the AiM simulator (arkhadem/aim_simulator @{commit}; ours: hw/pim_spec.py with its "
             "preset timings, no fitted parameter), per driver order (the traces' and ours the same)",
             f"  {'order':<9} {'preset':<11} {'shape':<12} {'n':>3} {'median err %':>12} {'worst err %':>11}"
             f" {'with refresh: median err %':>27}"]
    for (o, p, r, c), s in t.groupby(["order", "preset", "rows", "cols"], sort=False):
        worst = s["error_pct"].iloc[s["error_pct"].abs().argmax()]
        lines.append(f"  {o:<9} {p:<11} {f'{r}x{c}':<12} {len(s):>3} {s['error_pct'].median():>+12.2f} {worst:>+11.2f}"
                     f" {s['with_refresh_error_pct'].median():>+27.2f}")
    for (o, p), s in t.groupby(["order", "preset"], sort=False):
        a = s["error_pct"].abs()
        ok = a.median() <= PIM_MEDIAN_GOAL_PCT and a.max() <= PIM_WORST_GOAL_PCT
        lines.append(f"  {o} {p}: median |err| {a.median():.2f}%  worst |err| {a.max():.2f}%  (n={len(s)})   "
                     f"goal median <= {PIM_MEDIAN_GOAL_PCT:g}%, worst <= {PIM_WORST_GOAL_PCT:g}%: "
                     f"{'met' if ok else 'MISSED'}")
    if "other_order_error_pct" in t.columns:
        for (o, p), s in t.groupby(["order", "preset"], sort=False):
            e = s["other_order_error_pct"]
            other = "per_group" if o == "reuse_gb" else "reuse_gb"
            lines.append(f"  our {other} order against the {o} runs, {p}: median {e.median():+.2f}%  "
                         f"range {e.min():+.2f}% .. {e.max():+.2f}% (the order matters)")
    return "\n".join(lines)


def pim_contention(csv: Path = AIM_CONTENTION_CSV) -> pd.DataFrame:
    """The AiM contention runs with our rule beside them. Our simulator shares a rank's time
    between host reads and PIM (``pim.host_share_of_active_rank`` s): the host streams at
    s x its rate R and PIM at 1 - s meanwhile, so B host bytes cost the PIM work B / R of
    time whatever s: GEMV slowdown = 1 + (B / R) / T_gemv, with R the used channels' data-bus
    peak in the peer's own preset (32 B per nBL cycles)."""
    from .hw import pim_spec
    df = _read(csv, "AiM contention outputs").copy()
    ours = []
    for _, r in df.iterrows():
        spec = pim_spec.preset(str(r["preset"]))
        t = spec.timings
        peak = int(r["channels"]) * spec.column_bytes / (t.n_bl * t.tck_ns * 1e-9)
        t_gemv = float(r["gemv_alone_cycles"]) * float(r["tCK_ns"]) * 1e-9
        ours.append(1.0 + float(r["host_bytes"]) / peak / t_gemv)
    df["ours_gemv_slowdown"] = ours
    return df


def format_pim_contention(csv: Path = AIM_CONTENTION_CSV) -> str:
    if not csv.is_file():
        return f"PIM/host contention: {csv} not found (run scripts/run_peers.py aim)"
    df = pim_contention(csv)
    lines = ["PIM GEMV 4096x4096 on 4 channels + k conventional 32 B host reads after every PIM ISR, in the same AiM "
             "controllers (AiM simulator: the two kinds never overlap in one controller)",
             f"  {'preset':<11} {'k':>3} {'host GB/s':>9} {'of peak':>7} {'GEMV slowdown':>13} {'ours':>6} "
             f"{'error %':>7} {'host time / alone':>17}"]
    for _, r in df.iterrows():
        hs = r["host_slowdown"]
        hs_txt = f"{float(hs):>17.2f}" if str(hs) not in ("", "nan") else f"{'-':>17}"
        err = (r["ours_gemv_slowdown"] / float(r["gemv_slowdown"]) - 1) * 100
        lines.append(f"  {r['preset']:<11} {int(r['host_reads_per_pim_isr']):>3} {float(r['host_gb_s']):>9.2f} "
                     f"{float(r['host_share_of_peak']):>7.1%} {float(r['gemv_slowdown']):>13.3f} "
                     f"{r['ours_gemv_slowdown']:>6.3f} {err:>+7.1f} {hs_txt}")
    lines.append("  host time / alone: the interleaved reads finish with the GEMV (the trace offers them at the ISRs' "
                 "pace), so it measures the offered rate, not a slowdown of a saturating host stream")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- GPU
def _graph_points(csv: Path, platform) -> pd.DataFrame:
    from .validate import GROUP_GRAPH, GROUP_H2D, load_measured, simulate_points
    pts, _ = simulate_points(load_measured(csv), platform, csv)
    pts = pts[pts["group"].isin([GROUP_GRAPH, GROUP_H2D])].copy()
    pts["run"] = csv.name
    return pts


def _gpu_terms(platform, pts: pd.DataFrame, kv_fraction: float) -> np.ndarray:
    """Per graphed point: (body time at kv_fraction with no per-kernel or per-layer terms,
    layers x kernels, layers x [k > 1])."""
    from .hw.gpu import Gpu
    from .validate import step_ops
    cfg = dataclasses.replace(platform.gpu.cfg, launch_overhead_us=0.0, multi_token_layer_overhead_us=0.0,
                              multi_token_kv_bw_fraction=kv_fraction)
    gpu = Gpu(cfg)
    out = []
    for _, r in pts.iterrows():
        ops = step_ops(r["model"], r["dtype"], int(r["k_tokens"]), int(r["kv_len"]))
        n_layers = max(int(op.layer_repeat) for op in ops)
        out.append((gpu.forward_cost(ops).duration_s, n_layers * gpu.kernels_per_layer_for(ops),
                    n_layers * (1.0 if int(r["k_tokens"]) > 1 else 0.0)))
    return np.asarray(out)


def fit_gpu(platform, pts: pd.DataFrame) -> dict:
    """Least squares on the relative error of ``pts`` (graphed steps). For a KV fraction f the
    two per-kernel / per-layer overheads are linear (closed form, clipped >= 0); f is scanned
    on a 0.01 grid. Batch-1 attention is memory-bound, so the body is affine in 1/f: it is
    evaluated at f = 1 and f = 1/2 and interpolated (exact while attention stays memory-bound)."""
    g = pts[pts["group"] == "graph"]
    m = g["measured_s"].to_numpy()
    t1, t2 = _gpu_terms(platform, g, 1.0), _gpu_terms(platform, g, 0.5)
    slope = t2[:, 0] - t1[:, 0]                     # body(f) = body(1) + slope x (1/f - 1)
    a = np.column_stack([t1[:, 1] / m, t1[:, 2] / m]) * 1e-6
    best = None
    for frac in np.round(np.arange(0.05, 1.0001, 0.01), 2):
        y = 1.0 - (t1[:, 0] + slope * (1.0 / frac - 1.0)) / m
        coef, *_ = np.linalg.lstsq(a, y, rcond=None)
        coef = np.clip(coef, 0.0, None)
        sse = float(np.sum((a @ coef - y) ** 2))
        if best is None or sse < best[0]:
            best = (sse, float(frac), float(coef[0]), float(coef[1]))
    return {"multi_token_kv_bw_fraction": best[1], "launch_overhead_us": best[2],
            "multi_token_layer_overhead_us": best[3]}


def fit_h2d_setup_us(platform, pts: pd.DataFrame) -> float:
    """Closed-form least squares of setup_us on the relative error of copies >= 1 MiB."""
    h = pts[(pts["group"] == "h2d") & (pts["bytes"] >= H2D_MIN_BYTES)]
    if h.empty:
        return float("nan")
    m = h["measured_s"].to_numpy()
    body = h["bytes"].to_numpy() / platform.h2d.bandwidth_bytes_s
    return float(np.sum((1.0 - body / m) / m) / np.sum(1.0 / m ** 2)) * 1e6


def gpu_validation(config: str | None = None, overrides=()) -> dict:
    """Fit on run 1, evaluate on runs 1 (in-sample) and 2 (out-of-sample) with the fitted values."""
    from .config import load_config
    from .hw.platform import Platform
    from .validate import resolve_path
    cfg_path = resolve_path(config, GPU_CONFIG)
    cfg = load_config(cfg_path, list(overrides))
    base = Platform.build(cfg)
    run1 = _graph_points(RUN1_CSV, base)
    fitted = fit_gpu(base, run1)
    fitted["setup_us"] = fit_h2d_setup_us(base, run1)
    over = [f"gpu.{k}={v:.6g}" for k, v in fitted.items() if k != "setup_us"]
    if math.isfinite(fitted["setup_us"]):
        fitted["overlapped_us"] = cfg.h2d.latency_us - min(max(fitted["setup_us"], 0.0), cfg.h2d.latency_us)
        over.append(f"h2d.overlapped_us={fitted['overlapped_us']:.6g}")
    fitted_platform = Platform.build(load_config(cfg_path, list(overrides) + over))
    pts = pd.concat([_graph_points(RUN1_CSV, fitted_platform), _graph_points(RUN2_CSV, fitted_platform)])
    pts["sample"] = np.where(pts["run"] == RUN1_CSV.name, "in (run 1, fitted)", "out (run 2)")
    configured = {k: getattr(cfg.gpu, k) for k in fitted if k not in ("setup_us", "overlapped_us")}
    configured["overlapped_us"] = cfg.h2d.overlapped_us
    return {"points": pts, "fitted": fitted, "configured": configured, "config": cfg_path}


# ----------------------------------------------------------------------------- tables
def _err_summary(e: pd.Series) -> str:
    a = e.abs()
    return f"median |err| {a.median():5.2f}%  max |err| {a.max():5.2f}%  (n={len(a)})"


def format_npu(t: pd.DataFrame) -> str:
    lines = [f"NPU GEMM cycles vs SCALE-Sim {t['tool_version'].iloc[0]} (ours: fold_model scalesim, configured "
             "identically; no fitted parameter, so every point is out-of-sample)",
             f"  {'dataflow':<8} {'array':<8} {'n':>3}  {'median |err| %':>14} {'max |err| %':>11}   "
             f"{'default onnxim_overlap: median err %':>36}"]
    for (df, arr), s in t.groupby(["dataflow", "array"], sort=False):
        lines.append(f"  {df:<8} {arr:<8} {len(s):>3}  {s['error_pct'].abs().median():>14.3f} "
                     f"{s['error_pct'].abs().max():>11.3f}   {s['overlap_error_pct'].median():>+36.1f}")
    lines.append(f"  all: {_err_summary(t['error_pct'])}   goal <= 2%")
    return "\n".join(lines)


def format_lpddr5(t: pd.DataFrame) -> str:
    goals = {"sequential_read": "5%", "random": "15%", "mixed": "none", "latency_random_probe": "10%"}
    lines = ["LPDDR5-6400 x16 vs Ramulator 2 (ours configured with its LPDDR5_6400 preset; no fitted parameter)",
             f"  {'pattern':<20} {'ch':>2} {'mapping':<11} {'refresh':<8} {'metric':<15} {'Ramulator 2':>11} "
             f"{'ours':>9} {'error %':>8} {'goal':>6}"]
    for _, r in t.iterrows():
        goal = goals.get(r["pattern"], "none")
        lines.append(f"  {r['pattern']:<20} {r['channels']:>2} {r['mapping']:<11} {r['refresh']:<8} {r['metric']:<15} "
                     f"{r['reference']:>11.3f} {r['predicted']:>9.3f} {r['error_pct']:>+8.1f} {goal:>6}")
    return "\n".join(lines)


def format_gpu(res: dict) -> str:
    pts = res["points"]
    f, c = res["fitted"], res["configured"]
    lines = ["GPU step latency (H200, bf16, CUDA graphs): free parameters fitted on run 1 (h200_measured.csv), "
             "error out-of-sample on run 2 (h200_repeat.csv)",
             "  fitted: " + ", ".join(f"{k} {v:.4g}" for k, v in f.items())
             + "   config: " + ", ".join(f"{k} {v:.4g}" for k, v in c.items())]
    g = pts[pts["group"] == "graph"]
    for sample, s in g.groupby("sample", sort=False):
        lines.append(f"  {sample:<20} all: {_err_summary(s['error_pct'])}")
    lines.append("  out-of-sample (run 2) by model / k / KV length, median |error| %:")
    o = g[g["run"] == RUN2_CSV.name]
    lines.append(f"    {'model':<20}" + "".join(f"{'k=' + str(k):>7}" for k in (1, 2, 4, 8, 16))
                 + "".join(f"{'kv=' + str(v):>9}" for v in KV_BUCKETS))
    for model, s in o.groupby("model", sort=False):
        ks = "".join(f"{s[s['k_tokens'] == k]['abs_error_pct'].median():>7.1f}" for k in (1, 2, 4, 8, 16))
        kvs = "".join(f"{s[s['kv_len'] == v]['abs_error_pct'].median():>9.1f}" for v in KV_BUCKETS)
        lines.append(f"    {model:<20}{ks}{kvs}")
    lines.append("    KV-length buckets, all models: " + "   ".join(
        f"kv={v}: {o[o['kv_len'] == v]['abs_error_pct'].median():.1f}%" for v in KV_BUCKETS)
        + "   goal: median <= 8%, no bucket > 15%")
    h = pts[(pts["group"] == "h2d")]
    lines.append("H2D pinned copies (setup = latency_us - overlapped_us fitted on run 1 >= 1 MiB; latency_us and "
                 "bandwidth measured):")
    lines.append(f"  {'bytes':>12} " + "".join(f"{s:>22}" for s in h["sample"].unique()))
    for b, s in h.groupby("bytes"):
        cells = "".join(f"{s[s['sample'] == smp]['error_pct'].median():>+21.1f}%" for smp in h["sample"].unique())
        lines.append(f"  {int(b):>12} {cells}")
    big = h[h["bytes"] >= H2D_MIN_BYTES]
    for sample, s in big.groupby("sample", sort=False):
        lines.append(f"  >= 1 MiB {sample:<20} {_err_summary(s['error_pct'])}   goal <= 5%")
    return "\n".join(lines)


def run_validate_peers(args) -> int:
    npu = npu_vs_scalesim()
    mem = lpddr5_vs_ramulator()
    gpu = gpu_validation(getattr(args, "config", None), getattr(args, "overrides", []) or [])
    pim = pim_vs_aim()
    print(format_npu(npu))
    print()
    print(format_lpddr5(mem))
    print()
    print(format_pim(pim))
    print()
    print(format_pim_contention())
    print()
    print(format_gpu(gpu))
    out = getattr(args, "out", None)
    if out:
        from .plots.peers import write_peer_plots, write_pim_plot
        out_dir = Path(out)
        out_dir.mkdir(parents=True, exist_ok=True)
        npu.to_csv(out_dir / "peers_npu.csv", index=False, float_format="%.6g")
        mem.to_csv(out_dir / "peers_lpddr5.csv", index=False, float_format="%.6g")
        gpu["points"].to_csv(out_dir / "peers_gpu_h2d.csv", index=False, float_format="%.6g")
        pim.to_csv(out_dir / "peers_pim.csv", index=False, float_format="%.6g")
        for p in write_peer_plots(npu, mem, gpu["points"], out_dir) + write_pim_plot(pim, out_dir):
            print(f"wrote {p}")
    return 0
