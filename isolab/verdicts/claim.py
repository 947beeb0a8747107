"""A claim of a paper and how a study's runs test it: the record (`Claim`), the call on its test's
result (`verdict`), and the helpers that the studies' claims share.

Each curated study states its own claims in `isolab/study/<study>/claims.py` (a tuple `CLAIMS`
of `Claim`); `isolab.study.claims` gathers them. A claim carries its test (`run`), the gate that
leaves it untested on data that cannot test it, the caveat a kept call carries and its readings
at equal compute, summed learning rate and avg@4 (`isolab.verdicts.matched`), so that changing
a claim touches its study's file only. The same `run` is what the calibration's simulated worlds
call (`isolab.study.calibration`), without the gate, the caveat or the readings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import polars as pl

from isolab.table import one_pool
from isolab.verdicts import matched, testbed
from isolab.verdicts.result import ALPHA, StatResult
from isolab.verdicts.verdict import Call, Verdict, decide
from isolab.vocab import EVAL_AVG, ROLLOUTS, RUN_KEY

#: The metric the claims read unless they say otherwise, and the compute axis.
Y = EVAL_AVG
X = ROLLOUTS

#: A study's runs tables, by sweep name.
Data = dict[str, pl.DataFrame]
#: (study data) → a sentence added to a claim's note.
Reading = Callable[[Data], str]


@dataclass(frozen=True)
class Claim:
    """One claim of a paper and how these runs test it.

    Attributes:
        id: stable id (`<study>.<what>`).
        study: the curated study whose runs test it.
        text: the paper's claim in words.
        split: the split it is tested on (None: the whole table).
        expected: the paper's sign of the effect: `> 0`, `< 0`, `≠ 0`, `= 1` (a share), or an
            equivalence `≈ v` (agrees when both one-sided tests put the effect inside the margin).
        unit: what the effect measures.
        run: (study data) → the test's result.
        gate: (study data) → why these data cannot test the claim at all (e.g. runs on the old
            testbed, `isolab.verdicts.testbed`), or None; `evaluate` checks it before `run`.
            The calibration's simulated worlds run the test alone: they calibrate it as it
            would run on data that pass the gate.
        caveat: (study data) → what a reader must know beside a kept call (issue 46), added to
            the note before the readings.
        readings: (study data) → the claim's secondary readings: its effect at equal compute,
            at equal summed learning rate Σlr (equal optimizer progress) and at equal avg@4
            (`isolab.verdicts.matched`), beside its own test (the call does not use them).
    """

    id: str
    study: str
    text: str
    split: str | None
    expected: str
    unit: str
    run: Callable[[Data], StatResult]
    gate: Callable[[Data], str | None] | None = None
    caveat: Reading | None = None
    readings: Reading | None = None


def on_split(df: pl.DataFrame, split: str | None) -> pl.DataFrame:
    """The rows of `split` (all rows for None, or for a table without splits)."""
    return df if split is None or "split" not in df.columns else df.filter(pl.col("split") == split)


def covariates(df: pl.DataFrame, *names: str) -> tuple[str, ...]:
    """The columns of `names` that vary in `df` (those a fit can adjust for)."""
    return tuple(c for c in names if c in df.columns and df[c].n_unique() > 1)


def old_testbed(sweep: str) -> Callable[[Data], str | None]:
    """The gate of a claim whose sweep may be on the old testbed (`testbed.old_testbed`)."""

    def gate(data: Data) -> str | None:
        return testbed.old_testbed(data[sweep])

    return gate


def same_pool(data: Data, main: str, other: str) -> pl.DataFrame | None:
    """The `other` sweep's runs trained on `main`'s pool (`isolab.table.one_pool`), or None."""
    if other not in data:
        return None
    keys = data[other][RUN_KEY].unique()
    kept = one_pool([data[main], data[other]])[0]
    return kept.filter(pl.col(RUN_KEY).is_in(keys.implode()))


def matched_readings(
    sweep: str,
    split: str | None,
    metric: str = Y,
    term: str = "main",
    level: str = Y,
    factor: str = "n",
) -> Reading:
    """A claim's readings at equal C, equal Σlr and equal `level` (`isolab.verdicts.matched`)
    on `split` of `sweep`."""

    def read(data: Data) -> str:
        df = on_split(data[sweep], split)
        return matched.readings(df, metric, factor, term, level=level)[0]

    return read


def matched_per_split(factor: str = "n") -> Reading:
    """`matched_readings` on `main`'s Easy and Hard splits, side by side."""

    def read(data: Data) -> str:
        parts = [
            matched.readings(on_split(data["main"], s), Y, factor, prefix=f"{s.capitalize()}, ")[0]
            for s in ("easy", "hard")
        ]
        return "secondary readings (issue 45): " + "; ".join(parts)

    return read


def _call(claim: Claim, result: StatResult) -> tuple[Call, float | None]:
    """The call and the p-value it rests on (see `decide`; a share must be 1 to agree; an
    equivalence (`≈ 0`, `≈ 0.5`) agrees when its two one-sided tests put the effect inside the
    margin, disagrees when the effect lies beyond it at α, with that test's p-value)."""
    if not result.ran:
        return "inconclusive", result.p_value
    if claim.expected == "= 1":
        return ("agrees" if result.estimate == 1 else "disagrees"), result.p_value
    if claim.expected.startswith("≈"):
        beyond = result.extra.get("p_beyond")
        if result.p_value is not None and result.p_value < ALPHA:
            return "agrees", result.p_value
        if beyond is not None and beyond < ALPHA:
            return "disagrees", float(beyond)
        return "inconclusive", result.p_value
    return decide(result.estimate, result.p_value, claim.expected), result.p_value


def verdict(claim: Claim, result: StatResult) -> Verdict:
    """The claim's `Verdict` from its test's result (the call: `_call`)."""
    call, p_value = _call(claim, result)
    return Verdict(
        claim=claim.id,
        text=claim.text,
        split=claim.split,
        call=call,
        test=result.test,
        statistic=result.estimate,
        p_value=p_value,
        interval=result.interval,
        min_detectable_effect=result.mde,
        unit=claim.unit,
        expected=claim.expected,
        n_runs=result.n_runs,
        note=result.note.strip(),
    )


def evaluate_claims(claims: Iterable[Claim], data: Data) -> list[Verdict]:
    """Every claim of `claims` tested on a study's runs tables (a claim whose sweep is missing
    from `data` is inconclusive with that reason, one whose gate refuses the data is untested
    with the gate's reason), each note followed by the claim's caveat and its readings."""
    out = []
    for claim in claims:
        why = None
        try:
            why = claim.gate(data) if claim.gate is not None else None
            result = StatResult.refused(why) if why else claim.run(data)
        except KeyError as missing:
            result = StatResult.refused(f"sweep {missing} is not in the data")
        extras = []
        for reading in (claim.caveat, claim.readings):
            try:
                extras.append(reading(data) if reading is not None and not why else "")
            except KeyError:  # the sweep is missing: the claim's note says so already
                extras.append("")
        if any(extras):
            result = replace(result, note="; ".join(x for x in (result.note, *extras) if x))
        out.append(verdict(claim, result))
    return out


def direction(v: Verdict, flat_margin: float) -> str:
    """n*(C) as `growing` / `falling` (the shift of the vertex resolved a sign), `flat` (not
    resolved, and its interval excludes shifts beyond ±`flat_margin` doublings of n* per
    doubling of C), or `not resolved` (an untested claim has no interval)."""
    if v.call == "agrees":
        return "growing"
    if v.call == "disagrees":
        return "falling"
    if v.interval is not None and -flat_margin < v.interval[0] and v.interval[1] < flat_margin:
        return "flat"
    return "not resolved"
