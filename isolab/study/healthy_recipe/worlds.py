"""healthy-recipe's calibration worlds: KL + entropy on or off as an arm effect, and the
pre-registered (B, lr) grid (`lr_exponent.SPEC`) drawn with a planted exponent of the best
learning rate in the batch (`study_world`), at sqrt and at the equivalence margins.
"""

from __future__ import annotations

import math
from functools import cache, partial

import numpy as np
import polars as pl

from isolab.paths import bundle_dir
from isolab.study.healthy_recipe.lr_exponent import MARGIN, SPEC, SQRT
from isolab.verdicts import effects as fx
from isolab.verdicts.calibration import Plant, StructuredNull
from isolab.vocab import EVAL_AVG, RUN_KEY, STEP

#: The planted response: final avg@4 falls this much per doubling² of lr away from the best lr
#: (the lr pilot's Easy runs at B = 2,048: −0.019 per doubling² around lr_base 5e-5).
CURVATURE = 0.02
#: Noise of one run's final avg@4 on Easy at cpu scale: seed SD 0.019, evaluation SD 0.005
#: (`isolab.verdicts.noise` on the committed nstar `main` runs, runs/n-vs-bp/cpu/findings.json).
NOISE_SD = 0.020
#: The best lr at B = 2,048 (the pilot's best Easy lr there: lr_base 5e-5 under sqrt, 2.8e-4).
LR_AT_2048 = 2.83e-4


@cache
def planned_design() -> pl.DataFrame:
    """The runs the pre-registered spec (`SPEC`) plans: one row per run (B, lr, seed), at its
    last evaluation (step M)."""
    from isolab.sweep import plan_sweep, split_sizes
    from isolab.sweep.spec import SweepSpec

    spec = SweepSpec.from_yaml(bundle_dir() / SPEC)
    plan = plan_sweep(spec, split_sizes(spec))
    rows = [
        {
            RUN_KEY: p.run_key,
            "B": p.config.B,
            "lr": p.config.lr,
            "seed": p.config.seed,
            STEP: p.config.M,
        }
        for p in plan.points
    ]
    return pl.DataFrame(rows)


def study_world(
    exponent: float, seed: int, design: pl.DataFrame | None = None
) -> dict[str, pl.DataFrame]:
    """One simulated `lr-grid` sweep (`design`, default `planned_design`): each run's final
    avg@4 = 0.45 − `CURVATURE`·(log2 lr − log2 lr*(B))² + a level per seed + noise, with
    lr*(B) = `LR_AT_2048`·(B / 2048)^`exponent`; one run's SD `NOISE_SD`, a sixth of its
    variance shared by a seed's runs."""
    d = design if design is not None else planned_design()
    rng = np.random.default_rng(seed)
    B = d["B"].to_numpy().astype(float)
    u = np.log2(d["lr"].to_numpy().astype(float))
    star = math.log2(LR_AT_2048) + exponent * np.log2(B / 2048)
    seeds = d["seed"].to_numpy()
    share = 1 / 6
    level = {s: rng.normal(0, NOISE_SD * math.sqrt(share)) for s in np.unique(seeds)}
    y = (
        0.45
        - CURVATURE * (u - star) ** 2
        + np.array([level[s] for s in seeds])
        + rng.normal(0, NOISE_SD * math.sqrt(1 - share), d.height)
    )
    return {"lr-grid": d.with_columns(pl.Series(EVAL_AVG, y), split=pl.lit("easy"))}


PLANTS: dict[str, Plant] = {
    "healthy.kl_entropy_easy": Plant(
        size=0.06,
        describe="KL + entropy on lifts Easy avg@4 by 0.06 by the end",
        add=fx.arm("easy", "recipe", "kl_entropy", 0.06),
    ),
    "healthy.kl_entropy_hard": Plant(
        size=-0.03,
        describe="KL + entropy on lowers Hard avg@4 by 0.03",
        add=fx.arm("hard", "recipe", "kl_entropy", -0.03),
    ),
    "healthy.lr_sqrt": Plant(
        size=SQRT,
        describe=f"the best lr ∝ B^{SQRT} on the pre-registered (B, lr) grid ({SPEC}), "
        f"final avg@4 falling {CURVATURE} per doubling² of lr from it, noise SD "
        f"{NOISE_SD} (null: B^{SQRT - MARGIN}, the lower margin)",
        world=partial(study_world, SQRT),
        null_world=partial(study_world, SQRT - MARGIN),
    ),
}

STRUCTURED_NULLS: dict[str, StructuredNull] = {
    "lr-exponent-upper-margin": StructuredNull(
        f"the best lr ∝ B^{SQRT + MARGIN}: the upper margin, as near linear as sqrt",
        ("healthy.lr_sqrt",),
        world=partial(study_world, SQRT + MARGIN),
    ),
}
