"""02 · n*(C): the compute-optimal rollouts per problem against compute, and its saturation."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import polars as pl

from isolab import frontier as fr
from isolab import plots
from isolab.study import claims
from isolab.study.nstar.claims import nstar_vertices
from isolab.study.report import (
    Report,
    X,
    Y,
    add_noise,
    figure_row,
    fmt_compute,
    fmt_sig,
    n_boot,
    splits_of,
)
from isolab.study.summaries import pools
from isolab.verdicts.claim import direction
from isolab.vocab import RUN_KEY

#: A curve has plateaued from C on when, past C, it gains at most this much avg@4 per doubling
#: of compute, over at least one doubling: a third of the 0.03 that the testbed's Easy
#: comparisons must resolve.
PLATEAU_GAIN = 0.01


class _Break(NamedTuple):
    """Where a two-piece linear fit breaks, and how well it fits."""

    at: int  #: index of the break checkpoint
    slope: float  #: slope after the break (per doubling of C)
    rss: float  #: residual sum of squares of the two-piece fit


def _broken_stick(x: np.ndarray, y: np.ndarray) -> _Break | None:
    """The break of a two-piece linear fit of `y` on `x` (log2 C) with the least squared error.
    Breaks leave a point before them and at least one doubling after; None when no checkpoint
    can."""
    best: _Break | None = None
    for i in range(1, len(x) - 1):
        if x[-1] - x[i] < 1:
            break
        X = np.column_stack([np.ones_like(x), np.minimum(x - x[i], 0), np.maximum(x - x[i], 0)])
        coef, *_ = np.linalg.lstsq(X, y, rcond=None)
        rss = float(np.sum((y - X @ coef) ** 2))
        if best is None or rss < best.rss:
            best = _Break(at=i, slope=float(coef[2]), rss=rss)
    return best


def plateaus(df: pl.DataFrame, metric: str = Y) -> pl.DataFrame:
    """Per run (one seed per n on the cut pool), where its curve stops rising: a two-piece
    linear fit of `metric` on log2 C (rising, then a second slope from the break on, chosen by
    least squares over the checkpoints); the curve has plateaued from the break (`from_C`) when
    the second slope (`gain_per_doubling`) is at most `PLATEAU_GAIN`, for the `doublings` to the
    run's last checkpoint (null / 0 otherwise)."""
    rows = []
    ok = df.filter((pl.col(X) > 0) & pl.col(metric).is_finite())
    for (key,), run in ok.sort(X).group_by([RUN_KEY], maintain_order=True):
        x = np.log2(run[X].to_numpy().astype(float))
        y = run[metric].to_numpy().astype(float)
        fit = _broken_stick(x, y)
        # the break, when the curve is flat after it
        plateau = fit if fit is not None and fit.slope <= PLATEAU_GAIN else None
        rows.append(
            {
                "n": int(run["n"][0]),
                "split": run["split"][0] if "split" in run.columns else None,
                "train_limit": run["train_limit"][0] if "train_limit" in run.columns else None,
                "from_C": float(2 ** x[plateau.at]) if plateau else None,
                "doublings": float(x[-1] - x[plateau.at]) if plateau else 0.0,
                "gain_per_doubling": fit.slope if fit is not None else math.nan,
                "last_C": float(2 ** x[-1]),
                "last": float(y[-1]),
                RUN_KEY: key,
            }
        )
    return pl.DataFrame(rows).sort("n") if rows else pl.DataFrame()


def _saturation(rep: Report, cut: pl.DataFrame) -> None:
    """The cut-pool runs: their curves, where each plateaus, and which n leads at each C."""
    if not cut.height:
        return
    table = plateaus(cut)
    if not table.height:
        return
    rep.tables["plateaus"] = table
    limits = cut["train_limit"].drop_nulls() if "train_limit" in cut.columns else []
    pool = f"the first {int(limits[0])} problems" if len(limits) else "every problem"
    fig, (ax,) = figure_row(1)
    curves = (
        cut.group_by(["n", X])
        .agg(pl.col(Y).mean().alias("mean"), pl.lit(0.0).alias("std"))
        .sort("n", X)
    )
    ax.set_xscale("log", base=2)
    plots.plot_curves(curves, ax, x=X, y=Y, by="n")
    for r in table.iter_rows(named=True):
        if r["from_C"] is not None:
            ax.axvline(r["from_C"], color="grey", lw=0.6, ls=":")
    ax.set_title(f"trained on {pool}: plateaus (dotted) per n", fontsize="small")
    rep.figures["saturation"] = plots.tidy(fig)
    leader = (
        cut.filter((pl.col(X) > 0) & pl.col(Y).is_finite())
        .sort([Y, "n"], descending=[True, False])
        .group_by(X, maintain_order=True)
        .first()
        .sort(X)
        .select(X, "n", Y)
    )
    rep.tables["cut_pool_leader"] = leader
    smallest = table.row(0, named=True)
    rep.findings["saturation"] = {
        "pool": pool,
        "plateaus": table.drop(RUN_KEY).to_dicts(),
        "smallest_n_plateau_doublings": smallest["doublings"],
        "leader_by_C": leader.to_dicts(),
    }
    parts = [
        f"n = {r['n']} from {fmt_compute(r['from_C'])} ({r['doublings']:.0f} doublings, "
        f"{r['gain_per_doubling']:+.3f} per doubling)"
        if r["from_C"] is not None
        else f"n = {r['n']} not within {fmt_compute(r['last_C'])}"
        for r in table.iter_rows(named=True)
    ]
    lead = ", ".join(
        f"{fmt_compute(c)}: n = {n}" for c, n in zip(leader[X], leader["n"], strict=True)
    )
    rep.summary.append(
        f"Saturation (Easy, trained on {pool}, one seed): curves plateau "
        f"(a two-piece fit on log2 C gains ≤ {PLATEAU_GAIN} avg@4 per doubling past its break) for "
        + "; ".join(parts)
        + f". The best n at each C on that pool: {lead}."
    )


def _nstar_by_split(df: pl.DataFrame, scale: str) -> dict[str, fr.NStarResult]:
    return {
        s: fr.optimal_n(df.filter(pl.col("split") == s), y=Y, n_boot=n_boot(scale))
        for s in splits_of(df)
    }


#: A shift of the optimum (doublings of n* per doubling of C) below which n*(C) counts as flat.
FLAT_MARGIN = 0.25


def progress_figure(main: pl.DataFrame):
    """avg@4 against Σlr (the learning rate summed over the updates) per split, one colour per
    n (issue 45): where the curves of every n fall on one line, n acts through the number of
    updates it leaves at a given compute."""
    splits = splits_of(main)
    fig, axes = figure_row(len(splits))
    for ax, split in zip(axes, splits, strict=True):
        plots.plot_lr_sum(main.filter(pl.col("split") == split), ax, y=Y)
        ax.set_title(f"{split} split: avg@4 against Σlr, colour = n", fontsize="small")
    return plots.tidy(fig)


def nstar(data: dict[str, pl.DataFrame], scale: str = "cpu") -> Report:
    """Frontier, record points and n*(C) per split; whether n* grows (a test); its saturation
    where it does."""
    rep = Report("nstar", scale)
    df, cut = pools(data)
    results = _nstar_by_split(df, scale)
    verdicts = claims.evaluate("nstar", data)
    grows = {v.split: v for v in verdicts if v.claim.startswith("nstar.grows")}
    k = len(results)
    fig_f, ax_f = figure_row(k)
    fig_n, ax_n = figure_row(k)
    for i, (split, res) in enumerate(results.items()):
        sdf = df.filter(pl.col("split") == split)
        plots.plot_frontier(sdf, ax_f[i], y=Y, result=res)
        ax_f[i].set_title(f"{split} split", fontsize="small")
        way = direction(grows[split], FLAT_MARGIN) if split in grows else "not tested"
        # a saturation is drawn only where the claim found n* growing
        plots.plot_n_star(res, ax_n[i], saturation=way == "growing")
        ax_n[i].set_title(f"{split} split: n* {way}", fontsize="small")
        rep.tables[f"n_star_{split}"] = res.table
        rep.tables[f"per_n_{split}"] = res.per_n.select(
            [c for c in res.per_n.columns if res.per_n[c].dtype != pl.Object]
        )
        rep.tables[f"records_{split}"] = fr.record_points(sdf, X, Y)
        _, vertices, gate = nstar_vertices(data, split)
        if vertices.height:
            rep.tables[f"vertices_{split}"] = vertices.fill_nan(None)
        if gate.windows.height:
            rep.tables[f"saturation_gate_{split}"] = gate.windows.fill_nan(None)
        lo, hi = res.n_saturation_ci
        t = res.table.filter(pl.col("n_star").is_finite()) if res.table.height else res.table
        first = (float(t["C"][0]), float(t["n_star"][0])) if t.height else (math.nan, math.nan)
        last = (float(t["C"][-1]), float(t["n_star"][-1])) if t.height else (math.nan, math.nan)
        saturation = way == "growing" and res.status != "not identifiable"
        rep.findings[split] = {
            "direction": way,
            "n_saturation": res.n_saturation if saturation else math.nan,
            "ci": [lo, hi] if saturation else [math.nan, math.nan],
            "status": res.status,
            "reason": res.reason,
            "n_star_first": first,
            "n_star_last": last,
            "records": rep.tables[f"records_{split}"].height,
            "saturation_gate": {
                "passed": gate.passed,
                "C_sat": gate.C_sat,
                "gain_per_doubling": gate.gain,
                "upper": gate.upper,
                "margin": gate.margin,
                "reason": gate.reason,
            },
        }
        sentence = (
            f"{split.capitalize()} split: the upper envelope of the per-n fits puts n* at "
            f"{fmt_sig(first[1])} at C = {fmt_compute(first[0])} and {fmt_sig(last[1])} at "
            f"C = {fmt_compute(last[0])} rollouts (an argmax over the n grid); the direction "
            f"test on every run (below) finds n* {way}"
        )
        if saturation:
            sentence += (
                f"; fitted saturation n_sat = {fmt_sig(res.n_saturation)} (95% CI "
                f"[{fmt_sig(lo)}, {fmt_sig(hi)}], seeds resampled within configurations, "
                f"{res.status})"
            )
        elif way == "growing":
            sentence += f", but no saturation can be fitted ({res.reason})"
        rep.summary.append(sentence + ".")
    rep.figures["frontier"] = plots.tidy(fig_f)
    rep.figures["n_star"] = plots.tidy(fig_n)
    rep.figures["avg_vs_lr_sum"] = progress_figure(data["main"])
    add_noise(rep, df)
    _saturation(rep, cut)
    rep.add_verdicts(verdicts)
    return rep
