"""What `isolab.frontier.validate` scores: a `Prediction` (an allocation predicted for compute C
from the runs seen up to C / factor) and the trivial rules scored beside it (`Baseline`): the
best seed mean at the compute the predictor saw (`best_seed_mean`: the optimum held fixed) and
an arm drawn at random (`random_arm`: its expected regret)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from isolab.frontier.evidence import ALLOCATION, WITHIN_SE, compute, runs_at_budget
from isolab.table import as_float


@dataclass(frozen=True)
class Prediction:
    """An allocation predicted for compute C from runs seen up to C / factor.

    Attributes:
        allocation: the configuration, column → value (e.g. ``{"n": 4, "B_p": 16}``); it must
            name one configuration of the grid.
        expected: the law's reward for it at C (NaN when the predictor has no law in C).
        source: where it comes from, for a person (``n*(C) fit``, ``runs``, ``ρ fit`` …).
    """

    allocation: Mapping[str, Any]
    expected: float = float("nan")
    source: str = ""


@dataclass(frozen=True)
class Baseline:
    """A trivial rule scored beside a prediction at C (`validate`).

    Attributes:
        name: the rule, for a person (``best seed mean at ≤ C/2``, ``a random arm``).
        allocation: its pick, over the columns that vary in the grid ({} for the random arm,
            which is every arm with equal weight).
        regret: ``R̄(best at C) − R̄(its pick at C)``; for the random arm, the mean over arms.
        se: the standard error of that difference, ``√(se_best² + se_pick²)``; for the random
            arm, its root mean square over arms.
    """

    name: str
    allocation: Mapping[str, Any]
    regret: float
    se: float

    @property
    def within(self) -> bool:
        """Whether the rule's regret is within `WITHIN_SE` standard errors of the difference."""
        return self.regret <= WITHIN_SE * self.se


def best_seed_mean(
    seen: pl.DataFrame, x: str, y: str, config: Sequence[str] = ALLOCATION
) -> Prediction:
    """The baseline that holds the optimum fixed: the configuration with the best seed mean
    at the largest compute the runs `seen` reach (each run read as `runs_at_budget` reads it)."""
    seen_max = as_float(seen[x].max())
    top = runs_at_budget(seen, seen_max, x, y, config).row(0, named=True)
    cfg = [c for c in config if c in seen.columns]
    return Prediction({c: top[c] for c in cfg}, source=f"best seed mean at {compute(seen_max)}")


def random_arm(evidence: pl.DataFrame, y: str) -> Baseline:
    """The expected regret of an arm drawn at random from `evidence` (with `se`, best first):
    the mean over arms of the best's seed mean minus theirs (the best's own 0 included)."""
    R = evidence[f"{y}_at_budget"].to_numpy().astype(float)
    se = evidence["se"].to_numpy().astype(float)
    return Baseline(
        "a random arm",
        {},
        float(np.mean(R[0] - R)),
        float(np.sqrt(np.mean(se[0] ** 2 + se**2))),
    )
