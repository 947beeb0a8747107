"""Figures of the IsoCompute Playbook's analysis (arXiv 2603.12151): the frontier with the per-n
fits, n*(C) and its saturation, n*(C) per metric, and n against B_p at a fixed batch."""

from __future__ import annotations

import textwrap
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.axes import Axes

from isolab.frontier import (
    MetricEffect,
    NStarResult,
    TradeoffResult,
    frontier,
    record_points,
)
from isolab.plots.style import CMAP, empty_panel, label, n_colorbar, n_norm
from isolab.table import to_polars
from isolab.vocab import DEFAULT_X, DEFAULT_Y, EVAL_PREFIX, STEP


def plot_frontier(
    df: Any,
    ax: Axes,
    *,
    x: str = DEFAULT_X,
    y: str = DEFAULT_Y,
    result: NStarResult | None = None,
    bin_width: float = 0.0,
    max_points: int = 20_000,
    seed: int = 0,
) -> Axes:
    """All evaluation points coloured by n, the frontier f(C), its record-breaking points and,
    given an `optimal_n` result, the per-n sigmoid fits (IsoCompute Playbook Fig. 3 style). A
    flat fit (no rise beyond noise) is drawn as a band at its observed level ± SD, not as its
    sigmoid, whose parameters describe noise."""
    df = to_polars(df).filter(pl.col(x).is_finite() & pl.col(y).is_finite())
    if df.height == 0:
        return empty_panel(ax, f"no finite {y} to plot")
    norm = n_norm(df["n"].unique().to_list()) if "n" in df.columns else None
    pts = df.filter(pl.col(x) > 0)
    if pts.height > max_points:
        pts = pts.sample(max_points, seed=seed)
    colors = pts["n"].to_numpy() if norm is not None else None
    ax.scatter(
        pts[x].to_numpy(),
        pts[y].to_numpy(),
        c=colors,
        cmap=CMAP,
        norm=norm,
        s=6,
        alpha=0.35,
        linewidths=0,
    )
    f = frontier(df, x, y).filter(pl.col(x) > 0)
    ax.step(
        f[x].to_numpy(),
        f["frontier"].to_numpy(),
        where="post",
        color="black",
        lw=1.5,
        label="frontier f(C)",
    )
    rec = record_points(df, x, y, bin_width=bin_width).filter(pl.col(x) > 0)
    ax.scatter(
        rec[x].to_numpy(),
        rec[y].to_numpy(),
        facecolors="none",
        edgecolors="crimson",
        s=30,
        lw=1.2,
        label="record-breaking points",
        zorder=3,
    )
    if result is not None and result.curves.height and norm is not None:
        flat = pl.col("status") == "flat" if "status" in result.curves.columns else pl.lit(False)
        for (n,), c in result.curves.filter(~flat).group_by(["n"], maintain_order=True):
            ax.plot(
                c["C"].to_numpy(),
                c["reward_fit"].to_numpy(),
                color=plt.get_cmap(CMAP)(norm(n)),
                lw=1.8,
            )
        if result.curves.filter(~flat).height:
            ax.plot([], [], color="grey", lw=1.8, label="per-n sigmoid fits")
        for (n,), c in result.curves.filter(flat).group_by(["n"], maintain_order=True):
            ax.fill_between(
                c["C"].to_numpy(),
                c["reward_lo"].to_numpy(),
                c["reward_hi"].to_numpy(),
                color=plt.get_cmap(CMAP)(norm(n)),
                alpha=0.15,
                lw=0,
            )
        if result.curves.filter(flat).height:
            ax.fill_between(
                [], [], [], color="grey", alpha=0.2, lw=0, label="flat fits: level ± SD"
            )
    ax.set_xscale("log")
    ax.set_xlabel(label(x))
    ax.set_ylabel(label(y))
    ax.legend(loc="upper left", fontsize="small")
    if norm is not None:
        n_colorbar(ax, norm)
    return ax


def wrapped_title(ax: Axes, text: str, fontsize: str = "small") -> None:
    """`text` as the title of `ax`, wrapped to the axes' width instead of cut."""
    inches = ax.get_window_extent().width / ax.figure.dpi
    chars = max(int(inches * 72 / 5.2), 30)  # ≈ 5.2 pt per character at the small font size
    ax.set_title(textwrap.fill(text, chars), fontsize=fontsize)


def plot_n_star(
    result: NStarResult, ax: Axes, *, show_raw: bool = True, saturation: bool = True
) -> Axes:
    """n*(C): raw envelope, running average, fitted sigmoid of log n* with its bootstrap band,
    and the saturation value with its interval. `saturation=False` leaves the saturation out
    (a caller whose test does not find n* growing: a saturation is not what it reports); a
    result that is not identifiable has none to draw."""
    t = result.table
    if t.height == 0:
        return empty_panel(ax, textwrap.fill(f"n*(C) not identifiable: {result.reason}", 60))
    C = t["C"].to_numpy()
    if show_raw:
        ax.step(
            C, t["n_star_raw"].to_numpy(), where="mid", color="0.7", lw=1, label="n* (envelope)"
        )
    ax.plot(C, t["n_star"].to_numpy(), "o", ms=3, color="tab:blue", label="n* (running average)")
    if "fit" in t.columns:
        flat = result.fit is None or not result.fit.identifiable  # a saturated, flat n*
        ax.plot(
            C,
            t["fit"].to_numpy(),
            color="black",
            lw=2,
            label="flat n* (saturated)" if flat else "sigmoid fit of log n*",
        )
        lo = t["fit_lo"].cast(float).fill_null(float("nan")).to_numpy()
        hi = t["fit_hi"].cast(float).fill_null(float("nan")).to_numpy()
        if np.isfinite(lo).any():
            what = "interval of the level" if flat else "band"
            band = f"{result.ci:.0%} bootstrap {what}"
            ax.fill_between(C, lo, hi, color="black", alpha=0.15, lw=0, label=band)
    draw = saturation and result.status != "not identifiable"
    if draw and np.isfinite(result.n_saturation):
        lo, hi = result.n_saturation_ci
        ci = f" [{lo:.0f}, {hi:.0f}]" if np.isfinite(lo) else ""
        ax.axhline(
            result.n_saturation,
            color="crimson",
            ls="--",
            lw=1,
            label=f"saturation n ≈ {result.n_saturation:.0f}{ci}",
        )
    ax.set_xscale("log")
    ax.set_yscale("log", base=2)
    ax.set_xlabel(label(result.x))
    ax.set_ylabel(f"n* (rollouts per problem), by {result.metric.removeprefix(EVAL_PREFIX)}")
    ax.legend(loc="upper left", fontsize="small")
    if result.status != "ok":
        wrapped_title(ax, f"{result.status}: {result.reason}")
    return ax


def plot_metric_effect(result: MetricEffect, ax: Axes) -> Axes:
    """n*(C) under each metric (avg@k, best@k, worst@k): which metric a larger n serves."""
    if result.table.height == 0:
        return empty_panel(ax, "n*(C) not identifiable under any metric")
    for i, ((metric,), t) in enumerate(result.table.group_by(["metric"], maintain_order=True)):
        color = plt.get_cmap("tab10")(i)
        C = t["C"].to_numpy()
        res = result.results[metric]
        sat = res.n_saturation
        says = (
            f"saturates ≈ {sat:.0f}"
            if np.isfinite(sat) and res.status != "not identifiable"
            else "no saturation"
        )
        ax.plot(
            C,
            t["fit"].to_numpy(),
            color=color,
            lw=2,
            label=f"{metric.removeprefix(EVAL_PREFIX)} ({says})",
        )
        ax.plot(C, t["n_star"].to_numpy(), "o", ms=2, color=color, alpha=0.5)
        lo, hi = t["fit_lo"].to_numpy(), t["fit_hi"].to_numpy()
        if np.isfinite(lo).any():
            ax.fill_between(C, lo, hi, color=color, alpha=0.12, lw=0)
    ax.set_xscale("log")
    ax.set_yscale("log", base=2)
    first = next(iter(result.results.values()))
    ax.set_xlabel(label(first.x or DEFAULT_X))
    ax.set_ylabel("n* (rollouts per problem)")
    ax.legend(loc="upper left", fontsize="small")
    return ax


def plot_tradeoff(result: TradeoffResult, ax: Axes) -> Axes:
    """Reward against M for every split (B_p, n) of a fixed batch B, coloured by n, with the
    small-M and large-M windows that decide the winners shaded."""
    if result.curves.height == 0:
        return empty_panel(ax, f"B = {result.B}: {result.reason}")
    norm = n_norm(result.curves["n"].unique().to_list())
    for (b_p, n), c in result.curves.filter(pl.col(STEP) > 0).group_by(
        ["B_p", "n"], maintain_order=True
    ):
        ax.plot(
            c[STEP].to_numpy(),
            c[result.metric].to_numpy(),
            color=plt.get_cmap(CMAP)(norm(n)),
            lw=1.5,
            label=f"B_p = {b_p}, n = {n}",
        )
    for row in result.winners.iter_rows(named=True):
        ax.axvspan(row["M_lo"], row["M_hi"], color="0.9", zorder=0)
        ax.text(
            row["M_lo"],
            ax.get_ylim()[1],
            f"{row['regime']}: n = {row['n']}",
            va="top",
            fontsize="small",
        )
    ax.set_xscale("log")
    ax.set_xlabel(label(STEP))
    ax.set_ylabel(label(result.metric))
    ax.set_title(f"fixed batch B = B_p·n = {result.B}")
    ax.legend(fontsize="x-small")
    return ax
