"""09 · Mixed and extremely hard sets: n* on a mix of Easy and Hard problems against its
components', and what a larger n buys on problems the base never solves."""

from __future__ import annotations

import numpy as np
import polars as pl

from isolab import plots
from isolab.study import claims, summaries
from isolab.study.mixtures.optimum import (
    at_common_lr_sum,
    component_rows,
    coverage_keeps,
    coverage_metric,
    seed_mean_curves,
)
from isolab.study.report import Report, Y, figure_row, fmt
from isolab.verdicts.quadratic import final_rows
from isolab.vocab import ROLLOUTS, STEP

NEVER = "never"


def mixtures(data: dict[str, pl.DataFrame], scale: str = "cpu") -> Report:
    """The three splits' values at the budget against n with their optima, the mix's learning
    curves, and on `never` best@k and avg@k at the budget and against compute."""
    rep = Report("mixtures", scale)
    main, mix, never = data.get("main"), data.get("mix"), data.get(NEVER)
    fig, axes = figure_row(2, width=5.2)
    rows = component_rows(main, mix, Y) if main is not None and mix is not None else {}
    if mix is not None and any(r.height for r in rows.values()):
        plots.plot_optima(rows, axes[0], y=Y)
        axes[0].set_title(f"{Y} at the budget: Easy, Hard and their mix", fontsize="small")
        axes[1].set_xscale("log")
        plots.plot_curves(
            summaries.curves(mix, ["n"], ROLLOUTS, Y), axes[1], x=ROLLOUTS, y=Y, by="n"
        )
        axes[1].set_title("the mix against compute", fontsize="small")
        means = {s: r.group_by("n").agg(pl.col(Y).mean()) for s, r in rows.items() if r.height}
        rep.tables["mix_by_n"] = (
            pl.concat([m.with_columns(pl.lit(s).alias("split")) for s, m in means.items()])
            .pivot("split", index="n", values=Y)
            .sort("n")
        )
        best = {s: int(m.sort(Y, descending=True)["n"][0]) for s, m in means.items()}
        rep.findings["best_n_seed_mean"] = best
        rep.summary.append(
            f"At the budget ({Y}{_bp(rows['mix'])}), the best seed mean is at "
            + "; ".join(f"n = {n} on {s}" for s, n in best.items())
            + "."
        )
    else:
        for ax in axes:
            plots.empty_panel(ax, "no mix sweep: run studies/nstar/<scale>/mix.yaml")
    rep.figures["mix"] = plots.tidy(fig)

    fig, axes = figure_row(2, width=5.2)
    best_k = coverage_metric(never) if never is not None else None
    if never is not None and best_k is not None:
        avg_k = coverage_metric(never, "avg")
        metrics = [m for m in (best_k, avg_k) if m is not None]
        final = final_rows(never, tuple(metrics))
        table = (
            final.group_by("n")
            .agg(*[pl.col(m).mean() for m in metrics], pl.len().alias("runs"))
            .sort("n")
        )
        base = never.filter(pl.col(STEP) == 0)
        start = {m: float(np.mean(base[m].to_numpy())) for m in metrics if base.height}
        rep.tables["never_by_n"] = table
        rep.findings["never_by_n"] = table.to_dicts()
        rep.findings["never_at_step_0"] = start
        rep.findings["never_coverage"] = _coverage(never, best_k)
        per_metric = pl.concat(
            [
                final.group_by("n")
                .agg(pl.col(m).mean().alias("final"), pl.col(m).std().alias("final_std"))
                .with_columns(pl.lit(m).alias("metric"))
                for m in metrics
            ]
        )
        plots.plot_final(per_metric, axes[0], x="n", by="metric", y_label="at the budget")
        for i, m in enumerate(metrics):
            if m in start:
                axes[0].axhline(start[m], color=f"C{i}", ls=":", lw=1)
        axes[0].set_xscale("log", base=2)
        axes[0].set_title(f"{NEVER}: at the budget (dotted: the base, step 0)", fontsize="small")
        axes[1].set_xscale("log")
        plots.plot_curves(
            summaries.curves(never, ["n"], ROLLOUTS, best_k), axes[1], x=ROLLOUTS, y=best_k, by="n"
        )
        axes[1].set_title(f"{NEVER}: {best_k} against compute", fontsize="small")
        rep.summary.append(
            f"On {NEVER}, at the budget: "
            + "; ".join(
                f"n = {r['n']}: {best_k} {fmt(r[best_k])}"
                + (f", {avg_k} {fmt(r[avg_k])}" if avg_k else "")
                for r in table.iter_rows(named=True)
            )
            + (f" (the base at step 0: {best_k} {fmt(start[best_k])})." if best_k in start else ".")
        )
    else:
        for ax in axes:
            plots.empty_panel(
                ax, f"no {NEVER} sweep with best@k: run studies/nstar/<scale>/never.yaml"
            )
    rep.figures[NEVER] = plots.tidy(fig)
    rep.add_verdicts(claims.evaluate("mixtures", data))
    return rep


def _coverage(never: pl.DataFrame, best_k: str) -> dict:
    """Per n the seed-mean peak and last best@k, the coverage at the largest Σlr every n reached,
    and the secondary reading the runs support (a larger n keeps coverage at equal compute:
    the slope of the last best@k on log2 n)."""
    curves = seed_mean_curves(never, best_k)
    per_n = (
        curves.group_by("n")
        .agg(pl.col(best_k).max().alias("peak"), pl.col(best_k).last().alias("last"))
        .sort("n")
    )
    common, equal = at_common_lr_sum(curves, best_k)
    keeps = coverage_keeps(never)
    return {
        "by_n": per_n.to_dicts(),
        "lr_sum_common": common,
        "at_common_lr_sum": {str(n): v for n, v in equal.items()},
        "keeps_at_equal_compute": {
            "slope_per_doubling": keeps.estimate,
            "interval": keeps.interval,
            "p_value": keeps.p_value,
        },
    }


def _bp(rows: pl.DataFrame) -> str:
    """`, B_p = 16` where the runs have one B_p, else nothing."""
    if "B_p" not in rows.columns or rows["B_p"].n_unique() != 1:
        return ""
    return f", B_p = {rows['B_p'][0]}"
