"""Slopes of the final metric compared between groups: does a metric rise faster along `x` for
some groups (reward systems, model sizes) than for others? One row per run, OLS with a level
and a slope per group, HC3 errors (`isolab.verdicts.ols`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import polars as pl

from isolab.table import final_rows
from isolab.verdicts.ols import hc3_ols
from isolab.verdicts.result import StatResult, min_detectable, t_quantile


def slope_difference(
    df: pl.DataFrame,
    metric: str,
    x: str,
    group: str,
    first: Sequence,
    second: Sequence,
    scale: float = 1.0,
) -> StatResult:
    """Slope of the final `metric` in `x` (× `scale`) for levels `first` of `group`, minus
    that for levels `second`, with a fixed effect per level (OLS, HC3 errors)."""

    rows = final_rows(df, metric).filter(pl.col(group).is_in([*first, *second]))
    if (
        not rows.filter(pl.col(group).is_in(list(first))).height
        or not rows.filter(pl.col(group).is_in(list(second))).height
    ):
        return StatResult.refused(f"needs runs of both {list(first)} and {list(second)}")
    data = rows.select(
        pl.col(metric).alias("y"),
        (pl.col(x) * scale).alias("x"),
        pl.col(group).cast(pl.String).alias("g"),
        pl.col(group).is_in(list(first)).cast(pl.Float64).alias("is_first"),
    ).to_pandas()
    fit = hc3_ols("y ~ C(g) + x:is_first + x:I(1 - is_first)", data)
    if fit.df_resid < 2:
        return StatResult.refused(f"{rows.height} runs: too few to compare slopes", rows.height)
    a, b = "x:is_first", "x:I(1 - is_first)"
    est = float(fit.params[a] - fit.params[b])
    V = fit.cov_params()
    se = float(math.sqrt(V.loc[a, a] + V.loc[b, b] - 2 * V.loc[a, b]))
    return StatResult.from_t(
        est,
        se,
        float(fit.df_resid),
        n_runs=rows.height,
        test=f"OLS of final {metric} on a level per {group} and one slope in {x} per group "
        f"(HC3, {fit.df_resid:.0f} df): slope of {first} − slope of {second}",
        extra={"slope_first": float(fit.params[a]), "slope_second": float(fit.params[b])},
    )


def slope_heterogeneity(df: pl.DataFrame, metric: str, x: str, group: str) -> StatResult:
    """Do the slopes of the final `metric` in log2 `x` differ between levels of `group`?
    OLS with a level and a slope per group (HC3); Wald F-test that all slopes are equal. The
    estimate is the largest difference between two groups' slopes."""

    rows = final_rows(df, metric)
    groups = sorted(rows[group].unique().to_list())
    if len(groups) < 2 or rows[x].n_unique() < 2:
        return StatResult.refused(f"needs ≥ 2 levels of {group} and ≥ 2 values of {x}")
    data = rows.select(
        pl.col(metric).alias("y"),
        pl.col(x).cast(pl.Float64).log(2).alias("x"),
        pl.col(group).cast(pl.String).alias("g"),
    ).to_pandas()
    fit = hc3_ols("y ~ C(g) + C(g):x - 1", data)
    if fit.df_resid < 2:
        return StatResult.refused(
            f"{rows.height} runs for {2 * len(groups)} parameters: too few to compare slopes",
            rows.height,
        )
    names = [f"C(g)[{g}]:x" for g in groups]
    slopes = {g: float(fit.params[n]) for g, n in zip(groups, names, strict=True)}
    hypotheses = [f"{names[0]} = {n}" for n in names[1:]]
    wald = fit.f_test(
        ", ".join(f"({h.split(' = ')[0]}) - ({h.split(' = ')[1]}) = 0" for h in hypotheses)
    )
    p = float(wald.pvalue)
    hi_g, lo_g = max(slopes, key=slopes.__getitem__), min(slopes, key=slopes.__getitem__)
    V = fit.cov_params()
    a, b = f"C(g)[{hi_g}]:x", f"C(g)[{lo_g}]:x"
    se = float(math.sqrt(V.loc[a, a] + V.loc[b, b] - 2 * V.loc[a, b]))
    est = slopes[hi_g] - slopes[lo_g]
    dof = float(fit.df_resid)
    q = t_quantile(dof)
    # The p-value is the F-test's (all slopes equal), not the shown pair's t: picking the
    # largest of several differences and testing it alone would overstate it.
    return StatResult(
        estimate=est,
        se=se,
        df=dof,
        p_value=p,
        interval=(est - q * se, est + q * se),
        mde=min_detectable(se, dof),
        n_runs=rows.height,
        test=f"OLS of final {metric} with a level and a slope in log2 {x} per {group} (HC3); "
        f"Wald F-test of equal slopes; shown: {hi_g} − {lo_g}",
        extra={"slopes": slopes},
    )
