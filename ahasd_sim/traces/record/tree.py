"""Record draft-tree traces (format ``ahasd-tree-trace``, traces/README.md) from a real
drafter/target GGUF pair with llama-cpp-python, with MoE routing of every node.

  python -m ahasd_sim traces record --kind tree --work-dir W --target T.gguf --drafter D.gguf \
      --partition W/partition.npy            # records prompt shards (resumable)
  python -m ahasd_sim traces record --kind tree --work-dir W --assemble traces/x_tree.npz

Per round (EAGLE-2-style growth): the drafter expands, level by level, the ``beam`` candidates
with the largest cumulative draft probability (plus its top-1 chain, always), each with its
``top_k`` most likely children, up to ``depth``; the tree keeps the ``node_budget`` best nodes
by cumulative probability (top-1 chain first).  The target verifies root + tree in ONE
``llama_decode``: every token carries the sequence ids of the leaves below it (llama.cpp
multi-sequence batch = tree attention), the prefix KV is shared by all leaf sequences.  The
accepted path and the target's correction token are committed; the path's KV is kept.
Routing: ``cb_eval`` captures ``ffn_swiglu-<l>`` (MoEfied dense target) or ``ffn_moe_topk-<l>``
(a real MoE GGUF) during the verification decode and reduces it to top-k experts on the fly.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import sys
import time

import numpy as np

from . import moefy
from .. import tree as TT
from .workdir import prepare, saved_settings, shard_path
from .chain import (DEFAULT_CATEGORIES, EOS_IDS, SYSTEM_PROMPT, chatml, entropy, log, select_prompts,
                           sha256_file, softmax)

GENERATOR_VERSION = "record_tree/1.0"
GATE_WEIGHT_LEVELS = 256  # shipped gate weights are multiples of 1/256 (repository size)


class SeqLlama:
    """One llama.cpp context with ``n_seq`` sequences in a unified KV cache (+ optional cb_eval)."""

    def __init__(self, path: str, n_ctx: int, n_threads: int, n_seq: int, n_batch: int = 512, cb_eval=None,
                 extra_bufts: bool = False):
        import llama_cpp as L
        import llama_cpp.llama_cpp as C
        self.L = L
        default = C.llama_model_default_params
        if not extra_bufts:
            # no extra CPU buffer types (AMX / repacked weights): the AMX kernels of a native
            # build crash on VMs that report AMX but do not grant it (seen on the 2-core box)
            def _params():
                p = default()
                p.use_extra_bufts = False
                return p
            C.llama_model_default_params = _params
        try:
            self.llm = L.Llama(model_path=path, n_ctx=n_ctx, n_batch=n_batch, n_ubatch=n_batch, n_threads=n_threads,
                               n_threads_batch=n_threads, logits_all=False, verbose=False)
        finally:
            C.llama_model_default_params = default
        p = L.llama_context_params.from_buffer_copy(self.llm.context_params)
        p.n_seq_max, p.kv_unified = n_seq, True
        if cb_eval is not None:
            p.cb_eval = cb_eval
            p.cb_eval_user_data = None
        self._cb = cb_eval  # keep the ctypes callback alive
        self.ctx = L.llama_init_from_model(self.llm._model.model, p)
        if not self.ctx:
            raise RuntimeError("llama_init_from_model failed")
        self.n_vocab = int(self.llm.n_vocab())
        self.n_batch = n_batch
        self.n_seq = n_seq
        self.batch = L.llama_batch_init(n_batch, 0, n_seq)
        self.mem = L.llama_get_memory(self.ctx)
        self.n_layers = int(L.llama_model_n_layer(self.llm._model.model))

    def tokenize(self, text: str):
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def decode(self, toks, pos, seqs, logits) -> np.ndarray:
        """One batch: token i at position pos[i] in sequences seqs[i]; rows of the logits wanted."""
        L, b = self.L, self.batch
        n = len(toks)
        if n > self.n_batch:
            raise RuntimeError(f"batch of {n} > n_batch {self.n_batch}")
        b.n_tokens = n
        for i in range(n):
            b.token[i] = int(toks[i])
            b.pos[i] = int(pos[i])
            b.n_seq_id[i] = len(seqs[i])
            for j, s in enumerate(seqs[i]):
                b.seq_id[i][j] = int(s)
            b.logits[i] = 1 if logits[i] else 0
        rc = L.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode failed with code {rc}")
        rows = [np.ctypeslib.as_array(L.llama_get_logits_ith(self.ctx, i), shape=(self.n_vocab,)).copy()
                for i in range(n) if logits[i]]
        return np.stack(rows) if rows else np.zeros((0, self.n_vocab), np.float32)

    def prefill(self, toks, pos0: int) -> None:
        """Sequence 0, positions pos0.., no logits (chunks of n_batch)."""
        for c in range(0, len(toks), self.n_batch):
            chunk = toks[c:c + self.n_batch]
            self.decode(chunk, range(pos0 + c, pos0 + c + len(chunk)), [[0]] * len(chunk), [False] * len(chunk))

    def seq_rm(self, s, p0=-1, p1=-1):
        self.L.llama_memory_seq_rm(self.mem, s, p0, p1)

    def seq_cp(self, src, dst, p0=-1, p1=-1):
        self.L.llama_memory_seq_cp(self.mem, src, dst, p0, p1)


def _topk(q: np.ndarray, K: int):
    part = np.argpartition(-q, K)[:K]
    top = part[np.argsort(-q[part], kind="stable")]
    a = int(np.argmax(q))
    if top[0] != a:  # ties: the argmax first, as the chain recorder does
        top = np.r_[a, top[top != a]][:K]
    return top.astype(np.int64), q[top]


def grow_tree(drf: SeqLlama, root_dist: np.ndarray, root_pos: int, cfg):
    """EAGLE-2-style growth; returns candidate nodes (list of dicts, root first) and selection."""
    D, k, beam, K, budget = cfg["depth"], cfg["top_k"], cfg["beam"], cfg["drf_top_k"], cfg["node_budget"]
    nodes = [{"parent": -1, "depth": 0, "tok": None, "rank": -1, "q": 1.0, "cum": 1.0, "H": float("nan"),
              "dist": root_dist, "seq": 0, "chain": True}]
    frontier = [0]
    next_seq = 1
    for d in range(1, D + 1):
        level = []
        for v in frontier:
            qv = nodes[v]["dist"]
            top, tp = _topk(qv, K)
            nodes[v]["topk"] = (top, tp)
            nodes[v]["ctx_H"] = entropy(qv)
            for c in range(k):
                nodes.append({"parent": v, "depth": d, "tok": int(top[c]), "rank": c, "q": float(tp[c]),
                              "cum": nodes[v]["cum"] * float(tp[c]), "H": nodes[v]["ctx_H"], "dist": None,
                              "chain": nodes[v]["chain"] and c == 0})
                level.append(len(nodes) - 1)
        if d == D:
            break
        order = sorted(level, key=lambda j: (-nodes[j]["cum"], j))
        chosen = order[:beam]
        for j in level:
            if nodes[j]["chain"] and j not in chosen:
                chosen.append(j)
        # run the drafter at each chosen node's context: own sequence forked from the parent's
        toks, pos, seqs = [], [], []
        for j in chosen:
            s = next_seq
            next_seq += 1
            if s >= drf.n_seq:
                raise RuntimeError(f"drafter needs more than n_seq={drf.n_seq} sequences")
            drf.seq_rm(s)
            drf.seq_cp(nodes[nodes[j]["parent"]]["seq"], s)
            nodes[j]["seq"] = s
            toks.append(nodes[j]["tok"])
            pos.append(root_pos + d)
            seqs.append([s])
        rows = drf.decode(toks, pos, seqs, [True] * len(toks))
        for j, row in zip(chosen, rows):
            nodes[j]["dist"] = softmax(row)
        frontier = chosen
    for v in frontier:  # record the last expanded level's own-context top-K / entropy
        if "topk" not in nodes[v]:
            nodes[v]["topk"] = _topk(nodes[v]["dist"], K)
            nodes[v]["ctx_H"] = entropy(nodes[v]["dist"])
    for s in range(1, next_seq):
        drf.seq_rm(s)
    # selection: chain first, then by cumulative probability; a node only after its parent
    cand = sorted(range(1, len(nodes)), key=lambda j: (not nodes[j]["chain"], -nodes[j]["cum"], j))
    sel = {0}
    changed = True
    while changed and len(sel) - 1 < budget:
        changed = False
        for j in cand:
            if len(sel) - 1 >= budget:
                break
            if j not in sel and nodes[j]["parent"] in sel:
                sel.add(j)
                changed = True
                break
    keep = sorted(sel, key=lambda j: (nodes[j]["depth"], -nodes[j]["cum"], j))
    return nodes, keep


def verify_tree(tgt: SeqLlama, coll: moefy.RoutingCollector, nodes, keep, root_pos: int):
    """One target decode over root + kept nodes; returns (local parents, target dists, routing)."""
    loc = {g: i for i, g in enumerate(keep)}
    parent = [-1] + [loc[nodes[g]["parent"]] for g in keep[1:]]
    n = len(keep)
    has_child = set(parent[1:])
    leaves = [i for i in range(n) if i not in has_child]
    if len(leaves) + 1 > tgt.n_seq:
        raise RuntimeError(f"{len(leaves)} leaves need more than n_seq={tgt.n_seq} sequences")
    seqs = [set() for _ in range(n)]
    for li, leaf in enumerate(leaves):
        s = li + 1
        tgt.seq_rm(s)
        tgt.seq_cp(0, s, -1, root_pos)  # the committed prefix is shared by every leaf sequence
        j = leaf
        while j >= 0:
            seqs[j].add(s)
            j = parent[j]
    seqs[0].add(0)
    toks = [nodes[g]["tok"] for g in keep]
    pos = [root_pos + nodes[g]["depth"] for g in keep]
    coll.reset()
    coll.active = True
    try:
        rows = tgt.decode(toks, pos, [sorted(s) for s in seqs], [True] * n)
    finally:
        coll.active = False
    if getattr(coll, "error", None) is not None:
        raise RuntimeError(f"routing capture failed: {coll.error}")
    ids, w = coll.result(n)
    return parent, rows, ids, w, leaves, seqs


def record_prompt(tgt, drf, coll, prompt_tokens, cfg):
    P = len(prompt_tokens)
    t0 = time.time()
    for m in (tgt, drf):
        for s in range(m.n_seq):
            m.seq_rm(s)
    tgt.prefill(prompt_tokens[:-1], 0)
    drf.prefill(prompt_tokens[:-1], 0)
    t_prefill = time.time() - t0
    K = cfg["drf_top_k"]
    root_tok, root_pos = int(prompt_tokens[-1]), P - 1
    pending = [root_tok]  # drafter seq 0 still has to see these (positions up to root_pos)
    cols = {c: [] for c in list(TT.ROUND_COLUMNS) + list(TT.NODE_COLUMNS) + list(TT.COMMIT_COLUMNS)
            + ["round_draft_s", "round_verify_s"]}
    n_done, nbase, stop = 0, 0, "max_new"
    prev_corr = None  # commit index of the previous correction token (routed by the next root)
    while True:
        ta = time.time()
        rows = drf.decode(pending, range(root_pos - len(pending) + 1, root_pos + 1), [[0]] * len(pending),
                          [False] * (len(pending) - 1) + [True])
        nodes, keep = grow_tree(drf, softmax(rows[-1]), root_pos, cfg)
        nodes[0]["tok"] = root_tok
        tb = time.time()
        parent, trows, ids, w, leaves, seqs = verify_tree(tgt, coll, nodes, keep, root_pos)
        tc = time.time()
        n = len(keep)
        ptgt = [softmax(r) for r in trows]
        tgt_tok = [int(np.argmax(p)) for p in ptgt]
        tok = [nodes[g]["tok"] for g in keep]
        dep = [nodes[g]["depth"] for g in keep]
        acc = [True] + [tok[i] == tgt_tok[parent[i]] for i in range(1, n)]
        path = TT.accepted_path(np.array(parent), np.array(acc), np.array(dep))
        commit = [tok[i] for i in path] + [tgt_tok[path[-1] if path else 0]]
        cnode = [nbase + i for i in path] + [-1]
        for i, c in enumerate(commit):
            if c in EOS_IDS:
                commit, cnode, stop = commit[:i + 1], cnode[:i + 1], "eos"
                break
        if len(commit) >= cfg["max_new"] - n_done:
            commit, cnode = commit[:cfg["max_new"] - n_done], cnode[:cfg["max_new"] - n_done]
            stop = "eos" if commit[-1] in EOS_IDS else "max_new"
        r = len(cols["round_pos"])
        cols["round_prompt"].append(0)
        cols["round_category"].append(0)
        cols["round_pos"].append(n_done)
        cols["round_node_offset"].append(nbase)
        cols["round_n_nodes"].append(n)
        cols["round_accept_len"].append(len(path))
        cols["round_commit_offset"].append(len(cols["commit_tok"]))
        cols["round_n_commit"].append(len(commit))
        cols["round_draft_s"].append(tb - ta)
        cols["round_verify_s"].append(tc - tb)
        for i, g in enumerate(keep):
            nd = nodes[g]
            cols["node_parent"].append(parent[i])
            cols["node_depth"].append(dep[i])
            cols["node_tok"].append(tok[i])
            cols["node_rank"].append(nd["rank"])
            cols["node_q"].append(nd["q"])
            cols["node_drf_H"].append(nd["H"])
            cols["node_tgt_p_tok"].append(float("nan") if i == 0 else float(ptgt[parent[i]][tok[i]]))
            cols["node_accept"].append(acc[i])
            cols["node_tgt"].append(tgt_tok[i])
            cols["node_tgt_p"].append(float(ptgt[i][tgt_tok[i]]))
            cols["node_tgt_H"].append(entropy(ptgt[i]))
            e = "topk" in nd
            cols["node_expanded"].append(e)
            cols["node_ctx_drf_H"].append(nd["ctx_H"] if e else float("nan"))
            cols["node_topk_ids"].append(nd["topk"][0] if e else np.full(K, -1))
            cols["node_topk_p"].append(nd["topk"][1] if e else np.zeros(K))
        cols["node_moe_ids"].append(ids)
        cols["node_moe_w"].append(w)
        if prev_corr is not None:
            cols["commit_node"][prev_corr] = nbase
        cols["commit_tok"].extend(commit)
        cols["commit_node"].extend(cnode)
        prev_corr = len(cols["commit_tok"]) - 1 if cnode[-1] == -1 else None
        n_done += len(commit)
        nbase += n
        # keep the accepted path's KV in seq 0 of the target, drop the rest of the tree
        if path:
            leaf_seq = min(seqs[path[-1]])
            tgt.seq_cp(leaf_seq, 0, root_pos + 1, root_pos + 1 + len(path))
        for li in range(len(leaves)):
            tgt.seq_rm(li + 1)
        tgt.seq_rm(0, root_pos + 1 + len(path), -1)
        if stop == "eos" or n_done >= cfg["max_new"]:
            break
        pending = [tok[i] for i in path] + [commit[-1]]
        root_pos += len(path) + 1
        root_tok = commit[-1]
    info = {"prompt_len": P, "n_generated": n_done, "stop": stop, "n_rounds": len(cols["round_pos"]),
            "n_nodes": nbase, "t_prefill_s": round(t_prefill, 2), "t_total_s": round(time.time() - t0, 2),
            "generator_version": GENERATOR_VERSION}
    out = {}
    for name, a in cols.items():
        if name in ("node_moe_ids", "node_moe_w"):
            a = np.concatenate(a, axis=0)
        spec = {**TT.ALL_COLUMNS, **TT.OPTIONAL_COLUMNS}[name]
        dt = spec[2]
        if name == "node_moe_ids" and cfg["n_experts"] > 256:
            dt = np.int16
        out[name] = np.asarray(a).astype(dt)
    return out, info


# ------------------------------------------------------------------------------------------
# driver
# ------------------------------------------------------------------------------------------
def _models(cfg):
    L = cfg["n_layers"]
    labels = np.load(cfg["partition"]) if cfg["moe_source"] == "moefied" else None
    coll = moefy.RoutingCollector(L, cfg["moe_k"], cfg["n_experts"], labels)
    cb = moefy.make_cb_eval(coll)
    xb = bool(cfg.get("extra_bufts", False))
    tgt = SeqLlama(cfg["target"], cfg["n_ctx"], cfg["threads"], n_seq=cfg["node_budget"] + 2, cb_eval=cb, extra_bufts=xb)
    if tgt.n_layers != L:
        raise SystemExit(f"target has {tgt.n_layers} layers, partition/config says {L}")
    drf = SeqLlama(cfg["drafter"], cfg["n_ctx"], cfg["threads"],
                   n_seq=2 + (cfg["beam"] + 1) * max(cfg["depth"] - 1, 1), extra_bufts=xb)
    return tgt, drf, coll


def cmd_run(args, cfg, prompts):
    todo = [p for p in prompts if not os.path.exists(shard_path(args.work_dir, p["index"]))]
    if args.limit is not None:
        todo = [p for p in todo if p["index"] < args.limit]
    log(f"{len(prompts)} prompts selected, {len(todo)} to do (limit {args.limit})")
    if not todo:
        return
    tgt, drf, coll = _models(cfg)
    for p in todo:
        toks = tgt.tokenize(chatml(p["text"]))
        cols, info = record_prompt(tgt, drf, coll, toks, cfg)
        info.update({k: p[k] for k in ("index", "id", "source", "category")})
        info["text_sha256"] = hashlib.sha256(p["text"].encode()).hexdigest()[:16]
        path = shard_path(args.work_dir, p["index"])
        tmp = path + ".tmp.npz"
        np.savez_compressed(tmp, header_json=np.array(json.dumps(info)), **cols)
        os.replace(tmp, path)
        nr = max(info["n_rounds"], 1)
        log(f"prompt {p['index']} {p['id']} [{p['category']}] P={info['prompt_len']} n={info['n_generated']} "
            f"rounds={nr} mean_accept={np.mean(cols['round_accept_len']):.2f} nodes/round={info['n_nodes'] / nr:.1f} "
            f"{info['t_total_s']:.1f}s ({info['n_generated'] / max(info['t_total_s'], 1e-9):.2f} tok/s)")


def cmd_assemble(args, cfg, prompts, out_path):
    parts, infos = [], []
    for p in prompts:
        sp = shard_path(args.work_dir, p["index"])
        if not os.path.exists(sp):
            continue
        with np.load(sp, allow_pickle=False) as z:
            info = json.loads(str(z["header_json"][()]))
            cols = {k: z[k] for k in z.files if k != "header_json"}
        cols["round_prompt"][:] = len(infos)
        cols["round_category"][:] = cfg["categories"].index(p["category"])
        infos.append(info)
        parts.append(cols)
    if not parts:
        raise SystemExit("no finished shards to assemble")
    cols = TT.concat_rounds(parts)
    cols["node_moe_w"] = TT.quantize_gate_weights(cols["node_moe_w"], GATE_WEIGHT_LEVELS)
    moe = {"label": cfg["moe_label"], "n_experts": cfg["n_experts"], "k": cfg["moe_k"], "n_layers": cfg["n_layers"],
           "source": cfg["moe_source"], "weights_normalized": True,
           "gate_weight_resolution": f"1/{GATE_WEIGHT_LEVELS} (largest-remainder rounding; rows sum to 1)"}
    if cfg["moe_source"] == "moefied":
        lab = np.load(cfg["partition"])
        cols["moe_partition"] = lab
        moe.update(cfg.get("partition_info", {}))
        moe["d_ff"] = int(lab.shape[1])
        moe["partition_sha256"] = hashlib.sha256(np.ascontiguousarray(lab.astype(np.uint8)).tobytes()).hexdigest()
        moe["gate"] = ("activation mass: sum over the expert's neurons of |SwiGLU activation| (llama.cpp tensor "
                       "ffn_swiglu-<layer>), top-k by mass, weights = mass / sum of the top-k masses")
        moe["captured_tensor"] = "ffn_swiglu-<layer>"
    else:
        moe["captured_tensor"] = "ffn_moe_topk-<layer>, ffn_moe_weights(_norm)-<layer>"
    header = {
        "format": TT.FORMAT_NAME, "format_version": TT.FORMAT_VERSION, "kind": "tree", "mode": "greedy",
        "entropy_softmax_temperature": 1.0, "categories": cfg["categories"], "prompts": infos,
        "drf_top_k": cfg["drf_top_k"], "max_new": cfg["max_new"],
        "tree": {"depth": cfg["depth"], "top_k": cfg["top_k"], "node_budget": cfg["node_budget"], "beam": cfg["beam"],
                 "growth": "EAGLE-2-style: expand the `beam` best nodes per level by cumulative drafter probability "
                           "(+ the drafter's top-1 chain), top_k children each; keep the node_budget best nodes "
                           "(top-1 chain first); verified in one target decode (multi-sequence tree attention)"},
        "moe": moe, "models": cfg["models"], "tokenizer": cfg["tokenizer"], "chat_template": "ChatML",
        "system_prompt": SYSTEM_PROMPT, "eos_ids": sorted(EOS_IDS), "backend": "gguf",
        "backend_version": cfg.get("backend_version"), "generator": "ahasd_sim.traces.record.tree",
        "generator_version": GENERATOR_VERSION, "threads": cfg["threads"], "hardware": cfg.get("hardware"),
        "date": _dt.date.today().isoformat(), "prompt_sources": sorted({i["source"] for i in infos}),
        "n_selected_prompts": len(prompts), "prompt_selection": "same as the chain traces (record_chain.select_prompts)",
    }
    TT.write_tree_trace(out_path, header, cols)
    tt = TT.load_tree_trace(out_path)
    log(f"wrote {out_path}: {len(tt)} rounds, {tt.node_tok.size} nodes, {len(infos)} prompts, "
        f"{os.path.getsize(out_path) / 1e6:.2f} MB")


def main(argv=None):
    from ...cli_common import ArgumentParser   # one-line usage errors, like every entry point
    ap = ArgumentParser(prog="python -m ahasd_sim traces record --kind tree", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work-dir", required=True, help="shards + run config live here (resumable)")
    ap.add_argument("--target", help="target GGUF")
    ap.add_argument("--drafter", help="drafter GGUF")
    ap.add_argument("--target-name", default="Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M)")
    ap.add_argument("--drafter-name", default="Qwen2.5-Coder-0.5B-Instruct (AWQ->GGUF, mixed Q5_0/Q8_0/Q6_K/Q4_K)")
    ap.add_argument("--tokenizer", default="Qwen2 BPE (gpt2/qwen2 pre), 151936 ids, shared by both models")
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--top-k", type=int, default=4, help="children per expanded node")
    ap.add_argument("--beam", type=int, default=4, help="nodes expanded per level (+ the top-1 chain)")
    ap.add_argument("--node-budget", type=int, default=64, help="drafted nodes kept per round (root excluded)")
    ap.add_argument("--drf-top-k", type=int, default=8, help="drafter top-K stored per expanded node")
    ap.add_argument("--max-new", type=int, default=64)
    ap.add_argument("--moe-source", choices=["moefied", "native"], default="moefied")
    ap.add_argument("--partition", help="moefied: (L, d_ff) .npy of expert ids (built with --build-partition)")
    ap.add_argument("--build-partition", action="store_true", help="build the MoEfication partition from --target")
    ap.add_argument("--n-experts", type=int, default=64)
    ap.add_argument("--moe-k", type=int, default=8)
    ap.add_argument("--moe-label", default=TT.MOEFIED_LABEL)
    ap.add_argument("--categories", nargs="+", default=DEFAULT_CATEGORIES)
    ap.add_argument("--n-per-category", type=int, default=10)
    ap.add_argument("--prompt-seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--limit", type=int, help="record only prompts with index < LIMIT")
    ap.add_argument("--extra-bufts", action="store_true",
                    help="let llama.cpp use extra CPU buffer types (weight repacking, AMX); off by default")
    ap.add_argument("--assemble", metavar="OUT.npz")
    args = ap.parse_args(argv)
    cfg_path, prm_path = prepare(args.work_dir)
    saved = saved_settings(args.work_dir)
    if saved is not None:
        cfg, prompts = saved
        log(f"resuming {args.work_dir} (settings from config.json)")
    else:
        if not (args.target and args.drafter):
            raise SystemExit("--target and --drafter are required for a new work dir")
        part = args.partition or os.path.join(args.work_dir, "partition.npy")
        pinfo = {}
        if args.moe_source == "moefied":
            if args.build_partition or not os.path.exists(part):
                lab, pinfo = moefy.partition_from_gguf(args.target, args.n_experts, log=log)
                np.save(part, lab.astype(np.uint8 if args.n_experts <= 256 else np.int16))
            elif os.path.exists(os.path.splitext(part)[0] + ".json"):
                with open(os.path.splitext(part)[0] + ".json") as f:
                    pinfo = {k: v for k, v in json.load(f).items() if k != "wall_s"}
            n_layers = int(np.load(part).shape[0])
        else:
            import gguf
            r = gguf.GGUFReader(args.target)
            n_layers = 1 + max(int(t.name.split(".")[1]) for t in r.tensors if t.name.startswith("blk."))
        models = {}
        for role, path, name in (("target", args.target, args.target_name), ("drafter", args.drafter, args.drafter_name)):
            models[role] = {"name": name, "file": os.path.basename(path), "sha256": sha256_file(path),
                            "size_bytes": os.path.getsize(path)}
        try:
            import llama_cpp
            bver = f"llama-cpp-python=={llama_cpp.__version__}"
        except ImportError:
            bver = None
        cfg = {"target": os.path.abspath(args.target), "drafter": os.path.abspath(args.drafter), "models": models,
               "tokenizer": args.tokenizer, "depth": args.depth, "top_k": args.top_k, "beam": args.beam,
               "node_budget": args.node_budget, "drf_top_k": args.drf_top_k, "max_new": args.max_new,
               "moe_source": args.moe_source, "partition": os.path.abspath(part), "partition_info": pinfo,
               "n_experts": args.n_experts, "moe_k": args.moe_k, "moe_label": args.moe_label, "n_layers": n_layers,
               "categories": args.categories, "threads": args.threads, "n_ctx": args.n_ctx, "backend_version": bver,
               "extra_bufts": bool(args.extra_bufts),
               "hardware": f"{os.cpu_count()} CPU cores, n_threads={args.threads}"}
        prompts = select_prompts(args.categories, args.n_per_category, args.prompt_seed)
        with open(prm_path, "w") as f:
            json.dump(prompts, f, indent=1)
        with open(cfg_path, "w") as f:
            json.dump(cfg, f, indent=1)
    if args.assemble:
        cmd_assemble(args, cfg, prompts, args.assemble)
    else:
        cmd_run(args, cfg, prompts)


if __name__ == "__main__":
    main(sys.argv[1:])
