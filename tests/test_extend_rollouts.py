"""Rollout extension (``traces extend-rollouts``) without llama.cpp.

A stand-in language model whose logits depend only on (fed token, position) drives both the
recorder's own loop (``record_chain.record_prompt``) and the extender. Extending a trace recorded
with a short ``L_max`` must give exactly the rollouts the recorder writes when run with the long
``L_max`` directly: same tokens (teacher forcing, positions, the sampled stream advanced past the
recorded draws), same probabilities and entropies, same early stops at end-of-sequence."""
import numpy as np
import pytest

from ahasd_sim.traces.record import chain as R
from ahasd_sim.traces import format as T
from ahasd_sim.traces.record.extend_rollouts import check_extension, extend_prompt

V, EOS = 12, 11


def _logits(tok: int, pos: int, bias: int) -> np.ndarray:
    x = np.random.default_rng([int(tok), int(pos), bias]).normal(size=V) * 2.5
    x[EOS] -= 1.5            # end-of-sequence is possible but not frequent
    return x.astype(np.float32)


class _Model:
    """``GGUFModel``'s interface for the recorder: logits of (last token fed, its position)."""

    def __init__(self, bias: int):
        self.bias, self.n_vocab = bias, V

    def decode(self, tokens, pos0, n_logits=1):
        rows = [_logits(t, pos0 + i, self.bias) for i, t in enumerate(tokens)]
        return np.stack(rows[-n_logits:])


class _Drafter:
    """``record_tree.SeqLlama``'s interface, same logits as the drafter ``_Model``; records KV calls."""

    def __init__(self):
        self.prefilled = None
        self.forked = []

    def seq_rm(self, seq, p0=-1, p1=-1):
        pass

    def seq_cp(self, src, dst, p0=-1, p1=-1):
        self.forked.append((src, dst, p0, p1))

    def prefill(self, toks, pos0):
        self.prefilled = (list(toks), pos0)

    def decode(self, toks, pos, seqs, logits):
        return np.stack([_logits(t, p, 2) for t, p, flag in zip(toks, pos, logits) if flag])


@pytest.fixture
def eos():
    saved = set(R.EOS_IDS)
    R.EOS_IDS.clear()
    R.EOS_IDS.add(EOS)
    yield
    R.EOS_IDS.clear()
    R.EOS_IDS.update(saved)


def _record(mode: str, L_max: int):
    cfg = {"mode": mode, "temperature": 1.0, "top_k": 4, "L_max": L_max, "max_new": 60,
           "rollout_mode": "auto", "seed": 7}
    cols, _ = R.record_prompt(_Model(1), _Model(2), [3, 5, 1, 4], cfg, prompt_index=5)
    return cols


@pytest.mark.parametrize("mode", ["greedy", "sample"])
def test_extension_equals_a_direct_long_recording(eos, mode):
    short, long_ = _record(mode, 3), _record(mode, 9)
    for name in ("tgt_tok", "drf_tok", "accept", "drf_H"):       # the path does not depend on L_max
        np.testing.assert_array_equal(short[name], long_[name])
    assert (short["rollout_len"] > 0).sum() >= 5                  # the scenario has rollouts to extend
    assert (long_["rollout_len"] == 9).sum() >= 3 and (long_["rollout_len"] < 9).any()
    hdr = {"L_max": 3, "rollout_mode": "sample" if mode == "sample" else "greedy",
           "entropy_softmax_temperature": 1.0, "seed": 7}
    drf = _Drafter()
    out, stats = extend_prompt(drf, [3, 5, 1, 4], short, hdr, prompt_index=5, L_new=9, batch=2)
    for name in ("rollout_len", "rollout_offset", "rollout_tok"):
        np.testing.assert_array_equal(out[name], long_[name], err_msg=name)
    np.testing.assert_allclose(out["rollout_p"], long_["rollout_p"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(out["rollout_H"], long_["rollout_H"], rtol=0, atol=1e-5)
    # only full-length rollouts without end-of-sequence are extended; the path KV is built once
    full = [t for t in np.flatnonzero(short["rollout_len"] == 3)
            if short["rollout_tok"][short["rollout_offset"][t] + 2] != EOS]
    assert stats["extended"] == len(full)
    assert drf.prefilled == ([3, 5, 1, 4] + list(short["tgt_tok"][:-1]), 0)
    assert [p1 for _src, _dst, _p0, p1 in drf.forked] == [4 + t for t in full]
    # the same logits recompute the recorded steps exactly
    assert stats["same_token"] == stats["steps"] == 3 * len(full)
    assert stats["max_abs_dp"] < 1e-6


def _trace_cols(cols):
    n = len(cols["tgt_tok"])
    c = {k: np.asarray(v) for k, v in cols.items()}
    c["prompt_id"] = np.zeros(n, np.int32)
    c["category"] = np.zeros(n, np.int16)
    return c


def test_check_extension_rejects_changed_path_or_prefix(eos, tmp_path):
    short, long_ = _record("greedy", 3), _record("greedy", 9)
    hdr = {"format": T.FORMAT_NAME, "format_version": T.FORMAT_VERSION, "mode": "greedy", "categories": ["c"],
           "prompts": [{"index": 0}], "top_k": 4, "L_max": 3}
    path = tmp_path / "short.npz"
    T.write_trace(path, hdr, _trace_cols(short))
    old = T.load_trace(path)
    new = {k: v.copy() for k, v in old.columns.items()}
    new.update({k: long_[k] for k in ("rollout_len", "rollout_offset", "rollout_tok", "rollout_p", "rollout_H")})
    check_extension(old, new)                                     # a faithful extension passes
    bad = dict(new, drf_H=new["drf_H"] + np.float32(1e-3))
    with pytest.raises(AssertionError, match="drf_H"):
        check_extension(old, bad)
    t = int(np.flatnonzero(new["rollout_len"] > 1)[0])
    tok = new["rollout_tok"].copy()
    tok[new["rollout_offset"][t] + 1] += 1
    with pytest.raises(AssertionError, match="rollout_tok"):
        check_extension(old, dict(new, rollout_tok=tok))
