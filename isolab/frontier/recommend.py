"""What to use at a budget: the allocation the fitted laws recommend."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from isolab.frontier.blas import single_threaded
from isolab.frontier.envelope import frontier
from isolab.frontier.nstar import NStarResult, optimal_n
from isolab.table import as_float, finite_rows, require, seed_average, to_polars
from isolab.vocab import DEFAULT_X, DEFAULT_Y


@dataclass(frozen=True)
class Recommendation:
    """ "At this budget use n ≈ …, B_p ≈ …, M ≈ …", with the evidence.

    Attributes:
        budget: compute budget in units of `x` (rollouts by default).
        n, B_p, M: the allocation (n and B_p from the grid that was run; M = budget / (B_p·n)).
        n_star, n_star_ci: the fitted n*(budget) and its bootstrap interval.
        expected: reward of the recommended n's fitted curve at the budget.
        frontier_reward: best reward observed at compute ≤ budget, and `frontier_config` its run.
        evidence: configurations ranked by their seed-averaged reward at the budget.
        notes: caveats (extrapolation beyond the data, fits that were not identifiable).
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

    @property
    def summary(self) -> str:
        """One sentence for a person."""
        lo, hi = self.n_star_ci
        parts = []
        if np.isfinite(self.n_star):
            ci = f", 95% CI [{lo:.0f}, {hi:.0f}]" if np.isfinite(lo) else ""
            parts.append(f"fitted n* = {self.n_star:.0f}{ci}")
        if np.isfinite(self.expected):
            parts.append(f"expected {self.metric} ≈ {self.expected:.3f}")
        if np.isfinite(self.frontier_reward):
            parts.append(f"best observed at ≤ C: {self.frontier_reward:.3f}")
        evidence = f" ({'; '.join(parts)})" if parts else ""
        return (
            f"at C = {self.budget:.3g} use n ≈ {self.n}, B_p ≈ {self.B_p}, M ≈ {self.M}{evidence}"
        )


@single_threaded
def recommend(
    df: Any,
    budget: float,
    *,
    x: str = DEFAULT_X,
    y: str = DEFAULT_Y,
    n_star: NStarResult | None = None,
    **optimal_n_kwargs: Any,
) -> Recommendation:
    """The allocation to use at compute `budget`, from the fitted n*(C) and the runs themselves.

    n: the grid value of n nearest (in log2) to the fitted n*(budget); past the data, the
    saturation n. B_p: among runs with that n, the B_p with the best seed-averaged reward at the
    budget (interpolated in log C; a run that stops earlier counts at its last point).
    M = budget / (B_p·n). Evidence: every configuration ranked by reward at the budget, and the
    frontier's best run at compute ≤ budget.
    """
    if not budget > 0:
        raise ValueError(f"budget = {budget}: give a positive compute budget in {x}.")
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
    ns = np.array(sorted(int(v) for v in clean["n"].unique().to_list()), dtype=float)
    nstar, nci = float("nan"), (float("nan"), float("nan"))
    if res.fit is not None and res.fit.identifiable:
        nstar = float(res.n_star_at(np.array([budget]))[0])
        lo, hi = res.n_star_band(np.array([budget]))
        nci = (float(lo[0]), float(hi[0]))
    elif res.table.height:
        t = res.table.filter(pl.col("C") <= budget)
        if t.height:
            nstar = float(t["n_star_raw"][-1])
        notes.append(f"n*(C) is not identifiable ({res.reason}): n from the raw envelope")
    else:
        notes.append(f"n*(C) is not identifiable ({res.reason})")
    if res.status == "extrapolated":
        notes.append(f"n*(C) fit: {res.reason}")
    if res.table.height and budget < as_float(res.table["C"].min()):
        notes.append(
            f"budget {budget:.3g} is below {as_float(res.table['C'].min()):.3g}, where the first "
            "curve starts to rise: n* there is an extrapolation"
        )
    if np.isfinite(nstar):
        n = int(ns[np.argmin(np.abs(np.log2(ns) - math.log2(nstar)))])
    else:
        # no fit at all: fall back on the frontier's holder
        n = int(frontier(clean.filter(pl.col(x) <= budget), x, y)["n"][-1])

    avg = seed_average(clean, x, y)
    cfg = [c for c in ("n", "B_p", "M") if c in avg.columns]
    ev = []
    for key, grp in avg.group_by(cfg, maintain_order=True):
        g = grp.filter(pl.col(x) > 0).sort(x)
        if g.height == 0:
            continue
        C, R = g[x].to_numpy().astype(float), g[y].to_numpy()
        at = float(np.interp(math.log(min(budget, C[-1])), np.log(C), R))
        ev.append({**dict(zip(cfg, key, strict=True)), "C_max": C[-1], f"{y}_at_budget": at})
    evidence = pl.DataFrame(ev).sort(f"{y}_at_budget", descending=True)
    mine = evidence.filter(pl.col("n") == n)
    if mine.height:
        B_p = int(mine["B_p"][0])
    else:
        B_p = int(clean["B_p"].mode()[0])
        notes.append(f"no run with n = {n}: B_p is the most common value")
    M = max(int(round(budget / (B_p * n))), 1)
    if budget < B_p * n:
        notes.append(f"budget {budget:.3g} buys less than one step of B_p·n = {B_p * n} rollouts")
    fit_n = res.fits.get(n)
    expected = float(fit_n.predict(np.array([budget]))[0]) if fit_n is not None else float("nan")
    fr = frontier(clean.filter(pl.col(x) <= budget), x, y)
    if fr.height:
        last = fr.tail(1).to_dicts()[0]
        frontier_reward = float(last.pop("frontier"))
        last.pop(y, None)
        last.pop(x, None)
    else:
        frontier_reward, last = float("nan"), {}
    return Recommendation(
        budget, y, n, B_p, M, nstar, nci, expected, frontier_reward, last, evidence, tuple(notes)
    )
