"""interference's claims: a larger n lowers forgetting events per unit of compute (Easy, Hard,
and on the seen training problems of `seen`), read at equal mean gain and level
(`isolab.study.interference.forgetting`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import polars as pl

from isolab.study.interference import forgetting
from isolab.table import with_lr_sum
from isolab.tracking.columns import COUNTS, counts_column
from isolab.verdicts import matched
from isolab.verdicts.claim import Claim, Data, Reading, X, on_split
from isolab.verdicts.result import CI_LEVEL, StatResult
from isolab.vocab import LR_SUM, RUN_KEY, STEP

#: The counts of the run's own training problems (`eval_sets: {seen: train}`).
SEEN_COUNTS = counts_column("seen")


def _forgetting(
    split: str, sweep: str = "main", counts: str = COUNTS
) -> Callable[[Data], StatResult]:
    """The interference claim on `split` of `sweep`, read on the counts `counts` (validation,
    or an evaluation set's) (`isolab.study.interference.forgetting`): the slope at equal gain
    and level; the slope per unit of compute alone is the secondary reading."""

    def run(data: Data) -> StatResult:
        df = on_split(data[sweep], split)
        result, raw = forgetting.forgetting_trends(df, counts, adjusts=(forgetting.ADJUST, ()))
        if raw.ran and raw.interval is not None:
            secondary = (
                f"secondary reading, per unit of compute alone (not adjusted for gain and level, which "
                f"the structured nulls show it confounds): {raw.estimate:+.2g} per doubling of "
                f"n ({CI_LEVEL} CI [{raw.interval[0]:+.2g}, {raw.interval[1]:+.2g}])"
            )
        else:
            secondary = ""  # refused for the same reason as the test itself
        return replace(result, note="; ".join(x for x in (result.note, secondary) if x))

    return run


def _forgetting_matched(split: str, sweep: str = "main", counts: str = COUNTS) -> Reading:
    """The interference claim's readings: its own test holds mean gain and level equal (a
    reading at equal avg@4); beside it, every interval C → 2C of every run (not only those all
    runs share, which fix Σlr by n and B_p) with the excess share regressed on log2 n at equal
    gain and level, at equal C and at equal Σlr (each at the interval's end)."""

    def read(data: Data) -> str:
        df = with_lr_sum(on_split(data[sweep], split))
        iv = forgetting.intervals(df, counts) if counts in df.columns else pl.DataFrame()
        head = (
            "secondary readings (issue 45): at equal avg@4: the test itself compares runs at "
            "equal mean gain and level"
        )
        if not iv.height or LR_SUM not in df.columns:
            return head
        ends = df.select(RUN_KEY, pl.col(X).cast(pl.Float64).alias("C_to"), STEP, LR_SUM, X)
        frame = iv.with_columns(pl.col("C_to").cast(pl.Float64)).join(ends, on=[RUN_KEY, "C_to"])
        adj = forgetting.ADJUST
        at_c = matched.factor_effect(frame, "excess", X, adjust=adj)
        at_lr = matched.factor_effect(frame, "excess", LR_SUM, adjust=adj)
        return (
            f"{head}; over every interval C → 2C, at equal gain and level, excess share per "
            f"doubling of n at equal C: {matched.describe(at_c)}; at equal Σlr: "
            f"{matched.describe(at_lr)}"
        )

    return read


FORGETTING = (
    "excess share of problems with a forgetting event per interval C → 2C, per doubling of n, "
    "at equal mean gain and level"
)
FORGETTING_TEXT = (
    "a larger n lowers forgetting events per unit of compute: it spreads updates over problems "
    "and mitigates interference better than more sequential steps M (Playbook)"
)
CLAIMS = (
    Claim(
        id="interference.less_forgetting_easy",
        study="interference",
        text=FORGETTING_TEXT,
        split="easy",
        expected="< 0",
        unit=FORGETTING,
        run=_forgetting("easy"),
        readings=_forgetting_matched("easy"),
    ),
    Claim(
        id="interference.less_forgetting_hard",
        study="interference",
        text=FORGETTING_TEXT,
        split="hard",
        expected="< 0",
        unit=FORGETTING,
        run=_forgetting("hard"),
        readings=_forgetting_matched("hard"),
    ),
    Claim(
        id="interference.less_forgetting_seen",
        study="interference",
        text=FORGETTING_TEXT + ", on the problems it trains on",
        split="easy",
        expected="< 0",
        unit=FORGETTING.replace("problems", "seen training problems", 1),
        run=_forgetting("easy", "seen", SEEN_COUNTS),
        readings=_forgetting_matched("easy", "seen", SEEN_COUNTS),
    ),
)
