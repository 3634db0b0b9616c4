"""Mobile-cloud runs as parts of user sessions: the radio tail charged per session of stated length,
and single-option cloud modes as one continuous stream."""
from __future__ import annotations

import pytest

from ahasd_sim.config import load_config
from ahasd_sim.simulation import run_simulation

from conftest import ROOT

HYCO = ROOT / "hw_configs" / "hyco_mobile_cloud.yaml"


def _run(*sets):
    return run_simulation(load_config(HYCO, list(sets))).summary


def _tail_j(s):
    return s["dynamic_energy_by_task_j"]["radio_tail"]["network"]


@pytest.mark.parametrize("tokens", [128, 384])
def test_radio_tail_is_charged_per_session(tokens):
    """Cloud AR of N tokens, sessions of S = 512 tokens: the tail after the last message and the
    promotion that opened the session are charged N / S times instead of once, so the tail energy
    differs from the one-session run (S = 0) by exactly tail_s x P_tail x (1 - N / S) (LTE: 11.576 s
    x 1.060 W) and the promotion energy by T_pro x P_pro x (1 - N / S) (0.2601 s x 1.2107 W);
    everything else is the same run. Per token they no longer depend on the run's length."""
    base = ["run.mode=cloud_autoregressive", f"run.generated_tokens={tokens}"]
    per = _run(*base, "network.radio_session_tokens=512")
    one = _run(*base, "network.radio_session_tokens=0")
    assert per["makespan_s"] == one["makespan_s"] and per["radio_sessions"] == pytest.approx(tokens / 512)
    assert one["radio_sessions"] == 1.0
    assert _tail_j(one) - _tail_j(per) == pytest.approx(11.576 * 1.060 * (1 - tokens / 512), rel=1e-9)
    promo = one["dynamic_energy_by_task_j"]["radio_promotion"]["network"] - \
        per["dynamic_energy_by_task_j"]["radio_promotion"]["network"]
    assert promo == pytest.approx(0.2601 * 1.2107 * (1 - tokens / 512), rel=1e-9)
    assert one["energy_j"] - per["energy_j"] == pytest.approx((11.576 * 1.060 + 0.2601 * 1.2107) * (1 - tokens / 512),
                                                              rel=1e-9)


def test_energy_per_token_does_not_depend_on_run_length():
    """With the tail charged per session, cloud AR's phone energy per token at 256 and 512 tokens
    agrees within 2% (it differed by about 2x when each run paid one whole tail; what is left is the
    phone's static power during the one promotion wait each run has)."""
    a = _run("run.mode=cloud_autoregressive", "run.generated_tokens=256")["device_energy_per_token_j"]
    b = _run("run.mode=cloud_autoregressive", "run.generated_tokens=512")["device_energy_per_token_j"]
    assert a == pytest.approx(b, rel=0.02)
    a0 = _run("run.mode=cloud_autoregressive", "run.generated_tokens=256", "network.radio_session_tokens=0")
    assert a0["device_energy_per_token_j"] > 1.5 * a


def test_cloud_speculation_alone_is_one_continuous_stream():
    """hybrid restricted to cloud_sd has nothing to decide: one request, one stream (no sessions whose
    renewal idles the GPU for a round trip): its TPOT at 200 ms RTT is within the first token's
    extra round trip of the 5 ms one (the old 32-token sessions took 7.2 ms against 3.0)."""
    near = _run("hyco.options=[cloud_sd]", "network.rtt_ms=5", "run.generated_tokens=256")
    far = _run("hyco.options=[cloud_sd]", "network.rtt_ms=200", "run.generated_tokens=256")
    assert near["mode_stats"]["cloud_sessions"] == far["mode_stats"]["cloud_sessions"] == 1
    assert far["tpot_s"] - near["tpot_s"] <= (0.200 - 0.005) * 1.2 / 256


def test_large_target_preset_is_a_labelled_what_if_the_phone_cannot_hold():
    """hyco_large_target.yaml: a 12 GiB phone without PIM holds the 0.5B drafter, not the LLaMA2-13B
    target (device_only is refused with a one-line error naming memory.capacity_gib); the cloud
    modes run, and their acceptance (the trace's Qwen pair) is labelled a what-if; the shipped
    preset with the trace's own pair says measured."""
    from ahasd_sim.config.errors import ConfigError
    big = ROOT / "hw_configs" / "hyco_large_target.yaml"
    s = run_simulation(load_config(big, ["run.generated_tokens=64"])).summary
    assert s["acceptance_basis"].startswith("what-if") and "llama2-13b" in s["acceptance_basis"]
    with pytest.raises(ConfigError, match="memory.capacity_gib"):
        run_simulation(load_config(big, ["run.mode=device_only", "run.generated_tokens=64"]))
    s70 = run_simulation(load_config(big, ["run.target_model=llama2-70b", "run.mode=cloud_autoregressive",
                                           "run.generated_tokens=64"])).summary
    s13 = run_simulation(load_config(big, ["run.mode=cloud_autoregressive", "run.generated_tokens=64"])).summary
    assert s70["tpot_s"] > s13["tpot_s"]            # a 5x larger target streams slower from the same GPU
    assert _run("run.generated_tokens=64")["acceptance_basis"].startswith("measured")


def test_prompt_upload_and_cloud_prefill_delay_the_first_token_by_their_cost():
    """hyco.cloud_prefill: cloud AR's first request carries the prompt's P token ids (4 B each) and the
    cloud runs one forward over them before the first decode step. On a constant link without jitter
    the first token arrives later by exactly P x 4 B / 6 Mbit/s (upload) + the prefill forward's time
    from the cloud GPU model (LLaMA2-13B, P tokens, empty KV); the uplink carries 4 P more bytes."""
    from ahasd_sim.modes.mobile_cloud.engine import build_cloud_costs
    from ahasd_sim.simulation import build_window, load_run_windows
    from ahasd_sim.workload.models import get_model
    big = ROOT / "hw_configs" / "hyco_large_target.yaml"
    sets = ["run.mode=cloud_autoregressive", "run.generated_tokens=32", "network.jitter_ms=0"]
    cfg = load_config(big, sets)
    off = run_simulation(cfg).summary
    on = run_simulation(load_config(big, [*sets, "hyco.cloud_prefill=true"])).summary
    w = build_window(cfg, load_run_windows(cfg)[0][1])
    prompt = int(w.mode.replay.kv_len_at(0))
    assert prompt > 0
    cc = build_cloud_costs(cfg, get_model(cfg.run.draft_model), get_model(cfg.run.target_model))
    want = prompt * 4 / (cfg.network.uplink_mbps * 1e6 / 8) + cc.gpu_verify(prompt, 0).duration_s
    assert on["ttft_s"] - off["ttft_s"] == pytest.approx(want, rel=1e-9)
    assert on["uplink_bytes"] - off["uplink_bytes"] == 4 * prompt
    assert on["cloud_calls"] == off["cloud_calls"]            # the prefill starts the same request
