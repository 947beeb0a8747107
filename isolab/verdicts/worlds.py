"""Simulated sweeps on a real design, for the verdicts' calibration (`isolab.verdicts.
calibration`): the same runs, configurations, seeds and compute checkpoints as a study's runs
table, with metrics redrawn as a mean plus noise at the levels the design measured.

- `null_means`: a world with no effect of any configuration (every run on its group's mean
  learning curve).
- `simulate_world`: one draw of such a world, with training noise per run (part of it shared by
  the runs of one seed) and sampling noise per evaluation, and optionally a planted effect.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from isolab.table import as_float
from isolab.vocab import FLOPS_TOTAL, ROLLOUTS, RUN_KEY, STEP

#: (evaluation SD, training SD) per metric: what `isolab.verdicts.noise.noise_model` measures,
#: as numbers or one per row (a design whose splits differ in noise).
NoiseLevels = Mapping[str, tuple[float | np.ndarray, float | np.ndarray]]


def null_means(
    design: pl.DataFrame, metrics: Sequence[str], by: Sequence[str] = ()
) -> pl.DataFrame:
    """A world with no effect of any configuration: every run follows the mean learning curve
    of its group `by` (e.g. the split) at each checkpoint, as the design measured it. The
    checkpoint is the compute the design equalises: rollouts when every run ends at the same
    rollouts (IsoCompute), binned by an eighth of a doubling (a run that skips a checkpoint,
    its first step already beyond it, is not shifted onto the next); on an IsoFLOP grid, where
    every run evaluates at the same fractions of the budget but ends a few percent apart in
    FLOPs (whole steps), the k-th evaluation of every run — binning FLOPs there would split a
    group's final evaluations by configuration and keep the design's own effects in the null."""
    group = [c for c in by if c in design.columns]
    ends = design.group_by(RUN_KEY).agg(pl.col(ROLLOUTS).max())[ROLLOUTS]
    iso_rollouts = (
        as_float(ends.min()) >= 0.99 * as_float(ends.max()) or FLOPS_TOTAL not in design.columns
    )
    evals = design.group_by(RUN_KEY).agg(pl.len())["len"]
    if not iso_rollouts and evals.n_unique() == 1:
        cp = pl.col(STEP).rank("dense").over(RUN_KEY).cast(pl.Float64).alias("_cp")
    else:
        axis = ROLLOUTS if iso_rollouts else FLOPS_TOTAL
        cp = (
            pl.when(pl.col(axis) > 0).then((pl.col(axis).log(2) * 8).round()).otherwise(-1e9)
        ).alias("_cp")
    means = [pl.col(m).mean().over([*group, "_cp"]).alias(m) for m in metrics]
    return design.with_columns(cp).with_columns(means).drop("_cp")


def simulate_world(
    means: pl.DataFrame,
    noise: NoiseLevels,
    seed: int,
    effect: Mapping[str, np.ndarray] | None = None,
    seed_share: float | np.ndarray = 0.0,
) -> pl.DataFrame:
    """One simulated sweep on the design of `means` (a runs table whose metric columns hold the
    world's mean values): each run draws a training offset per metric, growing with the share of
    training done (sqrt of steps / last step) and shared across metrics in its sign, and each
    evaluation draws its own sampling noise. `seed_share` (a number, or one per row) is the share
    of the training variance common to the runs of one seed (they see the same data order: the
    seed's part of the offset is drawn once per seed). `effect` adds a planted difference per
    metric (an array over the rows). Step-0 evaluations carry sampling noise only."""
    rng = np.random.default_rng(seed)
    key = RUN_KEY
    runs = means[key].unique(maintain_order=True).to_list()
    index = {r: i for i, r in enumerate(runs)}
    run_idx = np.array([index[r] for r in means[key].to_list()])
    z = rng.standard_normal(len(runs))[run_idx]
    # a float array (numpy's stubs give np.clip of bounds 0.0, 1.0 an object dtype)
    share: np.ndarray = np.clip(
        np.broadcast_to(np.asarray(seed_share, float), (means.height,)), 0.0, 1.0
    )
    if "seed" in means.columns and not means["seed"].null_count() and np.any(share > 0):
        parts = [pl.col("seed").cast(pl.String)]
        if "split" in means.columns:  # one seed's Easy and Hard runs see different data
            parts.insert(0, pl.col("split").cast(pl.String).fill_null(""))
        seeds = means.select(pl.concat_str(parts, separator="|")).to_series().to_numpy()
        levels, seed_idx = np.unique(seeds, return_inverse=True)
        common = rng.standard_normal(len(levels))[seed_idx]
        z = np.sqrt(share) * common + np.sqrt(1.0 - share) * z
    last = means.select(pl.col(STEP).max().over(key)).to_series().to_numpy().astype(float)
    frac = np.sqrt(means[STEP].to_numpy().astype(float) / np.maximum(last, 1.0))
    out = {}
    for metric, (eval_sd, train_sd) in noise.items():
        if metric not in means.columns:
            continue
        mu = means[metric].to_numpy().astype(float)
        if effect and metric in effect:
            mu = mu + effect[metric]
        value = mu + train_sd * z * frac + eval_sd * rng.standard_normal(len(mu))
        out[metric] = np.clip(value, 0.0, 1.0)
    return means.with_columns([pl.Series(k, v) for k, v in out.items()])
