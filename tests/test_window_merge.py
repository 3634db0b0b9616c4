"""Combining a run's trace windows: every summary number declares how it combines
(metrics.combine.RULES), and per-token figures of a 4-window run stay within the windows' spread."""
from __future__ import annotations

import math

import pytest

from ahasd_sim.config import load_config
from ahasd_sim.metrics import combine
from ahasd_sim.metrics.combine import merge_summaries, rule_for, undeclared
from ahasd_sim.simulation import combine_windows, load_run_windows, run_simulation, run_window

from conftest import ROOT, SMOKE_TRACE

HW = ROOT / "hw_configs"
SOC = [f"run.trace={SMOKE_TRACE}", "run.generated_tokens=24", "run.timeline=false"]
#: one configuration per mode family: (config file, --set overrides)
FAMILIES = {
    "soc": ("ahasd_mobile.yaml", [f"run.trace={ROOT / 'traces' / 'qwc-0.5b-1.5b_greedy.npz'}",
                                  "run.generated_tokens=24", "run.timeline=false"]),
    "moe": ("moe_offload.yaml", ["run.generated_tokens=32"]),
    "mobile_cloud": ("hyco_mobile_cloud.yaml", ["run.generated_tokens=48", "cloud.phones_per_gpu=2"]),
}
#: figures per token / per round / per iteration / rates: a run's value must lie within its windows'
PER_UNIT = ("tpot_s", "device_energy_per_token_j", "energy_per_token_j", "cloud_cost_usd_per_1k_tokens",
            "cloud_fleet.mean_batch_tokens", "cloud_fleet.mean_batch_forwards", "cloud_fleet.gpu_utilization",
            "acceptance_rate", "mean_accepted_per_verify", "throughput_tok_s", "tokens_per_j",
            "policy_stats.mean_draft_length", "policy_stats.mean_accepted_length", "expert_cache_hit_rate",
            "experts_touched_per_verify", "dram_power.mean_w", "mode_stats.cache.hit_rate")


def _get(s, path):
    for k in path.split("."):
        if not isinstance(s, dict) or k not in s:
            return None
        s = s[k]
    return s


def _windows(name, n):
    f, sets = FAMILIES[name]
    cfg = load_config(HW / f, [*sets, f"run.windows={n}"])
    wins = load_run_windows(cfg)
    if len(wins) == 1:      # a mode that cuts its own windows (MoE's tree trace): merge seeds of it
        wins = wins * n
    results = [run_window(cfg, parts, i) for i, (_p, parts) in enumerate(wins)]
    return cfg, wins, results


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_four_windows_agree_with_one_for_every_per_unit_key(family):
    """Each entry of a 4-window run follows its rule over the windows' own summaries (a sum is the
    sum, a per-token figure lies within the windows' range), and the 1-window run (window 0 alone)
    is within the windows' spread of the 4-window value. The old name-based merge added up tpot_s,
    device_energy_per_token_j, phones_per_gpu and mean_batch_tokens over windows: 4x too large."""
    cfg, wins, results = _windows(family, 4)
    assert len(results) == 4
    comb = combine_windows(cfg, results, [p for p, _ in wins]).summary
    one = run_simulation(cfg.replace(["run.windows=1", f"run.trace_start_prompt={wins[0][0]}"])).summary
    checked = 0
    for path, v in combine._leaves(comb):
        if not combine._number(v) or isinstance(v, bool):
            continue
        ws = [_get(r.summary, path) for r in results]
        if not all(combine._number(w) for w in ws):
            continue
        rule = rule_for(path)
        assert rule is not None, f"{path}: no declared rule"
        if rule == combine.SUM:
            assert v == pytest.approx(sum(ws), rel=1e-12), path
        elif rule == combine.FIRST:
            assert v == ws[0], path
        elif rule == combine.MAX:
            assert v == max(ws), path
        elif rule in (combine.MEAN,) or (isinstance(rule, tuple) and rule[0] in ("wmean", "ratio", "pct")) \
                or path in PER_UNIT:
            finite = [w for w in ws if math.isfinite(w)]
            if finite and math.isfinite(v):
                lo, hi = min(finite), max(finite)
                assert lo - 1e-9 * abs(lo) <= v <= hi + 1e-9 * abs(hi), (path, v, ws)
                checked += 1
    assert checked >= 5
    for path in PER_UNIT:
        v, ws, o = _get(comb, path), [_get(r.summary, path) for r in results], _get(one, path)
        if v is None:
            continue
        spread = max(ws) - min(ws)
        assert abs(v - o) <= spread + 1e-12 * abs(o), (path, v, o, ws)
    if family == "mobile_cloud":
        assert comb["cloud_fleet"]["phones_per_gpu"] == 2
        assert comb["tpot_s"] == pytest.approx(sum(r.summary["tpot_s"] for r in results) / 4, rel=1e-12)
        assert comb["device_energy_per_token_j"] == pytest.approx(
            sum(r.summary["decode_energy_j"] for r in results) / sum(r.summary["generated_tokens"] for r in results))
        tp = [r.summary["tpot_s"] for r in results]
        m = sum(tp) / 4
        sd = math.sqrt(sum((x - m) ** 2 for x in tp) / 3)
        h = 3.182446305284263 * sd / 2                       # t(0.975, 3) x sd / sqrt(4)
        assert comb["tpot_ci95_s"] == pytest.approx([max(0.0, comb["tpot_s"] - h), comb["tpot_s"] + h], rel=1e-9)


def _summaries():
    soc = [("ahasd_mobile.yaml", [*SOC, f"run.mode={m}"]) for m in ("autoregressive", "operator_sync", "async", "ahasd")]
    soc += [("ahasd_mobile.yaml", [*SOC, f"run.policy={p}"]) for p in ("banditspec", "fixed", "svip")]
    soc += [("ahasd_mobile.yaml", ["run.generated_tokens=24", "run.timeline=false", "run.policy=specdecpp"]),
            ("platform_laptop_rtx4090.yaml", [*SOC, "run.mode=gpu_only"])]
    moe = [("moe_offload.yaml", ["run.generated_tokens=24", f"run.policy={p}"])
           for p in ("eagle_dynamic", "eagle_fixed", "ecospec", "no_draft", "specfit", "expert_budget")]
    mc = [("hyco_mobile_cloud.yaml", ["run.generated_tokens=32", f"run.mode={m}", "cloud.phones_per_gpu=2"])
          for m in ("cloud_autoregressive", "device_draft_cloud_verify", "hybrid", "device_only")]
    mc.append(("hyco_large_target.yaml", ["run.generated_tokens=32", "run.policy=rtt_aware", "cloud.kv_cache_gib=-1"]))
    for f, sets in soc + moe + mc:
        yield f, sets, run_simulation(load_config(HW / f, [*sets, "run.windows=1"])).summary


def test_every_summary_number_of_every_mode_and_policy_declares_how_it_combines():
    """No number is combined by a guess from its name: every numeric or list entry of every mode's and
    policy's summary matches a rule (a new entry without one fails here)."""
    for f, sets, s in _summaries():
        assert undeclared(s) == [], (f, sets[-1])


def test_merge_rules_by_hand():
    """Hand case: two windows of 10 and 30 tokens at 2 ms and 4 ms per token: the run's TPOT is
    (10 x 2 + 30 x 4) / 40 = 3.5 ms (a ratio of totals, not 6 ms, not the mean 3 ms); counts add,
    phones on the GPU stay 2, a batch mean is weighted by iterations, percentiles are over the
    joined samples, the interval is t(0.975, 1) x sd / sqrt(2) over the windows' TPOT."""
    a = {"generated_tokens": 10, "decode_energy_j": 1.0, "tpot_s": 0.002, "round_trips": 3, "mode": "hybrid",
         "cloud_fleet": {"phones_per_gpu": 2, "iterations": 10, "mean_batch_tokens": 4.0, "user_tpot_ms": [1.0, 2.0],
                         "user_tpot_p50_ms": 1.5},
         "mode_stats": {"cache": {"hits": 1, "misses": 3, "hit_rate": 0.25}}, "tpot_window_s": [0.002]}
    b = {"generated_tokens": 30, "decode_energy_j": 5.0, "tpot_s": 0.004, "round_trips": 5, "mode": "x",
         "cloud_fleet": {"phones_per_gpu": 2, "iterations": 30, "mean_batch_tokens": 8.0, "user_tpot_ms": [3.0, 4.0],
                         "user_tpot_p50_ms": 3.5},
         "mode_stats": {"cache": {"hits": 3, "misses": 1, "hit_rate": 0.75}}, "tpot_window_s": [0.004]}
    a["tpot_ci95_s"] = b["tpot_ci95_s"] = 0.0
    a["device_energy_per_token_j"], b["device_energy_per_token_j"] = 0.1, 5.0 / 30
    m = merge_summaries([a, b])
    assert m["tpot_s"] == pytest.approx(0.0035, rel=1e-12)
    assert m["generated_tokens"] == 40 and m["round_trips"] == 8 and m["mode"] == "hybrid"
    assert m["device_energy_per_token_j"] == pytest.approx(6.0 / 40, rel=1e-12)
    assert m["cloud_fleet"]["phones_per_gpu"] == 2
    assert m["cloud_fleet"]["mean_batch_tokens"] == pytest.approx((10 * 4 + 30 * 8) / 40, rel=1e-12)
    assert m["cloud_fleet"]["user_tpot_ms"] == [1.0, 2.0, 3.0, 4.0]
    assert m["cloud_fleet"]["user_tpot_p50_ms"] == pytest.approx(2.5)
    assert m["mode_stats"]["cache"]["hit_rate"] == pytest.approx(0.5)
    assert m["tpot_window_s"] == [0.002, 0.004]
    assert m["tpot_ci95_s"] is None          # 2 windows: below the t interval's minimum of 3 samples
