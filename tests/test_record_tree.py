"""The tree recorder's bookkeeping (tree growth, multi-sequence verification, KV rollback,
commits, routing) on fake models that emulate llama.cpp's sequence rules -- no llama-cpp-python.

The fake KV cache enforces llama.cpp's batch rules (a sequence's batch positions continue its
cached positions; coupled sequences share their cached range) and every token's logits are a
deterministic function of the context the fake cache *actually* holds for it, so any
bookkeeping error changes the output.  Tree speculative decoding with greedy verification is
lossless: the committed tokens must equal plain greedy decoding of the fake target."""

import hashlib

import numpy as np
import pytest

from ahasd_sim.traces.record import tree as RT
from ahasd_sim.traces.record.moefy import RoutingCollector
from ahasd_sim.traces.tree import TreeTrace, concat_rounds, validate_columns

V, LAYERS, D_FF, E, K_MOE = 40, 3, 16, 4, 2


def _h(ctx, salt):
    return int.from_bytes(hashlib.sha256((salt + ",".join(map(str, ctx))).encode()).digest()[:8], "little")


def fake_logits(ctx, salt, noise_salt=None):
    """Peaked logits depending on the last 3 tokens; the drafter shares the base and adds noise."""
    rng = np.random.default_rng(_h(ctx[-3:], salt))
    z = rng.standard_normal(V) * 3.0
    if noise_salt is not None:
        z = z + np.random.default_rng(_h(ctx[-3:], noise_salt)).standard_normal(V) * 1.5
    return z.astype(np.float32)


class FakeLM:
    def __init__(self, n_seq, salt, noise_salt=None, coll=None):
        self.n_seq, self.salt, self.noise_salt, self.coll = n_seq, salt, noise_salt, coll
        self.n_vocab, self.n_layers, self.n_batch = V, LAYERS, 512
        self.kv = {s: {} for s in range(n_seq)}   # seq -> {pos: token}

    def seq_rm(self, s, p0=-1, p1=-1):
        lo, hi = (0 if p0 < 0 else p0), (10 ** 9 if p1 < 0 else p1)
        self.kv[s] = {p: t for p, t in self.kv[s].items() if not lo <= p < hi}

    def seq_cp(self, src, dst, p0=-1, p1=-1):
        lo, hi = (0 if p0 < 0 else p0), (10 ** 9 if p1 < 0 else p1)
        self.kv[dst].update({p: t for p, t in self.kv[src].items() if lo <= p < hi})

    def _ctx(self, s, pos):
        c = self.kv[s]
        assert all(p in c for p in range(pos)), f"seq {s} lacks positions below {pos}"
        return [c[p] for p in range(pos)]

    def decode(self, toks, pos, seqs, logits):
        pos = list(pos)
        first = {}
        for i, ss in enumerate(seqs):
            for s in ss:
                first.setdefault(s, pos[i])
        for s, p in first.items():  # llama.cpp: Y = X + 1
            assert max(self.kv[s], default=-1) + 1 == p, f"seq {s}: cache ends {max(self.kv[s], default=-1)}, batch starts {p}"
        rows, acts = [], []
        for i, t in enumerate(toks):
            ctxs = {tuple(self._ctx(s, pos[i])) for s in seqs[i]}
            assert len(ctxs) == 1, "sequences of one token disagree on its context"
            ctx = list(next(iter(ctxs))) + [int(t)]
            for s in seqs[i]:
                self.kv[s][pos[i]] = int(t)
            if logits[i]:
                rows.append(fake_logits(ctx, self.salt, self.noise_salt))
            acts.append(np.random.default_rng(_h(ctx[-2:], "act")).standard_normal((LAYERS, D_FF)))
        if self.coll is not None and self.coll.active:
            a = np.stack(acts).astype(np.float32)
            for l in range(LAYERS):
                self.coll.on_tensor(f"ffn_swiglu-{l}", a[:, l, :])
        return np.stack(rows) if rows else np.zeros((0, V), np.float32)

    def prefill(self, toks, pos0):
        n = len(toks)
        if n:
            self.decode(toks, range(pos0, pos0 + n), [[0]] * n, [False] * n)


def greedy_reference(prompt, n, eos):
    ctx, out = list(prompt), []
    for _ in range(n):
        t = int(np.argmax(fake_logits(ctx, "tgt")))
        out.append(t)
        ctx.append(t)
        if t in eos:
            break
    return out


@pytest.mark.parametrize("depth,top_k,beam,budget", [(4, 3, 3, 20), (3, 2, 2, 6), (5, 1, 1, 5)])
def test_recorded_commits_equal_greedy_decoding_and_validate(depth, top_k, beam, budget, monkeypatch):
    monkeypatch.setattr(RT, "EOS_IDS", {39})
    labels = np.stack([np.arange(D_FF) % E for _ in range(LAYERS)])
    coll = RoutingCollector(LAYERS, K_MOE, E, labels)
    tgt = FakeLM(budget + 2, "tgt", coll=coll)
    drf = FakeLM(2 + (beam + 1) * depth, "tgt", noise_salt="drf")
    cfg = {"depth": depth, "top_k": top_k, "beam": beam, "node_budget": budget, "drf_top_k": 4,
           "max_new": 40, "n_experts": E}
    parts = []
    for prompt in ([1, 2, 3, 4, 5], [7, 8, 9]):
        cols, info = RT.record_prompt(tgt, drf, coll, prompt, cfg)
        ref = greedy_reference(prompt, 40, {39})
        assert cols["commit_tok"].tolist() == ref
        assert info["n_generated"] == len(ref)
        parts.append(cols)
    cols = concat_rounds(parts)
    cols["round_prompt"][:] = np.repeat([0, 1], [len(p["round_pos"]) for p in parts])
    header = {"format": "ahasd-tree-trace", "format_version": 1, "kind": "tree", "categories": ["x"],
              "prompts": [{}, {}], "drf_top_k": 4,
              "tree": {"depth": depth, "top_k": top_k, "node_budget": budget},
              "moe": {"label": "fake", "n_experts": E, "k": K_MOE, "n_layers": LAYERS, "source": "moefied"},
              "n_rounds": len(cols["round_pos"]), "n_nodes": len(cols["node_tok"]), "n_commit": len(cols["commit_tok"])}
    validate_columns("<fake>", header, cols)
    tt = TreeTrace(cols, header)
    # replaying the recorded trees with the recorded shape gives the online accepted lengths
    assert np.array_equal(tt.accepted_lengths("top_n", budget), cols["round_accept_len"])
    # speculation helped: fewer rounds than tokens (the drafter shares the target's base logits)
    assert len(tt) < len(cols["commit_tok"])
    # routing of each node = top-k of its own activation (context-dependent), recomputed here
    n_nodes = cols["node_tok"].size
    assert cols["node_moe_ids"].shape == (n_nodes, LAYERS, K_MOE)
    idx, ids, _ = tt.commit_routing()
    ends = {int(tt.round_commit_offset[b - 1] + tt.round_n_commit[b - 1] - 1) for _, a, b in tt.prompt_rounds()}
    unrouted = set(range(cols["commit_tok"].size)) - set(idx.tolist())
    assert unrouted <= ends     # only a response's last token (a correction never fed back) lacks routing
    # a committed token's routing is its own: the node it points at holds the same token and context
    for r in range(len(tt)):
        for j, c in enumerate(range(tt.commits(r).start, tt.commits(r).stop)):
            nd = int(tt.commit_node[c])
            if nd >= 0:
                assert int(tt.node_tok[nd]) == int(tt.commit_tok[c])


def test_chain_tree_matches_chain_replay(monkeypatch):
    """A top-1 chain tree (beam 1, top_k 1) commits like chain speculative decoding with k = depth:
    its accepted lengths equal the fixed-k replay of per-position greedy match flags."""
    from ahasd_sim.traces.format import replay_fixed_k
    monkeypatch.setattr(RT, "EOS_IDS", set())
    depth = 4
    labels = np.stack([np.arange(D_FF) % E for _ in range(LAYERS)])
    coll = RoutingCollector(LAYERS, K_MOE, E, labels)
    tgt = FakeLM(depth + 2, "tgt", coll=coll)
    drf = FakeLM(2 + 2 * depth, "tgt", noise_salt="drf")
    cfg = {"depth": depth, "top_k": 1, "beam": 1, "node_budget": depth, "drf_top_k": 4, "max_new": 60, "n_experts": E}
    prompt = [3, 1, 4, 1, 5]
    cols, _ = RT.record_prompt(tgt, drf, coll, prompt, cfg)
    # chain-trace flags: drafter argmax on the target's own path == target token
    path = cols["commit_tok"].tolist()
    ctx, match = list(prompt), []
    for t in path:
        match.append(int(np.argmax(fake_logits(ctx, "tgt", "drf"))) == t)
        ctx.append(t)
    committed = replay_fixed_k(np.array(match), depth)
    assert committed.tolist() == cols["round_n_commit"].tolist()
