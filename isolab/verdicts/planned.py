"""A study's design before its runs exist: the runs table a planned sweep will produce, with
metrics drawn from stated curves, so that the verdicts can be calibrated on the design that
will test them (`isolab.verdicts.calibration`).

- `Grid`: a sweep's planned grid (splits × n × B_p × seeds under a batch cap, an IsoCompute
  budget, geometric checkpoints); a study's planned grids live with its calibration
  (`isolab.study.calibration`).
- `design_frame`: the runs table's rows of a grid (one per run × evaluation: step 0 and the
  step at which each checkpoint is reached, as `isolab.sweep.plan` places them), metric columns
  empty; `plan_frame` does the same from a real `isolab.sweep.SweepPlan`.
- `Curve`: a split's mean learning curve, a sigmoid in log2 C (the ScaleRL form, arXiv
  2510.13786, on the log axis).
- `Mapping`: best@4 and worst@4 as functions of avg@4, for problems whose success rates follow a
  Beta law whose concentration falls as avg@4 rises (training sharpens the rates towards 0 and 1:
  on the committed Easy runs the concentration that matches avg@4 and worst@4 falls from 8.6 at
  step 0 to 0.8 at the end, `isolab.verdicts.noise._beta_concentration`).
- `planned_data`: the null means of the nstar design (every configuration on its split's curve),
  with the noise levels of `PLANNED_NOISE`, ready for `isolab.verdicts.worlds.simulate_world`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from isolab.vocab import EVAL_AVG, EVAL_BEST, EVAL_WORST, ROLLOUTS, RUN_KEY, STEP


@dataclass(frozen=True)
class Grid:
    """A sweep's planned grid at an IsoCompute budget (the fields a `SweepSpec` gives).

    Attributes:
        name: the sweep's name in a study's data (`main`, `long`).
        splits: difficulty splits.
        n: rollouts per problem.
        B_p: problems per batch.
        budget_rollouts: each run's budget C; M = budget // (B_p·n) steps.
        eval_points: checkpoints, geometric with ratio `eval_ratio`, the last at the budget.
        eval_ratio: ratio between consecutive checkpoints.
        max_batch: cap on B = B_p·n (None: none).
        seeds: one run per point and seed.
        eval_problems: validation problems per evaluation.
        eval_k_samples: samples per validation problem.
    """

    name: str
    splits: tuple[str, ...]
    n: tuple[int, ...]
    B_p: tuple[int, ...]
    budget_rollouts: int
    eval_points: int
    eval_ratio: float = 2.0
    max_batch: int | None = None
    seeds: tuple[int, ...] = (0, 1, 2)
    eval_problems: int = 300
    eval_k_samples: int = 16

    @property
    def checkpoints(self) -> tuple[int, ...]:
        """Rollouts at which every run is evaluated (`isolab.sweep.plan.checkpoints`)."""
        return tuple(
            int(round(self.budget_rollouts * self.eval_ratio ** -(self.eval_points - 1 - j)))
            for j in range(self.eval_points)
        )


def _eval_steps(B: int, M: int, at: tuple[int, ...]) -> list[int]:
    """Step 0 and the first step at which each checkpoint is reached (`isolab.sweep.plan`)."""
    return sorted({0, M} | {min(-(-c // B), M) for c in at})


def _rows(
    name: str,
    split: str,
    n: int,
    B_p: int,
    seed: int,
    M: int,
    at: tuple[int, ...],
    grid: dict,
    per_step: int | None = None,
) -> list[dict[str, Any]]:
    """A run's rows; `per_step` the rollouts generated per step (B, or k·B under dynamic
    sampling)."""
    B = n * B_p
    g = per_step or B
    key = f"{name}|{split}|n{n}|bp{B_p}|s{seed}"
    return [
        {
            RUN_KEY: key,
            "split": split,
            "n": n,
            "B_p": B_p,
            "B": B,
            "M": M,
            "seed": seed,
            STEP: s,
            ROLLOUTS: float(s * g),
            "rollouts": M * g,
            **grid,
        }
        for s in _eval_steps(g, M, at)
    ]


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    df = pl.DataFrame(rows)
    return df.with_columns(
        pl.lit(None, pl.Int64).alias("train_limit"),
        *(pl.lit(math.nan).alias(m) for m in (EVAL_AVG, EVAL_BEST, EVAL_WORST)),
    )


def design_frame(grid: Grid) -> pl.DataFrame:
    """The runs table `grid` will produce, one row per run × evaluation, metrics NaN."""
    rows: list[dict[str, Any]] = []
    extra = {"eval_problems": grid.eval_problems, "eval_k_samples": grid.eval_k_samples}
    for split in grid.splits:
        for B_p in grid.B_p:
            for n in grid.n:
                B = n * B_p
                if grid.max_batch is not None and grid.max_batch < B:
                    continue
                M = grid.budget_rollouts // B
                for seed in grid.seeds:
                    rows += _rows(grid.name, split, n, B_p, seed, M, grid.checkpoints, extra)
    return _frame(rows)


def plan_frame(plan: Any, name: str) -> pl.DataFrame:
    """`design_frame` of a real plan (`isolab.sweep.plan_sweep(SweepSpec.from_yaml(path))`),
    so that a committed spec can be calibrated before it runs."""
    rows: list[dict[str, Any]] = []
    for point in plan.points:
        c = point.config
        extra = {"eval_problems": c.eval_problems, "eval_k_samples": c.eval_k_samples}
        at = tuple(c.eval_at_rollouts or (c.M * c.B,))
        per_step = getattr(c, "rollouts_per_step", c.B)
        rows += _rows(name, c.split, c.n, c.B_p, c.seed, c.M, at, extra, per_step)
    return _frame(rows)


@dataclass(frozen=True)
class Curve:
    """Mean avg@4 against compute: `start` at C = 0, rising as a sigmoid in log2 C from
    `start` to `end`, halfway at log2 C = `mid`, with `width` doublings per e-fold of the
    logistic. Its gain per doubling at log2 C = l is (end − start)·s(1 − s)/width."""

    start: float
    end: float
    mid: float
    width: float

    def __call__(self, rollouts: np.ndarray) -> np.ndarray:
        c = np.asarray(rollouts, float)
        log_c = np.log2(np.maximum(c, 1.0))
        s = 1.0 / (1.0 + np.exp(-(log_c - self.mid) / self.width))
        return np.where(c > 0, self.start + (self.end - self.start) * s, self.start)


@dataclass(frozen=True)
class Mapping:
    """best@4 and worst@4 from avg@4: per-problem success rates p ~ Beta(μκ, (1 − μ)κ) with
    mean μ = avg@4 and a concentration κ log-linear in μ through (`avg_lo`, `kappa_lo`) and
    (`avg_hi`, `kappa_hi`), clipped to [0.2, 200]. worst@4 = E[p⁴] and best@4 = 1 − E[(1 − p)⁴]
    (what the unbiased estimators of `isolab.metrics` estimate). One fixed mapping: moving
    avg@4 along it, by compute or by anything else, moves best@4 and worst@4 alike."""

    avg_lo: float
    kappa_lo: float
    avg_hi: float
    kappa_hi: float

    def kappa(self, avg: np.ndarray) -> np.ndarray:
        t = (np.asarray(avg, float) - self.avg_lo) / (self.avg_hi - self.avg_lo)
        log_k = math.log(self.kappa_lo) + t * (math.log(self.kappa_hi) - math.log(self.kappa_lo))
        return np.clip(np.exp(log_k), 0.2, 200.0)

    def __call__(self, avg: np.ndarray) -> dict[str, np.ndarray]:
        mu = np.clip(np.asarray(avg, float), 1e-4, 1 - 1e-4)
        k = self.kappa(mu)
        a, b = mu * k, (1 - mu) * k
        worst, miss = np.ones_like(mu), np.ones_like(mu)
        for j in range(4):
            worst *= (a + j) / (k + j)
            miss *= (b + j) / (k + j)
        return {EVAL_BEST: 1.0 - miss, EVAL_WORST: worst}


@dataclass(frozen=True)
class SplitModel:
    """One split's planned world: its mean curve, the best/worst mapping, and the noise of one
    run's metrics: evaluation SD (sampling the validation problems) and training SD (seed to
    seed, at the end of training), per metric."""

    curve: Curve
    mapping: Mapping
    eval_sd: dict[str, float]
    train_sd: dict[str, float]


#: The CPU testbed as the committed nstar runs measured it (`isolab.verdicts.noise`): Easy avg@4
#: 0.28 at step 0, ≈ 0.5 at the end (Hard 0.094, ≈ 0.15); between-seed SD ≈ 0.03 (Easy) and
#: 0.015 (Hard) of which evaluation ≈ 0.008 (200 problems × 16 samples); best@4 and worst@4 SDs
#: in the ratios measured on those runs. The mappings' concentrations match the runs' mean
#: avg@4 with worst@4 on Easy and with best@4 on Hard (the metric each split's bestk claim
#: reads: one Beta law cannot match both at the end of training). The curves plateau within the
#: `long` budget (gain < 0.004 per doubling past 32,768 rollouts), so the saturation gate can
#: pass.
PLANNED: dict[str, SplitModel] = {
    "easy": SplitModel(
        curve=Curve(start=0.28, end=0.52, mid=11.0, width=1.0),
        mapping=Mapping(0.28, 8.6, 0.455, 0.76),
        eval_sd={EVAL_AVG: 0.008, EVAL_BEST: 0.0098, EVAL_WORST: 0.0114},
        train_sd={EVAL_AVG: 0.029, EVAL_BEST: 0.037, EVAL_WORST: 0.015},
    ),
    "hard": SplitModel(
        curve=Curve(start=0.094, end=0.155, mid=11.5, width=1.2),
        mapping=Mapping(0.094, 29.0, 0.15, 3.04),
        eval_sd={EVAL_AVG: 0.008, EVAL_BEST: 0.016, EVAL_WORST: 0.0047},
        train_sd={EVAL_AVG: 0.0127, EVAL_BEST: 0.026, EVAL_WORST: 0.0067},
    ),
}


def planned_means(design: pl.DataFrame, models: dict[str, SplitModel] = PLANNED) -> pl.DataFrame:
    """`design` (a `design_frame`) with every run on its split's mean curve: the null world's
    means (no effect of any configuration), best@4 and worst@4 through the split's mapping."""
    split = design["split"].to_numpy()
    C = design[ROLLOUTS].to_numpy().astype(float)
    avg = np.full(design.height, math.nan)
    out = {m: np.full(design.height, math.nan) for m in (EVAL_BEST, EVAL_WORST)}
    for name, model in models.items():
        on = split == name
        if not on.any():
            continue
        avg[on] = model.curve(C[on])
        for m, v in model.mapping(avg[on]).items():
            out[m][on] = v
    return design.with_columns(pl.Series(EVAL_AVG, avg), *(pl.Series(m, v) for m, v in out.items()))


@dataclass(frozen=True)
class PlannedStudy:
    """A planned study's calibration inputs: per sweep, the null means, the noise (metric →
    (evaluation SD, training SD) per row) and the seed share (per row)."""

    means: dict[str, pl.DataFrame]
    noise: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]
    shares: dict[str, np.ndarray] = field(default_factory=dict)


def planned_noise(
    design: pl.DataFrame, models: dict[str, SplitModel] = PLANNED
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per metric, (evaluation SD, training SD) for every row of `design`, from its split."""
    split = design["split"].to_numpy()
    out = {}
    for m in (EVAL_AVG, EVAL_BEST, EVAL_WORST):
        ev, tr = np.zeros(design.height), np.zeros(design.height)
        for name, model in models.items():
            on = split == name
            ev[on], tr[on] = model.eval_sd[m], model.train_sd[m]
        out[m] = (ev, tr)
    return out


def planned_study(
    grids: tuple[Grid, ...],
    models: dict[str, SplitModel] = PLANNED,
    seed_share: float = 0.0,
) -> PlannedStudy:
    """A study of `grids` before it runs (e.g. nstar's of issue 27, `isolab.study.calibration.
    NSTAR_MAIN`): null means, noise, seed
    shares (0: the committed nstar runs measured none, `isolab.verdicts.noise.seed_share`)."""
    means = {g.name: planned_means(design_frame(g), models) for g in grids}
    return PlannedStudy(
        means=means,
        noise={k: planned_noise(df, models) for k, df in means.items()},
        shares={k: np.full(df.height, seed_share) for k, df in means.items()},
    )
