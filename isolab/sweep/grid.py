"""A sweep's plan as data: its grid points (each a run's config and its estimated cost), the
points its budget or caps rule out, and the totals. `isolab.sweep.plan.plan_sweep` makes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from isolab.config import RunConfig
from isolab.sweep.lengths import Lengths
from isolab.sweep.spec import SweepSpec
from isolab.sweep.wall import TimingSource


@dataclass(frozen=True)
class GridPoint:
    """One run of the sweep: its config (M and checkpoints filled in) and its planned cost.

    Attributes:
        config: the run's `RunConfig` (`run_key` identifies it in MLflow).
        values: the axis values of this point and its seed, for display.
        planned_flops: planned model FLOPs of the run (`flops/total`), NaN if unknown; at the
            measured completion length where there is one (`lengths`).
        rho: planned update fraction ρ = C_learning / C_total.
        est_wall_s: estimated wall time (`estimate_wall_s`); with an `unknown` timing, the tiny
            defaults' figure, kept only to weigh the point in a progress bar.
        timing_source: where the estimate's `Timing` comes from (`timing_of`).
        lengths: the completion length the estimates assume and where it comes from.
    """

    config: RunConfig
    values: dict[str, Any]
    planned_flops: float
    rho: float
    est_wall_s: float
    timing_source: TimingSource = "given"
    lengths: Lengths | None = None

    @property
    def run_key(self) -> str:
        return self.config.run_key

    @property
    def wall_known(self) -> bool:
        """Whether `est_wall_s` estimates this model's speed (not the tiny defaults')."""
        return self.timing_source != "unknown"


@dataclass(frozen=True)
class DroppedPoint:
    """A grid point the budget or the cap rules out, and why."""

    values: dict[str, Any]
    reason: str


@dataclass(frozen=True)
class SweepPlan:
    """The grid of a sweep: the runs to do, the points dropped, the checkpoints."""

    spec: SweepSpec
    points: list[GridPoint]
    dropped: list[DroppedPoint]
    eval_fractions: tuple[float, ...]

    @property
    def total_rollouts(self) -> int:
        return sum(p.config.rollouts for p in self.points)

    @property
    def total_flops(self) -> float:
        return sum(p.planned_flops for p in self.points)

    @property
    def est_wall_s(self) -> float:
        return sum(p.est_wall_s for p in self.points)

    @property
    def length_sources(self) -> list[str]:
        """Where each model's planned completion lengths come from, one sentence per model."""
        said = {(p.config.model, p.lengths.source) for p in self.points if p.lengths}
        return [f"{model}: {source}" for model, source in sorted(said)]

    @property
    def unknown_wall_models(self) -> list[str]:
        """The models whose wall time the plan cannot estimate (no timing, no probe here)."""
        return sorted({p.config.model for p in self.points if not p.wall_known})
