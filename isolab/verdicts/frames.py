"""Runs tables as the verdicts read them: each run's configuration, its final evaluation, the
evaluations after training began, and the seed variance within configurations."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from isolab.config import config_columns

RUN = "run_key"


def run_column(df: pl.DataFrame) -> str:
    return RUN if RUN in df.columns else "run_id"


def with_cell(df: pl.DataFrame) -> pl.DataFrame:
    """`cell`: the configuration of each row (every config column present but the seed)."""
    cols = [c for c in config_columns() if c in df.columns and df[c].n_unique() > 1]
    if not cols:
        return df.with_columns(cell=pl.lit("all"))
    return df.with_columns(
        cell=pl.concat_str([pl.col(c).cast(pl.String) for c in cols], separator="|")
    )


def final_rows(df: pl.DataFrame, metric: str) -> pl.DataFrame:
    """Each run's last evaluation with a finite `metric`."""
    key = run_column(df)
    ok = df.filter(pl.col(metric).is_finite())
    return ok.filter(pl.col("step") == pl.col("step").max().over(key))


def trained_rows(df: pl.DataFrame, metric: str) -> pl.DataFrame:
    """Evaluations after training began (step > 0): every run starts from the same base, so its
    step-0 evaluation carries no effect of the configuration."""
    return df.filter(pl.col(metric).is_finite() & (pl.col("step") > 0))


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


def _pool(df: pl.DataFrame) -> pl.Expr:
    return pl.col("train_limit") if "train_limit" in df.columns else pl.lit(None, pl.Int64)


def one_pool(frames: list[pl.DataFrame]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Several sweeps' runs tables as one, keeping the runs trained on the first table's pool
    (its `train_limit`, None = every training problem): a run trained on a cut pool answers
    another question. Returns (the combined runs, the runs left out)."""
    if not any(df.height for df in frames):
        raise ValueError("no runs to combine")
    first = frames[0]  # its pool decides, even when it has no runs yet (then: every problem)
    limit = first["train_limit"][0] if "train_limit" in first.columns and first.height else None
    kept, left = [first], []
    for df in frames[1:]:
        if not df.height:
            continue
        same = df.select(_pool(df).eq_missing(pl.lit(limit, pl.Int64))).to_series()
        kept.append(df.filter(same))
        left.append(df.filter(~same))
    combined = pl.concat(kept, how="diagonal_relaxed") if len(kept) > 1 else kept[0]
    out = [d for d in left if d.height]
    rest = pl.concat(out, how="diagonal_relaxed") if out else first.clear()
    return combined, rest
