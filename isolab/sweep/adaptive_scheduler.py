"""The scheduler of a live adaptive sweep (`LiveScheduler`): `AdaptiveScheduler`'s rungs and
stops, written to MLflow as they happen (`isolab.sweep.adaptive_records._Marks`), with the stops
an earlier session recorded kept on a resume (`preload`), and a resumed run held at its
checkpoint's rung until that rung is judged (`_on_replay`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence

import polars as pl

from isolab.sweep.adaptive_records import _Marks
from isolab.sweep.adaptive_trial import DONE_KEY, REPLAY_KEY
from isolab.sweep.adaptive_tune import AdaptiveScheduler, Stop
from isolab.table import RUN_KEY


class LiveScheduler(AdaptiveScheduler):
    """`AdaptiveScheduler` that writes its pauses and stops to MLflow (`_Marks`) and reports
    each judged rung (`on_rung`)."""

    def __init__(self, *args, marks: _Marks, on_rung: Callable | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.marks, self.on_rung = marks, on_rung
        #: The stops the store records (`preload`): they stand, whatever a rung judged again
        #: on the evaluations read back decides.
        self.recorded: dict[str, Stop] = {}
        self._finished: set[str] = set()  # runs FINISHED in the store: never stopped

    def __getstate__(self) -> dict:
        # Tune pickles its config for a restore; the store client and the caller's hook hold
        # locks, and a resumed sweep rebuilds its scheduler from the store (`preload`)
        return {k: v for k, v in self.__dict__.items() if k not in ("marks", "on_rung")}

    def preload(
        self,
        rows: pl.DataFrame,
        ended: set[str],
        stopped: dict[str, Stop] | None = None,
        finished: Collection[str] = (),
    ) -> None:
        """Evaluations of runs done before this session (FINISHED: `finished`; stopped: the
        rest of `ended`; or to be resumed from a checkpoint: their rows up to it): the rungs are
        judged on them as if the runs had reported them now. `stopped` (run key → its stop, from
        its run's tags) are the decisions an earlier session made: they stand."""
        for row in rows.iter_rows(named=True):
            key = row[RUN_KEY]
            self._last[key] = max(self._last[key], float(row[self.x]))
            if float(row[self.x]) in self.rungs:
                self._rows.append({**self._points[key], self.x: row[self.x], self.y: row[self.y]})
        self._ended |= ended
        self._finished |= set(finished)
        for key, stop in (stopped or {}).items():
            self.recorded[self._arm[key]] = stop

    def _keep_records(self, C: float) -> None:
        """After rung C is judged again on a resume: the arms the store records as stopped at C
        are stopped, and an arm whose run the store holds FINISHED is not (an earlier session
        judged this rung otherwise; what it did stands)."""
        for arm, stop in self.recorded.items():
            if stop.C <= C:
                self.stops[arm] = stop
        for key in self._finished:
            arm = self._arm[key]
            if arm not in self.recorded:
                self.stops.pop(arm, None)

    def open_runs(self, keys: Sequence[str]) -> list[str]:
        """Of `keys`, the runs neither ended nor stopped."""
        return [k for k in keys if k not in self._ended and self.stop_of(k) is None]

    def spent(self, key: str) -> float:
        """The compute run `key` reported last (where it stopped or ended)."""
        return self._last[key]

    def rows_at(self, C: float) -> list[dict]:
        """The evaluations reported (or preloaded) at rung C."""
        return [r for r in self._rows if r[self.x] == C]

    def last_value(self, key: str) -> float:
        """Run `key`'s metric at the last rung it reported (NaN: none)."""
        rows = [r for r in self._rows if r[RUN_KEY] == key]
        return max(rows, key=lambda r: r[self.x])[self.y] if rows else math.nan

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        if result.get(REPLAY_KEY):  # its evaluation is known (preloaded or reported): decide
            return self._on_replay(tune_controller, trial)
        decision = super().on_trial_result(tune_controller, trial, result)
        if result.get(DONE_KEY):  # the run's last evaluation: it has ended, never pause it
            return self.CONTINUE if decision == self.PAUSE else decision
        if decision == self.PAUSE:
            self.marks.paused(self._key(trial))
        return decision

    def _on_replay(self, tune_controller, trial) -> str:
        """A resumed run's first report, the rung its checkpoint is at: it stops with its arm,
        waits while the rung is not judged, or goes on. Tune starts every PENDING trial,
        whatever `choose_trial_to_run` says, so a resumed run held back there still started and
        trained past its unjudged rung (issue 52): this report is where it is held."""
        key = self._key(trial)
        self._judge_ready(tune_controller, current=trial)
        if self.stop_of(key) is not None:
            return self.STOP
        if self._waiting(key):
            self.marks.paused(key)
            return self.PAUSE
        return self.CONTINUE

    def _judge(self, i: int) -> None:
        if i == len(self.rungs) - 1:  # the budget: every live run has ended, nothing to stop
            return
        before = set(self.stops)
        super()._judge(i)
        self._keep_records(self.rungs[i])
        for arm in set(self.stops) - before:
            self.marks.stopped(arm, self.stops[arm])
        if self.on_rung is not None and self.decisions:
            self.on_rung(self.rungs[i], self.decisions[-1], set(self.stops) - before)
