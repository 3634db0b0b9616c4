"""Figure style: Agg backend, Okabe-Ito colour-blind-safe palette, readable fonts,
vector PDF + PNG output."""
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


def apply_style() -> None:
    plt.rcParams.update(RC)


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def colors_for(names: Sequence[str]) -> dict[str, str]:
    return {n: color(i) for i, n in enumerate(names)}


def save_figure(fig, out: str | Path, formats: Sequence[str] = ("pdf", "png")) -> list[Path]:
    """Save ``fig`` as ``out``.pdf and ``out``.png (suffix of ``out`` ignored); close it."""
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
