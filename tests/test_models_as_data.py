"""Models as data: YAML model files and Hugging Face config.json files, read without Python edits.

Hand counts (every layer: attention q/k/v/o + FFN + two norms; plus embedding, final norm and an
untied LM head):

* Llama-2-7B (dense, MHA): d 4096, 32 layers, FFN 11008, vocab 32000, untied.
  attention 4 * 4096^2 = 67,108,864; FFN 3 * 4096 * 11008 = 135,266,304; norms 2 * 4096 = 8,192
  -> layer 202,383,360; x 32 = 6,476,267,520; embedding + head 2 * 32000 * 4096 = 262,144,000;
  final norm 4,096 -> 6,738,415,616 (the count Hugging Face reports).
* Mixtral-8x7B (MoE, GQA 32/8): d 4096, 32 layers, 8 experts of 14336 routed top-2, vocab 32000.
  attention 2 * 4096^2 + 2 * 4096 * 1024 = 41,943,040; experts 8 * 3 * 4096 * 14336 =
  1,409,286,144; router 4096 * 8 = 32,768; norms 8,192 -> layer 1,451,270,144; x 32 =
  46,440,644,608; + 262,144,000 + 4,096 = 46,702,792,704. Active: 2 experts (352,321,536) ->
  layer 394,305,536; x 32 = 12,617,777,152; + 262,148,096 = 12,879,925,248.
  KV bytes per token at INT8: 2 (K, V) * 32 layers * 8 heads * 128 = 65,536.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ahasd_sim.errors import InputError
from ahasd_sim.workload.models import (MODELS, ModelFileError, get_model, load_model_file, spec_from_dict,
                                       with_precision)
from ahasd_sim.workload.ops import forward_totals

ROOT = Path(__file__).resolve().parent.parent
HF = ROOT / "tests" / "data" / "hf_configs"


def test_dense_hf_config_counts_by_hand():
    m = get_model(str(HF / "llama-2-7b-hf" / "config.json"))
    assert m.param_count() == 6_738_415_616
    assert m.weight_bytes() == 6_738_415_616                       # INT8: one byte per weight
    assert with_precision(m, 2.0).weight_bytes() == 2 * 6_738_415_616
    assert m.kv_bytes_per_token() == 2 * 32 * 32 * 128
    assert not m.tied_embeddings and not m.is_moe
    # the same shape as the shipped YAML file of the zoo
    z = MODELS["llama2-7b"]
    assert (m.n_layers, m.d_model, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ffn, m.vocab_size) == \
        (z.n_layers, z.d_model, z.n_heads, z.n_kv_heads, z.head_dim, z.d_ffn, z.vocab_size)


def test_moe_hf_config_counts_by_hand():
    m = get_model(str(HF / "mixtral-8x7b-v0.1"))                   # a folder holding config.json
    assert m.is_moe and (m.n_experts, m.n_active_experts, m.d_expert_ffn) == (8, 2, 14336)
    assert m.param_count() == 46_702_792_704
    assert m.active_param_count() == 12_879_925_248
    assert m.weight_bytes() == 46_702_792_704
    assert m.kv_bytes_per_token() == 65_536


def test_qwen3_moe_config_json_equals_the_shipped_yaml_shape():
    """The shipped qwen3-30b-a3b.yaml and the model's config.json give the same counts."""
    m = load_model_file(HF / "qwen3-30b-a3b" / "config.json")
    z = MODELS["qwen3-30b-a3b"]
    assert m.param_count() == z.param_count() == 30_532_122_624
    assert m.active_param_count() == z.active_param_count()
    assert m.qk_norm and not m.tied_embeddings


def test_tied_embeddings_and_qkv_bias_from_qwen2_config():
    m = load_model_file(HF / "qwen2.5-0.5b" / "config.json")
    assert m.tied_embeddings and m.qkv_bias and m.sliding_window == 0   # use_sliding_window: false
    assert m.param_count() == MODELS["qwen2.5-0.5b"].param_count() == 494_032_768


def test_sliding_window_caps_the_attention_reads():
    """Mistral-7B attends to its last 4096 positions: at 8000 cached tokens one token reads the K/V
    of 4096 tokens (+ itself), as a full-attention model of the same shape reads 8001."""
    mistral = load_model_file(HF / "mistral-7b-v0.1" / "config.json")
    assert mistral.sliding_window == 4096 and mistral.param_count() == 7_241_732_096
    import dataclasses
    full = dataclasses.replace(mistral, sliding_window=0)
    kv_one_token = mistral.kv_bytes_per_token()
    a, b = forward_totals(mistral, 1, 8000), forward_totals(full, 1, 8000)
    assert a.kv_bytes == pytest.approx(kv_one_token * (4096 + 1))
    assert b.kv_bytes == pytest.approx(kv_one_token * (8000 + 1))
    # below the window the two are the same
    assert forward_totals(mistral, 4, 100).kv_bytes == forward_totals(full, 4, 100).kv_bytes


def test_every_zoo_model_is_a_file():
    files = {p.stem for p in (ROOT / "hw_configs" / "models").glob("*.yaml")}
    assert set(MODELS) <= files, sorted(set(MODELS) - files)
    for name in MODELS:
        assert MODELS.file_of(name)


@pytest.mark.parametrize("body,needle", [
    ("n_layers: x", "n_layers: expected a non-negative integer"),
    ("FULL\nn_kv_heads: 5", "n_heads must be a multiple of n_kv_heads"),
    ("FULL\nffn_type: relu", "ffn_type must be one of"),
    ("FULL\nvocab_size: 0", "vocab_size must be positive"),
    ("n_layerz: 3", "unknown model field (did you mean 'n_layers'?)"),
    ("[1, 2]", "expected a mapping"),
    ("name: m\nn_layers: 2", "missing field(s)"),
    ("{ :", "not valid YAML"),
])
def test_bad_model_files_give_one_line_errors(tmp_path, body, needle):
    f = tmp_path / "bad.yaml"
    key = body.removeprefix("FULL\n").split(":")[0]
    full = "\n".join(l for l in (ROOT / "hw_configs/models/llama2-7b.yaml").read_text().splitlines()
                     if not l.startswith(key + ":"))
    f.write_text(body.replace("FULL", full))
    with pytest.raises(InputError) as ei:
        load_model_file(f)
    msg = str(ei.value)
    assert needle in msg and str(f) in msg and "\n" not in msg


@pytest.mark.parametrize("change,needle", [
    ({"hidden_size": 4095, "head_dim": None}, "not a multiple of num_attention_heads"),
    ({"num_key_value_heads": 5}, "must be a multiple of it"),
    ({"model_type": "gpt2"}, "not a supported decoder family"),
    ({"num_hidden_layers": "32"}, "expected a positive integer"),
    ({"hidden_act": "gelu"}, "expected silu"),
])
def test_bad_hf_configs_are_refused(tmp_path, change, needle):
    cfg = json.loads((HF / "llama-2-7b-hf" / "config.json").read_text())
    cfg.update(change)
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    with pytest.raises(ModelFileError, match=needle.replace("(", r"\(")):
        load_model_file(f)


def test_moefied_file_equals_the_python_transformation():
    from ahasd_sim.workload.models import moefied
    assert MODELS["qwen2.5-coder-1.5b-moefied-e64k8"] == moefied(MODELS["qwen2.5-coder-1.5b"], 64, 8)
    with pytest.raises(ModelFileError, match="moefied"):
        spec_from_dict({"moefied": {"model": "qwen2.5-coder-1.5b", "n_experts": 9, "top_k": 2}}, "x.yaml")


def test_a_new_model_file_runs_with_no_python_edit(tmp_path):
    """Done when: a model added as hw_configs/models/mymodel.yaml (in the current folder) runs by its
    name, and a Hugging Face config.json runs by its path; the model's shape decides the result."""
    models = tmp_path / "hw_configs" / "models"
    models.mkdir(parents=True)
    text = (ROOT / "hw_configs" / "models" / "llama2-13b.yaml").read_text()
    (models / "mymodel.yaml").write_text(text.replace("name: llama2-13b", "name: mymodel")
                                         .replace("n_layers: 40", "n_layers: 80"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    common = [sys.executable, "-m", "ahasd_sim", "run", "--config", "hw_configs/ahasd_mobile.yaml", "--quiet",
              "--set", "run.generated_tokens=32", "--set", "run.windows=1", "--set", "run.timeline=false"]
    tput = {}
    for name, model in (("mine", "mymodel"), ("zoo", "llama2-13b"),
                        ("hf", str(HF / "llama-2-7b-hf" / "config.json"))):
        r = subprocess.run([*common, "--set", f"run.target_model={model}", "--out", str(tmp_path / name)],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        s = json.loads((tmp_path / name / "summary.json").read_text())
        assert s["target_model"] == model
        tput[name] = s["throughput_tok_s"]
    assert tput["mine"] < tput["zoo"]          # twice the layers: slower verification


def test_spec_to_yaml_round_trips_every_zoo_model(tmp_path):
    from ahasd_sim.workload.models import spec_to_yaml
    for name, spec in MODELS.items():
        if "moefied" in name:
            continue
        f = tmp_path / f"{name}.yaml"
        f.write_text(spec_to_yaml(spec))
        assert load_model_file(f) == spec, name
        assert f.read_text() == (ROOT / "hw_configs" / "models" / f"{name}.yaml").read_text(), name
