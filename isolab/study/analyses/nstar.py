"""02 · n*(C): the compute-optimal rollouts per problem against compute, and its saturation."""

from __future__ import annotations

import math

import polars as pl

from isolab import frontier as fr
from isolab import plots
from isolab.study.analyses.report import (
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
from isolab.verdicts import claims


def combined(data: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """The sweeps of one study as one runs table (e.g. nstar's `main` grid and `long` runs):
    the frontier analysis reads every run at every compute it reached."""
    frames = [df for df in data.values() if df.height]
    return pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0]


def _nstar_by_split(df: pl.DataFrame, scale: str) -> dict[str, fr.NStarResult]:
    return {
        s: fr.optimal_n(df.filter(pl.col("split") == s), y=Y, n_boot=n_boot(scale))
        for s in splits_of(df)
    }


#: An interaction (avg@4 per doubling of n per doubling of C) below which n*(C) counts as flat.
FLAT_MARGIN = 0.002


def nstar(data: dict[str, pl.DataFrame], scale: str = "cpu") -> Report:
    """Frontier, record points and n*(C) per split; whether n* grows (a test); its saturation
    where it does."""
    rep = Report("nstar", scale)
    df = combined(data)
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
        plots.plot_n_star(res, ax_n[i])
        way = claims.direction(grows[split], FLAT_MARGIN) if split in grows else "not tested"
        ax_n[i].set_title(f"{split} split: n* {way}", fontsize="small")
        rep.tables[f"n_star_{split}"] = res.table
        rep.tables[f"per_n_{split}"] = res.per_n.select(
            [c for c in res.per_n.columns if res.per_n[c].dtype != pl.Object]
        )
        rep.tables[f"records_{split}"] = fr.record_points(sdf, X, Y)
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
    add_noise(rep, df)
    rep.add_verdicts(verdicts)
    return rep
