"""How far a running sweep is, and how long it has left (`SweepProgress`), from the hooks of
`isolab.sweep.runner.run_sweep`; `isolab sweep run` shows it (`isolab.cli.sweep_progress`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from isolab.sweep.plan import GridPoint
from isolab.sweep.point import optimizer_steps


@dataclass
class SweepProgress:
    """How far a running sweep is, and how long it has left, from the steps its runs report.

    Each point weighs its estimated wall time (`GridPoint.est_wall_s`): a running point counts
    the share of its optimizer steps done, an ended one (whatever its status) all of it. The
    ETA extrapolates the pace since the first point started, so it exists from the first step
    of the first run (not only once runs finish); it starts high, as that pace includes the
    first run's model load and base evaluation, and settles as steps come in. Before the first
    step, `planned_s` (the plan's estimate over the workers) stands in.

    Attributes:
        todo: the points this sweep runs.
        workers: how many run at once.
    """

    todo: list[GridPoint]
    workers: int = 1
    _done: dict[str, float] = field(default_factory=dict)  # run key → share of its steps done
    _ended: set[str] = field(default_factory=set)
    _t0: float | None = None

    @property
    def total_s(self) -> float:
        return sum(p.est_wall_s for p in self.todo) or 1.0

    @property
    def planned_s(self) -> float:
        """The plan's wall-time estimate of the whole sweep on `workers`."""
        return sum(p.est_wall_s for p in self.todo) / max(1, self.workers)

    def start(self, point: GridPoint, now: float | None = None) -> None:
        if self._t0 is None:
            self._t0 = time.monotonic() if now is None else now
        self._done.setdefault(point.run_key, 0.0)

    def step(self, point: GridPoint, step: int, now: float | None = None) -> None:
        """`point` reached optimizer step `step` (of `optimizer_steps(point.config)`)."""
        self.start(point, now)
        share = min(1.0, step / max(1, optimizer_steps(point.config)))
        self._done[point.run_key] = max(self._done[point.run_key], share)

    def end(self, point: GridPoint, now: float | None = None) -> None:
        """`point` ended (finished, failed, killed or skipped): all its weight is done."""
        self.start(point, now)
        self._done[point.run_key] = 1.0
        self._ended.add(point.run_key)

    @property
    def ended(self) -> int:
        """How many points have ended."""
        return len(self._ended)

    @property
    def fraction(self) -> float:
        """Share of the sweep's estimated wall time done, in [0, 1]."""
        weight = {p.run_key: p.est_wall_s for p in self.todo}
        done = sum(weight.get(key, 0.0) * share for key, share in self._done.items())
        return min(1.0, done / self.total_s)

    def eta_s(self, now: float | None = None) -> float | None:
        """Seconds left at the pace measured so far; None before the first step."""
        fraction = self.fraction
        if self._t0 is None or fraction <= 0:
            return None
        elapsed = (time.monotonic() if now is None else now) - self._t0
        return max(0.0, elapsed * (1 - fraction) / fraction)
