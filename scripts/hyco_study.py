#!/usr/bin/env python3
"""Mobile-cloud study: targets the phone cannot hold, every mode on links x phones per GPU x windows.

  python scripts/hyco_study.py [--traces DIR] [--windows 6] [--tokens 256] [--workers 2]

Setting (hw_configs/hyco_large_target.yaml): a 12 GiB phone (NPU, no PIM) drafting with the
Qwen2.5-Coder-0.5B shape; cloud targets LLaMA2-13B and LLaMA2-70B on the H200, whose KV-cache
memory limits admission (cloud.kv_cache_gib = -1, derived). Acceptance is replayed from the
trace's Qwen2.5-Coder 0.5B -> 1.5B pair: a what-if for these targets. device_only cannot hold
either target; its row is the phone running the trace's own 1.5B target (another model).

Writes ``docs/studies/hyco/windows.csv`` (one row per run: one trace window of one mode, link
and phones-per-GPU), the figure ``docs/figures/hyco_mobile_cloud.png`` and regenerates the
generated blocks of ``docs/mobile_cloud.md`` (``python scripts/docs.py`` renders them from
the CSV; its ``hyco-smoke`` block is a fresh cheap run that ``scripts/docs.py --check``
compares with the doc).

Samples: window w replays the trace window starting at the w-th of ``--windows`` prompts
spread over the token trace (``ahasd_sim.simulation.window_start_prompts``) with run seed w,
so the cellular trace starts at a different random offset (``network.trace_offset_s < 0``)
and the jitter differs. Statistics: ratio estimators over windows (total time / total
tokens, total USD / total tokens, total J / total tokens) with 95% percentile intervals from
resampling whole windows (2000 bootstrap resamples, seeded). Fronts: the variants not
dominated in (TPOT, cloud USD per 1k tokens under the pricing, phone mJ per token) within one
(link, phones per GPU, pricing); never pooled across configurations.

Real traces: mahimahi's public cellular traces (GPL-3.0 data, not shipped; where to get them:
docs/references.md, [mahimahi]), read from --traces DIR, else $AHASD_SIM_NETWORK_TRACES; without
them only the constant LTE link runs.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from ahasd_sim.output import atomic_write_text  # noqa: E402

HYCO = ROOT / "hw_configs" / "hyco_mobile_cloud.yaml"
STUDY = ROOT / "docs" / "studies" / "hyco"
FIGURE = ROOT / "docs" / "figures" / "hyco_mobile_cloud.png"
DOC = ROOT / "docs" / "mobile_cloud.md"
PRICINGS = ("shared_busy", "dedicated_wall", "per_token_api")
FIGURE_SUFFIXES = (".png", ".pdf", ".svg")
LARGE = ROOT / "hw_configs" / "hyco_large_target.yaml"
PHONES = (1, 8, 64)
SLOS_MS = (10, 20, 40)
TARGETS = {"LLaMA2-13B": ["run.target_model=llama2-13b"], "LLaMA2-70B": ["run.target_model=llama2-70b"]}
VARIANTS = {
    "cloud_autoregressive": ["run.mode=cloud_autoregressive"],
    "cloud_speculative": ["run.mode=hybrid", "hyco.options=[cloud_sd]"],
    "split": ["run.mode=device_draft_cloud_verify"],
    "split_rtt_aware": ["run.mode=device_draft_cloud_verify", "run.policy=rtt_aware"],
    "hybrid": ["run.mode=hybrid"],
    "hybrid_rtt_aware": ["run.mode=hybrid", "run.policy=rtt_aware"],
}
#: the phone alone: it cannot hold either target, so it runs the trace's own 1.5B target
LOCAL = {"device_only_1.5B": ["run.mode=device_only", "run.target_model=qwen2.5-coder-1.5b"]}
TRACES = {"TMobile-LTE-short": "TMobile-LTE-short", "ATT-LTE-driving-2016": "ATT-LTE-driving-2016"}
CONSTANT = "LTE 6/13 Mbit/s"
BASE = ["run.timeline=false", "run.windows=1", "network.jitter_ms=5", "network.rtt_ms=50", "cloud.kv_cache_gib=-1"]


def links(traces: Path | None) -> dict[str, list[str]]:
    out = {CONSTANT: []}
    if traces is not None:
        for label, name in TRACES.items():
            up, down = traces / f"{name}.up", traces / f"{name}.down"
            if up.is_file() and down.is_file():
                out[label] = [f"network.uplink_trace={up}", f"network.downlink_trace={down}"]
    return out


def window_prompts(n_windows: int, tokens: int) -> list[int]:
    from ahasd_sim.config import load_config
    from ahasd_sim.simulation import _load_full_trace, window_start_prompts
    cfg = load_config(HYCO, [f"run.windows={n_windows}", f"run.generated_tokens={tokens}"])
    return window_start_prompts(cfg, _load_full_trace(cfg))


def jobs(n_windows: int, tokens: int, traces: Path | None, phones=PHONES, slos=SLOS_MS,
         targets=tuple(TARGETS)) -> list[dict]:
    """Every run of the study: (target, variant, link, phones, window) with its overrides. Fleets of
    several phones run on the constant link only (their cost grows with the phones simulated)."""
    prompts = window_prompts(n_windows, tokens)
    out = []
    for w, p in enumerate(prompts):
        win = [*BASE, f"run.generated_tokens={tokens}", f"run.trace_start_prompt={p}", f"run.seed={w}"]
        for v, sets in LOCAL.items():                  # no link, no cloud: one run per window
            out.append({"target": "-", "variant": v, "link": "-", "phones": 1, "window": w, "prompt": p,
                        "set": [*win, *sets]})
        for t in targets:
            tsets = TARGETS[t]
            for link, lsets in links(traces).items():
                for n in (phones if link == CONSTANT else (1,)):
                    for v, sets in VARIANTS.items():
                        out.append({"target": t, "variant": v, "link": link, "phones": n, "window": w, "prompt": p,
                                    "set": [*win, *tsets, *lsets, *sets, f"cloud.phones_per_gpu={n}"]})
            for slo in slos:                            # the cost-latency knob, constant link, 1 phone
                out.append({"target": t, "variant": f"hybrid_slo_{slo}ms", "link": CONSTANT, "phones": 1, "window": w,
                            "prompt": p, "set": [*win, *tsets, "run.mode=hybrid", f"hyco.tpot_slo_ms={slo}"]})
    return out


def run_one(job: dict) -> dict:
    from ahasd_sim.config import load_config
    from ahasd_sim.simulation import run_simulation
    s = run_simulation(load_config(LARGE, job["set"])).summary
    n = s["generated_tokens"]
    row = {k: job[k] for k in ("target", "variant", "link", "phones", "window", "prompt")}
    row.update(tokens=n, time_s=s["makespan_s"], energy_j=s["energy_j"],
               acceptance=s["acceptance_rate"], uplink_bytes=s.get("uplink_bytes", 0),
               round_trips=s.get("round_trips", 0), radio_j=s["energy_breakdown_j"].get("network", {}).get("dynamic", 0.0),
               cloud_gpu_share_s=s.get("cloud_gpu_share_s", 0.0), drafted=s.get("drafted_tokens", 0),
               verifications=s.get("verifications", 0),
               rounds=json.dumps(s.get("mode_stats", {}).get("rounds_by_option", {}), sort_keys=True))
    by = s.get("cloud_cost_usd_per_1k_tokens_by_pricing", {})
    for p in PRICINGS:
        row[f"usd_{p}"] = by.get(p, 0.0) * n / 1000
    f = s.get("cloud_fleet", {})
    for q in ("p50", "p90", "p99"):
        row[f"user_tpot_{q}_s"] = f[f"user_tpot_{q}_ms"] * 1e-3 if f else s["makespan_s"] / n
    row["slo_attainment"] = f.get("slo_attainment", float(s["makespan_s"] / n <= 0.05))
    row["mean_batch"] = f.get("mean_batch_forwards", 0.0)
    row["gpu_utilization"] = f.get("gpu_utilization", 0.0)
    row["kv_refusals"] = f.get("kv_refusals", 0)
    row["admission_wait_p90_s"] = f.get("admission_wait_p90_ms", 0.0) * 1e-3
    return row


# ------------------------------------------------------------------ statistics
def ratio_ci(num, den, reps: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """sum(num) / sum(den) over windows and its 95% percentile interval over resampled windows."""
    num, den = np.asarray(num, float), np.asarray(den, float)
    est = float(num.sum() / den.sum())
    if num.size < 2:
        return est, est, est
    idx = np.random.default_rng(seed).integers(0, num.size, size=(reps, num.size))
    bs = num[idx].sum(axis=1) / den[idx].sum(axis=1)
    lo, hi = np.percentile(bs, [2.5, 97.5])
    return est, float(lo), float(hi)


def summarize(df):
    """Per (link, phones, variant): TPOT ms, phone mJ/token, USD/1k tokens per pricing (est, lo, hi)."""
    import pandas as pd
    rows = []
    if "target" not in df:
        df = df.assign(target="-")
    for (target, link, phones, variant), g in df.groupby(["target", "link", "phones", "variant"], sort=False):
        r = {"target": target, "link": link, "phones": phones, "variant": variant, "windows": len(g)}
        r["tpot_ms"] = ratio_ci(g.time_s * 1e3, g.tokens)
        r["mj_per_token"] = ratio_ci(g.energy_j * 1e3, g.tokens)
        for p in PRICINGS:
            r[f"musd_1k_{p}"] = ratio_ci(g[f"usd_{p}"] * 1e6, g.tokens)   # milli-USD per 1k tokens
        r["user_tpot_p90_ms"] = ratio_ci(g.user_tpot_p90_s * 1e3, np.ones(len(g)))
        r["slo_attainment"] = float(g.slo_attainment.mean())
        r["mean_batch"] = float(g.mean_batch.mean())
        r["kv_refusals"] = float(g.kv_refusals.mean()) if "kv_refusals" in g else 0.0
        r["gpu_s_per_token"] = ratio_ci(g.cloud_gpu_share_s, g.tokens)
        rows.append(r)
    return pd.DataFrame(rows)


def front(rows: list[dict], pricing: str) -> list[str]:
    keys = ("tpot_ms", f"musd_1k_{pricing}", "mj_per_token")
    out = []
    for a in rows:
        dom = any(all(b[k][0] <= a[k][0] for k in keys) and any(b[k][0] < a[k][0] for k in keys)
                  for b in rows if b is not a)
        if not dom:
            out.append(a["variant"])
    return out


def _c(v, d=2) -> str:
    return f"{v[0]:.{d}f} [{v[1]:.{d}f}, {v[2]:.{d}f}]"


# ------------------------------------------------------------------ rendering
def render_study(df) -> str:
    """The doc's tables from the study's windows table (python scripts/docs.py calls this)."""
    summ = summarize(df)
    local = summ[summ.link == "-"]
    n_win = int(df.window.nunique())
    tokens = int(df.tokens.iloc[0])
    lines = [f"{n_win} trace windows of {tokens} tokens per cell (windows = samples; ratio estimators; "
             "95% intervals from 2000 resamples of whole windows). TPOT and energy are the run's own phone; "
             "p90 is over all phones on the GPU. Cost in milli-USD per 1k tokens; energy in mJ per token "
             "(phone: compute, memory, radio; the radio's promotion and tail charged per session of 512 tokens). "
             "**Acceptance is a what-if** for both targets: the trace's Qwen2.5-Coder 0.5B -> 1.5B pair replayed "
             "with the time and energy of the LLaMA2 shapes. The server's KV memory is the H200's usable "
             "memory minus the weights (admission by reservation). `device_only_1.5B`: the phone cannot hold "
             "either target; it runs the trace's own 1.5B target instead (another model, for reference).", ""]
    knob = summ[summ.variant.str.startswith("hybrid_slo_")]
    main = summ[~summ.variant.str.startswith("hybrid_slo_") & (summ.link != "-")]
    for (target, link), gl in main.groupby(["target", "link"], sort=False):
        lines += [f"#### {target}, {link}, RTT 50 ms", "",
                  "| phones/GPU | variant | TPOT ms | user p90 ms | mJ/tok | shared_busy | dedicated_wall | per_token_api | batch |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for (phones, g) in gl.groupby("phones", sort=False):
            rows = [*g.to_dict("records"), *[dict(r, phones=phones) for r in local.to_dict("records")]]
            for r in rows:
                lines.append(f"| {phones} | {r['variant']} | {_c(r['tpot_ms'])} | {r['user_tpot_p90_ms'][0]:.2f} | "
                             f"{_c(r['mj_per_token'], 1)} | {_c(r['musd_1k_shared_busy'], 3)} | "
                             f"{_c(r['musd_1k_dedicated_wall'], 3)} | {_c(r['musd_1k_per_token_api'], 3)} | "
                             f"{r['mean_batch']:.1f} |")
        lines.append("")
        lines += ["On the latency-cost-energy front (not dominated in TPOT, cost under the pricing, phone energy; "
                  "per_token_api is the front a user paying per token chooses from):", "",
                  "| phones/GPU | shared_busy | dedicated_wall | per_token_api |", "|---|---|---|---|"]
        for phones, g in gl.groupby("phones", sort=False):
            rows = [*g.to_dict("records"), *local.to_dict("records")]
            lines.append(f"| {phones} | " + " | ".join(", ".join(front(rows, p)) for p in PRICINGS) + " |")
        lines.append("")
    lines += user_front_lines(main, local)
    lines += capacity_table(main)
    if len(knob):
        lines += ["#### Cost-latency knob (hybrid, `hyco.tpot_slo_ms`; constant link, 1 phone, shared_busy)", "",
                  "| target | TPOT target ms | TPOT ms | milli-USD / 1k tok | mJ/tok |", "|---|---|---|---|---|"]
        for r in sorted(knob.to_dict("records"), key=lambda r: (r["target"], int(r["variant"].split("_")[2][:-2]))):
            lines.append(f"| {r['target']} | {r['variant'].split('_')[2][:-2]} | {_c(r['tpot_ms'])} | "
                         f"{_c(r['musd_1k_shared_busy'], 3)} | {_c(r['mj_per_token'], 1)} |")
        lines.append("")
    lines += capacity_lines(df)
    return "\n".join(lines).rstrip()


def user_front_lines(main, local) -> list[str]:
    """Where split or hybrid sits on the per-token-pricing front (what a user chooses from)."""
    out = ["#### Does split or hybrid reach the user's front? (per_token_api pricing, 1 phone)", ""]
    for (target, link), g in main[main.phones == 1].groupby(["target", "link"], sort=False):
        rows = [*g.to_dict("records"), *local.to_dict("records")]
        fr = front(rows, "per_token_api")
        ours = [v for v in fr if v.startswith(("split", "hybrid"))]
        out.append(f"- {target}, {link}: front = {', '.join(fr)}; "
                   + (f"split/hybrid on it: {', '.join(ours)}." if ours else "no split or hybrid variant on it."))
    return out + [""]


def capacity_table(main) -> list[str]:
    """Capacity at the per-user SLO: the most phones per GPU (of those simulated) whose p90 TPOT meets it."""
    out = ["#### Capacity at the SLO (p90 per-user TPOT <= 50 ms, cloud.user_tpot_slo_ms; phones simulated: "
           + ", ".join(map(str, PHONES)) + "; constant link; KV admission on)", "",
           "| target | variant | capacity (phones/GPU) | GPU ms per token at the largest fleet | KV refusals there |",
           "|---|---|---|---|---|"]
    const = main[main.link == CONSTANT]
    for (target, variant), g in const.groupby(["target", "variant"], sort=False):
        ok = [int(r["phones"]) for r in g.to_dict("records") if r["user_tpot_p90_ms"][0] <= 50.0]
        big = g[g.phones == g.phones.max()].to_dict("records")[0]
        top = int(g.phones.max())
        cap = (f">= {top}" if max(ok) == top else str(max(ok))) if ok else "< 1"
        gpu = tuple(x * 1e3 for x in big["gpu_s_per_token"])
        out.append(f"| {target} | {variant} | {cap} | {_c(gpu, 3)} | {big['kv_refusals']:.0f} |")
    return out + [""]


def capacity_lines(df) -> list[str]:
    """Server capacity: the SaaD factor 1 + gamma t_d / t_v vs the measured GPU time per token, per
    target and fleet size (under the KV limit)."""
    from ahasd_sim.config import load_config
    from ahasd_sim.modes.mobile_cloud.engine import build_cloud_costs
    from ahasd_sim.workload.models import get_model
    if "target" not in df:
        return []
    out = ["#### Server capacity freed by split drafting (constant link, KV admission on)", "",
           "GPU time per output token, cloud speculative / split (the server capacity split drafting frees), "
           "measured over paired windows, against \"Speculation at a Distance\"'s 1 + gamma t_d / t_v (gamma: "
           "drafts per cloud round; t_d, t_v from the GPU model at KV 512; acceptance differs between the two, so "
           "the measured ratio also carries the tokens per round):", "",
           "| target | phones/GPU | measured | predicted |", "|---|---|---|---|"]
    for target in [t for t in dict.fromkeys(df.target) if t in TARGETS]:
        cfg = load_config(LARGE, TARGETS[target])
        cc = build_cloud_costs(cfg, get_model(cfg.run.draft_model), get_model(cfg.run.target_model))
        for n in sorted(df[(df.target == target) & (df.link == CONSTANT)].phones.unique()):
            one = df[(df.phones == n) & (df.link == CONSTANT) & (df.target == target)]
            sd, sp = one[one.variant == "cloud_speculative"], one[one.variant == "split"]
            if sd.empty or sp.empty:
                continue
            gamma = float(sd.drafted.sum() / sd.verifications.sum())
            g = max(1, round(gamma))
            t_d, t_v = cc.gpu_draft_token(512).duration_s, cc.gpu_verify(g + 1, 512).duration_s
            meas = ratio_ci(sd.cloud_gpu_share_s / sd.tokens, sp.cloud_gpu_share_s.to_numpy() / sp.tokens.to_numpy())
            out.append(f"| {target} | {n} | {_c(meas)} | {1 + gamma * t_d / t_v:.2f} |")
    return out + [""]


def render_smoke() -> str:
    """A fresh cheap study (2 windows x 128 tokens, constant link, 1 phone): checked by docs.py --check."""
    import pandas as pd
    js = [j for j in jobs(2, 128, None, phones=(1,), slos=(), targets=("LLaMA2-13B",)) if j["link"] in ("-", CONSTANT)]
    df = pd.DataFrame([run_one(j) for j in js])
    summ = summarize(df)
    lines = ["| variant | TPOT ms | mJ/tok | shared_busy | dedicated_wall | per_token_api |", "|---|---|---|---|---|---|"]
    for r in summ.to_dict("records"):
        lines.append(f"| {r['variant']} | {r['tpot_ms'][0]:.3f} | {r['mj_per_token'][0]:.2f} | "
                     f"{r['musd_1k_shared_busy'][0]:.4f} | {r['musd_1k_dedicated_wall'][0]:.4f} | "
                     f"{r['musd_1k_per_token_api'][0]:.4f} |")
    return "\n".join(lines)


def study_block() -> str:
    import pandas as pd
    from ahasd_sim.config.errors import InputError
    f = STUDY / "windows.csv"
    if not f.is_file():
        raise InputError(f"docs: {f} is missing; run python scripts/hyco_study.py")
    return render_study(pd.read_csv(f))


def figure(df, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    summ = summarize(df)
    targets = [t for t in dict.fromkeys(summ.target) if t in TARGETS]
    fig, axes = plt.subplots(1, max(1, len(targets)), figsize=(6 * max(1, len(targets)), 4.6), squeeze=False)
    marks = {1: "o", 8: "s", 64: "^"}
    local = summ[summ.link == "-"]
    for ax, target in zip(axes[0], targets):
        main = summ[(summ.link == CONSTANT) & (summ.target == target) & ~summ.variant.str.startswith("hybrid_slo_")]
        for i, v in enumerate(dict.fromkeys(main.variant)):
            for r in main[main.variant == v].to_dict("records"):
                t, c = r["tpot_ms"], r["musd_1k_per_token_api"]
                ax.errorbar(c[0], t[0], xerr=[[c[0] - c[1]], [c[2] - c[0]]], yerr=[[t[0] - t[1]], [t[2] - t[0]]],
                            marker=marks.get(r["phones"], "o"), color=f"C{i}", capsize=2,
                            label=v if r["phones"] == 1 else None)
        for r in local.to_dict("records"):
            ax.axhline(r["tpot_ms"][0], color="grey", ls=":", lw=1, label=f"{r['variant']} (free)")
        ax.set_xlabel("cloud milli-USD / 1k tokens (per_token_api: what a user pays)")
        ax.set_ylabel("TPOT (ms)")
        ax.set_title(f"{target} (acceptance: what-if), LTE 6/13 Mbit/s, RTT 50 ms; o / s / ^ = 1 / 8 / 64 phones",
                     fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Mobile-cloud speculative decoding, Qwen2.5-Coder-0.5B drafter on a 12 GiB phone; 95% CIs over windows",
                 fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    fig.savefig(tmp, dpi=120)
    os.replace(tmp, path)
    plt.close(fig)


def parser():
    from ahasd_sim.cli_common import script_parser
    p = script_parser(__doc__.split("\n")[0])
    p.add_argument("--traces", default=None,
                   help="folder with mahimahi cellular traces (where to get them: docs/references.md, [mahimahi]; "
                        "default: $AHASD_SIM_NETWORK_TRACES; without them only the constant LTE link runs)")
    p.add_argument("--windows", type=int, default=6, help="trace windows per cell (samples, >= 2)")
    p.add_argument("--tokens", type=int, default=256, help="tokens per window (>= 16)")
    p.add_argument("--workers", type=int, default=2, help="parallel worker processes (>= 1)")
    p.add_argument("--out", default=str(STUDY), help="folder of windows.csv (the doc is regenerated only for the "
                   "default, docs/studies/hyco)")
    p.add_argument("--figure", default=str(FIGURE), help="figure path")
    return p


def body(a) -> int:
    import pandas as pd
    from ahasd_sim.config.errors import InputError
    from ahasd_sim.outdir import check_output_file, check_writable_dir
    from ahasd_sim.simulation import fork_map
    if a.workers < 1:
        raise InputError(f"--workers {a.workers}: expected >= 1")
    if a.windows < 2 or a.tokens < 16:
        raise InputError(f"--windows {a.windows} / --tokens {a.tokens}: expected >= 2 windows and >= 16 tokens")
    out = Path(a.out)
    check_writable_dir(out)                       # every output location before any work
    check_output_file(a.figure, flag="--figure")
    if Path(a.figure).suffix.lower() not in FIGURE_SUFFIXES:
        raise InputError(f"--figure {a.figure}: expected a file name ending in {', '.join(FIGURE_SUFFIXES)} "
                         "(the suffix picks the image format)")
    if a.traces:
        tdir = Path(a.traces)
        if not tdir.is_dir():
            raise InputError(f"--traces: '{tdir}' is not a folder")
    else:
        env = os.environ.get("AHASD_SIM_NETWORK_TRACES")
        tdir = Path(env) if env and Path(env).is_dir() else None
    js = jobs(a.windows, a.tokens, tdir)
    df = pd.DataFrame(fork_map(run_one, js, a.workers))
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "windows.csv", df.to_csv(index=False))
    figure(df, Path(a.figure))
    msg = f"{len(js)} runs; wrote {out / 'windows.csv'}, {a.figure}"
    if out.resolve() == STUDY.resolve():
        import importlib.util
        spec = importlib.util.spec_from_file_location("docs_script", ROOT / "scripts" / "docs.py")
        docs = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(docs)
        new, changed = docs.render(DOC.read_text(), {"hyco-study", "hyco-smoke"}, {})
        atomic_write_text(DOC, new)
        from ahasd_sim import fingerprint
        docs.stamp_file(DOC, fingerprint.compute()[0], docs.STAMPED[DOC.relative_to(ROOT).as_posix()])
        msg += f"; regenerated {', '.join(changed) or 'nothing'} in {DOC.relative_to(ROOT)} and stamped it"
    print(msg)
    return 0


def main(argv=None) -> int:
    from ahasd_sim.cli_common import run_script
    return run_script(parser(), body, argv)


if __name__ == "__main__":
    sys.exit(main())
