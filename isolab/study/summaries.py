"""Small tables over the runs table: seed-averaged curves and final results.

Pure functions, polars in and polars out (the layout of `isolab.tracking.runs.load_runs`: one row per
run × evaluation step). They back the curated studies' findings (`isolab.study.<study>.analysis`); the comparisons that
decide a claim are the tests of `isolab.verdicts`.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from isolab.table import one_pool
from isolab.vocab import FLOPS_TOTAL, ROLLOUTS, RUN_ID, RUN_KEY, STEP

RUN = RUN_KEY
_SHORT = {ROLLOUTS: "rollouts", FLOPS_TOTAL: "flops"}


def _key(df: pl.DataFrame) -> str:
    return RUN if RUN in df.columns else RUN_ID


def curves(df: pl.DataFrame, by: Sequence[str], x: str, y: str) -> pl.DataFrame:
    """Seed-averaged curve of `y` against `x` per group: `by`, `x`, `mean`, `std`, `n_seeds`.

    Runs of a group evaluate at the same steps (a study's common checkpoints), so points are
    averaged per (group, step); `x` is averaged too (IsoFLOP runs of one config agree on it).
    """
    by = list(by)
    return (
        df.filter(pl.col(y).is_finite())
        .group_by([*by, STEP])
        .agg(
            pl.col(x).mean(),
            pl.col(y).mean().alias("mean"),
            pl.col(y).std().alias("std"),
            pl.col(_key(df)).n_unique().alias("n_seeds"),
        )
        .sort([*by, x])
    )


def final(df: pl.DataFrame, by: Sequence[str], y: str) -> pl.DataFrame:
    """Per group: `base` (step 0) and `final` (last evaluation) of `y`, seed mean and std.

    Columns: `by`, `base`, `final`, `final_std`, `gain` = final − base, `n_seeds`, and what the
    runs bought: `rollouts` (compute/rollouts), `steps` (M), `flops` (flops/total) at the end.
    """
    by = list(by)
    key = _key(df)
    ok = df.filter(pl.col(y).is_finite())
    last = ok.filter(pl.col(STEP) == pl.col(STEP).max().over(key))
    first = ok.filter(pl.col(STEP) == pl.col(STEP).min().over(key))
    extra = [c for c in (ROLLOUTS, FLOPS_TOTAL) if c in df.columns]
    ends = last.group_by(by).agg(
        pl.col(y).mean().alias("final"),
        pl.col(y).std().alias("final_std"),
        pl.col(key).n_unique().alias("n_seeds"),
        pl.col(STEP).mean().alias("steps"),
        *[pl.col(c).mean().alias(_SHORT[c]) for c in extra],
    )
    starts = first.group_by(by).agg(pl.col(y).mean().alias("base"))
    out = starts.join(ends, on=by, how="inner").with_columns(gain=pl.col("final") - pl.col("base"))
    head = [*by, "base", "final", "final_std", "gain", "n_seeds"]
    return out.select(*head, pl.exclude(*head)).sort(by)


def combined(data: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """The sweeps of one study as one runs table (e.g. nstar's `main` grid and `long` runs):
    the frontier analysis reads every run at every compute it reached. Runs trained on another
    pool than `main`'s (`train_limit`) are left out: `cut_pool` holds them."""
    return pools(data)[0]


def cut_pool(data: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """The runs trained on another pool than `main`'s (nstar's `long`: the first 64 problems)."""
    return pools(data)[1]


def pools(data: dict[str, pl.DataFrame]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(`combined`, `cut_pool`) at once: `main`'s pool decides (`isolab.table.one_pool`)."""
    return one_pool([data[k] for k in sorted(data, key=lambda k: k != "main")])
