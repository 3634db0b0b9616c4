#!/usr/bin/env python3
"""Burst vs sustained decoding on the phone presets, and the thermal model's check against a
published throttling measurement: writes docs/studies/sustained_phone.md (stamped with the result
fingerprint), sustained_phone.csv (one row per preset, decoder and repetition) and
sustained_phone.png (the 16 GB phone: tok/s, power and temperatures against time).

Each decoder runs ``--minutes`` from the ambient on hw_configs/phone_{12,16,24}gb.yaml (section
thermal: RC network, skin governor and junction limit, refresh derating above 85 C;
ahasd_sim/sustained.py), decoding ``--windows`` windows of ``--tokens`` tokens one after the other
(wrapping around), the thermal state carried across them, one repetition starting at each window;
intervals are 95% Student-t over repetitions.

Usage:
  python scripts/sustained_study.py                 # 10 minutes, 10 windows of 512 tokens
  python scripts/sustained_study.py --minutes 2 --windows 3 --tokens 64 --out /tmp/s   # quick look
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PRESETS = (("12 GB", "phone_12gb.yaml", []), ("16 GB", "phone_16gb.yaml", []), ("24 GB", "phone_24gb.yaml", []),
           ("16 GB phone, NPU energy scaled with V^2", "phone_16gb.yaml", ["thermal.voltage_scaling=true"]))
MODES = (("autoregressive@pim", ["run.mode=autoregressive", "baseline.device=pim"]),
         ("operator_sync", ["run.mode=operator_sync"]), ("ahasd", ["run.mode=ahasd"]))
DOC = ROOT / "docs" / "studies" / "sustained_phone.md"
MADE_BY = "python scripts/sustained_study.py"


def _fmt(m, h, f="{:.1f}"):
    if m != m:
        return "never"
    return f.format(m) + ("" if h != h else " ± " + f.format(h))


def run(minutes: float, windows: int, tokens: int):
    import pandas as pd
    from ahasd_sim.config import load_config
    from ahasd_sim.config.errors import ConfigError
    from ahasd_sim.sustained import run_sustained
    rows, summaries, series16 = [], [], []
    for size, name, extra in PRESETS:
        for label, ovr in MODES:
            cfg = load_config(ROOT / "hw_configs" / name, [f"run.windows={windows}", f"run.generated_tokens={tokens}",
                                                          "run.timeline=false", *ovr, *extra])
            try:
                res = run_sustained(cfg, minutes * 60.0)
            except ConfigError as exc:
                why = exc.message.split("can run this mode: ")[-1]
                summaries.append({"preset": size, "mode": label, "not_run": f"{exc.key_path}: {why}"})
                continue
            summaries.append({"preset": size, "mode": label, **res.summary()})
            rows.append(res.repetitions.assign(preset=size, mode=label))
            if size == "16 GB":
                series16.append(res.series.assign(mode=label))
            print(f"{size} {label}: done", file=sys.stderr)
    return pd.DataFrame(summaries), pd.concat(rows, ignore_index=True), pd.concat(series16, ignore_index=True)


CAPS_W = (1.0, 1.5, 2.0, 3.0)


def caps(windows: int, tokens: int):
    """Burst tok/s of each decoder on the 16 GB phone under package power caps, both kinds."""
    import pandas as pd
    from ahasd_sim.config import load_config
    from ahasd_sim.simulation import run_simulation
    rows = []
    for label, ovr in MODES:
        for kind in ("instantaneous", "mean"):
            for cap in (None, *CAPS_W):
                extra = [] if cap is None else [f"pim.dram_power_limit_w={cap}", f"pim.power_limit_kind={kind}"]
                if cap is None and kind == "mean":
                    continue
                cfg = load_config(ROOT / "hw_configs" / "phone_16gb.yaml",
                                  [f"run.windows={windows}", f"run.generated_tokens={tokens}", "run.timeline=false",
                                   *ovr, *extra])
                sm = run_simulation(cfg).summary
                ci = sm.get("throughput_tok_s_ci95") or [float("nan")] * 2
                rows.append({"mode": label, "kind": "none" if cap is None else kind, "cap_w": cap,
                             "tok_s": sm["throughput_tok_s"], "low": ci[0], "high": ci[1],
                             "package_mean_w": sm["dram_power"]["mean_w"]})
    return pd.DataFrame(rows)


def caps_markdown(t) -> list[str]:
    out = ["## Package power caps (16 GB phone, no thermal model)", "",
           "Decode tok/s [95% CI over windows] under `pim.dram_power_limit_w` on the memory package "
           "(its static power here is 0.53 W: DRAM background 0.37 W + PIM/AAU/GTS leakage); "
           "instantaneous = every operator within its budget, host I/O reserved only where the host "
           "streams while PIM computes; mean = the run slowed until its package energy over its "
           "makespan meets the cap (docs/modeling.md 'DRAM power budget').", "",
           "| decoder | cap kind | none | " + " | ".join(f"{c:g} W" for c in CAPS_W) + " |",
           "| --- | --- | --- | " + " | ".join("---" for _ in CAPS_W) + " |"]
    for mode in dict.fromkeys(t["mode"]):
        m = t[t["mode"] == mode]
        free = m[m["kind"] == "none"].iloc[0]
        for kind in ("instantaneous", "mean"):
            k = m[m["kind"] == kind].set_index("cap_w")
            cells = [f"{k.loc[c, 'tok_s']:.1f} [{k.loc[c, 'low']:.1f}, {k.loc[c, 'high']:.1f}]" for c in CAPS_W]
            out.append(f"| {mode} | {kind} | {free['tok_s']:.1f} | " + " | ".join(cells) + " |")
    return out + [""]


def _sharing(summ) -> str:
    """A sentence on how many windows a repetition decodes and whether repetitions share them."""
    ran = summ[summ["windows_per_repetition"].notna()] if "windows_per_repetition" in summ else summ.iloc[:0]
    if not len(ran):
        return ""
    lo, hi = ran["windows_per_repetition"].min(), ran["windows_per_repetition"].max()
    text = f"A repetition decodes {lo:.1f}-{hi:.1f} windows (the last one partly). "
    if ran["repetitions_share_windows"].astype(bool).any():
        text += ("The repetitions together decode more windows than the run has, so they share windows: the "
                 "intervals say where in the trace a run starts matters this much, not how much fresh trace "
                 "content would move the result. ")
    return text


def markdown(summ, check, minutes, windows, tokens, wall_s, cap_table=None) -> str:
    out = [f"# Burst vs sustained decoding on a phone ({minutes:g} minutes)", "",
           f"Made by `{MADE_BY}` ({wall_s / 60:.1f} min on 2 cores); per-repetition rows in "
           "[sustained_phone.csv](sustained_phone.csv). Each decoder decodes for "
           f"{minutes:g} minutes from a 25 C ambient on the phone presets (LPDDR5X-8533, 16 PIM dies, "
           "INT4 weights, 4 GiB OS reserve; hw_configs/phone_*gb.yaml), its DVFS state chosen every second "
           "by the skin governor (39 / 43 / 45 C; NPU clock and PIM rate 1 / 0.8 / 0.6 / 0.4) from the RC "
           "network's skin temperature and by the junction limit (95 C package, cleared at 65 C), and JEDEC's "
           "doubled refresh above 85 C package temperature (docs/modeling.md 'Thermals over minutes'). A "
           f"repetition decodes the run's {windows} trace windows of {tokens} tokens (default trace) one after "
           "the other, wrapping around after the last, the temperatures carried from window to window; one "
           "repetition starts at each window: ± is the 95% Student-t half-width over repetitions. "
           + _sharing(summ) + "Sustained = the mean rate over the last quarter of the run; "
           "J/token = the decoder's energy (NPU, memory package, PIM, rest of the SoC; not the display) "
           "per token over the whole run.", ""]
    for size in dict.fromkeys(summ["preset"]):
        out += [f"## {size}" if "phone" in size else f"## {size} phone", ""]
        if "V^2" in size:
            out += ["With `thermal.voltage_scaling` (off in the presets): the NPU's energy per MAC, vector op "
                    "and scratchpad bit at each DVFS state is (V / V_top)^2 of full speed, V from Arm's "
                    "Total Compute TC2 Cortex-X4 voltage-frequency table (a phone CPU's, assumed for the NPU; "
                    "docs/references.md 'Phone memory and power envelope'). Compare with the 16 GB phone's table "
                    "above: the difference is what the NPU core's switching energy is worth to each decoder.", ""]
        out += [
                
                "| decoder | burst tok/s | sustained tok/s | sustained / burst | first throttle (s) | "
                "max skin (C) | max package (C) | J/token |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in summ[summ["preset"] == size].to_dict("records"):
            if isinstance(r.get("not_run"), str):
                out.append(f"| {r['mode']} | does not fit: {r['not_run']} | | | | | | |")
                continue
            out.append(f"| {r['mode']} | {_fmt(r['burst_tok_s'], r['burst_tok_s_ci95_half'])} | "
                       f"{_fmt(r['sustained_tok_s'], r['sustained_tok_s_ci95_half'])} | "
                       f"{r['sustained_tok_s'] / r['burst_tok_s']:.2f} | "
                       f"{_fmt(r['time_to_first_throttle_s'], r['time_to_first_throttle_s_ci95_half'], '{:.0f}')} | "
                       f"{_fmt(r['max_skin_c'], r['max_skin_c_ci95_half'])} | "
                       f"{_fmt(r['max_package_c'], r['max_package_c_ci95_half'])} | "
                       f"{_fmt(r['energy_per_token_j'], r['energy_per_token_j_ci95_half'], '{:.3f}')} |")
        out.append("")
    out += ["![tok/s, power and temperatures against time, 16 GB phone](sustained_phone.png)", ""]
    if cap_table is not None:
        out += caps_markdown(cap_table)
    out += [
            "## The thermal model against a published measurement", "",
            "arXiv 2603.23640 (code: github.com/conscious-engines/TinyBench) decodes Qwen2.5-1.5B (4-bit) "
            "on two phones' GPUs in back-to-back iterations. **Fit on the iPhone 16 Pro** (about 40 tok/s "
            "at first, the drop under way within two 1000-token iterations, 22.6 tok/s steady): a decoder "
            "whose rate and power scale with the DVFS clock fraction, two unknowns (its burst power P and "
            "one scale kappa on the section's whole-phone heat capacities 3 / 70 / 90 J/K) for the two "
            f"observables: P = {check['power_w']:.2f} W, kappa = {check['kappa']:.3f} (heat capacities "
            f"{check['c_package_j_per_k']:.2f} / {check['c_board_j_per_k']:.2f} / {check['c_skin_j_per_k']:.2f} J/K: "
            "the hotspot the skin sensor sees, not the whole phone; the presets use these). It reproduces "
            f"the first throttle at {check['iphone_first_throttle_s']:.0f} s (measured ≤ "
            f"{check['iphone_target_first_throttle_s']:.0f} s) and a steady {check['iphone_retained']:.3f} of "
            f"the burst (measured {check['iphone_target_retained']:.3f}).", "",
            "**Compared on the Galaxy S24 Ultra** (MLC-LLM, one warm-up + 700-token iterations at ~10 tok/s): "
            "its governor floored the GPU (231 of ~650 MHz, the model's deepest state 0.4) after the warm-up "
            f"and 5 iterations, ≈ {check['s24_measured_floor_s']:.0f} s. The model, with the iPhone's kappa "
            "and the same burst power (neither phone's power is published with the runs), reaches its "
            f"deepest state at {check['s24_predicted_floor_s']:.0f} s: "
            f"{check['s24_measured_floor_s'] / check['s24_predicted_floor_s']:.1f}x too early. Reasons it can be: "
            "the S24's MLC decoder draws less than the iPhone's MLX one (its rate is a quarter), the Android "
            "governor acts on GPU temperature (~78 C) rather than the skin, and a three-node chain has one "
            "hotspot time constant for two phones of different construction. The measured S24 rate is from "
            "an operator write-up of the same runs (grade C). The check is coarse: it fixes the order of "
            "magnitude of the time to throttle (minutes, not the tens of minutes the whole-phone heat "
            "capacity gives), not its value to better than a factor of ~3.", ""]
    return "\n".join(out)


def main() -> int:
    from ahasd_sim.cli_common import script_parser
    p = script_parser(__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--windows", type=int, default=10)
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--out", default=None, help="folder for the doc, CSV and figure (default docs/studies, stamped)")
    a = p.parse_args()
    from ahasd_sim.hw.thermal import ThermalConfig
    from ahasd_sim.output import atomic_write_text
    from ahasd_sim.plots.sustained import plot_sustained
    from ahasd_sim.validate_thermal import fit
    t0 = time.perf_counter()
    summ, reps, series = run(a.minutes, a.windows, a.tokens)
    cap_table = caps(a.windows, a.tokens)
    check = fit(ThermalConfig())
    wall = time.perf_counter() - t0
    out = Path(a.out) if a.out else DOC.parent
    out.mkdir(parents=True, exist_ok=True)
    doc = out / DOC.name
    reps.to_csv(out / "sustained_phone.csv", index=False)
    plot_sustained(series, out / "sustained_phone.png", "16 GB phone, AHASD job, INT4; mean of repetitions "
                   "(band: slowest to fastest)", thresholds=ThermalConfig().skin_thresholds_c)
    atomic_write_text(doc, markdown(summ, check, a.minutes, a.windows, a.tokens, wall, cap_table) + "\n")
    if a.out is None:
        import importlib.util
        spec = importlib.util.spec_from_file_location("docs_script", ROOT / "scripts" / "docs.py")
        docs = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(docs)
        from ahasd_sim import fingerprint
        docs.stamp_file(doc, fingerprint.compute()[0], docs.STAMPED[DOC.relative_to(ROOT).as_posix()])
    print(f"wrote {doc} ({wall:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
