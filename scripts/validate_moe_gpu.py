#!/usr/bin/env python3
"""MoE offload primitives: the simulator's model vs the H200 measurements (docs/moe_offload.md).

Reads ``validation/h200_moe_measured.csv`` (made by ``python -m ahasd_sim measure moe``) and compares:

* ``h2d_experts``: n expert copies, modelled n x (h2d.latency_us + bytes / h2d.effective_gb_s)
  with the H2D constants of ``hw_configs/platform_server_h200_pcie5.yaml`` (measured earlier on
  large and tiny copies, so every row here is out of sample);
* ``moe_step_loop``: the per-expert-loop MoE layer, modelled roofline + distinct x
  ``gpu.moe_loop_overhead_per_expert_us``; that overhead is FITTED on the Qwen3-30B-A3B rows
  (in sample, least squares slope over distinct experts) and tested on the MoEfied-1.5B rows
  (out of sample);
* ``moe_step_fused``: roofline + ``gpu.moe_fused_kernels`` launches (no fitted constant).
  The measured "fused" path is PyTorch eager (sort, gather, three grouped GEMMs, index_add):
  it carries a host-side floor a real fused kernel does not, so the model is compared on the
  increment per distinct expert (slope) as well as on absolute time.

Writes ``validation/h200_moe_model_vs_measured.csv`` and prints the error table.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from ahasd_sim.config.loader import load_config
from ahasd_sim.hw.platform import Platform
from ahasd_sim.moe.cost import MoeCostModel
from ahasd_sim.workload.models import get_model, with_precision

ROOT = Path(__file__).resolve().parents[1]
MODELS = {"qwen3-30b-a3b": "qwen3-30b-a3b", "moefied-qwen2.5-coder-1.5b-e64": "qwen2.5-coder-1.5b-moefied-e64k8"}


def _slope(df):
    x, y = df["distinct_experts"].astype(float), df["latency_s_median"].astype(float)
    return float(np.polyfit(x, y, 1)[0]) if x.nunique() > 1 else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--measured", default=str(ROOT / "validation" / "h200_moe_measured.csv"))
    ap.add_argument("--out", default=str(ROOT / "validation" / "h200_moe_model_vs_measured.csv"))
    a = ap.parse_args()
    meas = pd.read_csv(a.measured)
    loop_q3 = meas[(meas.kind == "moe_step_loop") & (meas.model == "qwen3-30b-a3b")]
    # in-sample fit of the per-expert loop overhead: slope minus the roofline per expert
    base_cfg = load_config(ROOT / "hw_configs" / "platform_server_h200_pcie5.yaml", [])
    q3 = with_precision(get_model("qwen3-30b-a3b"), 2.0, 2.0)
    cm0 = MoeCostModel(Platform.build(base_cfg), q3, q3, base_cfg.moe)
    per_expert_bytes_s = cm0.expert_bytes / cm0.gpu.effective_bandwidth_bytes_s
    slopes = [_slope(g) for _, g in loop_q3.groupby("n_tokens")]
    fitted_us = (float(np.nanmedian(slopes)) - per_expert_bytes_s) * 1e6
    cfg = load_config(ROOT / "hw_configs" / "platform_server_h200_pcie5.yaml",
                      [f"gpu.moe_loop_overhead_per_expert_us={fitted_us:.3f}"])
    plat = Platform.build(cfg)
    rows = []
    for _, r in meas.iterrows():
        spec = with_precision(get_model(MODELS[r.model]), 2.0, 2.0)
        if r.kind == "h2d_experts":
            n = int(r.n_experts_copied)
            per = r.bytes / n
            pred = n * plat.h2d.isolated_transfer_time_s(per)
            sample = "out (H2D constants from earlier large/tiny-copy runs)"
        else:
            kind = "per_expert_loop" if r.kind == "moe_step_loop" else "fused"
            c = load_config(ROOT / "hw_configs" / "platform_server_h200_pcie5.yaml",
                            [f"gpu.moe_kernel={kind}", f"gpu.moe_loop_overhead_per_expert_us={fitted_us:.3f}"])
            cm = MoeCostModel(Platform.build(c), spec, spec, c.moe)
            pred = cm.expert_time_s(int(r.n_tokens), int(r.distinct_experts))
            sample = ("in (fitted overhead)" if r.model == "qwen3-30b-a3b" else "out") if kind == "per_expert_loop" \
                else "out (no fitted constant)"
        rows.append({"model": r.model, "kind": r.kind, "notes": str(r.notes).split(";")[0],
                     "n_experts_copied": r.n_experts_copied, "n_tokens": r.n_tokens,
                     "distinct_experts": r.distinct_experts, "bytes": r.bytes,
                     "measured_s": r.latency_s_median, "model_s": pred,
                     "rel_error": pred / r.latency_s_median - 1, "sample": sample})
    out = pd.DataFrame(rows)
    out.to_csv(a.out, index=False)
    print(f"fitted gpu.moe_loop_overhead_per_expert_us = {fitted_us:.1f} (median over n_tokens of the "
          f"Qwen3 loop slopes minus {per_expert_bytes_s * 1e6:.2f} us of weight bytes per expert)")
    for (kind, model, sample), g in out.groupby(["kind", "model", "sample"]):
        print(f"{kind:15s} {model:32s} {sample:55s} n={len(g):2d}  median |err| "
              f"{g.rel_error.abs().median():6.1%}  max |err| {g.rel_error.abs().max():6.1%}")
    for kind in ("moe_step_fused", "moe_step_loop"):
        for model in MODELS:
            g = meas[(meas.kind == kind) & (meas.model == model)]
            ms = float(np.nanmedian([_slope(x) for _, x in g.groupby("n_tokens")])) * 1e6
            spec = with_precision(get_model(MODELS[model]), 2.0, 2.0)
            c = load_config(ROOT / "hw_configs" / "platform_server_h200_pcie5.yaml",
                            [f"gpu.moe_kernel={'fused' if kind.endswith('fused') else 'per_expert_loop'}",
                             f"gpu.moe_loop_overhead_per_expert_us={fitted_us:.3f}"])
            cm = MoeCostModel(Platform.build(c), spec, spec, c.moe)
            mod = (cm.expert_time_s(16, 33) - cm.expert_time_s(16, 32)) * 1e6
            print(f"slope per distinct expert {kind:15s} {model:32s} measured {ms:7.1f} us  model {mod:7.1f} us")


if __name__ == "__main__":
    main()
