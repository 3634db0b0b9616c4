"""Paper-quality figures that read result files only (summary.json, results.csv,
timeline.json, events.csv). Agg backend, Okabe-Ito palette, vector PDF + PNG.

* :func:`normalised_bars` -- throughput / energy-efficiency ratios vs a baseline;
* :func:`plot_gantt` -- device timelines of short windows (timeline.json);
* :func:`plot_distributions` -- draft-length and acceptance distributions (events.csv);
* :func:`heatmap`, :func:`lines` -- metrics over sweep axes (results.csv).
"""
from .bars import normalised_bars, ratio_table
from .distributions import plot_distributions
from .style import OKABE_ITO, PALETTE, apply_style, save_figure
from .sweep_plots import heatmap, lines
from .timeline import load_timeline, plot_gantt

__all__ = ["OKABE_ITO", "PALETTE", "apply_style", "heatmap", "lines", "load_timeline", "normalised_bars",
           "plot_distributions", "plot_gantt", "ratio_table", "save_figure"]
