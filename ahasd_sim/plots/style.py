"""Figure style: Agg backend, Okabe-Ito colour-blind-safe palette, readable fonts, column-width
presets, plain decimal ticks on log axes, vector PDF + PNG output. Every figure of the project
is written by :func:`save_figure` (one path: the same ticks, formats and atomic writes)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")  # noqa: E402 - must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402

#: Okabe & Ito (2008), "Color Universal Design": distinguishable with all common colour-vision deficiencies
OKABE_ITO = {
    "black": "#000000", "orange": "#E69F00", "sky_blue": "#56B4E9", "bluish_green": "#009E73",
    "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00", "reddish_purple": "#CC79A7",
}
PALETTE: list[str] = [OKABE_ITO[k] for k in ("blue", "orange", "bluish_green", "vermillion", "reddish_purple",
                                              "sky_blue", "yellow", "black")]
#: hatches that separate bars in greyscale print as well
HATCHES = ["", "//", "..", "\\\\", "xx", "--", "oo", "++"]

RC = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.grid.axis": "y",
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "pdf.fonttype": 42,      # TrueType in PDFs (editable text, accepted by publishers)
    "ps.fonttype": 42,
    "savefig.dpi": 200,
    "savefig.bbox": "tight",
    "figure.dpi": 100,
}


#: text widths of a paper's columns, inches: IEEE 3.5 / 7.16, ACM (acmart) 3.33 / 7.0; the
#: figures use 3.5 (one column) and 7.0 (two columns, fits both templates)
COLUMN_WIDTH_IN = {"one": 3.5, "two": 7.0}


def figure_size(columns: str = "two", height_in: float | None = None, aspect: float = 0.62) -> tuple[float, float]:
    """(width, height) in inches of a figure one (3.5 in) or two (7 in) paper columns wide;
    the height ``height_in``, else ``aspect`` x width."""
    if columns not in COLUMN_WIDTH_IN:
        raise ValueError(f"columns: expected one of {', '.join(COLUMN_WIDTH_IN)}, got {columns!r}")
    w = COLUMN_WIDTH_IN[columns]
    return w, float(height_in) if height_in is not None else w * aspect


def apply_style() -> None:
    plt.rcParams.update(RC)


def plain_number(v: float, _pos=None) -> str:
    """A tick label as a plain decimal: 0.6, 2, 1000, 0.001 (never "6x10^-1")."""
    import numpy as np
    if v == 0 or not abs(v) < float("inf"):
        return "0" if v == 0 else ""
    # 12 significant digits: a tick at 0.1 computed as 10^-1 prints 0.1, not 0.10000000000000002
    return np.format_float_positional(float(f"{v:.12g}"), trim="-")


def plain_log_ticks(fig) -> None:
    """Every log axis of ``fig`` labelled with plain decimals (major ticks; minor ticks labelled
    only where an axis spans less than a decade, as matplotlib does, also in plain decimals)."""
    from matplotlib.ticker import FuncFormatter, LogFormatter, NullFormatter
    for ax in fig.axes:
        for axis, scale in ((ax.xaxis, ax.get_xscale()), (ax.yaxis, ax.get_yscale())):
            if scale != "log":
                continue
            if isinstance(axis.get_major_formatter(), LogFormatter):
                axis.set_major_formatter(FuncFormatter(plain_number))
            minor = axis.get_minor_formatter()
            if isinstance(minor, LogFormatter):
                lo, hi = sorted(axis.get_view_interval())
                axis.set_minor_formatter(FuncFormatter(plain_number) if lo > 0 and hi / lo < 10
                                         else NullFormatter())


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def colors_for(names: Sequence[str]) -> dict[str, str]:
    return {n: color(i) for i, n in enumerate(names)}


def save_figure(fig, out: str | Path, formats: Sequence[str] = ("pdf", "png")) -> list[Path]:
    """Save ``fig`` as ``out``.pdf and ``out``.png (suffix of ``out`` ignored); close it. Log
    axes get plain decimal tick labels (:func:`plain_log_ticks`)."""
    plain_log_ticks(fig)
    out = Path(out)
    base = out.with_suffix("") if out.suffix.lower() in (".pdf", ".png", ".svg") else out
    base.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    from ..output import atomic_write
    try:
        for fmt in formats:   # atomic: a figure is never half-written (e.g. disk full, Ctrl-C)
            p = base.with_suffix(f".{fmt}")
            atomic_write(p, lambda fh, f=fmt: fig.savefig(fh, format=f), mode="wb")
            paths.append(p)
    finally:
        plt.close(fig)
    return paths
