#!/usr/bin/env python3
"""Thin wrapper kept for old command lines: the recorder lives in the package.

  python -m ahasd_sim traces record --kind chain ...   (same options as this script)
  python -m ahasd_sim traces record --kind tree ...    (draft-tree traces, MoE routing)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ahasd_sim.traces.record.chain import *  # noqa: E402,F401,F403  (re-exported for old imports)
from ahasd_sim.traces.record.chain import EOS_IDS, main  # noqa: E402,F401

if __name__ == "__main__":
    main()
