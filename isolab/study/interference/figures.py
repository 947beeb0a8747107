"""Interference between problems (notebook 07, `isolab.study.interference.forgetting`): forgetting
events against compute per n, each run's excess share against its gain, and per-problem solve
rates against compute coloured by n."""

from __future__ import annotations

import matplotlib
import numpy as np
import polars as pl
from matplotlib.axes import Axes

from isolab.plots.style import CMAP, empty_panel, label, n_colorbar, n_norm
from isolab.vocab import ROLLOUTS


def plot_forgetting(iv: pl.DataFrame, ax: Axes) -> Axes:
    """Share of problems with a forgetting event per interval C → 2C (its later end on the x
    axis), seed mean per n (colour): called (solid) and expected without any change (dashed)."""
    if iv.height == 0:
        return empty_panel(ax, "no intervals with per-problem counts")
    mean = (
        iv.filter(pl.col("C_from") > 0)
        .group_by("n", "C_to")
        .agg(pl.col("forgetting", "expected").mean())
        .sort("n", "C_to")
    )
    norm = n_norm(mean["n"].unique())
    for (n,), g in mean.group_by("n", maintain_order=True):
        colour = matplotlib.colormaps[CMAP](norm(n))
        ax.plot(g["C_to"], g["forgetting"], color=colour, marker="o", ms=3, lw=1.6)
        ax.plot(g["C_to"], g["expected"], color=colour, ls="--", lw=0.9)
    ax.set_xscale("log")
    ax.set_xlabel(label(ROLLOUTS) + ", interval's end")
    ax.set_ylabel("share of problems with a forgetting event")
    ax.plot([], [], color="grey", label="called (Fisher, 5%)")
    ax.plot([], [], color="grey", ls="--", label="expected with no change")
    ax.legend(fontsize="x-small")
    n_colorbar(ax, norm)
    return ax


def plot_excess_vs_gain(runs: pl.DataFrame, ax: Axes) -> Axes:
    """Each run's excess share of forgetting events (mean over the common intervals) against
    its mean gain per interval, coloured by n: what the claim's slope is adjusted for."""
    if runs.height == 0:
        return empty_panel(ax, "no runs with per-problem counts")
    norm = n_norm(runs["n"].unique())
    ax.scatter(runs["gain"], runs["excess"], c=runs["n"], cmap=CMAP, norm=norm, s=18)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("mean gain in solve rate per interval")
    ax.set_ylabel("excess share of forgetting events")
    n_colorbar(ax, norm)
    return ax


def plot_problem_curves(rates: pl.DataFrame, ax: Axes, problem: int) -> Axes:
    """One problem's solve rate (seed mean) against compute, one line per n (colour)."""
    part = rates.filter(pl.col("problem") == problem)
    if part.height == 0:
        return empty_panel(ax, f"no counts for problem {problem}")
    norm = n_norm(part["n"].unique())
    for (n,), g in part.sort("n", ROLLOUTS).group_by("n", maintain_order=True):
        g = g.filter(pl.col(ROLLOUTS) > 0)
        ax.plot(g[ROLLOUTS], g["rate"], color=matplotlib.colormaps[CMAP](norm(n)), lw=1.2)
    ax.set_xscale("log")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(f"problem {problem}", fontsize="x-small")
    ax.tick_params(labelsize="x-small")
    return ax


def problem_rates(df: pl.DataFrame, counts: str, problems: np.ndarray) -> pl.DataFrame:
    """Seed-mean solve rate of each of `problems` (indices into the counts lists) per n and
    checkpoint: `n`, compute, `problem`, `rate`."""
    k = pl.col("eval_k_samples")
    rows = df.filter(pl.col(counts).is_not_null()).select(
        "n",
        ROLLOUTS,
        pl.col(counts).list.gather(list(map(int, problems))).alias("c"),
        k,
    )
    long = rows.with_columns(problem=pl.lit(list(map(int, problems)))).explode("c", "problem")
    return (
        long.with_columns(rate=pl.col("c") / k)
        .group_by("n", ROLLOUTS, "problem")
        .agg(pl.col("rate").mean())
        .sort("problem", "n", ROLLOUTS)
    )
