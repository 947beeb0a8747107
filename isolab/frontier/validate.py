"""Checked, not asserted: ScaleRL's held-out protocol applied to the allocation a sweep advises.

Khatri et al. (ScaleRL, arXiv 2510.13786) trust a fitted law only after fitting it on the runs
up to half the compute and predicting the rest. For an allocation the question is which
configuration wins. On a sweep whose runs all reach compute C (`common_compute`: every run
evaluates at the same checkpoints, so C is the largest one they share), `validate`

1. keeps each run's evaluations up to its checkpoint nearest C / factor in log compute
   (`seen_rows`; factor 2, and 4 for a harder test): the checkpoint at C / factor itself when
   the runs share checkpoints, within a step of it on an IsoFLOP grid whose runs end a few
   percent apart in FLOPs;
2. asks a predictor (`recommend`'s own advice, or `rho_allocation`) for the best allocation at
   C from those alone;
3. measures every configuration at C (`runs_at_budget`: seed means of the metric) and scores
   the prediction by its regret, ``R̄(best at C) − R̄(predicted at C) ≥ 0``;
4. compares the regret with the noise of that difference, ``√(se_best² + se_predicted²)``,
   each ``se = SD / √seeds`` with SD one run's noise at C (`budget_noise`: the spread between
   seeds, else the evaluation's binomial noise). The prediction is *within noise* when the
   regret is at most `WITHIN_SE` of those standard errors: the test by which `recommend` names
   the options within noise of the best, so a prediction within noise is one of them.

The best at C is a maximum of noisy seed means, so even a perfect predictor has a regret above
zero when configurations are close: that is what the noise yardstick allows for.

A regret within noise means little unless a trivial rule would have missed, so every check is
scored beside two baselines (`Baseline`): the best seed mean at the compute the predictor saw
(``best seed mean at ≤ C/2``: the optimum held fixed), and an arm drawn at random (its expected
regret, the mean over arms). Where even the random arm's expected regret is within noise, the
check *cannot fail*: it is reported as such, not as a pass. Whether the measured best moved
between C / factor and C (`Validation.optimum_moved`) says which kind of world the check
covered: a static optimum, which the baseline gets right by construction, or a moving one.

The evidence at a compute and its noise (`runs_at_budget`, `budget_noise`,
`with_standard_errors`) live in `isolab.frontier.evidence`, below `isolab.frontier.recommend`,
which reads them for its hedges and passes its advice to `validate` as the predictor.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import polars as pl

from isolab.frontier.evidence import (
    ALLOCATION,
    RHO_ALLOCATION,
    SYMBOLS,
    WITHIN_SE,
    Noise,
    budget_noise,
    common_compute,
    compute,
    runs_at_budget,
    seen_rows,
    with_standard_errors,
)
from isolab.frontier.predictions import Baseline, Prediction, best_seed_mean, random_arm
from isolab.frontier.rho import rho_frontier
from isolab.table import as_float, finite_rows, require, run_column, to_polars
from isolab.vocab import DEFAULT_X, DEFAULT_Y

#: The check's verdicts: the regret within / beyond the noise of the difference; within noise
#: where a random arm is too (the check cannot fail); a regret with no noise to judge it by (one
#: seed and no evaluation size); no check (see `reason`).
Verdict = Literal["within noise", "beyond noise", "cannot fail", "no noise estimate", "not checked"]


@dataclass(frozen=True)
class Validation:
    """The held-out check of one predictor at one extrapolation factor (`validate`).

    Attributes:
        metric, x: the reward and compute columns.
        factor: C over the compute the predictor saw (2: ScaleRL's C/2; 4: C/4).
        C: the compute checked at, the largest every run reaches (`common_compute`).
        seen_max: the largest compute the predictor saw: C / factor when the runs share
            checkpoints, within a step of it otherwise (`seen_rows`).
        predicted, best: the predicted allocation and the measured best at C, over the columns
            of the prediction that vary in the grid.
        predicted_reward, best_reward: their seed means of `metric` at C.
        regret: ``best_reward − predicted_reward`` (0 when the prediction is the best).
        se: standard error of that difference, ``√(se_best² + se_predicted²)``.
        noise: one run's noise at C and where it comes from (`budget_noise`).
        verdict: ``within noise`` (regret ≤ `WITHIN_SE`·se), ``beyond noise``, ``cannot
            fail`` (within noise, but so is the random arm's expected regret: the check could
            not have failed), ``no noise estimate`` or ``not checked`` (see `reason`).
        expected: the predictor's law for the predicted allocation at C (NaN: none).
        source: the predictor's `Prediction.source`.
        configs: configurations measured at C.
        reason: why the check could not be made ("" when it was).
        baseline: the best seed mean at ≤ C / factor (`best_seed_mean`), scored at C.
        random: a random arm's expected regret at C (`random_arm`).
    """

    metric: str
    x: str
    factor: float
    C: float
    predicted: Mapping[str, Any] = field(default_factory=dict)
    best: Mapping[str, Any] = field(default_factory=dict)
    predicted_reward: float = float("nan")
    best_reward: float = float("nan")
    regret: float = float("nan")
    se: float = float("nan")
    noise: Noise | None = None
    verdict: Verdict = "not checked"
    seen_max: float = float("nan")
    expected: float = float("nan")
    source: str = ""
    configs: int = 0
    reason: str = ""
    baseline: Baseline | None = None
    random: Baseline | None = None

    @property
    def within(self) -> bool:
        """Whether the prediction is within noise of the measured best at C, in a check that
        could have failed (not ``cannot fail``)."""
        return self.verdict == "within noise"

    @property
    def optimum_moved(self) -> bool:
        """Whether the measured best at C differs from the best seed mean at ≤ C / factor:
        the world this check covered had a moving optimum (False: a static one)."""
        return self.baseline is not None and dict(self.baseline.allocation) != dict(self.best)

    @property
    def text(self) -> str:
        """One sentence: what was predicted from ≤ C/factor, what won at C, the regret, its
        noise (the standard error of the difference) and the verdict."""
        fit = f"by fitting on ≤ C/{self.factor:g} (C = {compute(self.C)})"
        if self.verdict == "not checked":
            return f"not validated {fit}: {self.reason}"
        verdict = {
            "within noise": f"within noise (regret ≤ {WITHIN_SE:g} × noise)",
            "beyond noise": f"beyond noise (regret > {WITHIN_SE:g} × noise)",
            "cannot fail": (
                f"the check cannot fail: a random arm's expected regret, "
                f"{self.random.regret if self.random else math.nan:.3f}, is within "
                f"{WITHIN_SE:g} × noise too"
            ),
        }.get(self.verdict, self.verdict)
        return (
            f"{'' if self.within else 'not '}validated {fit}: predicted "
            f"{_allocation(self.predicted)}, measured best {_allocation(self.best)}, regret "
            f"{self.regret:.3f} (noise {self.se:.3f}): {verdict}{self.against_baselines}"
        )

    @property
    def against_baselines(self) -> str:
        """The baselines' regrets beside the prediction's and the kind of world covered, as
        the tail of `text` ("" without baselines)."""
        if self.baseline is None or self.random is None:
            return ""
        b = self.baseline
        gap = b.regret - self.regret
        if dict(b.allocation) == dict(self.predicted):
            than = "the advice made the same pick"
        elif gap >= 0:
            than = f"the advice beat it by {gap:.3f}"
        else:
            than = f"the advice lost to it by {-gap:.3f}"
        moved = (
            f"the measured best moved from {_allocation(b.allocation)} at ≤ "
            f"C/{self.factor:g} to {_allocation(self.best)} at C: the check covered a moving "
            "optimum"
            if self.optimum_moved
            else f"the best at ≤ C/{self.factor:g} was still the best at C: the check covered a "
            "static optimum, which holding the optimum fixed gets right by construction"
        )
        return (
            f"; baseline {b.name} ({_allocation(b.allocation)}): regret {b.regret:.3f}, {than}; "
            f"{self.random.name}: expected regret {self.random.regret:.3f}; {moved}"
        )

    def to_dict(self) -> dict[str, Any]:
        """Flat record (one row of a table)."""
        return {
            "factor": self.factor,
            "C": self.C,
            "seen_max": self.seen_max,
            "predicted": _allocation(self.predicted),
            "best": _allocation(self.best),
            "predicted_reward": self.predicted_reward,
            "best_reward": self.best_reward,
            "regret": self.regret,
            "se": self.se,
            "noise_sd": self.noise.sd if self.noise else float("nan"),
            "noise_source": self.noise.source if self.noise else "none",
            "verdict": self.verdict,
            "expected": self.expected,
            "source": self.source,
            "configs": self.configs,
            "reason": self.reason,
            "baseline": _allocation(self.baseline.allocation) if self.baseline else "",
            "baseline_regret": self.baseline.regret if self.baseline else float("nan"),
            "baseline_se": self.baseline.se if self.baseline else float("nan"),
            "random_regret": self.random.regret if self.random else float("nan"),
            "random_se": self.random.se if self.random else float("nan"),
            "optimum_moved": self.optimum_moved,
        }


def _allocation(allocation: Mapping[str, Any]) -> str:
    return ", ".join(f"{SYMBOLS.get(k, k)} = {v}" for k, v in allocation.items()) or "–"


def validate(
    df: Any,
    predict: Callable[[pl.DataFrame, float], Prediction],
    *,
    factor: float = 2.0,
    x: str = DEFAULT_X,
    y: str = DEFAULT_Y,
    config: Sequence[str] = ALLOCATION,
) -> Validation:
    """ScaleRL's held-out check of `predict`: the allocation it predicts for C from the runs'
    evaluations at compute ≤ C / `factor`, against the measured best at C (module docstring).

    Args:
        df: runs of one setting (one row per run × evaluation).
        predict: ``predict(seen, C)`` → `Prediction`, called with each run's rows up to its
            checkpoint nearest C / factor (`seen_rows`); a ValueError it raises is reported
            as the check's `reason`.
        factor: how far the prediction extrapolates (> 1; ScaleRL's protocol: 2).
        x, y: the compute and reward columns.
        config: the columns that identify a configuration (its seeds averaged together).
    """
    if not factor > 1:
        raise ValueError(
            f"factor = {factor}: the check predicts C from the runs up to C / factor, so factor "
            "must be above 1 (ScaleRL's protocol: 2)."
        )
    df = to_polars(df)
    require(df, x, y)
    df = finite_rows(df, x, y, context="validate")
    cfg = [c for c in config if c in df.columns]
    if df.height == 0:
        raise ValueError(f"no run has a finite {x} and {y}: nothing to validate.")
    C = common_compute(df, x)
    evidence = runs_at_budget(df, C, x, y, cfg)
    noise = budget_noise(df, evidence, y)
    evidence = with_standard_errors(evidence, noise, y)
    base = Validation(y, x, factor, C, noise=noise, configs=evidence.height)
    seen = seen_rows(df, x, C, factor) if C > 0 else df.clear()
    seen_max = as_float(seen[x].max()) if seen.height else float("nan")
    if not seen_max < C:
        return _unchecked(
            base, f"no evaluation nearer C/{factor:g} = {C / factor:.3g} than C in {x}"
        )
    try:
        pred = predict(seen, C)
    except ValueError as exc:  # the predictor's own refusal, e.g. too few points to fit
        return _unchecked(base, f"no prediction from ≤ C/{factor:g}: {exc}")
    unknown = [k for k in pred.allocation if k not in cfg]
    if unknown:
        raise ValueError(
            f"the predicted allocation names {unknown}, which are not configuration columns "
            f"{cfg}: pass config= naming them."
        )
    mine = _matching(evidence, pred.allocation)
    if mine.height != 1:
        what = "has no runs" if mine.height == 0 else f"matches {mine.height} configurations"
        return _unchecked(base, f"the predicted {_allocation(pred.allocation)} {what} at C")
    value = f"{y}_at_budget"
    best, me = evidence.row(0, named=True), mine.row(0, named=True)
    keys = [k for k in pred.allocation if evidence[k].n_unique() > 1] or list(pred.allocation)
    regret, se = _regret(best, me, value)
    fixed = best_seed_mean(seen, x, y, cfg)
    held = _matching(evidence, fixed.allocation).row(0, named=True)
    baseline = Baseline(
        f"best seed mean at ≤ C/{factor:g}",
        {k: held[k] for k in keys if k in held},
        *_regret(best, held, value),
    )
    random = random_arm(evidence, y)
    same = all(best[c] == me[c] for c in cfg)
    verdict: Verdict = (
        "within noise"
        if same or regret <= WITHIN_SE * se
        else "no noise estimate"
        if not math.isfinite(se)
        else "beyond noise"
    )
    if verdict == "within noise" and random.within:
        verdict = "cannot fail"
    return Validation(
        y,
        x,
        factor,
        C,
        {k: me[k] for k in keys},
        {k: best[k] for k in keys},
        float(me[value]),
        float(best[value]),
        regret,
        se,
        noise,
        verdict,
        seen_max,
        pred.expected,
        pred.source,
        evidence.height,
        baseline=baseline,
        random=random,
    )


def _matching(evidence: pl.DataFrame, allocation: Mapping[str, Any]) -> pl.DataFrame:
    """The rows of `evidence` whose columns hold `allocation`'s values."""
    match = pl.lit(True)
    for k, v in allocation.items():
        match = match & (pl.col(k) == v)
    return evidence.filter(match)


def _regret(best: Mapping[str, Any], pick: Mapping[str, Any], value: str) -> tuple[float, float]:
    """The regret of `pick` against `best` (rows of the evidence at C) and its standard error."""
    regret = max(float(best[value]) - float(pick[value]), 0.0)
    return regret, math.sqrt(float(best["se"]) ** 2 + float(pick["se"]) ** 2)


def _unchecked(base: Validation, reason: str) -> Validation:
    return Validation(
        base.metric,
        base.x,
        base.factor,
        base.C,
        noise=base.noise,
        configs=base.configs,
        reason=reason,
    )


def rho_allocation(
    seen: pl.DataFrame, C: float, *, y: str = DEFAULT_Y, config: Sequence[str] = RHO_ALLOCATION
) -> Prediction:
    """The ρ grid's allocation at a FLOP budget from the runs seen so far, for `validate` with
    ``x = flops/total`` on one reward system: the configuration whose ρ is nearest the ρ* of
    the ρ frontier at the seen runs' own budget (`rho_frontier`: the vertex of a concave
    quadratic in ρ; without one, the ρ of the quadratic's best configuration; without a
    quadratic, of the best run).

    There is no law of ρ* in compute to extrapolate: the prediction is that ρ* holds from
    C / factor to C, the premise of the RACE pilot (Wilhelm & Kao, arXiv 2607.13389)."""
    if "reward" in seen.columns and seen["reward"].n_unique() > 1:
        raise ValueError(
            "the runs mix reward systems, each with its own ρ*: validate one at a time, e.g. "
            "df.filter(pl.col('reward') == 'sparse')"
        )
    fit = rho_frontier(seen, y=y, n_boot=0)
    row = fit.fits.row(0, named=True)
    key = run_column(seen)
    cfg = [c for c in config if c in seen.columns]
    per_cfg = (
        fit.points.join(seen.select(key, *cfg).unique(), on=key)
        .group_by(cfg)
        .agg(pl.col("rho").mean())
        .sort(cfg)
    )
    if per_cfg.height == 0:
        raise ValueError(row["reason"] or "no run in the IsoFLOP band")
    rho = per_cfg["rho"].to_numpy().astype(float)
    if row["status"] == "ok":
        target, source = float(row["rho_star"]), "ρ* of the quadratic"
    elif math.isfinite(row["q2"]):
        q = np.polyval([row["q2"], row["q1"], row["q0"]], rho)
        target, source = float(rho[np.argmax(q)]), "best ρ of the quadratic"
    else:
        target, source = float(row["rho_best_observed"]), "best run"
    pick = per_cfg.row(int(np.argmin(np.abs(rho - target))), named=True)
    return Prediction({c: pick[c] for c in cfg}, source=f"{source} (ρ ≈ {pick['rho']:.2f})")
