"""Per-prompt allocation (notebook 10, `isolab.study.allocation.analysis`): one split's avg@4
against FLOPs per arm with the stated target, and the share of each arm's FLOPs spent on
rollouts no update used."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.axes import Axes

from isolab.plots.curves import plot_curves
from isolab.plots.style import empty_panel
from isolab.vocab import DISCARDED_SHARE, EVAL_AVG, FLOPS_TOTAL


def plot_split_frontier(front: pl.DataFrame, ax: Axes, split: str, target: float) -> Axes:
    """One split's seed-mean avg@4 against `flops/total` per arm (`analysis.frontier`, ±1 SD
    band), log FLOPs, with the stated avg@4 (`analysis.flops_to_target`) dotted where it exists."""
    ax.set_xscale("log")
    plot_curves(front, ax, x=FLOPS_TOTAL, y=EVAL_AVG, by="arm")
    if math.isfinite(target):
        ax.axhline(target, color="0.6", ls=":", lw=1)
    ax.set_title(f"{split}: avg@4 against FLOPs per arm (dotted: the target)", fontsize="small")
    return ax


def plot_discarded(waste: pl.DataFrame, ax: Axes, arms: list[str]) -> Axes:
    """Seed-mean share of all FLOPs spent on discarded rollouts (`analysis.discarded`), one bar
    per arm (in `arms`' order) and split: what dynamic sampling and early stopping pay for their
    choice of groups, which uniform n and the variance split never pay."""
    shown = waste.filter(pl.col("discarded_share").is_not_null())
    if shown.height == 0:
        return empty_panel(ax, f"no {DISCARDED_SHARE} in these runs")
    splits = shown["split"].unique().sort().to_list()
    width = 0.8 / len(splits)
    x = np.arange(len(arms))
    for i, split in enumerate(splits):
        part = dict(shown.filter(pl.col("split") == split).select("arm", "discarded_share").rows())
        heights = [part.get(a, np.nan) for a in arms]
        offset = (i - (len(splits) - 1) / 2) * width
        ax.bar(x + offset, heights, width, label=split, color=plt.get_cmap("tab10")(i % 10))
    ax.set_xticks(x, arms, rotation=20, fontsize="small")
    ax.set_ylabel(f"share of all FLOPs on discarded rollouts ({DISCARDED_SHARE})")
    ax.set_title("FLOPs spent on rollouts no update used", fontsize="small")
    ax.legend(fontsize="x-small", title="split", title_fontsize="x-small")
    return ax
