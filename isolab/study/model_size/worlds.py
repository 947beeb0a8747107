"""model-size's calibration world: slopes in log2 n that differ between model sizes."""

from __future__ import annotations

from isolab.verdicts import effects as fx
from isolab.verdicts.calibration import Plant, StructuredNull

PLANTS: dict[str, Plant] = {
    "size.best_n_depends": Plant(
        size=0.03,
        describe="slopes in log2 n that differ by 0.03 from the smallest to the largest model",
        add=fx.size_slopes(0.03),
    ),
}
STRUCTURED_NULLS: dict[str, StructuredNull] = {}
