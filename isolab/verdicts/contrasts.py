"""Configurations compared at the end of training: one arm's mean final metric against another's
(`compare_arms`). Runs tables in (the layout of `isolab.tracking.runs.load_runs`), a
`StatResult` out.

A final metric carries two noises: training (the run's seed) and evaluation (sampling the
validation problems). Runs of one configuration differ by both, so the noise is measured from
seeds: within seeds when every arm ran every seed (see `_seed_blocks`), else as the spread of
seeds within configurations, pooled over the sweep (one-way ANOVA residual). With no
configuration run under two seeds the training noise is unmeasured and the tests refuse.
"""

from __future__ import annotations

import math

import polars as pl

from isolab.table import as_float, final_rows, with_cell
from isolab.verdicts.cells import cell_contrast, pooled_seed_variance
from isolab.verdicts.noise import eval_variance
from isolab.verdicts.result import StatResult


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
