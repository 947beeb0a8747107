"""The allocators' frontiers on one axis of FLOPs (issue 51): each allocator's seed-mean
frontier f(C) (`isolab.frontier.allocation.allocator_frontiers`) as a step line of its own, so
that at any FLOPs one reads which allocator leads."""

from __future__ import annotations

import polars as pl
from matplotlib.axes import Axes

from isolab.frontier.allocation import ALLOCATION, allocators
from isolab.plots.style import empty_panel, label
from isolab.vocab import DEFAULT_Y, FLOPS_TOTAL


def plot_allocator_frontiers(
    fronts: pl.DataFrame, ax: Axes, *, x: str = FLOPS_TOTAL, y: str = DEFAULT_Y
) -> Axes:
    """One step line per allocator of `allocator_frontiers`' rows, on a log FLOPs axis."""
    rows = fronts.filter(pl.col(x) > 0) if x in fronts.columns else fronts.clear()
    if rows.height == 0:
        return empty_panel(ax, f"no allocator frontier on {x}")
    for allocator in allocators(rows):
        front = rows.filter(pl.col(ALLOCATION) == allocator)
        ax.step(front[x].to_numpy(), front["frontier"].to_numpy(), where="post", label=allocator)
    ax.set_xscale("log")
    ax.set_xlabel(label(x))
    ax.set_ylabel(f"{label(y)}, frontier of seed means")
    ax.legend(title=ALLOCATION, loc="upper left", fontsize="small")
    return ax
