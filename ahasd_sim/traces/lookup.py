"""Exact acceptance of the model-free lookup drafter from a greedy chain trace.

A greedy chain trace holds the target's own tokens (``tgt_tok``), so what a deterministic
drafter that reads only the context would propose at each position can be computed, not
guessed: at position ``p`` the context is the target's tokens of the same response before
``p`` (inside a round the accepted drafts ARE those tokens, and a chain's first wrong token
ends what is replayed on-path), and the lookup proposes the token that followed the latest
earlier occurrence of the longest context suffix of ``max_ngram`` .. ``min_ngram`` tokens.
A position is accepted when that proposal is the target's token; a position without any
match has no proposal (counted as a rejected draft: the drafter can only offer a guess).

Context: the shipped traces do not hold the prompts' token ids (only their lengths and text
hashes), so the lookup sees the generated tokens of the response, not the prompt. That is a
lower bound on what prompt lookup achieves on prompt-copying tasks (code editing, RAG).

:func:`lookup_trace` returns the trace with the drafter-side columns replaced by the lookup's,
so the replay (:mod:`ahasd_sim.modes.replay`) runs on it unchanged: ``accept``/``match`` are
the exact verdicts; a proposal's drafter probabilities are a point mass (p = 1, entropy 0),
no proposal is the uniform distribution over the vocabulary (p = 1/V, entropy ln V); no
off-path rollouts (after a wrong token every draft is rejected whatever it is).
"""
from __future__ import annotations

import math

import numpy as np

from .format import Trace

NO_PROPOSAL = -1


def lookup_proposals(tgt_tok, pos_in_response, max_ngram: int, min_ngram: int = 1) -> np.ndarray:
    """Per position, the lookup's proposed token (``NO_PROPOSAL`` where no suffix matched).

    One pass per response with one dict per n-gram size (key: the n tokens, value: the end
    index of their latest occurrence whose following token is already known)."""
    tok = np.asarray(tgt_tok, dtype=np.int64).tolist()
    pir = np.asarray(pos_in_response, dtype=np.int64).tolist()
    n = len(tok)
    out = [NO_PROPOSAL] * n
    sizes = range(max_ngram, min_ngram - 1, -1)
    tables: dict[int, dict[tuple, int]] = {}
    start = 0
    for p in range(n):
        if p == 0 or pir[p] == 0 or pir[p] != pir[p - 1] + 1:   # a new response: empty context
            start = p
            tables = {k: {} for k in sizes}
        # ngrams ending at p - 2 (their next token p - 1 is known) join the index now
        e = p - 2
        if e >= start:
            for k in sizes:
                if e - k + 1 >= start:
                    tables[k][tuple(tok[e - k + 1:e + 1])] = e
        for k in sizes:                   # longest suffix of the context [start, p) first
            if p - k < start:
                continue
            hit = tables[k].get(tuple(tok[p - k:p]))
            if hit is not None:
                out[p] = tok[hit + 1]
                break
    return np.asarray(out, dtype=np.int64)


def lookup_trace(trace, max_ngram: int, min_ngram: int = 1) -> Trace:
    """``trace`` with the lookup drafter's exact verdicts and views (see the module docstring);
    memoised on the trace object per (max_ngram, min_ngram)."""
    memo = trace.__dict__.setdefault("_lookup_traces", {})
    key = (int(max_ngram), int(min_ngram))
    got = memo.get(key)
    if got is not None:
        return got
    tgt = np.asarray(trace.tgt_tok, dtype=np.int64)
    n = tgt.size
    prop = lookup_proposals(tgt, trace.pos_in_response, *key)
    has = prop != NO_PROPOSAL
    acc = has & (prop == tgt)
    header = dict(getattr(trace, "header", {}) or {})
    n_vocab = int(header.get("n_vocab") or 0) or int(tgt.max(initial=0)) + 2
    k = int(np.asarray(trace.topk_p).shape[1]) if np.asarray(trace.topk_p).ndim == 2 else 1
    uniform = 1.0 / n_vocab
    cols = {name: np.asarray(getattr(trace, name)) for name in
            ("prompt_len", "pos_in_response", "tgt_tok")}
    for name, default in (("prompt_id", None), ("category", 0), ("tgt_p", 1.0), ("tgt_H", 0.0), ("u", np.nan)):
        v = getattr(trace, name, None) if hasattr(trace, "columns") or hasattr(trace, name) else None
        if v is None:
            v = np.cumsum(np.asarray(trace.pos_in_response) == 0) - 1 if name == "prompt_id" else np.full(n, default)
        cols[name] = np.asarray(v)
    drf = np.where(has, prop, 0)
    p_tok = np.where(has, 1.0, uniform)
    cols.update({
        "drf_tok": drf, "drf_top1": drf, "drf_p_top1": p_tok, "drf_p_tok": p_tok,
        "drf_p_tgt": np.where(acc, 1.0, np.where(has, 0.0, uniform)),
        "tgt_p_drf": np.where(acc, cols["tgt_p"], 0.0),
        "drf_H": np.where(has, 0.0, math.log(n_vocab)),
        "match": acc, "accept": acc, "alpha": acc.astype(float),
        "topk_ids": np.tile(drf[:, None], (1, k)),
        "topk_p": np.where(has[:, None], np.eye(1, k)[0][None, :], np.full((1, k), uniform)),
        "rollout_offset": np.zeros(n, dtype=np.int64), "rollout_len": np.zeros(n, dtype=np.int64),
        "rollout_tok": np.zeros(0, dtype=np.int64), "rollout_p": np.zeros(0), "rollout_H": np.zeros(0),
    })
    header["drafter"] = {"kind": "lookup", "max_ngram": key[0], "min_ngram": key[1],
                         "context": "generated tokens of the response (the trace holds no prompt tokens)",
                         "recorded_drafter": (header.get("models") or {}).get("drafter")}
    out = Trace(cols, header, path=getattr(trace, "path", "<memory>"), file_sha256=getattr(trace, "file_sha256", None))
    memo[key] = out
    return out


def lookup_acceptance(trace, max_ngram: int, min_ngram: int = 1) -> dict:
    """Per-position statistics of the lookup on ``trace``: how often it proposes, how often the
    proposal is right (of all positions, and of the proposals)."""
    t = lookup_trace(trace, max_ngram, min_ngram)
    n = len(t.tgt_tok)
    has = np.asarray(t.drf_H) == 0.0
    acc = np.asarray(t.accept)
    return {"positions": n, "proposal_rate": float(has.mean()) if n else 0.0,
            "acceptance_rate": float(acc.mean()) if n else 0.0,
            "precision": float(acc[has].mean()) if has.any() else 0.0}
