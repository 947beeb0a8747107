"""The progress display of `isolab sweep run`: a line per ended run, each running run's steps,
and the sweep's share done with an ETA (`isolab.sweep.progress.SweepProgress`, which weighs each
run by its estimated wall time). Fed by `run_sweep`'s hooks."""

from __future__ import annotations

import datetime
import math
from typing import TYPE_CHECKING

from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from isolab.cli.common import LineProgress, console, safe
from isolab.vocab import FINISHED, SKIPPED

if TYPE_CHECKING:  # the sweep package imports torch and MLflow: commands import it when run
    from isolab.sweep import GridPoint, RunOutcome, SweepPlan
    from isolab.sweep.progress import SweepProgress
    from isolab.sweep.resume import StoreState


def duration(seconds: float) -> str:
    """A wall time as a person reads it: seconds, minutes or hours."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class SweepBars:
    """`run_sweep`'s hooks shown as progress (`begin` is its `on_pending`, then `started`,
    `stepped`, `ended`); a `with` block closes the display, however the sweep ends.

    On a terminal: the sweep's bar with a bar per running run under it. Piped (a log file, CI):
    a line per quarter of each run's steps and one per ended run, each with the sweep's share
    and ETA. (The ray backend reports no steps: its runs show when they end.)
    """

    def __init__(self, plan: SweepPlan, workers: int) -> None:
        self.plan, self.workers = plan, workers
        self.live = console.is_terminal
        self.bars: Progress | LineProgress = _sweep_bars() if self.live else LineProgress(0.25)
        self.running: dict[str, TaskID] = {}  # run key → its bar
        self.tracker: SweepProgress | None = None
        self.todo: list[GridPoint] = []
        self._sweep_bar: TaskID | None = None

    def __enter__(self) -> SweepBars:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.tracker is not None:  # the display started (`begin`)
            self.bars.__exit__(None, None, None)

    def begin(self, todo: list[GridPoint], state: StoreState | None = None) -> None:
        """The points to run are known (`state`: what the store holds, unused here): start the
        display."""
        from isolab.sweep.progress import SweepProgress

        self.todo, self.tracker = todo, SweepProgress(todo, self.workers)
        self.bars.__enter__()
        if isinstance(self.bars, Progress):
            name = safe(self.plan.spec.name)
            self._sweep_bar = self.bars.add_task(name, total=1.0, what="", eta="")
        self._refresh()

    def _progress(self) -> SweepProgress:
        if self.tracker is None:
            raise RuntimeError("SweepBars.begin is run_sweep's on_pending: pass it as such")
        return self.tracker

    def _runs_ended(self) -> str:
        return f"{self._progress().ended}/{len(self.todo)} runs"

    def _eta(self) -> str:
        tracker = self._progress()
        left = tracker.eta_s()
        return (
            f"ETA {_clock(left)}"
            if left is not None
            else f"≈ {duration(tracker.planned_s)} planned"
        )

    def _status(self) -> str:
        return f"{self._runs_ended()} · {self._progress().fraction:.0%} · {self._eta()}"

    def _refresh(self) -> None:
        if self._sweep_bar is not None:
            done = self._progress().fraction
            self.bars.update(
                self._sweep_bar, completed=done, what=self._runs_ended(), eta=self._eta()
            )

    def started(self, point: GridPoint) -> None:
        from isolab.sweep.point import optimizer_steps

        self._progress().start(point)
        label = f"  {safe(point.config.run_name)} seed {point.config.seed}"
        steps = optimizer_steps(point.config)
        self.running[point.run_key] = self.bars.add_task(
            label, total=steps, what=f"step 0/{steps}", eta="", info=""
        )
        self._refresh()

    def stepped(self, point: GridPoint, step: int) -> None:
        from isolab.sweep.point import optimizer_steps

        self._progress().step(point, step)
        task = self.running.get(point.run_key)
        if task is not None:
            steps = optimizer_steps(point.config)
            self.bars.update(task, completed=step, what=f"step {step}/{steps}", info=self._status())
        self._refresh()

    def ended(self, outcome: RunOutcome, point: GridPoint) -> None:
        self._progress().end(point)
        task = self.running.pop(point.run_key, None)
        if task is not None:
            self.bars.remove_task(task)
        line = _outcome_line(outcome, point, self.plan.spec.metric)
        self.bars.console.print(line if self.live else f"{line} · {self._status()}")
        self._refresh()


def _sweep_bars() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[what]}"),
        TimeElapsedColumn(),
        TextColumn("{task.fields[eta]}"),
        console=console,
    )


def _outcome_line(outcome: RunOutcome, point: GridPoint, metric: str) -> str:
    ok = outcome.status == FINISHED
    mark = "[green]✓[/]" if ok else f"[red]✗ {outcome.status}[/]"
    if outcome.status == SKIPPED:
        mark = f"[dim]· {safe(outcome.error)}[/]"
    value = "—" if math.isnan(outcome.metric) else f"{outcome.metric:.3f}"
    line = (
        f"{mark} {outcome.run_key}  {safe(outcome.run_name)} seed {point.config.seed}  "
        f"{metric} {value}  {outcome.wall_time_s:.1f} s"
    )
    if not ok and outcome.error:
        line += f"  [red]{safe(outcome.error)}[/]"
    return line


def _clock(seconds: float) -> str:
    """h:mm:ss, as rich's own time columns print it."""
    return str(datetime.timedelta(seconds=round(seconds)))
