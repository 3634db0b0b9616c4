"""MoEfication partition, routing reduction and the cb_eval capture path (constructed tensors;
no llama-cpp-python or model needed)."""

import ctypes

import numpy as np
import pytest

from ahasd_sim.traces.record.moefy import (GGML_TYPE_F32, GGML_TYPE_I32, GGMLTensor, RoutingCollector, balanced_assign,
                                      balanced_kmeans, make_cb_eval, tensor_to_numpy, topk_route)


def _fake_tensor(arr: np.ndarray, name: str, gtype: int):
    """A ggml_tensor struct over ``arr`` (numpy C order = ggml dims reversed)."""
    t = GGMLTensor()
    t.type = gtype
    ne = list(arr.shape[::-1]) + [1] * (4 - arr.ndim)
    nb = list(arr.strides[::-1]) + [arr.strides[0] * arr.shape[0]] * (4 - arr.ndim)
    for i in range(4):
        t.ne[i] = ne[i]
        t.nb[i] = nb[i]
    t.data = arr.ctypes.data
    t.name = name.encode()
    return t


def _direct_route(act, labels, E, k):
    """Reference by loops: mass_e = sum_{i: labels[i]=e} |act_i|; top-k by mass; weights renormalised."""
    out_ids, out_w = [], []
    for row in act:
        mass = [sum(abs(float(row[i])) for i in range(len(row)) if labels[i] == e) for e in range(E)]
        order = sorted(range(E), key=lambda e: (-mass[e], e))[:k]
        s = sum(mass[e] for e in order)
        out_ids.append(order)
        out_w.append([mass[e] / s for e in order])
    return np.array(out_ids), np.array(out_w)


def test_cb_eval_capture_matches_direct_computation():
    rng = np.random.default_rng(3)
    L, d_ff, E, k, n_tok = 2, 24, 6, 2, 5
    labels = np.stack([rng.permutation(np.repeat(np.arange(E), d_ff // E)) for _ in range(L)])
    acts = [rng.standard_normal((n_tok, d_ff)).astype(np.float32) for _ in range(L)]
    coll = RoutingCollector(L, k, E, labels)
    cb = make_cb_eval(coll)
    fakes = [_fake_tensor(acts[l], f"ffn_swiglu-{l}", GGML_TYPE_F32) for l in range(L)]
    other = _fake_tensor(acts[0], "attn_norm-0", GGML_TYPE_F32)
    coll.reset()
    # inactive collector asks for nothing (prefill runs at full speed)
    assert cb(ctypes.addressof(fakes[0]), True, None) is False
    coll.active = True
    assert cb(ctypes.addressof(fakes[0]), True, None) is True
    assert cb(ctypes.addressof(other), True, None) is False
    for f in fakes:
        assert cb(ctypes.addressof(f), False, None) is True
    ids, w = coll.result(n_tok)
    assert ids.shape == (n_tok, L, k)
    for l in range(L):
        ref_ids, ref_w = _direct_route(acts[l], labels[l], E, k)
        assert np.array_equal(ids[:, l], ref_ids)
        np.testing.assert_allclose(w[:, l], ref_w, rtol=1e-5)


def test_tensor_to_numpy_honours_strides():
    base = np.arange(48, dtype=np.float32).reshape(6, 8)
    view = base[:, ::2]                       # non-contiguous: every other neuron
    t = _fake_tensor(view, "x", GGML_TYPE_F32)
    assert np.array_equal(tensor_to_numpy(t), view)


def test_native_moe_topk_and_weights_parse():
    """A real MoE GGUF's tensors: ffn_moe_topk-<l> I32 [k, n_tok] and ffn_moe_weights-<l> F32 [1, k, n_tok]."""
    k, n_tok, E, L = 3, 4, 16, 1
    topk = np.array([[5, 2, 9], [1, 0, 3], [7, 8, 6], [15, 14, 13]], dtype=np.int32)   # (n_tok, k)
    wts = np.array([[0.2, 0.5, 0.3], [0.6, 0.3, 0.1], [0.1, 0.1, 0.8], [0.34, 0.33, 0.33]],
                   dtype=np.float32).reshape(n_tok, k, 1)
    coll = RoutingCollector(L, k, E, labels=None)
    coll.active = True
    cb = make_cb_eval(coll)
    ft = _fake_tensor(topk, "ffn_moe_topk-0", GGML_TYPE_I32)
    fw = _fake_tensor(wts, "ffn_moe_weights-0", GGML_TYPE_F32)
    assert cb(ctypes.addressof(ft), True, None) and cb(ctypes.addressof(fw), True, None)
    cb(ctypes.addressof(ft), False, None)
    cb(ctypes.addressof(fw), False, None)
    ids, w = coll.result(n_tok)
    assert ids[:, 0].tolist() == [[2, 9, 5], [1, 0, 3], [6, 7, 8], [15, 14, 13]]   # sorted by weight
    np.testing.assert_allclose(w[0, 0], [0.5, 0.3, 0.2], rtol=1e-6)


def test_missing_layer_is_an_error():
    coll = RoutingCollector(2, 1, 4, labels=np.zeros((2, 8), dtype=int))
    coll.active = True
    coll.on_tensor("ffn_swiglu-0", np.ones((3, 8), np.float32))
    with pytest.raises(RuntimeError, match="layers"):
        coll.result(3)


def test_topk_route_weights_and_ties():
    mass = np.array([[1.0, 3.0, 3.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    ids, w = topk_route(mass, 2)
    assert ids.tolist() == [[1, 2], [0, 1]]                 # ties: lower id first
    np.testing.assert_allclose(w, [[0.5, 0.5], [0.5, 0.5]])  # zero mass: uniform


def test_balanced_kmeans_equal_sizes_and_planted_clusters():
    rng = np.random.default_rng(0)
    E, per = 8, 20
    centers = rng.standard_normal((E, 16)) * 10
    X = np.repeat(centers, per, axis=0) + rng.standard_normal((E * per, 16)) * 0.1
    lab = balanced_kmeans(X, E, iters=10, seed=1)
    assert np.bincount(lab, minlength=E).tolist() == [per] * E
    # each planted group ends up in exactly one expert
    for g in range(E):
        assert len(set(lab[g * per:(g + 1) * per].tolist())) == 1


def test_balanced_assign_respects_capacity():
    d = np.array([[0.0, 5.0], [0.1, 5.0], [0.2, 5.0], [9.0, 0.0]])
    lab = balanced_assign(d, capacity=2)
    assert np.bincount(lab, minlength=2).tolist() == [2, 2]
    assert lab[0] == 0 and lab[1] == 0 and lab[3] == 1      # the farthest of the crowd moves
