"""The generator's Hugging Face backend on tiny random Qwen2 models (no download).
Skipped where torch/transformers are not installed (the CI box); run on a torch machine."""

import importlib.util
import os

import numpy as np
import pytest

_HF_MISSING = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(
    bool(_HF_MISSING), reason=f"optional `hf` extra not installed ({', '.join(_HF_MISSING)} missing): "
    "the Hugging Face trace backend is tested only where `pip install -e '.[hf]'` was run (too heavy for CI)")

from ahasd_sim.traces.format import load_trace, replay_fixed_k, write_trace  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def G():
    spec = importlib.util.spec_from_file_location("gen_traces", os.path.join(REPO, "scripts", "gen_traces.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.EOS_IDS.clear()
    mod.EOS_IDS.add(63)  # tiny vocab: token 63 ends a response
    return mod


@pytest.fixture(scope="module")
def models(tmp_path_factory, G):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    d = tmp_path_factory.mktemp("hf")
    cfg = Qwen2Config(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      tie_word_embeddings=False)
    torch.manual_seed(0)
    tgt = Qwen2ForCausalLM(cfg)
    with torch.no_grad():  # sharpen the distributions so greedy paths are not all ties
        tgt.lm_head.weight.mul_(8.0)
    tgt.save_pretrained(d / "tgt")
    with torch.no_grad():  # drafter = perturbed target, so it agrees part of the time
        for p in tgt.parameters():
            p.add_(0.25 * p.std() * torch.randn_like(p))
    tgt.save_pretrained(d / "drf")
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    return (G.HFModel(str(d / "tgt"), dev, "float32"), G.HFModel(str(d / "drf"), dev, "float32"))


def cfg(mode):
    return {"mode": mode, "temperature": 1.0, "top_k": 4, "L_max": 3, "max_new": 40,
            "rollout_mode": "auto", "seed": 7}


def header(mode):
    return {"mode": mode, "categories": ["x"], "prompts": [{"id": "p0"}], "top_k": 4, "L_max": 3}


def test_kv_rollback_matches_fresh_pass(models):
    tgt, _ = models
    toks = [1, 5, 9, 12, 33, 7, 2, 40]
    full = tgt.decode(toks, 0, n_logits=3)
    tgt.decode(toks[:5] + [60, 61, 62], 0)  # wrong continuation, then roll back to 5
    again = tgt.decode(toks[5:], 5, n_logits=3)
    np.testing.assert_allclose(full, again, atol=1e-4)


@pytest.mark.parametrize("mode", ["greedy", "sample"])
def test_record_prompt_hf(models, G, tmp_path, mode):
    tgt, drf = models
    cols, info = G.record_prompt(tgt, drf, [3, 14, 15, 9, 26, 5], cfg(mode), 0)
    n = len(cols["tgt_tok"])
    assert n == info["n_generated"] and n > 0
    cols["prompt_id"] = np.zeros(n, np.int32)
    cols["category"] = np.zeros(n, np.int16)
    write_trace(tmp_path / "t.npz", header(mode), cols)  # validates
    tr = load_trace(tmp_path / "t.npz")
    assert tr.accept.any() and (~tr.accept).any()


def test_online_crosscheck_hf(models, G):
    tgt, drf = models
    prompt = [3, 14, 15, 9, 26, 5]
    cols, _ = G.record_prompt(tgt, drf, prompt, cfg("greedy"), 0)
    for k in (2, 4):
        rounds, out, _ = G.online_greedy(tgt, drf, prompt, k, len(cols["tgt_tok"]), "sequential")
        assert out == cols["tgt_tok"].tolist()
        assert rounds == replay_fixed_k(cols["accept"], k).tolist()
        rounds_b, out_b, _ = G.online_greedy(tgt, drf, prompt, k, len(cols["tgt_tok"]), "batched")
        if out_b == out:
            assert rounds_b == rounds
