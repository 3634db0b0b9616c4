"""The Python API in one page: load a config with overrides, run, compare modes, sweep.

    python examples/api_example.py [OUT_DIR]

Runs in about half a minute on two cores (short runs: 96 tokens, 2 trace windows). CI runs it
(tests/test_api.py) and checks its output against the command line's.
"""
import sys
import tempfile
from pathlib import Path

from ahasd_sim import api

out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="ahasd-api-"))
short = {"run.generated_tokens": 96, "run.windows": 2, "run.timeline": False}

# 1. one run: typed headline metrics, the summary by dotted key, per-window DataFrame
cfg = api.load_config("hw_configs/ahasd_mobile.yaml", short)
res = api.run(cfg, out=out / "run")
ci = res.throughput_tok_s_ci95      # None below 5 windows: too few for a bootstrap interval
ci_text = f"95% CI [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "no CI: 2 windows, n<5"
print(f"run: {res.mode}/{res.policy} throughput {res.throughput_tok_s:.2f} tok/s "
      f"({ci_text}), {res.tokens_per_j:.2f} tok/J, "
      f"NPU utilisation {res['device_utilization.npu']:.0%}")
unit, meaning = api.describe("tokens_per_j")[1:]
print(f"tokens_per_j is in {unit}: {meaning}")

# 2. the same config with an override: a typed value, not a string
fixed = api.run(cfg, {"run.policy": "fixed", "policy.fixed.k": 6})
print(f"fixed drafts of 6 tokens: {fixed.throughput_tok_s:.2f} tok/s")
print(api.results_frame([res, fixed])[["mode", "policy", "throughput_tok_s", "energy_j"]].to_string(index=False))

# 3. compare modes on the same trace windows: a DataFrame
table = api.compare(cfg, ["async", "ahasd"], out=out / "compare")
print(table[["mode", "throughput_tok_s", "tokens_per_j", "throughput_vs_best"]].to_string(index=False))

# 4. a sweep (resumable: run it again and every point is reused)
spec = out / "sweep.yaml"
spec.write_text(f"""name: api_example
base:
  config: {Path(cfg.source_file).resolve()}
  set: {{run.generated_tokens: 48, run.windows: 1, run.timeline: false}}
modes: [async, ahasd]
""")
sw = api.sweep(spec, out / "sweep", workers=1)
print(sw.table[["run.mode", "status", "throughput_tok_s"]].to_string(index=False))
