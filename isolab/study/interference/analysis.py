"""07 · Interference between problems: forgetting events per unit of compute, by n."""

from __future__ import annotations

import numpy as np
import polars as pl
from matplotlib.figure import Figure

from isolab import plots
from isolab.study import claims
from isolab.study.interference import figures
from isolab.study.interference import forgetting as itf
from isolab.study.report import Report, figure_row, fmt, splits_of
from isolab.table import as_int
from isolab.tracking.columns import counts_column
from isolab.vocab import RUN_KEY, STEP

#: The evaluation set of `seen` (the run's own training problems).
SEEN = "seen"
#: Problems drawn in the per-problem figure.
SHOWN_PROBLEMS = 8


def _widest_bp(df: pl.DataFrame) -> pl.DataFrame:
    """The runs of the B_p with the most values of n (nstar: B_p = 16, n = 2 … 128)."""
    if "B_p" not in df.columns or df["B_p"].n_unique() < 2:
        return df
    widest = df.group_by("B_p").agg(pl.col("n").n_unique()).sort("n", "B_p", descending=True)
    return df.filter(pl.col("B_p") == widest["B_p"][0])


def _moving_problems(df: pl.DataFrame, counts: str, how_many: int) -> np.ndarray:
    """The problems whose solve rate falls most between a run's consecutive checkpoints (the
    falls summed over runs), the ones where forgetting, if any, shows."""
    falls = None
    for _, run in (
        df.filter(pl.col(counts).is_not_null()).sort(STEP).group_by(RUN_KEY, maintain_order=True)
    ):
        table = np.asarray(run[counts].to_list(), float)
        if table.shape[0] < 2:
            continue
        part = np.clip(-np.diff(table, axis=0), 0, None).sum(0)
        falls = part if falls is None else falls + part
    if falls is None:
        return np.array([], dtype=int)
    return np.sort(np.argsort(-falls, kind="stable")[:how_many])


def _sets(data: dict[str, pl.DataFrame]) -> list[tuple[str, pl.DataFrame, str]]:
    """(label, runs, counts column) of every reading: validation per split of `main`,
    and the seen training problems of `seen` where it has them."""
    main = data["main"]
    out = [
        (f"{s}, validation", main.filter(pl.col("split") == s), counts_column())
        for s in splits_of(main)
    ]
    seen = data.get(SEEN)
    column = counts_column(SEEN)
    if seen is not None and column in seen.columns and seen[column].null_count() < seen.height:
        for s in splits_of(seen):
            out.append((f"{s}, seen training problems", seen.filter(pl.col("split") == s), column))
    return out


def interference(data: dict[str, pl.DataFrame], scale: str = "cpu") -> Report:
    """Forgetting events between checkpoints per n at equal compute, against progress, and the
    per-problem curves behind them."""
    rep = Report("interference", scale)
    readings = _sets(data)
    fig_f, ax_f = figure_row(len(readings), width=5.2)
    fig_g, ax_g = figure_row(len(readings), width=5.2)
    for i, (name, df, column) in enumerate(readings):
        key = name.replace(", ", "_").replace(" ", "_")
        iv = itf.intervals(df, column) if df.height else pl.DataFrame()
        if iv.height == 0:
            plots.empty_panel(ax_f[i], f"{name}: no per-problem counts")
            plots.empty_panel(ax_g[i], f"{name}: no per-problem counts")
            continue
        start = itf.common_start(iv)
        runs = itf.per_run(iv, start)
        shown = _widest_bp(iv)
        figures.plot_forgetting(shown, ax_f[i])
        ax_f[i].set_title(
            f"{name} (B_p = {shown['B_p'][0]})" if "B_p" in iv.columns else name, fontsize="small"
        )
        figures.plot_excess_vs_gain(runs, ax_g[i])
        ax_g[i].set_title(f"{name}: intervals from C = {start:,.0f}", fontsize="small")
        by_n = (
            runs.group_by("n")
            .agg(
                pl.col("forgetting", "expected", "excess", "gain", "level").mean(),
                pl.len().alias("runs"),
            )
            .sort("n")
        )
        rep.tables[f"forgetting_{key}"] = by_n
        rep.tables[f"intervals_{key}"] = iv
        lo, hi = by_n.row(0, named=True), by_n.row(by_n.height - 1, named=True)
        rep.findings[key] = {
            "from_C": start,
            "intervals_per_run": as_int(runs["intervals"].min()),
            "by_n": by_n.to_dicts(),
        }
        rep.summary.append(
            f"{name.capitalize()}: per interval C → 2C from C = {start:,.0f}, "
            f"{fmt(lo['forgetting'])} of problems called falling at n = {lo['n']} "
            f"(expected without change {fmt(lo['expected'])}, gain {fmt(lo['gain'])}), "
            f"{fmt(hi['forgetting'])} at n = {hi['n']} (expected {fmt(hi['expected'])}, gain "
            f"{fmt(hi['gain'])})."
        )
    rep.figures["forgetting"] = plots.tidy(fig_f)
    rep.figures["excess_vs_gain"] = fig_g
    main = data["main"]
    first = splits_of(main)[0]
    shown = _widest_bp(main.filter(pl.col("split") == first))
    problems = _moving_problems(shown, counts_column(), SHOWN_PROBLEMS)
    rates = figures.problem_rates(shown, counts_column(), problems)
    fig_p = Figure(figsize=(12, 5.4), layout="constrained")
    ax_p = fig_p.subplots(2, SHOWN_PROBLEMS // 2, sharex=True, sharey=True).ravel().tolist()
    for ax in ax_p[len(problems) :]:
        ax.set_axis_off()
    for ax, problem in zip(ax_p, problems, strict=False):
        figures.plot_problem_curves(rates, ax, int(problem))
    fig_p.suptitle(
        f"{first}: the {len(problems)} validation problems that move most, solve "
        "rate (seed mean) against compute; colour n (yellow: large)",
        fontsize="small",
    )
    rep.figures["problems"] = plots.tidy(fig_p)
    rep.add_verdicts(claims.evaluate("interference", data))
    return rep
