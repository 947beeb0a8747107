"""08 · Evaluation targets that disagree: n* on validation against a shifted distribution."""

from __future__ import annotations

import numpy as np
import polars as pl

from isolab import plots
from isolab.study import summaries
from isolab.study.analyses.report import Report, Y, figure_row, fmt
from isolab.verdicts import claims
from isolab.verdicts.targets import SHIFTED, final_rows
from isolab.vocab import ROLLOUTS


def targets(data: dict[str, pl.DataFrame], scale: str = "cpu") -> Report:
    """Each target's value at the budget against n with its fitted optimum, the shifted
    target's learning curves, and the test of whether the two optima differ."""
    rep = Report("targets", scale)
    df = data["targets"]
    metrics = [m for m in (Y, SHIFTED) if m in df.columns]
    final = final_rows(df, tuple(metrics)) if metrics else pl.DataFrame()
    fig, axes = figure_row(len(metrics) + 1, width=4.6)
    for ax, m in zip(axes, metrics, strict=False):
        fitted = None
        if final.height and final["n"].n_unique() >= 4:  # as the test, without its seed levels
            fitted = np.polyfit(np.log2(final["n"].to_numpy().astype(float)), final[m], 2)
        plots.plot_optimum(final, ax, y=m, fitted=fitted)
        ax.set_title(f"{m} at the budget", fontsize="small")
    if SHIFTED in df.columns:
        axes[-1].set_xscale("log")
        cur = summaries.curves(df, ["n"], ROLLOUTS, SHIFTED)
        plots.plot_curves(cur, axes[-1], x=ROLLOUTS, y=SHIFTED, by="n")
        axes[-1].set_title("the shifted target against compute", fontsize="small")
    else:
        plots.empty_panel(axes[-1], f"no {SHIFTED}: run with eval_sets: {{shifted: ...}}")
    rep.figures["targets"] = plots.tidy(fig)
    if final.height:
        by_n = (
            final.group_by("n")
            .agg(*[pl.col(m).mean() for m in metrics], pl.len().alias("runs"))
            .sort("n")
        )
        rep.tables["by_n"] = by_n
        best = {m: by_n.sort(m, descending=True)["n"][0] for m in metrics}
        rep.findings["best_n_seed_mean"] = best
        rep.findings["by_n"] = by_n.to_dicts()
        rep.summary.append(
            "At the budget the best seed mean is at "
            + "; ".join(
                f"n = {best[m]} under {m} ({fmt(by_n.filter(pl.col('n') == best[m])[m][0])})"
                for m in metrics
            )
            + "."
        )
    rep.add_verdicts(claims.evaluate("targets", data))
    return rep
