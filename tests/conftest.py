import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

SMOKE_TRACE = ROOT / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz"
PAPER_PLATFORM = ROOT / "hw_configs" / "platform_mobile_npu_lpddr5_pim.yaml"


@pytest.fixture
def smoke_cfg_file(tmp_path):
    """A short run of the paper platform on the shipped smoke trace."""
    p = tmp_path / "smoke.yaml"
    p.write_text(f"extends: {PAPER_PLATFORM}\n"
                 f"run: {{mode: ahasd, policy: adaedl, trace: {SMOKE_TRACE}, generated_tokens: 48}}\n")
    return p
