"""The noise a result carries: evaluation sampling and training (the seed), per metric.

- Evaluation: a run's avg@k, best@k, worst@k come from K samples of each of P validation
  problems. With the per-problem correct counts (`eval_counts` in the runs table) the sampling
  variance is computed from them; without, it is computed for problems whose success rates
  follow a Beta law matching the table's avg@k and worst@k (the spread across problems that
  those two imply), by simulating the K draws.
- Training: runs of one configuration differ by their seed. The within-configuration variance
  of the final metric, pooled over configurations, holds both; training = total − evaluation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from isolab.metrics import best_at_k, worst_at_k
from isolab.table import as_float, as_int, final_rows, with_cell
from isolab.tracking.columns import COUNTS
from isolab.verdicts.cells import cell_fit, pooled_seed_variance
from isolab.vocab import DEFAULT_METRICS, EVAL_AVG, EVAL_WORST


@dataclass(frozen=True)
class Noise:
    """Standard deviations of one run's final metric.

    Attributes:
        metric: the metric.
        eval_sd: from sampling the validation problems.
        total_sd: between seeds of one configuration (NaN without seed replicates).
        train_sd: sqrt(total² − eval²), floored at 0 (NaN without replicates).
        dof: degrees of freedom of `total_sd`.
        source: how `eval_sd` was had (`counts` or `beta`).
    """

    metric: str
    eval_sd: float
    total_sd: float
    train_sd: float
    dof: int
    source: str


def _k(metric: str) -> int:
    return int(metric.rsplit("@", 1)[1])


def eval_sd_from_counts(counts: list[list[int]], n_samples: int, metric: str) -> float:
    """Sampling SD of `metric` of one evaluation with these per-problem correct counts: each
    problem's rate is its observed c/K; K new draws per problem, the unbiased estimators."""
    rng = np.random.default_rng(0)
    sds = []
    for row in counts:
        p = np.asarray(row, dtype=float) / n_samples
        sds.append(_simulated_sd(p, n_samples, metric, rng))
    return float(np.sqrt(np.mean(np.square(sds)))) if sds else math.nan


def _simulated_sd(p: np.ndarray, n_samples: int, metric: str, rng, reps: int = 300) -> float:
    c = rng.binomial(n_samples, p, size=(reps, len(p)))
    kind, k = metric.split("/")[1].split("@")[0], _k(metric)
    if kind == "avg":
        values = c.mean(axis=1) / n_samples
    elif kind == "best":
        values = best_at_k(n_samples, c, k).mean(axis=1)
    else:
        values = worst_at_k(n_samples, c, k).mean(axis=1)
    return float(values.std(ddof=1))


def eval_sd_beta(avg: float, worst: float, problems: int, n_samples: int, metric: str) -> float:
    """Sampling SD of `metric` for `problems` problems whose rates follow the Beta law with mean
    `avg` and fourth moment `worst` (= E[p⁴], what worst@4 estimates), K = `n_samples` draws."""
    if not (0 < avg < 1):
        return 0.0
    concentration = _beta_concentration(avg, worst)
    a, b = avg * concentration, (1 - avg) * concentration
    rng = np.random.default_rng(0)
    p = rng.beta(a, b, size=problems)
    return _simulated_sd(p, n_samples, metric, rng)


def _beta_concentration(mean: float, fourth: float) -> float:
    """Concentration a + b of the Beta with this mean whose E[p⁴] is closest to `fourth`."""
    grid = np.geomspace(0.05, 500, 400)
    a, b = mean * grid, (1 - mean) * grid
    m4 = np.ones_like(grid)
    for j in range(4):
        m4 *= (a + j) / (a + b + j)
    if not math.isfinite(fourth) or fourth <= 0:
        return 2.0
    return float(grid[np.argmin(np.abs(np.log(m4) - math.log(fourth)))])


def _eval_size(rows: pl.DataFrame, column: str, default: int) -> int:
    """The smallest positive `column` (eval_problems, eval_k_samples) of `rows`, `default`
    where none is recorded (a snapshot's column of nulls raised TypeError in `int`)."""
    if column not in rows.columns:
        return default
    values = rows[column].cast(pl.Float64, strict=False).drop_nulls()
    values = values.filter(values >= 1)
    return as_int(values.min()) if values.len() else default


def noise_model(df: pl.DataFrame, metrics: tuple[str, ...] = DEFAULT_METRICS) -> dict[str, Noise]:
    """Per metric, the evaluation, training and total noise of one run's final value in `df`
    (one sweep, or one split of it)."""
    out = {}
    rows = final_rows(df, metrics[0])
    P, K = _eval_size(rows, "eval_problems", 64), _eval_size(rows, "eval_k_samples", 8)
    avg = as_float(rows[EVAL_AVG].mean()) if EVAL_AVG in rows.columns else math.nan
    worst = as_float(rows[EVAL_WORST].mean()) if EVAL_WORST in rows.columns else math.nan
    has_counts = COUNTS in rows.columns and rows[COUNTS].null_count() < rows.height
    for m in metrics:
        if m not in rows.columns:
            continue
        if has_counts:
            counts = [c for c in rows[COUNTS].to_list() if c]
            ev, source = eval_sd_from_counts(counts, K, m), "counts"
        else:
            ev, source = eval_sd_beta(avg, worst, P, K, m), "beta"
        var, dof = pooled_seed_variance(rows, m)
        total = math.sqrt(var) if dof else math.nan
        train = math.sqrt(max(var - ev**2, 0.0)) if dof else math.nan
        out[m] = Noise(m, ev, total, train, dof, source)
    return out


def eval_variance(rows: pl.DataFrame, metric: str) -> float:
    """Sampling variance of one run's `metric` in these rows (one row per run): the floor
    under any seed variance, which holds it and more."""
    noise = noise_model(rows, (metric,)) if metric in DEFAULT_METRICS else {}
    return noise[metric].eval_sd ** 2 if metric in noise else 0.0


def seed_share(df: pl.DataFrame, metric: str = EVAL_AVG) -> float:
    """Share of the training part of the seed-to-seed variance of final `metric` that runs of
    one seed have in common (their data order and sampling draws): (variance within
    configurations − residual variance of configuration + seed) / (variance within
    configurations − evaluation variance), clipped to [0, 1] — the share
    `isolab.verdicts.worlds.simulate_world` applies to its training noise; 0 where the seeds
    are not crossed with the configurations."""
    rows = with_cell(final_rows(df, metric))
    var, dof = pooled_seed_variance(rows, metric)
    if not dof or "seed" not in rows.columns or rows["cell"].n_unique() < 2 or not var > 0:
        return 0.0
    rows = rows.filter(pl.col("seed").is_not_null() & pl.col("cell").is_not_null())
    fit = cell_fit(rows, metric, "seed")
    train = var - eval_variance(rows, metric)
    if fit is None or not train > 0:
        return 0.0
    return float(min(max((var - fit.sigma2) / train, 0.0), 1.0))
