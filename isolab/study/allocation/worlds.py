"""allocation's calibration worlds: the pre-registered design (studies/allocation/cpu/main.yaml:
3 splits × 6 arms × 3 seeds, five checkpoints, IsoFLOP) drawn with every arm on its split's
learning curve against FLOPs (the null), or with one allocator's curve shifted left in log
FLOPs, so that it reaches every avg@4 with `ratio` of the FLOPs (planted).

The curves and the noise are the committed snapshots' (`registry.shipped_runs`): each split's
seed-mean avg@4 of nstar's n = 8, B_p = 16 arm (the cpu design's uniform n = 8 at the same
model, pool and lr; Easy and Hard from nstar `main`, the mix from its `mix` runs) against
`flops/total`, interpolated in log2 FLOPs; the noise of one run's avg@4 per split
(`isolab.verdicts.noise`: on Easy a seed SD ≈ 0.020, evaluation ≈ 0.005; Hard ≈ 0.008) and the
share of it a seed's runs have in common. The null is what the claims' test must not call:
every arm equal, where picking the best uniform n on the same runs favours uniform (a
`disagrees` there is the pick's bias, an `agrees` a false call of the paper's sign).
"""

from __future__ import annotations

import math
from collections import Counter
from functools import cache, partial

import numpy as np
import polars as pl

from isolab.paths import bundle_dir
from isolab.study.allocation.claims import ALLOCATORS, SWEEP
from isolab.study.claims import CLAIMS
from isolab.study.registry import shipped_runs
from isolab.table import as_float
from isolab.verdicts.calibration import Plant, StructuredNull
from isolab.verdicts.claim import Y, verdict
from isolab.verdicts.noise import noise_model, seed_share
from isolab.verdicts.worlds import simulate_world
from isolab.vocab import FLOPS_TOTAL, ROLLOUTS, RUN_KEY, STEP

#: The pre-registered cpu spec whose design the worlds draw.
SPEC = "studies/allocation/cpu/main.yaml"
#: The planted FLOPs ratios: an allocator reaches every avg@4 with 0.7× (the claims' plant) or
#: 0.5× the FLOPs of uniform n (the per-prompt papers report 1.3–2× savings in rollouts).
RATIOS = (0.7, 0.5)
#: The runs whose curves the worlds follow: the cpu design's uniform n = 8 arm in nstar's sweeps.
SOURCE = {"easy": "main", "hard": "main", "mix": "mix"}
#: The planted effect at `RATIOS[0]` in the claims' unit: the mean over the three splits of
#: R(budget / 0.7) − R(budget), R the split's curve (`planted_effect`; a test recomputes it).
SIZE_07 = 0.015


@cache
def curves() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per split, (log2 FLOPs, seed-mean avg@4) of nstar's n = 8, B_p = 16 runs, step 0
    placed one doubling before the first checkpoint (as `isolab.verdicts.effects.base_curve`)."""
    out = {}
    for split, sweep in SOURCE.items():
        df = _source(split, sweep)
        pts = df.group_by(STEP).agg(pl.col(FLOPS_TOTAL, Y).mean()).sort(STEP)
        lx = np.log2(np.maximum(pts[FLOPS_TOTAL].to_numpy().astype(float), 1.0))
        lx[0] = lx[1] - 1.0
        out[split] = (lx, pts[Y].to_numpy().astype(float))
    return out


def _source(split: str, sweep: str) -> pl.DataFrame:
    df = shipped_runs("nstar", sweep)
    return df.filter((pl.col("split") == split) & (pl.col("n") == 8) & (pl.col("B_p") == 16))


@cache
def noise() -> dict[str, tuple[float, float, float]]:
    """Per split, (evaluation SD, training SD, seed share) of one run's avg@4, measured on the
    whole nstar sweep the split's curve comes from (every configuration's seeds)."""
    out = {}
    for split, sweep in SOURCE.items():
        df = shipped_runs("nstar", sweep).filter(pl.col("split") == split)
        n = noise_model(df)[Y]
        train = n.train_sd if math.isfinite(n.train_sd) else n.eval_sd
        out[split] = (n.eval_sd, train, seed_share(df))
    return out


@cache
def planned_design() -> pl.DataFrame:
    """The runs the pre-registered spec plans, one row per run and checkpoint (step 0 and the
    spec's fractions of the budget): `run_key`, split, allocation, n, B_p, search_oversample,
    seed, step, `flops/total`, `compute/rollouts` (planned, not measured)."""
    from isolab.sweep import plan_sweep, split_sizes
    from isolab.sweep.spec import SweepSpec

    spec = SweepSpec.from_yaml(bundle_dir() / SPEC)
    plan = plan_sweep(spec, split_sizes(spec))
    rows = []
    for p in plan.points:
        c = p.config
        steps = [0, *sorted({max(1, round(f * c.M)) for f in plan.eval_fractions})]
        for step in steps:
            rows.append(
                {
                    RUN_KEY: p.run_key,
                    "split": c.split,
                    "allocation": c.allocation,
                    "n": c.n,
                    "B_p": c.B_p,
                    "search_oversample": c.search_oversample,
                    "seed": c.seed,
                    STEP: step,
                    FLOPS_TOTAL: p.planned_flops * step / c.M,
                    ROLLOUTS: float(c.rollouts_per_step * step),
                }
            )
    return pl.DataFrame(rows)


def means(shift: dict[str, float], design: pl.DataFrame | None = None) -> pl.DataFrame:
    """`design` (default `planned_design`) with avg@4 on its split's curve at each row's FLOPs,
    an allocator in `shift` at FLOPs / ratio (it reaches every avg@4 with ratio× the FLOPs)."""
    d = design if design is not None else planned_design()
    ratio = np.array([shift.get(a, 1.0) for a in d["allocation"].to_list()])
    lx = np.log2(np.maximum(d[FLOPS_TOTAL].to_numpy().astype(float), 1.0)) - np.log2(ratio)
    y = np.zeros(d.height)
    split = d["split"].to_numpy()
    for name, (xs, ys) in curves().items():
        on = split == name
        # beyond the curve's last checkpoint, its last slope goes on (nstar's runs end at 4×
        # this budget, so it is never reached at the ratios planted here)
        slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
        y[on] = np.interp(lx[on], xs, ys) + slope * np.maximum(lx[on] - xs[-1], 0.0)
    step0 = (d[STEP] == 0).to_numpy()
    y[step0] = np.array([curves()[s][1][0] for s in split[step0]])
    return d.with_columns(pl.Series(Y, y))


def study_world(
    shift: dict[str, float], seed: int, design: pl.DataFrame | None = None
) -> dict[str, pl.DataFrame]:
    """One simulated `main` sweep: `means(shift, design)` plus each split's noise
    (`isolab.verdicts.worlds.simulate_world`: a training offset per run, part of it common to a
    seed's runs, growing with the share of training done, and sampling noise per evaluation)."""
    m = means(shift, design)
    split = m["split"].to_list()
    levels = noise()
    ev = np.array([levels[s][0] for s in split])
    tr = np.array([levels[s][1] for s in split])
    share = np.array([levels[s][2] for s in split])
    return {SWEEP: simulate_world(m, {Y: (ev, tr)}, seed, None, share)}


def planted_effect(allocation: str, ratio: float, design: pl.DataFrame | None = None) -> float:
    """The planted difference in the claims' unit on `design` (default `planned_design`): the
    mean over splits of the allocator's final mean avg@4 minus uniform n = 8's (every uniform n
    is on the same curve)."""
    m = means({allocation: ratio}, design).filter(pl.col(STEP) == pl.col(STEP).max().over(RUN_KEY))
    per = m.group_by("split").agg(
        pl.col(Y).filter(pl.col("allocation") == allocation).mean().alias("a"),
        pl.col(Y)
        .filter((pl.col("allocation") == "uniform") & (pl.col("n") == 8))
        .mean()
        .alias("u"),
    )
    return as_float((per["a"] - per["u"]).mean())


def power(
    claim_id: str, ratio: float, sims: int, seed: int = 0, design: pl.DataFrame | None = None
) -> tuple[Counter, float]:
    """Calls of `claim_id` over `sims` worlds (on `design`, default `planned_design`) where its
    allocator reaches every avg@4 with `ratio`× the FLOPs (1: the null, every arm equal), and
    the mean effect the design detects with 80% power (the verdicts' `min_detectable_effect`,
    in the claim's unit)."""
    claim = CLAIMS[claim_id]
    allocation = claim_id.removeprefix("allocation.")
    calls: Counter = Counter()
    mdes = []
    for k in range(sims):
        v = verdict(claim, claim.run(study_world({allocation: ratio}, seed + k, design)))
        calls[v.call] += 1
        mdes.append(v.min_detectable_effect)
    finite = [m for m in mdes if math.isfinite(m)]
    return calls, float(np.mean(finite)) if finite else math.nan


PLANTS: dict[str, Plant] = {
    f"allocation.{a}": Plant(
        size=SIZE_07,
        describe=f"{a} reaches every avg@4 with 0.7× the FLOPs of uniform n (its curve "
        "shifted left by 0.51 doublings; every uniform n on nstar's n = 8 curve of its split) "
        f"on the pre-registered design ({SPEC}): final avg@4 +{SIZE_07} pooled over splits",
        world=partial(study_world, {a: RATIOS[0]}),
        null_world=partial(study_world, {}),
    )
    for a in ALLOCATORS
}
STRUCTURED_NULLS: dict[str, StructuredNull] = {}
