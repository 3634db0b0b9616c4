"""MoEfication of a dense FFN and capture of expert routing from llama.cpp's ``cb_eval`` hook.

MoEfication (Zhang et al., "MoEfication: Transformer Feed-forward Layers are Mixtures of
Experts", Findings of ACL 2022, docs/references.md): split each layer's d_ff FFN neurons into E
equal groups ("experts") by balanced k-means over the neurons' weight vectors (the paper's
parameter-clustering split); a token then routes to the k experts holding the largest
activation mass, mass_e = sum over the expert's neurons of |h_i| (h = the FFN's intermediate
activation, SwiGLU output for Qwen2).  Gate weights are the masses renormalised over the top-k.
The activations are the real target's; the partition is ours.

The same :class:`RoutingCollector` also accepts a real MoE's routing (llama.cpp tensors
``ffn_moe_topk-<layer>`` and ``ffn_moe_weights-<layer>``), so a MoE GGUF drops in unchanged.
Only numpy (and ctypes) are needed here; llama-cpp-python only to run a model.
"""

from __future__ import annotations

import ctypes
import re
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

# ----------------------------------------------------------------------------------------
# partition: balanced k-means over neuron weight vectors
# ----------------------------------------------------------------------------------------


def balanced_assign(dist: np.ndarray, capacity: int) -> np.ndarray:
    """Assign each row (neuron) to a column (expert), at most ``capacity`` per column: every
    unassigned neuron proposes to its nearest non-full expert, each expert keeps its closest
    proposers up to its free capacity; repeat until all are assigned (at most E rounds)."""
    n, E = dist.shape
    if capacity * E < n:
        raise ValueError(f"capacity {capacity} x {E} experts < {n} neurons")
    label = np.full(n, -1, dtype=np.int64)
    fill = np.zeros(E, dtype=np.int64)
    d = dist.astype(np.float64, copy=True)
    while (label < 0).any():
        free = np.flatnonzero(label < 0)
        d[:, fill >= capacity] = np.inf
        choice = np.argmin(d[free], axis=1)
        dc = d[free, choice]
        order = np.lexsort((dc, choice))          # by expert, then distance
        ch, fr = choice[order], free[order]
        first = np.r_[0, np.flatnonzero(np.diff(ch)) + 1]
        rank = np.arange(ch.size) - np.repeat(first, np.diff(np.r_[first, ch.size]))
        take = rank < (capacity - fill[ch])
        label[fr[take]] = ch[take]
        fill += np.bincount(ch[take], minlength=E)
    return label


def balanced_kmeans(X: np.ndarray, n_experts: int, iters: int = 8, seed: int = 0) -> np.ndarray:
    """Equal-size clusters of the rows of ``X`` (n divisible by ``n_experts``): k-means whose
    assignment step is :func:`balanced_assign`.  Returns labels (n,)."""
    n = X.shape[0]
    if n % n_experts:
        raise ValueError(f"{n} neurons not divisible into {n_experts} equal experts")
    cap = n // n_experts
    rng = np.random.default_rng(seed)
    C = X[rng.choice(n, n_experts, replace=False)].copy()
    label = None
    x2 = (X * X).sum(1)[:, None]
    for _ in range(iters):
        d = x2 - 2.0 * X @ C.T + (C * C).sum(1)[None, :]
        new = balanced_assign(d, cap)
        if label is not None and np.array_equal(new, label):
            break
        label = new
        for e in range(n_experts):
            C[e] = X[label == e].mean(0)
    return label


def neuron_features(w_gate: np.ndarray, w_up: np.ndarray, dim: int = 128, seed: int = 0) -> np.ndarray:
    """Per-neuron feature: the unit-normalised gate and up weight rows (d_ff, d_model each),
    concatenated and randomly projected to ``dim`` dimensions (Johnson-Lindenstrauss: distances
    kept up to a small factor, k-means ~25x cheaper)."""
    f = np.concatenate([w_gate / (np.linalg.norm(w_gate, axis=1, keepdims=True) + 1e-12),
                        w_up / (np.linalg.norm(w_up, axis=1, keepdims=True) + 1e-12)], axis=1)
    rng = np.random.default_rng(seed)
    P = rng.standard_normal((f.shape[1], dim)).astype(np.float32) / np.sqrt(dim)
    return (f.astype(np.float32) @ P).astype(np.float64)


def partition_from_gguf(path: str, n_experts: int, seed: int = 0, iters: int = 8, dim: int = 128,
                        log: Optional[Callable[[str], None]] = None) -> Tuple[np.ndarray, dict]:
    """MoEfication partition of every layer of a dense GGUF model: ``(labels (L, d_ff), info)``.
    Needs the ``gguf`` package (reads and dequantises ``blk.<l>.ffn_gate/ffn_up.weight``)."""
    import gguf  # optional: only for building a partition
    r = gguf.GGUFReader(path)
    by = {t.name: t for t in r.tensors}
    layers = sorted({int(m.group(1)) for n in by if (m := re.match(r"blk\.(\d+)\.ffn_gate\.weight$", n))})
    out = []
    for l in layers:
        g = gguf.quants.dequantize(by[f"blk.{l}.ffn_gate.weight"].data, by[f"blk.{l}.ffn_gate.weight"].tensor_type)
        u = gguf.quants.dequantize(by[f"blk.{l}.ffn_up.weight"].data, by[f"blk.{l}.ffn_up.weight"].tensor_type)
        lab = balanced_kmeans(neuron_features(g, u, dim, seed + l), n_experts, iters, seed + l)
        out.append(lab)
        if log:
            log(f"moefy layer {l}: d_ff {lab.size}, {n_experts} experts of {lab.size // n_experts}")
    labels = np.stack(out).astype(np.int16)
    info = {"partition_method": f"balanced k-means (MoEfication parameter clustering) on unit-normalised "
                                f"[ffn_gate | ffn_up] neuron rows, random projection to {dim} dims, "
                                f"{iters} iterations max, seed {seed} + layer",
            "d_ff": int(labels.shape[1]), "partition_seed": seed, "gguf_version": getattr(gguf, "__version__", None)}
    return labels, info


# ----------------------------------------------------------------------------------------
# routing from activations / from a real MoE's tensors
# ----------------------------------------------------------------------------------------
def expert_mass(act: np.ndarray, labels: np.ndarray, n_experts: int) -> np.ndarray:
    """(n_tok, d_ff) activations -> (n_tok, E) activation mass sum_{i in e} |h_i|."""
    onehot = np.zeros((labels.size, n_experts), dtype=np.float32)
    onehot[np.arange(labels.size), labels] = 1.0
    return np.abs(act.astype(np.float32, copy=False)) @ onehot


def topk_route(mass: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
    """Top-k experts per token by mass (descending; ties: lower id) and weights mass/sum(top-k)."""
    idx = np.argsort(-mass, axis=1, kind="stable")[:, :k]
    m = np.take_along_axis(mass, idx, axis=1).astype(np.float64)
    s = m.sum(axis=1, keepdims=True)
    w = np.where(s > 0, m / np.where(s > 0, s, 1), 1.0 / k)
    return idx, w


_NAME_RE = re.compile(r"^(ffn_swiglu|ffn_moe_topk|ffn_moe_weights|ffn_moe_weights_norm)-(\d+)$")


class RoutingCollector:
    """Collects per-layer routing of the tokens of one ``llama_decode`` call.

    ``labels`` (L, d_ff) given -> MoEfied routing from ``ffn_swiglu-<l>`` activations;
    ``labels`` None -> native routing from ``ffn_moe_topk-<l>`` (+ ``ffn_moe_weights-<l>``).
    Call :meth:`reset` before a decode and :meth:`result` after it.
    """

    def __init__(self, n_layers: int, k: int, n_experts: int, labels: Optional[np.ndarray] = None):
        self.n_layers, self.k, self.n_experts = n_layers, k, n_experts
        self.labels = None if labels is None else np.asarray(labels)
        self._onehot = None
        if self.labels is not None:
            if self.labels.shape[0] != n_layers:
                raise ValueError(f"labels cover {self.labels.shape[0]} layers, expected {n_layers}")
            self._onehot = []
            for l in range(n_layers):
                oh = np.zeros((self.labels.shape[1], n_experts), dtype=np.float32)
                oh[np.arange(self.labels.shape[1]), self.labels[l]] = 1.0
                self._onehot.append(oh)
        self.active = False
        self.reset()

    @property
    def wanted(self) -> Tuple[str, ...]:
        return ("ffn_swiglu",) if self.labels is not None else ("ffn_moe_topk", "ffn_moe_weights",
                                                                  "ffn_moe_weights_norm")

    def reset(self) -> None:
        self.ids: Dict[int, np.ndarray] = {}
        self.w: Dict[int, np.ndarray] = {}

    def wants(self, name: str) -> bool:
        m = _NAME_RE.match(name)
        return bool(self.active and m and m.group(1) in self.wanted)

    def on_tensor(self, name: str, arr: np.ndarray) -> None:
        """``arr``: the tensor as numpy, ggml order reversed (rows = tokens)."""
        m = _NAME_RE.match(name)
        if not m:
            return
        kind, l = m.group(1), int(m.group(2))
        if arr.ndim > 1 and arr.shape[-1] == 1:  # ffn_moe_weights: ne = [1, k, n_tokens]
            arr = arr[..., 0]
        arr = arr.reshape(-1, arr.shape[-1])     # rows = tokens (ubatch order)
        if kind == "ffn_swiglu":
            a = arr
            mass = a.astype(np.float32, copy=False).__abs__() @ self._onehot[l]
            ids, w = topk_route(mass, self.k)
            self.ids[l], self.w[l] = ids, w
        elif kind == "ffn_moe_topk":  # [n_tokens, n_expert_used] int32
            self.ids[l] = arr[:, :self.k].astype(np.int64)
        else:  # weights [n_tokens, n_expert_used, 1]; the normalised one wins if both come
            w = arr[:, :self.k].astype(np.float64)
            if kind == "ffn_moe_weights_norm" or l not in self.w:
                self.w[l] = w

    def result(self, n_tokens: int) -> Tuple[np.ndarray, np.ndarray]:
        """``(ids, w)`` of shape (n_tokens, L, k); weights sorted descending per (token, layer)."""
        missing = [l for l in range(self.n_layers) if l not in self.ids]
        if missing:
            raise RuntimeError(f"routing missing for layers {missing[:5]}... (tensor names changed?)")
        ids = np.stack([self.ids[l] for l in range(self.n_layers)], axis=1)
        if ids.shape[0] != n_tokens:
            raise RuntimeError(f"captured routing for {ids.shape[0]} tokens, expected {n_tokens}")
        if all(l in self.w for l in range(self.n_layers)):
            w = np.stack([self.w[l] for l in range(self.n_layers)], axis=1)
        else:
            w = np.full(ids.shape, 1.0 / self.k)
        order = np.argsort(-w, axis=2, kind="stable")
        return np.take_along_axis(ids, order, 2), np.take_along_axis(w, order, 2)


# ----------------------------------------------------------------------------------------
# ggml_tensor via ctypes (layout of ggml.h in llama-cpp-python 0.3.36's vendored llama.cpp)
# ----------------------------------------------------------------------------------------
GGML_MAX_DIMS, GGML_MAX_OP_PARAMS, GGML_MAX_SRC, GGML_MAX_NAME = 4, 64, 10, 64
GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_I32 = 0, 1, 26
_NP_TYPES = {GGML_TYPE_F32: np.float32, GGML_TYPE_F16: np.float16, GGML_TYPE_I32: np.int32}


class GGMLTensor(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("buffer", ctypes.c_void_p),
        ("ne", ctypes.c_int64 * GGML_MAX_DIMS),
        ("nb", ctypes.c_size_t * GGML_MAX_DIMS),
        ("op", ctypes.c_int),
        ("op_params", ctypes.c_int32 * (GGML_MAX_OP_PARAMS // 4)),
        ("flags", ctypes.c_int32),
        ("src", ctypes.c_void_p * GGML_MAX_SRC),
        ("view_src", ctypes.c_void_p),
        ("view_offs", ctypes.c_size_t),
        ("data", ctypes.c_void_p),
        ("name", ctypes.c_char * GGML_MAX_NAME),
        ("extra", ctypes.c_void_p),
        ("padding", ctypes.c_char * 8),
    ]


def tensor_to_numpy(t: GGMLTensor) -> np.ndarray:
    """Copy of a host-memory ggml tensor (F32/F16/I32) as numpy, dims reversed (ne[0] last,
outer dims of size 1 dropped down to 2-D);
    strides honoured, so views and non-contiguous tensors read correctly."""
    dt = _NP_TYPES.get(int(t.type))
    if dt is None:
        raise TypeError(f"ggml type {int(t.type)} not supported for capture")
    ne = [int(t.ne[i]) for i in range(GGML_MAX_DIMS)]
    nb = [int(t.nb[i]) for i in range(GGML_MAX_DIMS)]
    nbytes = sum((n - 1) * b for n, b in zip(ne, nb)) + np.dtype(dt).itemsize
    buf = (ctypes.c_char * nbytes).from_address(int(t.data))
    arr = np.ndarray(shape=tuple(ne[::-1]), dtype=dt, buffer=buf, strides=tuple(nb[::-1]))
    while arr.ndim > 2 and arr.shape[0] == 1:  # drop unused outer dims (ne[3], ne[2] == 1)
        arr = arr[0]
    return np.array(arr)  # own copy: llama.cpp reuses the buffer


#: ``bool (*)(struct ggml_tensor * t, bool ask, void * user_data)``
CB_EVAL_TYPE = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_bool, ctypes.c_void_p)


def make_cb_eval(collector: RoutingCollector):
    """A ctypes callback for ``llama_context_params.cb_eval`` feeding ``collector``.
    Keep a reference to the returned object as long as the context lives."""
    def _cb(tptr, ask, _user):
        try:
            t = GGMLTensor.from_address(tptr)
            name = t.name.decode("utf-8", "replace")
            if ask:
                return collector.wants(name)
            if collector.wants(name):
                collector.on_tensor(name, tensor_to_numpy(t))
        except Exception as exc:  # never raise through C; surface at result()
            collector.ids.clear()
            collector.error = exc
        return True
    return CB_EVAL_TYPE(_cb)
