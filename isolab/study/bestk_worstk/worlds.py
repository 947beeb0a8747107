"""bestk-worstk's calibration worlds: n moves avg@4 and, beyond the compute mapping, worst@4 or
best@4 (`sharpening`), and the structured null where best@4 and worst@4 only follow avg@4
through the mapping.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from isolab.verdicts import effects as fx
from isolab.verdicts.calibration import Plant, StructuredNull
from isolab.vocab import EVAL_BEST, EVAL_WORST, STEP


def sharpening(split: str, metric: str, per_doubling: float, vertex: float = 4.0) -> fx.Effect:
    """n moves avg@4 on `split` (concave in log2 n, vertex n = 2^`vertex`: at 16 the smaller n
    of the grid lie below the optimum; `fx.mechanism`), best@4 and worst@4 through the mapping,
    and `metric` by `per_doubling` per doubling of n (centred) × the share of training done
    beyond it: at equal avg@4 a larger n moves `metric` by that much."""
    base = fx.mechanism(split, None, 0.0, vertex)

    def add(name: str, means: pl.DataFrame) -> dict[str, np.ndarray]:
        out = base(name, means)
        on = fx._mask(means, split) & (means[STEP] > 0).to_numpy()
        out[metric] = out[metric] + per_doubling * fx.centred_log2(means, "n") * fx.frac(means) * on
        return out

    return add


PLANTS: dict[str, Plant] = {
    "bestk.worst_easy": Plant(
        size=0.005,
        describe="on Easy n moves avg@4 (concave, vertex n = 16: the smaller n below the "
        "optimum) and worst@4 0.005 per doubling of n beyond the mapping (the committed runs "
        "read +0.0043 at equal avg@4)",
        add=sharpening("easy", EVAL_WORST, 0.005),
    ),
    "bestk.best_hard": Plant(
        size=0.003,
        describe="on Hard n moves avg@4 (concave, vertex n = 16) and best@4 0.003 per doubling "
        "of n beyond the mapping (the committed runs read +0.0011 at equal avg@4)",
        add=sharpening("hard", EVAL_BEST, 0.003),
    ),
}

STRUCTURED_NULLS: dict[str, StructuredNull] = {
    "one-mapping": StructuredNull(
        "n moves avg@4 alone (concave, vertex n = 16); best@4 and worst@4 follow it through "
        "the split's compute mapping",
        ("bestk.worst_easy", "bestk.best_hard"),
        fx.mechanism(None, None, 0.0),
    ),
}
