"""scripts/plot_moe_sweep.py: its legend keys eviction policies by line style (distinct dash
patterns, one key each, apart from the policy colours), and its note on why LRU and LFU nearly
coincide is computed from the runs' own cache counters."""
from __future__ import annotations

import importlib.util

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402

from conftest import ROOT  # noqa: E402


def _script():
    spec = importlib.util.spec_from_file_location("plot_moe_sweep", ROOT / "scripts" / "plot_moe_sweep.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_legend_keys_policies_by_colour_and_evictions_by_dashes():
    m = _script()
    hs, labs = m.legend_handles(["lru", "lfu"])
    assert labs == [*m.POLICIES, "eviction LRU", "eviction LFU"]
    styles = [h.get_linestyle() for h in hs[-2:]]
    assert styles[0] != styles[1]                       # solid vs dashed, drawn apart
    assert len({h.get_color() for h in hs[:len(m.POLICIES)]}) == len(m.POLICIES)


def test_eviction_note_counts_streamed_misses():
    """Capacity 0.1: 90 streamed and 10 evicting misses -> 90%; 0.5: 30 and 70 -> 30%. Hit rates
    0.2 / 0.205 apart by 0.005."""
    m = _script()
    df = pd.DataFrame({"x": [0.1, 0.1, 0.5, 0.5], "moe.cache_policy": ["lru", "lfu", "lru", "lfu"],
                       "run.policy": "specfit", "expert_cache_hit_rate": [0.2, 0.205, 0.6, 0.6],
                       "mode_stats.cache.evictions": [5, 5, 35, 35],
                       "mode_stats.cache.streamed_misses": [45, 45, 15, 15]})
    text = " ".join(m.eviction_note(df))
    assert "0.1: 90%" in text and "0.5: 30%" in text and "at most 0.005 apart" in text
    assert m.eviction_note(df[df["moe.cache_policy"] == "lru"]) == []     # one eviction policy: no note
