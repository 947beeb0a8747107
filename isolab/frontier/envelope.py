"""The compute frontier ``f(C) = max_{j: C_j ≤ C} R_j`` and its record-breaking points
(IsoCompute Playbook, arXiv 2603.12151)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from isolab.table import as_float, finite_rows, id_columns, require, to_polars
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


def common_points(fronts: Sequence[pl.DataFrame], x: str, max_points: int = 12) -> list[float]:
    """The compute values every frontier of `fronts` reaches, for reading them at equal compute:
    C_max, C_max/2, C_max/4, … down to the largest of their smallest positive computes, with
    C_max the smallest of their largest (ascending, at most `max_points`; empty when their
    ranges do not overlap or one is empty)."""
    lows, highs = [], []
    for front in fronts:
        positive = front.filter(pl.col(x) > 0)
        if positive.height == 0:
            return []
        lows.append(as_float(positive[x].min()))
        highs.append(as_float(positive[x].max()))
    if not fronts:
        return []
    lo, hi = max(lows), min(highs)
    points, c = [], hi
    while c >= lo * (1 - 1e-9) and len(points) < max_points:
        points.append(c)
        c /= 2
    return sorted(points)


def read_at(front: pl.DataFrame, x: str, points: list[float]) -> pl.DataFrame:
    """A frontier (one row per `x`, ascending, as `frontier` gives it) read at each compute in
    `points`: its last row at ≤ C (null where it starts beyond C)."""
    grid = pl.DataFrame({x: points}, schema={x: pl.Float64})
    return grid.join_asof(front.with_columns(pl.col(x).cast(pl.Float64)).sort(x), on=x)
