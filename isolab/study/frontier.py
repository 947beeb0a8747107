"""The frontier analysis of any runs table (what `isolab frontier` shows): per setting, n*(C)
with its per-n fits, the metric effects, the fixed-batch trade-off and a recommendation (per
allocator too, and the allocators side by side at equal FLOPs, where the runs vary
`allocation`); and the ρ frontier per reward system when the runs span several update
fractions. The curated
studies compose the same functions of `isolab.frontier`; this one asks no question of a paper.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from isolab import frontier as fr
from isolab import plots
from isolab.frontier import allocation
from isolab.frontier.allocation import settings
from isolab.frontier.answer import stated
from isolab.plots.allocation import plot_allocator_frontiers
from isolab.study.report import Report, figure_row
from isolab.table import as_float
from isolab.verdicts import matched
from isolab.vocab import FLOPS_TOTAL, RHO


def busiest_batch(df: pl.DataFrame) -> int | None:
    """The batch B with the most (B_p, n) splits: where the fixed-B trade-off says most."""
    if not {"n", "B_p"} <= set(df.columns):
        return None
    splits = (
        df.select("n", "B_p")
        .unique()
        .with_columns(B=pl.col("n") * pl.col("B_p"))
        .group_by("B")
        .len()
        .sort(["len", "B"], descending=[True, True])
    )
    return int(splits["B"][0]) if splits.height and splits["len"][0] > 1 else None


def _matched_reading(rep: Report, sdf: pl.DataFrame, metric: str, suffix: str, title: str) -> None:
    """n at equal compute, at equal updates (Σlr) and at equal avg@4 (`isolab.verdicts.matched`),
    with the figure of `metric` against Σlr coloured by n (issue 45)."""
    fig, (ax,) = figure_row(1, 7.0, 4.5)
    plots.plot_lr_sum(sdf, ax, y=metric)
    rep.figures[f"lr_sum{suffix}"] = fig
    text, numbers = matched.readings(sdf, metric, prefix="")
    rep.findings[f"matched{suffix}"] = numbers
    rep.summary.append(f"n at matched compute, updates and reward{title}: {text}")


def _allocators(rep: Report, sdf: pl.DataFrame, metric: str, x: str, label: str) -> None:
    """The allocators of one setting side by side at equal FLOPs (issue 51): their frontiers
    on one axis, the table read at common FLOPs with the sentence naming the best allocator
    with its n and B_p, and per allocator its configurations with the discarded share."""
    suffix = f"-{label}" if label else ""
    fig, (ax,) = figure_row(1, 7.0, 4.5)
    plot_allocator_frontiers(allocation.allocator_frontiers(sdf, metric, x), ax, x=x, y=metric)
    rep.figures[f"allocators{suffix}"] = fig
    equal = allocation.at_equal_flops(sdf, metric, x)
    rep.tables[f"allocators_at_equal_flops{suffix}"] = equal
    rep.findings[f"allocators{suffix}"] = equal.to_dicts()
    said = allocation.equal_flops_sentence(sdf, equal, metric, x)
    rep.summary.append(f"{label}: {said}" if label else said)
    runs = allocation.allocator_runs(sdf, metric)
    for name in allocation.allocators(runs):
        group = "-".join(p for p in (label, name) if p)
        rep.tables[f"discarded-{group}"] = runs.filter(pl.col(allocation.ALLOCATION) == name)


def frontier_report(
    df: pl.DataFrame,
    name: str,
    *,
    metric: str = fr.DEFAULT_Y,
    x: str = fr.DEFAULT_X,
    budget: float | None = None,
    batch: int | None = None,
    band: tuple[float, float] | None = None,
    n_boot: int = 200,
) -> Report:
    """Figures, tables and summary sentences of the frontier analysis of `df` (FINISHED runs).

    Runs that vary `allocation` are analysed per allocator (`isolab.frontier.allocation`:
    each its own frontier, n*(C) and recommendation, the allocator named in it) and compared
    at equal FLOPs: `x` becomes flops/total, and the summary says so.

    Raises:
        ValueError: naming what the runs lack (e.g. a FLOP ledger, where allocations differ).
    """
    rep = Report(name, "")
    x, axis_note = allocation.comparison_axis(df, x, budget)
    if axis_note:
        rep.summary.append(axis_note)
    metrics = [m for m in dict.fromkeys([metric, *fr.DEFAULT_METRICS]) if m in df.columns]
    for group in allocation.groups(df):  # per setting, and per allocator where they differ
        label, sdf = group.label, group.frame
        suffix = f"-{label}" if label else ""
        title = f" ({group.spoken})" if label else ""
        if "n" not in sdf.columns or sdf["n"].n_unique() < 2:
            rep.summary.append(f"n*(C){title}: skipped, the runs vary no n.")
            continue
        effect = fr.metric_effect(sdf, metrics, x=x, n_boot=n_boot)
        res = effect.results[metric]
        rep.tables[f"per_n_fits{suffix}"] = res.per_n.select("n", "R0", "A", "C_mid", "B", "status")
        rep.tables[f"n_star{suffix}"] = res.table
        rep.tables[f"metric_effect{suffix}"] = effect.summary
        for fig_name, draw in (
            (
                "frontier",
                lambda ax, s=sdf, r=res: plots.plot_frontier(s, ax, x=x, y=metric, result=r),
            ),
            ("n_star", lambda ax, r=res: plots.plot_n_star(r, ax)),
            ("metric_effect", lambda ax, e=effect: plots.plot_metric_effect(e, ax)),
        ):
            fig, (ax,) = figure_row(1, 7.0, 4.5)
            draw(ax)
            rep.figures[f"{fig_name}{suffix}"] = fig
        _matched_reading(rep, sdf, metric, suffix, title)
        B = batch if batch is not None else busiest_batch(sdf)
        if B is not None:
            trade = fr.tradeoff_fixed_batch(sdf, B, y=metric)
            if trade.status == "ok":
                rep.tables[f"tradeoff{suffix}"] = trade.winners
                fig, (ax,) = figure_row(1, 7.0, 4.5)
                plots.plot_tradeoff(trade, ax)
                rep.figures[f"tradeoff{suffix}"] = fig
            else:
                rep.summary.append(f"fixed batch B = {B}{title}: {trade.reason}")
        # a recommendation even where n*(C) has no saturation (it falls, or the per-n curves
        # are flat): the runs at the budget still rank the n, with their noise and the edge
        if "B_p" not in sdf.columns:
            rep.summary.append(f"no recommendation{title}: the runs table has no B_p column")
            continue
        rec = fr.recommend(sdf, budget or as_float(sdf[x].max()), x=x, y=metric, n_star=res)
        rep.findings[f"recommendation{suffix}"] = rec.summary
        rep.summary.append(stated(rec, group.spoken))  # the one sentence every output states
        if np.isfinite(rec.n_star_ci[0]):
            lo, hi = rec.n_star_ci
            rep.summary.append(f"n*{title}: {rec.ci_level:.0%} CI [{lo:.0f}, {hi:.0f}]")
        said = set(rec.noise_text)
        rep.summary += [f"hedge{title}: {h}" for h in rec.hedges if h not in said]
        rep.summary += [f"note{title}: {note}" for note in rec.notes]
    for label, sdf in settings(df):
        if allocation.varies(sdf):
            _allocators(rep, sdf, metric, x, label)
    if {FLOPS_TOTAL, RHO, "reward"} <= set(df.columns):
        finite = df.filter(pl.col(RHO).is_finite())
        if finite[RHO].round(2).n_unique() >= 3:
            rho = fr.rho_frontier(df, band, y=metric, n_boot=n_boot)
            rep.tables["rho_frontier"] = rho.fits
            fig, (ax,) = figure_row(1, 7.0, 4.5)
            plots.plot_rho_frontier(rho, ax)
            rep.figures["rho_frontier"] = fig
            rep.findings["rho_band"] = list(rho.band)
    return rep
