"""The MLflow records of a live adaptive sweep (`isolab.sweep.adaptive_live`): the scheduler's
decisions written to its runs (`_Marks`: paused SCHEDULED, stopped KILLED with the rung and the
reason as tags, cut short KILLED), and read back on a resume (`_store_state`: the evaluations to
preload, the runs done, the stops that stand, the runs left to train).
"""

from __future__ import annotations

import contextlib
import math
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from isolab.rl.trainer import STATE_FILE
from isolab.sweep.adaptive_tune import Stop
from isolab.sweep.plan import GridPoint
from isolab.table import RUN_KEY
from isolab.tracking.tags import SCHEDULED, STOPPED_AT_TAG
from isolab.tracking.tags import STOP_REASON_TAG as REASON_TAG
from isolab.vocab import DEFAULT_X, FINISHED, KILLED, ROLLOUTS, RUN_ID, STEP


class _Marks:
    """The scheduler's decisions, written to the runs' MLflow records (driver side)."""

    def __init__(self, experiment: str, uri: str, checkpoints: Path, arm_runs: dict[str, list]):
        from isolab.tracking import client

        self.experiment, self.uri, self.checkpoints = experiment, uri, checkpoints
        self.client = client(uri)
        self.arm_runs = arm_runs
        self._ids: dict[str, str] = {}  # run key → its MLflow run, once it has one

    def run_id(self, run_key: str) -> str | None:
        from isolab.tracking import find_runs

        if run_key not in self._ids:
            runs = find_runs(self.experiment, self.uri, run_key=run_key)
            if not runs:
                return None
            self._ids[run_key] = runs[0].info.run_id
        return self._ids[run_key]

    def paused(self, run_key: str) -> None:
        run_id = self.run_id(run_key)
        if run_id is not None:
            with contextlib.suppress(Exception):  # a status for the UI: never fatal
                self.client.update_run(run_id, status=SCHEDULED)

    def interrupted(self, run_keys: list[str]) -> None:
        """Runs cut short by Ctrl-C end KILLED (their checkpoint copies stay: a rerun carries
        on from them, in the same MLflow run)."""
        for run_key in run_keys:
            run_id = self.run_id(run_key)
            if run_id is None:
                continue
            if self.client.get_run(run_id).info.status in ("RUNNING", SCHEDULED):
                self.client.set_terminated(run_id, status=KILLED)

    def stopped(self, arm: str, stop: Stop) -> None:
        """The arm's runs end KILLED, tagged with the rung and the reason. The tags come first,
        in one write, and the checkpoint goes last: whatever order an interruption cuts this
        in, the store says the run stopped, or the run can be judged again from its checkpoint;
        never a run with neither, which a resume would train from scratch."""
        from mlflow.entities import RunTag

        from isolab.tracking.interrupts import interrupts_deferred

        for run_key in self.arm_runs[arm]:
            run_id = self.run_id(run_key)
            run = self.client.get_run(run_id) if run_id is not None else None
            status = run.info.status if run is not None else FINISHED
            # written once: a resume that finds the stop recorded leaves the run as it is
            recorded = status == KILLED and run is not None and STOPPED_AT_TAG in run.data.tags
            if run_id is not None and status != FINISHED and not recorded:
                tags = [RunTag(STOPPED_AT_TAG, f"{stop.C:.0f}"), RunTag(REASON_TAG, stop.reason)]
                with interrupts_deferred():
                    self.client.log_batch(run_id, tags=tags)
                    self.client.set_terminated(run_id, status=KILLED)
            shutil.rmtree(self.checkpoints / run_key, ignore_errors=True)


@dataclass
class _Stored:
    """What the store holds of a setting's runs (`_store_state`)."""

    rows: pl.DataFrame  # evaluations to preload
    ended: set[str]  # runs FINISHED or stopped
    finished: set[str]  # of those, the runs FINISHED and not stopped
    stops: dict[str, Stop]  # stopped runs → their stop, as their tags record it
    todo: list[GridPoint]  # runs still to train (some from a checkpoint)


def _recorded_stop(run) -> Stop | None:
    """The stop a run's tags record (an earlier session's decision), or None."""
    tags = run.data.tags
    if STOPPED_AT_TAG not in tags:
        return None
    return Stop(float(tags[STOPPED_AT_TAG]), tags.get(REASON_TAG, ""))


def _stopped_key(run_key: str, experiment: str, uri: str) -> bool:
    """Whether a run of `run_key` is tagged stopped in the store (a run of a stopped arm is never
    trained again, even where a decision and a resume crossed)."""
    from isolab.tracking import find_runs

    return any(STOPPED_AT_TAG in r.data.tags for r in find_runs(experiment, uri, run_key=run_key))


def _store_state(
    points: Sequence[GridPoint], experiment: str, uri: str, metric: str, checkpoints: Path
) -> _Stored:
    """What the store holds of `points` (`_Stored`). A stopped run is done whatever its status
    (an interruption between its tags and its end leaves it SCHEDULED: it is ended KILLED here),
    and its evaluations past its rung are not read back."""
    from isolab.rl.trainer import read_state
    from isolab.tracking import client, find_runs, mlflow_key

    c = client(uri)
    rows: list[dict] = []
    ended: set[str] = set()
    finished: set[str] = set()
    stops: dict[str, Stop] = {}
    todo: list[GridPoint] = []
    for p in points:
        runs = find_runs(experiment, uri, run_key=p.run_key)
        if not runs:  # a checkpoint of another store's run (a store since removed) is no use
            shutil.rmtree(checkpoints / p.run_key, ignore_errors=True)
            todo.append(p)
            continue
        run = runs[0]
        status = run.info.status
        stop = _recorded_stop(run)
        upto = math.inf
        if stop is not None:
            ended.add(p.run_key)
            stops[p.run_key] = stop
            shutil.rmtree(checkpoints / p.run_key, ignore_errors=True)
            if status in ("RUNNING", SCHEDULED):
                c.set_terminated(run.info.run_id, status=KILLED)
            upto = stop.C  # compared with the rollouts below, not a step
        elif status == FINISHED:
            ended.add(p.run_key)
            finished.add(p.run_key)
        else:
            todo.append(p)
            keep = checkpoints / p.run_key
            saved = read_state(keep) if (keep / STATE_FILE).exists() else None
            if saved is None or saved[RUN_ID] != run.info.run_id:
                shutil.rmtree(keep, ignore_errors=True)  # starts over: a new MLflow run
                if status in ("RUNNING", SCHEDULED):
                    c.set_terminated(run.info.run_id, status=KILLED)
                continue
            upto = saved[STEP]
        ys = {m.step: m.value for m in c.get_metric_history(run.info.run_id, mlflow_key(metric))}
        xs = {m.step: m.value for m in c.get_metric_history(run.info.run_id, ROLLOUTS)}
        for step, y in sorted(ys.items()):
            if step > 0 and step in xs and (xs[step] if stop else step) <= upto:
                rows.append({RUN_KEY: p.run_key, DEFAULT_X: xs[step], metric: y})
    schema = {RUN_KEY: pl.String, DEFAULT_X: pl.Float64, metric: pl.Float64}
    return _Stored(pl.DataFrame(rows, schema=schema), ended, finished, stops, todo)
