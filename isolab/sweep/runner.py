"""Run a sweep's grid, resumably: local worker processes, Ray tasks or inline, one MLflow store.

The MLflow store is the only state. Each grid point is identified by its `RunConfig.run_key`;
before running, `isolab.sweep.resume.pending` reads the sweep's runs and decides what to redo.
It also creates the store's tables and the experiment before any worker starts, so workers
never race on a schema migration. A store shared by several machines (PostgreSQL, a team) goes
behind `mlflow server`.

Backends (`BACKENDS`), each running points through `isolab.sweep.point.run_point`:

- `local` (`isolab.sweep.local`): K spawned worker processes that import torch, TRL and isolab
  once and then train many points in-process, and die with the runner;
- `ray` (`isolab.sweep.ray_backend`): a Ray task per point with the spec's CPUs / GPUs, on a
  local Ray instance (loopback only) or a cluster (`address`) logging to a tracking server;
- `inline` (here): one point after another in this process.

`check_run` refuses, before anything touches the store, what cannot work or is too big
(ValueError naming the option and the fix); `execute` and `run_sweep` call it, so a notebook
meets the same guards as `isolab sweep run`. Callers follow a sweep through its hooks
(`on_pending`, `on_start`, `on_step`, `on_result`), and `isolab.sweep.progress.SweepProgress`
turns them into the share done and an ETA.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from isolab.frontier.answer import sweep_answers
from isolab.sweep.guards import check_machine, check_wall_time
from isolab.sweep.local import run_local
from isolab.sweep.plan import GridPoint, SweepPlan
from isolab.sweep.point import RunOutcome, run_point, stopped
from isolab.sweep.ray_backend import run_ray
from isolab.sweep.resume import StoreState, pending
from isolab.tracking import PARENT_ENV, resolve_uri, sweep_parent
from isolab.tracking.interrupts import terminate_as_interrupt
from isolab.tracking.parents import complete_parent, finish_parent
from isolab.vocab import FAILED, FINISHED, KILLED, SKIPPED, PointStatus

# local: K spawned worker processes; ray: a Ray task per run; inline: one run after another in
# this process (no worker start-up, which costs tens of seconds of imports: small sweeps, notebooks)
BACKENDS = ("local", "ray", "inline")
STOP_GRACE_S = 40.0  # how long an interrupted sweep waits for its runs to be marked KILLED


@dataclass
class SweepReport:
    """What a sweep did: the points it tried, those it found done or taken, and whether it was
    interrupted.

    Attributes:
        outcomes: one per point this sweep tried, by status: `finished`, `failed`, `killed`,
            `skipped`.
        already_finished: points FINISHED in the store before the sweep started: not rerun.
        running_elsewhere: points RUNNING in another live process when it started: left to it.
        reclaimed: runs left RUNNING by a process that is gone, now FAILED (their points rerun).
        interrupted: whether Ctrl-C stopped the sweep.
        wall_time_s: wall time of the whole sweep.
    """

    outcomes: list[RunOutcome]
    already_finished: int
    running_elsewhere: int
    reclaimed: int
    interrupted: bool
    wall_time_s: float

    def with_status(self, status: PointStatus) -> list[RunOutcome]:
        return [o for o in self.outcomes if o.status == status]

    @property
    def finished(self) -> list[RunOutcome]:
        return self.with_status(FINISHED)

    @property
    def failed(self) -> list[RunOutcome]:
        """Points whose training raised, or whose worker died: rerun to retry them."""
        return self.with_status(FAILED)

    @property
    def killed(self) -> list[RunOutcome]:
        """Points a stop cut short (Ctrl-C, a signal to a worker): rerun to redo them."""
        return self.with_status(KILLED)

    @property
    def skipped(self) -> list[RunOutcome]:
        """Points another runner on the same spec and store trains or trained meanwhile."""
        return self.with_status(SKIPPED)


def check_run(
    plan: SweepPlan,
    tracking_uri: str | None = None,
    *,
    workers: int = 1,
    backend: str = "local",
    address: str | None = None,
    limit: int | None = None,
) -> None:
    """Refuse a run of `plan` that cannot work or is too big, before anything touches the
    store: ValueError naming the option (as `run_sweep` and `isolab sweep run` call it) and the
    fix. The size guard (`isolab.sweep.guards.check_wall_time`) yields to
    `$ISOLAB_NO_SIZE_GUARDS=1`."""
    if backend not in BACKENDS:
        raise ValueError(f"backend = {backend!r} (--backend): choose one of {', '.join(BACKENDS)}.")
    if workers < 1:
        raise ValueError(f"workers = {workers} (--workers): must be ≥ 1.")
    if backend == "inline" and workers != 1:
        raise ValueError(
            f"workers = {workers} (--workers): backend 'inline' runs one point at a time in "
            "this process; leave workers at 1, or use backend 'local'."
        )
    if address and backend != "ray":
        raise ValueError(
            f"address = {address!r} (--address) is for the ray backend: add --backend ray."
        )
    if limit is not None and limit < 1:
        raise ValueError(
            f"limit = {limit} (--limit): run at least 1 point, or leave the limit out to run "
            "them all."
        )
    uri = resolve_uri(tracking_uri)
    if address and uri.startswith("sqlite"):
        raise ValueError(
            f"a Ray cluster (address {address}) cannot share the SQLite store {uri}: start "
            "`mlflow server` (PostgreSQL for teams) and pass its URL as the tracking URI, "
            "--tracking-uri http://HOST:PORT."
        )
    check_machine(plan.spec, address)
    _check_cores(plan, workers, backend)
    check_wall_time(plan, workers)


def _check_cores(plan: SweepPlan, workers: int, backend: str) -> None:
    """Local workers whose runs have several processes (`processes: K`) must fit the cores:
    workers × K × cpus_per_run threads at most. (Ray counts them itself: a point asks it for
    K × cpus_per_run CPUs.)"""
    processes = max((p.config.processes for p in plan.points), default=1)
    if backend == "ray" or processes == 1:
        return
    per_process = max(1, int(plan.spec.resources.cpus_per_run))
    cores = os.cpu_count() or 1
    need = workers * processes * per_process
    if need > cores:
        fit = cores // (processes * per_process)
        fix = (
            f"run --workers {fit}"
            if fit >= 1
            else f"lower processes to {max(1, cores // per_process)} or less"
        )
        raise ValueError(
            f"workers = {workers} (--workers) × processes = {processes} × cpus_per_run = "
            f"{per_process} asks for {need} cores, and this machine has {cores}: {fix}, or use "
            "--backend ray on a machine (or cluster) with more."
        )


@contextlib.contextmanager
def _children_of(run_id: str):
    """Runs this process (and the workers it starts) create meanwhile are `run_id`'s children."""
    before = os.environ.get(PARENT_ENV)
    os.environ[PARENT_ENV] = run_id
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(PARENT_ENV, None)
        else:
            os.environ[PARENT_ENV] = before


@dataclass
class _Hooks:
    """The caller's callbacks of a sweep (any may be None)."""

    on_result: Callable[[RunOutcome, GridPoint], None] | None = None
    on_start: Callable[[GridPoint], None] | None = None
    on_step: Callable[[GridPoint, int], None] | None = None
    #: `run_sweep` only: once the store is read, before any point runs (`run_sweep`'s docstring)
    on_pending: Callable[[list[GridPoint], StoreState], None] | None = None


def _run_inline(
    todo: list[GridPoint],
    uri: str,
    metric: str,
    on_result: Callable[[RunOutcome, GridPoint], None],
    on_start: Callable[[GridPoint], None],
    on_step: Callable[[GridPoint, int], None],
) -> bool:
    """Run `todo` one after another in this process; True when interrupted (Ctrl-C: `train`
    marks the run in progress KILLED; finished runs stay FINISHED)."""
    for point in todo:
        on_start(point)

        def stepped(step: int, metrics: dict, point: GridPoint = point) -> None:
            on_step(point, step)

        try:
            outcome = run_point(point.config, uri, metric, stepped)
        except KeyboardInterrupt:
            on_result(stopped(point.config, uri, os.getpid()), point)
            return True
        on_result(outcome, point)
    return False


def execute(
    todo: list[GridPoint],
    plan: SweepPlan,
    tracking_uri: str | None = None,
    *,
    workers: int = 1,
    backend: str = "local",
    address: str | None = None,
    on_result: Callable[[RunOutcome, GridPoint], None] | None = None,
    on_start: Callable[[GridPoint], None] | None = None,
    on_step: Callable[[GridPoint, int], None] | None = None,
) -> tuple[list[RunOutcome], bool]:
    """Run the given points; returns their outcomes and whether Ctrl-C stopped the sweep.

    Args:
        on_result: called with each point's outcome as it ends.
        on_start: called as a point starts.
        on_step: `on_step(point, step)` as a running point reaches an optimizer step (of
            `optimizer_steps(point.config)`); local workers report at most every
            `isolab.sweep.local.STEP_REPORT_S`, and the ray backend reports none.

    Raises:
        ValueError: from `check_run`, before anything runs.
    """
    check_run(plan, tracking_uri, workers=workers, backend=backend, address=address)
    hooks = _Hooks(on_result, on_start, on_step)
    outcomes: list[RunOutcome] = []
    uri = resolve_uri(tracking_uri)
    interrupted = _execute(todo, plan, uri, workers, backend, address, hooks, outcomes)
    return outcomes, interrupted


def _execute(
    todo: list[GridPoint],
    plan: SweepPlan,
    uri: str,
    workers: int,
    backend: str,
    address: str | None,
    hooks: _Hooks,
    outcomes: list[RunOutcome],
) -> bool:
    """Run `todo`, appending each outcome to `outcomes` as it ends (so that a caller keeps the
    ones that ended before an interruption); True when Ctrl-C stopped the sweep."""
    if not todo:  # every point done: a parent an interrupted run left KILLED is now FINISHED
        complete_parent(plan.spec.name, plan.spec.name, uri)
        return False

    def record(outcome: RunOutcome, point: GridPoint) -> None:
        outcomes.append(outcome)
        if hooks.on_result is not None:
            hooks.on_result(outcome, point)

    started = hooks.on_start or (lambda point: None)
    stepped = hooks.on_step or (lambda point, step: None)
    spec = plan.spec
    parent = sweep_parent(spec.name, spec.name, uri)
    with _children_of(parent):
        if backend == "inline":
            interrupted = _run_inline(todo, uri, spec.metric, record, started, stepped)
        elif backend == "local":  # a worker's threads, split among a run's processes
            processes = max(p.config.processes for p in todo)
            threads = max(1, int(spec.resources.cpus_per_run)) * processes
            interrupted = run_local(
                todo, uri, spec.metric, workers, threads, record, started, STOP_GRACE_S, stepped
            )
        else:
            interrupted = run_ray(
                todo,
                uri,
                spec.metric,
                workers,
                spec.resources,
                address,
                record,
                started,
                STOP_GRACE_S,
            )
    # its status (KILLED when cut short), real duration, points table and descriptions
    answer = () if interrupted else sweep_answers(spec.name, uri, spec.metric)
    finish_parent(spec.name, parent, uri, interrupted, answer)
    return interrupted


def run_sweep(
    plan: SweepPlan,
    tracking_uri: str | None = None,
    *,
    workers: int = 1,
    backend: str = "local",
    address: str | None = None,
    limit: int | None = None,
    reclaim_remote: bool = False,
    on_result: Callable[[RunOutcome, GridPoint], None] | None = None,
    on_start: Callable[[GridPoint], None] | None = None,
    on_step: Callable[[GridPoint, int], None] | None = None,
    on_pending: Callable[[list[GridPoint], StoreState], None] | None = None,
) -> SweepReport:
    """Run every point of `plan` not yet FINISHED in the store (see the module docstring;
    the hooks as in `execute`); `isolab sweep run` is this with a progress display.

    `on_pending(todo, state)` is called once the store is read (`isolab.sweep.resume.pending`:
    the points to run, and what the store holds), before any point starts. Ctrl-C, or SIGTERM
    (in the main thread), stops the sweep cleanly: runs cut short end KILLED, and the report
    says `interrupted`, with the outcomes of the points that ended before it.

    Raises:
        ValueError: from `check_run`, before the store is touched.
    """
    t0 = time.perf_counter()
    check_run(plan, tracking_uri, workers=workers, backend=backend, address=address, limit=limit)
    uri = resolve_uri(tracking_uri)
    hooks = _Hooks(on_result, on_start, on_step, on_pending)
    outcomes: list[RunOutcome] = []
    state = StoreState()
    try:
        with terminate_as_interrupt():  # a `kill` ends the runs KILLED, as Ctrl-C does
            todo, state = pending(plan, uri, reclaim_remote, limit)
            if hooks.on_pending is not None:
                hooks.on_pending(todo, state)
            interrupted = _execute(todo, plan, uri, workers, backend, address, hooks, outcomes)
    except KeyboardInterrupt:  # while the store was read, or between two points
        interrupted = True
    return SweepReport(
        outcomes=outcomes,
        already_finished=len(state.finished),
        running_elsewhere=len(state.live),
        reclaimed=sum(len(v) for v in state.stale.values()),
        interrupted=interrupted,
        wall_time_s=time.perf_counter() - t0,
    )
