"""Two sweeps side by side at equal compute as a page (`isolab compare A B`): their seed-mean
frontiers on one compute axis, each one's best configuration at common compute points, the
difference B − A there with the noise it is read against, each sweep's own frontier, and
what differs between their grids."""

from __future__ import annotations

import math
import statistics

import polars as pl

from isolab import plots
from isolab.plots.style import literal
from isolab.study.pages import html
from isolab.study.pages.figures import plot_difference, plot_frontiers
from isolab.study.pages.report import Page
from isolab.study.pages.tables import (
    differences,
    equal_compute,
    label_columns,
    run_noise,
    seed_frontier,
    shared_settings,
    short,
)
from isolab.study.report import figure_row
from isolab.table import as_float, run_column
from isolab.vocab import DEFAULT_X, DEFAULT_Y


def compare_page(
    a: pl.DataFrame,
    b: pl.DataFrame,
    names: tuple[str, str],
    *,
    sources: tuple[str, str] = ("", ""),
    metric: str = DEFAULT_Y,
    x: str = DEFAULT_X,
) -> Page:
    """Runs tables `a` and `b` (FINISHED runs, named `names`) compared at equal compute `x` on
    `metric`, as one self-contained page."""
    groups, only = shared_settings(a, b)
    drawn = (literal(names[0]), literal(names[1]))  # in figures: `$` is not math there
    lim = _shared_limits(a, b, x)
    figures, summary, parts, own = 0, [], [], []
    for label, sa, sb in groups:
        table = equal_compute(sa, sb, x, metric)
        summary.append(_sentence(label, table, x, metric))
        noise = _noise(label, sa, sb, metric)
        summary += [noise] if noise else []
        fig, (ax_f, ax_d) = figure_row(2, 6.0, 4.2)
        fronts = {drawn[0]: seed_frontier(sa, x, metric), drawn[1]: seed_frontier(sb, x, metric)}
        plot_frontiers(fronts, ax_f, x=x, y=metric)
        plot_difference(table, ax_d, x=x, y=metric, title=f"B = {drawn[1]} minus A = {drawn[0]}")
        _share_x(fig, lim)
        parts.append(
            _heading(label)
            + html.figure(plots.tidy(fig), "seed-mean frontiers, and B − A at equal compute")
            + html.table(_signed(table), f"{short(metric)} at equal compute", fold=50)
        )
        fig, axes = figure_row(2, 6.0, 4.2)
        for ax, sdf, name in zip(axes, (sa, sb), drawn, strict=True):
            plots.plot_frontier(sdf, ax, x=x, y=metric)
            ax.set_title(name, fontsize="small")
        lo = min(ax.get_ylim()[0] for ax in axes)
        hi = max(ax.get_ylim()[1] for ax in axes)
        for ax in axes:
            ax.set_ylim(lo, hi)
        _share_x(fig, lim)
        own.append(_heading(label) + html.figure(plots.tidy(fig), "each sweep's own frontier"))
        figures += 2
    if only:
        summary.append("Settings in one sweep only (not compared): " + ", ".join(only) + ".")
    legend = html.paragraph(f"A = {names[0]}; B = {names[1]}. B − A > 0: B is better.")
    sections = [
        ("summary", "Summary", legend + html.bullets(summary)),
        ("equal-compute", "At equal compute", "".join(parts)),
        ("frontiers", "Each sweep's frontier", "".join(own)),
        ("differs", "What differs", html.table(differences(a, b), fold=100)),
    ]
    title = f"isolab compare: {names[0]} vs {names[1]}"
    meta = [
        f"{tag} = {name}: {a_or_b[run_column(a_or_b)].n_unique()} finished runs"
        + (f" from {src}" if src else "")
        for tag, name, a_or_b, src in zip("AB", names, (a, b), sources, strict=True)
    ]
    meta.append(f"metric {metric}, compute axis {x}")
    return Page(title, html.page(title, meta, sections), figures)


def _heading(label: str) -> str:
    return f"<h3>{html.esc(label)}</h3>" if label else ""


def _signed(table: pl.DataFrame) -> pl.DataFrame:
    """The difference column as text with its sign and three decimals (+0.012, -0.003)."""
    return table.with_columns(
        pl.col("B − A").map_elements(
            lambda v: f"{v:+.3f}" if math.isfinite(v) else "–", return_dtype=pl.String
        )
    )


def _shared_limits(a: pl.DataFrame, b: pl.DataFrame, x: str) -> tuple[float, float] | None:
    """The compute range both sweeps span together (one x axis for every panel)."""
    xs = pl.concat([a.select(x), b.select(x)]).filter(pl.col(x).is_finite() & (pl.col(x) > 0))
    if xs.height == 0:
        return None
    lo, hi = as_float(xs[x].min()), as_float(xs[x].max())
    return lo / 1.3, hi * 1.3


def _share_x(fig, lim: tuple[float, float] | None) -> None:
    if lim is None:
        return
    for ax in fig.axes:
        if ax.get_xscale() == "log":
            ax.set_xlim(*lim)


def _sentence(label: str, table: pl.DataFrame, x: str, metric: str) -> str:
    where = f"{label}: " if label else ""
    rows = table.filter(pl.col("B − A").is_finite())
    if rows.height == 0:
        return f"{where}the two sweeps share no compute range on {x}; nothing to compare."
    last = rows.row(-1, named=True)
    name = short(metric)
    mean = statistics.fmean(rows["B − A"].to_list())
    return (
        f"{where}at {x} = {html.cell(float(last[x]))}, the largest both reach, B − A = "
        f"{last['B − A']:+.3f} {name} (A: {last['A best']}, {last[f'A {name}']:.3f}; "
        f"B: {last['B best']}, {last[f'B {name}']:.3f}); over {rows.height} common compute "
        f"points the mean difference is {mean:+.3f}."
    )


def _noise(label: str, a: pl.DataFrame, b: pl.DataFrame, metric: str) -> str:
    """The noise of a difference of two configurations' seed means, in a sentence: one run's
    seed-to-seed sd in each sweep (evaluation sd without replicates), over its seeds."""
    parts, var = [], 0.0
    for tag, df in (("A", a), ("B", b)):
        noise = run_noise(df, metric)
        if noise is None:
            return ""
        sd = noise.total_sd if math.isfinite(noise.total_sd) else noise.eval_sd
        seeds = _seeds_per_config(df)
        var += sd**2 / seeds
        what = "between seeds" if math.isfinite(noise.total_sd) else "evaluation only"
        parts.append(f"{tag} {sd:.3f} ({what}, {seeds} seeds)")
    where = f"{label}: " if label else ""
    return (
        f"{where}noise of one run's final {short(metric)}: {', '.join(parts)}; a difference "
        f"of seed means has sd ≈ {math.sqrt(var):.3f}, so differences smaller than about "
        f"{2 * math.sqrt(var):.3f} are within noise."
    )


def _seeds_per_config(df: pl.DataFrame) -> int:
    labels, key = label_columns(df), run_column(df)
    if not labels:
        return max(1, df[key].n_unique())
    counts = df.group_by(labels).agg(pl.col(key).n_unique())[key].to_list()
    return max(1, int(statistics.median(counts))) if counts else 1
