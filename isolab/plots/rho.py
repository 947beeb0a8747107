"""Figures of the update fraction ρ (Wilhelm & Kao, arXiv 2607.13389): reward against ρ at equal
FLOPs per reward system, and the RACE pilot's calls against the full grid's."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.axes import Axes

from isolab.frontier import RaceResult, RhoFrontier
from isolab.plots.style import empty_panel, label
from isolab.table import as_float
from isolab.vocab import RHO


def plot_rho_frontier(result: RhoFrontier, ax: Axes) -> Axes:
    """Reward against ρ inside the IsoFLOP band, per reward system: runs, quadratic fit, ρ*."""
    if result.points.height == 0:
        lo, hi = result.band
        return empty_panel(ax, f"no evaluation point with FLOPs in [{lo:.3g}, {hi:.3g}]")
    by = list(result.by)
    grid = np.linspace(0, 1, 200)
    for i, row in enumerate(result.fits.iter_rows(named=True)):
        color = plt.get_cmap("tab10")(i % 10)
        name = " · ".join(str(row[c]) for c in by)
        pts = result.points
        for c in by:
            pts = pts.filter(pl.col(c) == row[c])
        ax.scatter(
            pts["rho"].to_numpy(), pts[result.metric].to_numpy(), color=color, s=12, alpha=0.6
        )
        if row["status"] in ("ok", "extrapolated"):  # extrapolated: a wide, boundary interval
            lo_r, hi_r = as_float(pts["rho"].min()), as_float(pts["rho"].max())
            g = grid[(grid >= lo_r) & (grid <= hi_r)]
            ax.plot(
                g,
                row["q0"] + row["q1"] * g + row["q2"] * g * g,
                color=color,
                lw=1.8,
                label=f"{name}: ρ* = {row['rho_star']:.2f}"
                + ("" if row["status"] == "ok" else " (uncertain)"),
            )
            ax.axvline(row["rho_star"], color=color, ls=":", lw=1)
            if np.isfinite(row["rho_lo"]):
                ax.axvspan(row["rho_lo"], row["rho_hi"], color=color, alpha=0.08)
        else:
            ax.plot([], [], color=color, label=f"{name}: ρ* not identifiable")
    lo, hi = result.band
    ax.set_xlabel(label(RHO))
    ax.set_ylabel(label(result.metric))
    ax.set_title(f"IsoFLOP band [{lo:.2g}, {hi:.2g}] FLOPs", fontsize="small")
    ax.legend(fontsize="x-small")
    return ax


def plot_race(result: RaceResult, ax: Axes) -> Axes:
    """Pilot ρ against full-grid ρ per setting, marked by whether the regime calls agree."""
    t = result.table
    by = list(result.pilot.by)
    for row in t.iter_rows(named=True):
        ok = bool(row["same"])
        ax.scatter(
            row["full_rho"],
            row["pilot_rho"],
            marker="o" if ok else "x",
            color="tab:green" if ok else "crimson",
            s=40,
        )
        ax.annotate(
            " · ".join(str(row[c]) for c in by),
            (row["full_rho"], row["pilot_rho"]),
            fontsize="x-small",
            xytext=(3, 3),
            textcoords="offset points",
        )
    ax.plot([0, 1], [0, 1], color="0.6", lw=1)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("ρ* of the full grid")
    ax.set_ylabel("ρ* of the pilot grid")
    ax.set_title(
        f"RACE: same regime {result.same_regime_rate:.0%} of settings, pilot cost "
        f"{result.pilot_flops_fraction:.0%} of the grid",
        fontsize="small",
    )
    return ax
