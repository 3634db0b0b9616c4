#!/usr/bin/env python3
"""Print the PROVENANCE.md section of a tree trace (numbers read back from the file).

  python scripts/tree_trace_provenance.py traces/qwc-0.5b-1.5b_tree_moe.npz --chain traces/qwc-0.5b-1.5b_greedy.npz
"""
import argparse
import os
import sys

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ahasd_sim.traces.format import load_trace  # noqa: E402
from ahasd_sim.traces.tree_stats import (acceptance_by_category, acceptance_table, chain_crosscheck,  # noqa: E402
                                                 chain_vs_tree, load_balance_table, routing_table)
from ahasd_sim.traces.tree import load_tree_trace  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--chain", required=True)
    a = ap.parse_args()
    tt = load_tree_trace(a.trace)
    ch = load_trace(a.chain)
    h, m, tr = tt.header, tt.header["moe"], tt.header["tree"]
    P = h["prompts"]
    wall = sum(p["t_total_s"] for p in P)
    print(f"## {os.path.basename(a.trace)}\n")
    print(f"- draft trees: depth {tr['depth']}, top_k {tr['top_k']} children, beam {tr['beam']}, node budget "
          f"{tr['node_budget']} (+ root), drafter top-{h['drf_top_k']} stored per expanded node; greedy target")
    print(f"- {len(P)} prompts (of {h['n_selected_prompts']} selected, the chain traces' first {len(P)}), "
          f"{len(tt)} rounds, {tt.node_tok.size} nodes, {tt.commit_tok.size} committed tokens, max_new {h['max_new']}; "
          f"file {os.path.getsize(a.trace) / 1e6:.2f} MB")
    print(f"- routing: {m['label']} -- E={m['n_experts']} experts x k={m['k']} per layer, {m['n_layers']} layers, "
          f"d_ff {m['d_ff']}; partition: {m['partition_method']}; partition sha256 {m['partition_sha256'][:16]}...; "
          f"gate: {m['gate']}; weights {m['gate_weight_resolution']}")
    stops = pd.Series([p["stop"] for p in P]).value_counts().to_dict()
    print(f"- responses: {stops}; mean prompt {np.mean([p['prompt_len'] for p in P]):.0f} tokens")
    print(f"- generation wall time {wall / 60:.1f} min ({tt.commit_tok.size / wall:.2f} committed tokens/s, "
          f"{tt.node_tok.size / wall:.1f} verified nodes/s incl. prefill), {h['hardware']}, `nice -n 10`, on a 2-core "
          f"VM shared with other jobs; mean per round: tree growth {np.mean(tt.round_draft_s):.1f} s, one target "
          f"verification {np.mean(tt.round_verify_s):.1f} s")
    print(f"- generator {h['generator_version']} ({h['backend_version']}), date {h['date']}; prompt sources: "
          f"{', '.join(h['prompt_sources'])}\n")
    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.precision", 3):
        for title, df in (("Accepted drafted tokens per round by tree (cut from the recorded trees at the recorded "
                           "roots; CI over prompts)", acceptance_table(tt)),
                          ("Per category, EAGLE-2 top-N trees", acceptance_by_category(tt)),
                          ("Chain (k = N, replayed from the chain trace over the same prompts and response span) vs "
                           "tree top-N at equal node budgets", chain_vs_tree(tt, ch)),
                          ("Top-1 chain cut vs the chain trace (rounds x depths before the first token divergence)",
                           chain_crosscheck(tt, ch)),
                          ("Experts touched per layer vs tokens in a step (E = 64, k = 8)", routing_table(tt)),
                          ("Load balance over committed tokens (per layer; last row the mean)",
                           load_balance_table(tt).loc[["mean"]])):
            print(f"{title}:\n\n```\n{df.to_string()}\n```\n")
    print("Prompts: " + ", ".join(f"{p['id']} ({p['category']}, {p['n_generated']})" for p in P))


if __name__ == "__main__":
    main()
