"""Where shipped data lives: in a checkout, or inside the installed package.

The repository keeps ``hw_configs/``, ``traces/`` and ``validation/`` at its top level. A
non-editable install (``pip install .``) copies them into ``ahasd_sim/_data/`` (see
``setup.py``), so the same relative names (``hw_configs/ahasd_mobile.yaml``,
``traces/qwc-0.5b-1.5b_greedy.npz``) work from any directory.
"""
from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
INSTALLED_DATA = PACKAGE_DIR / "_data"
DATA_DIRS = ("hw_configs", "traces", "validation")


def data_roots() -> list[Path]:
    """Folders that may hold ``hw_configs/``, ``traces/``, ``validation/``: the checkout
    (when this package runs from one), then the installed copy."""
    roots = []
    if any((REPO_ROOT / d).is_dir() for d in DATA_DIRS):
        roots.append(REPO_ROOT)
    if INSTALLED_DATA.is_dir():
        roots.append(INSTALLED_DATA)
    return roots


def shipped(relative: str | Path) -> Path | None:
    """The shipped file ``relative`` (e.g. ``hw_configs/ahasd_mobile.yaml``), or None."""
    rel = Path(relative)
    if rel.is_absolute():
        return None
    for root in data_roots():
        p = root / rel
        if p.exists():
            return p
    return None


def data_file(relative: str | Path) -> Path:
    """The one lookup of a file or folder the package ships (``validation/peers``,
    ``hw_configs/paper/reproduce.yaml``): the checkout's copy, else the installed ``_data`` copy;
    where neither exists, the checkout path (so an error names the expected place)."""
    return shipped(relative) or (data_roots() or [REPO_ROOT])[0] / relative


def resolve_data_path(path: str | Path, config_file: str | None = None) -> Path:
    """Find a data file: as given (cwd), then next to the config, then among the shipped data.
    Returns ``path`` unchanged when nothing exists (the caller reports it)."""
    p = Path(path)
    candidates = [p]
    if not p.is_absolute():
        if config_file:
            candidates.append(Path(config_file).resolve().parent / p)
        candidates.extend(root / p for root in data_roots())
    for c in candidates:
        if c.is_file():
            return c
    return p


def resolve_input_file(path: str | Path, option: str = "--config") -> Path:
    """A file named on the command line (by ``option``): as given, else the shipped copy of that
    relative name. An empty name is refused (``Path('')`` would be the current folder)."""
    if not str(path).strip():
        from .errors import InputError
        raise InputError(f"{option}: expected a file name, got an empty string")
    p = Path(path)
    if p.exists() or p.is_absolute():
        return p
    return shipped(p) or p


#: YAML files under hw_configs/ that are neither configs nor sweeps: the paper's experiment
#: definition (``ahasd_sim.paper.experiments``)
EXPERIMENT_FILES = ("hw_configs/paper/experiments.yaml",)
EXPERIMENTS_KEY = "experiment definitions (scripts/reproduce_paper.py --experiments)"


def shipped_files() -> dict[str, list[str]]:
    """Shipped configs, sweep/study files, traces and validation data, as relative names."""
    out: dict[str, list[str]] = {"configs": [], "model files (docs/models.md)": [], "sweeps and studies": [],
                                 "SoC presets (validate --mobile)": [],
                                 EXPERIMENTS_KEY: [], "traces": [], "validation data": []}
    seen: set[str] = set()
    for root in data_roots():
        for f in sorted((root / "hw_configs").rglob("*.yaml")):
            rel = f.relative_to(root).as_posix()
            if rel in seen:
                continue
            seen.add(rel)
            parent = f.parent.name
            key = ("configs" if parent == "hw_configs" else "model files (docs/models.md)" if parent == "models"
                   else "SoC presets (validate --mobile)" if parent == "soc"
                   else EXPERIMENTS_KEY if rel in EXPERIMENT_FILES else "sweeps and studies")
            out[key].append(rel)
        for sub, key, pat in (("traces", "traces", "*.npz"), ("validation", "validation data", "*.csv"),
                              ("validation/mobile", "validation data", "*.csv")):
            for f in sorted((root / sub).glob(pat)):
                rel = f.relative_to(root).as_posix()
                if rel not in seen:
                    seen.add(rel)
                    out[key].append(rel)
    return out
