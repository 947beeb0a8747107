"""n-vs-bp's calibration worlds: the larger n's advantage within a fixed-B pair shaped over
compute (`fixed_b_advantage`: rising and falling for the non-monotone claim, and the nulls with
no sign change or one), an interaction for "more n with steps", and B_p's effect at the
equivalence margin.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

from isolab.study.n_vs_bp.fixed_batch import BP_MARGIN
from isolab.verdicts import effects as fx
from isolab.verdicts.calibration import Plant, StructuredNull
from isolab.vocab import ROLLOUTS, STEP


def fixed_b_advantage(split: str, shape: Callable[[np.ndarray], np.ndarray]) -> fx.Effect:
    """avg@4 + shape(log2 C)·(log2 n − its mean) on `split` after step 0: within a fixed-B pair
    the larger n's advantage is shape(log2 C) avg@4 per doubling of n at every C (what
    `isolab.study.n_vs_bp.sign_changes.sign_changes` reads); best@4 and worst@4 through the mapping."""

    def add(_: str, means: pl.DataFrame) -> dict[str, np.ndarray]:
        on = fx._mask(means, split) & (means[STEP] > 0).to_numpy()
        lc = fx.log2_of(means, ROLLOUTS)
        return fx.through_mapping(means, np.where(on, shape(lc) * fx.centred_log2(means, "n"), 0.0))

    return add


def rise_and_fall(peak: float) -> Callable[[np.ndarray], np.ndarray]:
    """An advantage `peak` at C = 2^12, zero at 2^9.5 and 2^14.5, −1.56·`peak` at 2^8 and 2^16:
    the larger n best in the middle of the range only (two sign changes)."""
    return lambda lc: peak * (1.0 - ((lc - 12.0) / 2.5) ** 2)


PLANTS: dict[str, Plant] = {
    "nvsbp.more_n_with_steps": Plant(
        size=0.005,
        describe="log2 n × log2 C interaction of 0.005 on Easy",
        add=fx.interaction("easy", 0.005),
    ),
    "nvsbp.nonmonotone_hard": Plant(
        size=0.006,
        describe="on Hard the larger n's advantage at fixed B rises and falls across C: +0.006 "
        "avg@4 per doubling of n at C = 2^12, zero at 2^9.5 and 2^14.5, −0.009 at 2^8 and 2^16 "
        "(two sign changes: the best n small, large, small)",
        add=fixed_b_advantage("hard", rise_and_fall(0.006)),
    ),
    "nvsbp.bp_matters_little": Plant(
        size=0.0,
        describe=f"no effect of B_p (null: {BP_MARGIN} avg@4 per doubling of B_p, the margin)",
        add=fx.nothing,
        null_add=fx.bp_effect(BP_MARGIN),
    ),
}

STRUCTURED_NULLS: dict[str, StructuredNull] = {
    "advantage-concave-decline": StructuredNull(
        "on Hard the larger n's advantage at fixed B is 0 up to C = 2^12, then falls as "
        "−0.0003·(log2 C − 12)² (−0.005 at the budget, as the committed runs read): concave, "
        "never positive: the best n is the same (ties, then the smaller n) at every M",
        ("nvsbp.nonmonotone_hard",),
        fixed_b_advantage("hard", lambda lc: -0.0003 * np.maximum(lc - 12.0, 0.0) ** 2),
    ),
    "advantage-one-switch": StructuredNull(
        "on Hard the larger n's advantage falls linearly from +0.01 at C = 2^8 to −0.01 at "
        "2^16: one sign change, the best n switches once (monotone in M)",
        ("nvsbp.nonmonotone_hard",),
        fixed_b_advantage("hard", lambda lc: -0.0025 * (lc - 12.0)),
    ),
}
