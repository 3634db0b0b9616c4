#!/usr/bin/env python3
"""Write the Qualcomm AI Hub rows of validation/mobile/measured.csv from a quic/ai-hub-models checkout.

Reads ``qai_hub_models/models/<id>/perf.yaml`` at one commit (``git show``) and emits, per
(model, precision, device): one decode row (``tokens_per_second``, the "response rate after the
first token") and two prefill rows derived from the TTFT range: ``128 / ttft_min`` (one 128-token
prompt-processor iteration) and ``context_length / ttft_max`` (the full context), as the model's
``info.yaml`` defines the range -- but only when the upper bound is not just ``min x context/128``,
which it is in every file read at 52c080d2 (an extrapolation, so those rows are left out). Llama-v2-7B's prompt processor takes the whole 1024-token context
(min == max), so it gives one prefill row. Nothing is typed by hand.

Older files (the 2024 ``*_quantized`` models, OLD_FORMAT) time the two QNN graphs separately:
``Llama*-TokenGenerator-KVCache-Quantized`` (one token over a 1023-token KV cache: decode tok/s =
1e6 / inference_time_us) and ``Llama*-PromptProcessor-Quantized`` (1024 tokens in one graph:
prefill tok/s = 1024 / inference_time); their info.yaml gives "Prompt processor input: 1024
tokens", "Max context length: 1024". The ``aggregated`` section (with a "Samsung Galaxy S23 Ultra"
prompt-processor time of 117 ms for 1024 tokens, 8,700 tok/s, implausible) is not read.

Each row's notes carry ``ar=N`` (tokens per prompt-processor graph call) and ``graph_context=N``
(positions of the static graph), which ``validate --mobile`` models.

Usage: python scripts/mobile_measured_aihub.py GIT_DIR COMMIT --out validation/mobile/measured.csv
(GIT_DIR: a quic/ai-hub-models git directory; the file is written atomically).
"""
from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ahasd_sim.cli_common import run_script, script_parser  # noqa: E402
from ahasd_sim.config.errors import InputError  # noqa: E402
from ahasd_sim.output import atomic_write_text  # noqa: E402

MODELS = {  # AI Hub id -> (zoo name as published, params in B)
    "llama_v2_7b_chat": ("Llama-2-7B-Chat", 6.74),
    "llama_v3_8b_instruct": ("Llama-3-8B-Instruct", 8.03),
    "llama_v3_1_8b_instruct": ("Llama-3.1-8B-Instruct", 8.03),
    "llama_v3_2_1b_instruct": ("Llama-3.2-1B-Instruct", 1.24),
    "llama_v3_2_3b_instruct": ("Llama-3.2-3B-Instruct", 3.21),
    "qwen2_5_1_5b_instruct": ("Qwen2.5-1.5B-Instruct", 1.54),
    "qwen2_5_7b_instruct": ("Qwen2.5-7B-Instruct", 7.61),
    "qwen2_7b_instruct": ("Qwen2-7B-Instruct", 7.62),
}
PROMPT_PROCESSOR_TOKENS = {"llama_v2_7b_chat": 1024}  # info.yaml "Input sequence length for Prompt Processor"
COLUMNS = ("source,year,device,soc,unit,memory,mem_gb_s,model,params_b,precision,phase,context_or_prompt,"
           "tok_s,j_per_tok,power_w,spec_decoding,notes").split(",")
OLD_FORMAT = (  # (commit, AI Hub id, zoo name as published, params in B, graph context = prompt length)
    ("1c5de3b94a1f40968224d6ee8a6d533501704967", "llama_v3_8b_chat_quantized", "Llama-3-8B-Chat", 8.03, 1024),
    ("1c5de3b94a1f40968224d6ee8a6d533501704967", "llama_v2_7b_chat_quantized", "Llama-2-7B-Chat", 6.74, 1024),
)
PRECISION_NOTE = {"w4a16": "w4a16 + w8a16 (few layers)", "w4": "w4 + w8 (few layers), fp16 activations"}


def _git(git_dir: str, *args: str) -> str:
    r = subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True, text=True)
    if r.returncode:
        first = (r.stderr.strip().splitlines() or ["git failed"])[0]
        raise InputError(f"{git_dir}: git {' '.join(args)}: {first}")
    return r.stdout


def current_format(git_dir: str, commit: str, w) -> None:
    date = _git(git_dir, "log", "-1", "--format=%cs", commit).strip()
    for mid, (mname, pb) in MODELS.items():
        path = f"qai_hub_models/models/{mid}/perf.yaml"
        doc = yaml.safe_load(_git(git_dir, "show", f"{commit}:{path}"))
        src = f"quic/ai-hub-models@{commit[:12]}:{path}"
        for prec, pdoc in doc["precisions"].items():
            for comp in pdoc["components"].values():
                for device, rt in comp["performance_metrics"].items():
                    for runtime, m in rt.items():
                        for lm in m["llm_metrics"]:
                            ctx = int(lm["context_length"])
                            base = dict(source=src, year=date[:4], device=device, soc=device, unit="NPU",
                                        memory="", mem_gb_s="", model=mname, params_b=pb,
                                        precision="w4afp16" if prec == "w4" else prec, j_per_tok="",
                                        power_w="", spec_decoding="no")
                            pp = PROMPT_PROCESSOR_TOKENS.get(mid, 128)
                            note = (f"{PRECISION_NOTE.get(prec, prec)}; runtime {runtime}; perf.yaml of {date}; "
                                    f"ar={pp} graph_context={ctx}")
                            w.writerow(base | dict(phase="decode", context_or_prompt=ctx,
                                                   tok_s=f"{float(lm['tokens_per_second']):.6g}",
                                                   notes=f"tokens_per_second (response rate after the first token), "
                                                         f"graph context {ctx}; {note}"))
                            t = lm["time_to_first_token_range_milliseconds"]
                            pts = [(pp, float(t["min"]), "ttft min")]
                            # AI Hub's upper bound is the lower one x context/128 in every file read
                            # (an extrapolation, not a second measurement): keep it only when it is not
                            if pp != ctx and abs(float(t["max"]) / float(t["min"]) - ctx / pp) > 1e-3 * ctx / pp:
                                pts.append((ctx, float(t["max"]), "ttft max"))
                            for n, ms, which in pts:
                                w.writerow(base | dict(phase="prefill", context_or_prompt=n,
                                                       tok_s=f"{n / (ms / 1e3):.6g}",
                                                       notes=f"DERIVED {n} tokens / {which} {ms:g} ms; {note}"))


def old_format(git_dir: str, w) -> None:
    for commit, mid, mname, pb, ctx in OLD_FORMAT:
        path = f"qai_hub_models/models/{mid}/perf.yaml"
        doc = yaml.safe_load(_git(git_dir, "show", f"{commit}:{path}"))
        src = f"quic/ai-hub-models@{commit[:12]}:{path}"
        for m in doc["models"]:
            phase = "decode" if "TokenGenerator" in m["name"] else "prefill" if "PromptProcessor" in m["name"] else None
            if phase is None:
                continue
            for e in m["performance_metrics"]:
                dev = e["reference_device_info"]["name"]
                us = float(e["torchscript_onnx_qnn"]["inference_time"])
                n = 1 if phase == "decode" else ctx
                w.writerow(dict(source=src, year=str(e.get("timestamp", ""))[:4], device=dev, soc=dev, unit="NPU",
                                memory="", mem_gb_s="", model=mname, params_b=pb, precision="w4a16", phase=phase,
                                context_or_prompt=ctx, tok_s=f"{n / (us / 1e6):.6g}", j_per_tok="", power_w="",
                                spec_decoding="no",
                                notes=f"DERIVED {n} token(s) / {m['name']} inference_time {us:g} us; "
                                      f"w4a16 + w8a16 (few layers); measured {e.get('timestamp', '')}; "
                                      f"ar={ctx} graph_context={ctx}"))


def parser():
    p = script_parser("Write validation/mobile/measured.csv from Qualcomm AI Hub perf.yaml files.")
    p.add_argument("git_dir", metavar="GIT_DIR", help="a quic/ai-hub-models git directory")
    p.add_argument("commit", metavar="COMMIT", help="commit of the current-format perf.yaml files (52c080d2...)")
    p.add_argument("--out", required=True, metavar="CSV", help="the CSV to write (atomically)")
    return p


def body(args) -> int:
    buf = io.StringIO()
    w = csv.DictWriter(buf, COLUMNS, lineterminator="\n")
    w.writeheader()
    current_format(args.git_dir, args.commit, w)
    old_format(args.git_dir, w)
    atomic_write_text(Path(args.out), buf.getvalue())
    print(f"wrote {args.out}: {buf.getvalue().count(chr(10)) - 1} rows")
    return 0


def main(argv=None) -> int:
    return run_script(parser(), body, argv)


if __name__ == "__main__":
    sys.exit(main())
