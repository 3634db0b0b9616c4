"""Run the peer simulators whose outputs ``python -m ahasd_sim validate --peers`` compares against.

This is a study script, not a test: the tests read the committed outputs under
``validation/peers/``. It needs the peers installed in a SEPARATE virtual environment
(they pin old numpy / need a C++ build), never in the simulator's own:

* ``scalesim``: SCALE-Sim from PyPI (``pip install scalesim 'numpy<2' 'pandas<2.3'``;
  scalesim 3.0.0's memory model calls ``int()`` on a 1-element array, which numpy 2 refuses).
  Runs decode/verify GEMMs (M = tokens in the step, K x N = the weight) on one R x C
  array per dataflow with stall-free (CALC) bandwidth, and records SCALE-Sim's
  ``Total Cycles`` (compute cycles, no prefetch) from its COMPUTE_REPORT.csv.
* ``ramulator2``: Ramulator 2.1 built from source with its Python bindings
  (``PYTHONPATH`` must reach its ``python/`` folder). Runs LPDDR5-6400 x16, 1 and 4
  channels, two address mappings, sequential and random reads (bandwidth) and a
  pointer-chase-like low-load probe (latency).
* ``aim``: the SK hynix AiM simulator on Ramulator 2 (github arkhadem/aim_simulator, the
  CENT paper, ASPLOS 2025) built from source (``--aim-bin`` its ``ramulator2`` binary,
  ``--aim-src`` its checkout, for the preset YAMLs and the commit id). Writes the ISR trace
  a PIM driver issues for an LLM GEMV (:func:`aim_gemv_trace`; the mapping is in
  validation/peers/README.md) and records the simulator's ``memory_system_cycles``;
  ``gemv.csv`` (shapes x channels x vectors x preset) and ``contention.csv`` (a GEMV with
  conventional host reads interleaved in the same trace, same controllers).

Usage::

    python scripts/run_peers.py scalesim   --out validation/peers/scalesim
    PYTHONPATH=$RAMULATOR2/python python scripts/run_peers.py ramulator2 --out validation/peers/ramulator2 \
        --ramulator-commit $(git -C $RAMULATOR2 rev-parse HEAD)
    nice -n 10 python scripts/run_peers.py aim --out validation/peers/aim \
        --aim-src /work/build/aim --aim-bin /work/build/aim/build/ramulator2
"""
from __future__ import annotations

import argparse
import csv
import datetime as _dt
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# --------------------------------------------------------------------------- SCALE-Sim
# Decode/verify GEMMs of Qwen2.5-Coder-0.5B (d_model 896, 14 heads x 64, 2 KV heads,
# FFN 4864; Hugging Face config.json): (name, K, N). M = tokens per step.
SCALESIM_GEMMS = (("qkv", 896, 1152), ("o_proj", 896, 896), ("gate_up", 896, 9728), ("down", 4864, 896))
SCALESIM_TOKENS = (1, 4, 16)
SCALESIM_ARRAYS = (32, 64, 128)
SCALESIM_DATAFLOWS = ("ws", "os", "is")
# SCALE-Sim builds a dense demand matrix per fold; the FFN GEMMs take minutes each under
# weight-stationary (hundreds of folds), so they run on the 128x128 array under os and is only.
SCALESIM_BIG = ("gate_up", "down")


def _scalesim_layers(arr: int, df: str) -> list[tuple[str, int, int, int]]:
    big_ok = arr == max(SCALESIM_ARRAYS) and df != "ws"
    return [(f"{g}_m{m}", m, n, k) for g, k, n in SCALESIM_GEMMS for m in SCALESIM_TOKENS
            if big_ok or g not in SCALESIM_BIG]

_SCALESIM_CFG = """[general]
run_name = {run}

[architecture_presets]
ArrayHeight: {rows}
ArrayWidth: {cols}
IfmapSramSzkB: 65536
FilterSramSzkB: 65536
OfmapSramSzkB: 65536
IfmapOffset: 0
FilterOffset: 100000000
OfmapOffset: 200000000
Bandwidth: 10
Dataflow: {df}
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: 10
IfmapSRAMBankNum: 10
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: 10
FilterSRAMBankNum: 10
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport: false
SparseRep: ellpack_block
OptimizedMapping: false
BlockSize: 8
RandomNumberGeneratorSeed: 40

[run_presets]
InterfaceBandwidth: CALC
UseRamulatorTrace: False
"""


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_scalesim(out: Path) -> None:
    from importlib.metadata import version

    import contextlib
    import io

    from scalesim.scale_sim import scalesim
    ver = version("scalesim")
    out.mkdir(parents=True, exist_ok=True)
    path = out / "gemm_cycles.csv"
    rows_out = []
    if path.exists():  # resume: keep the (dataflow, array) runs already written
        with open(path) as f:
            rows_out = [r for r in csv.DictReader(f) if r["tool_version"] == ver]
    done = {(r["dataflow"], int(r["array_rows"])) for r in rows_out}
    cfg_dir = out / "configs"
    cfg_dir.mkdir(exist_ok=True)
    for arr in SCALESIM_ARRAYS:
        for df in SCALESIM_DATAFLOWS:
            if (df, arr) in done:
                continue
            run = f"{df}_{arr}x{arr}"
            cfg_text = _SCALESIM_CFG.format(run=run, rows=arr, cols=arr, df=df)
            (cfg_dir / f"{run}.cfg").write_text(cfg_text)
            layers = _scalesim_layers(arr, df)
            with tempfile.TemporaryDirectory() as tmp:
                tmp = Path(tmp)
                (tmp / "s.cfg").write_text(cfg_text)
                topo = "Layer,M,N,K,\n" + "".join(f"{name},{m},{n},{k},\n" for name, m, n, k in layers)
                (tmp / "gemm.csv").write_text(topo)
                (cfg_dir / f"{run}_topology.csv").write_text(topo)
                (tmp / "layout.csv").write_text("Layer,\n")  # no custom layout; SCALE-Sim still opens one
                t0 = time.time()
                with contextlib.redirect_stdout(io.StringIO()):
                    sim = scalesim(save_disk_space=True, verbose=False, config=str(tmp / "s.cfg"),
                                   topology=str(tmp / "gemm.csv"), layout=str(tmp / "layout.csv"),
                                   input_type_gemm=True)
                    sim.run_scale(top_path=str(tmp / "out"))
                wall = time.time() - t0
                with open(tmp / "out" / run / "COMPUTE_REPORT.csv") as f:
                    rep = [[c.strip() for c in r] for r in csv.reader(f)]
            head = rep[0]
            i_tot, i_stall = head.index("Total Cycles"), head.index("Stall Cycles")
            i_map = head.index("Mapping Efficiency %")
            for (name, m, n, k), r in zip(layers, rep[1:]):
                rows_out.append({"tool": "scalesim", "tool_version": ver, "dataflow": df, "array_rows": arr,
                                 "array_cols": arr, "layer": name, "m_tokens": m, "k_dim": k, "n_dim": n,
                                 "total_cycles": int(r[i_tot]), "stall_cycles": int(r[i_stall]),
                                 "mapping_efficiency_pct": float(r[i_map]), "date_utc": _now()})
            print(f"scalesim {run}: {len(layers)} GEMMs in {wall:.1f} s", flush=True)
            _write_csv(path, rows_out)  # after every run, so an interrupted study resumes
    print(f"wrote {path} ({len(rows_out)} rows)")


# --------------------------------------------------------------------------- Ramulator 2
RAM_MAPPINGS = ("RoBaRaCoCh", "MOP4CLXOR", "ChRaBaRoCo")
RAM_CHANNELS = (1, 4)
RAM_REQUESTS_PER_CHANNEL = 200_000
RAM_RANDOM_SPAN_BYTES = 4 * 2**30   # random reads over 4 GiB (the 4-channel x 16 Gb capacity is 8 GiB)
RAM_LATENCY_PROBES = 4000
RAM_ORG, RAM_TIMING = "LPDDR5_16Gb_x16", "LPDDR5_6400"
# controller as configured in _ram_controller (defaults of Ramulator 2's LPDDR5 controller otherwise:
# read/write buffers 32, write watermarks 0.2/0.8, wck_sync_mode need_sync)
RAM_CONTROLLER = {"controller": "LPDDR5", "scheduler": "FRFCFS", "refresh": "AllBank", "row_policy": "Open",
                  "channel_mapper": "CacheLineInterleave"}
RAM_TX_BYTES = 32  # one request = one BL16 burst on x16 (Ramulator's get_tx_bytes() for LPDDR5 x16)


def _ram_controller(ramulator, dram, mapper: str, refresh: str = "AllBank"):
    return ramulator.controller.LPDDR5(
        dram=dram, scheduler=ramulator.scheduler.FRFCFS(), refresh_manager=getattr(ramulator.refresh_manager, refresh)(),
        row_policy=ramulator.row_policy.Open(), addr_mapper=getattr(ramulator.addr_mapper, mapper)())


def _ram_channels(stats) -> list[dict]:
    c = stats["memory_system"]["controller"]
    return c if isinstance(c, list) else [c]


def _ram_run_trace(ramulator, trace: Path, channels: int, mapper: str, refresh: str = "AllBank") -> dict:
    dram = ramulator.dram.LPDDR5(org_preset=RAM_ORG, timing_preset=RAM_TIMING)
    tck_ns = dram.resolve()[1]["tCK_ps"] / 1000.0
    fe = ramulator.frontend.LoadStoreTrace(clock_ratio=8, path=str(trace))
    mem = ramulator.memory_system.GenericDRAM(
        clock_ratio=1, controllers=[_ram_controller(ramulator, dram, mapper, refresh) for _ in range(channels)],
        channel_mapper=ramulator.channel_mapper.CacheLineInterleave())
    sim = ramulator.Simulation(fe, mem)
    sim.run()
    chans = _ram_channels(sim.stats)
    cycles = max(int(c["cycles"]) for c in chans)
    reads = sum(int(c["num_read_reqs"]) for c in chans)
    writes = sum(int(c["num_write_reqs"]) for c in chans)
    return {"bandwidth_gb_s": (reads + writes) * RAM_TX_BYTES / (cycles * tck_ns), "writes": writes, "cycles": cycles, "reads": reads,
            "tck_ns": tck_ns, "row_hits": sum(int(c["row_hits"]) for c in chans),
            "row_misses": sum(int(c["row_misses"]) for c in chans),
            "row_conflicts": sum(int(c["row_conflicts"]) for c in chans),
            "avg_read_latency_cycles": sum(float(c["avg_read_latency"]) for c in chans) / len(chans)}


def _ram_latency(ramulator, mode: str) -> dict:
    """Unloaded latency: one pointer-chasing probe in flight, no streaming traffic."""
    sys.path.insert(0, str(Path(ramulator.__file__).resolve().parents[2]))
    from tests.utils import extract_dram_layout
    dram = ramulator.dram.LPDDR5(org_preset=RAM_ORG, timing_preset=RAM_TIMING)
    tck_ns = dram.resolve()[1]["tCK_ps"] / 1000.0
    layout = extract_dram_layout(dram)
    fe = ramulator.frontend.LatencyThroughputTrace(
        clock_ratio=1, nop_counter=100000, num_probe_requests=RAM_LATENCY_PROBES, latency_measure_mode=mode,
        latency_sample_count=RAM_LATENCY_PROBES, num_streaming_requests=0, streaming_only=False,
        warmup_cycles=1000, seed=12345, read_ratio=100, **layout)
    ctrl = ramulator.controller.LPDDR5(
        dram=dram, scheduler=ramulator.scheduler.FRFCFS(), refresh_manager=ramulator.refresh_manager.AllBank(),
        row_policy=ramulator.row_policy.Open(), addr_mapper=ramulator.addr_mapper.PassThroughAddrMapper())
    mem = ramulator.memory_system.GenericDRAM(clock_ratio=1, controllers=[ctrl],
                                              channel_mapper=ramulator.channel_mapper.PassThroughChannelMapper())
    sim = ramulator.Simulation(fe, mem)
    sim.run()
    st = sim.stats
    c = _ram_channels(st)[0]
    return {"tck_ns": tck_ns, "avg_probe_latency_cycles": float(st["frontend"]["avg_probe_latency"]),
            "avg_read_latency_cycles": float(c["avg_read_latency"]), "row_hits": int(c["row_hits"]),
            "row_misses": int(c["row_misses"]), "row_conflicts": int(c["row_conflicts"]),
            "reads": int(c["num_read_reqs"])}


def run_ramulator2(out: Path, commit: str) -> None:
    import random

    import ramulator
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for ch in RAM_CHANNELS:
            n = RAM_REQUESTS_PER_CHANNEL * ch
            seq, rnd = tmp / f"seq{ch}.trace", tmp / f"rnd{ch}.trace"
            seq.write_text("".join(f"LD {i * 32}\n" for i in range(n)))
            rng = random.Random(12345)
            rnd.write_text("".join(f"LD {rng.randrange(RAM_RANDOM_SPAN_BYTES // 32) * 32}\n" for _ in range(n)))
            for mapper in RAM_MAPPINGS:
                for pattern, trace in (("sequential_read", seq), ("random", rnd)):
                    t0 = time.time()
                    r = _ram_run_trace(ramulator, trace, ch, mapper)
                    rows.append({"tool": "ramulator2", "commit": commit, "org": RAM_ORG, "timing": RAM_TIMING,
                                 **RAM_CONTROLLER, "pattern": pattern, "channels": ch, "mapping": mapper, "latency_ns": "",
                                 **r, "date_utc": _now()})
                    print(f"ramulator2 {pattern} {ch}ch {mapper}: {r['bandwidth_gb_s']:.3f} GB/s "
                          f"({time.time() - t0:.1f} s)", flush=True)
        # mixed traffic (2 reads : 1 write, sequential addresses) and per-bank refresh, 1 channel
        mixed = tmp / "mixed1.trace"
        mixed.write_text("".join(f"{'ST' if i % 3 == 2 else 'LD'} {i * 32}\n" for i in range(RAM_REQUESTS_PER_CHANNEL)))
        for pattern, trace, refresh, mapper in (("mixed", mixed, "AllBank", "MOP4CLXOR"),
                                                ("mixed", mixed, "AllBank", "RoBaRaCoCh"),
                                                ("sequential_read", tmp / "seq1.trace", "PerBank", "MOP4CLXOR"),
                                                ("sequential_read", tmp / "seq1.trace", "PerBank", "RoBaRaCoCh")):
            r = _ram_run_trace(ramulator, trace, 1, mapper, refresh)
            rows.append({"tool": "ramulator2", "commit": commit, "org": RAM_ORG, "timing": RAM_TIMING,
                         **RAM_CONTROLLER, "refresh": refresh, "pattern": pattern, "channels": 1,
                         "mapping": mapper, "latency_ns": "", **r, "date_utc": _now()})
            print(f"ramulator2 {pattern} 1ch {mapper} {refresh}: {r['bandwidth_gb_s']:.3f} GB/s", flush=True)
    lat = _ram_latency(ramulator, "random-probe")
    rows.append({"tool": "ramulator2", "commit": commit, "org": RAM_ORG, "timing": RAM_TIMING,
                 **RAM_CONTROLLER, "pattern": "latency_random_probe", "channels": 1, "mapping": "PassThrough",
                 "latency_ns": lat["avg_probe_latency_cycles"] * lat["tck_ns"], "bandwidth_gb_s": "",
                 "cycles": "", **{k: v for k, v in lat.items() if k != "avg_probe_latency_cycles"},
                 "date_utc": _now()})
    print(f"ramulator2 latency: {lat}", flush=True)
    keys = list(dict.fromkeys(k for r in rows for k in r))
    path = out / "lpddr5.csv"
    _write_csv(path, [{k: r.get(k, "") for k in keys} for r in rows])
    print(f"wrote {path} ({len(rows)} rows)")


# --------------------------------------------------------------------------- AiM (CENT)
# ISR trace of one GEMV y[rows] = W[rows x cols] . x[cols], 16-bit elements, as the CENT
# driver lays it out (its trace generator's "no-reuse" GEMV order): each output element's
# weight row is split into DRAM-row chunks of AIM_ROW_ELEMS elements (a 2 KB row of one bank,
# 64 column accesses of 32 B = 16 elements); output element o goes to bank (o mod banks) of
# channel ((o div banks) mod channels), as the (o div (banks x channels))-th output of that
# bank ("group" g); chunk c of group g sits in DRAM row g x chunks + c of every bank.
# Per chunk c: WR_GB broadcasts x's chunk into every channel's 2 KB global buffer (one
# vector's chunk: the buffer holds one), then per group g: WR_BIAS (the running partial sum
# of the 16 outputs back into the banks' MAC registers), MAC_ABK (all 16 banks of every used
# channel multiply their row chunk with the buffer), RD_MAC (blocking: partial sums to the
# host's GPRs). Each further input vector repeats the whole sequence (weights re-read).
AIM_ROW_ELEMS = 1024          # 2 KB DRAM row / 2 B per element (GDDR6_AiM_org and LPDDR5_AiM_org: 1K columns x 16 bit)
AIM_COL_ELEMS = 16            # one 32 B (256 bit) column access = 16 x 16-bit elements
AIM_BANKS = 16
AIM_MAX_CHANNELS = 32         # the simulator always models 32 channels (README)
AIM_HOST_ROW0 = 8192          # host reads use rows 8192..12287: above the weights, inside GDDR6-AiM's 16K rows
AIM_SHAPES = ((4096, 4096), (4096, 11008), (11008, 4096), (5120, 13824))
AIM_CHANNELS = (1, 2, 4, 8, 16, 32)
AIM_VECTORS = (1, 2, 4, 8)
# data-bus peak of one channel in the simulator's presets: 32 B per nBL cycles (LPDDR5_AiM_timing
# nBL 4 x 1.25 ns -> 6.4 GB/s, half a real LPDDR5-6400 x16; GDDR6_AiM_timing nBL 2 x 0.5 ns -> 32 GB/s)
AIM_NBL = {"gddr6_aim": 2, "lpddr5_aim": 4}
AIM_PRESETS = {  # preset -> (example config in the simulator's test/, DRAM impl, tCK_ps of its timing preset)
    "gddr6_aim": ("test/example.yaml", "GDDR6", 500),
    "lpddr5_aim": ("test/example_LPDDR5.yaml", "LPDDR5", 1250),
}


AIM_ORDERS = ("per_group", "reuse_gb")
AIM_REUSE_SIZE = 32           # CENT's --reuse_size default ("GB reuse size, depending on register number")
AIM_CSV_BY_ORDER = {"per_group": "gemv.csv", "reuse_gb": "gemv_reuse_gb.csv"}


def aim_gemv_trace(rows: int, cols: int, channels: int, vectors: int = 1, host_read_every: int = 0,
                   host_reads: int = 1, order: str = "per_group",
                   reuse_size: int = AIM_REUSE_SIZE) -> tuple[list[str], dict]:
    """ISR lines of ``vectors`` GEMVs W[rows x cols] . x on ``channels`` channels (see above).

    ``order``: ``per_group`` = CENT's ``no-reuse`` GEMV order (WR_BIAS, MAC_ABK, RD_MAC per
    output group: the controller switches mode twice per group); ``reuse_gb`` = CENT's
    ``reuse-GB`` order: the groups of a chunk in batches of ``ceil(groups / ceil(groups /
    reuse_size))``, each batch all its WR_BIAS, then all its MAC_ABK, then all its RD_MAC
    (two mode switches per batch).

    ``host_read_every`` > 0 interleaves ``host_reads`` conventional reads (``R MEM``) to the
    used channels after every that many PIM ISRs (a host stream sharing the controllers).
    Returns the lines and a count of each ISR."""
    if not 1 <= channels <= AIM_MAX_CHANNELS:
        raise ValueError(f"channels must be 1..{AIM_MAX_CHANNELS}")
    mask = f"0x{(1 << channels) - 1:x}"
    chunks = -(-cols // AIM_ROW_ELEMS)
    groups = -(-rows // (AIM_BANKS * channels))
    lines = [f"# GEMV {rows}x{cols} (16-bit), {channels} channel(s), {vectors} vector(s)", "W CFR 0 1"]
    counts = {"WR_GB": 0, "WR_BIAS": 0, "MAC_ABK": 0, "RD_MAC": 0, "host_reads": 0}
    pim = 0
    host_row = [0]

    def host() -> None:
        for _ in range(host_reads):
            k = counts["host_reads"]
            # host reads walk rows of a region the GEMV does not use (rows above its weights)
            lines.append(f"R MEM {k % channels} {(k // channels) % AIM_BANKS} {AIM_HOST_ROW0 + (k // (channels * AIM_BANKS)) % 4096}")
            counts["host_reads"] += 1

    def emit(line: str, kind: str) -> None:
        nonlocal pim
        lines.append(line)
        counts[kind] += 1
        pim += 1
        if host_read_every and pim % host_read_every == 0:
            host()

    if order not in AIM_ORDERS:
        raise ValueError(f"order must be one of {AIM_ORDERS}")
    if order == "per_group":
        batches = [[g] for g in range(groups)]
    else:                                   # CENT Vector_Matrix_Mul_weight_pim_only_trace, reuse-GB
        n_b = -(-groups // reuse_size)
        size = -(-groups // n_b)
        batches = [list(range(b * size, min(groups, (b + 1) * size))) for b in range(n_b)]
    for _v in range(vectors):
        for c in range(chunks):
            n_elem = min(AIM_ROW_ELEMS, cols - c * AIM_ROW_ELEMS)
            opsize = -(-n_elem // AIM_COL_ELEMS)
            emit(f"AiM WR_GB {opsize} 0 {mask}", "WR_GB")
            for batch in batches:
                for _g in batch:
                    emit(f"AiM WR_BIAS 0 {mask}", "WR_BIAS")
                for g in batch:
                    emit(f"AiM MAC_ABK {opsize} {mask} {g * chunks + c}", "MAC_ABK")
                for _g in batch:
                    emit(f"AiM RD_MAC 0 {mask}", "RD_MAC")
    lines.append("AiM EOC")
    return lines, counts


def aim_host_trace(n_reads: int, channels: int) -> list[str]:
    """Conventional reads only (the host stream alone), same addresses as the interleaved ones."""
    lines = ["# host reads only"]
    for k in range(n_reads):
        lines.append(f"R MEM {k % channels} {(k // channels) % AIM_BANKS} {AIM_HOST_ROW0 + (k // (channels * AIM_BANKS)) % 4096}")
    lines.append("AiM EOC")
    return lines


def _aim_run(binary: Path, config: Path, lines: list[str], tmp: Path) -> dict:
    trace = tmp / "gemv.trace"
    trace.write_text("\n".join(lines) + "\n")
    t0 = time.time()
    res = subprocess.run([str(binary), "-f", str(config), "-t", str(trace)], capture_output=True, text=True,
                         timeout=3600)
    if res.returncode != 0:
        raise RuntimeError(f"aim simulator failed ({res.returncode}): {res.stderr[-2000:]}")
    m = re.search(r"memory_system_cycles:\s*(\d+)", res.stdout)
    if not m:
        raise RuntimeError(f"no memory_system_cycles in the simulator's output: {res.stdout[-2000:]}")
    out = {"cycles": int(m.group(1)), "wall_s": round(time.time() - t0, 2)}
    # per-channel command counts of the busiest channel (a channel mask's bit i is the
    # simulator's channel 31 - i, so the used channels are the highest-numbered ones)
    for key in ("num_REFab_commands", "num_TMOD_commands", "num_MAC16_commands", "num_RD_commands"):
        vals = [int(v) for v in re.findall(rf"CH\d+_{key}:\s*(\d+)", res.stdout)]
        out["max_ch_" + key] = max(vals) if vals else ""
    return out


def run_aim(out: Path, src: Path, binary: Path, shapes=AIM_SHAPES, channels=AIM_CHANNELS, vectors=AIM_VECTORS,
            presets=tuple(AIM_PRESETS), contention: bool = True, order: str = "per_group",
            trace_dir: Path | None = None) -> None:
    commit = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for preset in presets:
            cfg, dram, tck_ps = AIM_PRESETS[preset]
            for r, c in shapes:
                for ch in channels:
                    for v in vectors:
                        lines, counts = aim_gemv_trace(r, c, ch, v, order=order)
                        res = _aim_run(binary, src / cfg, lines, tmp)
                        if trace_dir is not None and v == 1 and ch in (1, 32):
                            trace_dir.mkdir(parents=True, exist_ok=True)
                            (trace_dir / f"{preset}_{r}x{c}_ch{ch}_v{v}_{order}.trace").write_text(
                                "\n".join(lines) + "\n")
                        rows.append({"tool": "aim_simulator", "commit": commit, "preset": preset, "dram": dram,
                                     "config": cfg, "order": order,
                                     "reuse_size": AIM_REUSE_SIZE if order == "reuse_gb" else "",
                                     "rows": r, "cols": c, "vectors": v, "channels": ch,
                                     **{k: n for k, n in counts.items() if k != "host_reads"},
                                     "cycles": res["cycles"], "tCK_ns": tck_ps / 1000,
                                     "time_s": res["cycles"] * tck_ps * 1e-12,
                                     **{k: res[k] for k in res if k.startswith("max_ch_")},
                                     "sim_wall_s": res["wall_s"], "date_utc": _now()})
                        print(f"aim {order} {preset} {r}x{c} ch{ch} v{v}: {res['cycles']} cycles "
                              f"({res['wall_s']} s)", flush=True)
                        _write_csv(out / AIM_CSV_BY_ORDER[order], rows)
        if contention:
            run_aim_contention(out, src, binary, commit, tmp)
    print(f"wrote {out / AIM_CSV_BY_ORDER[order]} ({len(rows)} rows)")


# contention: one GEMV (4096x4096, 1 vector, 4 channels) with k conventional reads after every
# PIM ISR, against the GEMV alone and the same reads alone
AIM_CONT_SHAPE = (4096, 4096)
AIM_CONT_CHANNELS = 4
AIM_CONT_READS_PER_ISR = (0, 1, 2, 4, 8, 16, 32)


def run_aim_contention(out: Path, src: Path, binary: Path, commit: str, tmp: Path) -> None:
    rows = []
    r, c = AIM_CONT_SHAPE
    ch = AIM_CONT_CHANNELS
    for preset, (cfg, dram, tck_ps) in AIM_PRESETS.items():
        alone = _aim_run(binary, src / cfg, aim_gemv_trace(r, c, ch)[0], tmp)["cycles"]
        for k in AIM_CONT_READS_PER_ISR:
            lines, counts = aim_gemv_trace(r, c, ch, 1, host_read_every=1 if k else 0, host_reads=k)
            mixed = _aim_run(binary, src / cfg, lines, tmp)["cycles"]
            n = counts["host_reads"]
            host_alone = _aim_run(binary, src / cfg, aim_host_trace(n, ch), tmp)["cycles"] if n else 0
            rows.append({"tool": "aim_simulator", "commit": commit, "preset": preset, "rows": r, "cols": c,
                         "channels": ch, "host_reads_per_pim_isr": k, "pim_isrs": sum(
                             v for key, v in counts.items() if key != "host_reads"),
                         "host_reads": n, "host_bytes": n * 32, "gemv_alone_cycles": alone,
                         "host_alone_cycles": host_alone, "mixed_cycles": mixed, "tCK_ns": tck_ps / 1000,
                         "host_gb_s": n * 32 / (mixed * tck_ps * 1e-12) / 1e9,
                         "host_share_of_peak": (n * 32 / (mixed * tck_ps * 1e-12))
                         / (ch * 32 / (AIM_NBL[preset] * tck_ps * 1e-12)),
                         "gemv_slowdown": mixed / alone,
                         "host_slowdown": (mixed / host_alone) if host_alone else "",
                         "date_utc": _now()})
            print(f"aim contention {preset} k={k}: mixed {mixed} vs gemv {alone} / host {host_alone}", flush=True)
            _write_csv(out / "contention.csv", rows)
    print(f"wrote {out / 'contention.csv'} ({len(rows)} rows)")


def _write_csv(path: Path, rows: list[dict]) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("peer", choices=("scalesim", "ramulator2", "aim"), help="which peer simulator to run")
    ap.add_argument("--out", required=True, type=Path, metavar="DIR",
                    help="folder for the CSV (and configs); an existing scalesim CSV is resumed")
    ap.add_argument("--ramulator-commit", default="unknown", metavar="SHA",
                    help="the Ramulator 2 commit the bindings were built from (recorded in every row)")
    ap.add_argument("--aim-src", type=Path, metavar="DIR", help="aim_simulator checkout (preset YAMLs, commit id)")
    ap.add_argument("--aim-bin", type=Path, metavar="FILE", help="its built ramulator2 binary")
    ap.add_argument("--aim-quick", action="store_true", help="one shape, 1 and 4 channels, 1 vector (smoke run)")
    ap.add_argument("--aim-contention-only", action="store_true", help="only contention.csv")
    ap.add_argument("--aim-order", choices=AIM_ORDERS, default="per_group",
                    help="GEMV driver order of the traces (per_group -> gemv.csv, reuse_gb -> gemv_reuse_gb.csv)")
    ap.add_argument("--aim-traces", type=Path, metavar="DIR",
                    help="also save the one-vector traces on 1 and 32 channels here")
    a = ap.parse_args(argv)
    print(f"python {platform.python_version()} on {platform.platform()}", flush=True)
    if a.peer == "scalesim":
        run_scalesim(a.out)
    elif a.peer == "aim":
        if not (a.aim_src and a.aim_bin):
            ap.error("aim needs --aim-src and --aim-bin")
        if a.aim_contention_only:
            commit = subprocess.run(["git", "-C", str(a.aim_src), "rev-parse", "HEAD"], capture_output=True,
                                    text=True, check=True).stdout.strip()
            with tempfile.TemporaryDirectory() as tmp:
                run_aim_contention(a.out, a.aim_src, a.aim_bin, commit, Path(tmp))
        elif a.aim_quick:
            run_aim(a.out, a.aim_src, a.aim_bin, shapes=AIM_SHAPES[:1], channels=(1, 4), vectors=(1,),
                    contention=False, order=a.aim_order)
        else:
            run_aim(a.out, a.aim_src, a.aim_bin, order=a.aim_order, trace_dir=a.aim_traces,
                    contention=a.aim_order == "per_group")
    else:
        run_ramulator2(a.out, a.ramulator_commit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
