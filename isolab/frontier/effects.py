"""Metric effects: n*(C) under avg@k, best@k (coverage) and worst@k (sharpening)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from isolab.frontier.blas import single_threaded
from isolab.frontier.nstar import NStarResult, optimal_n
from isolab.table import to_polars
from isolab.vocab import DEFAULT_METRICS


@dataclass(frozen=True)
class MetricEffect:
    """n*(C) under several validation metrics (IsoCompute Playbook §5).

    Attributes:
        summary: one row per metric: `n_saturation`, `n_saturation_lo` / `_hi`, status, reason.
        table: long table (`metric`, `C`, `n_star`, `fit`, `fit_lo`, `fit_hi`).
        results: the full `NStarResult` per metric.
    """

    summary: pl.DataFrame
    table: pl.DataFrame
    results: dict[str, NStarResult]


@single_threaded
def metric_effect(
    df: Any, metrics: Sequence[str] = DEFAULT_METRICS, **optimal_n_kwargs: Any
) -> MetricEffect:
    """n*(C) and its saturation under each metric in `metrics` (arguments as `optimal_n`).

    The Playbook finds that on Easy sets a larger n mainly lifts worst@k (sharpening), on Hard
    sets best@k (coverage): the metric that saturates at the larger n is the one n serves.
    Metrics missing from the table are reported as not identifiable, not dropped.
    """
    df = to_polars(df)
    results: dict[str, NStarResult] = {}
    rows, tables = [], []
    for m in metrics:
        if m not in df.columns:
            res = NStarResult.not_identifiable(m, "", f"metric {m} is not in the runs table")
        else:
            res = optimal_n(df, y=m, **optimal_n_kwargs)
        results[m] = res
        lo, hi = res.n_saturation_ci
        rows.append(
            {
                "metric": m,
                "n_saturation": res.n_saturation,
                "n_saturation_lo": lo,
                "n_saturation_hi": hi,
                "status": res.status,
                "reason": res.reason,
            }
        )
        if res.table.height and "fit" in res.table.columns:
            tables.append(
                res.table.select(
                    pl.lit(m).alias("metric"), "C", "n_star", "fit", "fit_lo", "fit_hi"
                )
            )
    table = pl.concat(tables) if tables else pl.DataFrame()
    return MetricEffect(pl.DataFrame(rows), table, results)
