"""03 · More rollouts or more problems at a fixed batch B = B_p·n."""

from __future__ import annotations

import polars as pl

from isolab import frontier as fr
from isolab import plots
from isolab.study import claims
from isolab.study.report import Report, Y, add_noise, figure_row, fmt, splits_of


def _modal_batch(df: pl.DataFrame) -> int:
    b = df.with_columns(B=pl.col("n") * pl.col("B_p")).group_by("B").agg(pl.col("n").n_unique())
    return int(b.sort(["n", "B"], descending=True)["B"][0])


def n_vs_bp(data: dict[str, pl.DataFrame], scale: str = "cpu") -> Report:
    """Who wins at fixed B = B_p·n, by number of steps M, per split."""
    rep = Report("n-vs-bp", scale)
    df = data["main"]
    B = _modal_batch(df)
    splits = splits_of(df)
    fig, axes = figure_row(len(splits))
    for ax, split in zip(axes, splits, strict=True):
        res = fr.tradeoff_fixed_batch(df.filter(pl.col("split") == split), B, y=Y)
        plots.plot_tradeoff(res, ax)
        ax.set_title(f"{split} split, B = {B}", fontsize="small")
        if res.status != "ok":
            rep.summary.append(f"{split.capitalize()} split: {res.reason}.")
            continue
        rep.tables[f"winners_{split}"] = res.winners
        rep.tables[f"per_step_{split}"] = res.per_step
        w = {r["regime"]: r for r in res.winners.iter_rows(named=True)}
        small, large = w["small M"], w["large M"]
        rep.findings[split] = {
            "B": B,
            "small_M": small,
            "large_M": large,
            "crossover_M": res.crossover_M,
        }
        rep.summary.append(
            f"{split.capitalize()} split, B = {B}: with few steps (M {small['M_lo']:.0f}–"
            f"{small['M_hi']:.0f}) n = {small['n']} × B_p = {small['B_p']} leads by "
            f"{fmt(small['margin'])}; with many (M {large['M_lo']:.0f}–{large['M_hi']:.0f}) "
            f"n = {large['n']} × B_p = {large['B_p']} by {fmt(large['margin'])} (seed means; "
            "whether the best n moves with M is the test below)."
        )
    rep.figures["tradeoff"] = plots.tidy(fig)
    add_noise(rep, df)
    rep.add_verdicts(claims.evaluate("n-vs-bp", data))
    return rep
