#!/usr/bin/env python3
"""Check the cb_eval routing capture on a real dense GGUF (needs llama-cpp-python and the model).

1. the captured ``ffn_swiglu-<l>`` equals silu(``ffn_gate-<l>``) * ``ffn_up-<l>`` captured in the
   same pass (layout, strides, dtype of the ctypes tensor view);
2. the collector's routing equals a direct top-k of the expert masses of the captured activations;
3. token order: a token's routing in a multi-token batch equals its routing when decoded alone at
   the same position (same context), up to near-ties of the expert masses.

  python scripts/check_moe_capture.py --target T.gguf --partition P.npy [--threads 1]
"""
import argparse
import ctypes
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ahasd_sim.traces.record import moefy  # noqa: E402
from ahasd_sim.traces.record.tree import SeqLlama  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--partition", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--k", type=int, default=8)
    a = ap.parse_args()
    labels = np.load(a.partition)
    L, E = labels.shape[0], int(labels.max()) + 1
    coll = moefy.RoutingCollector(L, a.k, E, labels)
    raw = {}

    def cb(tptr, ask, _):
        t = moefy.GGMLTensor.from_address(tptr)
        name = t.name.decode()
        want = coll.active and name.split("-")[0] in ("ffn_gate", "ffn_up", "ffn_swiglu")
        if ask:
            return want
        if want:
            arr = moefy.tensor_to_numpy(t)
            raw[name] = arr
            coll.on_tensor(name, arr)
        return True

    cbf = moefy.CB_EVAL_TYPE(cb)
    m = SeqLlama(a.target, 512, a.threads, n_seq=2, cb_eval=cbf)
    toks = m.tokenize("<|im_start|>user\nWrite a haiku about caches.<|im_end|>\n<|im_start|>assistant\n")
    n = len(toks)
    coll.active = True
    coll.reset()
    m.decode(toks, range(n), [[0]] * n, [True] * n)
    ids_b, _ = coll.result(n)
    err = 0.0
    for l in range(L):
        g, u, s = raw[f"ffn_gate-{l}"], raw[f"ffn_up-{l}"], raw[f"ffn_swiglu-{l}"]
        ref = g / (1 + np.exp(-g)) * u
        err = max(err, float(np.abs(ref - s).max() / (np.abs(ref).max() + 1e-9)))
        dids, _ = moefy.topk_route(moefy.expert_mass(s, labels[l], E), a.k)
        assert np.array_equal(dids, ids_b[:, l]), f"layer {l}: collector != direct top-k"
    # token order: re-decode the last 3 tokens one by one (same positions, same context)
    m.seq_rm(0, n - 3, -1)
    same, total = 0, 0
    for i in range(n - 3, n):
        coll.reset()
        m.decode([toks[i]], [i], [[0]], [True])
        ids1, _ = coll.result(1)
        for l in range(L):
            same += len(set(ids1[0, l]) & set(ids_b[i, l]))
            total += a.k
    out = {"n_tokens": n, "layers": L, "max_rel_err_swiglu_vs_silu_gate_times_up": err,
           "collector_equals_direct_topk": True,
           "single_vs_batched_expert_overlap": same / total}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
