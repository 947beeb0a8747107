"""Reward against optimizer progress: avg@4 against the summed learning rate Σlr, one colour
per n (issue 45). Under the √B rule Σlr ∝ C/√B, so at equal compute a larger n sits further
left; where the curves of every n fall on one line, n acts through the number of updates."""

from __future__ import annotations

import matplotlib.pyplot as plt
import polars as pl
from matplotlib.axes import Axes

from isolab.plots.style import CMAP, empty_panel, label, n_colorbar, n_norm
from isolab.table import with_lr_sum
from isolab.vocab import EVAL_AVG, LR_SUM, STEP


def plot_lr_sum(df: pl.DataFrame, ax: Axes, *, y: str = EVAL_AVG, style: str = "B_p") -> Axes:
    """Seed-mean `y` against seed-mean Σlr (`LR_SUM`, derived as lr · step where not logged)
    per configuration, after step 0, on a log x axis: one colour per n, one line style per
    value of `style` (B_p) where the runs table has it."""
    rows = with_lr_sum(df)
    if LR_SUM not in rows.columns or "n" not in rows.columns or y not in rows.columns:
        return empty_panel(ax, f"no {LR_SUM}, n or {y} in these runs")
    rows = rows.filter((pl.col(STEP) > 0) & pl.col(y).is_finite() & (pl.col(LR_SUM) > 0))
    if rows.height == 0:
        return empty_panel(ax, f"no finite {y} after step 0 to plot")
    keys = ["n", style] if style in rows.columns else ["n"]
    means = rows.group_by(*keys, STEP).agg(pl.col(LR_SUM).mean(), pl.col(y).mean())
    norm = n_norm(means["n"].to_list())
    styles = ["-", "--", ":", "-."]
    levels = means[style].unique().sort().to_list() if len(keys) > 1 else [None]
    colours = plt.get_cmap(CMAP)
    for vals, g in means.sort(*keys, STEP).group_by(keys, maintain_order=True):
        ls = styles[levels.index(vals[1]) % 4] if len(keys) > 1 else "-"
        ax.plot(
            g[LR_SUM].to_numpy(),
            g[y].to_numpy(),
            color=colours(norm(vals[0])),
            ls=ls,
            lw=1.4,
            marker="o",
            ms=2.5,
        )
    if len(keys) > 1 and len(levels) > 1:
        for lv in levels:
            ax.plot([], [], color="grey", ls=styles[levels.index(lv) % 4], label=f"{style}={lv}")
        ax.legend(fontsize="x-small", loc="upper left")
    ax.set_xscale("log")
    ax.set_xlabel(label(LR_SUM))
    ax.set_ylabel(label(y))
    n_colorbar(ax, norm)
    return ax
