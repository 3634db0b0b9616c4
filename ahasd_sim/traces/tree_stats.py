"""Statistics of a draft-tree trace (``python -m ahasd_sim traces stats TREE_TRACE``).

``compute_tree_stats(tt)`` returns pandas DataFrames:

* ``acceptance`` -- mean accepted drafted tokens per round for trees cut from the recorded one:
  EAGLE-2 top-N by cumulative drafter probability (N = 1, 2, 4, ... budget) and the drafter's
  top-1 chain of depth d (equal node budget N = d), with 95% CIs over prompts (one prompt = one
  sample) and the mean committed tokens (accepted + the correction token);
* ``acceptance_by_category`` -- the same for top-N per task category;
* ``routing`` -- distinct experts per layer touched by the tokens of one step (1, 4, 16, 64
  tokens: the root + the best N-1 tree nodes of a round, or T consecutive committed tokens),
  as a count and a fraction of E, next to the value for independent uniform routing
  E * (1 - (1 - k/E)^T); reuse = |U_l(step) & U_l(next step)| / |U_l(next step)| for consecutive
  rounds of a prompt;
* ``load_balance`` -- per layer over all routed committed tokens: max / mean expert load,
  coefficient of variation, normalised entropy of the load (1 = perfectly balanced).
"""

from __future__ import annotations

import os
import sys
from typing import Dict, Optional, Sequence

import numpy as np
import pandas as pd

from ..metrics.stats import t_interval
from .tree import TreeTrace, TreeTraceError, load_tree_trace

STEP_TOKENS = (1, 4, 16, 64)


def sizes_for(tt: TreeTrace) -> list:
    budget = int(tt.header["tree"]["node_budget"])
    s = [n for n in (1, 2, 4, 8, 16, 32, 64, 128) if n < budget] + [budget]
    return sorted(set(s))


def acceptance_table(tt: TreeTrace, sizes: Optional[Sequence[int]] = None) -> pd.DataFrame:
    sizes = sizes or sizes_for(tt)
    prounds = tt.prompt_rounds()
    rows = []
    depth = int(tt.header["tree"]["depth"])
    specs = [("tree top-N", n, {}) for n in sizes] + [("chain top-1", d, {}) for d in range(1, depth + 1)]
    for label, n, kw in specs:
        policy = "top_n" if label.startswith("tree") else "chain"
        per_round = np.zeros(len(tt), dtype=np.int64)
        nodes = np.zeros(len(tt), dtype=np.int64)
        for r in range(len(tt)):
            sub = tt.subtree(r, policy, n)
            per_round[r] = tt.accepted_length(r, sub)
            nodes[r] = sub.size - 1
        per_prompt = [per_round[a:b].mean() for _, a, b in prounds if b > a]
        mean_acc = float(per_round.mean()) if len(tt) else np.nan
        # 95% interval [low, high] of mean_accepted, one sample per prompt (t over the prompts' means)
        _m, ci = t_interval(per_prompt, center=mean_acc, lower=0.0) if per_prompt else (mean_acc, None)
        rows.append({"tree": label, "node_budget": n, "mean_nodes": float(nodes.mean()) if len(tt) else np.nan,
                     "rounds": len(tt), "mean_accepted": mean_acc,
                     "ci95_low": ci[0] if ci else np.nan, "ci95_high": ci[1] if ci else np.nan, "mean_committed": float(per_round.mean()) + 1 if len(tt) else np.nan,
                     "P(accepted=0)": float((per_round == 0).mean()) if len(tt) else np.nan})
    return pd.DataFrame(rows).set_index(["tree", "node_budget"])


def acceptance_by_category(tt: TreeTrace, sizes: Optional[Sequence[int]] = None) -> pd.DataFrame:
    sizes = sizes or sizes_for(tt)
    lens = {n: tt.accepted_lengths("top_n", n) for n in sizes}
    cat = np.asarray(tt.round_category)
    rows = []
    for ci, name in enumerate(tt.categories):
        m = cat == ci
        if not m.any():
            continue
        row = {"category": name, "rounds": int(m.sum()),
               "prompts": int(len(np.unique(np.asarray(tt.round_prompt)[m])))}
        for n in sizes:
            row[f"acc_N{n}"] = float(lens[n][m].mean())
        rows.append(row)
    return pd.DataFrame(rows).set_index("category")


def _union_sizes(ids: np.ndarray, E: int) -> np.ndarray:
    """ids (T, L, k) -> distinct experts per layer (L,)."""
    L = ids.shape[1]
    occ = np.zeros((L, E), dtype=bool)
    for l in range(L):
        occ[l, ids[:, l, :].ravel()] = True
    return occ


def routing_table(tt: TreeTrace, steps: Sequence[int] = STEP_TOKENS) -> pd.DataFrame:
    E, k, L = tt.n_experts, tt.moe_k, tt.n_layers
    ids_all = np.asarray(tt.node_moe_ids).astype(np.int64)
    prounds = tt.prompt_rounds()
    rows = []
    for T in steps:
        # (a) tree steps: root + best T-1 nodes of each round
        touched, reuse, ntok = [], [], []
        for _, a, b in prounds:
            prev = None
            for r in range(a, b):
                sl = tt.nodes(r)
                sub = tt.subtree(r, "top_n", T - 1) if T > 1 else np.array([0])
                occ = _union_sizes(ids_all[sl.start + sub], E)
                touched.append(occ.sum(1).mean())
                ntok.append(sub.size)
                if prev is not None:
                    cur = occ.sum(1)
                    reuse.append(float(((occ & prev).sum(1) / np.maximum(cur, 1)).mean()))
                prev = occ
        uni = E * (1 - (1 - k / E) ** T)
        rows.append({"step": "tree (root + top-(T-1) nodes)", "T_tokens": T,
                     "mean_tokens": float(np.mean(ntok)) if ntok else np.nan,
                     "experts_per_layer": float(np.mean(touched)) if touched else np.nan,
                     "fraction_of_E": float(np.mean(touched)) / E if touched else np.nan,
                     "uniform_random_expect": uni,
                     "reuse_next_step": float(np.mean(reuse)) if reuse else np.nan})
        # (b) T consecutive committed tokens of a prompt (decode steps / a sequential window)
        cidx, cids, _ = tt.commit_routing()
        cids = cids.astype(np.int64)
        cprompt = np.repeat(np.asarray(tt.round_prompt), np.asarray(tt.round_n_commit))[cidx]
        touched, reuse = [], []
        for p in np.unique(cprompt):
            sel = cids[cprompt == p]
            prev = None
            for s0 in range(0, sel.shape[0] - T + 1, T):
                occ = _union_sizes(sel[s0:s0 + T], E)
                touched.append(occ.sum(1).mean())
                if prev is not None:
                    reuse.append(float(((occ & prev).sum(1) / np.maximum(occ.sum(1), 1)).mean()))
                prev = occ
        rows.append({"step": "committed tokens (window of T)", "T_tokens": T, "mean_tokens": float(T),
                     "experts_per_layer": float(np.mean(touched)) if touched else np.nan,
                     "fraction_of_E": float(np.mean(touched)) / E if touched else np.nan,
                     "uniform_random_expect": uni,
                     "reuse_next_step": float(np.mean(reuse)) if reuse else np.nan})
    return pd.DataFrame(rows).set_index(["step", "T_tokens"])


def load_balance_table(tt: TreeTrace) -> pd.DataFrame:
    E = tt.n_experts
    _, ids, _ = tt.commit_routing()
    ids = ids.astype(np.int64)
    rows = []
    for l in range(tt.n_layers):
        cnt = np.bincount(ids[:, l, :].ravel(), minlength=E).astype(np.float64)
        if cnt.sum() == 0:
            continue
        p = cnt / cnt.sum()
        nz = p[p > 0]
        rows.append({"layer": l, "tokens": int(ids.shape[0]), "max_over_mean": float(cnt.max() / cnt.mean()),
                     "cv": float(cnt.std() / cnt.mean()), "norm_entropy": float(-(nz * np.log(nz)).sum() / np.log(E)),
                     "experts_unused": int((cnt == 0).sum())})
    df = pd.DataFrame(rows).set_index("layer")
    if len(df):
        df.loc["mean"] = df.mean()
    return df


def compute_tree_stats(tt) -> Dict[str, pd.DataFrame]:
    tt = tt if isinstance(tt, TreeTrace) else load_tree_trace(tt)
    return {"acceptance": acceptance_table(tt), "acceptance_by_category": acceptance_by_category(tt),
            "routing": routing_table(tt), "load_balance": load_balance_table(tt)}


def run_tree_stats(path, out_dir: Optional[str] = None, chain_path: Optional[str] = None) -> int:
    try:
        tt = load_tree_trace(path)
    except TreeTraceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    h = tt.header
    m, tr = h["moe"], h["tree"]
    print(f"{path}: tree trace, {len(tt)} rounds, {tt.node_tok.size} nodes, {tt.commit_tok.size} committed tokens, "
          f"{len(h['prompts'])} prompts; tree depth {tr['depth']} top_k {tr['top_k']} budget {tr['node_budget']}")
    print(f"routing: {m['label']} (source {m['source']}), E={m['n_experts']} k={m['k']} layers={m['n_layers']}")
    if h.get("constructed_example"):
        print("NOTE: constructed example data, not measured")
    stats = compute_tree_stats(tt)
    if chain_path:
        from .format import load_trace
        chain = load_trace(chain_path)
        stats["chain_vs_tree"] = chain_vs_tree(tt, chain)
        stats["chain_crosscheck"] = chain_crosscheck(tt, chain)
    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.precision", 3):
        for name, df in stats.items():
            print(f"\n== {name} ==")
            print(df.to_string())
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        stem = os.path.splitext(os.path.basename(os.fspath(path)))[0]
        for name, df in stats.items():
            df.to_csv(os.path.join(out_dir, f"{stem}_{name}.csv"))
        print(f"\nwrote CSVs to {out_dir}")
    return 0


# ----------------------------------------------------------------------------------------
# comparison with a chain trace of the same model pair and prompts
# ----------------------------------------------------------------------------------------
def _runs(acc: np.ndarray) -> np.ndarray:
    run = np.zeros(acc.size + 1, dtype=np.int64)
    for t in range(acc.size - 1, -1, -1):
        run[t] = run[t + 1] + 1 if acc[t] else 0
    return run


def _matched_prompts(tt: TreeTrace, chain):
    """(tree prompt index, chain [start, end) bounds) for prompts both traces contain (by id)."""
    cids = [p.get("id") for p in chain.header["prompts"]]
    bounds = chain.prompt_bounds()
    out = []
    for i, p in enumerate(tt.header["prompts"]):
        if p.get("id") in cids:
            j = cids.index(p["id"])
            out.append((i, int(bounds[j, 0]), int(bounds[j, 1])))
    return out


def chain_crosscheck(tt: TreeTrace, chain) -> pd.DataFrame:
    """Per matched prompt: where the tree run's committed tokens first differ from the chain
    trace's target tokens, and how many rounds before that point have a top-1-chain accepted
    length (depth d = 1..tree depth, cut from the tree) equal to the chain trace's replay
    min(d, run of accept flags from the round's position).  ``drafter_argmax_flips`` counts
    shared-path positions where the tree's top-1 child differs from the chain trace's drafter
    argmax (different CPU kernels: batched tree decode vs one token at a time);
    ``max_flip_margin`` is the largest top-1 minus top-2 drafter probability (chain trace) there."""
    D = int(tt.header["tree"]["depth"])
    rows = []
    pr = {p: (a, b) for p, a, b in tt.prompt_rounds()}
    for i, s, e in _matched_prompts(tt, chain):
        if i not in pr:
            continue
        a, b = pr[i]
        ctok = np.asarray(tt.commit_tok[tt.commits(a).start:tt.commits(b - 1).stop])
        ttok = np.asarray(chain.tgt_tok[s:e])
        n = min(ctok.size, ttok.size)
        diff = np.flatnonzero(ctok[:n] != ttok[:n])
        first = int(diff[0]) if diff.size else n
        run = _runs(np.asarray(chain.accept[s:e], bool))
        cmp = eq = flips = 0
        flip_margin = 0.0
        for r in range(a, b):
            pos = int(tt.round_pos[r])
            if pos + D + 1 > first:   # the chain trace's flags only hold on the shared path
                break
            for d in range(1, D + 1):
                cmp += 1
                eq += int(tt.accepted_length(r, tt.subtree(r, "chain", d)) == min(d, int(run[pos])))
            # drafter argmax flips on the shared path: tree top-1 child != chain trace's drafter top-1
            sl = tt.nodes(r)
            for j, nd in enumerate(tt.subtree(r, "chain", D)[1:], start=1):
                t = s + pos + j - 1
                if int(tt.node_tok[sl.start + nd]) != int(chain.drf_top1[t]):
                    flips += 1
                    flip_margin = max(flip_margin, float(chain.topk_p[t][0] - chain.topk_p[t][1]))
                if not tt.node_accept[sl.start + nd]:
                    break
        rows.append({"prompt": tt.header["prompts"][i].get("id"), "tree_tokens": int(ctok.size),
                     "first_divergence": first, "rounds_x_depths_compared": cmp, "equal": eq,
                     "equal_fraction": eq / cmp if cmp else np.nan, "drafter_argmax_flips": flips,
                     "max_flip_margin": flip_margin})
    return pd.DataFrame(rows).set_index("prompt") if rows else pd.DataFrame()


def chain_vs_tree(tt: TreeTrace, chain, budgets: Optional[Sequence[int]] = None) -> pd.DataFrame:
    """Mean accepted drafted tokens per round at equal node budgets N: chain speculative
    decoding with k = N (replayed from the chain trace over the same prompts and response
    span as the tree trace) vs the EAGLE-2 top-N tree cut from the recorded trees."""
    budgets = budgets or [n for n in (1, 2, 3, 4, 5, 6, 8, 16, 32, 64) if n <= int(tt.header["tree"]["node_budget"])]
    matched = _matched_prompts(tt, chain)
    pr = {p: (a, b) for p, a, b in tt.prompt_rounds()}
    keep_rounds = np.zeros(len(tt), dtype=bool)
    spans = []
    for i, s, e in matched:
        if i in pr:
            a, b = pr[i]
            keep_rounds[a:b] = True
            n_gen = int(tt.round_pos[b - 1] + tt.round_n_commit[b - 1])
            spans.append((s, min(e, s + n_gen)))
    rows = []
    for N in budgets:
        ch = []
        for s, e in spans:
            run = _runs(np.asarray(chain.accept[s:e], bool))
            t = 0
            while t < e - s:
                acc = min(int(run[t]), N)
                ch.append(acc)
                t += acc + 1
        tree = tt.accepted_lengths("top_n", N)[keep_rounds]
        rows.append({"node_budget": N, "chain_mean_accepted": float(np.mean(ch)) if ch else np.nan,
                     "chain_rounds": len(ch), "tree_mean_accepted": float(tree.mean()) if tree.size else np.nan,
                     "tree_rounds": int(tree.size),
                     "tree_over_chain": (float(tree.mean()) + 1) / (float(np.mean(ch)) + 1) if ch and tree.size else np.nan})
    return pd.DataFrame(rows).set_index("node_budget")
