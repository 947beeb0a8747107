"""Configurations compared at the end of training: one arm's mean final metric against another's
(`compare_arms`), and the best level of a factor against each rival within strata
(`contrast_best`). Runs tables in (the layout of `isolab.tracking.runs.load_runs`), a
`StatResult` out.

A final metric carries two noises: training (the run's seed) and evaluation (sampling the
validation problems). Runs of one configuration differ by both, so the noise is measured from
seeds: within seeds when every arm ran every seed (see `_seed_blocks`), else as the spread of
seeds within configurations, pooled over the sweep (one-way ANOVA residual). With no
configuration run under two seeds the training noise is unmeasured and the tests refuse.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import polars as pl

from isolab.table import as_float, final_rows, with_cell
from isolab.verdicts.cells import cell_contrast, pooled_seed_variance
from isolab.verdicts.noise import eval_variance
from isolab.verdicts.result import ALPHA, StatResult, holm, min_detectable, t_quantile, t_test


def _seed_blocks(rows: pl.DataFrame, within: str | None = None) -> pl.DataFrame:
    """`block`: the seed (within `within`'s level when given), for seed-blocked fits; null
    where a run has no seed (the blocked fit then declines).

    Why block on the seed: a seed fixes a run's data order and its sampling draws, so runs of
    different configurations under one seed share part of their training noise (common random
    numbers). A fit with one effect per seed compares configurations within seeds, and that
    shared part cancels from the contrast instead of inflating its error. With `within` (a
    stratum, e.g. the batch) the block is stratum and seed: only runs of one stratum are taken
    to share a seed's draws."""
    if "seed" not in rows.columns:
        return rows.with_columns(block=pl.lit(None, pl.String))
    parts = [pl.col("seed").cast(pl.String)]
    if within is not None:
        parts.insert(0, pl.col(within).cast(pl.String))
    return rows.with_columns(block=pl.concat_str(parts, separator="|"))


def compare_arms(df: pl.DataFrame, metric: str, factor: str, a: object, b: object) -> StatResult:
    """Mean final `metric` of runs with `factor == a` minus those with `factor == b`.

    When the arms share seeds (the sweep runs every configuration under every seed) the
    comparison is within seeds: OLS of the final metric on configuration + seed, the noise the
    residual (a seed's data order and sampling draws are common to its runs, so its effect
    cancels). Otherwise, or with too few runs for that, the noise is the seed variance within
    configurations, pooled over every configuration in `df` (two-sample t), floored at the
    evaluation's sampling variance."""
    rows = with_cell(final_rows(df, metric))
    rows = rows.with_columns(  # the arms are cells even where `factor` is not a config field
        cell=pl.concat_str([pl.col("cell"), pl.col(factor).cast(pl.String)], separator="|")
    )
    arm_a = rows.filter(pl.col(factor) == a)
    arm_b = rows.filter(pl.col(factor) == b)
    if not arm_a.height or not arm_b.height:
        return StatResult.refused(f"no runs with {factor} = {a if not arm_a.height else b}")
    extra = {
        "mean_a": as_float(arm_a[metric].mean()),
        "mean_b": as_float(arm_b[metric].mean()),
        "runs_a": arm_a.height,
        "runs_b": arm_b.height,
    }
    cells_a, cells_b = arm_a["cell"].unique().to_list(), arm_b["cell"].unique().to_list()
    weights = {c: 1 / len(cells_a) for c in cells_a} | {c: -1 / len(cells_b) for c in cells_b}
    blocked = cell_contrast(_seed_blocks(rows), metric, weights, "block")
    if blocked is not None:
        est, se, dof = blocked
        var, _ = pooled_seed_variance(rows, metric)
        seed_sd = math.sqrt(var) if math.isfinite(var) else math.nan
        return StatResult.from_t(
            est,
            se,
            dof,
            n_runs=rows.height,
            test=f"paired by seed: OLS of final {metric} on configuration + seed ({dof:.0f} df)",
            extra=extra | {"seed_sd": seed_sd, "within_seed_se": se},
        )
    var, dof = pooled_seed_variance(rows, metric)
    test = f"two-sample t on final {metric}, seed variance pooled over configurations"
    if dof == 0:
        return StatResult.refused(
            "no configuration has two seeds: the training noise is unmeasured", rows.height, test
        )
    floor = eval_variance(rows, metric)
    if var < floor:  # few seeds can agree by chance: never below the sampling noise
        var, test = floor, test + " (floored at the evaluation's sampling variance)"
    se = math.sqrt(var * (1 / arm_a.height + 1 / arm_b.height))
    est = extra["mean_a"] - extra["mean_b"]
    return StatResult.from_t(
        est,
        se,
        dof,
        n_runs=rows.height,
        test=f"{test} ({dof} df)",
        extra=extra | {"seed_sd": math.sqrt(var)},
    )


def contrast_best(
    df: pl.DataFrame,
    metric: str,
    factor: str,
    best: object,
    others: Sequence[object],
    stratum: str,
) -> StatResult:
    """Is `best` above every other level of `factor`? One contrast best − other per other level,
    each the mean over `stratum`'s levels of the difference of cell means (the factor's effect
    may change with the stratum: a learning-rate rule helps at one batch and hurts at another),
    Holm-adjusted. Runs sharing a seed within a stratum are compared within it (OLS on cell +
    stratum|seed) when that keeps enough df; otherwise the noise is the seed variance within
    cells. The result is the weakest contrast (the one a "best" claim hinges on), or a
    significantly negative one when there is one."""
    rows = final_rows(df, metric).filter(pl.col(factor).is_in([best, *others]))
    levels = set(rows[factor].unique().to_list())
    if best not in levels or not levels & set(others):
        return StatResult.refused(f"{factor}: need {best} and at least one of {list(others)}")
    rows = (
        _seed_blocks(rows, stratum)
        .with_columns(s_key=pl.col(stratum).cast(pl.String), f_key=pl.col(factor).cast(pl.String))
        .with_columns(cell=pl.concat_str(["s_key", "f_key"], separator="|"))
    )
    key = dict(zip(rows[factor].to_list(), rows["f_key"].to_list(), strict=True))
    present = sorted({str(o) for o in others if o in levels})
    cells, strata = set(rows["cell"].to_list()), sorted(set(rows["s_key"].to_list()))
    contrasts = []  # (other, estimate, se, p, df, how)
    for other in others:
        if other not in levels:
            continue
        weights: dict[str, float] = {}
        for s in strata:
            hi, lo = f"{s}|{key[best]}", f"{s}|{key[other]}"
            if hi in cells and lo in cells:
                weights[hi], weights[lo] = 1.0, -1.0
        if not weights:  # never at one stratum with best: no contrast (refused below)
            continue
        k = len(weights) / 2
        weights = {c: w / k for c, w in weights.items()}
        fit, how = (cell_contrast(rows, metric, weights, "block"), f"paired by {stratum}|seed")
        if fit is None:
            fit, how = cell_contrast(rows, metric, weights), "seed variance within cells"
        if fit is None:
            continue
        est, se, dof = fit
        contrasts.append((str(other), est, se, t_test(est, se, dof)[0], dof, how))
    untested = sorted(set(present) - {c[0] for c in contrasts})
    if untested:  # a "best" claim must beat every rival the data hold
        return StatResult.refused(
            f"{factor} = {best} is never at a {stratum} (with seeds enough to compare) where "
            f"{', '.join(untested)} ran: no contrast",
            rows.height,
        )
    adjusted = holm([c[3] for c in contrasts])
    chosen = min(range(len(contrasts)), key=lambda i: contrasts[i][1])  # the weakest
    negatives = [i for i, c in enumerate(contrasts) if c[1] < 0 and adjusted[i] < ALPHA]
    if negatives:
        chosen = negatives[0]
    other, est, se, _, dof, how = contrasts[chosen]
    # "best beats every rival" needs every contrast: its p-value is the largest adjusted one
    p_all = max(adjusted) if all(c[1] > 0 for c in contrasts) else adjusted[chosen]
    q = t_quantile(dof)
    return StatResult(
        estimate=est,
        se=se,
        df=dof,
        p_value=p_all,
        interval=(est - q * se, est + q * se),
        mde=min_detectable(se, dof),
        n_runs=rows.height,
        test=f"cell means of final {metric} per {stratum} × {factor}, {how} ({dof:.0f} df); "
        f"contrasts {best} − {', '.join(c[0] for c in contrasts)} averaged over {stratum}, "
        f"Holm-adjusted; shown: {best} − {other}",
        extra={f"{best}-{c[0]}": c[1] for c in contrasts},
    )
