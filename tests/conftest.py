import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

SMOKE_TRACE = ROOT / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz"
PAPER_PLATFORM = ROOT / "hw_configs" / "platform_mobile_npu_lpddr5_pim.yaml"


@pytest.fixture(autouse=True)
def _cold_cost_caches_under_mutation_testing():
    """Under mutmut (which sets MUTANT_UNDER_TEST), start every test with empty process-wide
    cost caches: its workers are forked from the process that ran the suite, so warm caches
    would hand a mutant the unmutated results (it "survives" untested), and the per-test
    coverage it records would miss every test that only hit a cache. Plain runs keep them.
    The MoE modules (``moe/``) keep no process-wide cache (``MoeCostModel._dense`` lives in one
    instance); ``modes.moe_offload._TRACE_CACHE`` holds parsed tree-trace arrays, which no
    ``moe/`` code computes."""
    if os.environ.get("MUTANT_UNDER_TEST"):
        clear_cost_caches()
    yield


@pytest.fixture(autouse=True)
def _no_figure_left_open():
    """Close every pyplot figure a test left open: tests that capture figures instead of saving
    them (monkeypatched ``save_figure``) would otherwise keep them for the whole session."""
    yield
    plt = sys.modules.get("matplotlib.pyplot")    # only where a test imported it
    if plt is not None:
        plt.close("all")


def clear_cost_caches() -> None:
    """Empty the process-wide caches of ``modes/costs/`` (``tests/test_hot_paths.py`` checks
    that none is missed). (costs._SCALED was removed from the former costs.py; clearing it made
    every mutmut run fail at its first test, in the stats collection. The tree policies and
    metrics/stats keep no process-wide cache: nothing of theirs to clear.)"""
    from ahasd_sim.modes.costs import affine, common
    common._OP_COST_CACHE.clear()
    common._TASK_COST_TABLES.clear()
    common._OPS_CACHE.clear()
    affine._affine_ops.cache_clear()


@pytest.fixture
def smoke_cfg_file(tmp_path):
    """A short run of the paper platform on the shipped smoke trace."""
    p = tmp_path / "smoke.yaml"
    p.write_text(f"extends: {PAPER_PLATFORM}\n"
                 f"run: {{mode: ahasd, policy: adaedl, trace: {SMOKE_TRACE}, generated_tokens: 48}}\n")
    return p
