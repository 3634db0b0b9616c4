"""The ``run`` section: what to simulate (mode, policy, models, trace, length, seed)."""
from __future__ import annotations

from dataclasses import dataclass

from .fields import param
from .registry import config_section


@config_section("run")
@dataclass
class RunConfig:
    """What one simulation run does."""

    mode: str = param("ahasd", doc="execution mode (registry name, see `python -m ahasd_sim list`)")
    policy: str = param("adaedl", doc="adaptive drafting policy (registry name)")
    draft_model: str = param("llama2-7b", doc="drafter (DLM) model shape, registry name")
    target_model: str = param("llama2-13b", doc="target (TLM) model shape, registry name")
    drafter: str = param("auto", doc="drafter kind: model (the standalone run.draft_model), head (an EAGLE-style "
                         "draft head on the target's features), lookup (prompt/n-gram lookup, no forward), "
                         "auto (the mode's default for the policy)", choices=("auto", "model", "head", "lookup"))
    trace: str = param("traces/qwc-0.5b-1.5b_greedy.npz",
                       doc="token-level trace file (relative paths: to the current directory, then to the repository)")
    generated_tokens: int = param(1024, doc="tokens to commit (concatenating trace prompts in order)", ge=1,
                                  source="AHASD paper, section 8: 1024 generated tokens")
    trace_start_prompt: int = param(0, doc="index of the first trace prompt replayed when run.windows is 1",
                                    ge=0)
    windows: int = param(0, doc="trace windows replayed, each of generated_tokens tokens starting at a prompt "
                         "boundary, disjoint, spread evenly over the trace's prompts; one window is one sample "
                         "of the reported ratios of totals and their bootstrap 95% CIs. 0 = as many disjoint "
                         "windows as the trace holds; more than fit is an error. 1 = one window at "
                         "trace_start_prompt", ge=0, source="GUIDE statistics: one trace window is one sample")
    kv_len_quantum_tokens: int = param(16, doc="KV lengths are rounded up to a multiple of this before costing "
                                       "(cost caching; attention cost error < quantum/KV length)", unit="tokens", ge=1)
    prefill: bool = param(True, doc="charge each prompt's prefill (target and drafter over its prompt tokens, "
                          "on the host that runs it); throughput_tok_s excludes it (decode only), "
                          "throughput_e2e_tok_s includes it")
    seed: int = param(0, doc="seed of the run's private RNG (sampling replay, calibration noise)", ge=0,
                      le=2 ** 63 - 1, bound_reason="a seed is a 64-bit integer")
    max_sim_time_s: float = param(36000.0, doc="safety limit on simulated time", unit="s", gt=0)
    timeline: bool = param(True, doc="write a Chrome/Perfetto timeline.json of device busy intervals")
