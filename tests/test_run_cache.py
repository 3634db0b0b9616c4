"""Sweep points are keyed on what decides a result: the resolved config, the trace, the seed, the
models' shapes and the code a run executes (the modules it imports), so an edit to a module no run
imports keeps every finished point; ``--recompute`` forces them; ``prune`` lists (and with
``--delete`` removes) point folders that no point of the current spec and code references."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SWEEP = """name: cache_test
base:
  config: {cfg}
  set:
    run.trace: traces/qwc-0.5b-1.5b_greedy_smoke.npz
    run.generated_tokens: 16
    run.windows: 1
    run.timeline: false
    pim.partition_policy: striped
modes: [async, ahasd]
"""


@pytest.fixture()
def tree(tmp_path):
    """A private copy of the package (its data folders linked), which the test may edit."""
    root = tmp_path / "tree"
    shutil.copytree(ROOT / "ahasd_sim", root / "ahasd_sim",
                    ignore=shutil.ignore_patterns("__pycache__", "_data"))
    for d in ("hw_configs", "traces"):
        (root / d).symlink_to(ROOT / d)
    (tmp_path / "sweep.yaml").write_text(SWEEP.format(cfg=ROOT / "hw_configs" / "ahasd_mobile.yaml"))
    return root


def _sweep(tree: Path, tmp_path: Path, *extra: str) -> tuple[int, int]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    r = subprocess.run([sys.executable, "-m", "ahasd_sim", "sweep", "--config", str(tmp_path / "sweep.yaml"),
                        "--out", str(tmp_path / "sw"), "--workers", "1", "--no-progress", *extra],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    m = re.search(r"computed (\d+), reused (\d+)", r.stdout)
    assert m, r.stdout
    return int(m.group(1)), int(m.group(2))


def _prune(tree: Path, tmp_path: Path, *extra: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    r = subprocess.run([sys.executable, "-m", "ahasd_sim", "prune", str(tmp_path / "sw"), *extra],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_unimported_edits_keep_points_and_imported_edits_recompute_them(tree, tmp_path):
    assert _sweep(tree, tmp_path) == (2, 0)
    # a new policy file not registered yet, and an edit of the timeline plot: no run imports them
    (tree / "ahasd_sim" / "policies" / "my_new_policy.py").write_text('"""not registered yet"""\nX = 1\n')
    with open(tree / "ahasd_sim" / "plots" / "timeline.py", "a") as fh:
        fh.write("\n# an edit\n")
    with open(tree / "ahasd_sim" / "sweep" / "runner.py", "a") as fh:     # the scheduler, not a run
        fh.write("\n# an edit\n")
    assert _sweep(tree, tmp_path) == (0, 2)
    assert "0 of 2 point folders" in _prune(tree, tmp_path)
    # --recompute: every point again, into the same folders
    assert _sweep(tree, tmp_path, "--recompute") == (2, 0)
    # causality: an edit of a module a run imports (the NPU model) recomputes every point
    with open(tree / "ahasd_sim" / "hw" / "npu.py", "a") as fh:
        fh.write("\n# an edit\n")
    assert _sweep(tree, tmp_path) == (2, 0)
    points = tmp_path / "sw" / "points"
    assert len(list(points.iterdir())) == 4
    out = _prune(tree, tmp_path)                          # a dry run by default
    assert "2 of 4 point folders" in out and out.count("would delete") == 2
    assert len(list(points.iterdir())) == 4
    _prune(tree, tmp_path, "--delete")
    assert len(list(points.iterdir())) == 2
    assert _sweep(tree, tmp_path) == (0, 2)              # the current points were kept


def test_run_modules_follow_imports_and_string_registries():
    from ahasd_sim.output import run_modules
    rel = {f.relative_to(ROOT / "ahasd_sim").as_posix() for f in run_modules()}
    assert {"simulation.py", "hw/npu.py", "modes/__init__.py", "policies/__init__.py", "config/run.py",
            "workload/models.py", "sweep/worker.py"} <= rel
    assert not rel & {"__main__.py", "plots/timeline.py", "sweep/runner.py", "dse/optimize.py"}


def test_a_model_file_edit_changes_the_identity(tmp_path):
    """A model named by path: its shape is part of the run's identity (its name stays)."""
    from ahasd_sim.config.loader import load_config
    from ahasd_sim.output import run_identity_hash
    f = tmp_path / "m.yaml"
    text = (ROOT / "hw_configs" / "models" / "llama2-13b.yaml").read_text().replace("name: llama2-13b", "name: m")
    f.write_text(text)
    cfg = ROOT / "hw_configs" / "ahasd_mobile.yaml"
    a = run_identity_hash(load_config(cfg, [f"run.target_model={f}"]))
    f.write_text(text.replace("n_layers: 40", "n_layers: 41"))
    os.utime(f, ns=(1, 1))                           # a new mtime whatever the clock's resolution
    assert run_identity_hash(load_config(cfg, [f"run.target_model={f}"])) != a
