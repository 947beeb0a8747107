"""08 · Evaluation targets that disagree: n* on validation against a shifted distribution and
against a judge of process quality."""

from __future__ import annotations

import numpy as np
import polars as pl

from isolab import plots
from isolab.study import claims, summaries
from isolab.study.report import Report, Y, figure_row, fmt
from isolab.study.targets.optimum import SHIFTED
from isolab.verdicts.quadratic import final_rows
from isolab.vocab import EVAL_JUDGE, ROLLOUTS


def targets(data: dict[str, pl.DataFrame], scale: str = "cpu") -> Report:
    """Each target's value at the budget against n with its fitted optimum, the shifted
    target's learning curves, and the test of whether the two optima differ."""
    rep = Report("targets", scale)
    df = data["targets"]
    metrics = [m for m in (Y, SHIFTED) if m in df.columns]
    final = final_rows(df, tuple(metrics)) if metrics else pl.DataFrame()
    judge = data.get("judge")
    judged = (
        final_rows(judge, (Y, EVAL_JUDGE))
        if judge is not None and EVAL_JUDGE in judge.columns
        else pl.DataFrame()
    )
    panels = [(final, m) for m in metrics] + ([(judged, EVAL_JUDGE)] if judged.height else [])
    fig, axes = figure_row(len(panels) + 1, width=4.6)
    for ax, (rows, m) in zip(axes, panels, strict=False):
        fitted = None
        if rows.height and rows["n"].n_unique() >= 4:  # as the test, without its seed levels
            fitted = np.polyfit(np.log2(rows["n"].to_numpy().astype(float)), rows[m], 2)
        plots.plot_optimum(rows, ax, y=m, fitted=fitted)
        ax.set_title(f"{m} at the budget", fontsize="small")
    if SHIFTED in df.columns:
        axes[-1].set_xscale("log")
        cur = summaries.curves(df, ["n"], ROLLOUTS, SHIFTED)
        plots.plot_curves(cur, axes[-1], x=ROLLOUTS, y=SHIFTED, by="n")
        axes[-1].set_title("the shifted target against compute", fontsize="small")
    else:
        plots.empty_panel(axes[-1], f"no {SHIFTED}: run with eval_sets: {{shifted: ...}}")
    rep.figures["targets"] = plots.tidy(fig)
    for name, rows, ms in (("by_n", final, metrics), ("judge_by_n", judged, [Y, EVAL_JUDGE])):
        if not rows.height:
            continue
        by_n = (
            rows.group_by("n")
            .agg(*[pl.col(m).mean() for m in ms], pl.len().alias("runs"))
            .sort("n")
        )
        rep.tables[name] = by_n
        best = {m: by_n.sort(m, descending=True)["n"][0] for m in ms}
        rep.findings["best_n_seed_mean" if name == "by_n" else "judge_best_n_seed_mean"] = best
        rep.findings[name] = by_n.to_dicts()
        rep.summary.append(
            f"At the budget ({'the judged runs' if name == 'judge_by_n' else 'the targets runs'}) "
            "the best seed mean is at "
            + "; ".join(
                f"n = {best[m]} under {m} ({fmt(by_n.filter(pl.col('n') == best[m])[m][0])})"
                for m in ms
            )
            + "."
        )
    rep.add_verdicts(claims.evaluate("targets", data))
    return rep
