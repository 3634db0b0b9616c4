"""Fair baselines (issue 23): autoregressive decoding on every device, overlapped GPU weight
streaming, per-mode PIM placement chosen out of sample, one switch per ablation rung, and
``compare`` against the platform's best decoder."""
from __future__ import annotations

import dataclasses

import math
from pathlib import Path

import pytest
import yaml

import ahasd_sim.simulation  # noqa: F401 - the engine placement tuning runs on (the file passes alone too)
from ahasd_sim.config import load_config
from ahasd_sim.config.errors import InputError
from ahasd_sim.hw.gpu import double_buffered_time_s
from ahasd_sim.hw.platform import Platform
from ahasd_sim.modes import placement as placement_mod
from ahasd_sim.modes.costs import StepCosts
from ahasd_sim.workload.models import get_model
from ahasd_sim.workload.ops import forward_ops

ROOT = Path(__file__).resolve().parent.parent
PAPER_PLATFORM = ROOT / "hw_configs" / "platform_mobile_npu_lpddr5_pim.yaml"
LAPTOP = ROOT / "hw_configs" / "platform_laptop_rtx4090.yaml"
SMOKE = ROOT / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz"
GREEDY = ROOT / "traces" / "qwc-0.5b-1.5b_greedy.npz"


def _sc(path=PAPER_PLATFORM, *overrides):
    cfg = load_config(path, list(overrides))
    p = Platform.build(cfg)
    return cfg, p, StepCosts(p, get_model(cfg.run.draft_model), get_model(cfg.run.target_model), cfg)


# ------------------------------------------------------------------ overlapped streaming
@pytest.mark.parametrize("c,s", [(3.0, 1.0), (1.0, 3.0), (2.0, 2.0), (0.0, 1.5), (1.5, 0.0)])
def test_double_buffered_pipeline_is_max_per_layer_plus_fill(c, s):
    for n in (1, 2, 7, 40):
        assert double_buffered_time_s([c] * n, [s] * n) == pytest.approx(n * max(c, s) + min(c, s))
    # never better than either resource alone, never worse than no overlap
    units_c, units_s = [1.0, 4.0, 0.5, 2.0], [3.0, 0.5, 2.0, 1.0]
    t = double_buffered_time_s(units_c, units_s)
    assert max(sum(units_c), sum(units_s)) <= t <= sum(units_c) + sum(units_s)
    with pytest.raises(ValueError):
        double_buffered_time_s([1.0], [1.0, 2.0])


def test_two_buffers_bound_how_far_streaming_runs_ahead():
    # stream [1, 1, 1], compute [10, 0, 0]: the third layer's stream needs the first layer's
    # buffer, free only at 11; then 1 s of streaming: 12 (with unbounded buffers it would be 11)
    assert double_buffered_time_s([10.0, 0.0, 0.0], [1.0, 1.0, 1.0]) == pytest.approx(12.0)


def test_gpu_verify_overlaps_streaming_with_compute_layer_by_layer():
    cfg, p, sc = _sc(LAPTOP)
    _, _, serial = _sc(LAPTOP, "gpu.weight_streaming=serial")
    q = cfg.run.kv_len_quantum_tokens
    n, kv = 5, 512
    ops = forward_ops(sc.target, n, kv)
    over = sc.draft.weight_bytes() + sc.target.weight_bytes() - p.gpu.usable_memory_bytes
    assert 0 < over < sc.target.weight_bytes()
    compute = p.gpu.forward_cost(ops).duration_s
    per_layer = [op for op in ops if op.per_layer]
    head = [op for op in ops if not op.per_layer]
    L = per_layer[0].layer_repeat
    head_s = sum(p.gpu.op_cost(op).duration_s for op in head)
    w_layer = sum(op.weight_bytes for op in per_layer)
    w_head = sum(op.weight_bytes for op in head)
    w = L * w_layer + w_head
    c = (compute - head_s) / L
    s_layer = p.h2d.isolated_transfer_time_s(over * w_layer / w)
    s_head = p.h2d.isolated_transfer_time_s(over * w_head / w)
    assert s_layer > c                     # this verify is stream-bound: the overlap hides compute
    # stream-bound: the layers' streams run back to back (L x s); the last layer's compute and
    # the head's stream then overlap, and the head computes last
    expected = L * s_layer + max(c, s_head) + head_s
    got = sc.gpu_verify(n, kv)
    assert kv % q == 0
    assert got.duration_s == pytest.approx(expected, rel=1e-9)
    assert got.busy_s["gpu"] == pytest.approx(compute)
    assert got.busy_s["h2d"] == pytest.approx(L * s_layer + s_head)
    ser = serial.gpu_verify(n, kv)
    assert ser.duration_s == pytest.approx(compute + p.h2d.isolated_transfer_time_s(over))
    assert got.duration_s < ser.duration_s
    # the same bytes cross the link: the link energy is the same
    assert got.energy_j["h2d"] == pytest.approx(ser.energy_j["h2d"])
    # a model that fits streams nothing: both forms are the plain forward
    assert sc.gpu_draft_token(kv) == serial.gpu_draft_token(kv)


# ------------------------------------------------------------------ autoregressive on PIM
def test_autoregressive_on_pim_is_the_target_on_every_rank_for_one_token():
    cfg, p, sc = _sc(PAPER_PLATFORM, "baseline.device=pim")
    kv = 512
    ops = forward_ops(sc.target, 1, kv)
    ranks = cfg.pim.ranks
    expected = 0.0
    for op in ops:
        expected += p.pim_op_cost(op, ranks).duration_s * op.layer_repeat
    got = sc.target_forward(1, kv)
    assert got.duration_s == pytest.approx(expected, rel=1e-12)
    assert set(got.busy_s) == {"pim"}
    # one GEMV: the driver's command sequence for its layout on every die (hw/pim_spec.py; the
    # sequence itself is hand-checked in test_pim_sequence.py)
    from ahasd_sim.hw import pim_spec
    gemv = next(op for op in ops if op.kind.value in ("gemv", "gemm") and op.weight_bytes > 0)
    rows, cols, vectors, eb = gemv.pim_gemv
    spec = pim_spec.with_rates(pim_spec.preset(cfg.pim.preset), element_bytes=eb)
    assert p.pim_op_cost(gemv, ranks).duration_s == pytest.approx(
        pim_spec.gemv_time_s(spec, rows, cols, vectors, dies=ranks * cfg.pim.units_per_rank), rel=1e-12)
    # verifying L tokens on PIM costs about L x one token (weights re-read per input vector)
    four = sc.pim_target_forward(4, kv).duration_s
    assert 3.5 * got.duration_s < four <= 4.0 * got.duration_s * 1.01


def test_baseline_auto_is_the_fastest_device_of_the_platform():
    cfg, p, sc = _sc(PAPER_PLATFORM)
    assert cfg.baseline.device == "auto"
    assert sc.baseline_devices() == ("npu", "pim")
    kv = cfg.baseline.auto_reference_kv_tokens
    t = {d: sc._target_forward_on(d, 1, kv).duration_s for d in ("npu", "pim")}
    assert sc._baseline_device() == min(t, key=t.get) == "pim"
    assert sc.target_forward(1, 300) == sc.pim_target_forward(1, 300)
    _, _, npu = _sc(PAPER_PLATFORM, "baseline.device=npu")
    assert npu.target_forward(1, 300) == npu.verify(1, 300)
    _, _, lap = _sc(LAPTOP)
    assert lap._baseline_device() == "gpu"


# ------------------------------------------------------------------ placement per mode
def _small(tmp_path, *extra):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text(f"extends: {PAPER_PLATFORM}\nrun: {{policy: adaedl, trace: {SMOKE}, generated_tokens: 48}}\n")
    return load_config(cfg_file, ["tuning.generated_tokens=64", *extra])


def test_each_mode_chooses_its_own_placement_on_the_tuning_data(tmp_path):
    from ahasd_sim.simulation import load_run_windows, run_simulation
    placement_mod._CHOICES.clear()
    choices = {}
    for mode in ("operator_sync", "async"):
        cfg = _small(tmp_path, f"run.mode={mode}")
        pl = placement_mod.resolve_placement(cfg)
        assert pl.chosen_by == "tuned" and pl.tuning_trace == cfg.tuning.trace
        assert set(pl.candidates) == set(placement_mod.CANDIDATES)
        # the choice is the best candidate, and the candidates are the runs on the tuning data
        assert pl.candidates[pl.policy] == max(v for v in pl.candidates.values() if v is not None)
        for cand in ("all_ranks", "min_fit"):
            ccfg = cfg.replace([f"run.trace={cfg.tuning.trace}", f"run.windows={cfg.tuning.windows}",
                                f"run.generated_tokens={cfg.tuning.generated_tokens}", "run.timeline=false",
                                f"pim.partition_policy={cand}"])
            assert run_simulation(ccfg, load_run_windows(ccfg)).summary["throughput_tok_s"] == pytest.approx(
                pl.candidates[cand], rel=1e-12)
        choices[mode] = pl.policy
    # operator_sync never runs the two models together: it stripes both over every rank,
    # which async (drafting while the NPU streams the target) does not want
    assert choices["operator_sync"] == "all_ranks"
    assert choices["async"] != "all_ranks"
    # the reported run does not enter the choice: another run.trace, the same placement
    other = placement_mod.resolve_placement(_small(tmp_path, "run.mode=operator_sync", f"run.trace={GREEDY}"))
    assert other.policy == choices["operator_sync"]


def test_placement_is_recorded_and_a_pinned_one_is_kept(tmp_path):
    from ahasd_sim.simulation import run_simulation
    res = run_simulation(_small(tmp_path, "run.mode=operator_sync", "run.windows=1"))
    assert res.summary["pim_placement"]["chosen_by"] == "tuned"
    assert res.summary["platform"]["pim_draft_ranks"] == res.summary["platform"]["pim_target_ranks"] == 16
    pinned = run_simulation(_small(tmp_path, "run.mode=operator_sync", "run.windows=1",
                                   "pim.partition_policy=min_fit"))
    assert pinned.summary["pim_placement"] == {"policy": "min_fit", "chosen_by": "pinned", "objective": None,
                                               "tuning_trace": None, "candidates": {}}
    assert pinned.summary["throughput_tok_s"] < res.summary["throughput_tok_s"]
    ar = run_simulation(_small(tmp_path, "run.mode=autoregressive", "run.windows=1"))
    assert ar.summary["pim_placement"]["chosen_by"] == "not used by this mode"


def test_all_ranks_stripes_both_models_over_every_rank():
    cfg, p, sc = _sc(PAPER_PLATFORM, "pim.partition_policy=all_ranks")
    part = sc.partition
    assert (part.draft_ranks, part.target_ranks, part.shared_ranks, part.total_ranks) == (16, 16, 16, 16)
    assert part.target_rank_ids == part.draft_rank_ids == tuple(range(16))
    with pytest.raises(Exception, match="all_ranks allocation"):
        _sc(PAPER_PLATFORM, "pim.partition_policy=all_ranks", "pim.rank_capacity_gib=1.2")


# ------------------------------------------------------------------ ablation rungs
def _variant_settings(spec: dict, name: str) -> dict:
    v = spec["variants"][name]
    out = {"config": v.get("config", "base")}
    out.update({k: str(x) for k, x in (v.get("set") or {}).items()})
    return out


def test_every_ablation_rung_changes_exactly_one_switch():
    from ahasd_sim.paper.experiments import load_experiments
    spec = yaml.safe_load((ROOT / "hw_configs" / "paper" / "reproduce.yaml").read_text())
    for ladder in load_experiments().ladders.values():
        rungs = [r for r in ladder if r != "gpu_only"]
        for prev, nxt in zip(rungs, rungs[1:]):
            a, b = _variant_settings(spec, prev), _variant_settings(spec, nxt)
            keys = set(a) | set(b)
            # a key a rung leaves out takes the base config's value: compare resolved values
            cfg_a = load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml", [f"{k}={v}" for k, v in a.items()
                                                                            if k != "config"])
            cfg_b = load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml", [f"{k}={v}" for k, v in b.items()
                                                                            if k != "config"])
            ta, tb = cfg_a.to_dict(), cfg_b.to_dict()

            def flat(d, pre=""):
                for k, v in d.items():
                    if isinstance(v, dict):
                        yield from flat(v, f"{pre}{k}.")
                    else:
                        yield f"{pre}{k}", v
            fa, fb = dict(flat(ta)), dict(flat(tb))
            diff = sorted(k for k in fa if fa[k] != fb.get(k))
            assert len(diff) == 1, f"{prev} -> {nxt} changes {diff} (keys {sorted(keys)})"


def test_edc_alone_honours_edc_stop(tmp_path):
    from ahasd_sim.simulation import run_simulation
    base = ["run.mode=ahasd", "ahasd.tvc=false", "run.windows=1", "pim.partition_policy=striped"]
    one_more = run_simulation(_small(tmp_path, *base, "ahasd.edc_stop=draft_one_more"))
    idle = run_simulation(_small(tmp_path, *base, "ahasd.edc_stop=idle_until_feedback"))
    assert idle.summary["mode_stats"]["edc_idle_waits"] > 0
    assert one_more.summary["mode_stats"]["edc_idle_waits"] == 0
    assert one_more.summary["drafted_tokens"] > idle.summary["drafted_tokens"]


# ------------------------------------------------------------------ compare vs best decoder
def test_compare_runs_every_decoder_and_normalises_to_the_best(tmp_path):
    from ahasd_sim.compare import expand_modes, run_compare
    cfg = _small(tmp_path, "run.windows=2", "run.generated_tokens=24")     # 2 disjoint windows of the smoke trace
    rows = [r for r, _ in expand_modes(cfg, ["autoregressive", "operator_sync", "ahasd"])]
    assert rows == ["autoregressive@npu", "autoregressive@pim", "operator_sync", "ahasd"]
    table, _ = run_compare(cfg, None, None, tmp_path / "cmp")
    trees = [f"{m}/{p}" for m in ("tree_sync", "tree_pim") for p in ("eagle_fixed", "eagle_dynamic", "hw_tree")]
    assert list(table["mode"]) == ["autoregressive@npu", "autoregressive@pim", "npu_sync", "operator_sync",
                                  "task_sync", "async", "ahasd", *trees]
    # tree rows replay the tree trace's windows: their ratios are to the best tree row only
    tree_rows = table[table["mode"].isin(trees)]
    assert tree_rows["window_basis"].nunique() == 1 and tree_rows["window_basis"].iloc[0] != table["window_basis"].iloc[0]
    assert set(tree_rows["best_throughput_decoder"]) <= set(trees)
    assert (tree_rows["throughput_vs_best"] <= 1.0 + 1e-9).all()
    table = table[~table["mode"].isin(trees)]
    best = table["best_throughput_decoder"].iloc[0]
    row = table.set_index("mode")
    assert row.loc[best, "throughput_vs_best"] == pytest.approx(1.0)
    pooled = {m: row.loc[m, "throughput_tok_s"] for m in row.index}
    assert best in pooled
    # the best is the fastest decoder (here: plain decoding on PIM)
    assert best == "autoregressive@pim"
    assert (table["throughput_vs_best"] <= 1.0 + 1e-9).sum() >= len(table) - 1
    with pytest.raises(InputError, match="no GPU"):
        expand_modes(cfg, ["autoregressive@gpu"])
    assert math.isfinite(row.loc["ahasd", "energy_efficiency_vs_best"])


def test_gpu_platform_compares_speculation_with_plain_decoding_on_the_gpu():
    from ahasd_sim.compare import DEFAULT_MODES, expand_modes
    cfg = load_config(LAPTOP)
    rows = expand_modes(cfg, list(DEFAULT_MODES))
    assert [r for r, _ in rows] == ["autoregressive@gpu", "gpu_only"]
    assert dict(rows)["autoregressive@gpu"] == ["run.mode=autoregressive", "baseline.device=gpu"]
    # a mode named explicitly that the platform cannot run is an error, not a silent drop
    with pytest.raises(InputError, match="mode 'operator_sync' needs device"):
        expand_modes(cfg, ["operator_sync", "gpu_only"])


# ------------------------------------------------------------------ one tuning per tuning key
def test_the_tuning_key_leaves_out_only_what_the_tuning_runs_set_themselves(tmp_path):
    """Configs that differ in the reported trace, start prompt, window count or length, or the
    timeline have one tuning key and the same tuning runs; anything the tuning runs use (seed,
    policy, mode, hardware, the tuning section) gives another key."""
    base = _small(tmp_path, "run.mode=async")
    same = [_small(tmp_path, "run.mode=async", o) for o in
            (f"run.trace={GREEDY}", "run.trace_start_prompt=2", "run.generated_tokens=32", "run.windows=1",
             "run.timeline=true")]
    other = [_small(tmp_path, "run.mode=async", o) for o in
             ("run.seed=7", "run.policy=svip", "pim.ranks=12", "tuning.generated_tokens=32", "ahasd.max_verify_tokens=8")]
    other.append(_small(tmp_path, "run.mode=ahasd"))
    key = placement_mod.tuning_key(base)
    assert all(placement_mod.tuning_key(c) == key for c in same)
    assert len({key, *(placement_mod.tuning_key(c) for c in other)}) == 1 + len(other)
    runs = {c: cfg.fingerprint() for c, cfg in placement_mod.tuning_configs(base).items()}
    for cfg in same:
        assert {c: t.fingerprint() for c, t in placement_mod.tuning_configs(cfg).items()} == runs


def test_the_tuning_key_is_the_fingerprint_of_the_config_without_its_reported_run(tmp_path):
    """tuning_key swaps the run section's entry in the config's fingerprint: the text must be the
    fingerprint of the config built with the blanked run section (fails if the swap leaves the
    reported run's fields in, or changes any other section's text)."""
    from ahasd_sim.config.loader import SimConfig
    for extra in ((), ("run.mode=ahasd", "run.seed=7"), ("run.trace_start_prompt=2", "pim.ranks=12")):
        cfg = _small(tmp_path, "run.mode=async", *extra)
        cfg.fingerprint()   # remembered before the key is asked, as in a run
        run = dataclasses.replace(cfg.run, **{f: None for f in placement_mod._TUNING_SETS_RUN})
        built = SimConfig({**cfg._sections, "run": run}, cfg.source_file).fingerprint()
        assert placement_mod.tuning_key(cfg) == f"{cfg.source_file}\n{built}"


def test_a_config_of_a_tuned_key_is_not_tuned_again(tmp_path, monkeypatch):
    """In one process the second window of a study (another start prompt) takes the first
    window's placement without running the tuning simulations again; another seed tunes."""
    placement_mod._CHOICES.clear()
    calls = []
    tune = placement_mod._tune
    monkeypatch.setattr(placement_mod, "_tune", lambda cfg, workers=1: calls.append(cfg) or tune(cfg, workers))
    first = placement_mod.resolve_placement(_small(tmp_path, "run.mode=operator_sync", "run.windows=1"))
    again = placement_mod.resolve_placement(_small(tmp_path, "run.mode=operator_sync", "run.windows=1",
                                                   "run.trace_start_prompt=2"))
    assert again is first and len(calls) == 1
    placement_mod.resolve_placement(_small(tmp_path, "run.mode=operator_sync", "run.windows=1", "run.seed=3"))
    assert len(calls) == 2


def test_the_reported_start_prompt_is_not_checked_against_the_tuning_trace(tmp_path):
    """A run starting at prompt 40 of the 60-prompt greedy trace tunes on the 3-prompt smoke trace:
    the tuning windows are spread over the tuning trace and never start at prompt 40, so the
    choice is made (it used to fail: 'prompt 40 is out of range: the trace ... has 3 prompts')."""
    placement_mod._CHOICES.clear()
    cfg = _small(tmp_path, "run.mode=operator_sync", f"run.trace={GREEDY}", "run.windows=1",
                 "run.trace_start_prompt=40", f"tuning.trace={SMOKE}", "tuning.generated_tokens=16")
    assert placement_mod.resolve_placement(cfg).chosen_by == "tuned"


def test_configs_of_other_files_do_not_share_a_tuning(tmp_path):
    """tuning.trace may be a path relative to the config file: the same values read from files
    in two folders are two tuning keys."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = _small(tmp_path / "a", "run.mode=async")
    b = _small(tmp_path / "b", "run.mode=async")
    assert a.fingerprint() == b.fingerprint()
    assert placement_mod.tuning_key(a) != placement_mod.tuning_key(b)
