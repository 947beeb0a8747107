"""A quadratic in log2 n fitted to each run's last evaluation, and its vertex: the optimum n with
its delta-method gradient, used wherever a claim locates an optimum (`isolab.verdicts.vertex`
per checkpoint, and the targets, mixtures and ρ* tests of the studies).

The vertex of `a + b·x + c·x²` (x centred at `centre`) is x* = centre − b / (2c); it is a ratio
of coefficients, so its standard error is the delta method's (first-order Taylor):
∇x* = (−1/(2c), b/(2c²)) in (b, c).
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from isolab.vocab import ROLLOUTS, RUN_KEY, STEP


def final_rows(df: pl.DataFrame, metrics: tuple[str, ...]) -> pl.DataFrame:
    """Each run's last evaluation with every one of `metrics` finite."""
    ok = df.filter(pl.all_horizontal(pl.col(m).is_finite() for m in metrics) & (pl.col(STEP) > 0))
    return ok.filter(pl.col(ROLLOUTS) == pl.col(ROLLOUTS).max().over(RUN_KEY)).unique(
        RUN_KEY, keep="last", maintain_order=True
    )


def quadratic_design(rows: pl.DataFrame) -> tuple[np.ndarray, float, np.ndarray]:
    """(X: 1, x, x², a level per seed; the centre of x = log2 n; x)."""
    x = np.log2(rows["n"].to_numpy().astype(float))
    centre = float(np.mean(np.unique(x)))
    xc = x - centre
    cols = [np.ones(len(x)), xc, xc**2]
    if "seed" in rows.columns and rows["seed"].n_unique() > 1:
        seeds = rows["seed"].to_numpy()
        cols += [(seeds == s).astype(float) for s in np.unique(seeds)[1:]]
    return np.column_stack(cols), centre, x


def quadratic_vertex(b: float, c: float, centre: float) -> tuple[float, np.ndarray]:
    """The vertex (log2 n) of `centre`-centred `a + b·x + c·x²`, and its gradient in (b, c) for
    the delta method (NaN where c = 0)."""
    if c == 0:
        return math.nan, np.full(2, np.nan)
    return centre - b / (2 * c), np.array([-1 / (2 * c), b / (2 * c**2)])


def unlocated(name: str, c: float, c_half: float, v: float, lo: float, hi: float) -> str:
    """Why the vertex `v` of curvature `c` (± `c_half`, its interval's half-width) has no
    position on the grid log2 n ∈ (`lo`, `hi`) — or "" where it has one."""
    if not c + c_half < 0:
        return f"{name}: curvature not resolved ({c:+.3g} ± {c_half:.2g})"
    if not lo < v < hi:
        return f"{name}: optimum n ≈ {2**v:.3g} outside the grid (n {2**lo:g} … {2**hi:g})"
    return ""
