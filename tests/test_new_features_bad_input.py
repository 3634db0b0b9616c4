"""Bad configs of this round's features (PIM unit microarchitecture, drafter kinds, the package
power cap, model files, the context what-if, MoE drafting, phone capacity): the dry run and the
run refuse each with the same one line naming the source and the key, exit 2, nothing written."""
from __future__ import annotations

from pathlib import Path

import pytest

from ahasd_sim.__main__ import main
from test_hw_helpers import one_line_error

ROOT = Path(__file__).resolve().parent.parent
MAIN = ROOT / "hw_configs" / "ahasd_mobile.yaml"
MOE = ROOT / "hw_configs" / "moe_offload.yaml"
PHONE12 = ROOT / "hw_configs" / "phone_12gb.yaml"
SHORT = ["run.generated_tokens=16", "run.windows=1", "run.timeline=false"]


def _bad_model(d: Path) -> Path:
    """A model file whose 3 query heads cannot share 2 KV heads."""
    f = d / "bad_model.yaml"
    f.write_text("name: bad-model\ndisplay_name: Bad\nn_layers: 2\nd_model: 96\nn_heads: 3\nn_kv_heads: 2\n"
                 "head_dim: 32\nd_ffn: 256\nffn_type: swiglu\nnorm_type: rmsnorm\nvocab_size: 1000\n"
                 "tied_embeddings: true\nsource: a test\n")
    return f


CASES = [
    ("k-without-lanes", MAIN, lambda d: ["pim.vectors_per_weight_read=8", "pim.mac_lanes_per_bank=1"],
     "--set: pim.mac_lanes_per_bank: 1 MAC lanes per bank cannot multiply 8 input vectors"),
    ("k-without-mac-rate", MAIN, lambda d: ["pim.vectors_per_weight_read=8", "pim.unit_gops_int8=102.4"],
     "--set: pim.unit_gops_int8: 102.4 GOPS per unit cannot multiply 8 input vectors"),
    ("cap-below-static-power", MAIN, lambda d: ["pim.dram_power_limit_w=0.01"],
     "--set: pim.dram_power_limit_w: 0.01 W is at or below the package's static power"),
    ("model-file-heads", MAIN, lambda d: [f"run.target_model={_bad_model(d)}"],
     "--set: run.target_model: {d}/bad_model.yaml: n_heads must be a multiple of n_kv_heads"),
    ("lookup-ngrams", MAIN, lambda d: ["run.drafter=lookup", "lookup.min_ngram=5", "lookup.max_ngram=2"],
     "--set: lookup.min_ngram: is 5, above lookup.max_ngram 2"),
    ("negative-context", MAIN, lambda d: ["run.extra_context_tokens=-1"],
     "--set: run.extra_context_tokens: expected >= 0 tokens, got -1"),
    ("moe-lookup-drafter", MOE, lambda d: ["run.drafter=lookup"],
     "--set: run.drafter: mode moe_offload replays a tree trace whose acceptance was recorded with a model"),
    ("phone-12gb-pair", PHONE12, lambda d: ["run.mode=ahasd"],
     "pim.ranks: no rank placement (all_ranks, striped, min_fit, proportional) can run this mode: draft model"),
]


@pytest.mark.parametrize("name, cfg, sets, fragment", CASES, ids=[c[0] for c in CASES])
def test_new_feature_bad_configs_are_refused_alike_by_the_dry_run_and_the_run(tmp_path, capsys, name, cfg, sets,
                                                                              fragment):
    items = [*SHORT, *sets(tmp_path)]
    argv = ["--config", str(cfg), *[x for s in items for x in ("--set", s)], "--jobs", "1"]
    dry = one_line_error(capsys, main([*argv, "--dry-run", "--out", str(tmp_path / "d")]), fragment.format(d=tmp_path))
    run = one_line_error(capsys, main([*argv, "--out", str(tmp_path / "r")]))
    assert run == dry
    assert not (tmp_path / "d").exists() and not (tmp_path / "r").exists()
