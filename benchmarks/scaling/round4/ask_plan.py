"""Issue 30, round 4: the parent's cost per trial of a study, without simulating
(python3 ask_plan.py).

Opens a fresh study folder of hw_configs/studies/where_ahasd_wins.yaml with the checkout this
file is in, asks five NSGA-II generations of 40 trials as run_optimize does (reseeded per trial),
plans each (its four configs and identity hashes), tells each generation made-up values, and
prints the mean time per trial of each step and a digest of the asked parameters (the same
trials before and after a change)."""
import hashlib
import inspect
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
from ahasd_sim.dse import optimize as OPT  # noqa: E402
from ahasd_sim.dse.evaluate import plan  # noqa: E402
from ahasd_sim.dse.study import load_study  # noqa: E402

study = load_study(ROOT / "hw_configs/studies/where_ahasd_wins.yaml")
out = Path(tempfile.mkdtemp()) / "s"
# as run_optimize opens it (the storage it reads through, where that option exists)
owned = {"owned": True} if "owned" in inspect.signature(OPT.open_study_and_storage).parameters else {}
ostudy, _ = OPT.open_study_and_storage(study, out, **owned)
dists = OPT.distributions(study)
ask_s = plan_s = tell_s = 0.0
asked = []
for gen in range(5):
    numbers = []
    for _ in range(40):
        t0 = time.perf_counter()
        OPT.reseed_for_trial(ostudy.sampler, study.seed, len(asked))
        trial = ostudy.ask(dists)
        ask_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        plan(study, trial.number, dict(trial.params))
        plan_s += time.perf_counter() - t0
        numbers.append(trial.number)
        asked.append((trial.number, sorted(trial.params.items())))
    t0 = time.perf_counter()
    for n in numbers:
        ostudy.tell(n, [float(n % 7), float(n % 5)], skip_if_finished=True)
    tell_s += time.perf_counter() - t0
n = len(asked)
print(f"{ROOT.name}: per trial: ask {ask_s / n * 1e3:.1f} ms, plan {plan_s / n * 1e3:.1f} ms, tell "
      f"{tell_s / n * 1e3:.1f} ms ({n} trials); asked parameters: sha {hashlib.sha256(repr(asked).encode()).hexdigest()[:12]}")
