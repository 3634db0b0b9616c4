"""Without the Linux-only primitives (no ``fcntl``, no ``renameat2``, no ``fork``: Windows), the
package still imports, locks output folders (the filelock package), replaces a run folder, and
runs the default job with its window pool (spawn) to the same summary.json, byte for byte."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: run before anything imports ahasd_sim: what Windows lacks, taken away
FAKE = r"""
import sys, ctypes, multiprocessing
sys.modules["fcntl"] = None                                  # import fcntl -> ImportError
def _no_cdll(name, *a, **k):
    if name is None:
        raise TypeError("expected str, bytes or os.PathLike object, not NoneType")   # as on Windows
    return _real_cdll(name, *a, **k)
_real_cdll = ctypes.CDLL
ctypes.CDLL = _no_cdll
_real_get_context = multiprocessing.get_context
def _get_context(method=None):
    if method == "fork":
        raise ValueError("cannot find context for 'fork'")
    return _real_get_context(method)
multiprocessing.get_context = _get_context
"""

ARGS = ["--config", "hw_configs/ahasd_mobile.yaml", "--set", "run.generated_tokens=128", "--set", "run.windows=2",
        "--quiet", "--jobs", "2"]


def _cli(code_before: str, argv: list[str], cwd: Path):
    code = code_before + f"\nfrom ahasd_sim.__main__ import main\nraise SystemExit(main({argv!r}))\n"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=600)


def test_default_job_without_fcntl_renameat2_or_fork(tmp_path):
    pytest.importorskip("filelock")
    ref = _cli("", [*ARGS, "--out", str(tmp_path / "ref")], tmp_path)
    assert ref.returncode == 0, ref.stderr
    faked = _cli(FAKE + "\nimport ahasd_sim.outdir as o, ahasd_sim.simulation as s\n"
                 "assert o.fcntl is None and not o._exchange(__import__('pathlib').Path('a'), "
                 "__import__('pathlib').Path('b')) and s._fork_context() is None\n",
                 [*ARGS, "--out", str(tmp_path / "win")], tmp_path)
    assert faked.returncode == 0, faked.stderr
    assert (tmp_path / "win" / "summary.json").read_bytes() == (tmp_path / "ref" / "summary.json").read_bytes()
    again = _cli(FAKE, [*ARGS, "--out", str(tmp_path / "win")], tmp_path)   # replaced without renameat2
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ref", "win"]   # no lock or staging left


def test_portable_lock_refuses_a_second_writer(tmp_path, monkeypatch):
    pytest.importorskip("filelock")
    from ahasd_sim import outdir
    from ahasd_sim.config.errors import OutputError
    monkeypatch.setattr(outdir, "fcntl", None)
    with outdir.lock_dir(tmp_path / "sw"):
        with pytest.raises(OutputError, match="in use by another ahasd_sim command"):
            with outdir.lock_dir(tmp_path / "sw"):
                pass
    assert not (tmp_path / "sw" / ".lock").exists()
    with outdir.lock_dir(tmp_path / "sw"):      # free again
        pass
