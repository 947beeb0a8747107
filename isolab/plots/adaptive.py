"""Figures of an adaptive sweep replayed on a full grid's saved curves
(`isolab.sweep.adaptive.replay`, issue 32): the n* each finds at every checkpoint, with the
arms still running, and the compute each has spent by then."""

from __future__ import annotations

from typing import TYPE_CHECKING

import matplotlib.ticker as mticker
import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from isolab.plots.style import empty_panel, label, tidy
from isolab.vocab import DEFAULT_X

if TYPE_CHECKING:  # the figures read a Replay; importing the sweep package loads MLflow
    from isolab.sweep.adaptive import Replay

GRID, ADAPTIVE = "0.35", "tab:orange"


def spent_by_rung(r: Replay) -> pl.DataFrame:
    """Compute spent (rollouts over all runs) once every run has reached checkpoint C or
    stopped: `grid` by the full grid, `adaptive` by the replayed rule, one row per checkpoint.
    A run's end is its arm's mean over seeds (the seeds of an arm end together in a sweep);
    at the last checkpoint the columns sum to `Replay.arms`' `full` and `spent`."""
    end = (r.arms["full"] / r.arms["seeds"]).to_numpy()
    stop = r.arms["stopped_at"].fill_null(np.inf).to_numpy()
    seeds = r.arms["seeds"].to_numpy()
    C = r.path["C"].to_numpy()
    grid = [float(np.sum(seeds * np.minimum(c, end))) for c in C]
    adaptive = [float(np.sum(seeds * np.minimum(np.minimum(c, end), stop))) for c in C]
    return pl.DataFrame({"C": C, "grid": grid, "adaptive": adaptive})


def running_by_rung(r: Replay) -> pl.DataFrame:
    """Arms that run on past checkpoint C (not stopped at C or before), per checkpoint; unlike
    `Replay.path`'s `alive` (arms judged at C), it counts arms whose first evaluation comes
    later."""
    stops = r.arms["stopped_at"].drop_nulls().to_numpy()
    C = r.path["C"].to_numpy()
    return pl.DataFrame({"C": C, "running": [r.arms.height - int(np.sum(stops <= c)) for c in C]})


def plot_adaptive_path(r: Replay, ax: Axes, *, x: str = DEFAULT_X) -> Axes:
    """n* at each checkpoint C (the arm with the best seed mean) of the full grid and of the
    adaptive sweep's surviving arms, on log axes; the arms that run on past C (the line drops
    at the checkpoint that stops them) on a right-hand axis; a cross where the grid's best at
    C had already been stopped."""
    p = r.path
    if p.height == 0:
        return empty_panel(ax, "no checkpoint to replay")
    C = p["C"].to_numpy()
    ax.plot(
        C,
        p["grid_n"].to_numpy(),
        "o-",
        color=GRID,
        lw=3,
        ms=9,
        mfc="none",
        label="full grid: best n",
    )
    ax.plot(
        C,
        p["adaptive_n"].to_numpy(),
        "o--",
        color=ADAPTIVE,
        lw=1.5,
        ms=4,
        label="adaptive: best surviving n",
    )
    lost = p.filter(~pl.col("best_alive"))
    if lost.height:
        ax.plot(
            lost["C"].to_numpy(),
            lost["grid_n"].to_numpy(),
            "x",
            color="crimson",
            ms=10,
            mew=2,
            label="grid's best already stopped",
        )
    budget = float(C.max()) if len(C) else None
    opens = [i for i in range(len(C)) if r.rule.opens(i, float(C[i]), budget)]
    if opens:
        ax.axvline(C[opens[0]], color="0.6", ls=":", lw=1, label="first checkpoint judged")
    ax.set_xscale("log")
    ax.set_yscale("log", base=2)
    ns = np.concatenate([p["grid_n"].to_numpy(), p["adaptive_n"].to_numpy()]).astype(float)
    ax.set_ylim(ns.min() / 1.6, ns.max() * 1.6)
    ax.yaxis.set_major_locator(mticker.LogLocator(base=2))
    ax.yaxis.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(mticker.NullFormatter())
    ax.set_xlabel(label(x))
    ax.set_ylabel("n* (rollouts per problem), best seed mean")
    running = running_by_rung(r)
    twin = ax.twinx()
    twin.step(
        C,
        running["running"].to_numpy(),
        where="post",
        color="tab:blue",
        lw=1,
        alpha=0.6,
        label="arms running on past C (right axis)",
    )
    twin.set_ylim(0, r.arms.height + 0.5)
    twin.yaxis.set_major_locator(mticker.MaxNLocator(integer=True))
    twin.set_ylabel(f"arms running on past C (of {r.arms.height})")
    handles, labels = ax.get_legend_handles_labels()
    more, more_labels = twin.get_legend_handles_labels()
    twin.legend(handles + more, labels + more_labels, loc="lower left", fontsize="x-small")
    ax.set_title("n* at each checkpoint")
    return ax


def plot_adaptive_compute(r: Replay, ax: Axes, *, x: str = DEFAULT_X) -> Axes:
    """Cumulative compute spent against checkpoint C by the full grid and by the adaptive
    sweep (`spent_by_rung`), log-log, with the final fraction in the title."""
    if r.path.height == 0:
        return empty_panel(ax, "no checkpoint to replay")
    s = spent_by_rung(r)
    C, grid, adaptive = (s[c].to_numpy() for c in ("C", "grid", "adaptive"))
    ax.plot(C, grid, "o-", color=GRID, lw=2, ms=4, label="full grid")
    ax.plot(C, adaptive, "o--", color=ADAPTIVE, lw=1.5, ms=4, label="adaptive")
    ax.fill_between(C, adaptive, grid, color=ADAPTIVE, alpha=0.12, lw=0, label="saved")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(label(x))
    ax.set_ylabel("compute spent so far (rollouts, all runs)")
    ax.legend(loc="upper left", fontsize="x-small")
    ax.set_title(f"compute: adaptive spends {r.fraction:.0%} of the full grid's")
    return ax


def plot_adaptive(r: Replay, title: str = "", *, x: str = DEFAULT_X) -> Figure:
    """One sweep's (or split's) replay: n* with the arms running (left), compute (right)."""
    fig = Figure(figsize=(12, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    plot_adaptive_path(r, left, x=x)
    plot_adaptive_compute(r, right, x=x)
    head = f"{title}: " if title else ""
    dropped = "dropped" if r.best_dropped else "kept"
    fig.suptitle(f"{head}adaptive sweep ({r.rule.text}) vs the full grid; grid's best {dropped}")
    return tidy(fig)
