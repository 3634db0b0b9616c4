"""Build step that ships the top-level data folders inside the package.

``hw_configs/``, ``traces/`` and ``validation/`` stay at the repository's top level (that is
where users and scripts look for them in a checkout); a regular (non-editable) build copies
them to ``ahasd_sim/_data/`` so an installed copy finds them from any directory
(``ahasd_sim.paths``). Everything else is in pyproject.toml.
"""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
DATA_DIRS = ("hw_configs", "traces", "validation", "scripts")   # scripts: the tools (ahasd_sim.tools)
DATA_SUFFIXES = {".yaml", ".yml", ".npz", ".json", ".csv", ".md", ".py"}


class build_py_with_data(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return   # an editable install reads the checkout's folders directly
        dest_root = Path(self.build_lib) / "ahasd_sim" / "_data"
        for name in DATA_DIRS:
            src = ROOT / name
            if not src.is_dir():
                continue
            for f in src.rglob("*"):
                if f.is_file() and f.suffix in DATA_SUFFIXES and "__pycache__" not in f.parts:
                    dest = dest_root / f.relative_to(ROOT)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(f, dest)


setup(cmdclass={"build_py": build_py_with_data})
