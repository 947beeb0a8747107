"""06 · Model size at equal FLOPs."""

from __future__ import annotations

import polars as pl

from isolab import plots
from isolab.study import claims, summaries
from isolab.study.report import Report, Y, add_noise, figure_row, fmt, fmt_sig
from isolab.table import as_int
from isolab.verdicts import testbed
from isolab.vocab import FLOPS_TOTAL


def model_size(data: dict[str, pl.DataFrame], scale: str = "cpu") -> Report:
    """Equal FLOPs for three model sizes: what each buys, and which ends best."""
    rep = Report("model-size", scale)
    df = data["main"]
    fin = summaries.final(df, ["model", "n"], Y)
    per_rollout = fin.with_columns(fpr=pl.col("flops") / pl.col("rollouts"))
    order = per_rollout.group_by("model").agg(pl.col("fpr").mean()).sort("fpr")["model"].to_list()
    best = (
        fin.sort("final", descending=True)
        .group_by("model", maintain_order=True)
        .head(1)
        .with_columns(pl.col("model").cast(pl.Enum(order)))
        .sort("model")
        .with_columns(pl.col("model").cast(pl.Utf8))
    )
    rep.tables["final"] = fin
    rep.tables["best_per_model"] = best
    fig, axes = figure_row(2)
    axes[0].set_xscale("log")
    cur = summaries.curves(df, ["model", "n"], FLOPS_TOTAL, Y)
    plots.plot_curves(cur, axes[0], x=FLOPS_TOTAL, y=Y, by="model", style="n")
    plots.plot_bought(best, axes[1], by="model")
    axes[1].set_title("what the budget bought (best n per model)", fontsize="small")
    rep.figures["model_size"] = plots.tidy(fig)
    rows = list(best.iter_rows(named=True))
    for r in rows:
        rep.summary.append(
            f"{r['model']} (best n = {r['n']}): {r['rollouts']:,.0f} rollouts and "
            f"{r['steps']:.0f} updates for {fmt_sig(r['flops'])} FLOPs; avg@4 {fmt(r['base'])} → "
            f"{fmt(r['final'])} ({'+' if r['gain'] >= 0 else ''}{fmt(r['gain'])})."
        )
    winner = max(rows, key=lambda r: r["final"]) if rows else None
    gainer = max(rows, key=lambda r: r["gain"]) if rows else None
    rep.findings = {
        "order_by_flops_per_rollout": order,
        "best_per_model": rows,
        "best_final": winner["model"] if winner else None,
        "best_gain": gainer["model"] if gainer else None,
    }
    if winner and gainer:  # both None together, when no model has a row
        rl = "raised" if winner["gain"] > 0 else "did not raise"
        rep.summary.append(
            f"At equal FLOPs the best final avg@4 is {winner['model']}'s "
            f"({fmt(winner['final'])}; RL {rl} it: {'+' if winner['gain'] >= 0 else ''}"
            f"{fmt(winner['gain'])} from its base), the largest gain {gainer['model']}'s "
            f"({'+' if gainer['gain'] >= 0 else ''}{fmt(gainer['gain'])})."
        )
    if len(rows) >= 2:
        # a check of the ledger, not a finding: at a common batch a costlier model buys
        # fewer rollouts and updates by construction
        n0 = as_int(fin["n"].min())
        g = (
            fin.filter(pl.col("n") == n0)
            .with_columns(pl.col("model").cast(pl.Enum(order)))
            .sort("model")
        )
        rep.summary.append(
            f"What equal FLOPs buy at n = {n0}: "
            + ", ".join(
                f"{m} {r:,.0f} rollouts / {s_:.0f} updates"
                for m, r, s_ in zip(g["model"], g["rollouts"], g["steps"], strict=True)
            )
            + " (fewer for a costlier model, by construction)."
        )
    old = testbed.old_testbed(df)
    rep.findings["testbed"] = old
    if old:
        rep.summary.append(
            f"These runs are on the old testbed ({old.removeprefix('untested (old testbed: ')}: "
            "the claim is untested until they are re-run on the new one."
        )
    add_noise(rep, df)
    rep.add_verdicts(claims.evaluate("model-size", data))
    return rep
