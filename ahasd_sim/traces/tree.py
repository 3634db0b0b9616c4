"""Draft-tree traces with per-node target verdicts and MoE routing: format, loader, validator,
replay helpers (format ``ahasd-tree-trace`` version 1, documented in ``traces/README.md``).

One ``.npz`` file holds a sequence of tree-speculative-decoding **rounds**.  In every round the
drafter grew a tree below a root (the last committed token), the target verified every node in
one pass, and the accepted path plus the target's correction token were committed.  Three
tables, each in CSR form:

* rounds  ``round_*``  (length R) -- prompt, category, response position, node and commit slices;
* nodes   ``node_*``   (length N) -- the nodes of round r are ``node_offset[r] : +n_nodes[r]``,
  node 0 of each round is the root (parent -1, depth 0), parents precede children;
* commits ``commit_*`` (length C) -- the tokens committed by each round.

Per node it stores the drafter's proposal statistics (probability, entropy of the distribution it
was drawn from, rank, the drafter top-K at the node's own context where the node was expanded),
the target's greedy token, probability and entropy at the node's own context, and the routing
``node_moe_ids`` / ``node_moe_w`` ``(N, n_layers, k)``: top-k experts and gate weights per layer
of the node's token (real activations of the target, MoEfied: see header ``moe``).

Only numpy is needed to read it.  Problems raise :class:`TreeTraceError` (a ``TraceError``,
so the CLI prints one line ``"<path>: <message>"`` and exits 2).
"""

from __future__ import annotations

import json
import os
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from .format import TraceError, read_npz

FORMAT_NAME = "ahasd-tree-trace"
FORMAT_VERSION = 1
SUPPORTED_VERSIONS = (1,)

#: name -> (kind, ndim, dtype on disk); kind "i" integer, "f" float, "b" bool
ROUND_COLUMNS: Dict[str, Tuple[str, int, type]] = {
    "round_prompt": ("i", 1, np.int32),       # index into header["prompts"]
    "round_category": ("i", 1, np.int16),     # index into header["categories"]
    "round_pos": ("i", 1, np.int32),          # response position of the first token committed
    "round_node_offset": ("i", 1, np.int64),
    "round_n_nodes": ("i", 1, np.int16),      # incl. the root
    "round_accept_len": ("i", 1, np.int16),   # accepted drafted nodes (root excluded)
    "round_commit_offset": ("i", 1, np.int64),
    "round_n_commit": ("i", 1, np.int16),     # accept_len + 1, less only where the response ends
}
NODE_COLUMNS: Dict[str, Tuple[str, int, type]] = {
    "node_parent": ("i", 1, np.int16),        # local index in the round, -1 = root
    "node_depth": ("i", 1, np.int8),
    "node_tok": ("i", 1, np.int32),
    "node_rank": ("i", 1, np.int8),           # rank in the parent's drafter top-K (root -1)
    "node_q": ("f", 1, np.float32),           # drafter prob. of node_tok at the parent's context (root 1)
    "node_drf_H": ("f", 1, np.float32),       # entropy of that drafter distribution, nats (root NaN)
    "node_tgt_p_tok": ("f", 1, np.float32),   # target prob. of node_tok at the parent's context (root NaN)
    "node_accept": ("b", 1, np.bool_),        # node_tok == node_tgt[parent] (root True)
    "node_tgt": ("i", 1, np.int32),           # target greedy token at the node's own context
    "node_tgt_p": ("f", 1, np.float32),       # its target probability
    "node_tgt_H": ("f", 1, np.float32),       # target entropy at the node's own context, nats
    "node_expanded": ("b", 1, np.bool_),      # the drafter was run at the node's own context
    "node_ctx_drf_H": ("f", 1, np.float32),   # drafter entropy at the node's own context (NaN if not expanded)
    "node_topk_ids": ("i", 2, np.int32),      # (N, K) drafter top-K at own context (-1 if not expanded)
    "node_topk_p": ("f", 2, np.float32),      # (N, K) their probabilities (0 if not expanded)
    "node_moe_ids": ("i", 3, np.uint8),       # (N, n_layers, k) expert ids, by descending gate weight
    "node_moe_w": ("f", 3, np.float16),       # (N, n_layers, k) gate weights
}
COMMIT_COLUMNS: Dict[str, Tuple[str, int, type]] = {
    "commit_tok": ("i", 1, np.int32),
    "commit_node": ("i", 1, np.int64),        # global node carrying this token's routing (-1: none)
}
OPTIONAL_COLUMNS: Dict[str, Tuple[str, int, type]] = {
    "moe_partition": ("i", 2, np.uint8),      # (n_layers, d_ff) expert of every FFN neuron (MoEfied)
    "round_draft_s": ("f", 1, np.float32),    # wall time of tree growth (drafter)
    "round_verify_s": ("f", 1, np.float32),   # wall time of the target's tree verification
}
ALL_COLUMNS = {**ROUND_COLUMNS, **NODE_COLUMNS, **COMMIT_COLUMNS}

REQUIRED_HEADER_KEYS = ("format", "format_version", "kind", "categories", "prompts", "tree", "moe",
                        "drf_top_k", "n_rounds", "n_nodes", "n_commit")
TREE_KEYS = ("depth", "top_k", "node_budget")
MOE_KEYS = ("label", "n_experts", "k", "n_layers", "source")
MOEFIED_LABEL = "MoEfied Qwen2.5-Coder-1.5B"

_PROB_TOL = 1e-3   # float16 gate weights / float32 softmax round-off


class TreeTraceError(TraceError):
    """A tree-trace file is missing, unreadable or violates the schema (one-line message)."""


# ----------------------------------------------------------------------------------------
# Tree trace object
# ----------------------------------------------------------------------------------------
class TreeTrace:
    """A validated tree trace: numpy columns + header.  Columns are attributes."""

    def __init__(self, columns: Dict[str, np.ndarray], header: dict, path: str = "<memory>"):
        self.columns = columns
        self.header = header
        self.path = str(path)
        self._cum_q = None

    def __getattr__(self, name: str):
        cols = self.__dict__.get("columns")
        if cols is not None and name in cols:
            return cols[name]
        raise AttributeError(f"TreeTrace has no attribute or column {name!r}")

    def __len__(self) -> int:
        return int(self.columns["round_prompt"].shape[0])

    def __repr__(self) -> str:
        m = self.header["moe"]
        return (f"TreeTrace({self.path!r}, rounds={len(self)}, nodes={self.columns['node_tok'].size}, "
                f"prompts={len(self.header['prompts'])}, moe E={m['n_experts']} k={m['k']})")

    # -- metadata --------------------------------------------------------------------------
    @property
    def n_rounds(self) -> int:
        return len(self)

    @property
    def n_layers(self) -> int:
        return int(self.columns["node_moe_ids"].shape[1])

    @property
    def n_experts(self) -> int:
        return int(self.header["moe"]["n_experts"])

    @property
    def moe_k(self) -> int:
        return int(self.columns["node_moe_ids"].shape[2])

    @property
    def categories(self) -> List[str]:
        return list(self.header["categories"])

    def nodes(self, r: int) -> slice:
        """Global node slice of round ``r`` (node 0 of the slice is the root)."""
        o = int(self.columns["round_node_offset"][r])
        return slice(o, o + int(self.columns["round_n_nodes"][r]))

    def commits(self, r: int) -> slice:
        o = int(self.columns["round_commit_offset"][r])
        return slice(o, o + int(self.columns["round_n_commit"][r]))

    def prompt_rounds(self) -> List[Tuple[int, int, int]]:
        """``(prompt_id, first_round, end_round)`` for every prompt present, in order."""
        p = self.columns["round_prompt"]
        if p.size == 0:
            return []
        cut = np.flatnonzero(np.r_[True, p[1:] != p[:-1], True])
        return [(int(p[a]), int(a), int(b)) for a, b in zip(cut[:-1], cut[1:])]

    @property
    def cum_q(self) -> np.ndarray:
        """Product of drafter probabilities along each node's path (root 1): EAGLE-2's score."""
        if self._cum_q is None:
            self._cum_q = path_products(self.columns["node_parent"], self.columns["round_node_offset"],
                                        self.columns["round_n_nodes"], self.columns["node_q"])
        return self._cum_q

    # -- tree cutting and replay -----------------------------------------------------------
    def subtree(self, r: int, policy: str = "top_n", size: int = 64, depth: Optional[int] = None,
                top_k: Optional[int] = None) -> np.ndarray:
        """Local node indices (root included, ancestor-closed, sorted) of a smaller tree cut from
        the recorded tree of round ``r``.

        ``policy``: ``"top_n"`` -- root + the ``size`` nodes with the largest cumulative drafter
        probability (EAGLE-2 re-ranking; ties: earlier node first), optionally restricted to
        ``depth`` / ``top_k``; ``"chain"`` -- the drafter's top-1 chain of depth ``size``;
        ``"shape"`` -- every node with depth <= ``depth`` and rank < ``top_k`` on its whole path.
        """
        sl = self.nodes(r)
        parent = self.columns["node_parent"][sl].astype(np.int64)
        dep = self.columns["node_depth"][sl].astype(np.int64)
        rank = self.columns["node_rank"][sl].astype(np.int64)
        n = parent.size
        ok = np.ones(n, dtype=bool)  # path condition on depth / rank
        for j in range(1, n):
            ok[j] = ok[parent[j]]
            if depth is not None and dep[j] > depth:
                ok[j] = False
            if policy == "chain":
                ok[j] = ok[j] and rank[j] == 0
            elif top_k is not None and rank[j] >= top_k:
                ok[j] = False
        if policy == "chain":
            keep = np.flatnonzero(ok & (dep <= size))
            return keep
        if policy == "shape":
            if depth is None or top_k is None:
                raise ValueError("policy 'shape' needs depth and top_k")
            return np.flatnonzero(ok)
        if policy != "top_n":
            raise ValueError(f"unknown tree policy {policy!r} (top_n, chain, shape)")
        cq = self.cum_q[sl]
        cand = np.flatnonzero(ok[1:]) + 1
        order = cand[np.lexsort((cand, -cq[cand]))][:max(int(size), 0)]
        keep = np.zeros(n, dtype=bool)
        keep[0] = True
        for j in order:  # ancestor closure (cum_q never increases along a path; ties aside)
            while j >= 0 and not keep[j]:
                keep[j] = True
                j = parent[j]
        return np.flatnonzero(keep)

    def accepted_length(self, r: int, local_nodes: Optional[Sequence[int]] = None) -> int:
        """Accepted drafted tokens of round ``r`` if only ``local_nodes`` had been drafted (all
        recorded nodes if None): depth of the deepest node whose whole path is accepted."""
        sl = self.nodes(r)
        parent = self.columns["node_parent"][sl]
        acc = self.columns["node_accept"][sl]
        dep = self.columns["node_depth"][sl]
        n = parent.size
        inside = np.zeros(n, dtype=bool)
        if local_nodes is None:
            inside[:] = True
        else:
            inside[np.asarray(local_nodes, dtype=np.int64)] = True
        good = np.zeros(n, dtype=bool)
        good[0] = True
        best = 0
        for j in range(1, n):
            good[j] = inside[j] and acc[j] and good[parent[j]]
            if good[j] and dep[j] > best:
                best = int(dep[j])
        return best

    def accepted_lengths(self, policy: str = "top_n", size: int = 64, **kw) -> np.ndarray:
        """Accepted drafted tokens per recorded round for a tree cut by ``policy``/``size``
        (evaluated at the recorded roots; the committed count is this + 1)."""
        return np.array([self.accepted_length(r, self.subtree(r, policy, size, **kw))
                         for r in range(len(self))], dtype=np.int64)

    def routing(self, global_nodes) -> Tuple[np.ndarray, np.ndarray]:
        """``(ids, w)`` of shape ``(len(nodes), n_layers, k)`` for global node indices."""
        idx = np.asarray(global_nodes, dtype=np.int64)
        return self.columns["node_moe_ids"][idx], self.columns["node_moe_w"][idx]

    def commit_routing(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Routing of every committed token that has one: ``(commit_index, ids, w)``."""
        cn = self.columns["commit_node"]
        has = np.flatnonzero(cn >= 0)
        ids, w = self.routing(cn[has])
        return has, ids, w


def path_products(parent: np.ndarray, offset: np.ndarray, n_nodes: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Cumulative product of ``q`` from each round's root to each node (root value 1)."""
    out = np.ones(q.shape[0], dtype=np.float64)
    qq = q.astype(np.float64)
    for o, n in zip(offset.tolist(), n_nodes.tolist()):
        for j in range(1, n):
            out[o + j] = out[o + parent[o + j]] * qq[o + j]
    return out


def accepted_path(parent: np.ndarray, accept: np.ndarray, depth: np.ndarray) -> List[int]:
    """Local indices (root excluded) of the deepest all-accepted root path of one round."""
    n = parent.size
    good = np.zeros(n, dtype=bool)
    good[0] = True
    best = 0
    for j in range(1, n):
        good[j] = bool(accept[j]) and good[parent[j]]
        if good[j] and depth[j] > depth[best]:
            best = j
    path = []
    j = best
    while j > 0:
        path.append(j)
        j = int(parent[j])
    return path[::-1]


# ----------------------------------------------------------------------------------------
# loading / validation
# ----------------------------------------------------------------------------------------
def load_tree_trace(path, validate: bool = True) -> TreeTrace:
    """Read and (by default) validate a tree trace ``.npz``; raises :class:`TreeTraceError`."""
    path = os.fspath(path)
    header, cols = read_npz(path, check_header, TreeTraceError, "an ahasd tree trace")
    if validate:
        validate_columns(path, header, cols)
    return TreeTrace(cols, header, path)


def is_tree_trace(path) -> bool:
    """True if ``path`` is an ``.npz`` whose header says ``ahasd-tree-trace`` (no validation)."""
    try:
        with np.load(os.fspath(path), allow_pickle=False) as z:
            raw = z["header_json"]
            hdr = json.loads(str(raw[()] if raw.ndim == 0 else raw.reshape(-1)[0]))
        return isinstance(hdr, dict) and hdr.get("format") == FORMAT_NAME
    except Exception:
        return False


def check_header(path: str, header: dict) -> None:
    if header.get("format") != FORMAT_NAME:
        hint = " (a chain trace: use ahasd_sim.traces.format.load_trace)" if header.get("format") == "ahasd-trace" else ""
        raise TreeTraceError(path, f"header format {header.get('format')!r} is not {FORMAT_NAME!r}{hint}")
    for key in REQUIRED_HEADER_KEYS:
        if key not in header:
            raise TreeTraceError(path, f"header is missing key {key!r}")
    if header["format"] != FORMAT_NAME:
        raise TreeTraceError(path, f"header format {header['format']!r} is not {FORMAT_NAME!r}")
    if header["format_version"] not in SUPPORTED_VERSIONS:
        raise TreeTraceError(path, f"header format_version {header['format_version']!r} is not supported "
                                   f"(known: {list(SUPPORTED_VERSIONS)})")
    if header["kind"] != "tree":
        raise TreeTraceError(path, f"header kind {header['kind']!r} is not 'tree'")
    for sec, keys in (("tree", TREE_KEYS), ("moe", MOE_KEYS)):
        if not isinstance(header[sec], dict):
            raise TreeTraceError(path, f"header {sec!r} is not an object")
        for key in keys:
            if key not in header[sec]:
                raise TreeTraceError(path, f"header is missing key '{sec}.{key}'")
    if header["moe"]["source"] not in ("moefied", "native"):
        raise TreeTraceError(path, f"header moe.source {header['moe']['source']!r}: expected 'moefied' or 'native'")


def _fail(path, msg):
    raise TreeTraceError(path, msg)


def validate_columns(path: str, header: dict, cols: Dict[str, np.ndarray]) -> None:
    """Schema, dtype, shape, range and tree/commit consistency checks."""
    for name, (kind, ndim, _) in {**ALL_COLUMNS, **{k: v for k, v in OPTIONAL_COLUMNS.items()
                                                    if k in cols}}.items():
        if name not in cols:
            _fail(path, f"column {name!r} is missing")
        a = cols[name]
        if a.ndim != ndim:
            _fail(path, f"column {name!r} has {a.ndim} dimensions, expected {ndim}")
        k = a.dtype.kind
        if not ((kind == "i" and k in "iu") or (kind == "f" and k == "f") or (kind == "b" and k == "b")):
            _fail(path, f"column {name!r} has dtype {a.dtype}, expected "
                        f"{ {'i': 'integer', 'f': 'float', 'b': 'bool'}[kind] }")
    R = cols["round_prompt"].shape[0]
    N = cols["node_tok"].shape[0]
    C = cols["commit_tok"].shape[0]
    for group, n, label in ((ROUND_COLUMNS, R, "rounds"), (NODE_COLUMNS, N, "nodes"), (COMMIT_COLUMNS, C, "commits")):
        for name in group:
            if cols[name].shape[0] != n:
                _fail(path, f"column {name!r} has length {cols[name].shape[0]}, expected {n} ({label})")
    for key, n in (("n_rounds", R), ("n_nodes", N), ("n_commit", C)):
        if int(header[key]) != n:
            _fail(path, f"header {key} {header[key]} != {n} rows in the columns")
    K = int(header["drf_top_k"])
    if cols["node_topk_ids"].shape[1:] != (K,) or cols["node_topk_p"].shape[1:] != (K,):
        _fail(path, f"columns 'node_topk_ids'/'node_topk_p' must be (N, {K}) (header drf_top_k), got "
                    f"{cols['node_topk_ids'].shape} / {cols['node_topk_p'].shape}")
    moe = header["moe"]
    L, kk, E = int(moe["n_layers"]), int(moe["k"]), int(moe["n_experts"])
    for name in ("node_moe_ids", "node_moe_w"):
        if cols[name].shape[1:] != (L, kk):
            _fail(path, f"column {name!r} must be (N, {L}, {kk}) (header moe n_layers, k), got {cols[name].shape}")
    if not 1 <= kk <= E:
        _fail(path, f"header moe.k {kk} must be in [1, n_experts={E}]")
    tr = header["tree"]
    # CSR slices: contiguous, in order
    for off, cnt, total, what in (("round_node_offset", "round_n_nodes", N, "nodes"),
                                  ("round_commit_offset", "round_n_commit", C, "commits")):
        o = cols[off].astype(np.int64)
        c = cols[cnt].astype(np.int64)
        if R and (c.min() < 1):
            _fail(path, f"column {cnt!r} has values < 1 (every round has a root and commits >= 1 token)")
        exp = np.r_[0, np.cumsum(c)[:-1]] if R else o
        if not np.array_equal(o, exp) or int(c.sum()) != total:
            _fail(path, f"columns {off!r}/{cnt!r} do not tile the {what} arrays contiguously in order")
    # value ranges
    _prob(path, cols, "node_q", allow_nan=False)
    _prob(path, cols, "node_tgt_p", allow_nan=False)
    _prob(path, cols, "node_tgt_p_tok", allow_nan=True)
    _prob(path, cols, "node_topk_p", allow_nan=False)
    for name, nan_ok in (("node_drf_H", True), ("node_tgt_H", False), ("node_ctx_drf_H", True)):
        a = cols[name].astype(np.float64)
        fin = a[~np.isnan(a)] if nan_ok else a
        if not np.isfinite(fin).all() or (fin.size and fin.min() < -1e-4):
            _fail(path, f"column {name!r} has negative or non-finite values (expected entropies >= 0 nats)")
    for name in ("node_tok", "node_tgt", "commit_tok"):
        if cols[name].size and int(cols[name].min()) < 0:
            _fail(path, f"column {name!r} has negative token ids")
    ncat, nprm = len(header["categories"]), len(header["prompts"])
    if R and (int(cols["round_category"].min()) < 0 or int(cols["round_category"].max()) >= ncat):
        _fail(path, f"column 'round_category' has codes outside [0, {ncat})")
    if R and (int(cols["round_prompt"].min()) < 0 or int(cols["round_prompt"].max()) >= nprm):
        _fail(path, f"column 'round_prompt' has ids outside [0, {nprm})")
    ids = cols["node_moe_ids"]
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= E):
        _fail(path, f"column 'node_moe_ids' has expert ids outside [0, {E})")
    if ids.size and kk > 1:
        s = np.sort(ids.astype(np.int64), axis=2)
        if (np.diff(s, axis=2) == 0).any():
            _fail(path, "column 'node_moe_ids' repeats an expert within one (node, layer)")
    w = cols["node_moe_w"].astype(np.float32)
    if w.size:
        if not np.isfinite(w).all() or w.min() < 0:
            _fail(path, "column 'node_moe_w' has negative or non-finite gate weights")
        if moe.get("weights_normalized", True) and np.abs(w.sum(axis=2) - 1).max() > 1e-2:
            _fail(path, "column 'node_moe_w' rows do not sum to 1 over the top-k (header moe.weights_normalized)")
    if "moe_partition" in cols:
        mp = cols["moe_partition"]
        if mp.shape[0] != L or (mp.size and int(mp.max()) >= E):
            _fail(path, f"column 'moe_partition' must be (n_layers={L}, d_ff) with ids < {E}")
    # per-round tree structure, verdicts, accepted path, commits
    parent = cols["node_parent"].astype(np.int64)
    dep = cols["node_depth"].astype(np.int64)
    tok = cols["node_tok"].astype(np.int64)
    tgt = cols["node_tgt"].astype(np.int64)
    acc = cols["node_accept"]
    rank = cols["node_rank"].astype(np.int64)
    topk = cols["node_topk_ids"]
    expd = cols["node_expanded"]
    if N and ((topk[~expd] != -1).any() or (topk[expd] < 0).any()):
        _fail(path, "column 'node_topk_ids' must hold ids where node_expanded and -1 elsewhere")
    if N and np.isnan(cols["node_ctx_drf_H"][expd]).any():
        _fail(path, "column 'node_ctx_drf_H' is NaN at an expanded node")
    ctok = cols["commit_tok"].astype(np.int64)
    D, budget = int(tr["depth"]), int(tr["node_budget"])
    prev_prompt, next_pos, prev_last = -1, 0, None
    for r in range(R):
        o, n = int(cols["round_node_offset"][r]), int(cols["round_n_nodes"][r])
        p = parent[o:o + n]
        if p[0] != -1 or dep[o] != 0:
            _fail(path, f"round {r}: node 0 must be the root (parent -1, depth 0)")
        if n - 1 > budget:
            _fail(path, f"round {r}: {n - 1} drafted nodes exceed tree.node_budget {budget}")
        j = np.arange(1, n)
        if n > 1:
            if (p[1:] < 0).any() or (p[1:] >= j).any():
                _fail(path, f"round {r}: node parents must precede their children (local indices)")
            if not np.array_equal(dep[o + 1:o + n], dep[o + p[1:]] + 1):
                _fail(path, f"round {r}: node_depth != parent depth + 1")
            if dep[o + 1:o + n].max() > D:
                _fail(path, f"round {r}: node depth exceeds tree.depth {D}")
            want = tok[o + 1:o + n] == tgt[o + p[1:]]
            if not np.array_equal(acc[o + 1:o + n], want):
                _fail(path, f"round {r}: node_accept != (node_tok == node_tgt of the parent)")
            pe = expd[o + p[1:]]
            if not pe.all():
                _fail(path, f"round {r}: a node's parent is not marked node_expanded")
            rk = rank[o + 1:o + n]
            if (rk < 0).any() or (rk >= K).any() or not np.array_equal(topk[o + p[1:], rk], tok[o + 1:o + n]):
                _fail(path, f"round {r}: node_tok is not the parent's drafter top-K entry at node_rank")
        pth = accepted_path(p, acc[o:o + n], dep[o:o + n])
        a = int(cols["round_accept_len"][r])
        if a != len(pth):
            _fail(path, f"round {r}: round_accept_len {a} != deepest accepted path {len(pth)}")
        co, cn = int(cols["round_commit_offset"][r]), int(cols["round_n_commit"][r])
        full = [int(tok[o + i]) for i in pth] + [int(tgt[o + (pth[-1] if pth else 0)])]
        if cn > len(full) or ctok[co:co + cn].tolist() != full[:cn]:
            _fail(path, f"round {r}: committed tokens are not the accepted path + the target's correction")
        pr = int(cols["round_prompt"][r])
        if pr != prev_prompt:
            if pr < prev_prompt:
                _fail(path, "column 'round_prompt' is not non-decreasing (prompts in order)")
            next_pos, prev_last = 0, None
        if int(cols["round_pos"][r]) != next_pos:
            _fail(path, f"round {r}: round_pos {int(cols['round_pos'][r])} != committed tokens so far {next_pos}")
        if prev_last is not None and int(tok[o]) != prev_last:
            _fail(path, f"round {r}: root token != last token committed by the previous round")
        prev_prompt, next_pos, prev_last = pr, next_pos + cn, int(ctok[co + cn - 1])
    cnode = cols["commit_node"].astype(np.int64)
    has = cnode >= 0
    if (cnode >= N).any() or not np.array_equal(tok[cnode[has]], ctok[has]):
        _fail(path, "column 'commit_node' must be -1 or a node index whose node_tok equals commit_tok")


def _prob(path, cols, name, allow_nan):
    a = cols[name].astype(np.float64)
    if not allow_nan and np.isnan(a).any():
        _fail(path, f"column {name!r} has NaN values (expected probabilities in [0, 1])")
    a = a[~np.isnan(a)]
    if a.size and (a.min() < -_PROB_TOL or a.max() > 1 + _PROB_TOL):
        _fail(path, f"column {name!r} has values outside [0, 1] (min {a.min():.6g}, max {a.max():.6g})")


def write_tree_trace(path, header: dict, columns: Dict[str, np.ndarray], validate: bool = True) -> None:
    """Cast to the on-disk dtypes, validate, write atomically (temp file + rename)."""
    path = os.fspath(path)
    cols = {}
    spec = {**ALL_COLUMNS, **OPTIONAL_COLUMNS}
    E = int(header["moe"]["n_experts"])
    for name, a in columns.items():
        a = np.asarray(a)
        if name in spec:
            dt = spec[name][2]
            if name in ("node_moe_ids", "moe_partition") and E > 256:
                dt = np.int16
            a = a.astype(dt, copy=False)
        cols[name] = a
    hdr = dict(header)
    hdr.setdefault("format", FORMAT_NAME)
    hdr.setdefault("format_version", FORMAT_VERSION)
    hdr.setdefault("kind", "tree")
    hdr["n_rounds"] = int(cols["round_prompt"].shape[0])
    hdr["n_nodes"] = int(cols["node_tok"].shape[0])
    hdr["n_commit"] = int(cols["commit_tok"].shape[0])
    if validate:
        check_header(path, hdr)
        validate_columns(path, hdr, cols)
    tmp = path + ".tmp.npz"
    np.savez_compressed(tmp, header_json=np.array(json.dumps(hdr, sort_keys=True)), **cols)
    os.replace(tmp, path)


def quantize_gate_weights(w: np.ndarray, levels: int = 256) -> np.ndarray:
    """Gate weights rounded to multiples of 1/levels along the last axis by largest remainder, so
    each row still sums to exactly 1 (if it did) and float16 holds the values exactly; shrinks
    the compressed routing ~3x.  Error per weight < 1/levels."""
    w = np.asarray(w, dtype=np.float64)
    tot = np.rint(w.sum(axis=-1, keepdims=True) * levels)
    x = w * levels
    fl = np.floor(x)
    short = (tot - fl.sum(axis=-1, keepdims=True)).astype(np.int64)   # units still to hand out
    order = np.argsort(-(x - fl), axis=-1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(w.shape[-1]).reshape((1,) * (w.ndim - 1) + (-1,)) +
                      np.zeros_like(order), axis=-1)
    q = fl + (rank < short)
    return (q / levels).astype(np.float16)


def concat_rounds(parts: Sequence[Dict[str, np.ndarray]]) -> Dict[str, np.ndarray]:
    """Concatenate per-prompt column dicts; node/commit offsets and commit_node are re-based."""
    out: Dict[str, List[np.ndarray]] = {}
    nbase = cbase = 0
    for part in parts:
        for name, a in part.items():
            if name == "moe_partition":
                continue
            a = np.asarray(a)
            if name == "round_node_offset":
                a = a.astype(np.int64) + nbase
            elif name == "round_commit_offset":
                a = a.astype(np.int64) + cbase
            elif name == "commit_node":
                a = np.where(a >= 0, a.astype(np.int64) + nbase, -1)
            out.setdefault(name, []).append(a)
        nbase += int(np.asarray(part["node_tok"]).shape[0])
        cbase += int(np.asarray(part["commit_tok"]).shape[0])
    return {k: np.concatenate(v) for k, v in out.items()}


# ----------------------------------------------------------------------------------------
# a small constructed trace (tests, examples): NOT measured data
# ----------------------------------------------------------------------------------------
def build_rounds(trees: Iterable[dict], n_layers: int, k: int, n_experts: int, drf_top_k: int,
                 max_new: Optional[int] = None, eos_ids: Sequence[int] = ()) -> Dict[str, np.ndarray]:
    """Columns of one prompt from explicit per-round trees.

    Each tree is a dict with lists over nodes (root first): ``parent``, ``tok``, ``tgt`` and
    optional ``q``, ``rank``, ``topk_ids``/``topk_p`` (rows for expanded nodes, None otherwise),
    ``moe_ids``/``moe_w`` (n_layers x k per node).  Verdicts, accepted path, commits and the
    commit -> node map are derived the way the recorder derives them.
    """
    cols: Dict[str, list] = {c: [] for c in list(ROUND_COLUMNS) + list(NODE_COLUMNS) + list(COMMIT_COLUMNS)}
    pos = nbase = cbase = 0
    pending = None  # commit index of the previous round's correction token (routed as next root)
    for t in trees:
        parent = [int(x) for x in t["parent"]]
        n = len(parent)
        dep = [0] * n
        for j in range(1, n):
            dep[j] = dep[parent[j]] + 1
        tok, tgt = [int(x) for x in t["tok"]], [int(x) for x in t["tgt"]]
        accept = [True] + [tok[j] == tgt[parent[j]] for j in range(1, n)]
        pth = accepted_path(np.array(parent), np.array(accept), np.array(dep))
        commit = [tok[j] for j in pth] + [tgt[pth[-1] if pth else 0]]
        cnode = [nbase + j for j in pth] + [-1]
        for i, c in enumerate(commit):
            if c in eos_ids:
                commit, cnode = commit[:i + 1], cnode[:i + 1]
                break
        if max_new is not None:
            commit, cnode = commit[:max_new - pos], cnode[:max_new - pos]
        if pending is not None:
            cols["commit_node"][pending] = nbase
        pending = cbase + len(commit) - 1 if cnode[-1] == -1 else None
        topk_ids = t.get("topk_ids") or [None] * n
        topk_p = t.get("topk_p") or [None] * n
        q = t.get("q") or [1.0] + [0.5] * (n - 1)
        rank = t.get("rank") or [-1] + [0] * (n - 1)
        cols["round_prompt"].append(0)
        cols["round_category"].append(0)
        cols["round_pos"].append(pos)
        cols["round_node_offset"].append(nbase)
        cols["round_n_nodes"].append(n)
        cols["round_accept_len"].append(len(pth))
        cols["round_commit_offset"].append(cbase)
        cols["round_n_commit"].append(len(commit))
        for j in range(n):
            cols["node_parent"].append(parent[j])
            cols["node_depth"].append(dep[j])
            cols["node_tok"].append(tok[j])
            cols["node_rank"].append(rank[j])
            cols["node_q"].append(q[j])
            cols["node_drf_H"].append(np.nan if j == 0 else 1.0)
            cols["node_tgt_p_tok"].append(np.nan if j == 0 else 0.5)
            cols["node_accept"].append(accept[j])
            cols["node_tgt"].append(tgt[j])
            cols["node_tgt_p"].append(0.9)
            cols["node_tgt_H"].append(0.3)
            e = topk_ids[j] is not None
            cols["node_expanded"].append(e)
            cols["node_ctx_drf_H"].append(1.0 if e else np.nan)
            cols["node_topk_ids"].append(list(topk_ids[j]) if e else [-1] * drf_top_k)
            cols["node_topk_p"].append(list(topk_p[j]) if e else [0.0] * drf_top_k)
            if "moe_ids" in t:
                cols["node_moe_ids"].append(t["moe_ids"][j])
                cols["node_moe_w"].append(t["moe_w"][j])
            else:
                cols["node_moe_ids"].append([[(tok[j] + i * 7 + l) % n_experts for i in range(k)]
                                             for l in range(n_layers)])
                cols["node_moe_w"].append([[1.0 / k] * k for _ in range(n_layers)])
        cols["commit_tok"].extend(commit)
        cols["commit_node"].extend(cnode)
        pos += len(commit)
        nbase += n
        cbase += len(commit)
        if (max_new is not None and pos >= max_new) or commit[-1] in eos_ids:
            break
    out = {}
    for name, a in cols.items():
        out[name] = np.asarray(a, dtype=ALL_COLUMNS[name][2])
    return out


def example_tree_trace(n_prompts: int = 2, n_rounds: int = 5, depth: int = 3, top_k: int = 2,
                       drf_top_k: int = 4, n_layers: int = 3, moe_k: int = 2, n_experts: int = 8,
                       seed: int = 0) -> Tuple[dict, Dict[str, np.ndarray]]:
    """A small **constructed** (random, not measured) tree trace: ``(header, columns)``.

    Full trees (every node expanded up to ``depth``, ``top_k`` children each); the target's
    greedy token is the drafter's top-1 with probability 0.7.  For tests and examples only.
    """
    rng = np.random.default_rng(seed)
    vocab = 50
    parts, prompts = [], []
    for pi in range(n_prompts):
        trees, root = [], int(rng.integers(vocab))
        for _ in range(n_rounds):
            parent, tok, rank, q, tk_ids, tk_p = [-1], [root], [-1], [1.0], [], []
            frontier, d = [0], 0
            while True:
                nxt = []
                for v in frontier:
                    ids = [int(x) for x in rng.choice(vocab, size=drf_top_k, replace=False)]
                    p = np.sort(rng.dirichlet(np.ones(drf_top_k + 1)))[::-1][:drf_top_k]
                    while len(tk_ids) <= v:
                        tk_ids.append(None)
                        tk_p.append(None)
                    tk_ids[v], tk_p[v] = ids, [float(x) for x in p]
                    if d < depth:
                        for c in range(top_k):
                            parent.append(v)
                            tok.append(ids[c])
                            rank.append(c)
                            q.append(float(p[c]))
                            nxt.append(len(tok) - 1)
                if d >= depth or not nxt:
                    break
                frontier, d = nxt, d + 1
            n = len(tok)
            while len(tk_ids) < n:
                tk_ids.append(None)
                tk_p.append(None)
            tgt = [tk_ids[v][0] if (tk_ids[v] is not None and rng.random() < 0.7) else int(rng.integers(vocab))
                   for v in range(n)]
            moe_ids = [[[int(x) for x in rng.choice(n_experts, size=moe_k, replace=False)]
                        for _ in range(n_layers)] for _ in range(n)]
            w = rng.dirichlet(np.ones(moe_k), size=(n, n_layers))
            w = -np.sort(-w, axis=2)
            t = {"parent": parent, "tok": tok, "tgt": tgt, "q": q, "rank": rank, "topk_ids": tk_ids,
                 "topk_p": tk_p, "moe_ids": moe_ids, "moe_w": w.tolist()}
            trees.append(t)
            cols = build_rounds(trees[-1:], n_layers, moe_k, n_experts, drf_top_k)
            root = int(cols["commit_tok"][-1])
        cols = build_rounds(trees, n_layers, moe_k, n_experts, drf_top_k)
        cols["round_prompt"][:] = pi
        cols["round_category"][:] = pi % 2
        parts.append(cols)
        prompts.append({"index": pi, "id": f"example/{pi}", "category": ["code", "chat"][pi % 2]})
    cols = concat_rounds(parts)
    header = {
        "format": FORMAT_NAME, "format_version": FORMAT_VERSION, "kind": "tree",
        "constructed_example": True, "note": "random constructed example, NOT measured data",
        "categories": ["code", "chat"], "prompts": prompts, "drf_top_k": drf_top_k,
        "tree": {"depth": depth, "top_k": top_k, "node_budget": sum(top_k ** d for d in range(1, depth + 1)),
                 "growth": "full"},
        "moe": {"label": "constructed example", "n_experts": n_experts, "k": moe_k, "n_layers": n_layers,
                "source": "moefied", "weights_normalized": True},
        "n_rounds": int(cols["round_prompt"].size), "n_nodes": int(cols["node_tok"].size),
        "n_commit": int(cols["commit_tok"].size),
    }
    return header, cols
