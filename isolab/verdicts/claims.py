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
from isolab.verdicts import tests
from isolab.verdicts.model import Verdict, decide
from isolab.verdicts.tests import TestResult
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
    run: Callable[[Data], TestResult]


def _split(df: pl.DataFrame, split: str | None) -> pl.DataFrame:
    return df if split is None or "split" not in df.columns else df.filter(pl.col("split") == split)


def _combined(data: Data, *names: str) -> pl.DataFrame:
    """The named sweeps as one table, on the first one's training pool (`frames.one_pool`)."""
    return one_pool([data[n] for n in names if n in data])[0]


def _covariates(df: pl.DataFrame, *names: str) -> tuple[str, ...]:
    return tuple(c for c in names if c in df.columns and df[c].n_unique() > 1)


def _regularisers(split: str) -> Callable[[Data], TestResult]:
    def run(data: Data) -> TestResult:
        df = _split(data["regularisers"], split)
        return tests.compare_arms(df, Y, "recipe", "kl_entropy", "none")

    return run


def _lr_rule(data: Data) -> TestResult:
    df = data["lr-scaling"]
    base = int(df["B_base"][0]) if "B_base" in df.columns else 64
    return tests.contrast_best(
        df.filter(pl.col("B") != base), Y, "lr_scaling", "sqrt", ("const", "linear"), "B"
    )


def _nstar_grows(split: str) -> Callable[[Data], TestResult]:
    def run(data: Data) -> TestResult:
        df = _split(_combined(data, "main", "long"), split)
        return tests.curve_interaction(df, Y, "n", X, _covariates(df, "B_p"))

    return run


def _easy_above_hard(data: Data) -> TestResult:
    df = _combined(data, "main", "long")
    easy, hard = _split(df, "easy"), _split(df, "hard")
    return tests.optimum_difference(easy, hard, Y, "n", X, _covariates(df, "B_p"))


def _n_vs_steps(split: str, term: str) -> Callable[[Data], TestResult]:
    def run(data: Data) -> TestResult:
        df = _split(data["main"], split)
        return tests.curve_interaction(df, Y, "n", X, _covariates(df, "B"), term=term)

    return run


def _metric_gap(split: str) -> Callable[[Data], TestResult]:
    def run(data: Data) -> TestResult:
        df = _split(_combined(data, "main", "long"), split)
        return tests.gap_slope(df, EVAL_WORST, EVAL_BEST, "n", X, _covariates(df, "B_p"))

    return run


def _rho_rule_vs_model(data: Data) -> TestResult:
    return tests.slope_difference(
        data["full"], Y, RHO, "reward", RULE_BASED, MODEL_BASED, scale=10.0
    )


def _race(data: Data) -> TestResult:
    return tests.regime_agreement(data["pilot"], data["full"], Y)


def _size(data: Data) -> TestResult:
    return tests.slope_heterogeneity(data["main"], Y, "n", "model")


PER_DOUBLING_SQ = "avg@4 per doubling of n per doubling of C"
CLAIMS: dict[str, Claim] = {
    c.id: c
    for c in (
        Claim(
            "healthy.kl_entropy_easy",
            "healthy-recipe",
            "KL + entropy losses help on Easy sets (IsoCompute Playbook keeps them on)",
            "easy",
            "> 0",
            "final avg@4, on − off",
            _regularisers("easy"),
        ),
        Claim(
            "healthy.kl_entropy_hard",
            "healthy-recipe",
            "KL + entropy losses do not help on Hard sets (the Playbook drops them)",
            "hard",
            "< 0",
            "final avg@4, on − off",
            _regularisers("hard"),
        ),
        Claim(
            "healthy.lr_sqrt",
            "healthy-recipe",
            "η ∝ sqrt(B) beats constant and linear scaling of the learning rate (Playbook)",
            None,
            "> 0",
            "final avg@4, sqrt − the closer other rule",
            _lr_rule,
        ),
        Claim(
            "nstar.grows_easy",
            "nstar",
            "n* grows with compute (Playbook)",
            "easy",
            "> 0",
            PER_DOUBLING_SQ,
            _nstar_grows("easy"),
        ),
        Claim(
            "nstar.grows_hard",
            "nstar",
            "n* grows with compute (Playbook)",
            "hard",
            "> 0",
            PER_DOUBLING_SQ,
            _nstar_grows("hard"),
        ),
        Claim(
            "nstar.easy_above_hard",
            "nstar",
            "n* is larger on Easy than on Hard at large compute (≈512 vs ≈128 for Qwen2.5-7B)",
            None,
            "> 0",
            "log2 n*, Easy − Hard, at the largest compute",
            _easy_above_hard,
        ),
        Claim(
            "nvsbp.more_n_with_steps",
            "n-vs-bp",
            "at fixed B, few steps favour more problems, many steps more rollouts (Easy)",
            "easy",
            "> 0",
            PER_DOUBLING_SQ,
            _n_vs_steps("easy", "linear"),
        ),
        Claim(
            "nvsbp.nonmonotone_hard",
            "n-vs-bp",
            "at fixed B on Hard the best n is non-monotone in the number of steps",
            "hard",
            "≠ 0",
            "avg@4 per doubling of n per (doubling of C)²",
            _n_vs_steps("hard", "quadratic"),
        ),
        Claim(
            "bestk.worst_easy",
            "bestk-worstk",
            "on Easy sets a larger n lifts worst@k more than best@k (sharpening)",
            "easy",
            "> 0",
            "worst@4 − best@4 per doubling of n",
            _metric_gap("easy"),
        ),
        Claim(
            "bestk.best_hard",
            "bestk-worstk",
            "on Hard sets a larger n lifts best@k more than worst@k (coverage)",
            "hard",
            "< 0",
            "worst@4 − best@4 per doubling of n",
            _metric_gap("hard"),
        ),
        Claim(
            "rho.rule_above_model",
            "reward-rho",
            "rule-based rewards favour a larger update fraction ρ than reward-model ones "
            "(ρ* ≈ 0.72 vs ≈ 0.44)",
            None,
            "> 0",
            "avg@4 per +0.1 of ρ, rule-based − model-based",
            _rho_rule_vs_model,
        ),
        Claim(
            "rho.race_same_regime",
            "reward-rho",
            "a small pilot grid calls the same regime as the full grid (RACE, rate 1.0)",
            None,
            "= 1",
            "share of systems called alike",
            _race,
        ),
        Claim(
            "size.best_n_depends",
            "model-size",
            "the best allocation depends on model size (Wilhelm & Kao)",
            None,
            "≠ 0",
            "avg@4 per doubling of n, largest − smallest slope between sizes",
            _size,
        ),
    )  # fmt: skip
}


def verdict(claim: Claim, result: TestResult) -> Verdict:
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
        claim.id, claim.text, claim.split, call, result.test, result.estimate, result.p_value,
        result.interval, result.mde, claim.unit, claim.expected, result.n_runs, note.strip(),
    )  # fmt: skip


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
            result = TestResult.refused(f"sweep {missing} is not in the data")
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
