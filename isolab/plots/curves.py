"""Figures of the studies' summaries (`isolab.study.summaries`): seed-averaged learning curves,
final results against a swept value, and what an equal FLOP budget bought."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.axes import Axes

from isolab.plots.style import empty_panel, label


def plot_curves(
    curves: pl.DataFrame, ax: Axes, *, x: str, y: str, by: str, style: str | None = None
) -> Axes:
    """Seed-averaged curves (`isolab.study.summaries.curves`) of `y` against `x`, one colour per value
    of `by` (and one line style per value of `style`), with a ±1 std band over seeds."""
    if curves.height == 0:
        return empty_panel(ax, f"no finite {y} to plot")
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
        return empty_panel(ax, "no finished runs to plot")
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
        return empty_panel(ax, "no finished runs to plot")
    names = [str(v) for v in final[by].to_list()]
    pos = np.arange(len(names))
    ax.bar(pos - 0.2, final["rollouts"].to_numpy(), width=0.4, label="rollouts", color="tab:blue")
    ax.bar(pos + 0.2, final["steps"].to_numpy(), width=0.4, label="updates (M)", color="tab:orange")
    ax.set_xticks(pos, names, fontsize="small")
    ax.set_yscale("log")
    ax.set_ylabel("bought with the FLOP budget")
    ax.legend(fontsize="x-small")
    return ax


def plot_optimum(final: pl.DataFrame, ax: Axes, *, y: str, fitted: np.ndarray | None) -> Axes:
    """Each run's last `y` against n (log2 axis) with its seed mean, and a fitted quadratic in
    log2 n (`fitted`: coefficients, highest power first) with its vertex, where given."""
    if final.height == 0:
        return empty_panel(ax, f"no runs with a finite {y}")
    ax.set_xscale("log", base=2)
    ax.scatter(final["n"], final[y], color="grey", s=10, alpha=0.6, label="runs")
    means = final.group_by("n").agg(pl.col(y).mean()).sort("n")
    ax.plot(means["n"], means[y], "o", color="black", label="seed mean")
    if fitted is not None:
        ns = final["n"].to_numpy().astype(float)
        x = np.linspace(np.log2(ns.min()), np.log2(ns.max()), 100)
        ax.plot(2**x, np.polyval(fitted, x), color="tab:red", lw=1.4, label="quadratic in log2 n")
        if fitted[0] < 0:
            v = -fitted[1] / (2 * fitted[0])
            if x[0] < v < x[-1]:
                ax.axvline(2**v, color="tab:red", ls="--", lw=1, label=f"n* ≈ {2**v:.3g}")
    ax.set_xlabel("n (rollouts per problem)")
    ax.set_ylabel(label(y))
    ax.legend(fontsize="x-small")
    return ax


def plot_optima(finals: dict[str, pl.DataFrame], ax: Axes, *, y: str) -> Axes:
    """Each group's last `y` against n (log2 axis), one colour per group: its seed means, a
    quadratic in log2 n through its runs and the quadratic's vertex (dashed) where it is a
    maximum inside the group's grid."""
    finals = {k: f for k, f in finals.items() if f.height}
    if not finals:
        return empty_panel(ax, f"no runs with a finite {y}")
    ax.set_xscale("log", base=2)
    for i, (name, final) in enumerate(finals.items()):
        colour = plt.get_cmap("tab10")(i % 10)
        means = final.group_by("n").agg(pl.col(y).mean()).sort("n")
        ax.plot(means["n"], means[y], "o", color=colour, label=name)
        ax.scatter(final["n"], final[y], color=colour, s=8, alpha=0.35)
        ns = final["n"].to_numpy().astype(float)
        if np.unique(ns).size < 3:
            continue
        fitted = np.polyfit(np.log2(ns), final[y].to_numpy(), 2)
        x = np.linspace(np.log2(ns.min()), np.log2(ns.max()), 100)
        ax.plot(2**x, np.polyval(fitted, x), color=colour, lw=1.2)
        v = -fitted[1] / (2 * fitted[0]) if fitted[0] < 0 else np.nan
        if x[0] < v < x[-1]:
            ax.axvline(2**v, color=colour, ls="--", lw=1, label=f"{name}: n* ≈ {2**v:.3g}")
    ax.set_xlabel("n (rollouts per problem)")
    ax.set_ylabel(label(y))
    ax.legend(fontsize="x-small")
    return ax
