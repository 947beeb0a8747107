"""targets' calibration worlds: each run's last evaluation under both targets redrawn as
quadratics in log2 n at the committed runs' measured levels, curvatures, residual SDs and
correlation (`measured`), with the two optima together (the nulls) or apart (the plant).
"""

from __future__ import annotations

import math
from functools import cache, partial
from typing import NamedTuple

import numpy as np
import polars as pl

from isolab.study.registry import shipped_runs
from isolab.study.targets.optimum import SHIFTED
from isolab.verdicts.calibration import Plant, StructuredNull
from isolab.verdicts.quadratic import final_rows, quadratic_design, quadratic_vertex
from isolab.vocab import EVAL_AVG, EVAL_JUDGE


@cache
def shipped_rows(sweep: str = "targets", second: str = SHIFTED) -> pl.DataFrame:
    """The last evaluations of the study's committed cpu sweep `sweep` (nstar's runs)."""
    return final_rows(shipped_runs("targets", sweep), (EVAL_AVG, second))


@cache
def measured(sweep: str = "targets", second: str = SHIFTED) -> dict[str, float]:
    """Per target, the quadratic's level and curvature and the residual SD, and the targets'
    residual correlation, on `sweep`'s runs (what `world` draws with)."""
    rows = shipped_rows(sweep, second)
    X, centre, _ = quadratic_design(rows)
    Y = np.column_stack([rows[EVAL_AVG].to_numpy(), rows[second].to_numpy()]).astype(float)
    B = np.linalg.lstsq(X, Y, rcond=None)[0]
    E = Y - X @ B
    S = E.T @ E / (len(Y) - X.shape[1])
    out = {"centre": centre, "corr": float(S[0, 1] / math.sqrt(S[0, 0] * S[1, 1]))}
    for m, name in enumerate(("first", "second")):
        c = min(float(B[2, m]), -1e-4)
        v = quadratic_vertex(float(B[1, m]), c, centre)[0]
        level = float(np.mean(Y[:, m]))
        out |= {
            f"{name}_c": c,
            f"{name}_sd": float(math.sqrt(S[m, m])),
            f"{name}_v": v,
            f"{name}_level": level,
        }
    return out


class TargetsWorld(NamedTuple):
    """How the second target's response differs from the first's in a planted world."""

    shift: float  #: the second's vertex relative to the first's (doublings of n)
    flatten: float  #: the second's curvature as a multiple of the first's
    #: the first's curvature (None: as measured; the second's then as measured too, times
    #: `flatten`)
    curvature: float | None


#: The calibration's worlds (see `TargetsWorld`).
WORLDS: dict[str, TargetsWorld] = {
    "same": TargetsWorld(0.0, 1.0, None),  # one optimum for both targets: the null
    "same-flatter": TargetsWorld(0.0, 0.5, None),  # one optimum, the second half as curved
    # the planted effect: the second's optimum 1.5 doublings higher
    "apart": TargetsWorld(1.5, 1.0, None),
    # what a more curved response would show: both at −0.006 per doubling² (nstar main's Hard
    # validation over n = 2 … 128 at B_p = 16 is about −0.004)
    "same-curved": TargetsWorld(0.0, 1.0, -0.006),
    "apart-curved": TargetsWorld(1.5, 1.0, -0.006),
}


def world(
    kind: str, seed: int, sweep: str = "targets", second: str = SHIFTED
) -> dict[str, pl.DataFrame]:
    """One simulated `sweep`: its runs' last evaluations redrawn under both targets (validation
    and `second`) as quadratics in log2 n with the measured levels, curvatures, residual SDs
    and correlation, the first target's vertex at its measured place (kept inside the grid) and
    the second's as `WORLDS` says, plus a level per seed shared by both targets."""
    shift, flatten, curvature = WORLDS[kind]
    rows = shipped_rows(sweep, second)
    p = measured(sweep, second)
    rng = np.random.default_rng(seed)
    x = np.log2(rows["n"].to_numpy().astype(float))
    lo, hi = float(x.min()), float(x.max())
    v1 = float(np.clip(p["first_v"], lo + 0.75, hi - 2.25))
    v2 = v1 + shift
    cov = np.array(
        [
            [p["first_sd"] ** 2, p["corr"] * p["first_sd"] * p["second_sd"]],
            [p["corr"] * p["first_sd"] * p["second_sd"], p["second_sd"] ** 2],
        ]
    )
    noise = rng.multivariate_normal(np.zeros(2), cov, size=len(x))
    seeds = rows["seed"].to_numpy()
    offset = {s: rng.normal(0, 0.5 * p["first_sd"]) for s in np.unique(seeds)}
    common = np.array([offset[s] for s in seeds])
    c1 = p["first_c"] if curvature is None else curvature
    c2 = flatten * (p["second_c"] if curvature is None else curvature)
    y1 = p["first_level"] + c1 * (x - v1) ** 2 + noise[:, 0] + common
    y2 = p["second_level"] + c2 * (x - v2) ** 2 + noise[:, 1] + common
    return {sweep: rows.with_columns(pl.Series(EVAL_AVG, y1), pl.Series(second, y2))}


PLANTS: dict[str, Plant] = {
    "targets.different_nstar": Plant(
        size=-WORLDS["apart"].shift,
        describe=f"the shifted target's optimum {WORLDS['apart'].shift} doublings of n above "
        "validation's, each a quadratic in log2 n at its measured level, curvature and noise "
        "(null: one optimum for both)",
        world=partial(world, "apart"),
        null_world=partial(world, "same"),
    ),
    "targets.judge_nstar": Plant(
        size=-WORLDS["apart"].shift,
        describe=f"the judge's optimum {WORLDS['apart'].shift} doublings of n above validation's, "
        "each a quadratic in log2 n at its measured level, curvature and noise (null: one "
        "optimum for both)",
        world=partial(world, "apart", sweep="judge", second=EVAL_JUDGE),
        null_world=partial(world, "same", sweep="judge", second=EVAL_JUDGE),
    ),
}

STRUCTURED_NULLS: dict[str, StructuredNull] = {
    "same-optimum-flatter": StructuredNull(
        "one optimum for both targets, the shifted one half as curved (a target that cares "
        "less about n, not one that prefers another n)",
        ("targets.different_nstar",),
        world=partial(world, "same-flatter"),
    ),
    "same-optimum-curved": StructuredNull(
        "one optimum for both targets, both curved at −0.006 per doubling² (where the design "
        "can locate them; planted 1.5 doublings apart there, `world('apart-curved')`, the "
        "test finds it 181 times in 200)",
        ("targets.different_nstar",),
        world=partial(world, "same-curved"),
    ),
    "judge-same-optimum-curved": StructuredNull(
        "one optimum for validation and the judge, both curved at −0.006 per doubling²",
        ("targets.judge_nstar",),
        world=partial(world, "same-curved", sweep="judge", second=EVAL_JUDGE),
    ),
}
