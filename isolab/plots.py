"""One function per figure of the frontier analysis, each drawing on a given matplotlib `ax`.

Colours encode n (rollouts per problem) on a log scale throughout; axes carry units. The
functions take the DataFrames and result objects of `isolab.frontier` and hold no fitting logic.
"""

from __future__ import annotations

from typing import Any

import matplotlib.colors as mcolors
import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable

from isolab.frontier import (
    DEFAULT_X,
    DEFAULT_Y,
    MetricEffect,
    NStarResult,
    RaceResult,
    RhoFrontier,
    TradeoffResult,
    frontier,
    record_points,
)
from isolab.table import to_polars
from isolab.vocab import FLOPS_HW_TOTAL, FLOPS_TOTAL, RHO, ROLLOUTS, TOKENS

CMAP = "viridis"
AXIS_LABELS = {
    ROLLOUTS: "compute C (rollouts = B_p·n·M)",
    TOKENS: "compute (generated tokens)",
    FLOPS_TOTAL: "compute (FLOPs, total)",
    FLOPS_HW_TOTAL: "compute (hardware FLOPs, total)",
    "step": "M (optimizer steps)",
    RHO: "ρ = C_learning / C_total",
}


def label(column: str) -> str:
    """Axis label with units for a runs-table column."""
    if column in AXIS_LABELS:
        return AXIS_LABELS[column]
    if column.startswith("eval/"):
        return f"{column.removeprefix('eval/')} (fraction correct)"
    return column


def n_norm(ns: Any) -> mcolors.Normalize:
    """Log-scale colour normalisation over the n values present."""
    ns = np.asarray(list(ns), dtype=float)
    ns = ns[np.isfinite(ns) & (ns > 0)]
    lo, hi = (float(ns.min()), float(ns.max())) if ns.size else (1.0, 2.0)
    if hi <= lo:
        hi = lo * 2
    return mcolors.LogNorm(vmin=lo, vmax=hi)


def _n_colorbar(ax: Axes, norm: mcolors.Normalize) -> None:
    sm = ScalarMappable(norm=norm, cmap=CMAP)
    ax.figure.colorbar(sm, ax=ax, label="n (rollouts per problem)")


def _nothing(ax: Axes, message: str) -> Axes:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, wrap=True)
    ax.set_axis_off()
    return ax


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
    given an `optimal_n` result, the per-n sigmoid fits (IsoCompute Playbook Fig. 3 style)."""
    df = to_polars(df).filter(pl.col(x).is_finite() & pl.col(y).is_finite())
    if df.height == 0:
        return _nothing(ax, f"no finite {y} to plot")
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
        for (n,), c in result.curves.group_by(["n"], maintain_order=True):
            ax.plot(
                c["C"].to_numpy(),
                c["reward_fit"].to_numpy(),
                color=plt.get_cmap(CMAP)(norm(n)),
                lw=1.8,
            )
        ax.plot([], [], color="grey", lw=1.8, label="per-n sigmoid fits")
    ax.set_xscale("log")
    ax.set_xlabel(label(x))
    ax.set_ylabel(label(y))
    ax.legend(loc="upper left", fontsize="small")
    if norm is not None:
        _n_colorbar(ax, norm)
    return ax


def plot_n_star(result: NStarResult, ax: Axes, *, show_raw: bool = True) -> Axes:
    """n*(C): raw envelope, running average, fitted sigmoid of log n* with its bootstrap band,
    and the saturation value with its interval."""
    t = result.table
    if t.height == 0:
        return _nothing(ax, f"n*(C) not identifiable: {result.reason}")
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
            band = "95% bootstrap interval of the level" if flat else "95% bootstrap band"
            ax.fill_between(C, lo, hi, color="black", alpha=0.15, lw=0, label=band)
    if np.isfinite(result.n_saturation):
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
    ax.set_ylabel(f"n* (rollouts per problem), by {result.metric.removeprefix('eval/')}")
    ax.legend(loc="upper left", fontsize="small")
    if result.status != "ok":
        ax.set_title(f"{result.status}: {result.reason[:80]}", fontsize="small")
    return ax


def plot_tradeoff(result: TradeoffResult, ax: Axes) -> Axes:
    """Reward against M for every split (B_p, n) of a fixed batch B, coloured by n, with the
    small-M and large-M windows that decide the winners shaded."""
    if result.curves.height == 0:
        return _nothing(ax, f"B = {result.B}: {result.reason}")
    norm = n_norm(result.curves["n"].unique().to_list())
    for (b_p, n), c in result.curves.filter(pl.col("step") > 0).group_by(
        ["B_p", "n"], maintain_order=True
    ):
        ax.plot(
            c["step"].to_numpy(),
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
    ax.set_xlabel(label("step"))
    ax.set_ylabel(label(result.metric))
    ax.set_title(f"fixed batch B = B_p·n = {result.B}")
    ax.legend(fontsize="x-small")
    return ax


def plot_metric_effect(result: MetricEffect, ax: Axes) -> Axes:
    """n*(C) under each metric (avg@k, best@k, worst@k): which metric a larger n serves."""
    if result.table.height == 0:
        return _nothing(ax, "n*(C) not identifiable under any metric")
    for i, ((metric,), t) in enumerate(result.table.group_by(["metric"], maintain_order=True)):
        color = plt.get_cmap("tab10")(i)
        C = t["C"].to_numpy()
        sat = result.results[metric].n_saturation
        ax.plot(
            C,
            t["fit"].to_numpy(),
            color=color,
            lw=2,
            label=f"{metric.removeprefix('eval/')} (saturates ≈ {sat:.0f})",
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


def plot_rho_frontier(result: RhoFrontier, ax: Axes) -> Axes:
    """Reward against ρ inside the IsoFLOP band, per reward system: runs, quadratic fit, ρ*."""
    if result.points.height == 0:
        lo, hi = result.band
        return _nothing(ax, f"no evaluation point with FLOPs in [{lo:.3g}, {hi:.3g}]")
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
            lo_r, hi_r = float(pts["rho"].min()), float(pts["rho"].max())
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


def plot_curves(
    curves: pl.DataFrame, ax: Axes, *, x: str, y: str, by: str, style: str | None = None
) -> Axes:
    """Seed-averaged curves (`isolab.study.summaries.curves`) of `y` against `x`, one colour per value
    of `by` (and one line style per value of `style`), with a ±1 std band over seeds."""
    if curves.height == 0:
        return _nothing(ax, f"no finite {y} to plot")
    colours = {
        v: plt.get_cmap("tab10")(i % 10)
        for i, v in enumerate(curves[by].unique(maintain_order=True).sort())
    }
    styles = ["-", "--", ":", "-."]
    style_of = (
        {v: styles[i % 4] for i, v in enumerate(curves[style].unique().sort())} if style else {}
    )
    keys = [by, style] if style else [by]
    for vals, c in curves.sort(x).group_by(keys, maintain_order=True):
        c = c.filter(pl.col(x) > 0) if ax.get_xscale() == "log" else c
        xs, m = c[x].to_numpy(), c["mean"].to_numpy()
        sd = c["std"].fill_null(0.0).to_numpy()
        colour = colours[vals[0]]
        name = " · ".join(f"{k}={v}" for k, v in zip(keys, vals, strict=True))
        ax.plot(
            xs,
            m,
            color=colour,
            ls=style_of.get(vals[-1], "-"),
            lw=1.6,
            marker="o",
            ms=3,
            label=name,
        )
        if np.any(sd > 0):
            ax.fill_between(xs, m - sd, m + sd, color=colour, alpha=0.12, lw=0)
    ax.set_xlabel(label(x))
    ax.set_ylabel(label(y))
    ax.legend(fontsize="x-small")
    return ax


def plot_final(final: pl.DataFrame, ax: Axes, *, x: str, by: str, y_label: str) -> Axes:
    """Final result (`isolab.study.summaries.final`) against a swept value `x`, one line per `by`,
    with ±1 std over seeds."""
    if final.height == 0:
        return _nothing(ax, "no finished runs to plot")
    for i, ((v,), g) in enumerate(final.sort(x).group_by([by], maintain_order=True)):
        sd = g["final_std"].fill_null(0.0).to_numpy()
        ax.errorbar(
            g[x].to_numpy(),
            g["final"].to_numpy(),
            yerr=sd,
            color=plt.get_cmap("tab10")(i % 10),
            marker="o",
            capsize=3,
            lw=1.6,
            label=f"{by}={v}",
        )
    ax.set_xlabel(label(x))
    ax.set_ylabel(y_label)
    ax.legend(fontsize="x-small")
    return ax


def plot_bought(final: pl.DataFrame, ax: Axes, *, by: str) -> Axes:
    """What an equal FLOP budget bought per group: rollouts and optimizer steps (log bars)."""
    if final.height == 0:
        return _nothing(ax, "no finished runs to plot")
    names = [str(v) for v in final[by].to_list()]
    pos = np.arange(len(names))
    ax.bar(pos - 0.2, final["rollouts"].to_numpy(), width=0.4, label="rollouts", color="tab:blue")
    ax.bar(pos + 0.2, final["steps"].to_numpy(), width=0.4, label="updates (M)", color="tab:orange")
    ax.set_xticks(pos, names, fontsize="small")
    ax.set_yscale("log")
    ax.set_ylabel("bought with the FLOP budget")
    ax.legend(fontsize="x-small")
    return ax


def tidy(fig: Any) -> Any:
    """Readable log-10 axes on every panel of `fig`: major ticks at 1, 2, 5 × 10^k labelled
    as plain numbers (1e+11 style above 10^5), no minor labels (which overlap on short ranges)."""

    def fmt(v: float, _pos: int) -> str:
        return f"{v:.0e}" if v >= 1e5 else f"{v:,.0f}" if v >= 1 else f"{v:g}"

    for ax in fig.axes:
        for axis, scale in ((ax.xaxis, ax.get_xscale()), (ax.yaxis, ax.get_yscale())):
            if scale != "log" or getattr(axis.get_transform(), "base", 10) != 10:
                continue
            axis.set_major_locator(mticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            axis.set_major_formatter(mticker.FuncFormatter(fmt))
            axis.set_minor_formatter(mticker.NullFormatter())
    return fig
