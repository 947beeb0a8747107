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

The parts: the trial (`isolab.sweep.adaptive_trial`), the scheduler
(`isolab.sweep.adaptive_scheduler`) and the runs' MLflow records
(`isolab.sweep.adaptive_records`); this module plans the settings, runs each on Tune and sums
it up.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from isolab.frontier.evidence import ALLOCATION, WITHIN_SE
from isolab.rl.trainer import check_checkpointable
from isolab.sweep.adaptive import RungDecision, StoppingRule, arm_label, judge_rung
from isolab.sweep.adaptive_records import _Marks, _store_state
from isolab.sweep.adaptive_scheduler import LiveScheduler
from isolab.sweep.adaptive_trial import live_trainable
from isolab.sweep.adaptive_tune import EVAL_SIZE
from isolab.sweep.plan import GridPoint, SweepPlan
from isolab.sweep.resume import adaptive_storage
from isolab.table import RUN_KEY

log = logging.getLogger(__name__)

RULE_TAG = "isolab.adaptive.rule"
FRACTION_TAG = "isolab.adaptive.compute_fraction"
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
    """A finished adaptive sweep: its settings, its wall time and `answer`, the statements its
    MLflow description carries (`finish_adaptive`)."""

    settings: list[SettingResult]
    wall_s: float
    answer: tuple[str, ...] = ()

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
            pl.col("arm")
            .replace_strict(
                {a: s.C for a, s in stops.items()}, default=None, return_dtype=pl.Float64
            )
            .alias("stopped_at"),
            pl.col("arm")
            .replace_strict(
                {a: s.reason for a, s in stops.items()}, default="", return_dtype=pl.String
            )
            .alias("reason"),
        )
        .sort("arm")
    )
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
        wall_s = time.perf_counter() - t0
        spent, grid = sum(r.spent for r in results), sum(r.grid for r in results)
        answer = finish_adaptive(spec.name, parent, uri, spec.metric, spent / grid)
    return LiveReport(results, wall_s, answer)


def finish_adaptive(
    experiment: str, parent: str, uri: str, metric: str, fraction: float
) -> tuple[str, ...]:
    """An adaptive sweep has run every point: its `parent` gets the compute `fraction` spent,
    ends FINISHED with its points table, and the experiment's description states the answer
    as a plain sweep's does, from the same function (`isolab.frontier.answer.sweep_answers`:
    the sentence `isolab frontier` and `isolab report` print). It reads the FINISHED runs, the
    arms run to the budget (a stopped arm's runs end KILLED), as those commands do by default.
    Returns the statements (none where fewer than two n reached the budget: the description
    then sends the reader to `isolab report`)."""
    from isolab.frontier.answer import sweep_answers
    from isolab.tracking import client
    from isolab.tracking.parents import finish_parent

    client(uri).set_tag(parent, FRACTION_TAG, f"{fraction:.4f}")
    answer = sweep_answers(experiment, uri, metric)
    finish_parent(experiment, parent, uri, answer=answer)
    return answer


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
                    points = [
                        p for p in plan.points if all(p.values[a] == v for a, v in setting.items())
                    ]

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
