"""Seed variance within configurations, and OLS fits on one mean per configuration (`cell`)
with the contrasts they estimate: what the verdicts' comparisons at the end of training, and the
noise model, are built on. (Frame helpers, `with_cell` among them, are in isolab.table.)"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from isolab.table import with_cell


def pooled_seed_variance(rows: pl.DataFrame, metric: str) -> tuple[float, int]:
    """Within-configuration variance of `metric` over runs (one row per run), pooled over
    configurations, and its degrees of freedom Σ (seeds − 1): training + evaluation noise."""
    cells = (
        with_cell(rows)
        .group_by("cell", maintain_order=True)  # a fixed order of the sum: the same last digit
        .agg(pl.col(metric).var(ddof=1).alias("var"), pl.len().alias("n"))
    )
    cells = cells.filter(pl.col("n") > 1)
    dof = int((cells["n"] - 1).sum()) if cells.height else 0
    if dof == 0:
        return math.nan, 0
    return float(((cells["n"] - 1) * cells["var"]).sum() / dof), dof


@dataclass(frozen=True)
class CellFit:
    """OLS of a metric on one mean per configuration (`cell`) and, optionally, one effect per
    block (a seed): `cells` orders the first columns of `X`; `pinv` is X's pseudo-inverse,
    `beta` the coefficients, `sigma2` the residual variance on `dof` degrees of freedom."""

    cells: list[str]
    X: np.ndarray
    pinv: np.ndarray
    beta: np.ndarray
    dof: int
    sigma2: float


def cell_fit(rows: pl.DataFrame, metric: str, block: str | None = None) -> CellFit | None:
    """Fit `metric` (one row per run) on `cell` means plus `block` effects when a column is
    named; None when a run has no cell or block, or the fit keeps no residual df."""
    if rows["cell"].null_count() or (block is not None and rows[block].null_count()):
        return None  # a run without a configuration or a seed cannot be placed
    cells = sorted(rows["cell"].unique().to_list())
    columns = [(rows["cell"] == c).to_numpy().astype(float) for c in cells]
    if block is not None:
        levels = sorted(rows[block].unique().to_list())
        columns += [(rows[block] == b).to_numpy().astype(float) for b in levels[1:]]
    X = np.column_stack(columns)
    y = rows[metric].to_numpy().astype(float)
    dof = len(y) - int(np.linalg.matrix_rank(X))
    if dof < 1:
        return None
    pinv = np.linalg.pinv(X)
    beta = pinv @ y
    return CellFit(cells, X, pinv, beta, dof, float(np.sum((y - X @ beta) ** 2) / dof))


#: Fewest residual degrees of freedom a seed-blocked fit must keep to be used. With one, the
#: residual variance is a single squared number and the 96% t quantile is about 16: the test
#: would have almost no power, and the pooled seed variance (more df) serves better.
MIN_BLOCKED_DF = 2


def cell_contrast(
    rows: pl.DataFrame, metric: str, weights: dict[str, float], block: str | None = None
) -> tuple[float, float, float] | None:
    """A contrast Σ w_c·mean_c of configuration means (`rows`: one per run, with a `cell`
    column), estimated by OLS of `metric` on one mean per cell plus, when `block` names a
    column, one effect per block: runs that share a seed share its data order and sampling
    draws (common random numbers), so comparing them within the seed removes the seed's
    effect from the noise. Returns (estimate, SE, residual df), or None when the contrast is
    not estimable or the fit keeps fewer than `MIN_BLOCKED_DF` residual df (with a block) or
    1 (without)."""
    fit = cell_fit(rows, metric, block) if weights else None
    if fit is None or not set(weights) <= set(fit.cells):
        return None
    if fit.dof < (MIN_BLOCKED_DF if block is not None else 1):
        return None
    L = np.zeros(fit.X.shape[1])
    for c, w in weights.items():
        L[fit.cells.index(c)] = w
    # Estimable only if L lies in the row space of X (L·X⁺·X = L). With blocks it fails when
    # the cells compared never ran under a common seed: their difference is then confounded
    # with the seeds' effects, and the callers fall back to a test without seed blocks.
    if not np.allclose(L @ fit.pinv @ fit.X, L, atol=1e-8):
        return None
    cov = fit.sigma2 * (fit.pinv @ fit.pinv.T)
    return float(L @ fit.beta), math.sqrt(max(float(L @ cov @ L), 0.0)), float(fit.dof)
