"""model-size's claim: the best allocation depends on model size (Wilhelm & Kao), as the
heterogeneity of the slopes of avg@4 in log2 n between sizes (`isolab.verdicts.slopes`)."""

from __future__ import annotations

import polars as pl

from isolab.verdicts import slopes, testbed
from isolab.verdicts.claim import Claim, Data, Y
from isolab.verdicts.result import StatResult


def _size_gate(data: Data) -> str | None:
    """The old testbed's reason, and the fewest updates a model got at equal FLOPs."""
    df = data["main"]
    why = testbed.old_testbed(df)
    if why is None or "M" not in df.columns or "model" not in df.columns:
        return why
    steps = df.group_by("model").agg(pl.col("M").min().alias("lo"), pl.col("M").max().alias("hi"))
    fewest = steps.sort("hi").row(0, named=True)
    return f"{why}; {fewest['model']} gets {fewest['lo']}–{fewest['hi']} steps"


def _size(data: Data) -> StatResult:
    return slopes.slope_heterogeneity(data["main"], Y, "n", "model")


CLAIMS = (
    Claim(
        id="size.best_n_depends",
        study="model-size",
        text="the best allocation depends on model size (Wilhelm & Kao)",
        split=None,
        expected="≠ 0",
        unit="avg@4 per doubling of n, largest − smallest slope between sizes",
        run=_size,
        gate=_size_gate,
    ),
)
