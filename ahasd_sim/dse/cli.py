"""Options of ``optimize`` and ``sensitivity`` (their parsers are made by ``ahasd_sim.__main__``)."""
from __future__ import annotations

from ..cli_common import out_path, positive_int


def _common(p) -> None:
    p.add_argument("--config", required=True, metavar="STUDY.yaml",
                   help="study file (e.g. hw_configs/studies/where_ahasd_wins.yaml; see docs/dse.md)")
    p.add_argument("--workers", type=positive_int, default=None, metavar="N",
                   help="parallel simulations (default: all cores; 1 runs in-process)")
    p.add_argument("--executor", choices=("local", "dask"), default="local",
                   help="local process pool (default) or Dask distributed (pip install 'ahasd_sim[dask]')")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="Dask scheduler address, e.g. tcp://host:8786 (only with --executor dask)")
    p.add_argument("--out", default=None, type=out_path, metavar="DIR",
                   help="study folder (default: studies/<name>); a folder of a different study is refused")
    p.add_argument("--no-progress", action="store_true", help="no progress display")
    p.add_argument("--debug", action="store_true", help="show Python tracebacks instead of one-line errors")


def optimize_arguments(p) -> None:
    _common(p)
    p.add_argument("--trials", type=positive_int, default=None, metavar="N",
                   help="finished trials the study holds when the command ends (default: 'trials:' of the study); "
                        "a larger N extends a finished study")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--reproducible", dest="fastest", action="store_false", default=False,
                   help="(default) lock-step batches: a seeded study gives the same trials.csv whatever the "
                        "workers, timing or interruptions")
    g.add_argument("--fastest", dest="fastest", action="store_true",
                   help="pipelined batches, each trial told as soon as it ends: no idle workers, but the "
                        "trials depend on timing (not reproducible)")
    p.add_argument("--seeds", default=None, metavar="S1,S2,...",
                   help="run the study once per search seed (instead of the study's seed), each in "
                        "<out>/seed-<S>/ sharing <out>/points/; <out>/seeds.csv compares their fronts")


def sensitivity_arguments(p) -> None:
    _common(p)
    p.add_argument("--sobol-samples", type=int, default=None, metavar="N",
                   help="Sobol budget, a hard cap: at most N Saltelli blocks (a power of two), i.e. N x (D + 2) "
                        "design points for D parameters, each simulated once per run and trace window of the study "
                        "(N x (D + 2) x runs x windows simulations); with sensitivity.sobol_tolerance the sample "
                        "starts at sensitivity.sobol_samples and doubles while an index moves, never past N, and "
                        "the report says whether it converged; 0 = no Sobol indices; default: "
                        "sensitivity.sobol_max_samples of the study")
