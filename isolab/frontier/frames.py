"""Shared vocabulary of the frontier analyses: default columns, the configuration columns
that seeds are averaged over, and checks on the runs tables they read."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any, Literal, ParamSpec, TypeVar

import polars as pl

from isolab.config import config_columns

try:  # optional: BLAS threads only slow these small products down, badly on a busy machine
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn / scipy stacks
    threadpool_limits = None

logger = logging.getLogger(__name__)


#: ``ok``; ``extrapolated`` (a parameter lies beyond what the data resolve); ``boundary`` (pinned
#: at the box of A/R0); ``flat`` (no significant rise); ``not identifiable`` (no fit).
Status = Literal["ok", "extrapolated", "boundary", "flat", "not identifiable"]
DEFAULT_X = "compute/rollouts"
DEFAULT_Y = "eval/avg@4"
DEFAULT_METRICS = ("eval/avg@4", "eval/best@4", "eval/worst@4")


# Columns that define a configuration (everything swept except the seed): those present in a
# frame are what seeds are averaged over. Derived from `RunConfig` (isolab.config).
CONFIG_COLUMNS = config_columns()


# Columns that must hold one value for an n*(C) or trade-off analysis to mean anything.
SETTING_COLUMNS = ("model", "task", "split", "reward")


_depth = threading.local()
P = ParamSpec("P")
T = TypeVar("T")


def single_threaded(fn: Callable[P, T]) -> Callable[P, T]:
    """Run `fn` with one BLAS thread (outermost call only). The fits multiply matrices of a few
    thousand entries, where OpenBLAS threads cost far more than they save (measured 30 ms vs
    0.03 ms per product on 2 busy cores)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        if threadpool_limits is None or getattr(_depth, "on", False):
            return fn(*args, **kwargs)
        _depth.on = True
        try:
            with threadpool_limits(1, user_api="blas"):
                return fn(*args, **kwargs)
        finally:
            _depth.on = False

    return wrapper


def to_polars(df: Any) -> pl.DataFrame:
    """Accept polars (eager or lazy) or pandas; return an eager polars frame."""
    if isinstance(df, pl.LazyFrame):
        return df.collect()
    if isinstance(df, pl.DataFrame):
        return df
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        pd = None
    if pd is not None and isinstance(df, pd.DataFrame):
        return pl.from_pandas(df)
    raise TypeError(f"expected a polars or pandas DataFrame, got {type(df).__name__}")


def require(df: pl.DataFrame, *columns: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(
            f"column(s) {missing} not in the runs table; it has: {sorted(df.columns)}. "
            "Load runs with isolab.tracking.runs.load_runs or pass x=/y= naming existing columns."
        )


def finite_rows(df: pl.DataFrame, *columns: str, context: str = "") -> pl.DataFrame:
    """Rows where every column is finite; logs how many were dropped."""
    cond = pl.lit(True)
    for c in columns:
        cond = cond & pl.col(c).is_not_null() & pl.col(c).cast(pl.Float64).is_finite()
    out = df.filter(cond)
    if out.height < df.height:
        logger.info(
            "%sdropped %d of %d rows with missing or NaN %s",
            f"{context}: " if context else "",
            df.height - out.height,
            df.height,
            ", ".join(columns),
        )
    return out


def id_columns(df: pl.DataFrame) -> list[str]:
    return [c for c in ("run_key", "n", "B_p", "M", "step", "seed") if c in df.columns]


def check_single_setting(df: pl.DataFrame, what: str) -> None:
    mixed = {
        c: sorted(map(str, df[c].unique().to_list()))
        for c in SETTING_COLUMNS
        if c in df.columns and df[c].n_unique() > 1
    }
    if mixed:
        parts = "; ".join(f"{c} ∈ {v}" for c, v in mixed.items())
        raise ValueError(
            f"{what} compares allocations within one setting, but the table mixes {parts}: "
            "filter it to one value of each first (e.g. df.filter(pl.col('split') == 'easy'))."
        )


def seed_average(df: pl.DataFrame, x: str, y: str) -> pl.DataFrame:
    """Mean of `y` over seeds at each (configuration, step); `x` averaged alongside."""
    cfg = [c for c in CONFIG_COLUMNS if c in df.columns]
    key = [*cfg, "step"] if "step" in df.columns else [*cfg, x]
    aggs = [pl.col(y).mean(), pl.len().alias("n_seeds")]
    if x not in key:
        aggs.append(pl.col(x).mean())
    return df.group_by(key).agg(aggs).sort([*cfg, x])
