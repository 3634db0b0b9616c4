"""Summary statistics of a real trace (``python -m ahasd_sim traces stats FILE``).

``compute_stats(trace)`` returns a dict of pandas DataFrames:

* ``per_category`` -- prompts, positions, greedy top-1 match rate, accept rate, mean alpha,
  mean drafter/target entropy, mean committed tokens per round for fixed k = 4 and 8;
* ``accept_len`` -- distribution of committed tokens per round (bonus included, 1..k+1) for
  fixed k = 1..8, replayed from the per-position ``accept`` flags (rounds restart per prompt);
* ``entropy_vs_accept`` -- drafter entropy deciles vs acceptance rate / match rate / alpha;
* ``offpath`` -- off-path rollout summary (count, length, entropy vs on-path entropy).
"""

from __future__ import annotations

import os
import sys
from typing import Dict, Optional, Union

import numpy as np
import pandas as pd

from .format import Trace, TraceError, load_trace, replay_fixed_k

K_VALUES = tuple(range(1, 9))


def _as_trace(trace: Union[Trace, str, os.PathLike]) -> Trace:
    return trace if isinstance(trace, Trace) else load_trace(trace)


def accepted_length_table(trace: Trace, ks=K_VALUES) -> pd.DataFrame:
    rows = []
    for k in ks:
        lens = trace.accepted_lengths(k)
        counts = np.bincount(lens, minlength=k + 2)[1:k + 2]
        row = {"k": k, "rounds": int(lens.size), "mean_committed": float(lens.mean()) if lens.size else np.nan}
        for j, c in enumerate(counts, start=1):
            row[f"P(len={j})"] = c / max(lens.size, 1)
        rows.append(row)
    return pd.DataFrame(rows).set_index("k")


def entropy_vs_accept(trace: Trace, n_bins: int = 10) -> pd.DataFrame:
    H = np.asarray(trace.drf_H, dtype=np.float64)
    acc = np.asarray(trace.accept, dtype=bool)
    if H.size == 0:
        return pd.DataFrame()
    edges = np.unique(np.quantile(H, np.linspace(0, 1, n_bins + 1)))
    b = np.clip(np.searchsorted(edges, H, side="right") - 1, 0, len(edges) - 2)
    df = pd.DataFrame({"bin": b, "H": H, "accept": acc, "match": np.asarray(trace.match, bool),
                       "alpha": np.asarray(trace.alpha, np.float64)})
    g = df.groupby("bin")
    out = pd.DataFrame({
        "H_lo": edges[:-1][g.size().index], "H_hi": edges[1:][g.size().index],
        "H_mean": g["H"].mean(), "n": g.size(), "accept_rate": g["accept"].mean(),
        "match_rate": g["match"].mean(), "mean_alpha": g["alpha"].mean()})
    out.index.name = "decile"
    return out


def compute_stats(trace: Union[Trace, str, os.PathLike]) -> Dict[str, pd.DataFrame]:
    tr = _as_trace(trace)
    cats = tr.categories
    code = np.asarray(tr.category)
    bounds = tr.prompt_bounds()
    prompt_cat = code[bounds[:, 0]] if len(bounds) else np.zeros(0, dtype=int)
    lens = {k: [replay_fixed_k(tr.accept[s:e], k) for s, e in bounds] for k in (4, 8)}
    rows = []
    groups = [(name, i) for i, name in enumerate(cats)] + [("ALL", None)]
    for name, ci in groups:
        m = np.ones(len(tr), bool) if ci is None else code == ci
        if not m.any():
            continue
        sel = np.ones(len(bounds), bool) if ci is None else prompt_cat == ci
        mean_len = {}
        for k in (4, 8):
            ls = [l for l, s_ in zip(lens[k], sel) if s_]
            allk = np.concatenate(ls) if ls else np.zeros(0)
            mean_len[k] = float(allk.mean()) if allk.size else np.nan
        rows.append({
            "category": name, "prompts": int(sel.sum()), "positions": int(m.sum()),
            "match_rate": float(np.mean(tr.match[m])), "accept_rate": float(np.mean(tr.accept[m])),
            "mean_alpha": float(np.mean(tr.alpha[m])), "mean_drf_H": float(np.mean(tr.drf_H[m])),
            "mean_tgt_H": float(np.mean(tr.tgt_H[m])), "mean_len_k4": mean_len[4], "mean_len_k8": mean_len[8],
        })
    per_cat = pd.DataFrame(rows).set_index("category")

    ln = np.asarray(tr.rollout_len)
    has = ln > 0
    off = pd.DataFrame([{
        "rejected_positions": int((~np.asarray(tr.accept, bool)).sum()),
        "rollouts": int(has.sum()), "rollout_tokens": int(ln.sum()),
        "mean_rollout_len": float(ln[has].mean()) if has.any() else np.nan,
        "mean_rollout_H": float(np.mean(tr.rollout_H)) if tr.rollout_H.size else np.nan,
        "mean_onpath_drf_H": float(np.mean(tr.drf_H)) if len(tr) else np.nan,
        "mean_rollout_p": float(np.mean(tr.rollout_p)) if tr.rollout_p.size else np.nan,
    }])
    return {"per_category": per_cat, "accept_len": accepted_length_table(tr),
            "entropy_vs_accept": entropy_vs_accept(tr), "offpath": off}


def _plot(stats: Dict[str, pd.DataFrame], title: str, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    al = stats["accept_len"]
    for k in (2, 4, 8):
        if k in al.index:
            y = [al.loc[k, f"P(len={j})"] for j in range(1, k + 2)]
            ax[0].plot(range(1, k + 2), y, marker="o", label=f"k={k} (mean {al.loc[k, 'mean_committed']:.2f})")
    ax[0].set_xlabel("committed tokens per round (incl. bonus)")
    ax[0].set_ylabel("fraction of rounds")
    ax[0].legend()
    ev = stats["entropy_vs_accept"]
    ax[1].plot(ev["H_mean"], ev["accept_rate"], marker="o", label="accept rate")
    ax[1].plot(ev["H_mean"], ev["mean_alpha"], marker="s", label="mean alpha")
    ax[1].set_xlabel("drafter entropy (nats), decile mean")
    ax[1].set_ylabel("acceptance")
    ax[1].legend()
    pc = stats["per_category"].drop(index="ALL", errors="ignore")
    ax[2].bar(pc.index.astype(str), pc["accept_rate"])
    ax[2].set_ylabel("accept rate")
    ax[2].tick_params(axis="x", rotation=30)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_stats(path, out_dir: Optional[str] = None) -> int:
    """Print the stats tables of trace ``path``; write CSVs + a PNG to ``out_dir`` if given.
    Returns a process exit code (0 ok, 2 invalid trace)."""
    from ..outdir import OutputFolder
    try:
        tr = load_trace(path)
    except TraceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    folder = OutputFolder(out_dir, "trace-stats") if out_dir else None
    if folder is not None:
        folder.check()   # before any work
    stats = compute_stats(tr)
    h = tr.header
    print(f"{path}: mode={h.get('mode')} T={h.get('temperature')} positions={len(tr)} prompts={tr.n_prompts} "
          f"rollout_tokens={tr.rollout_tok.size}")
    print(f"models: target={h.get('models', {}).get('target', {}).get('name')} "
          f"drafter={h.get('models', {}).get('drafter', {}).get('name')}")
    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.precision", 3):
        for name, df in stats.items():
            print(f"\n== {name} ==")
            print(df.to_string())
    if folder is not None:
        stem = os.path.splitext(os.path.basename(os.fspath(path)))[0]
        with folder:
            for name, df in stats.items():
                df.to_csv(os.path.join(folder.stage, f"{stem}_{name}.csv"))
            _plot(stats, f"{stem} ({h.get('mode')})", os.path.join(folder.stage, f"{stem}_stats.png"))
            folder.commit()
        print(f"\nwrote CSVs and {os.path.join(out_dir, f'{stem}_stats.png')}")
    return 0


__all__ = ["compute_stats", "run_stats", "accepted_length_table", "entropy_vs_accept"]
