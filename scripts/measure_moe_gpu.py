#!/usr/bin/env python3
"""Thin wrapper kept for old command lines: the measurement lives in the package.

  python -m ahasd_sim measure moe ...   (same options as this script; ahasd_sim/measure/moe_gpu.py)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ahasd_sim.__main__ import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["measure", "moe", *sys.argv[1:]]))
