"""What to use at a budget: the allocation the fitted laws recommend, hedged by what the runs can
tell apart (their noise), how many seeds they have and where the grid of n ends, and checked by
ScaleRL's held-out protocol (`isolab.frontier.validate`): the same advice made from the runs up
to C/2 (and C/4) is scored against the measured best at C beside two baselines (the best seed
mean at C/2, a random arm), and no point allocation is given further beyond the data than that
check reached, nor beyond the data at all where the fitted optimum moved within it: on planted
worlds where n* moves (`isolab.frontier.planted`) the advice did not beat holding the optimum
fixed."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import polars as pl

from isolab.frontier.advice import (
    GRPO_MIN_N,
    MAX_OF_POINTS_SD,
    Recommendation,
    advise,
    grid_edge,
    noise_hedges,
    within_noise,
)
from isolab.frontier.blas import single_threaded
from isolab.frontier.nstar import NStarResult, optimal_n
from isolab.frontier.validate import Prediction, Validation, compute, validate
from isolab.table import as_float, finite_rows, require, to_polars
from isolab.vocab import DEFAULT_X, DEFAULT_Y

__all__ = [  # the advice's names are read from here too (`advice` is the part without the check)
    "BEATS_FIXED_ON_MOVING",
    "CALIBRATION",
    "CHECK_FACTORS",
    "GRPO_MIN_N",
    "MAX_EXTRAPOLATION",
    "MAX_OF_POINTS_SD",
    "Recommendation",
    "grid_edge",
    "noise_hedges",
    "optimum_move",
    "recommend",
    "validate_recommend",
    "within_noise",
]

#: ScaleRL's protocol fits on the runs up to C/2 and predicts C (arXiv 2510.13786): a point
#: allocation is given up to this multiple of the largest compute in the data, no further.
MAX_EXTRAPOLATION = 2.0
#: The extrapolations the advice is checked over: C/2 (ScaleRL's, the one that sets the limit
#: above) and C/4 (a harder test, reported).
CHECK_FACTORS = (MAX_EXTRAPOLATION, 4.0)
#: Whether, on planted worlds whose n* moved between C/2 (C/4) and C, the advice made from
#: ≤ C/2 and ≤ C/4 had a mean true regret at C lower than holding the best seed mean seen fixed,
#: by more than 2 standard errors of the paired difference, at both (`isolab.frontier.planted`;
#: the table in docs/statistics.md). `scripts/recommend_regret.py --planted` measures it anew
#: and says if it no longer holds.
BEATS_FIXED_ON_MOVING = False
#: The kind of world the advice's validation covers, printed under its checks.
CALIBRATION = (
    "What the checks cover: each says whether the best moved between C/2 (C/4) and C in these "
    "runs (a static optimum is what holding the best seed mean fixed gets right by "
    "construction). On planted worlds where n* moves by 1–3 doublings and is still moving over "
    "the last 4× of the budget (docs/statistics.md), this advice "
    + ("beat" if BEATS_FIXED_ON_MOVING else "did not beat")
    + " that baseline, so where the fitted optimum moves within the data it is not "
    "extrapolated beyond the data"
)


@single_threaded
def recommend(
    df: Any,
    budget: float,
    *,
    x: str = DEFAULT_X,
    y: str = DEFAULT_Y,
    n_star: NStarResult | None = None,
    check: bool = True,
    **optimal_n_kwargs: Any,
) -> Recommendation:
    """The allocation to use at compute `budget`, from the fitted n*(C) and the runs themselves,
    with what the runs cannot tell (`Recommendation.hedges`) and how well the same advice did
    when it was made from less compute (`Recommendation.validation`).

    n: the grid value of n nearest (in log2) to the fitted n*(budget) (past the data, the
    saturation n; past the data without an identifiable n*(C), whose path falls or could not
    be fitted, the n whose own fitted curve is highest at the budget); within the data, if
    that n's runs at the budget are below the best beyond noise, or without a fitted n*, the
    n of the best runs at the budget. B_p: among runs with
    that n, the B_p with the best seed-averaged reward at the budget (interpolated in log C; a
    run that stops earlier counts at its last point). M: the steps that spend the budget at
    what a step of (n, B_p) cost in the runs (`steps_for`; budget / (B_p·n) in rollouts under
    uniform allocation).

    Hedges: one seed; the n within noise of the best (seed spread where configurations have ≥ 2
    seeds, else evaluation binomial noise from eval_problems × eval_k_samples, else none); an
    n at the grid's edge and the extension that would find an optimum beyond it. No expected
    reward from a flat fit; an expected reward below the best observed says why. Last, the
    held-out checks, one sentence each (with the baselines and the kind of world each covered),
    a fitted optimum that moved within the data, and `CALIBRATION`.

    Checked, not asserted (`check=True`): the same advice is made from the runs' evaluations up
    to C/2 and up to C/4, C the largest compute every run reaches, and scored by its regret at C
    against the noise of the difference, beside the best seed mean at ≤ C/2 (C/4) and a random
    arm (`validate_recommend`, `isolab.frontier.validate`). The rule: a point allocation is
    given up to `MAX_EXTRAPOLATION` (2) × the largest compute in the data when the C/2 check is
    within noise (the 2× extrapolation was shown to work) and the fitted optimum stayed at one
    n over the last 4× of the data (`optimum_move`; where n* moves, the advice did not beat
    holding the optimum fixed on planted worlds: `BEATS_FIXED_ON_MOVING`); only up to the
    largest compute in the data when the check failed, could not fail (a random arm passes it
    too) or could not be made, or when the optimum moved. Beyond that limit the advice is
    refused: `refusal` says why and the range the advice speaks for, and the allocation given
    is the one at the limit. `check=False` skips the check and the limit (the check itself
    makes its advice so).
    """
    if not budget > 0:
        raise ValueError(f"budget = {budget}: give a positive compute budget in {x}.")
    if not check:
        return advise(df, budget, x, y, n_star, optimal_n_kwargs)
    df = to_polars(df)
    require(df, x, y, "n", "B_p")
    clean = finite_rows(df, x, y, context="recommend")
    if clean.height == 0:
        raise ValueError(f"no run has {x} > 0 and a finite {y}: nothing to recommend from.")
    checks = validate_recommend(clean, x=x, y=y, **optimal_n_kwargs)
    c_max = as_float(clean[x].max())
    res = n_star if n_star is not None else optimal_n(clean, x=x, y=y, **optimal_n_kwargs)
    ns = sorted(int(v) for v in clean["n"].unique().to_list())
    moved = optimum_move(res, c_max / max(CHECK_FACTORS), c_max, ns)
    passed = checks[0].within and not moved
    limit = MAX_EXTRAPOLATION * c_max if passed else c_max
    refusal = _refusal(budget, c_max, checks[0], moved, clean, x) if budget > limit else ""
    rec = advise(clean, min(budget, limit), x, y, res, optimal_n_kwargs)
    return dataclasses.replace(
        rec,
        budget=budget,
        hedges=(
            *rec.hedges,
            *(c.text for c in checks),
            *(() if refusal else _moved_hedge(moved, c_max)),  # a refusal says it already
            CALIBRATION,
        ),
        validation=checks,
        limit=limit,
        refusal=refusal,
    )


def optimum_move(res: NStarResult, lo: float, hi: float, ns: list[int]) -> str:
    """Whether the fitted optimum moved between compute `lo` and `hi`: a sentence naming the n
    of the grid `ns` nearest (in log2) to the fitted n*(C) (the running average of the per-n
    fits' envelope, `NStarResult.table`) at each end, or "" when it is one n all along (or no
    n*(C) was fitted)."""
    if res.table.height == 0 or len(ns) < 2:
        return ""
    t = res.table.filter(pl.col("C").is_between(lo, hi) & pl.col("n_star").is_not_nan())
    if t.height == 0:
        return ""
    grid = np.log2(np.array(ns, dtype=float))
    log_n = np.log2(t["n_star"].to_numpy().astype(float))
    nearest = [ns[i] for i in np.argmin(np.abs(log_n[:, None] - grid[None, :]), axis=1)]
    if len(set(nearest)) < 2:
        return ""
    C = t["C"].to_numpy()
    took = ", ".join(map(str, sorted(set(nearest))))
    return (
        f"the fitted optimum moved within the data: n* ≈ {nearest[0]} at C = {compute(C[0])}, "
        f"≈ {nearest[-1]} at C = {compute(C[-1])} (n ∈ {{{took}}} over the last {hi / lo:g}× "
        "of the data, the range its checks span)"
    )


def _moved_hedge(moved: str, c_max: float) -> tuple[str, ...]:
    """The sentence on a fitted optimum that moved within the data (none when it did not)."""
    if not moved:
        return ()
    return (f"{moved[0].upper()}{moved[1:]}: no point allocation beyond C = {compute(c_max)}",)


def _refusal(
    budget: float, c_max: float, check: Validation, moved: str, df: pl.DataFrame, x: str
) -> str:
    """Why there is no point allocation at `budget`, beyond the limit `recommend` set, and the
    range the advice speaks for."""
    c_min = as_float(df.filter(pl.col(x) > 0)[x].min())
    speaks = (
        f"it speaks for C ≤ {compute(c_max)}, the data's range ({compute(c_min)} to "
        f"{compute(c_max)})"
    )
    reasons = []
    if check.verdict == "cannot fail":
        reasons.append(
            f"its own check from ≤ C/{check.factor:g} cannot fail (a random arm is within noise "
            "of the best at C too), so it vouches for nothing beyond"
        )
    elif not check.within:
        why = check.reason or f"the regret at C was {check.verdict}"
        reasons.append(
            f"the advice failed its own check from ≤ C/{check.factor:g} ({why}), so it does "
            "not extrapolate"
        )
    if moved:
        beat = "beat" if BEATS_FIXED_ON_MOVING else "did not beat"
        reasons.append(
            f"{moved}; on planted worlds where n* moves, this advice {beat} holding the best "
            "seed mean fixed (docs/statistics.md), and a moving optimum is not extrapolated"
        )
    if reasons:
        return (
            f"it lies beyond the largest compute in the data ({compute(c_max)}): "
            f"{'; '.join(reasons)}; {speaks}"
        )
    return (
        f"that is {budget / c_max:.3g}× the largest compute in the data ({compute(c_max)}), "
        f"beyond the {MAX_EXTRAPOLATION:g}× over which this advice was checked (fit on "
        f"≤ C/{check.factor:g}, scored at C)"
    )


def validate_recommend(
    df: Any,
    *,
    factors: tuple[float, ...] = CHECK_FACTORS,
    x: str = DEFAULT_X,
    y: str = DEFAULT_Y,
    **optimal_n_kwargs: Any,
) -> tuple[Validation, ...]:
    """ScaleRL's held-out check of `recommend` on one setting's runs, per factor: the advice
    made at C (the largest compute every run reaches) from the evaluations at ≤ C / factor,
    n*(C) refitted on those alone (no bootstrap), scored by its regret at C against the noise
    (`isolab.frontier.validate.validate`). The allocation is (n, B_p)."""
    kwargs: dict[str, Any] = {**optimal_n_kwargs, "n_boot": 0}

    def advice(seen: pl.DataFrame, C: float) -> Prediction:
        res = optimal_n(seen, x=x, y=y, **kwargs)
        rec = advise(seen, C, x, y, res, {})
        source = {"fit": "n*(C) fit", "envelope": "envelope", "per-n fits": "per-n fits"}
        return Prediction(
            {"n": rec.n, "B_p": rec.B_p}, rec.expected, source.get(rec.n_star_from, "runs")
        )

    return tuple(validate(df, advice, factor=f, x=x, y=y) for f in factors)
