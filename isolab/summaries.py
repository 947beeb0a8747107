"""Small tables over the runs table: seed-averaged curves, final results, honest comparisons.

Pure functions, polars in and polars out (the layout of `isolab.runs.load_runs`: one row per
run × evaluation step). They back the curated studies' findings (`isolab.analyses`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import polars as pl

RUN = "run_key"
# Sampling noise of one evaluation when the table does not say how it was evaluated: avg@k on
# 64 problems × 8 samples (see `eval_noise`).
EVAL_NOISE = 0.02
_SHORT = {"compute/rollouts": "rollouts", "flops/total": "flops"}


def _key(df: pl.DataFrame) -> str:
    return RUN if RUN in df.columns else "run_id"


def eval_noise(df: pl.DataFrame) -> float:
    """Standard error of one run's avg@k from sampling: the problems are fixed, each of the
    P·K samples is a Bernoulli draw, so the variance is mean p(1 − p) / (P·K) ≤ 1 / (4·P·K):
    0.5 / sqrt(P·K) — 0.022 at 64 problems × 8 samples, 0.063 at 16 × 4. Read from the
    `eval_problems` / `eval_k_samples` columns (the smallest evaluation in the table), else
    `EVAL_NOISE`."""
    if not {"eval_problems", "eval_k_samples"} <= set(df.columns) or df.height == 0:
        return EVAL_NOISE
    draws = (pl.col("eval_problems") * pl.col("eval_k_samples")).min()
    n = df.select(draws).item()
    return 0.5 / math.sqrt(n) if n else EVAL_NOISE


def curves(df: pl.DataFrame, by: Sequence[str], x: str, y: str) -> pl.DataFrame:
    """Seed-averaged curve of `y` against `x` per group: `by`, `x`, `mean`, `std`, `n_seeds`.

    Runs of a group evaluate at the same steps (a study's common checkpoints), so points are
    averaged per (group, step); `x` is averaged too (IsoFLOP runs of one config agree on it).
    """
    by = list(by)
    return (
        df.filter(pl.col(y).is_finite())
        .group_by([*by, "step"])
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
    last = ok.filter(pl.col("step") == pl.col("step").max().over(key))
    first = ok.filter(pl.col("step") == pl.col("step").min().over(key))
    extra = [c for c in ("compute/rollouts", "flops/total") if c in df.columns]
    ends = last.group_by(by).agg(
        pl.col(y).mean().alias("final"),
        pl.col(y).std().alias("final_std"),
        pl.col(key).n_unique().alias("n_seeds"),
        pl.col("step").mean().alias("steps"),
        *[pl.col(c).mean().alias(_SHORT[c]) for c in extra],
    )
    starts = first.group_by(by).agg(pl.col(y).mean().alias("base"))
    out = starts.join(ends, on=by, how="inner").with_columns(gain=pl.col("final") - pl.col("base"))
    head = [*by, "base", "final", "final_std", "gain", "n_seeds"]
    return out.select(*head, pl.exclude(*head)).sort(by)


def verdict(
    a: float,
    b: float,
    a_std: float,
    b_std: float,
    n_a: int,
    n_b: int,
    noise: float = EVAL_NOISE,
) -> str:
    """`higher` / `lower` / `tie` for a − b: a tie when the gap is within two standard errors.

    Each side's standard error is its seed spread over sqrt(seeds), but never below the
    evaluation's own sampling noise (`noise` per run, see `eval_noise`, over sqrt(seeds)): two
    seeds that happen to agree do not make a difference certain.
    """
    if not (math.isfinite(a) and math.isfinite(b)):
        return "unknown"
    var = 0.0
    for std, n in ((a_std, n_a), (b_std, n_b)):
        n = max(1, n or 1)
        spread = std if std is not None and math.isfinite(std) else 0.0
        var += max(spread, noise) ** 2 / n
    margin = 2 * math.sqrt(var)
    if a - b > margin:
        return "higher"
    if b - a > margin:
        return "lower"
    return "tie"
