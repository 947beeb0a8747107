"""Figures the report and comparison pages add to `isolab.plots`, one function per figure,
each drawing on a given matplotlib `ax`: the stacked FLOP split of a configuration, the
split's shares across configurations, several sweeps' frontiers on one axis, and their
difference at equal compute."""

from __future__ import annotations

import numpy as np
import polars as pl
from matplotlib.axes import Axes

from isolab.plots import empty_panel, label
from isolab.study.pages.tables import FLOP_PARTS, config_label
from isolab.vocab import EVAL_PREFIX, FLOPS_LEARNING, FLOPS_REWARD, FLOPS_SEARCH

#: One colour per part of the ledger, the same in every figure.
PART_COLOURS = {FLOPS_SEARCH: "tab:blue", FLOPS_LEARNING: "tab:orange", FLOPS_REWARD: "tab:green"}
PART_NAMES = {FLOPS_SEARCH: "search", FLOPS_LEARNING: "learning", FLOPS_REWARD: "reward"}
#: Colours of the sweeps a comparison puts side by side (A, B).
SWEEP_COLOURS = ("tab:blue", "tab:red")


def plot_flop_split(split: pl.DataFrame, ax: Axes, *, x: str, title: str = "") -> Axes:
    """Cumulative search, learning and reward FLOPs of one configuration (rows of
    `isolab.study.pages.tables.flop_split`), stacked against compute `x`."""
    rows = split.filter(pl.col(x).is_finite()).sort(x)
    if rows.filter(pl.col(x) > 0).height == 0:
        return empty_panel(ax, f"no FLOP ledger at {x} > 0")
    xs = rows[x].to_numpy()
    ax.stackplot(
        xs,
        *[rows[p].to_numpy() for p in FLOP_PARTS],
        labels=[PART_NAMES[p] for p in FLOP_PARTS],
        colors=[PART_COLOURS[p] for p in FLOP_PARTS],
        alpha=0.85,
    )
    # a linear axis: cumulative FLOPs grow in proportion to compute, so a steady split shows
    # as straight bands
    ax.set_xlim(0, float(xs.max()))
    ax.set_xlabel(label(x))
    ax.set_ylabel("model FLOPs so far (stacked)")
    if title:
        ax.set_title(title, fontsize="small")
    ax.legend(loc="upper left", fontsize="x-small")
    return ax


def plot_flop_shares(shares: pl.DataFrame, ax: Axes, *, labels: list[str]) -> Axes:
    """Each configuration's search / learning / reward share of its FLOPs at its last
    evaluation (`isolab.study.pages.tables.final_shares`), as stacked bars summing to 1; the
    learning share is ρ."""
    if shares.height == 0:
        return empty_panel(ax, "no FLOP ledger to split")
    names = [config_label(row, labels) or "all" for row in shares.iter_rows(named=True)]
    pos = np.arange(shares.height)
    bottom = np.zeros(shares.height)
    for part in FLOP_PARTS:
        values = shares[part].to_numpy()
        ax.bar(pos, values, bottom=bottom, color=PART_COLOURS[part], label=PART_NAMES[part])
        bottom += values
    ax.set_xticks(pos, names, rotation=60, ha="right", fontsize="x-small")
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of model FLOPs at the end\n(learning = ρ)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="x-small")
    return ax


def plot_frontiers(frontiers: dict[str, pl.DataFrame], ax: Axes, *, x: str, y: str) -> Axes:
    """Several sweeps' seed-mean frontiers (`isolab.study.pages.tables.seed_frontier`, name →
    frame) as step lines on one compute axis."""
    drawn = False
    for i, (name, front) in enumerate(frontiers.items()):
        f = front.filter(pl.col(x) > 0)
        if f.height == 0:
            continue
        colour = SWEEP_COLOURS[i % len(SWEEP_COLOURS)]
        ax.step(
            f[x].to_numpy(),
            f["frontier"].to_numpy(),
            where="post",
            color=colour,
            lw=1.8,
            label=name,
        )
        ax.plot(f[x].to_numpy(), f["frontier"].to_numpy(), "o", ms=2.5, color=colour)
        drawn = True
    if not drawn:
        return empty_panel(ax, f"no finite {y} at {x} > 0")
    ax.set_xscale("log")
    ax.set_xlabel(label(x))
    ax.set_ylabel(f"frontier of {label(y)}, seed mean")
    ax.legend(loc="upper left", fontsize="small")
    return ax


def plot_difference(table: pl.DataFrame, ax: Axes, *, x: str, y: str, title: str = "") -> Axes:
    """B − A of two frontiers at equal compute (`isolab.study.pages.tables.equal_compute`)."""
    rows = table.filter(pl.col("B − A").is_finite())
    if rows.height == 0:
        return empty_panel(ax, "the two sweeps share no compute range")
    ax.axhline(0.0, color="0.5", lw=1)
    ax.plot(rows[x].to_numpy(), rows["B − A"].to_numpy(), "o-", color="black", lw=1.5)
    ax.set_xscale("log")
    ax.set_xlabel(label(x))
    ax.set_ylabel(f"B − A, {y.removeprefix(EVAL_PREFIX)} at equal compute")
    if title:
        ax.set_title(title, fontsize="small")
    return ax
