"""A live adaptive sweep (issue 32): the sweep's runs trained as Ray Tune trials, scheduled by
`AdaptiveScheduler`, so that the arms worse than the best by more than their noise stop at a
rung and the rest carry on.

Each run is one trial (`live_trainable`). It trains with `Checkpointing`: after each evaluation
but the last it saves its state, keeps a copy under ``<storage>/checkpoints/<run_key>`` and
reports ``{compute/rollouts, metric}`` with that checkpoint to Tune. The scheduler pauses it
there until every live run has reached the rung (its worker trains another run meanwhile), then
judges the rung (`isolab.sweep.adaptive.judge_rung`): the runs of the arms it stops end, the
others resume from their checkpoint, in the same MLflow run. Each setting of the sweep (the
values of its axes other than n, B_p and M, e.g. the split) is judged on its own, one after
another.

In MLflow every run is a child of the sweep's parent run, as in `run_sweep`. A paused run is
SCHEDULED; a stopped run is KILLED with the tags `isolab.adaptive.stopped_at` (the rung, in
rollouts) and `isolab.adaptive.reason` (`judge_rung`'s reason); a run that reached its budget is
FINISHED. The parent gets `isolab.adaptive.rule` and `isolab.adaptive.compute_fraction`; it is
RUNNING while the sweep runs (`parents.hold_parent`), KILLED when Ctrl-C or a failure cuts it
short (or when a later command finds its runner killed), FINISHED when every run is done.

Resuming: the sweep holds the lease on all its runs (`isolab.tracking.leases`) while it runs,
so a second runner on the same spec and store, adaptive or not, leaves them alone. Run again
after a crash or Ctrl-C, it reads the store: FINISHED and stopped runs are done, and their
evaluations are given to the scheduler (`preload`), which judges their rungs again; the stops
the store records stand whatever that judgement says, and a run tagged stopped is never
resumed or trained again. A run with a checkpoint copy carries on from it in its MLflow run
(evaluations it logged after that checkpoint are logged again, at the same steps), once the
rung of its checkpoint is judged; any other run starts over.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from isolab.config import RunConfig
from isolab.frontier.validate import ALLOCATION, WITHIN_SE
from isolab.rl.trainer import STATE_FILE, check_checkpointable
from isolab.sweep.adaptive import RungDecision, StoppingRule, arm_label, judge_rung
from isolab.sweep.adaptive_tune import EVAL_SIZE, AdaptiveScheduler, Stop
from isolab.sweep.plan import GridPoint, SweepPlan
from isolab.sweep.resume import adaptive_storage
from isolab.table import RUN_KEY
from isolab.tracking.tags import SCHEDULED, STOPPED_AT_TAG
from isolab.tracking.tags import STOP_REASON_TAG as REASON_TAG
from isolab.vocab import DEFAULT_X, FINISHED, KILLED, ROLLOUTS

log = logging.getLogger(__name__)

RULE_TAG = "isolab.adaptive.rule"
FRACTION_TAG = "isolab.adaptive.compute_fraction"
#: In a trial's last report: its run has ended (FINISHED), so the scheduler never pauses it.
DONE_KEY = "isolab/run_ended"
#: A resumed run's first report: the evaluation its checkpoint holds, reported again before it
#: trains (`live_trainable`), so the rung decides whether it waits, stops or goes on.
REPLAY_KEY = "isolab/replayed"
#: The report a checkpoint was taken at, kept beside it (`live_trainable`).
REPORT_FILE = "isolab_report.json"
THREAD_TIMEOUT_ENV = "TUNE_FUNCTION_THREAD_TIMEOUT_S"


@dataclass(frozen=True)
class SettingResult:
    """One setting's adaptive sweep: `arms` (``arm``, ``seeds``, ``spent`` rollouts over its
    seeds, ``stopped_at``, ``reason``, ``last`` its seed-mean metric at the last rung it
    reached), the rungs judged, and the compute spent against the full grid's."""

    setting: dict[str, Any]
    arms: pl.DataFrame
    decisions: list[RungDecision]
    spent: float
    grid: float
    #: The arms that reached the budget, judged there (``mean``, ``se``, ``gap``, best first).
    final: RungDecision | None = None

    def best_text(self, y: str) -> str:
        """The best arm at the budget with its interval (± 2 SE) and the arms within noise."""
        if self.final is None:
            return "no arm reached the budget"
        a = self.final.arms
        best = a.row(0, named=True)
        near = a.slice(1).filter(pl.col("gap") <= pl.col("threshold"))
        label = arm_label(best, ALLOCATION)
        text = (
            f"best arm {label}: {y} {best['mean']:.3f} ± {WITHIN_SE * best['se']:.3f} "
            f"({WITHIN_SE:g} SE, {best['seeds']} seed(s), noise: {self.final.noise.source})"
        )
        if near.height:
            labels = [arm_label(r, ALLOCATION) for r in near.iter_rows(named=True)]
            text += "; within noise of it: " + ", ".join(labels)
        return text

    @property
    def fraction(self) -> float:
        return self.spent / self.grid if self.grid else math.nan


@dataclass(frozen=True)
class LiveReport:
    settings: list[SettingResult]
    wall_s: float

    @property
    def spent(self) -> float:
        return sum(s.spent for s in self.settings)

    @property
    def grid(self) -> float:
        return sum(s.grid for s in self.settings)


def quiet_tune() -> None:
    """The sweep prints its rungs' decisions (`on_rung`); Tune's own tables and its warnings
    about checkpoint syncs (one per rung here, by design) are left out."""
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # verbose=0 then prints nothing
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    logging.getLogger("ray.tune").setLevel(logging.WARNING)


def check_adaptive(plan: SweepPlan) -> None:
    """Refuse a sweep the live adaptive runner cannot run, naming the field and the fix."""
    for p in plan.points:
        cfg = p.config
        try:
            check_checkpointable(cfg)
        except ValueError as exc:
            raise ValueError(f"{cfg.run_name}: {exc}") from None
        if not cfg.eval_at_rollouts:
            raise ValueError(
                f"{p.config.run_name}: no common checkpoints (eval_at_rollouts): an adaptive "
                "sweep judges its arms at them; give the spec eval_points (e.g. 9)."
            )
    if plan.spec.seeds and len(plan.spec.seeds) < 2:
        log.info("one seed per arm: the rule's noise is the evaluation's binomial noise")


def settings_of(plan: SweepPlan, config: Sequence[str] = ALLOCATION) -> list[dict[str, Any]]:
    """The settings of a sweep: the values of its axes other than the allocation's."""
    names = [a for a in plan.spec.varying if a not in config and a != "seed"]
    seen: list[dict[str, Any]] = []
    for p in plan.points:
        s = {a: p.values[a] for a in names}
        if s not in seen:
            seen.append(s)
    return seen


def _points_frame(points: Sequence[GridPoint]) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                RUN_KEY: p.run_key,
                **{c: getattr(p.config, c) for c in ALLOCATION},
                "seed": p.config.seed,
                **{c: getattr(p.config, c) for c in EVAL_SIZE},
            }
            for p in points
        ]
    )


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


def live_trainable(
    configs: dict[str, dict], uri: str, metric: str, checkpoints: Path, threads: int, env: dict
) -> Callable[[dict], None]:
    """The Tune function trainable of one run (``config["run_key"]``): trains it with
    `Checkpointing`, reporting each evaluation to Tune with its checkpoint; suspended by Tune
    (pause, stop: its report raises SystemExit) it ends as Tune asked and leaves the MLflow
    run to the scheduler."""

    def trainable(config: dict) -> None:
        from ray import tune

        from isolab.rl.train import train
        from isolab.rl.trainer import Checkpointing, Suspended
        from isolab.sweep.point import setup_process

        setup_process(threads, env, uri)
        key = config[RUN_KEY]
        cfg = RunConfig.from_dict(configs[key])
        keep = checkpoints / key
        # in this order: a stop writes its tags before it removes the checkpoint, so a trial
        # that finds no checkpoint because its arm just stopped finds the tags
        resume = keep if (keep / STATE_FILE).exists() else None
        if _stopped_key(key, cfg.experiment, uri):  # its arm's stop stands: the trial ends
            shutil.rmtree(keep, ignore_errors=True)  # without training
            return
        if resume is not None and not _replay(keep):  # stopped at its rung meanwhile
            return

        def at_eval(step: int, path: Path, metrics: dict) -> None:
            fresh = keep.with_name(key + ".new")
            shutil.rmtree(fresh, ignore_errors=True)
            shutil.copytree(path, fresh)
            report = {DEFAULT_X: float(metrics[ROLLOUTS]), metric: float(metrics[metric])}
            (fresh / REPORT_FILE).write_text(json.dumps(report))
            shutil.rmtree(keep, ignore_errors=True)
            fresh.rename(keep)  # the copy is whole or absent
            try:
                tune.report(report, checkpoint=tune.Checkpoint.from_directory(keep))
            except SystemExit:  # Tune paused or stopped the trial at this report
                raise Suspended from None

        try:
            result = train(cfg, uri, checkpointing=Checkpointing(at_eval, resume))
        except Suspended:  # the run's MLflow record is the scheduler's now; Tune ends the
            raise SystemExit(0) from None  # thread the way its report asked (no final report)
        shutil.rmtree(keep, ignore_errors=True)
        rollouts = float(result.final_metrics.get(ROLLOUTS, cfg.rollouts))
        last = {DEFAULT_X: rollouts, metric: float(result.final_eval[metric]), DONE_KEY: True}
        tune.report(last)

    return trainable


def _replay(keep: Path) -> bool:
    """Report the evaluation that checkpoint `keep` was taken at once more, before the run
    trains from it (`REPLAY_KEY`): Tune pauses or stops the trial there (its report raises
    SystemExit) or lets it go on (True). The report carries a checkpoint of its own, not `keep`:
    a judgement of the rung may remove `keep` meanwhile (its arm stopped: False)."""
    from ray import tune

    try:
        report = json.loads((keep / REPORT_FILE).read_text())
    except FileNotFoundError:  # taken before reports were kept (train on), or removed
        return (keep / STATE_FILE).exists()
    with tempfile.TemporaryDirectory(prefix="isolab-replay-") as held:
        (Path(held) / REPORT_FILE).write_text(json.dumps(report))
        tune.report({**report, REPLAY_KEY: True}, checkpoint=tune.Checkpoint.from_directory(held))
    return (keep / STATE_FILE).exists()


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
            if saved is None or saved["run_id"] != run.info.run_id:
                shutil.rmtree(keep, ignore_errors=True)  # starts over: a new MLflow run
                if status in ("RUNNING", SCHEDULED):
                    c.set_terminated(run.info.run_id, status=KILLED)
                continue
            upto = saved["step"]
        ys = {m.step: m.value for m in c.get_metric_history(run.info.run_id, mlflow_key(metric))}
        xs = {m.step: m.value for m in c.get_metric_history(run.info.run_id, ROLLOUTS)}
        for step, y in sorted(ys.items()):
            if step > 0 and step in xs and (xs[step] if stop else step) <= upto:
                rows.append({RUN_KEY: p.run_key, DEFAULT_X: xs[step], metric: y})
    schema = {RUN_KEY: pl.String, DEFAULT_X: pl.Float64, metric: pl.Float64}
    return _Stored(pl.DataFrame(rows, schema=schema), ended, finished, stops, todo)


def _run_setting(
    setting: dict,
    points: list[GridPoint],
    plan: SweepPlan,
    uri: str,
    rule: StoppingRule,
    storage: Path,
    threads: int,
    env: dict,
    on_rung: Callable | None,
    start: Callable[[], None],
) -> SettingResult:
    """One setting's runs (`run_adaptive`); `start` starts Ray, where there is a run to train."""
    import ray
    from ray import tune

    metric, experiment = plan.spec.metric, plan.spec.name
    checkpoints = storage / "checkpoints"
    checkpoints.mkdir(parents=True, exist_ok=True)
    frame = _points_frame(points)
    arm_runs: dict[str, list[str]] = {}
    for row in frame.iter_rows(named=True):
        arm_runs.setdefault(arm_label(row, ALLOCATION), []).append(row[RUN_KEY])
    rungs = sorted({float(c) for p in points for c in p.config.eval_at_rollouts or ()})
    marks = _Marks(experiment, uri, checkpoints, arm_runs)
    scheduler = LiveScheduler(
        rule, rungs, frame, pause=True, y=metric, marks=marks, on_rung=on_rung
    )
    stored = _store_state(points, experiment, uri, metric, checkpoints)
    scheduler.preload(stored.rows, stored.ended, stored.stops, stored.finished)
    scheduler._judge_ready(None, current=None)  # rungs the preloaded runs complete
    todo = [p for p in stored.todo if scheduler.stop_of(p.run_key) is None]
    if todo:
        if not ray.is_initialized():
            start()
        configs = {p.run_key: dataclasses.asdict(p.config) for p in todo}
        trainable = live_trainable(configs, uri, metric, checkpoints, threads, env)
        cpus = plan.spec.resources.cpus_per_run
        with tempfile.TemporaryDirectory(prefix="isolab-tune-", dir=storage) as tune_dir:
            tuner = tune.Tuner(
                tune.with_resources(trainable, {"cpu": cpus}),
                param_space={RUN_KEY: tune.grid_search(list(configs))},
                tune_config=tune.TuneConfig(scheduler=scheduler, reuse_actors=True),
                run_config=tune.RunConfig(
                    storage_path=tune_dir,
                    name="adaptive",
                    verbose=0,
                    log_to_file=False,
                    checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
                ),
            )
            results = tuner.fit()
        if results.errors:
            raise RuntimeError(f"{len(results.errors)} run(s) failed: {results.errors[0]!r}")
        # Tune ends its loop on Ctrl-C itself and returns: runs neither ended nor stopped mean
        # the sweep was interrupted (paused runs keep their checkpoints for the rerun)
        cut = scheduler.open_runs(list(configs))
        if cut:
            marks.interrupted(cut)
            raise KeyboardInterrupt
    return _summary(setting, points, scheduler)


def _summary(setting: dict, points: list[GridPoint], scheduler: LiveScheduler) -> SettingResult:
    """Each arm's compute spent (the rollouts its runs reported last) and last seed-mean metric,
    and the arms that reached the budget judged there, from what the scheduler saw (this
    session's reports and the store's preloaded evaluations)."""
    rows = [
        {
            "arm": scheduler.arm_of(p.run_key),
            "spent": scheduler.spent(p.run_key),
            "last": scheduler.last_value(p.run_key),
        }
        for p in points
    ]
    stops = scheduler.stops
    arms = (
        pl.DataFrame(rows)
        .group_by("arm", maintain_order=True)
        .agg(pl.len().alias("seeds"), pl.col("spent").sum(), pl.col("last").mean())
        .with_columns(
            pl.col("arm").replace_strict(
                {a: s.C for a, s in stops.items()}, default=None, return_dtype=pl.Float64
            ).alias("stopped_at"),
            pl.col("arm").replace_strict(
                {a: s.reason for a, s in stops.items()}, default="", return_dtype=pl.String
            ).alias("reason"),
        )
        .sort("arm")
    )  # fmt: skip
    grid = float(sum(p.config.rollouts for p in points))
    at_budget = scheduler.rows_at(scheduler.rungs[-1])
    final = None
    if at_budget:  # the budget's rung, judged as `recommend` calls options within noise
        within = StoppingRule(z=WITHIN_SE, grace=0)
        final = judge_rung(
            pl.DataFrame(at_budget), within, y=scheduler.y, x=scheduler.x, config=ALLOCATION
        )
    spent = float(arms["spent"].sum())
    return SettingResult(setting, arms, scheduler.decisions, spent, grid, final)


def run_adaptive(
    plan: SweepPlan,
    tracking_uri: str | None = None,
    *,
    rule: StoppingRule | None = None,
    workers: int = 1,
    storage: Path | None = None,
    on_rung: Callable[[dict, float, RungDecision, set[str]], None] | None = None,
) -> LiveReport:
    """Run `plan` adaptively (module docstring) on a local Ray instance of `workers` CPUs;
    `storage` holds the checkpoints (default ``$ISOLAB_CACHE/adaptive/<sweep>``).
    `on_rung(setting, C, decision, stopped_arms)` as each rung is judged.

    Raises:
        ValueError: the plan cannot run adaptively (`check_adaptive`), or bad options.
        RuntimeError: another runner holds the sweep, or runs failed.
    """
    from isolab.sweep.runner import check_run
    from isolab.tracking import client, leases, resolve_uri, sweep_parent
    from isolab.tracking.parents import finish_parent, hold_parent

    rule = rule or StoppingRule()
    check_run(plan, tracking_uri, workers=workers, backend="ray")
    check_adaptive(plan)
    uri = resolve_uri(tracking_uri)
    spec = plan.spec
    storage = Path(storage or adaptive_storage(spec.name)).resolve()
    storage.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    # the lease on every run of the sweep, held by this process for the whole sweep (a paused
    # run belongs to it too): another runner of the spec, adaptive or not, leaves them alone
    keys = [p.run_key for p in plan.points]
    with leases.lease(spec.name, keys, uri, label=f"adaptive sweep {spec.name}") as mine:
        if not mine:
            raise RuntimeError(
                f"sweep {spec.name}: another runner holds some of its runs on this store; wait "
                "for it to end (or end it), then run this command again to resume."
            )
        parent = sweep_parent(spec.name, spec.name, uri)
        hold_parent(parent, uri)  # RUNNING while this process runs the sweep
        client(uri).set_tag(parent, RULE_TAG, rule.text)
        try:
            results = _run_settings(plan, uri, rule, storage, workers, parent, on_rung)
        except BaseException:  # Ctrl-C, a failed run: the sweep is not done
            finish_parent(spec.name, parent, uri, interrupted=True)
            raise
        report = LiveReport(results, time.perf_counter() - t0)
        client(uri).set_tag(parent, FRACTION_TAG, f"{report.spent / report.grid:.4f}")
        finish_parent(spec.name, parent, uri)
    return report


def _run_settings(
    plan: SweepPlan,
    uri: str,
    rule: StoppingRule,
    storage: Path,
    workers: int,
    parent: str,
    on_rung: Callable | None,
) -> list[SettingResult]:
    """`run_adaptive`'s settings, one after another, on a local Ray instance, as children of
    the sweep's `parent` run."""
    import ray

    from isolab.sweep.point import worker_env
    from isolab.sweep.ray_backend import start_local_ray
    from isolab.sweep.runner import _children_of
    from isolab.tracking.interrupts import handlers_kept

    spec = plan.spec
    results: list[SettingResult] = []
    threads = max(1, int(spec.resources.cpus_per_run))
    with _children_of(parent):
        env = worker_env()
        # a paused run's actor trains the next run once its own run has let go of the model
        # (Tune waits 2 s for that by default, then fails the next run)
        os.environ.setdefault(THREAD_TIMEOUT_ENV, "120")
        quiet_tune()
        cpus = max(1, math.ceil(workers * spec.resources.cpus_per_run))
        with handlers_kept():  # Ray's SIGTERM and Tune's SIGINT stay behind otherwise
            try:
                for setting in settings_of(plan):
                    points = [p for p in plan.points if all(
                        p.values[a] == v for a, v in setting.items())]  # fmt: skip

                    def judged(C, decision, stopped, setting=setting):
                        if on_rung is not None:
                            on_rung(setting, C, decision, stopped)

                    start = lambda: start_local_ray(ray, num_cpus=cpus)  # noqa: E731
                    result = _run_setting(
                        setting, points, plan, uri, rule, storage, threads, env, judged, start
                    )
                    results.append(result)
            finally:
                if ray.is_initialized():
                    ray.shutdown()
    return results
