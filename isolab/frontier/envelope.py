"""The compute frontier ``f(C) = max_{j: C_j ≤ C} R_j`` and its record-breaking points
(IsoCompute Playbook, arXiv 2603.12151)."""

from __future__ import annotations

from typing import Any

import polars as pl

from isolab.table import finite_rows, id_columns, require, to_polars
from isolab.vocab import DEFAULT_X, DEFAULT_Y


def frontier(df: Any, x: str = DEFAULT_X, y: str = DEFAULT_Y) -> pl.DataFrame:
    """The compute frontier ``f(C) = max_{j: C_j ≤ C} R_j`` (IsoCompute Playbook, arXiv 2603.12151).

    Returns one row per distinct `x` (ascending): `x`, `y` (the best point at that x),
    `frontier` (running maximum) and the identifying columns (`run_key`, `n`, `B_p`, `M`, `step`,
    `seed` where present) of the point that holds the frontier there.
    """
    df = to_polars(df)
    require(df, x, y)
    df = finite_rows(df, x, y, context="frontier")
    ids = id_columns(df)
    if df.height == 0:
        return pl.DataFrame(schema={x: pl.Float64, y: pl.Float64, "frontier": pl.Float64})
    best = (
        df.select([x, y, *ids])
        .sort([x, y], descending=[False, True])
        .unique(subset=[x], keep="first", maintain_order=True)
    )
    best = best.with_columns(pl.col(y).cum_max().alias("frontier"))
    holder = pl.col(y) == pl.col("frontier")
    return best.select(
        x,
        y,
        "frontier",
        *[pl.when(holder).then(pl.col(c)).otherwise(None).forward_fill().alias(c) for c in ids],
    )


def record_points(
    df: Any, x: str = DEFAULT_X, y: str = DEFAULT_Y, bin_width: float = 0.0
) -> pl.DataFrame:
    """Record-breaking points ``R_i > max_{C_j < C_i} R_j`` with the reward bucketized.

    With ``bin_width > 0`` rewards are compared as ``floor(R / bin_width)``, so an improvement
    smaller than a bucket (evaluation noise) is not a record (IsoCompute Playbook §3). The first
    point is always a record. Returns the record rows (`x`, `y`, identifying columns), ascending.
    """
    if bin_width < 0:
        raise ValueError(f"bin_width = {bin_width}: use 0 (exact) or a positive reward width.")
    f = frontier(df, x, y)
    if f.height == 0:
        return f.drop("frontier")
    score = (pl.col(y) / bin_width).floor() if bin_width > 0 else pl.col(y)
    f = f.with_columns(score.alias("_score"))
    prev = pl.col("_score").cum_max().shift(1)
    rec = f.filter(prev.is_null() | (pl.col("_score") > prev))
    return rec.drop("_score", "frontier")
