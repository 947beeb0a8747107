"""04 · How the metric (avg@4, best@4, worst@4) moves n*."""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from isolab import frontier as fr
from isolab import plots
from isolab.study import claims, summaries
from isolab.study.report import (
    Report,
    Y,
    add_noise,
    figure_row,
    fmt,
    fmt_sig,
    n_boot,
    splits_of,
)
from isolab.study.summaries import combined
from isolab.vocab import EVAL_PREFIX, EVAL_WORST


def _by_n_at_budget(sdf: pl.DataFrame, metrics: list[str]) -> pl.DataFrame:
    """Per metric and n: the final value of the best B_p (chosen by avg@4) at the budget."""
    best = (
        summaries.final(sdf, ["n", "B_p"], Y)
        .sort("final", descending=True)
        .group_by("n", maintain_order=True)
        .head(1)
        .select("n", "B_p")
    )
    rows = []
    for m in metrics:
        f = summaries.final(sdf, ["n", "B_p"], m).join(best, on=["n", "B_p"], how="semi")
        rows.append(f.with_columns(metric=pl.lit(m.removeprefix(EVAL_PREFIX))))
    return pl.concat(rows, how="diagonal").sort("metric", "n")


def bestk_worstk(data: dict[str, pl.DataFrame], scale: str = "cpu") -> Report:
    """n*(C) under avg@4, best@4 and worst@4, and how each metric moves with n at the budget."""
    rep = Report("bestk-worstk", scale)
    df = combined(data)  # n*(C) over all compute; the at-budget comparison on `main` alone
    metrics = [m for m in fr.DEFAULT_METRICS if m in df.columns]
    splits = splits_of(df)
    fig_e, ax_e = figure_row(len(splits))
    fig_b, ax_b = figure_row(len(splits))
    slopes: dict[str, dict[str, float]] = {}
    for i, split in enumerate(splits):
        sdf = df.filter(pl.col("split") == split)
        eff = fr.metric_effect(sdf, metrics, n_boot=n_boot(scale))
        plots.plot_metric_effect(eff, ax_e[i])
        ax_e[i].set_title(f"{split} split", fontsize="small")
        rep.tables[f"saturation_{split}"] = eff.summary
        main = data["main"].filter(pl.col("split") == split)  # one budget for every n
        by_n = _by_n_at_budget(main, metrics)
        rep.tables[f"by_n_{split}"] = by_n
        ax_b[i].set_xscale("log", base=2)
        plots.plot_final(by_n, ax_b[i], x="n", by="metric", y_label="at the budget (best B_p)")
        ax_b[i].set_title(f"{split} split: each metric against n at the budget", fontsize="small")
        slopes[split] = {}
        for (m,), g in by_n.group_by(["metric"]):
            x = np.log2(g["n"].to_numpy().astype(float))
            slopes[split][m] = (
                float(np.polyfit(x, g["final"].to_numpy(), 1)[0]) if len(x) >= 2 else math.nan
            )
        sat = {
            r["metric"].removeprefix(EVAL_PREFIX): r["n_saturation"]
            for r in eff.summary.iter_rows(named=True)
        }
        rep.findings[split] = {"n_saturation": sat, "slope_per_doubling": slopes[split]}
        rep.summary.append(
            f"{split.capitalize()} split: per doubling of n at the budget, best@4 changes by "
            f"{fmt(slopes[split].get('best@4', math.nan), 3)}, worst@4 by "
            f"{fmt(slopes[split].get('worst@4', math.nan), 3)}, avg@4 by "
            f"{fmt(slopes[split].get('avg@4', math.nan), 3)}; n_sat: "
            + ", ".join(f"{m} {fmt_sig(v)}" for m, v in sat.items())
            + "."
        )
    rep.figures["metric_effect"] = plots.tidy(fig_e)
    rep.figures["by_n"] = plots.tidy(fig_b)
    add_noise(rep, data["main"], EVAL_WORST)
    rep.add_verdicts(claims.evaluate("bestk-worstk", data))
    return rep
