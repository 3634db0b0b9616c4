"""The ``run`` section: what to simulate (mode, policy, models, trace, length, seed)."""
from __future__ import annotations

from dataclasses import dataclass

from .fields import param
from .registry import config_section


#: the precisions of ahasd_sim/workload/precision.py (the config layer cannot import it;
#: tests/test_phone_capacity.py checks the two lists agree)
PRECISION_NAMES = ("w8a8", "w4a8", "w4a16", "w4afp16", "w8a16", "fp16")


@config_section("run")
@dataclass
class RunConfig:
    """What one simulation run does."""

    mode: str = param("ahasd", doc="execution mode (registry name, see `python -m ahasd_sim list`)")
    policy: str = param("adaedl", doc="adaptive drafting policy (registry name)")
    drafter: str = param("auto", doc="kind of drafter: model = a standalone draft model (run.draft_model); "
                         "head = an EAGLE-style head (fusion FC + one decoder layer of the target's shape + the "
                         "target's LM head), run where the mode drafts; lookup = model-free suffix match over the "
                         "generated tokens on the CPU (section lookup); auto = model on the mobile SoC (head for "
                         "EAGLE-family tree policies on the MoE path)",
                         choices=("auto", "model", "head", "lookup"),
                         source="EAGLE https://arxiv.org/abs/2401.15077; prompt lookup decoding "
                         "https://github.com/apoorvumang/prompt-lookup-decoding")
    draft_model: str = param("llama2-7b", doc="drafter (DLM) model shape (run.drafter model): a name in hw_configs/models/ or the path of a model file or config.json")
    target_model: str = param("llama2-13b", doc="target (TLM) model shape: a name in hw_configs/models/ or the path of a model file or config.json")
    precision: str = param("w8a8", doc="numeric precision of both models (workload/precision.py): byte widths "
                           "of weights, activations and KV; w8a8 = the AHASD paper's INT8; w4a8 = INT4 weights, "
                           "INT8 activations and KV; w4a16 = QNN's INT4 weights with 16-bit activations and KV; "
                           "w4afp16 widens INT4 weights to FP16 on the NPU's vector unit (its dequantisation ops "
                           "are charged); PIM runs the command sequence on the stored weight elements",
                           choices=PRECISION_NAMES,
                           source="workload/precision.py (Qualcomm AI Hub / QNN and ExecuTorch precisions); "
                           "w8a8: AHASD paper (INT8 throughout)")
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
                         "trace_start_prompt", ge=0, source="docs/modeling.md, Statistics: one window is one sample")
    extra_context_tokens: int = param(0, doc="tokens of context added before every prompt of the replayed trace "
                                      "(a long-context what-if: every KV length the run reads and every prefill "
                                      "grows by it; acceptance still comes from the trace)", ge=0,
                                      unit="tokens", source="what-if knob: the shipped traces' prompts are short "
                                      "(traces/PROVENANCE.md); phones run 4k-32k contexts (hardware-parameters notes)")
    kv_len_quantum_tokens: int = param(16, doc="KV lengths are rounded up to a multiple of this before costing "
                                       "(cost caching; attention cost error < quantum/KV length)", unit="tokens", ge=1)
    prefill: bool = param(True, doc="charge each prompt's prefill (target and drafter over its prompt tokens, "
                          "on the host that runs it); throughput_tok_s excludes it (decode only), "
                          "throughput_e2e_tok_s includes it")
    seed: int = param(0, doc="seed of the run's private RNG (sampling replay, calibration noise)", ge=0,
                      le=2 ** 63 - 1, bound_reason="a seed is a 64-bit integer")
    max_sim_time_s: float = param(36000.0, doc="safety limit on simulated time", unit="s", gt=0)
    timeline: bool = param(True, doc="write a Chrome/Perfetto timeline.json of device busy intervals")
