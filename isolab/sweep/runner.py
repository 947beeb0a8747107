"""Run a sweep's grid, resumably: local worker processes or Ray tasks, one MLflow store.

The MLflow store is the only state. Each grid point is identified by its `RunConfig.run_key`;
before running, `isolab.sweep.store.pending` reads the sweep's runs and decides what to redo.

Backends:

- `local`: K worker processes (`spawn` context: torch and fork do not mix) that import torch,
  TRL and isolab once and then train many points in-process. They die with the runner
  (Linux `PR_SET_PDEATHSIG`), so a SIGKILLed sweep leaves no orphan writing to the store.
  Workers write to the store directly: MLflow sets SQLite's `busy_timeout` to 20 s, and 8
  processes hammering one store (≈ 800 write transactions and 700 run searches, 2 busy
  cores) hit no lock error, so no server is needed. The runner creates the store's tables
  and the experiment before any worker starts, so workers never race on a schema migration.
  A store shared by several machines (PostgreSQL, a team) goes behind `mlflow server`.
- `ray`: each point is a Ray task with the spec's CPUs / GPUs; a local Ray instance by default
  (listening on 127.0.0.1 only, and shut down with the sweep: `_start_local_ray`), or a cluster
  (`address`) logging to a tracking server.
"""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import math
import os
import queue
import signal
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from isolab.config import RunConfig
from isolab.logs import quiet_libraries, without_sklearn
from isolab.paths import cache_root
from isolab.stop import STOP
from isolab.sweep.plan import GridPoint, SweepPlan
from isolab.sweep.store import pending
from isolab.tracking import (
    PARENT_ENV,
    find_runs,
    resolve_uri,
    sweep_parent,
)

log = logging.getLogger(__name__)

# local: K spawned worker processes; ray: a Ray task per run; inline: one run after another in
# this process (no worker start-up, which costs tens of seconds of imports: small sweeps, notebooks)
BACKENDS = ("local", "ray", "inline")
STOP_GRACE_S = 40.0  # how long an interrupted sweep waits for its runs to be marked KILLED
#: A worker still alive this long after its first Ctrl-C prints every thread's stack to the
#: sweep's log and exits (its run is then marked KILLED by the runner): a stop is bounded even
#: where a library swallows the interrupt or hangs at exit.
WORKER_STOP_S = 30.0
#: How long a finished sweep lets its workers exit on their own before it terminates them.
WORKER_EXIT_S = 5.0


# ---- what a run leaves behind ----------------------------------------------------------------
@dataclass
class RunOutcome:
    """One grid point after the runner tried it.

    Attributes:
        run_key: the point's run key.
        run_name: its readable name.
        status: FINISHED, FAILED or KILLED.
        run_id: the MLflow run (None when it failed before the run was created).
        wall_time_s: wall time of the run.
        metric: the spec's metric at the last evaluation (NaN when missing).
        error: the exception of a failed run.
    """

    run_key: str
    run_name: str
    status: str
    run_id: str | None = None
    wall_time_s: float = 0.0
    metric: float = math.nan
    error: str | None = None


@dataclass
class SweepReport:
    """What a sweep did: its outcomes, what it skipped, and whether it was interrupted."""

    outcomes: list[RunOutcome]
    skipped: int
    live: int
    reclaimed: int
    interrupted: bool
    wall_time_s: float

    @property
    def failed(self) -> list[RunOutcome]:
        return [o for o in self.outcomes if o.status != "FINISHED"]


# ---- the store ------------------------------------------------------------------------------


# ---- one point --------------------------------------------------------------------------------
#: The outcome of a point that another runner trains or trained (concurrent runners on one
#: spec and store split the work: `isolab.sweep.store.lease`).
SKIPPED = "SKIPPED"


def run_point(cfg: RunConfig, tracking_uri: str, metric: str) -> RunOutcome:
    """Train one grid point in this process, holding its lease; a failure becomes a FAILED
    outcome, not a raise; a point another runner holds or finished is SKIPPED.

    KeyboardInterrupt propagates (the run is marked KILLED by `train`).
    """
    from isolab.rl.train import train
    from isolab.sweep.store import finished_elsewhere, lease

    t0 = time.perf_counter()
    with lease(cfg.run_key, cfg.experiment, tracking_uri) as mine:
        # another runner on this spec and store has the point, or has finished it meanwhile
        if not mine or finished_elsewhere(cfg.run_key, cfg.experiment, cfg.model, tracking_uri):
            why = "being trained by another runner" if not mine else "finished by another runner"
            return RunOutcome(cfg.run_key, cfg.run_name, SKIPPED, None, 0.0, error=why)
        return _train_point(train, cfg, tracking_uri, metric, t0)


def _train_point(train, cfg: RunConfig, tracking_uri: str, metric: str, t0: float) -> RunOutcome:
    try:
        result = train(cfg, tracking_uri=tracking_uri)
    except Exception as exc:  # noqa: BLE001 - one bad point must not stop the sweep
        run_id = _latest_run_id(cfg, tracking_uri)
        return RunOutcome(
            cfg.run_key,
            cfg.run_name,
            "FAILED",
            run_id,
            time.perf_counter() - t0,
            error=f"{type(exc).__name__}: {exc}",
        )
    return RunOutcome(
        cfg.run_key,
        cfg.run_name,
        result.status,
        result.run_id,
        result.wall_time_s,
        float(result.final_eval.get(metric, math.nan)),
    )


def _runs_of(cfg: RunConfig, uri: str, pid: int) -> list:
    """The runs of `cfg` that process `pid` created, newest first (best effort)."""
    try:
        runs = find_runs(cfg.experiment, uri, run_key=cfg.run_key)
    except Exception:  # noqa: BLE001 - for reports and clean-up only
        return []
    return [r for r in runs if r.data.tags.get("isolab.pid") == str(pid)]


def _latest_run_id(cfg: RunConfig, uri: str) -> str | None:
    mine = _runs_of(cfg, uri, os.getpid())
    return mine[0].info.run_id if mine else None


def setup_process(threads: int, env: dict[str, str], tracking_uri: str | None = None) -> None:
    """Prepare a worker: environment, torch threads, quiet libraries, heavy imports done once,
    and the connection to the store opened (so that none of it counts in a run's wall time)."""
    os.environ.update(env)
    warnings.filterwarnings("ignore")  # a worker's output is its runner's progress bar
    quiet_libraries()
    import torch

    from isolab.rl import engines

    for key in engines.DISTRIBUTED_ENV:  # a parent that ran vLLM holds that rendezvous's port
        os.environ.pop(key, None)

    torch.set_num_threads(max(1, threads))
    # Import once what every run needs (TRL loads its trainers lazily), so that the first run
    # of a worker does not pay ~15 s of imports.
    from datasets import Dataset  # noqa: F401

    without_sklearn()
    from transformers import TrainerCallback  # noqa: F401
    from trl import GRPOConfig  # noqa: F401

    import isolab.rl.train  # noqa: F401

    # vLLM too only where `generation: auto` picks it (CUDA); a vLLM point imports it when it runs
    engines.grpo_trainer_class(with_vllm=torch.cuda.is_available() and engines.vllm_installed())

    if tracking_uri is not None:
        from isolab.tracking import client

        client(tracking_uri).search_experiments(max_results=1)


def worker_env() -> dict[str, str]:
    """Environment a worker needs to find what this process sees (the absolute model cache)."""

    return {"ISOLAB_CACHE": str(cache_root().resolve()), **_parent_env()}


def _parent_env() -> dict[str, str]:
    """The sweep's parent run, for the workers' runs to be its children."""
    return {PARENT_ENV: os.environ[PARENT_ENV]} if os.environ.get(PARENT_ENV) else {}


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


# ---- local backend ----------------------------------------------------------------------------
def _die_with_parent(parent_pid: int) -> None:
    """Ask Linux to SIGKILL this process when the runner dies (a SIGKILLed runner leaves no
    orphans); elsewhere a watchdog thread exits once the parent is gone."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent_pid:
        os._exit(1)
    import threading

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _interrupt_once(signum, frame) -> None:
    """First SIGINT/SIGTERM: stop the run (train marks it KILLED); later ones are ignored so
    that the MLflow write of that status is not interrupted in turn. Nothing is imported here:
    the trainer's module may be half-imported when the signal lands (`isolab.stop` imports
    nothing, and is imported at the top of this module)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    faulthandler.dump_traceback_later(WORKER_STOP_S, exit=True)  # a C thread: never blocked
    STOP.set()  # the run stops at its next step even if this exception is swallowed
    raise KeyboardInterrupt


def _worker_main(tasks, results, tracking_uri: str, metric: str, threads: int, env, parent_pid):
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, _interrupt_once)
    signal.signal(signal.SIGTERM, _interrupt_once)
    pid = os.getpid()
    cfg: RunConfig | None = None
    index: int | None = None
    try:
        setup_process(threads, env, tracking_uri)
        while not STOP.is_set():  # nothing new starts once a stop was asked
            item = tasks.get()
            if item is None:
                break
            index, cfg = item
            results.put(("start", index, pid))
            results.put(("done", index, run_point(cfg, tracking_uri, metric), pid))
            cfg, index = None, None
        _end_quietly()
    except KeyboardInterrupt:
        if cfg is not None:  # interrupted between `create_run` and train's own handler
            _end_orphaned_run(cfg, tracking_uri, pid, "KILLED")
        results.put(("stopped", index, pid))  # the point it was running, if any


def _end_quietly() -> None:
    """A worker past its last point: Ctrl-C is the runner's to handle, and SIGTERM (the runner
    ends its pool) just ends the process. Raised as KeyboardInterrupt while the interpreter ran
    its exit callbacks, either printed `Exception ignored in atexit callback` at the end of a
    clean sweep."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


class _LocalPool:
    """K spawned workers sharing a task queue; a worker that dies is reported and replaced."""

    def __init__(self, todo: list[GridPoint], uri: str, metric: str, workers: int, threads: int):
        import multiprocessing as mp

        self.ctx = mp.get_context("spawn")
        self.tasks = self.ctx.Queue()
        self.results = self.ctx.Queue()
        self.args = (uri, metric, threads, worker_env(), os.getpid())
        self.uri = uri
        for index, point in enumerate(todo):
            self.tasks.put((index, point.config))
        self.workers = min(workers, len(todo))
        for _ in range(self.workers):
            self.tasks.put(None)
        self.procs: list[Any] = []
        self.current: dict[int, int] = {}  # worker pid → index of the point it runs
        self.respawns = 2 * self.workers
        self.stopping = False  # after Ctrl-C: no worker is replaced, a lost run ends KILLED
        for _ in range(self.workers):
            self._spawn()

    def _spawn(self) -> None:
        proc = self.ctx.Process(
            target=_worker_main, args=(self.tasks, self.results, *self.args), daemon=True
        )
        proc.start()
        self.procs.append(proc)

    def events(self, timeout: float) -> list[tuple]:
        """Messages from workers, plus ("died", index, exitcode, pid) for points whose worker
        died mid-run."""
        out = self._receive(timeout)
        for proc in list(self.procs):
            if proc.exitcode is None:
                continue
            self.procs.remove(proc)
            out += self._receive(0.0)  # what it wrote before dying is in the pipe already
            index = self.current.pop(proc.pid, None)
            if index is not None:
                out.append(("died", index, proc.exitcode, proc.pid))
                if self.respawns > 0 and not self.stopping:
                    self.respawns -= 1
                    self.tasks.put(None)  # its sentinel was not consumed: one for the new one
                    self._spawn()
        return out

    def _receive(self, timeout: float) -> list[tuple]:
        out = []
        with contextlib.suppress(queue.Empty):
            out.append(self.results.get(timeout=timeout) if timeout else self.results.get_nowait())
            while True:
                out.append(self.results.get_nowait())
        for kind, index, *rest in out:
            pid = rest[-1]
            if kind == "start":
                self.current[pid] = index
            elif kind == "stopped" or (kind == "done" and self.current.get(pid) == index):
                self.current.pop(pid, None)
        return out

    def _end_all(self, how: str, join_s: float) -> None:
        for proc in self.procs:
            if proc.exitcode is None:
                getattr(proc, how)()
        for proc in self.procs:
            proc.join(timeout=join_s)

    def alive(self) -> bool:
        return any(p.exitcode is None for p in self.procs)

    def interrupt(self) -> None:
        self.stopping = True
        for proc in self.procs:
            if proc.exitcode is None and proc.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGINT)

    def kill(self) -> None:
        """SIGKILL the workers that outlived the stop's grace (they ignore SIGTERM by then)."""
        self._end_all("kill", join_s=5)

    def close(self) -> None:
        deadline = time.monotonic() + WORKER_EXIT_S  # past their sentinel, workers exit alone
        for proc in self.procs:
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
        self._end_all("terminate", join_s=10)
        self.tasks.cancel_join_thread()
        self.results.cancel_join_thread()


def _execute_local(
    todo: list[GridPoint],
    uri: str,
    metric: str,
    workers: int,
    threads: int,
    on_result: Callable[[RunOutcome, GridPoint], None],
    on_start: Callable[[GridPoint], None],
) -> bool:
    """Run `todo` on local workers; True when interrupted."""
    pool = _LocalPool(todo, uri, metric, workers, threads)
    done: set[int] = set()

    def handle(events: list[tuple]) -> None:
        for kind, index, *rest in events:
            if kind == "start":
                on_start(todo[index])
            elif kind == "done" and index not in done:
                done.add(index)
                on_result(rest[0], todo[index])
            elif kind == "stopped" and index is not None and index not in done:
                done.add(index)  # cut short by Ctrl-C: its line says what the store holds
                point = todo[index]
                stored = _end_orphaned_run(point.config, uri, rest[-1], "KILLED")
                outcome = RunOutcome(
                    point.run_key, point.config.run_name, stored or "KILLED", error="stopped"
                )
                on_result(outcome, point)
            elif kind == "died" and index not in done:
                done.add(index)
                exitcode, pid = rest
                point = todo[index]
                ended = "KILLED" if pool.stopping else "FAILED"
                stored = _end_orphaned_run(point.config, uri, pid, ended)
                # what the store says of the run, not a guess (a stopped worker's run is KILLED)
                status = stored if stored in ("FAILED", "KILLED") else ended
                why = "stopped" if pool.stopping else f"worker process died (exit code {exitcode})"
                on_result(
                    RunOutcome(point.run_key, point.config.run_name, status, error=why), point
                )

    try:
        while len(done) < len(todo) and pool.alive():
            handle(pool.events(timeout=0.5))
        handle(pool.events(timeout=0.1))
        for index in sorted(set(range(len(todo))) - done):  # every worker died, none left
            point = todo[index]
            on_result(
                RunOutcome(
                    point.run_key, point.config.run_name, "FAILED", error="not run: no worker left"
                ),
                point,
            )
        return False
    except KeyboardInterrupt:
        pool.interrupt()
        # should the stop itself hang, this process's stacks go to the log and it exits
        faulthandler.dump_traceback_later(STOP_GRACE_S + 15, exit=True)
        deadline = time.monotonic() + STOP_GRACE_S
        try:
            with contextlib.suppress(KeyboardInterrupt):
                while pool.alive() and time.monotonic() < deadline:
                    handle(pool.events(timeout=0.5))
                pool.kill()
                handle(pool.events(timeout=0.1))
        finally:
            faulthandler.cancel_dump_traceback_later()  # a notebook's kernel lives on
        return True
    finally:
        pool.close()


def _execute_inline(
    todo: list[GridPoint],
    uri: str,
    metric: str,
    on_result: Callable[[RunOutcome, GridPoint], None],
    on_start: Callable[[GridPoint], None],
) -> bool:
    """Run `todo` one after another in this process; True when interrupted (Ctrl-C: `train`
    marks the run in progress KILLED; finished runs stay FINISHED)."""
    for point in todo:
        on_start(point)
        try:
            outcome = run_point(point.config, uri, metric)
        except KeyboardInterrupt:
            stored = _end_orphaned_run(point.config, uri, os.getpid(), "KILLED")
            cut = RunOutcome(
                point.run_key, point.config.run_name, stored or "KILLED", error="stopped"
            )
            on_result(cut, point)
            return True
        on_result(outcome, point)
    return False


def _end_orphaned_run(cfg: RunConfig, uri: str, pid: int, status: str = "FAILED") -> str | None:
    """A run of process `pid` left RUNNING (its worker died, or was interrupted before train
    could end the run): set its final status. Returns the run's status in the store as it now
    stands (train may have ended it KILLED before its worker went), None when it has no run."""
    from isolab.tracking import client

    stored = None
    for run in _runs_of(cfg, uri, pid):
        stored = run.info.status
        if stored == "RUNNING":
            with contextlib.suppress(Exception):
                client(uri).set_terminated(run.info.run_id, status)
                stored = status
    return stored


# ---- ray backend ------------------------------------------------------------------------------
#: The node addresses a local Ray instance may have: this machine only.
LOOPBACK = ("127.0.0.1", "::1")


def _start_local_ray(ray, num_cpus: int) -> None:
    """Start a Ray instance on this machine that listens on loopback only, or raise.

    Ray binds a local instance's servers (GCS, raylet and object manager, dashboard and
    runtime-env agents, metrics exporters, the driver and every worker) to the node's IP
    address, and takes 127.0.0.1 for it only where it assumes a laptop: its switch
    `ENABLE_RAY_CLUSTER` is off on macOS and Windows (ray-project/ray#18730), while
    `_node_ip_address="127.0.0.1"` is turned back into the network address. The switch is
    off while the instance starts; the node's address is checked after, so that a Ray that
    ignores it fails here instead of opening ports to the network. `address="local"`: a new
    local instance even where `$RAY_ADDRESS` names a cluster (`--address` is for that).
    """
    from ray._private import ray_constants
    from ray.util import get_node_ip_address

    switch = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = switch
    node = get_node_ip_address()
    if node not in LOOPBACK:
        ray.shutdown()
        raise RuntimeError(
            f"the local Ray instance took the address {node}, so it would listen to the network: "
            "run the sweep with --backend local, or on a Ray cluster you secured (--address)."
        )


def _ray_task(cfg: RunConfig, uri: str, metric: str, threads: int, env: dict[str, str]):
    setup_process(threads, env, uri)
    return run_point(cfg, uri, metric)


def _execute_ray(
    todo: list[GridPoint],
    uri: str,
    metric: str,
    workers: int,
    resources,
    address: str | None,
    on_result: Callable[[RunOutcome, GridPoint], None],
    on_start: Callable[[GridPoint], None],
) -> bool:
    """Run `todo` as Ray tasks, at most `workers` in flight; True when interrupted."""
    import ray

    started_here = not ray.is_initialized()
    env = _parent_env() if address else worker_env()
    threads = max(1, int(resources.cpus_per_run))
    task = ray.remote(
        num_cpus=resources.cpus_per_run, num_gpus=resources.gpus_per_run, max_retries=0
    )(_ray_task)
    waiting = list(range(len(todo)))
    in_flight: dict[Any, int] = {}

    def submit() -> None:
        while waiting and len(in_flight) < workers:
            index = waiting.pop(0)
            in_flight[task.remote(todo[index].config, uri, metric, threads, env)] = index
            on_start(todo[index])

    def collect(timeout: float) -> None:
        ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=timeout)
        for ref in ready:
            point = todo[in_flight.pop(ref)]
            try:
                outcome = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - a crashed task is a failed point
                outcome = RunOutcome(
                    point.run_key, point.config.run_name, "FAILED", error=f"{exc}"[:500]
                )
            on_result(outcome, point)

    try:  # from the start: a Ctrl-C while Ray starts still shuts down what it started
        if started_here and address:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        elif started_here:
            _start_local_ray(ray, num_cpus=max(1, math.ceil(workers * resources.cpus_per_run)))
        submit()
        while in_flight:
            collect(timeout=1.0)
            submit()
        return False
    except KeyboardInterrupt:
        for ref in in_flight:
            ray.cancel(ref)  # KeyboardInterrupt inside the task: train marks the run KILLED
        deadline = time.monotonic() + STOP_GRACE_S
        with contextlib.suppress(KeyboardInterrupt):
            while in_flight and time.monotonic() < deadline:
                ready, _ = ray.wait(list(in_flight), num_returns=len(in_flight), timeout=1.0)
                for ref in ready:
                    in_flight.pop(ref)
        return True
    finally:
        if started_here:
            ray.shutdown()


# ---- the sweep ----------------------------------------------------------------------------------
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
) -> tuple[list[RunOutcome], bool]:
    """Run the given points; returns their outcomes and whether Ctrl-C stopped the sweep."""
    if backend not in BACKENDS:
        raise ValueError(f"backend = {backend!r}: choose one of {', '.join(BACKENDS)}.")
    if workers < 1:
        raise ValueError(f"workers = {workers}: must be ≥ 1.")
    uri = resolve_uri(tracking_uri)
    if address and uri.startswith("sqlite"):
        raise ValueError(
            f"a Ray cluster (address {address}) cannot share the SQLite store {uri}: give a "
            "tracking server, --tracking-uri http://HOST:5000 (see `isolab sweep --help`)."
        )
    outcomes: list[RunOutcome] = []
    if not todo:
        return outcomes, False

    def record(outcome: RunOutcome, point: GridPoint) -> None:
        outcomes.append(outcome)
        if on_result is not None:
            on_result(outcome, point)

    started = on_start or (lambda point: None)
    metric = plan.spec.metric
    parent = sweep_parent(plan.spec.name, plan.spec.name, uri)
    with _children_of(parent):
        if backend == "inline":
            interrupted = _execute_inline(todo, uri, metric, record, started)
        elif backend == "local":
            threads = max(1, int(plan.spec.resources.cpus_per_run))
            interrupted = _execute_local(todo, uri, metric, workers, threads, record, started)
        else:
            interrupted = _execute_ray(
                todo, uri, metric, workers, plan.spec.resources, address, record, started
            )
    return outcomes, interrupted


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
) -> SweepReport:
    """Run every point of `plan` not yet FINISHED in the store (see the module docstring)."""
    t0 = time.perf_counter()
    todo, state = pending(plan, tracking_uri, reclaim_remote, limit)
    outcomes, interrupted = execute(
        todo,
        plan,
        tracking_uri,
        workers=workers,
        backend=backend,
        address=address,
        on_result=on_result,
    )
    return SweepReport(
        outcomes=outcomes,
        skipped=len(state.finished),
        live=len(state.live),
        reclaimed=sum(len(v) for v in state.stale.values()),
        interrupted=interrupted,
        wall_time_s=time.perf_counter() - t0,
    )
