"""allocation's claims: an adaptive per-prompt allocation (`RunConfig.allocation`) reaches the
avg@4 of the best uniform n with fewer FLOPs.

The runs are IsoFLOP: every arm ends at the same `flops/total` (discarded rollouts charged), so
"the same avg@4 with fewer FLOPs" is tested as "a higher avg@4 at the same FLOPs" on curves that
still rise: the final avg@4 of the allocator minus that of the best uniform arm of its split
(the uniform n with the highest seed-mean final avg@4, picked on the same data: a choice that
favours uniform), within seeds (`isolab.verdicts.contrasts.compare_arms`), pooled over the
sweep's splits (Easy, Hard and their mix). One claim per allocator; the analysis reports each
split's estimate and the FLOPs it would take uniform n to catch up, without a call.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from isolab.table import final_rows
from isolab.verdicts import contrasts
from isolab.verdicts.claim import Claim, Data, Y, on_split
from isolab.verdicts.result import StatResult

#: The sweep the claims read, and the allocators they test against uniform n.
SWEEP = "main"
ALLOCATORS = ("dynamic", "early_stop", "variance")
#: The `arm` of the best uniform n of each split (`with_arms`).
BEST_UNIFORM = "best uniform"


def arm_of(allocation: str, n: int) -> str:
    """An arm's name: the allocator, or `uniform n=8`."""
    return f"uniform n={n}" if allocation == "uniform" else allocation


def with_arms(df: pl.DataFrame, metric: str = Y) -> pl.DataFrame:
    """`df` with `arm` (`arm_of`) and `versus`: the allocator for adaptive runs, `BEST_UNIFORM`
    for the runs of the uniform arm with the highest seed-mean final `metric` in their split,
    null for the other uniform arms."""
    if "allocation" not in df.columns:
        df = df.with_columns(allocation=pl.lit("uniform"))
    df = df.with_columns(
        arm=pl.when(pl.col("allocation") == "uniform")
        .then(pl.format("uniform n={}", pl.col("n")))
        .otherwise(pl.col("allocation"))
    )
    finals = final_rows(df, metric).filter(pl.col("allocation") == "uniform")
    best = (
        finals.group_by("split", "arm")
        .agg(pl.col(metric).mean().alias("mean"))
        .sort("split", "mean", "arm", descending=[False, True, False])
        .group_by("split", maintain_order=True)
        .first()
        .select("split", best_arm="arm")
    )
    return df.join(best, on="split", how="left").with_columns(
        versus=pl.when(pl.col("allocation") != "uniform")
        .then(pl.col("allocation"))
        .when(pl.col("arm") == pl.col("best_arm"))
        .then(pl.lit(BEST_UNIFORM))
        .otherwise(None)
    )


def _versus_best_uniform(allocation: str, split: str | None = None) -> Callable[[Data], StatResult]:
    def run(data: Data) -> StatResult:
        df = with_arms(on_split(data[SWEEP], split))
        return contrasts.compare_arms(df, Y, "versus", allocation, BEST_UNIFORM)

    return run


_TEXT = {
    "dynamic": "DAPO's dynamic sampling (k = 2: the B_p most varied of 2·B_p groups)",
    "early_stop": "early stopping (SARA-like: a pilot of 2, the B_p least likely flat of 2·B_p)",
    "variance": "a variance split (knapsack-like: B = B_p·n in proportion to p(1 − p))",
}

CLAIMS = tuple(
    Claim(
        id=f"allocation.{allocation}",
        study="allocation",
        text=(
            f"an adaptive per-prompt allocation, {_TEXT[allocation]}, reaches the same avg@4 "
            "with fewer FLOPs than the best uniform n (per-prompt allocation papers)"
        ),
        split=None,
        expected="> 0",
        unit="final avg@4 at equal FLOPs, allocator − best uniform n of its split",
        run=_versus_best_uniform(allocation),
    )
    for allocation in ALLOCATORS
)
