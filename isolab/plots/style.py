"""What every figure shares: the colour map of n, axis labels with units, the empty-panel
message and readable log axes (`tidy`)."""

from __future__ import annotations

import math
from typing import Any

import matplotlib.colors as mcolors
import matplotlib.ticker as mticker
import numpy as np
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable

from isolab.vocab import (
    EVAL_PREFIX,
    EVAL_SET_PREFIX,
    FLOPS_HW_TOTAL,
    FLOPS_TOTAL,
    LR_SUM,
    RHO,
    ROLLOUTS,
    STEP,
    TOKENS,
)

CMAP = "viridis"
AXIS_LABELS = {
    ROLLOUTS: "compute C (rollouts = B_p·n·M)",
    TOKENS: "compute (generated tokens)",
    FLOPS_TOTAL: "compute (FLOPs, total)",
    FLOPS_HW_TOTAL: "compute (hardware FLOPs, total)",
    STEP: "M (optimizer steps)",
    RHO: "ρ = C_learning / C_total",
    LR_SUM: "Σlr (learning rate summed over the optimizer steps)",
}


def label(column: str) -> str:
    """Axis label with units for a runs-table column."""
    if column in AXIS_LABELS:
        return AXIS_LABELS[column]
    unit = "mean judge score, 0–1" if column.endswith("/judge") else "fraction correct"
    if column.startswith(EVAL_PREFIX):
        return f"{column.removeprefix(EVAL_PREFIX)} ({unit})"
    if (
        column.startswith(EVAL_SET_PREFIX) and "/" in column
    ):  # an evaluation set's: eval-shifted/avg@4
        name, metric = column.removeprefix(EVAL_SET_PREFIX).split("/", 1)
        return f"{metric} on {name} ({unit})"
    return column


def literal(text: str) -> str:
    """User text (a sweep's name) drawn as it is: matplotlib reads `$…$` as math, and raised
    ParseException at save time on a name such as `x$^$y`."""
    return str(text).replace("$", r"\$")


def n_norm(ns: Any) -> mcolors.Normalize:
    """Log-scale colour normalisation over the n values present."""
    ns = np.asarray(list(ns), dtype=float)
    ns = ns[np.isfinite(ns) & (ns > 0)]
    lo, hi = (float(ns.min()), float(ns.max())) if ns.size else (1.0, 2.0)
    if hi <= lo:
        hi = lo * 2
    return mcolors.LogNorm(vmin=lo, vmax=hi)


def n_colorbar(ax: Axes, norm: mcolors.Normalize) -> None:
    """A colour bar of n (rollouts per problem) beside `ax`."""
    sm = ScalarMappable(norm=norm, cmap=CMAP)
    ax.figure.colorbar(sm, ax=ax, label="n (rollouts per problem)")


def empty_panel(ax: Axes, message: str) -> Axes:
    """`message` in the middle of an axis-less `ax`: what a figure draws when there is no data."""
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, wrap=True)
    ax.set_axis_off()
    return ax


def tidy(fig: Any) -> Any:
    """Readable log-10 axes on every panel of `fig`: major ticks at 1, 2, 5 × 10^k on a range
    of at most two decades, at 10^k alone on a longer one (where 1-2-5 labels ran into each
    other: "5,00010,000"), at 1…9 × 10^k under one decade, labelled as plain numbers (1e+11 style above 10^5), no minor
    labels."""

    def fmt(v: float, _pos: int) -> str:
        whole = v >= 1 and v == round(v)
        return f"{v:.0e}" if v >= 1e5 else f"{v:,.0f}" if whole else f"{v:g}"

    for ax in fig.axes:
        for axis, scale, lim in (
            (ax.xaxis, ax.get_xscale(), ax.get_xlim()),
            (ax.yaxis, ax.get_yscale(), ax.get_ylim()),
        ):
            if scale != "log" or getattr(axis.get_transform(), "base", 10) != 10:
                continue
            lo, hi = sorted(lim)
            decades = math.log10(hi / lo) if lo > 0 else math.inf
            # under a decade (an n colour bar of 2…4) 1-2-5 leaves one tick and matplotlib
            # falls back to linear ticks (2, 2.25, …): every integer multiple instead
            subs = (1.0, 2.0, 5.0) if decades <= 2 else (1.0,)
            subs = tuple(float(k) for k in range(1, 10)) if decades < 1 else subs
            axis.set_major_locator(mticker.LogLocator(base=10, subs=subs))
            axis.set_major_formatter(mticker.FuncFormatter(fmt))
            axis.set_minor_formatter(mticker.NullFormatter())
    return fig
