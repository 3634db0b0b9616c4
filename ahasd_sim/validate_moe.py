"""``validate --moe``: the MoE-offload cost model against H200 measurements (docs/moe_offload.md).

Two measured families:

* **expert copies**: bursts of n expert-sized pinned H2D copies on one stream
  (``validation/h200_moe_measured.csv`` kind ``h2d_experts``, and ``h2d_burst`` rows of the
  graph run). Model: :meth:`~ahasd_sim.hw.link.Link.burst_transfer_time_s` (first copy isolated,
  the rest pipelined at ``h2d.back_to_back_setup_us``). That setup is fitted (least squares) on
  the Qwen3-30B-A3B bursts of n >= 2 of the first file (in sample); every MoEfied burst and every
  burst of the graph run is out of sample.
* **MoE layer steps** under CUDA graphs (``validation/h200_moe_graph_measured.csv``, two runs
  with different routings, made by ``scripts/measure_moe_graph.py``): the fused grouped-GEMM
  layer (``torch._grouped_mm`` over all experts' weights in place, empty groups for experts not
  hit) and the per-expert loop, over tokens x distinct experts. Model:
  :meth:`~ahasd_sim.moe.cost.MoeCostModel.expert_time_s` = roofline + fixed + per distinct expert
  + per token-expert pair; the three terms are fitted per kernel on run 1 (weighted least
  squares on relative error, non-negative) and the errors reported on run 2 (out of sample).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .config.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
PLATFORM = ROOT / "hw_configs" / "platform_server_h200_pcie5.yaml"
COPIES_CSV = ROOT / "validation" / "h200_moe_measured.csv"
GRAPH_CSV = ROOT / "validation" / "h200_moe_graph_measured.csv"
#: measured shape name -> (simulator model, FFN width the measurement used: the MoEfied 140 padded to 144)
MODELS = {"qwen3-30b-a3b": "qwen3-30b-a3b", "moefied-qwen2.5-coder-1.5b-e64": "qwen2.5-coder-1.5b-moefied-e64k8"}
KERNELS = {"fused_grouped_mm": "fused", "per_expert_loop": "per_expert_loop"}


def _read(path: Path, need: set[str]) -> pd.DataFrame:
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: cannot read the measured CSV ({e})") from None
    miss = need - set(df.columns)
    if miss:
        raise InputError(f"{path}: missing column(s) {', '.join(sorted(miss))}")
    return df


def _cost_model(cfg, model: str, kernel: str = "fused"):
    from .hw.platform import Platform
    from .moe.cost import MoeCostModel
    from .workload.models import get_model, with_precision
    c = cfg.replace([f"gpu.moe_kernel={kernel}"])
    spec = with_precision(get_model(MODELS[model]), 2.0, 2.0)
    return MoeCostModel(Platform.build(c), spec, spec, c.moe)


def fit_back_to_back_setup_us(copies: pd.DataFrame, link) -> float:
    """Least-squares back-to-back setup on the Qwen3 bursts of n >= 2 copies:
    T(n) - iso(b) = (n - 1) (s + b / bw)."""
    g = copies[(copies.model == "qwen3-30b-a3b") & (copies.n >= 2)]
    if g.empty:
        raise InputError("validate --moe: no Qwen3-30B-A3B bursts of >= 2 copies to fit the back-to-back setup on")
    m = (g.n - 1).to_numpy(float)
    iso = np.array([link.isolated_transfer_time_s(b) for b in g.per_copy_bytes])
    r = g.measured_s.to_numpy(float) - iso - m * g.per_copy_bytes.to_numpy(float) / link.bandwidth_bytes_s
    return float((m * r).sum() / (m * m).sum()) * 1e6


def fit_kernel_terms(steps: pd.DataFrame, cfg, kernel: str) -> tuple[float, float, float]:
    """(fixed, per expert, per pair) in us of ``kernel``, fitted on ``steps`` (measured - roofline)."""
    X, y = [], []
    for _, r in steps.iterrows():
        cm = _cost_model(cfg, r.model, kernel)
        body = cm.expert_body_s(int(r.n_tokens), int(r.distinct_experts))
        X.append([1.0, float(r.distinct_experts), float(r.n_tokens) * cm.target.n_active_experts])
        y.append(float(r.latency_s) - body)
    X, y = np.array(X), np.array(y)
    full = np.array([float(r.latency_s) for _, r in steps.iterrows()])
    # relative weights of the whole step time, not of the residual
    w = 1.0 / full
    active = [0, 1, 2]
    while True:
        sol, *_ = np.linalg.lstsq(X[:, active] * w[:, None], y * w, rcond=None)
        if (sol >= 0).all():
            coef = np.zeros(3)
            coef[active] = sol
            return tuple(float(c) * 1e6 for c in coef)
        active.pop(int(np.argmin(sol)))


def _kernel_overrides(kernel: str, terms) -> list[str]:
    f, e, p = terms
    if kernel == "fused":
        return [f"gpu.moe_fused_fixed_us={f}", f"gpu.moe_fused_per_expert_us={e}", f"gpu.moe_fused_per_pair_us={p}"]
    return [f"gpu.moe_loop_fixed_us={f}", f"gpu.moe_loop_overhead_per_expert_us={e}", f"gpu.moe_loop_per_pair_us={p}"]


def validate_moe(config: str | None = None, copies_csv: str | None = None, graph_csv: str | None = None,
                 overrides=()) -> tuple[pd.DataFrame, dict]:
    """(error rows, fitted values). Rows: what, model, sample, measured_s, model_s, rel_error."""
    from .config import load_config
    cfg_path = Path(config) if config else PLATFORM
    cfg = load_config(cfg_path, list(overrides))
    cp = Path(copies_csv) if copies_csv else COPIES_CSV
    gp = Path(graph_csv) if graph_csv else GRAPH_CSV
    c1 = _read(cp, {"model", "kind", "n_experts_copied", "bytes", "latency_s_median"})
    c1 = c1[c1.kind == "h2d_experts"]
    copies = pd.DataFrame({"source": cp.name, "model": c1.model, "n": c1.n_experts_copied.astype(int),
                           "per_copy_bytes": c1.bytes / c1.n_experts_copied, "measured_s": c1.latency_s_median})
    g = _read(gp, {"run", "model", "kind", "n_tokens", "distinct_experts", "bytes", "n_copies", "latency_s"})
    b = g[g.kind == "h2d_burst"]
    copies = pd.concat([copies, pd.DataFrame({"source": gp.name, "model": b.model, "n": b.n_copies.astype(int),
                                              "per_copy_bytes": b.bytes.astype(float), "measured_s": b.latency_s})])
    from .hw.platform import Platform
    link = Platform.build(cfg).h2d
    if link is None:
        raise InputError(f"{cfg_path}: h2d.enabled is false: validate --moe needs the H2D link")
    fitted = {"h2d.back_to_back_setup_us": fit_back_to_back_setup_us(copies[copies.source == cp.name], link),
              "h2d.back_to_back_setup_us (config)": link.back_to_back_setup_s * 1e6}
    rows = []
    for _, r in copies.iterrows():
        pred = link.burst_transfer_time_s(r.per_copy_bytes, int(r.n))
        ins = r.source == cp.name and r.model == "qwen3-30b-a3b" and r.n >= 2
        rows.append({"what": "expert copies", "kernel": "h2d", "model": r.model, "n_tokens": np.nan,
                     "distinct_experts": np.nan, "n_copies": int(r.n), "bytes": r.per_copy_bytes,
                     "sample": "in" if ins else "out", "source": r.source,
                     "measured_s": float(r.measured_s), "model_s": pred})
    steps = g[g.kind.isin(list(KERNELS))]
    for kname, kernel in KERNELS.items():
        ks = steps[steps.kind == kname]
        if ks.empty:
            continue
        terms = fit_kernel_terms(ks[ks.run == ks.run.min()], cfg, kernel)
        fitted[f"{kernel} (fixed, per expert, per pair) us"] = terms
        kcfg = cfg.replace(_kernel_overrides(kernel, terms))
        for _, r in ks.iterrows():
            cm = _cost_model(kcfg, r.model, kernel)
            rows.append({"what": "MoE step", "kernel": kernel, "model": r.model, "n_tokens": int(r.n_tokens),
                         "distinct_experts": int(r.distinct_experts), "n_copies": np.nan, "bytes": float(r.bytes),
                         "sample": "in" if r.run == ks.run.min() else "out", "source": f"{gp.name} run {r.run}",
                         "measured_s": float(r.latency_s),
                         "model_s": cm.expert_time_s(int(r.n_tokens), int(r.distinct_experts))})
    out = pd.DataFrame(rows)
    out["rel_error"] = out.model_s / out.measured_s - 1.0
    return out, fitted


def format_moe(out: pd.DataFrame, fitted: dict) -> str:
    lines = ["fitted on the in-sample rows:"]
    for k, v in fitted.items():
        lines.append(f"  {k}: " + (", ".join(f"{x:.3f}" for x in v) if isinstance(v, tuple) else f"{v:.3f}"))
    lines.append("")
    lines.append(f"{'what':14s} {'kernel':16s} {'model':31s} {'sample':6s} {'n':>3s}  median |err|  max |err|")
    for keys, grp in [*out.groupby(["what", "kernel", "model", "sample"], sort=False),
                      *((k + ("all",), g) for k, g in out.groupby(["what", "kernel", "sample"], sort=False))]:
        what, kernel, model, sample = keys if len(keys) == 4 and keys[3] != "all" else (keys[0], keys[1], "all", keys[2])
        e = grp.rel_error.abs()
        lines.append(f"{what:14s} {kernel:16s} {model:31s} {sample:6s} {len(grp):3d}  {e.median():10.1%}  {e.max():9.1%}")
    return "\n".join(lines)


def run_validate_moe(args) -> int:
    from .output import atomic_write
    out, fitted = validate_moe(getattr(args, "config", None), None, None, getattr(args, "overrides", []) or [])
    print(format_moe(out, fitted))
    if getattr(args, "out", None):
        d = Path(args.out)
        d.mkdir(parents=True, exist_ok=True)
        atomic_write(d / "moe_model_vs_measured.csv", lambda fh: out.to_csv(fh, index=False, float_format="%.6g"))
        print(f"wrote {d / 'moe_model_vs_measured.csv'}")
    return 0


def model_pass_s(cfg_path: str, n_tokens: int, distinct: int, missing: int, kv_len: int) -> float:
    """The simulator's time of the same composed pass (Qwen3-30B-A3B BF16 on the platform of
    ``cfg_path``): dense part + per layer ``missing`` copies and ``distinct`` experts + head."""
    import numpy as np

    from .config.loader import load_config
    from .hw.platform import Platform
    from .moe.cache import ExpertCache
    from .moe.cost import MoeCostModel, schedule_verify
    from .workload.models import get_model, with_precision
    cfg = load_config(cfg_path, ["moe.weight_bytes_per_param=2"])
    target = with_precision(get_model("qwen3-30b-a3b"), 2.0, 2.0)
    cm = MoeCostModel(Platform.build(cfg), target, target, cfg.moe, cpu=cfg.host_cpu)
    L, E = target.n_layers, target.n_experts
    pop = np.zeros((L, E))
    pop[:, :distinct - missing] = 1.0
    cache = ExpertCache(L, E, L * E, "lru", "per_layer", pop, fill=False)
    for layer in range(L):
        for e in range(distinct - missing):
            cache.insert(layer, e, 0.0)
    unions = [np.arange(distinct)] * L
    return schedule_verify(cm, cache, unions, n_tokens, kv_len, 0.0, 0.0).end_s
