"""The RACE pilot: does a small pilot grid call each reward system's regime (`isolab.frontier.
regime`: search-, learning- or reward-bound, from ρ and the FLOP shares) as the full grid does?
A system's call is resolved only when every configuration not significantly worse than its best
falls in one regime."""

from __future__ import annotations

import math

import polars as pl
from scipy import stats

from isolab.frontier import regime
from isolab.table import final_rows, with_cell
from isolab.verdicts.cells import pooled_seed_variance
from isolab.verdicts.noise import eval_variance
from isolab.verdicts.result import ALPHA, StatResult, holm
from isolab.vocab import FLOPS_PREFIX, FLOPS_TOTAL, RHO


def regime_calls(df: pl.DataFrame, metric: str, system: str = "reward") -> dict[str, dict]:
    """Per reward system: each configuration's RACE regime (`isolab.frontier.regime` of its
    mean ρ and FLOP shares), and the system's call — resolved when every configuration not
    significantly worse than the best (one-sided t against the best, pooled seed variance,
    Holm over configurations) falls in one regime."""
    rows = with_cell(final_rows(df, metric))
    shares = [
        (pl.col(f"{FLOPS_PREFIX}{c}") / pl.col(FLOPS_TOTAL)).alias(f"share_{c}")
        for c in ("search", "reward")
        if f"{FLOPS_PREFIX}{c}" in rows.columns
    ]
    rows = rows.with_columns(shares)
    var, dof = pooled_seed_variance(rows, metric)
    var = max(var, eval_variance(rows, metric)) if dof else var
    out: dict[str, dict] = {}
    for (name,), grp in rows.group_by([system], maintain_order=True):
        mean_shares = [
            pl.col(c).mean() for c in ("share_search", "share_reward") if c in grp.columns
        ]
        cells = (
            grp.group_by("cell")
            .agg(
                pl.col(metric).mean().alias("mean"),
                pl.len().alias("n"),
                pl.col(RHO).mean().alias("rho"),
                *mean_shares,
            )
            .sort("mean", descending=True)
        )
        regimes = [
            regime(r["rho"], r.get("share_reward", 0.0) or 0.0, r.get("share_search", 1.0) or 1.0)
            for r in cells.iter_rows(named=True)
        ]
        best = cells.row(0, named=True)
        p_raw = []
        for r in cells.iter_rows(named=True):
            if dof == 0 or r is None:
                p_raw.append(math.nan)
                continue
            se = math.sqrt(var * (1 / best["n"] + 1 / r["n"]))
            gap = best["mean"] - r["mean"]
            p_raw.append(float(stats.t.sf(gap / se, dof)) if se > 0 else math.nan)
        adjusted = holm(p_raw[1:])
        plausible = [0] + [i + 1 for i, p in enumerate(adjusted) if not p < ALPHA]
        seen = {regimes[i] for i in plausible}
        out[str(name)] = {
            "regimes": sorted(set(regimes)),
            "best_rho": best["rho"],
            "call": seen.pop() if len(seen) == 1 and dof > 0 else None,
        }
    return out


def regime_agreement(pilot: pl.DataFrame, full: pl.DataFrame, metric: str) -> StatResult:
    """Does the pilot call each reward system's regime as the full grid does? Compared only
    where both calls are resolved and both grids span more than one regime (a grid whose
    configurations all share one regime calls it by construction). Estimate: the share of
    compared systems whose calls agree (no standard error: the claim is called on the share
    itself, `agrees` only at 1)."""
    a, b = regime_calls(pilot, metric), regime_calls(full, metric)
    compared, agree, notes = 0, 0, []
    for name in sorted(set(a) & set(b)):
        pa, fa = a[name], b[name]
        if len(pa["regimes"]) < 2 or len(fa["regimes"]) < 2:
            notes.append(f"{name}: one regime by construction")
            continue
        if pa["call"] is None or fa["call"] is None:
            notes.append(f"{name}: unresolved ({'pilot' if pa['call'] is None else 'full grid'})")
            continue
        compared += 1
        agree += pa["call"] == fa["call"]
        notes.append(f"{name}: pilot {pa['call']}, full grid {fa['call']}")
    runs = final_rows(pilot, metric).height + final_rows(full, metric).height
    test = "RACE regime of the seed-averaged best configurations, resolved by Holm-corrected t"
    if not compared:
        return StatResult.refused(
            "no system is resolved on both grids with a ρ range that spans two regimes; "
            + "; ".join(notes),
            runs,
            test,
        )
    return StatResult(
        estimate=agree / compared,
        se=math.nan,
        df=math.nan,
        p_value=None,
        interval=None,
        mde=math.nan,
        n_runs=runs,
        test=f"{test}: {agree} of {compared} systems agree",
        note="; ".join(notes),
        extra={"compared": compared, "agree": agree},
    )
