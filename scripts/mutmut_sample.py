"""Pick mutants for a mutmut run that cannot test them all, and score what was tested.

mutmut (the ``dev`` extra) keeps every mutant's result in ``mutants/<source>.meta`` once
``mutmut run`` has generated them. On a slow or shared machine a module of several hundred
mutants can take hours at one child; this script prints a seeded uniform random sample of a
module's mutants (optionally only those not yet tested, plus every survivor so far), to pass
to ``mutmut run`` by name, and summarises the results per module.

    python scripts/mutmut_sample.py pick ahasd_sim/modes/base.py --n 100 --seed 19 --untested
    nice -n 15 mutmut run --max-children 1 $(python scripts/mutmut_sample.py pick ...)
    python scripts/mutmut_sample.py score ahasd_sim/modes/base.py ahasd_sim/modes/soc/ahasd.py

A uniform sample's kill rate estimates the module's; ``score`` prints it with a 95% Wilson
interval over the tested mutants (a sample of 100 at ~90% killed is +/- ~6 points).
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

# mutmut's exit codes (mutmut/stats.py): 0 survived; 1, 3 killed by a failing test; -24, 24, 36,
# 152, 255 timeout and -9, -11 crash (both count as detected); 5, 33 no tests; 34 skipped; 2
# interrupted and 35 suspicious (neither a verdict: counted as untested).
SURVIVED = 0
NO_TESTS = (5, 33)
NOT_A_VERDICT = (None, 2, 34, 35)


def _results(source: str, root: Path) -> dict[str, int | None]:
    meta = root / "mutants" / (source + ".meta")
    if not meta.exists():
        sys.exit(f"{meta}: no mutmut results; run `mutmut run` once to generate the mutants")
    for attempt in range(20):          # mutmut rewrites the file while it runs: retry a torn read
        try:
            return json.loads(meta.read_text())["exit_code_by_key"]
        except json.JSONDecodeError:
            if attempt == 19:
                raise
            time.sleep(0.25)
    raise AssertionError("unreachable")


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion k / n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return c - h, c + h


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    pk = sub.add_parser("pick", help="print a seeded random sample of mutant names")
    pk.add_argument("sources", nargs="+", help="source files, e.g. ahasd_sim/modes/base.py")
    pk.add_argument("--n", type=int, required=True, help="mutants per source file")
    pk.add_argument("--seed", type=int, default=19)
    pk.add_argument("--untested", action="store_true", help="sample only mutants without a result")
    pk.add_argument("--survivors", action="store_true", help="also print every survivor so far")
    sc = sub.add_parser("score", help="killed / survived / untested per source file")
    sc.add_argument("sources", nargs="+")
    ap.add_argument("--root", type=Path, default=Path("."), help="project root holding mutants/")
    a = ap.parse_args(argv)
    if a.cmd == "pick":
        for src in a.sources:
            res = _results(src, a.root)
            pool = sorted(k for k, v in res.items() if v in NOT_A_VERDICT or not a.untested)
            rng = random.Random(f"{a.seed}:{src}")
            names = rng.sample(pool, min(a.n, len(pool)))
            if a.survivors:
                names += sorted(k for k, v in res.items() if v == SURVIVED and k not in names)
            print("\n".join(names))
        return 0
    for src in a.sources:
        res = _results(src, a.root)
        vals = list(res.values())
        tested = [v for v in vals if v not in NOT_A_VERDICT and v not in NO_TESTS]
        survived = sum(v == SURVIVED for v in tested)
        killed = len(tested) - survived
        lo, hi = wilson(killed, len(tested))
        print(f"{src}: {len(vals)} mutants, {len(tested)} tested: {killed} killed, {survived} survived, "
              f"{sum(v in NO_TESTS for v in vals)} without tests, {sum(v in NOT_A_VERDICT for v in vals)} untested; "
              f"killed {100 * killed / max(1, len(tested)):.1f}% (95% CI {100 * lo:.1f}-{100 * hi:.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
