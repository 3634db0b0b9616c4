"""A non-editable ``pip install .`` into a fresh virtual environment, used from another folder: the
default job, a compare, a reproduction smoke run, a plot and a study all run from the installed
copy (its shipped configs, traces and scripts), with no checkout on the path.

The fresh environment reaches this environment's dependencies (numpy, simpy, ...) through a .pth
file, so nothing is downloaded; the package itself is built and installed from a copy of the
source tree. About a minute on two cores, the reproduction smoke run most of it.
"""
from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("ahasd_sim", "hw_configs", "traces", "validation", "scripts", "setup.py", "pyproject.toml",
           "README.md", "MANIFEST.in", "LICENSE")


def _dependency_dirs() -> list[str]:
    import matplotlib
    import numpy
    import pandas
    import setuptools
    import simpy
    import yaml
    dirs = {str(Path(m.__file__).resolve().parent.parent) for m in (numpy, pandas, matplotlib, simpy, yaml, setuptools)}
    dirs.update(p for p in site.getsitepackages() + [site.getusersitepackages()] if Path(p).is_dir())
    return sorted(dirs)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "_data", "*.egg-info")
    for name in SOURCES:
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=ignore)
        elif p.is_file():
            shutil.copy2(p, src / name)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "_parent_dependencies.pth").write_text("\n".join(_dependency_dirs()) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                        "--no-build-isolation", "--no-index", str(src)], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    shutil.rmtree(src)                      # nothing of the source tree is left to lean on
    work = tmp / "work"
    work.mkdir()
    exe = venv / ("Scripts/ahasd-sim.exe" if os.name == "nt" else "bin/ahasd-sim")
    return {"py": py, "exe": exe, "work": work, "env": env, "purelib": purelib}


def _run(inst, *args, timeout=300):
    r = subprocess.run([str(inst["exe"]), *args], cwd=inst["work"], env=inst["env"], capture_output=True,
                       text=True, timeout=timeout)
    assert r.returncode == 0, f"{args}: {r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r.stdout


SHORT = ["--set", "run.generated_tokens=48", "--set", "run.windows=1"]


def test_the_installed_copy_is_used(installed):
    r = subprocess.run([str(installed["py"]), "-c", "import ahasd_sim, ahasd_sim.paths as p; "
                        "print(ahasd_sim.__file__); print(p.data_roots())"],
                       cwd=installed["work"], env=installed["env"], capture_output=True, text=True, check=True)
    assert r.stdout.splitlines()[0].startswith(installed["purelib"])
    assert "_data" in r.stdout.splitlines()[1] and str(ROOT) not in r.stdout


def test_default_job_compare_plot(installed):
    out = _run(installed, "--config", "hw_configs/ahasd_mobile.yaml", *SHORT, "--out", "run")
    assert "throughput" in out
    assert json.loads((installed["work"] / "run" / "summary.json").read_text())["generated_tokens"] == 48
    out = _run(installed, "compare", "--config", "hw_configs/ahasd_mobile.yaml", "--modes", "async,ahasd",
               *SHORT, "--out", "cmp")
    assert (installed["work"] / "cmp" / "compare.csv").is_file()
    _run(installed, "plot", "timeline", "run", "--out", "timeline")
    assert (installed["work"] / "timeline.png").is_file()
    # a model file in the user's folder runs by name
    models = installed["work"] / "hw_configs" / "models"
    models.mkdir(parents=True)
    (models / "mine.yaml").write_text("n_layers: 20\nd_model: 4096\nn_heads: 32\nn_kv_heads: 32\nhead_dim: 128\n"
                                      "d_ffn: 11008\nffn_type: swiglu\nnorm_type: rmsnorm\nvocab_size: 32000\n"
                                      "tied_embeddings: false\n")
    _run(installed, "--config", "hw_configs/ahasd_mobile.yaml", *SHORT, "--set", "run.target_model=mine",
         "--set", "run.draft_model=llama3.2-1b", "--out", "mine")


def test_reproduction_smoke_and_a_study(installed):
    out = _run(installed, "reproduce", "--smoke", "--workers", "2", "--no-progress", "--out", "paper", timeout=600)
    assert (installed["work"] / "paper" / "report.md").is_file(), out
    _run(installed, "hyco-study", "--windows", "2", "--tokens", "16", "--workers", "2", "--out", "hyco",
         "--figure", "hyco.png", timeout=600)
    assert (installed["work"] / "hyco" / "windows.csv").is_file()
    assert (installed["work"] / "hyco.png").is_file()
