"""The adaptive stopping rule as a Ray Tune scheduler (issue 32: a library scheduler, not a
hand-rolled loop).

`AdaptiveScheduler` is a `FIFOScheduler` whose decisions come from
`isolab.sweep.adaptive.judge_rung`. A Tune *trial* is one run of the sweep: one grid point ×
seed, named by its isolab ``run_key`` (``trial.config["run_key"]``); `points` gives each run's
columns (its arm ``n, B_p, M``, its seed, ``eval_problems`` / ``eval_k_samples`` for the
binomial noise floor). A trial calls ``tune.report({"compute/rollouts": C, "eval/avg@4": R})``
at each checkpoint; the *rungs* are the sweep's common checkpoints.

Rungs are judged in order, synchronously, as `replay` does and as `HyperBandScheduler` does for
its brackets: rung C is complete when every live run has reported at C or beyond, or ended (a
run whose first evaluation comes later, e.g. a large n·B_p, passes C without a row there and is
not judged at C). Then `judge_rung` gets the rung's rows of the live arms; the runs of the
stopped arms get ``STOP`` (paused ones through ``stop_trial``) and their reason is kept in
`stops`, for the caller to tag the arm's MLflow runs; the others continue.

Waiting: with ``pause=True`` (default) a trial that reports at a rung not yet judged gets
``PAUSE``, which frees its worker for the runs still on their way (Tune checkpoints it: the
trainable must report a checkpoint with each result and resume from ``tune.get_checkpoint()``),
and `choose_trial_to_run` resumes it once the rung is judged — successive halving proper: a
stopped arm has spent exactly the rung's compute. With ``pause=False`` trials run on and the
rungs are judged as they complete, asynchronously: the same decisions, no checkpointing, but a
run that got ahead spends past the rung before its arm is stopped, and with fewer workers than
runs the first runs may finish before their rung is judged (no compute saved). `pause=False`
fits a sweep with a worker per run; `pause=True` any other.

`tune_replay` plays the rule through Tune on a sweep's saved curves (one function trainable
per run replaying its evaluations); it stops the same arms at the same rungs as `replay`, and
with ``pause=True`` spends the same compute. One difference: `replay` stops judging at the
first rung where no live arm has a row; the scheduler skips that rung and judges the next ones
(no committed sweep has such a rung).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
from ray import tune
from ray.tune.experiment import Trial
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from isolab.frontier.evidence import ALLOCATION
from isolab.sweep.adaptive import RungDecision, StoppingRule, arm_label, judge_rung
from isolab.table import RUN_KEY, require, run_column
from isolab.tracking.interrupts import handlers_kept
from isolab.vocab import DEFAULT_X, DEFAULT_Y

if TYPE_CHECKING:
    from ray.tune.execution.tune_controller import TuneController

#: Columns of a run, besides its arm, that `judge_rung` reads (the evaluation's size).
EVAL_SIZE = ("eval_problems", "eval_k_samples")


@dataclass(frozen=True)
class Stop:
    """Why an arm stopped: at rung `C` (compute per seed spent), `reason` from `judge_rung`."""

    C: float
    reason: str


class AdaptiveScheduler(FIFOScheduler):
    """Successive halving by a `StoppingRule` over Tune trials (module docstring).

    Args:
        rule: the stopping rule.
        rungs: the sweep's checkpoints (x > 0), in any order; rung i's index is its place in
            increasing order (the rule's `grace` counts them), the last is the budget (the
            rule's `judge_from` is a share of it).
        points: one row per run: ``run_key``, the config columns, and ``seed`` /
            ``eval_problems`` / ``eval_k_samples`` where known.
        pause: pause a trial at a rung not yet judged (True) or let it run on (False).
    """

    def __init__(
        self,
        rule: StoppingRule,
        rungs: Sequence[float],
        points: pl.DataFrame,
        *,
        pause: bool = True,
        x: str = DEFAULT_X,
        y: str = DEFAULT_Y,
        config: Sequence[str] = ALLOCATION,
    ) -> None:
        super().__init__()
        require(points, RUN_KEY)
        self.rule, self.pause, self.x, self.y = rule, pause, x, y
        self.rungs = sorted({float(c) for c in rungs if c > 0})
        if not self.rungs:
            raise ValueError(f"rungs = {list(rungs)}: give the sweep's checkpoints (x > 0).")
        self.cfg = [c for c in config if c in points.columns]
        keep = [RUN_KEY, *self.cfg, *(c for c in ("seed", *EVAL_SIZE) if c in points.columns)]
        self._points = {r[RUN_KEY]: r for r in points.select(keep).iter_rows(named=True)}
        self._arm = {k: arm_label(r, self.cfg) for k, r in self._points.items()}
        self._last: dict[str, float] = dict.fromkeys(self._points, 0.0)
        self._ended: set[str] = set()
        self._rows: list[dict[str, Any]] = []
        self._trials: dict[str, Trial] = {}
        self._next = 0  # index of the next rung to judge
        self._judging = False
        #: Arm label ("n=4,B_p=16") → why it stopped.
        self.stops: dict[str, Stop] = {}
        #: Each judged rung's decision, in order.
        self.decisions: list[RungDecision] = []

    # Tune's callbacks -------------------------------------------------------------------------

    def on_trial_add(self, tune_controller: TuneController, trial: Trial) -> None:
        key = self._key(trial)
        if key not in self._points:
            raise ValueError(
                f"trial {trial} has run_key {key!r}, which is not in `points`: give the scheduler "
                "the sweep's runs, one row per run_key of the param_space."
            )
        self._trials[key] = trial

    def on_trial_result(self, tune_controller: TuneController, trial: Trial, result: dict) -> str:
        key = self._key(trial)
        if self.x not in result:
            return TrialScheduler.CONTINUE
        C = float(result[self.x])
        self._last[key] = max(self._last[key], C)
        if C in self.rungs and self.y in result:
            self._rows.append({**self._points[key], self.x: C, self.y: float(result[self.y])})
        self._judge_ready(tune_controller, current=trial)
        if self._arm[key] in self.stops:
            return TrialScheduler.STOP
        return TrialScheduler.PAUSE if self._waiting(key) else TrialScheduler.CONTINUE

    def on_trial_complete(
        self, tune_controller: TuneController, trial: Trial, result: dict
    ) -> None:
        self.on_trial_remove(tune_controller, trial)

    def on_trial_error(self, tune_controller: TuneController, trial: Trial) -> None:
        self.on_trial_remove(tune_controller, trial)

    def on_trial_remove(self, tune_controller: TuneController, trial: Trial) -> None:
        self._ended.add(self._key(trial))
        self._judge_ready(tune_controller, current=trial)

    def choose_trial_to_run(self, tune_controller: TuneController) -> Trial | None:
        """Runs not yet started first (they hold the rung back), then paused runs whose rung
        has been judged."""
        trials = tune_controller.get_trials()
        for trial in trials:
            if trial.status == Trial.PENDING:
                return trial
        for trial in trials:
            if trial.status == Trial.PAUSED and not self._waiting(self._key(trial)):
                return trial
        return None

    def debug_string(self) -> str:
        judged = self.rungs[self._next - 1] if self._next else 0
        return (
            f"Adaptive successive halving ({self.rule.text}): rungs judged up to C = "
            f"{judged:,.0f}, {len(self.stops)} arms stopped."
        )

    # The rule ---------------------------------------------------------------------------------

    def _key(self, trial: Trial) -> str:
        return str(trial.config[RUN_KEY])

    def _live(self, key: str) -> bool:
        return self._arm[key] not in self.stops

    def _waiting(self, key: str) -> bool:
        """The run has reached the rung to be judged next: it waits there (`pause`)."""
        return (
            self.pause
            and self._next < len(self.rungs)
            and self._last[key] >= self.rungs[self._next]
        )

    def _judge_ready(self, tune_controller: TuneController | None, current: Trial | None) -> None:
        """Judge every rung whose live runs have all passed it, in order; stop the paused
        trials of the arms stopped (the current trial gets its STOP from `on_trial_result`).
        Without a controller (before Tune starts: runs preloaded from the store) it only
        judges."""
        if self._judging:  # stop_trial below calls on_trial_remove back
            return
        self._judging = True
        try:
            while self._next < len(self.rungs) and self._complete(self.rungs[self._next]):
                self._judge(self._next)
                self._next += 1
            for key, trial in self._trials.items():
                if trial is current or self._live(key):
                    continue
                paused = trial.status in (Trial.PAUSED, Trial.PENDING) or trial.is_saving
                if paused and tune_controller is not None:
                    tune_controller.stop_trial(trial)
        finally:
            self._judging = False

    def _complete(self, C: float) -> bool:
        return all(self._last[k] >= C or k in self._ended for k in self._points if self._live(k))

    def _judge(self, i: int) -> None:
        C = self.rungs[i]
        rows = [r for r in self._rows if r[self.x] == C and self._live(r[RUN_KEY])]
        if not rows:
            return
        at = pl.DataFrame(rows).sort(RUN_KEY)
        decision = judge_rung(
            at, self.rule, rung=i, budget=self.rungs[-1], y=self.y, x=self.x, config=self.cfg
        )
        self.decisions.append(decision)
        for row in decision.arms.filter("stop").iter_rows(named=True):
            self.stops[arm_label(row, self.cfg)] = Stop(C, row["reason"])

    def arm_of(self, run_key: str) -> str:
        """The run's arm, as `Replay.arms["arm"]` names it ("n=4,B_p=16")."""
        return self._arm[run_key]

    def stop_of(self, run_key: str) -> Stop | None:
        """Why the run's arm stopped (None: it ran on): the status and reason of its MLflow run."""
        return self.stops.get(self._arm[run_key])


# Replay through Tune --------------------------------------------------------------------------


@dataclass(frozen=True)
class TuneReplay:
    """`tune_replay`'s outcome: `arms`, one row per arm (``arm``, ``stopped_at``, ``reason``,
    ``spent``: the rollouts its runs reported, over its seeds) as `Replay.arms` names them;
    `decisions`, the rungs judged; `wall_s`, Tune's run time."""

    arms: pl.DataFrame
    decisions: list[RungDecision]
    wall_s: float


def _curves(df: pl.DataFrame, x: str, y: str) -> dict[str, list[tuple[float, float]]]:
    key = run_column(df)
    trained = df.filter(pl.col(x) > 0).sort(key, x)
    return {
        k: list(zip(g[x].to_list(), g[y].to_list(), strict=True))
        for (k,), g in trained.group_by(key, maintain_order=True)
    }


def replay_trainable(
    curves: dict[str, list[tuple[float, float]]], *, x: str = DEFAULT_X, y: str = DEFAULT_Y
) -> Callable[[dict], None]:
    """A function trainable that replays one run's saved curve (``config["run_key"]``): one
    ``tune.report`` per evaluation, each with a checkpoint holding the evaluations done, so
    that a paused trial resumes where it stopped."""

    def trainable(config: dict) -> None:
        curve = curves[config[RUN_KEY]]
        start = 0
        if (checkpoint := tune.get_checkpoint()) is not None:
            with checkpoint.as_directory() as d:
                start = json.loads((Path(d) / "done.json").read_text())
        for i in range(start, len(curve)):
            with tempfile.TemporaryDirectory() as d:
                (Path(d) / "done.json").write_text(json.dumps(i + 1))
                metrics = {x: curve[i][0], y: curve[i][1]}
                tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(d))

    return trainable


def tune_replay(
    df: pl.DataFrame,
    rule: StoppingRule,
    storage: Path,
    *,
    pause: bool = True,
    cpus_per_trial: float = 1.0,
    x: str = DEFAULT_X,
    y: str = DEFAULT_Y,
    config: Sequence[str] = ALLOCATION,
) -> TuneReplay:
    """`replay` through Ray Tune: one trial per run of `df` (one setting: split it first),
    scheduled by an `AdaptiveScheduler`; Tune's files go under `storage`. Ray must be running
    (``ray.init``), or Tune starts it with its defaults."""
    key = run_column(df)
    require(df, key, x, y)
    curves = _curves(df, x, y)
    cols = [c for c in (*config, "seed", *EVAL_SIZE) if c in df.columns]
    points = df.group_by(key, maintain_order=True).agg(pl.col(cols).first()).rename({key: RUN_KEY})
    rungs = sorted(set(df.filter(pl.col(x) > 0)[x].to_list()))
    scheduler = AdaptiveScheduler(rule, rungs, points, pause=pause, x=x, y=y, config=config)
    tuner = tune.Tuner(
        tune.with_resources(replay_trainable(curves, x=x, y=y), {"cpu": cpus_per_trial}),
        param_space={RUN_KEY: tune.grid_search(list(curves))},
        tune_config=tune.TuneConfig(scheduler=scheduler, reuse_actors=True),
        run_config=tune.RunConfig(
            storage_path=str(storage), name="replay", verbose=0, log_to_file=False
        ),
    )
    start = time.perf_counter()
    with handlers_kept():  # Tune's SIGINT handler stays behind otherwise
        results = tuner.fit()
    wall_s = time.perf_counter() - start
    if results.errors:
        raise RuntimeError(f"{len(results.errors)} replay trials failed: {results.errors[0]!r}")
    spent = []  # the compute each run reported last: where it stopped or ended
    for r in results:
        run, metrics = r.config or {}, r.metrics or {}
        spent.append({"arm": scheduler.arm_of(run[RUN_KEY]), "spent": float(metrics[x])})
    stops = pl.DataFrame(
        {
            "arm": list(scheduler.stops),
            "stopped_at": [s.C for s in scheduler.stops.values()],
            "reason": [s.reason for s in scheduler.stops.values()],
        },
        schema={"arm": pl.String, "stopped_at": pl.Float64, "reason": pl.String},
    )
    arms = (
        pl.DataFrame(spent)
        .group_by("arm", maintain_order=True)
        .agg(pl.len().alias("seeds"), pl.col("spent").sum())
        .join(stops, on="arm", how="left")
        .with_columns(pl.col("reason").fill_null(""))
        .sort("arm")
    )
    return TuneReplay(arms, scheduler.decisions, wall_s)
