"""One sweep's report as a page (`isolab report`): the frontier and n*(C) of
`isolab.study.frontier.frontier_report` (what `isolab frontier` prints), the stacked
FLOP split, the avg/best/worst@k curves, the curated studies' verdicts on these runs, the
recommendation and the runs table."""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl
from matplotlib.figure import Figure

from isolab import plots
from isolab.frontier import allocation
from isolab.study.frontier import frontier_report, settings
from isolab.study.pages import html
from isolab.study.pages.figures import plot_flop_shares, plot_flop_split
from isolab.study.pages.tables import (
    final_shares,
    flop_split,
    label_columns,
    representative,
    run_noise,
    runs_table,
    short,
)
from isolab.study.pages.verdicts import describe, saved_verdicts, verdict_table
from isolab.study.report import Report, figure_row, fmt
from isolab.study.summaries import curves
from isolab.table import run_column
from isolab.vocab import DEFAULT_X, DEFAULT_Y, eval_metric

_STAT_AT_K = re.compile(r"^eval/(avg|best|worst)@(\d+)$")
#: (label, runs) per setting, as `isolab.study.frontier.settings` gives them.
Groups = list[tuple[str, pl.DataFrame]]


@dataclass(frozen=True)
class Page:
    """A rendered page: its title, the HTML document and how many figures it embeds."""

    title: str
    html: str
    figures: int


def report_page(
    df: pl.DataFrame,
    experiment: str,
    *,
    source: str = "",
    metric: str = DEFAULT_Y,
    x: str = DEFAULT_X,
    budget: float | None = None,
    n_boot: int = 200,
) -> Page:
    """The report of one sweep's runs table `df` (FINISHED runs) as one self-contained page.

    Args:
        experiment: the sweep's experiment; a curated study's (`nstar/cpu/main`) brings that
            study's saved verdicts.
        source: where the runs were read (shown on the page).
        metric, x, budget, n_boot: as `frontier_report` takes them.

    Raises:
        ValueError: from `frontier_report`, naming what the runs lack.
    """
    x, _ = allocation.comparison_axis(df, x, budget)  # flops/total where allocations differ
    rep = frontier_report(df, experiment, metric=metric, x=x, budget=budget, n_boot=n_boot)
    groups = [(g.label, g.frame) for g in allocation.groups(df)]
    rep.summary.append(_noise(groups, metric))
    figures = _Figures()
    sections = [
        ("advice", "Recommendation", html.bullets(rep.summary)),
        ("frontier", "Frontier and n*(C)", _frontier(rep, groups, figures)),
        ("flops", "FLOP split", _flop_split(groups, x, figures)),
        ("metrics", f"{_family_name(metric)} curves", _metrics(rep, groups, metric, x, figures)),
    ]
    if any(k.startswith("allocators") for k in rep.figures):
        sections.append(("allocators", "Allocators at equal FLOPs", _allocators(rep, df, figures)))
    if any(k.startswith("tradeoff") for k in rep.figures):
        sections.append(
            ("tradeoff", "n against B_p at a fixed batch", _tradeoff(rep, groups, figures))
        )
    progress = [
        figures.add(
            rep.figures[f"lr_sum{_suffix(label)}"],
            f"{label} {short(metric)} "
            "against Σlr (learning rate summed over the updates), colour = n",
        )
        for label, _ in groups
        if f"lr_sum{_suffix(label)}" in rep.figures
    ]
    if progress:
        sections.append(
            (
                "progress",
                "Reward against optimizer progress (Σlr)",
                f'<div class="row">{"".join(progress)}</div>',
            )
        )
    if "rho_frontier" in rep.figures:
        rho = figures.add(rep.figures["rho_frontier"], "reward against ρ at equal FLOPs")
        sections.append(("rho", "ρ frontier", rho + html.table(rep.tables["rho_frontier"])))
    sections.append(("verdicts", "Verdicts", _verdicts(experiment)))
    runs = runs_table(df, metric)
    sections.append(("runs", f"Runs ({runs.height})", html.table(runs, "runs", fold=10_000)))
    title = f"isolab report: {experiment}"
    return Page(title, html.page(title, _meta(df, source, metric, x), sections), figures.count)


class _Figures:
    """Embeds figures and counts them."""

    def __init__(self) -> None:
        self.count = 0

    def add(self, fig: Figure, caption: str = "") -> str:
        self.count += 1
        return html.figure(plots.tidy(fig), caption)


def _noise(groups: Groups, metric: str) -> str:
    """The noise of one run's final `metric` per setting, in a sentence: the scale every
    difference on the page is read on."""
    parts = []
    for label, sdf in groups:
        n = run_noise(sdf, metric)
        if n is None:
            continue
        seeds = f"between seeds {fmt(n.total_sd)} ({n.dof} df)" if n.dof else "no seed replicates"
        parts.append(f"{label or 'all runs'}: evaluation {fmt(n.eval_sd)}, {seeds}")
    if not parts:
        return f"No noise estimate for {metric} (not an evaluation metric)."
    return f"Noise of one run's final {short(metric)}: " + "; ".join(parts) + "."


def _suffix(label: str) -> str:
    return f"-{label}" if label else ""


def _heading(label: str) -> str:
    return f"<h3>{html.esc(label)}</h3>" if label else ""


def _frontier(rep: Report, groups: Groups, figures: _Figures) -> str:
    out = []
    for label, _ in groups:
        s = _suffix(label)
        parts = [_heading(label)]
        row = [
            figures.add(rep.figures[name], caption)
            for name, caption in (
                (f"frontier{s}", "evaluation points by n, the frontier f(C) and per-n fits"),
                (f"n_star{s}", "n*(C): the compute-optimal n and its saturation"),
            )
            if name in rep.figures
        ]
        parts.append(f'<div class="row">{"".join(row)}</div>' if row else "")
        if f"per_n_fits{s}" in rep.tables:
            parts.append(html.table(rep.tables[f"per_n_fits{s}"], "per-n sigmoid fits"))
        if f"n_star{s}" in rep.tables:
            parts.append(html.table(rep.tables[f"n_star{s}"], "n*(C) at each compute"))
        if not row:
            parts.append(html.paragraph("No frontier fit: the runs vary no n."))
        out.append("".join(parts))
    return "".join(out)


def _allocators(rep: Report, df: pl.DataFrame, figures: _Figures) -> str:
    """Per setting whose runs vary `allocation`: the allocators' frontiers on one FLOPs axis,
    read at common FLOPs, and a table per allocator with its discarded share."""
    out = []
    for label, _ in settings(df):
        s = _suffix(label)
        if f"allocators{s}" not in rep.figures:
            continue
        caption = "each allocator's frontier of seed means against FLOPs"
        parts = [_heading(label), figures.add(rep.figures[f"allocators{s}"], caption)]
        parts.append(html.table(rep.tables[f"allocators_at_equal_flops{s}"], "at equal FLOPs"))
        prefix = f"discarded{s}-"
        for name, table in rep.tables.items():
            if name.startswith(prefix):
                title = f"allocation {name.removeprefix(prefix)}: discarded share"
                parts.append(html.table(table, title))
        out.append("".join(parts))
    return "".join(out)


def _flop_split(groups: Groups, x: str, figures: _Figures) -> str:
    out = []
    for label, sdf in groups:
        split = flop_split(sdf, x)
        if split.height == 0:
            out.append(_heading(label) + html.paragraph("These runs carry no FLOP ledger."))
            continue
        labels = label_columns(sdf)
        picks = representative(split)
        fig, axes = figure_row(len(picks), 4.6, 3.8)
        for ax, config in zip(axes, picks, strict=True):
            same = [pl.col(c).eq_missing(pl.lit(v)) for c, v in config.items()]
            rows = split.filter(pl.all_horizontal(same)) if same else split
            name = ", ".join(f"{c} = {v}" for c, v in config.items() if c in labels[:3])
            plot_flop_split(rows, ax, x=x, title=name)
        top = max(ax.get_ylim()[1] for ax in axes)
        for ax in axes:  # one scale: the configurations' totals compare at a glance
            ax.set_ylim(0, top)
        stacks = figures.add(
            fig,
            "search, learning and reward FLOPs against compute, for the smallest, a "
            "middle and the largest configuration (seed mean)",
        )
        fig, (ax,) = figure_row(1, 8.0, 3.8)
        plot_flop_shares(final_shares(split), ax, labels=labels)
        shares = figures.add(fig, "each configuration's FLOP split at its last evaluation")
        out.append(_heading(label) + stacks + shares)
    return "".join(out)


def _family(metric: str, columns: list[str]) -> list[str]:
    """avg, best and worst at the metric's k (those the table has), else the metric alone."""
    found = _STAT_AT_K.match(metric)
    if not found:
        return [metric]
    k = int(found.group(2))
    return [m for m in (eval_metric(s, k) for s in ("avg", "best", "worst")) if m in columns]


def _family_name(metric: str) -> str:
    found = _STAT_AT_K.match(metric)
    return f"avg/best/worst@{found.group(2)}" if found else short(metric)


def _metrics(rep: Report, groups: Groups, metric: str, x: str, figures: _Figures) -> str:
    out = []
    for label, sdf in groups:
        s = _suffix(label)
        family = _family(metric, sdf.columns)
        by = [c for c in ("n", "B_p") if c in sdf.columns] or [run_column(sdf)]
        fig, axes = figure_row(len(family), 4.6, 3.8)
        for i, (ax, y) in enumerate(zip(axes, family, strict=True)):
            ax.set_xscale("log")
            plots.plot_curves(
                curves(sdf, by, x, y), ax, x=x, y=y, by=by[0], style=by[1] if len(by) > 1 else None
            )
            legend = ax.get_legend()
            if i and legend is not None:  # one legend for the row
                legend.remove()
        parts = [_heading(label), figures.add(fig, "seed-mean learning curves, ±1 sd over seeds")]
        if f"metric_effect{s}" in rep.figures:
            parts.append(figures.add(rep.figures[f"metric_effect{s}"], "n*(C) under each metric"))
            parts.append(html.table(rep.tables[f"metric_effect{s}"], "n*(C) per metric"))
        out.append("".join(parts))
    return "".join(out)


def _tradeoff(rep: Report, groups: Groups, figures: _Figures) -> str:
    out = []
    for label, _ in groups:
        s = _suffix(label)
        if f"tradeoff{s}" not in rep.figures:
            continue
        out.append(_heading(label) + figures.add(rep.figures[f"tradeoff{s}"]))
        out.append(html.table(rep.tables[f"tradeoff{s}"], "winners"))
    return "".join(out)


def _verdicts(experiment: str) -> str:
    saved = saved_verdicts(experiment)
    if not saved:
        return html.paragraph(
            f"{experiment} is not a sweep of a curated study (named <study>/<scale>/<sweep>), "
            "so no paper's claim was tested on it."
        )
    out = []
    for s in saved:
        out.append(html.paragraph(describe(s)))
        if s.verdicts:
            out.append(html.table(verdict_table(s), f"verdicts of {s.study.name}", styled="call"))
    return "".join(out)


def _meta(df: pl.DataFrame, source: str, metric: str, x: str) -> list[str]:
    from isolab import __version__

    key = run_column(df)
    lines = [f"source: {source}"] if source else []
    lines.append(
        f"{df[key].n_unique()} finished runs, {df.height} evaluation points; metric {metric}, "
        f"compute axis {x}; isolab {__version__}"
    )
    return lines
