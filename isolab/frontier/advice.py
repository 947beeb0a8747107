"""The advice at a budget from the runs as they are, without its held-out check: the
allocation nearest the fitted n*(C) (or the best runs there), B_p and M, what the runs cannot
tell apart (the n within noise of the best, one seed, the grid's edge) and the expected reward.
`isolab.frontier.recommend` checks this advice on held-out compute and limits how far it goes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import polars as pl

from isolab.frontier.envelope import frontier
from isolab.frontier.nstar import NStarResult, optimal_n
from isolab.frontier.validate import (
    WITHIN_SE,
    Noise,
    Validation,
    budget_noise,
    compute,
    runs_at_budget,
    with_standard_errors,
)
from isolab.table import as_float, finite_rows, require, to_polars
from isolab.vocab import STEP

#: GRPO's smallest group: its advantage is a reward minus the group's mean, which needs two
#: rollouts per problem (`isolab.config.RunConfig` refuses n < 2 for that reason).
GRPO_MIN_N = 2
#: The best observed point is a maximum over many noisy points (for a few hundred, the largest
#: of N Gaussian draws sits ≈ √(2 ln N) ≈ 3 SD above their mean): a fit this many SD of one
#: run's noise below it is read as that maximum, not as a pessimistic fit.
MAX_OF_POINTS_SD = 3.0


@dataclass(frozen=True)
class Recommendation:
    """ "At this budget use n ≈ …, B_p ≈ …, M ≈ …", with the evidence and its uncertainty.

    Attributes:
        budget: compute budget in units of `x` (rollouts by default); the allocation and its
            numbers are for `advised_at`, which is the budget unless it was refused.
        n, B_p, M: the allocation (n and B_p from the grid that was run; M the steps that spend
            the budget, `steps_for`: budget / (B_p·n) in rollouts under uniform allocation).
        n_star, n_star_ci: the fitted n*(budget) and its bootstrap interval (at `ci_level`).
        expected: reward of the recommended n's fitted curve at the budget; NaN when that fit
            is flat (no rise beyond noise) or missing: then no point estimate is given.
        frontier_reward: best reward observed at compute ≤ budget, and `frontier_config` its run.
        evidence: configurations ranked by their seed-averaged reward at the budget, with
            `seeds`, their SD (`seed_sd`) and the standard error of the mean (`se`).
        notes: caveats (extrapolation beyond the data, fits that were not identifiable).
        hedges: what the runs cannot tell: one seed, the n within noise of the best, an
            optimum at the grid's edge, `expected_note`, the held-out checks (`Validation.text`);
            sentences for a person, in that order.
        within_noise: the n whose best configuration is within noise of the best at the budget
            (the data's largest compute, beyond it); the best alone without a noise estimate.
        noise_sd, noise_source: SD of one run's reward at the budget and where it comes from:
            ``seeds`` (spread between seeds, pooled over configurations), ``evaluation``
            (binomial sampling of eval_problems × eval_k_samples, one seed) or ``none``.
        seeds: the most seeds any configuration has.
        edge: ``smallest`` / ``largest`` when n is the grid's smallest / largest n, else "".
        extension: the n to add to the grid to find an optimum beyond its edge ("" when none
            can be run: below GRPO's minimum n = 2).
        expected_note: why `expected` is missing, or why it lies below `frontier_reward`.
        ci_level: level of `n_star_ci`.
        n_star_from: ``fit`` (the sigmoid of log n*), ``envelope`` (the raw envelope of the
            per-n fits, when that sigmoid could not be fitted), ``per-n fits`` (beyond the
            data without an identifiable n*(C): the n whose fitted curve is highest at the
            budget) or "" (none of these: n from the runs).
        validation: the held-out checks of this advice (`validate_recommend`: fitted on the
            runs up to C/2 and C/4, scored at C); empty when not checked.
        limit: the largest budget given a point allocation: `MAX_EXTRAPOLATION` × the largest
            compute in the data when the C/2 check is within noise, else that compute.
        refusal: why there is no point allocation at `budget` ("" when there is); the
            allocation is then the one at `limit`, the furthest the check reached.
        noise_text: the hedges on noise (`noise_hedges`: one seed, the n within noise of the
            best), the first of `hedges`: what `isolab.frontier.answer.stated` says with the
            allocation.
    """

    budget: float
    metric: str
    n: int
    B_p: int
    M: int
    n_star: float
    n_star_ci: tuple[float, float]
    expected: float
    frontier_reward: float
    frontier_config: dict[str, Any]
    evidence: pl.DataFrame
    notes: tuple[str, ...] = ()
    hedges: tuple[str, ...] = ()
    within_noise: tuple[int, ...] = ()
    noise_sd: float = float("nan")
    noise_source: Literal["seeds", "evaluation", "none"] = "none"
    seeds: int = 0
    edge: Literal["smallest", "largest", ""] = ""
    extension: str = ""
    expected_note: str = ""
    ci_level: float = 0.95
    n_star_from: Literal["fit", "envelope", "per-n fits", ""] = "fit"
    validation: tuple[Validation, ...] = ()
    limit: float = float("inf")
    refusal: str = ""
    noise_text: tuple[str, ...] = ()

    @property
    def advised_at(self) -> float:
        """The budget the allocation is for: `budget`, or `limit` when that was refused."""
        return min(self.budget, self.limit) if self.refusal else self.budget

    @property
    def headline(self) -> str:
        """The allocation and its numbers, in one sentence."""
        return self.allocation(ci=True)

    def allocation(self, ci: bool) -> str:
        """The allocation and its numbers; with `ci`, n*'s bootstrap interval (which depends on
        the replicates drawn: `isolab.frontier.answer.stated` leaves it out, so that every
        place states the same sentence)."""
        lo, hi = self.n_star_ci
        parts = []
        if np.isfinite(self.n_star):
            band = (
                f", {self.ci_level:.0%} CI [{lo:.0f}, {hi:.0f}]" if ci and np.isfinite(lo) else ""
            )
            what = {"fit": "fitted n*", "envelope": "n* of the envelope"}.get(
                self.n_star_from, "best n of the per-n fits at C"
            )
            parts.append(f"{what} = {self.n_star:.0f}{band}")
        if np.isfinite(self.expected):
            parts.append(f"expected {self.metric} ≈ {self.expected:.3f}")
        if np.isfinite(self.frontier_reward):
            parts.append(f"best observed at ≤ C: {self.frontier_reward:.3f}")
        evidence = f" ({'; '.join(parts)})" if parts else ""
        edge = f" (the grid's {self.edge} n)" if self.edge else ""
        advice = (
            f"at C = {compute(self.advised_at)} use n ≈ {self.n}{edge}, B_p ≈ {self.B_p}, "
            f"M ≈ {self.M}{evidence}"
        )
        if self.refusal:
            refused = f"no point recommendation at C = {compute(self.budget)}: {self.refusal}"
            return f"{refused}; the furthest it vouches for: {advice}"
        return advice

    @property
    def summary(self) -> str:
        """The headline and the hedges (`expected_note` among them), for a person."""
        return ". ".join([self.headline, *self.hedges])


def within_noise(evidence: pl.DataFrame, y: str) -> pl.DataFrame:
    """Per n, its best configuration at the budget (best first), with `within`: whether it
    differs from the best by less than `WITHIN_SE` standard errors of the difference (only the
    best is, without a noise estimate)."""
    value = f"{y}_at_budget"
    per_n = evidence.sort(value, descending=True).group_by("n", maintain_order=True).first()
    R, se = per_n[value].to_numpy().astype(float), per_n["se"].to_numpy().astype(float)
    with np.errstate(invalid="ignore"):
        within = R[0] - R <= WITHIN_SE * np.sqrt(se**2 + se[0] ** 2)  # False where se is NaN
    within[0] = True
    return per_n.with_columns(within=pl.Series(within))


def grid_edge(n: int, ns: list[int]) -> tuple[Literal["smallest", "largest", ""], str, str]:
    """Whether `n` is the smallest or largest n of the grid `ns`: (edge, the n to add to find
    an optimum beyond it, a sentence for a person); ("", "", "") for an interior n."""
    if len(ns) < 2 or min(ns) < n < max(ns):
        return "", "", ""
    if n == min(ns):
        if n <= GRPO_MIN_N:
            return (
                "smallest",
                "",
                f"n = {n} is the smallest n run (the grid's edge) and GRPO's minimum: n cannot go "
                f"below {GRPO_MIN_N} in GRPO (its baseline is the mean of a group of rollouts), "
                "so the grid has no extension below this edge",
            )
        lower = max(n // 2, GRPO_MIN_N)
        return (
            "smallest",
            f"n = {lower}",
            f"n = {n} is the smallest n run (the grid's edge): the optimum may lie below it; "
            f"add n = {lower} to find it",
        )
    return (
        "largest",
        f"n = {2 * n}",
        f"n = {n} is the largest n run (the grid's edge): the optimum may lie above it; "
        f"add n = {2 * n} to find it",
    )


def noise_hedges(options: pl.DataFrame, noise: Noise, y: str, at: float) -> list[str]:
    """Sentences on one seed and on the n that cannot be told apart from the best at `at`."""
    out = []
    if noise.seeds == 1:
        out.append(
            "One seed per configuration: the spread between seeds is unknown, and it is "
            "usually larger than evaluation noise; run ≥ 2 seeds before trusting a ranking"
        )
    if options.height < 2:
        return out
    value = f"{y}_at_budget"
    best_n, best = int(options["n"][0]), float(options[value][0])
    if noise.source == "none":
        out.append(
            f"{noise.text}: the n cannot be told apart, the best observed at C = {compute(at)} "
            f"(n = {best_n}: {best:.3f}) is a ranking without a margin"
        )
        return out
    within = sorted(int(v) for v in options.filter("within")["n"])
    if len(within) > 1:
        out.append(
            f"n ∈ {{{', '.join(map(str, within))}}} are within noise of the best at "
            f"C = {compute(at)} (n = {best_n}: {best:.3f}; within = less than {WITHIN_SE:g} standard "
            f"errors of the difference; noise: {noise.text})"
        )
    else:
        runner = options.row(1, named=True)
        out.append(
            f"n = {best_n} leads at C = {compute(at)} beyond noise ({best:.3f}; next n = "
            f"{runner['n']}: {runner[value]:.3f}; noise: {noise.text})"
        )
    return out


def steps_for(df: pl.DataFrame, budget: float, x: str, n: int, B_p: int) -> int:
    """The optimizer steps M that spend `budget` (in units of `x`) at (n, B_p), from what a
    step of that configuration cost in the runs (the median of `x` / step over its trained
    evaluations): B_p·n rollouts under uniform allocation, but k·B_p·n when dynamic sampling
    draws k·B_p problems, and FLOPs depend on the model and lengths (`isolab.frontier.
    allocation`: allocators are compared on flops/total). Without such runs, a step of B_p·n
    (rollouts). 0 when the budget buys less than a step."""
    per_step = float(B_p * n)
    if STEP in df.columns:
        mine = df.filter(
            (pl.col("n") == n) & (pl.col("B_p") == B_p) & (pl.col(STEP) > 0) & (pl.col(x) > 0)
        )
        if mine.height:
            per_step = as_float((mine[x].cast(pl.Float64) / mine[STEP]).median())
    return int(round(budget / per_step))


def advise(
    df: Any,
    budget: float,
    x: str,
    y: str,
    n_star: NStarResult | None,
    optimal_n_kwargs: dict[str, Any],
) -> Recommendation:
    """`isolab.frontier.recommend.recommend` without its check: the advice at `budget` from the
    runs as they are."""
    df = to_polars(df)
    require(df, x, y, "n", "B_p")
    res = n_star if n_star is not None else optimal_n(df, x=x, y=y, **optimal_n_kwargs)
    notes: list[str] = []
    clean = finite_rows(df, x, y, context="recommend")
    c_max = as_float(clean[x].max()) if clean.height else float("nan")
    if budget > c_max:
        notes.append(
            f"budget {budget:.3g} is beyond the largest compute in the data ({c_max:.3g}): "
            "n comes from the fitted n*(C), B_p and the expected reward are extrapolated"
        )
    ns = sorted(int(v) for v in clean["n"].unique().to_list())
    grid = np.array(ns, dtype=float)

    evidence = runs_at_budget(clean, budget, x, y)
    if evidence.height == 0:
        raise ValueError(f"no run has {x} > 0 and a finite {y}: nothing to recommend from.")
    noise = budget_noise(clean, evidence, y)
    evidence = with_standard_errors(evidence, noise, y)
    options = within_noise(evidence, y)
    best_n = int(options["n"][0])

    nstar, nci = float("nan"), (float("nan"), float("nan"))
    n_star_from: Literal["fit", "envelope", "per-n fits", ""] = ""
    rising = {k: f for k, f in res.fits.items() if f.identifiable and f.status != "flat"}
    if budget > c_max and res.status == "not identifiable" and rising:
        # no law of n*(C) to extrapolate (its path falls, or none was fitted): each n's own
        # law, read at the budget, says which n will be ahead there
        at = {k: float(f.predict(np.array([budget]))[0]) for k, f in rising.items()}
        nstar, n_star_from = float(max(at, key=at.__getitem__)), "per-n fits"
        notes.append(
            f"n*(C) is not identifiable ({res.reason}): beyond the data, n is the one whose "
            "fitted curve is highest at the budget"
        )
    elif res.fit is not None and res.fit.identifiable:
        n_star_from = "fit"
        nstar = float(res.n_star_at(np.array([budget]))[0])
        lo, hi = res.n_star_band(np.array([budget]))
        nci = (float(lo[0]), float(hi[0]))
        if res.status == "not identifiable":  # e.g. a fall: the path is fitted, no saturation
            notes.append(res.reason)
    elif res.table.height:
        t = res.table.filter(pl.col("C") <= budget)
        if t.height:
            nstar, n_star_from = float(t["n_star_raw"][-1]), "envelope"
        notes.append(f"n*(C) is not identifiable ({res.reason}): n from the raw envelope")
    else:
        notes.append(f"n*(C) is not identifiable ({res.reason}): n from the runs at the budget")
    if res.status == "extrapolated":
        notes.append(f"n*(C) fit: {res.reason}")
    if res.table.height and budget < as_float(res.table["C"].min()):
        notes.append(
            f"budget {budget:.3g} is below {as_float(res.table['C'].min()):.3g}, where the first "
            "curve starts to rise: n* there is an extrapolation"
        )
    n = int(grid[np.argmin(np.abs(np.log2(grid) - math.log2(nstar)))]) if nstar > 0 else best_n
    within = [int(v) for v in options.filter("within")["n"]]
    if budget <= c_max and n not in within:
        notes.append(
            f"the fitted n*(C) points at n = {n}, whose runs at C are below the best (n = "
            f"{best_n}) by more than noise: n is the best observed"
        )
        n = best_n

    noise_text = noise_hedges(options, noise, y, min(budget, c_max))
    hedges = list(noise_text)
    edge, extension, edge_text = grid_edge(n, ns)
    if edge_text:
        hedges.append(edge_text)
    for end in sorted({min(ns), max(ns)} & set(within) - {n}) if len(ns) > 1 else []:
        _, more, _ = grid_edge(end, ns)
        add = f"; add {more} to see beyond it" if more else ", GRPO's minimum"
        hedges.append(f"The n within noise reach the grid's edge at n = {end}{add}")
        extension = extension or more

    mine = evidence.filter(pl.col("n") == n)
    if mine.height:
        B_p = int(mine["B_p"][0])
    else:
        B_p = int(clean["B_p"].mode()[0])
        notes.append(f"no run with n = {n}: B_p is the most common value")
    M = steps_for(clean, budget, x, n, B_p)
    if M < 1:
        notes.append(f"budget {budget:.3g} buys less than one step of n = {n}, B_p = {B_p}")
        M = 1

    fr = frontier(clean.filter(pl.col(x) <= budget), x, y)
    if fr.height:
        last = fr.tail(1).to_dicts()[0]
        frontier_reward = float(last.pop("frontier"))
        last.pop(y, None)
        last.pop(x, None)
    else:
        frontier_reward, last = float("nan"), {}
    expected, expected_note = _expected(res, n, budget, frontier_reward, noise)
    if expected_note:
        hedges.append(expected_note)
    return Recommendation(
        budget,
        y,
        n,
        B_p,
        M,
        nstar,
        nci,
        expected,
        frontier_reward,
        last,
        evidence,
        notes=tuple(notes),
        hedges=tuple(hedges),
        within_noise=tuple(sorted(within)),
        noise_sd=noise.sd,
        noise_source=noise.source,
        seeds=noise.seeds,
        edge=edge,
        extension=extension,
        expected_note=expected_note,
        ci_level=res.ci,
        n_star_from=n_star_from,
        noise_text=tuple(noise_text),
    )


def _expected(
    res: NStarResult, n: int, budget: float, observed: float, noise: Noise
) -> tuple[float, str]:
    """The reward of n's fitted curve at the budget and a note: none from a flat or missing
    fit; below the best `observed` at ≤ budget, why."""
    fit = res.fits.get(n)
    if fit is None or not fit.identifiable:
        why = fit.reason if fit is not None else "no fit"
        return float("nan"), f"No expected value: n = {n} has no fitted curve ({why})"
    if fit.status == "flat":
        return float("nan"), (
            f"No expected value: the fit of n = {n} is flat (no rise beyond noise), so it "
            "gives no point estimate"
        )
    expected = float(fit.predict(np.array([budget]))[0])
    if not (np.isfinite(observed) and expected < observed):
        return expected, ""
    gap = observed - expected
    if np.isfinite(noise.sd) and gap <= MAX_OF_POINTS_SD * noise.sd:
        return expected, (
            f"The best observed is {gap:.2g} above the fit, within {MAX_OF_POINTS_SD:g} SD of "
            f"one run's noise ({noise.sd:.3f}): the best of many noisy points"
        )
    beyond = f"more than {MAX_OF_POINTS_SD:g} SD ({noise.sd:.3f}) " if np.isfinite(noise.sd) else ""
    return expected, (
        f"The fit is pessimistic here: its {expected:.3f} is {gap:.3f} below the "
        f"{observed:.3f} already observed at ≤ C, {beyond}beyond one run's noise; go by the "
        "observed"
    )
