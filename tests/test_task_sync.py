"""``task_sync``: draft on PIM, then verify on the NPU, nothing overlapped."""
from __future__ import annotations

import pytest
from modes_helpers import run_mode

T, F = True, False


def test_task_sync_timeline_is_serial(tmp_path):
    """k=3, draft 1 s/token on PIM, verify 5 s on the NPU. Round 1 drafts 0,1,2 (pos 2 wrong):
    commits 0..2 at 3 + 5 = 8 s; round 2 drafts 3,4,5 (right): commits 3..6 (bonus) at 16 s;
    round 3 drafts 7,8,9, pos 7 wrong: commits 7 at 24 s. No task overlaps another, so the
    makespan is the sum of PIM and NPU busy time and the PIM is idle while the NPU verifies."""
    accept = [T, T, F, T, T, T, T, F, T, T]
    m, col, t = run_mode(tmp_path, "task_sync", accept, 8, ["run.policy=fixed", "policy.fixed.k=3"])
    assert t == 3 * (3 * 1.0 + 5.0)
    assert col.busy_s("pim") == 9.0 and col.busy_s("npu") == 15.0
    assert col.busy_s("pim") + col.busy_s("npu") == t
    npu = [(s, e) for s, e, _ in col.busy_intervals["npu"]]
    assert npu == [(3.0, 8.0), (11.0, 16.0), (19.0, 24.0)]
    for s, e, _ in col.busy_intervals["pim"]:     # no draft runs during a verification
        assert all(e <= vs or s >= ve for vs, ve in npu)
    c = col.counters
    assert c.killed_tokens == 0 and c.accepted_tokens == 5 and c.rejected_tokens == 2
    assert col.committed_positions == list(range(8))


def test_compare_runs_every_registered_soc_mode():
    """compare's default rows are the SoC family's registry, task_sync among them, in the order
    of the ablation ladder (operator_sync < task_sync < async < ahasd)."""
    from ahasd_sim.compare import DEFAULT_MODES
    from ahasd_sim.modes import MODES
    soc = [n for n, c in MODES.items() if c.__module__.startswith("ahasd_sim.modes.soc.")]
    assert list(DEFAULT_MODES) == soc
    i = DEFAULT_MODES.index
    assert i("operator_sync") < i("task_sync") < i("async") < i("ahasd")
    assert "moe_offload" not in DEFAULT_MODES and "hybrid" not in DEFAULT_MODES


def test_npu_sync_drafts_and_verifies_on_the_npu_alone():
    """npu_sync: every task on the NPU (no PIM time), one after the other: the NPU's busy time is
    the whole decode time; the head's forward streams its 0.53 GB (LLaMA2-13B head) instead of the
    7B drafter's 6.7 GB, so the same verdicts take far less drafting time."""
    from conftest import ROOT, SMOKE_TRACE
    from ahasd_sim.config import load_config
    from ahasd_sim.simulation import run_simulation
    plat = ROOT / "hw_configs" / "platform_mobile_npu_lpddr5_pim.yaml"
    base = ["run.mode=npu_sync", f"run.trace={SMOKE_TRACE}", "run.generated_tokens=48", "run.windows=1",
            "run.prefill=false"]
    got = {}
    for d in ("model", "head"):
        s = run_simulation(load_config(plat, [*base, f"run.drafter={d}"])).summary
        assert s["device_busy_s"].get("pim", 0.0) == 0.0
        assert s["device_busy_s"]["npu"] == pytest.approx(s["decode_makespan_s"], rel=1e-9)
        got[d] = s
    assert got["head"]["accepted_tokens"] == got["model"]["accepted_tokens"]
    assert got["head"]["decode_makespan_s"] < got["model"]["decode_makespan_s"]
