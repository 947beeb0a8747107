"""Seed variance within configurations, and OLS fits on one mean per configuration (`cell`):
what the verdicts' contrasts are built on. (Frame helpers are in isolab.table.)"""

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
        .group_by("cell")
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
