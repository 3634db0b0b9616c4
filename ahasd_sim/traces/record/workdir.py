"""The work folder every recorder resumes from: one shard per prompt (``shards/p0000.npz``),
and for the recorders that start a trace, the run's settings (``config.json``) and its prompts
(``prompts.json``), written on the first run and read back on every later one."""
from __future__ import annotations

import json
import os


def shard_path(work: str, i: int) -> str:
    """The shard of prompt ``i`` in ``work``."""
    return os.path.join(work, "shards", f"p{i:04d}.npz")


def prepare(work: str) -> tuple[str, str]:
    """Create ``work/shards`` (if missing); return the paths of ``config.json`` and ``prompts.json``."""
    os.makedirs(os.path.join(work, "shards"), exist_ok=True)
    return os.path.join(work, "config.json"), os.path.join(work, "prompts.json")


def saved_settings(work: str) -> tuple[dict, list] | None:
    """(settings, prompts) a previous run left in ``work``, or None for a new work folder."""
    cfg_path, prm_path = os.path.join(work, "config.json"), os.path.join(work, "prompts.json")
    if not os.path.exists(cfg_path):
        return None
    with open(cfg_path) as f:
        cfg = json.load(f)
    with open(prm_path) as f:
        prompts = json.load(f)
    return cfg, prompts
