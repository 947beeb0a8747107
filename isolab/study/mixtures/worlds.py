"""mixtures' calibration worlds: `world` and `coverage_world` draw runs on the shipped designs
(nstar's `main`, `mix`, `never`) with the measured levels, seed spreads and noise, and the
effects as stated (`coverage_world` every checkpoint of `never`: the peaks need the curves).
"""

from __future__ import annotations

import math
from functools import cache, partial

import numpy as np
import polars as pl

from isolab.study.mixtures.optimum import MIX, component_rows, coverage_metric
from isolab.study.registry import shipped_runs
from isolab.table import as_float
from isolab.verdicts.calibration import Plant, StructuredNull
from isolab.verdicts.noise import noise_model
from isolab.verdicts.quadratic import quadratic_design
from isolab.verdicts.worlds import null_means, simulate_world
from isolab.vocab import EVAL_AVG, RUN_KEY, STEP


@cache
def shipped(sweep: str) -> pl.DataFrame:
    """The study's committed cpu sweep `sweep` (nstar's runs; the same bytes everywhere)."""
    return shipped_runs("mixtures", sweep)


@cache
def shipped_components() -> dict[str, pl.DataFrame]:
    """`component_rows` of the committed main and mix sweeps: the design the worlds redraw."""
    return component_rows(shipped("main"), shipped("mix"))


@cache
def measured() -> dict[str, dict[str, float]]:
    """Per split, the level, curvature, vertex and residual SD of the quadratic fit, and the SD
    of its seed levels, on the shipped design (`shipped_components`)."""
    rows = shipped_components()
    out = {}
    for split, part in rows.items():
        X, centre, _ = quadratic_design(part)
        y = part[EVAL_AVG].to_numpy().astype(float)
        beta = np.linalg.lstsq(X, y, rcond=None)[0]
        e = y - X @ beta
        sd = float(math.sqrt(e @ e / (len(y) - X.shape[1])))
        seed_sd = float(np.std(beta[3:])) if X.shape[1] > 3 else 0.0
        out[split] = {
            "level": float(np.mean(y)),
            "c": float(beta[2]),
            "sd": sd,
            "seed_sd": seed_sd,
            "centre": centre,
        }
    return out


#: Worlds of the mixture claim, each (Easy's vertex, Hard's vertex, the mix's vertex) in log2 n,
#: and a curvature for all three (None: each split's as measured). Vertices are placed inside
#: the grid (log2 n = 1 … 7) where a design could locate them.
WORLDS: dict[str, tuple[float, float, float, float | None]] = {
    "same": (4.0, 4.0, 4.0, -0.006),  # one optimum for all three
    "at-easy": (2.5, 5.5, 2.5, -0.006),  # separated components, the mix at one end: the null
    "at-hard": (2.5, 5.5, 5.5, -0.006),
    "between": (2.5, 5.5, 4.0, -0.006),  # the planted effect: the mix midway (1.5 doublings in)
    "outside": (2.5, 5.5, 6.8, -0.006),  # the mix beyond Hard's optimum: a disagreement
    "between-measured": (2.5, 5.5, 4.0, None),  # midway, at the curvatures the runs measured
}


def world(kind: str, seed: int) -> dict[str, pl.DataFrame]:
    """One simulated `main` and `mix` on the shipped design: each split's last evaluations
    redrawn as a quadratic in log2 n with its measured level, seed spread and noise, vertices
    and curvature as `WORLDS` says."""
    v_easy, v_hard, v_mix, curvature = WORLDS[kind]
    place = {"easy": v_easy, "hard": v_hard, MIX: v_mix}
    p = measured()
    rng = np.random.default_rng(seed)
    rows = shipped_components()
    out = {}
    for split, part in rows.items():
        q = p[split]
        c = curvature if curvature is not None else min(q["c"], -1e-4)
        x = np.log2(part["n"].to_numpy().astype(float))
        seeds = part["seed"].to_numpy()
        level = {s: rng.normal(0, q["seed_sd"]) for s in np.unique(seeds)}
        y = (
            q["level"]
            + c * (x - place[split]) ** 2
            + np.array([level[s] for s in seeds])
            + rng.normal(0, q["sd"], len(x))
        )
        out[split] = part.with_columns(pl.Series(EVAL_AVG, y))
    return {"main": pl.concat([out["easy"], out["hard"]], how="diagonal_relaxed"), "mix": out[MIX]}


def coverage_world(kind: str, slope_per_doubling: float, seed: int) -> dict[str, pl.DataFrame]:
    """One simulated `never` on the shipped design, every checkpoint, noise as measured
    (evaluation SD from the per-problem counts, training SD from the seeds,
    `isolab.verdicts.noise`; drawn by `isolab.verdicts.worlds.simulate_world`). `kind`: `flat`,
    every run on the mean best@k curve over n (no effect of n); `kept`, each n on its own
    measured seed-mean curve shifted so that every n peaks at the same best@k (the smaller n
    still lose coverage late: ahead at the budget, a larger n has expanded nothing). Plus
    `slope_per_doubling` × log2 n (centred) × the share of training done."""
    df = shipped("never")
    best = coverage_metric(df)
    if best is None:
        raise ValueError("the shipped `never` sweep has no eval/best@k column")
    means = null_means(df, [best]) if kind == "flat" else _same_peak(df, best)
    frac = np.sqrt(
        df[STEP].to_numpy() / df.select(pl.col(STEP).max().over(RUN_KEY)).to_series().to_numpy()
    )
    x = np.log2(df["n"].to_numpy().astype(float))
    effect = {best: slope_per_doubling * (x - x.mean()) * frac}
    return {"never": simulate_world(means, {best: _never_noise(best)}, seed, effect)}


@cache
def _never_noise(best: str) -> tuple[float, float]:
    """(evaluation SD, training SD) of one run's `best` on the shipped `never` runs; a training
    SD the seeds do not resolve is taken as the evaluation SD."""
    noise = noise_model(shipped("never"), (best,))[best]
    return noise.eval_sd, noise.train_sd if math.isfinite(noise.train_sd) else noise.eval_sd


def _same_peak(df: pl.DataFrame, best: str) -> pl.DataFrame:
    """`df` with `best` replaced by its n's seed mean at each step, shifted so that every n's
    seed-mean curve peaks at the mean of their peaks (step 0 unchanged)."""
    mean = pl.col(best).mean().over("n", STEP)
    peak = pl.when(pl.col(STEP) > 0).then(pl.col(best)).max().over("n")
    out = df.with_columns(mean.alias(best)).with_columns(peak.alias("_peak"))
    common = as_float(out.group_by("n").agg(pl.col("_peak").first())["_peak"].mean())
    shift = pl.when(pl.col(STEP) > 0).then(common - pl.col("_peak")).otherwise(0.0)
    return out.with_columns((pl.col(best) + shift).alias(best)).drop("_peak")


PLANTS: dict[str, Plant] = {
    "mixtures.nstar_between": Plant(
        size=1.5,
        describe="Easy's n* = 2^2.5, Hard's 2^5.5, the mix's midway (1.5 doublings inside "
        "either end), all curved at −0.006 per doubling², at each split's measured level, seed "
        "spread and noise (null: the mix's optimum at Easy's, the end of the range)",
        world=partial(world, "between"),
        null_world=partial(world, "at-easy"),
    ),
    "mixtures.never_coverage": Plant(
        size=0.05,
        describe="best@16 on `never`, every checkpoint, 0.05 higher per doubling of n by the end "
        "(growing with the share of training done) on the mean curve over n, at the measured "
        "noise (null: every n on the mean curve)",
        world=partial(coverage_world, "flat", 0.05),
        null_world=partial(coverage_world, "flat", 0.0),
    ),
}

STRUCTURED_NULLS: dict[str, StructuredNull] = {
    "mix-at-hard": StructuredNull(
        "separated components (n* = 2^2.5 and 2^5.5), the mix's optimum at Hard's: the other "
        "end of the range",
        ("mixtures.nstar_between",),
        world=partial(world, "at-hard"),
    ),
    "mix-one-optimum": StructuredNull(
        "one optimum (n* = 16) for Easy, Hard and the mix: nothing to lie between",
        ("mixtures.nstar_between",),
        world=partial(world, "same"),
    ),
    "coverage-kept-not-expanded": StructuredNull(
        "each n on its own measured best@16 curve on `never`, shifted so that every n peaks at "
        "the same coverage: the smaller n lose it late, so a larger n is ahead at the budget "
        "without expanding coverage (what the committed runs show)",
        ("mixtures.never_coverage",),
        world=partial(coverage_world, "kept", 0.0),
    ),
}
