"""Result fingerprint: a hash of the outputs of a fixed set of small reference runs (docs/testing.md).

It changes exactly when the simulator's results change: every execution-mode family, every
pre-verification KV option, the EDC-stop options, placement tuning, the GPU, MoE-offload and
mobile-cloud paths, each on a few short trace windows. A generated doc block that is too slow to
regenerate in CI (the paper reproduction, the studies) records the fingerprint it was made at;
``python scripts/docs.py --check`` fails when that is not the current one.

Numbers are rounded to 9 significant digits before hashing, so that a last-bit difference of a
floating-point reduction between CPUs does not change the fingerprint while any modelling change
does. ``python scripts/docs.py --fingerprint`` prints it; :data:`CASES` lists the runs.
"""
from __future__ import annotations

import hashlib
import json
import math
from typing import Any

#: the reference runs: name -> (shipped config, overrides); short on purpose (a few seconds in all)
_SHORT = ["run.generated_tokens=96", "run.windows=2", "run.timeline=false", "tuning.generated_tokens=48"]
CASES: dict[str, tuple[str, list[str]]] = {
    "ahasd": ("hw_configs/ahasd_mobile.yaml", []),
    "ahasd_recompute": ("hw_configs/ahasd_mobile.yaml", ["ahasd.preverify_kv=recompute"]),
    "ahasd_wait": ("hw_configs/ahasd_mobile.yaml", ["ahasd.preverify_kv=wait"]),
    "ahasd_edc_idle": ("hw_configs/ahasd_mobile.yaml", ["ahasd.edc_stop=idle_until_feedback"]),
    "ahasd_no_tvc_striped": ("hw_configs/ahasd_mobile.yaml", ["ahasd.tvc=false", "pim.partition_policy=striped"]),
    "async": ("hw_configs/ahasd_mobile.yaml", ["run.mode=async"]),
    "operator_sync": ("hw_configs/ahasd_mobile.yaml", ["run.mode=operator_sync"]),
    "autoregressive_pim": ("hw_configs/ahasd_mobile.yaml", ["run.mode=autoregressive", "baseline.device=pim"]),
    "autoregressive_npu": ("hw_configs/ahasd_mobile.yaml", ["run.mode=autoregressive", "baseline.device=npu"]),
    "gpu_only": ("hw_configs/platform_laptop_rtx4090.yaml", ["run.mode=gpu_only"]),
    "specpim_gpu": ("hw_configs/platform_specpim_gpu_pim.yaml", ["run.mode=operator_sync"]),
    "moe_specfit": ("hw_configs/moe_offload.yaml", ["run.windows=1"]),
    "hybrid": ("hw_configs/hyco_mobile_cloud.yaml", ["run.windows=1"]),
}


def _canon(x: Any) -> Any:
    """JSON-able value with floats rounded to 9 significant digits."""
    if isinstance(x, bool) or x is None or isinstance(x, (str, int)):
        return x
    if isinstance(x, float):
        if math.isnan(x) or math.isinf(x):
            return repr(x)
        return float(f"{x:.9g}")
    if isinstance(x, dict):
        return {str(k): _canon(v) for k, v in sorted(x.items(), key=lambda kv: str(kv[0]))}
    if isinstance(x, (list, tuple)):
        return [_canon(v) for v in x]
    if hasattr(x, "item"):            # numpy scalar
        return _canon(x.item())
    return repr(x)


#: summary entries that are not results (paths, hashes of inputs, timings, the version string: a
#: version bump alone does not make the stamped documents stale)
_NOT_RESULTS = ("trace", "trace_sha256", "config_file", "source_file", "ahasd_sim_version")


def case_digest(summary: dict, windows) -> str:
    s = {k: v for k, v in summary.items() if k not in _NOT_RESULTS}
    rows = windows.to_dict(orient="records") if windows is not None else []
    text = json.dumps({"summary": _canon(s), "windows": _canon(rows)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def compute(cases: list[str] | None = None) -> tuple[str, dict[str, str]]:
    """(fingerprint, per-case digests) of the reference runs at this code."""
    from .config import load_config
    from .paths import shipped
    from .simulation import run_simulation
    digests = {}
    for name in cases or list(CASES):
        cfg_file, overrides = CASES[name]
        cfg = load_config(shipped(cfg_file), [*_SHORT, *overrides])
        res = run_simulation(cfg)
        digests[name] = case_digest(res.summary, res.windows)
    h = hashlib.sha256(json.dumps(digests, sort_keys=True).encode()).hexdigest()[:16]
    return h, digests
