"""The evidence at a compute and its noise: each configuration's seed mean of the metric at a
budget (`runs_at_budget`), the noise of one run there (`budget_noise`: the spread between seeds,
else the evaluation's binomial noise) and each mean's standard error (`with_standard_errors`).

`isolab.frontier.recommend` reads them for its hedges, `isolab.frontier.validate` to score a
prediction's regret against the noise, and `isolab.sweep.adaptive` to judge a rung.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import polars as pl

from isolab.table import as_float, as_int, run_column
from isolab.vocab import RUN_ID, RUN_KEY

#: Two options are within noise when they differ by less than this many standard errors of
#: their difference (≈ a two-sided 95% test).
WITHIN_SE = 2.0
#: The columns that name an allocation of the iso-compute grid (M follows from n, B_p and C).
ALLOCATION = ("n", "B_p", "M")
#: The columns that name an allocation of the ρ grid within one reward system: the search
#: oversampling k and the updates per batch μ (Wilhelm & Kao, arXiv 2607.13389).
RHO_ALLOCATION = ("search_oversample", "num_iterations")
#: Short names of allocation columns in sentences and tables.
SYMBOLS = {"search_oversample": "k", "num_iterations": "μ"}


@dataclass(frozen=True)
class Noise:
    """The noise of one run's reward at a budget, and how it was had (`budget_noise`);
    `draws` = P·K, the evaluation's samples, for binomial noise."""

    sd: float
    source: Literal["seeds", "evaluation", "none"]
    seeds: int
    text: str
    draws: int = 0


def runs_at_budget(
    df: pl.DataFrame, budget: float, x: str, y: str, config: Sequence[str] = ALLOCATION
) -> pl.DataFrame:
    """Per configuration (the `config` columns present): the seed mean of `y` at the budget,
    each run interpolated in log compute (a run that stops earlier counts at its last point),
    with `C_max`, `seeds` and their SD `seed_sd` (null with one seed); best first."""
    cfg = [c for c in config if c in df.columns]
    run = [c for c in (RUN_KEY, RUN_ID) if c in df.columns][:1] or [
        *cfg,
        *(["seed"] if "seed" in df.columns else []),
    ]
    rows = []
    for _, g in df.filter(pl.col(x) > 0).sort(x).group_by(run, maintain_order=True):
        C, R = g[x].to_numpy().astype(float), g[y].to_numpy().astype(float)
        at = float(np.interp(math.log(min(budget, C[-1])), np.log(C), R))
        rows.append({**{c: g[c][0] for c in cfg}, "C_max": C[-1], "_value": at})
    if not rows:
        return pl.DataFrame()
    return (
        pl.DataFrame(rows)
        .group_by(cfg, maintain_order=True)
        .agg(
            pl.col("C_max").max(),
            pl.col("_value").mean().alias(f"{y}_at_budget"),
            pl.len().alias("seeds"),
            pl.col("_value").std().alias("seed_sd"),
        )
        .sort(f"{y}_at_budget", descending=True, maintain_order=True)
    )


def budget_noise(df: pl.DataFrame, evidence: pl.DataFrame, y: str) -> Noise:
    """SD of one run's `y` at the budget: the spread between seeds pooled over configurations
    with two or more; else the binomial sampling noise of the evaluation,
    √(R(1−R)/(P·K)) for P = eval_problems, K = eval_k_samples (exact for avg@k, a floor under
    the spread between seeds that one seed cannot show); else none."""
    seeds = as_int(evidence["seeds"].max()) if evidence.height else 0
    multi = evidence.filter(pl.col("seeds") >= 2)
    if multi.height:
        dof = int((multi["seeds"] - 1).sum())
        sd = math.sqrt(as_float(((multi["seeds"] - 1) * multi["seed_sd"] ** 2).sum()) / dof)
        return Noise(
            sd,
            "seeds",
            seeds,
            f"seed spread, SD {sd:.3f} of one run ({multi.height} configurations with ≥ 2 seeds, "
            f"{dof} df)",
        )
    cols = ("eval_problems", "eval_k_samples")
    counts = [df[c].cast(pl.Float64, strict=False) for c in cols if c in df.columns]
    counts = [s.filter(s >= 1) for s in counts]  # 0 in a snapshot divided by zero below
    if len(counts) == len(cols) and all(s.len() for s in counts) and evidence.height:
        P, K = (int(as_float(s.min())) for s in counts)
        R = float(evidence[f"{y}_at_budget"][0])
        sd = math.sqrt(max(R * (1 - R), 0.0) / (P * K))
        return Noise(
            sd,
            "evaluation",
            seeds,
            f"evaluation binomial noise only, SD √(R(1−R)/(P·K)) = {sd:.3f} at R = {R:.3f} for "
            f"P = {P} problems × K = {K} samples",
            draws=P * K,
        )
    return Noise(
        float("nan"),
        "none",
        seeds,
        "no noise estimate: one seed and no eval_problems / eval_k_samples in the table",
    )


def with_standard_errors(evidence: pl.DataFrame, noise: Noise, y: str) -> pl.DataFrame:
    """`se`: the standard error of each configuration's seed mean under `noise`."""
    value = pl.col(f"{y}_at_budget")
    if noise.source == "evaluation":  # binomial at each configuration's own reward
        sd = ((value * (1 - value)).clip(lower_bound=0) / noise.draws).sqrt()
    else:
        sd = pl.lit(noise.sd)
    return evidence.with_columns(se=sd / pl.col("seeds").cast(pl.Float64).sqrt())


def compute(value: float) -> str:
    """A compute for a sentence: 65,536 (plain below a million), 3.36e+07 above."""
    return f"{value:,.0f}" if value < 1e6 else f"{value:.3g}"


def common_compute(df: pl.DataFrame, x: str) -> float:
    """The largest compute every run reaches: the smallest of the runs' last `x`. A sweep's
    runs evaluate at the same checkpoints, so this is the last checkpoint they share."""
    return as_float(df.group_by(run_column(df)).agg(pl.col(x).max())[x].min())


def seen_rows(df: pl.DataFrame, x: str, C: float, factor: float) -> pl.DataFrame:
    """Each run's rows up to its evaluation nearest C / factor in log `x` (the untrained point
    included): what a sweep stopped at C / factor would have seen."""
    key = run_column(df)
    trained = df.filter(pl.col(x) > 0)
    gap = (pl.col(x).log() - math.log(C / factor)).abs()
    last = trained.group_by(key).agg(pl.col(x).sort_by(gap).first().alias("_last"))
    return df.join(last, on=key).filter(pl.col(x) <= pl.col("_last")).drop("_last")
