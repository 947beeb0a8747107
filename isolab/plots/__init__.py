"""One function per figure of the frontier analysis, each drawing on a given matplotlib `ax`.

Colours encode n (rollouts per problem) on a log scale throughout; axes carry units. The
functions take the DataFrames and result objects of `isolab.frontier` and hold no fitting logic.
One module per subject shared by the studies (a figure of one study alone lives in its folder,
`isolab/study/<study>/figures.py`), every name importable from here (``plots.plot_frontier(df, ax=ax)``):

- `frontier`: the frontier with its per-n fits, n*(C), n*(C) per metric, n vs B_p at a fixed
  batch (IsoCompute Playbook, arXiv 2603.12151);
- `rho`: reward against ρ at equal FLOPs, and the RACE pilot (arXiv 2607.13389);
- `curves`: seed-averaged learning curves, finals against a swept value, what a budget bought;
- `progress`: reward against optimizer progress (the summed learning rate Σlr), per n;
- `adaptive`: an adaptive sweep replayed on a grid's curves: its n* and compute against the grid's;
- `style`: the colour map of n, axis labels with units, the empty panel, readable log axes.
"""

from isolab.plots.adaptive import plot_adaptive, plot_adaptive_compute, plot_adaptive_path
from isolab.plots.curves import plot_bought, plot_curves, plot_final, plot_optima, plot_optimum
from isolab.plots.frontier import plot_frontier, plot_metric_effect, plot_n_star, plot_tradeoff
from isolab.plots.progress import plot_lr_sum
from isolab.plots.rho import plot_race, plot_rho_frontier
from isolab.plots.style import AXIS_LABELS, CMAP, empty_panel, label, n_colorbar, n_norm, tidy

__all__ = [
    "AXIS_LABELS",
    "CMAP",
    "empty_panel",
    "label",
    "n_colorbar",
    "n_norm",
    "plot_adaptive",
    "plot_adaptive_compute",
    "plot_adaptive_path",
    "plot_bought",
    "plot_lr_sum",
    "plot_curves",
    "plot_final",
    "plot_frontier",
    "plot_metric_effect",
    "plot_n_star",
    "plot_optima",
    "plot_optimum",
    "plot_race",
    "plot_rho_frontier",
    "plot_tradeoff",
    "tidy",
]
