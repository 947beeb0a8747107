"""The local backend: K worker processes on this machine, and how they stop.

Workers are started with `spawn` (torch and fork do not mix); each imports torch, TRL and isolab
once (`isolab.sweep.point.setup_process`) and then trains many points in-process. They die with
the runner (Linux `PR_SET_PDEATHSIG`), so a SIGKILLed sweep leaves no orphan writing to the
store. Workers write to the store directly: MLflow sets SQLite's `busy_timeout` to 20 s, and 8
processes hammering one store (≈ 800 write transactions and 700 run searches, 2 busy cores) hit
no lock error, so no server is needed. Workers tell the runner over a queue when a point
starts, reaches a step (`_step_reporter`: its progress line) and ends.

Stopping, from gentle to forced (each step bounded, so that a stop always ends):

1. Ctrl-C (or SIGTERM) in the runner: it sends SIGINT to every worker (`_LocalPool.interrupt`);
   a worker's first one sets `isolab.stop.STOP` and raises KeyboardInterrupt, and `train` ends
   the run KILLED (`_interrupt_once`). Later ones are ignored, so that this write is not cut
   short: a terminal's Ctrl-C reaches the workers too (one process group), then the runner's.
   A worker with no run in progress (still importing, or past its last point) raises nothing:
   a KeyboardInterrupt landing in a library's finalizer mid-import printed its traceback at
   the end of successful sweeps. On SIGINT it starts no point; on SIGTERM (the runner ending
   its pool) it exits at once.
2. A worker still alive `WORKER_STOP_S` after its first SIGINT (a library swallowed the
   interrupt, or hangs at exit) prints every thread's stack to the sweep's log and exits.
3. The runner waits up to its stop grace (`isolab.sweep.runner.STOP_GRACE_S`) for the workers,
   then SIGKILLs those left (`_LocalPool.kill`) and marks their runs KILLED itself.
"""

from __future__ import annotations

import contextlib
import faulthandler
import math
import os
import queue
import signal
import time
from collections.abc import Callable
from typing import Any

from isolab.config import RunConfig
from isolab.stop import STOP
from isolab.sweep.plan import GridPoint
from isolab.sweep.point import (
    RunOutcome,
    end_orphaned_run,
    optimizer_steps,
    run_point,
    setup_process,
    stopped,
    worker_env,
)
from isolab.vocab import FAILED, KILLED

#: A worker still alive this long after its first Ctrl-C prints every thread's stack to the
#: sweep's log and exits (its run is then marked KILLED by the runner): a stop is bounded even
#: where a library swallows the interrupt or hangs at exit.
WORKER_STOP_S = 30.0
#: How long a finished sweep lets its workers exit on their own before it terminates them.
WORKER_EXIT_S = 5.0
#: A worker reports its run's step to the runner at most this often (seconds).
STEP_REPORT_S = 0.5


def _die_with_parent(parent_pid: int) -> None:
    """Ask Linux to SIGKILL this process when the runner dies (a SIGKILLed runner leaves no
    orphans); elsewhere a watchdog thread exits once the parent is gone."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent_pid:  # the runner died before the request above took effect
        os._exit(1)
    import threading

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


#: Whether this worker has no point in progress (`_worker_main` keeps it): a stop then raises
#: nothing.
_idle = False


def _interrupt_once(signum, frame) -> None:
    """First SIGINT/SIGTERM: stop the run (train marks it KILLED); later ones are ignored so
    that the MLflow write of that status is not interrupted in turn. With no run in progress
    nothing is raised (see the module docstring). Nothing is imported here: the trainer's
    module may be half-imported when the signal lands (`isolab.stop` imports nothing, and is
    imported at the top of this module)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if _idle:
        STOP.set()  # the worker's loop starts no point
        if signum == signal.SIGTERM:
            os._exit(0)  # nothing of this worker's is in the store: nothing to end
        return
    # The last resort, armed before anything can block: a timer on a C thread, which neither
    # a swallowed KeyboardInterrupt nor a Python thread stuck at exit can hold up.
    faulthandler.dump_traceback_later(WORKER_STOP_S, exit=True)
    STOP.set()  # the run stops at its next step even if this exception is swallowed
    raise KeyboardInterrupt


def _worker_main(tasks, results, tracking_uri: str, metric: str, threads: int, env, parent_pid):
    global _idle
    _idle = True
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
            _idle = False
            if STOP.is_set():  # asked while the point was being fetched
                break
            results.put(("start", index, pid))
            on_step = _step_reporter(results, index, optimizer_steps(cfg), pid)
            results.put(("done", index, run_point(cfg, tracking_uri, metric, on_step), pid))
            _idle = True
            cfg, index = None, None
        _end_quietly()
    except KeyboardInterrupt:
        if cfg is not None:  # interrupted between `create_run` and train's own handler
            end_orphaned_run(cfg, tracking_uri, pid, KILLED)
        results.put(("stopped", index, pid))  # the point it was running, if any


def _step_reporter(results, index: int, steps: int, pid: int) -> Callable[[int, dict], None]:
    """`train`'s step hook in a worker: ("step", index, step, pid) to the runner, at most
    every `STEP_REPORT_S` (a tiny model steps in tens of milliseconds), and always at the
    run's last step (of `steps`)."""
    last = [-math.inf]

    def report(step: int, metrics: dict) -> None:
        now = time.monotonic()
        if now - last[0] >= STEP_REPORT_S or step >= steps:
            last[0] = now
            results.put(("stepped", index, step, pid))

    return report


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


def run_local(
    todo: list[GridPoint],
    uri: str,
    metric: str,
    workers: int,
    threads: int,
    on_result: Callable[[RunOutcome, GridPoint], None],
    on_start: Callable[[GridPoint], None],
    grace_s: float,
    on_step: Callable[[GridPoint, int], None] = lambda point, step: None,
) -> bool:
    """Run `todo` on local workers; True when interrupted. After Ctrl-C the workers have
    `grace_s` to end their runs before they are killed. `on_step(point, step)`: a running
    point's optimizer step, as its worker reports it (`STEP_REPORT_S`)."""
    pool = _LocalPool(todo, uri, metric, workers, threads)
    done: set[int] = set()

    def handle(events: list[tuple]) -> None:
        for kind, index, *rest in events:
            if kind == "start":
                on_start(todo[index])
            elif kind == "stepped" and index not in done:
                on_step(todo[index], rest[0])
            elif kind == "done" and index not in done:
                done.add(index)
                on_result(rest[0], todo[index])
            elif kind == "stopped" and index is not None and index not in done:
                done.add(index)  # cut short by Ctrl-C: its line says what the store holds
                point = todo[index]
                on_result(stopped(point.config, uri, rest[-1]), point)
            elif kind == "died" and index not in done:
                done.add(index)
                exitcode, pid = rest
                point = todo[index]
                ended = KILLED if pool.stopping else FAILED
                stored = end_orphaned_run(point.config, uri, pid, ended)
                # what the store says of the run, not a guess (a stopped worker's run is KILLED)
                status = stored if stored in (FAILED, KILLED) else ended
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
                    point.run_key, point.config.run_name, FAILED, error="not run: no worker left"
                ),
                point,
            )
        return False
    except KeyboardInterrupt:
        pool.interrupt()
        # should the stop itself hang, this process's stacks go to the log and it exits
        faulthandler.dump_traceback_later(grace_s + 15, exit=True)
        deadline = time.monotonic() + grace_s
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
