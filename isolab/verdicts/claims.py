"""The papers' claims that the six studies test, each a stated test on the study's runs tables.

`CLAIMS` lists them (id, study, the claim in words, the sign the paper predicts, the unit of the
effect); `evaluate(study, data)` runs a study's tests and returns its `Verdict`s. The same code
runs on simulated worlds with no effect and with a planted one in
`benchmarks/verdict_calibration.py`, which measures each claim's false-call rate and power.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from isolab.table import one_pool
from isolab.verdicts import contrasts, curves, race, slopes
from isolab.verdicts.result import StatResult
from isolab.verdicts.verdict import Verdict, decide
from isolab.vocab import EVAL_AVG, EVAL_BEST, EVAL_WORST, MODEL_BASED, RHO, ROLLOUTS, RULE_BASED

Y = EVAL_AVG
X = ROLLOUTS

Data = dict[str, pl.DataFrame]


@dataclass(frozen=True)
class Claim:
    """One claim of a paper and how these runs test it.

    Attributes:
        id: stable id (`<study>.<what>`).
        study: the curated study whose runs test it.
        text: the paper's claim in words.
        split: the split it is tested on (None: the whole table).
        expected: the paper's sign of the effect: `> 0`, `< 0`, `≠ 0`, or `= 1` (a share).
        unit: what the effect measures.
        run: (study data) → the test's result.
    """

    id: str
    study: str
    text: str
    split: str | None
    expected: str
    unit: str
    run: Callable[[Data], StatResult]


def _split(df: pl.DataFrame, split: str | None) -> pl.DataFrame:
    return df if split is None or "split" not in df.columns else df.filter(pl.col("split") == split)


def _combined(data: Data, *names: str) -> pl.DataFrame:
    """The named sweeps as one table, on the first one's training pool (`isolab.table.one_pool`)."""
    return one_pool([data[n] for n in names if n in data])[0]


def _covariates(df: pl.DataFrame, *names: str) -> tuple[str, ...]:
    return tuple(c for c in names if c in df.columns and df[c].n_unique() > 1)


def _regularisers(split: str) -> Callable[[Data], StatResult]:
    def run(data: Data) -> StatResult:
        df = _split(data["regularisers"], split)
        return contrasts.compare_arms(df, Y, "recipe", "kl_entropy", "none")

    return run


def _lr_rule(data: Data) -> StatResult:
    df = data["lr-scaling"]
    base = int(df["B_base"][0]) if "B_base" in df.columns else 64
    return contrasts.contrast_best(
        df.filter(pl.col("B") != base), Y, "lr_scaling", "sqrt", ("const", "linear"), "B"
    )


def _nstar_grows(split: str) -> Callable[[Data], StatResult]:
    def run(data: Data) -> StatResult:
        df = _split(_combined(data, "main", "long"), split)
        return curves.curve_interaction(df, Y, "n", X, _covariates(df, "B_p"))

    return run


def _easy_above_hard(data: Data) -> StatResult:
    df = _combined(data, "main", "long")
    easy, hard = _split(df, "easy"), _split(df, "hard")
    return curves.optimum_difference(easy, hard, Y, "n", X, _covariates(df, "B_p"))


def _n_vs_steps(split: str, term: str) -> Callable[[Data], StatResult]:
    def run(data: Data) -> StatResult:
        df = _split(data["main"], split)
        return curves.curve_interaction(df, Y, "n", X, _covariates(df, "B"), term=term)

    return run


def _metric_gap(split: str) -> Callable[[Data], StatResult]:
    def run(data: Data) -> StatResult:
        df = _split(_combined(data, "main", "long"), split)
        return curves.gap_slope(df, EVAL_WORST, EVAL_BEST, "n", X, _covariates(df, "B_p"))

    return run


def _rho_rule_vs_model(data: Data) -> StatResult:
    return slopes.slope_difference(
        data["full"], Y, RHO, "reward", RULE_BASED, MODEL_BASED, scale=10.0
    )


def _race(data: Data) -> StatResult:
    return race.regime_agreement(data["pilot"], data["full"], Y)


def _size(data: Data) -> StatResult:
    return slopes.slope_heterogeneity(data["main"], Y, "n", "model")


PER_DOUBLING_SQ = "avg@4 per doubling of n per doubling of C"
CLAIMS: dict[str, Claim] = {
    c.id: c
    for c in (
        Claim(
            id="healthy.kl_entropy_easy",
            study="healthy-recipe",
            text="KL + entropy losses help on Easy sets (IsoCompute Playbook keeps them on)",
            split="easy",
            expected="> 0",
            unit="final avg@4, on − off",
            run=_regularisers("easy"),
        ),
        Claim(
            id="healthy.kl_entropy_hard",
            study="healthy-recipe",
            text="KL + entropy losses do not help on Hard sets (the Playbook drops them)",
            split="hard",
            expected="< 0",
            unit="final avg@4, on − off",
            run=_regularisers("hard"),
        ),
        Claim(
            id="healthy.lr_sqrt",
            study="healthy-recipe",
            text="η ∝ sqrt(B) beats constant and linear scaling of the learning rate (Playbook)",
            split=None,
            expected="> 0",
            unit="final avg@4, sqrt − the closer other rule",
            run=_lr_rule,
        ),
        Claim(
            id="nstar.grows_easy",
            study="nstar",
            text="n* grows with compute (Playbook)",
            split="easy",
            expected="> 0",
            unit=PER_DOUBLING_SQ,
            run=_nstar_grows("easy"),
        ),
        Claim(
            id="nstar.grows_hard",
            study="nstar",
            text="n* grows with compute (Playbook)",
            split="hard",
            expected="> 0",
            unit=PER_DOUBLING_SQ,
            run=_nstar_grows("hard"),
        ),
        Claim(
            id="nstar.easy_above_hard",
            study="nstar",
            text="n* is larger on Easy than on Hard at large compute (≈512 vs ≈128 for Qwen2.5-7B)",
            split=None,
            expected="> 0",
            unit="log2 n*, Easy − Hard, at the largest compute",
            run=_easy_above_hard,
        ),
        Claim(
            id="nvsbp.more_n_with_steps",
            study="n-vs-bp",
            text="at fixed B, few steps favour more problems, many steps more rollouts (Easy)",
            split="easy",
            expected="> 0",
            unit=PER_DOUBLING_SQ,
            run=_n_vs_steps("easy", "linear"),
        ),
        Claim(
            id="nvsbp.nonmonotone_hard",
            study="n-vs-bp",
            text="at fixed B on Hard the best n is non-monotone in the number of steps",
            split="hard",
            expected="≠ 0",
            unit="avg@4 per doubling of n per (doubling of C)²",
            run=_n_vs_steps("hard", "quadratic"),
        ),
        Claim(
            id="bestk.worst_easy",
            study="bestk-worstk",
            text="on Easy sets a larger n lifts worst@k more than best@k (sharpening)",
            split="easy",
            expected="> 0",
            unit="worst@4 − best@4 per doubling of n",
            run=_metric_gap("easy"),
        ),
        Claim(
            id="bestk.best_hard",
            study="bestk-worstk",
            text="on Hard sets a larger n lifts best@k more than worst@k (coverage)",
            split="hard",
            expected="< 0",
            unit="worst@4 − best@4 per doubling of n",
            run=_metric_gap("hard"),
        ),
        Claim(
            id="rho.rule_above_model",
            study="reward-rho",
            text="rule-based rewards favour a larger update fraction ρ than reward-model ones "
            "(ρ* ≈ 0.72 vs ≈ 0.44)",
            split=None,
            expected="> 0",
            unit="avg@4 per +0.1 of ρ, rule-based − model-based",
            run=_rho_rule_vs_model,
        ),
        Claim(
            id="rho.race_same_regime",
            study="reward-rho",
            text="a small pilot grid calls the same regime as the full grid (RACE, rate 1.0)",
            split=None,
            expected="= 1",
            unit="share of systems called alike",
            run=_race,
        ),
        Claim(
            id="size.best_n_depends",
            study="model-size",
            text="the best allocation depends on model size (Wilhelm & Kao)",
            split=None,
            expected="≠ 0",
            unit="avg@4 per doubling of n, largest − smallest slope between sizes",
            run=_size,
        ),
    )
}


def verdict(claim: Claim, result: StatResult) -> Verdict:
    """The claim's call from its test (see `decide`; a share must be 1 to agree)."""
    if not result.ran:
        call, note = "inconclusive", result.note
    elif claim.expected == "= 1":
        call = "agrees" if result.estimate == 1 else "disagrees"
        note = result.note
    else:
        call = decide(result.estimate, result.p_value, claim.expected)
        note = result.note
    return Verdict(
        claim=claim.id,
        text=claim.text,
        split=claim.split,
        call=call,
        test=result.test,
        statistic=result.estimate,
        p_value=result.p_value,
        interval=result.interval,
        min_detectable_effect=result.mde,
        unit=claim.unit,
        expected=claim.expected,
        n_runs=result.n_runs,
        note=note.strip(),
    )


def evaluate(study: str, data: Data) -> list[Verdict]:
    """Every claim of `study` tested on its runs tables (a claim whose sweep is missing from
    `data` is inconclusive with that reason)."""
    out = []
    for claim in CLAIMS.values():
        if claim.study != study:
            continue
        try:
            result = claim.run(data)
        except KeyError as missing:
            result = StatResult.refused(f"sweep {missing} is not in the data")
        out.append(verdict(claim, result))
    return out


def direction(v: Verdict, flat_margin: float) -> str:
    """n*(C) as `growing` / `falling` (the interaction test resolved a sign), `flat` (not
    resolved, and its interval excludes interactions beyond ±`flat_margin`), or `not resolved`."""
    if v.call == "agrees":
        return "growing"
    if v.call == "disagrees":
        return "falling"
    if v.interval is not None and -flat_margin < v.interval[0] and v.interval[1] < flat_margin:
        return "flat"
    return "not resolved"
