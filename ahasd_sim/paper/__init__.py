"""The AHASD paper's experiments on this simulator, above the generic sweep engine.

The experiment is data, ``hw_configs/paper/experiments.yaml`` (which sweep variants form the
ablation ladders and the baselines, the report's labels, the paper's reported numbers), read and
checked by :mod:`.experiments`; the sweeps are ``hw_configs/paper/reproduce.yaml`` and
``regimes.yaml``. :mod:`.sweeps` prepares them for a run, :mod:`.report` (tables, markdown) and
:mod:`.figures` compute everything from their result files. ``scripts/reproduce_paper.py`` is
the command line.
"""
