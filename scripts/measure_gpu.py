#!/usr/bin/env python3
"""Thin wrapper kept for old command lines: the measurement lives in the package.

  python -m ahasd_sim measure gpu ...   (same options as this script; ahasd_sim/measure/gpu.py)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ahasd_sim.__main__ import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["measure", "gpu", *sys.argv[1:]]))
