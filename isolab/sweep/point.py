"""One grid point, run in the process that holds it: its outcome (`RunOutcome`), its training
under the point's lease (`run_point`), and what a process needs before it trains any
(`setup_process`, `worker_env`). Every backend (`isolab.sweep.local`, `isolab.sweep.ray_backend`,
the runner's inline loop) runs points through `run_point`.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from isolab.config import RunConfig
from isolab.logs import quiet_worker, without_sklearn
from isolab.paths import cache_root
from isolab.tracking import PARENT_ENV, find_runs
from isolab.vocab import FAILED, KILLED, RUNNING, SKIPPED, PointStatus, RunStatus


@dataclass
class RunOutcome:
    """One grid point after the runner tried it.

    Attributes:
        run_key: the point's run key.
        run_name: its readable name.
        status: FINISHED, FAILED or KILLED; SKIPPED when another runner on the same spec and
            store trains or trained the point (`isolab.sweep.resume.lease`).
        run_id: the MLflow run (None when it failed before the run was created, or SKIPPED).
        wall_time_s: wall time of the run.
        metric: the spec's metric at the last evaluation (NaN when missing).
        error: the exception of a failed run; why a point was SKIPPED or stopped.
    """

    run_key: str
    run_name: str
    status: PointStatus
    run_id: str | None = None
    wall_time_s: float = 0.0
    metric: float = math.nan
    error: str | None = None


def optimizer_steps(cfg: RunConfig) -> int:
    """The optimizer steps of a run, as `train`'s step hook counts them: M batches of
    rollouts, each used for `num_iterations` updates."""
    return cfg.M * cfg.num_iterations


def run_point(
    cfg: RunConfig,
    tracking_uri: str,
    metric: str,
    on_step: Callable[[int, dict], None] | None = None,
) -> RunOutcome:
    """Train one grid point in this process, holding its lease; a failure becomes a FAILED
    outcome, not a raise; a point another runner holds or finished is SKIPPED. `on_step` is
    `train`'s step hook (`on_step(step, metrics)`, of `optimizer_steps(cfg)`).

    KeyboardInterrupt propagates (the run is marked KILLED by `train`).
    """
    from isolab.rl.train import train
    from isolab.sweep.resume import finished_elsewhere, lease

    t0 = time.perf_counter()
    with lease(cfg.run_key, cfg.experiment, tracking_uri) as mine:
        # Lease first, then look for a FINISHED run: the other way round, a runner could find
        # none while another trains the point, then take the lease that one has just released
        # on finishing, and train the point a second time.
        if not mine or finished_elsewhere(cfg.run_key, cfg.experiment, cfg.model, tracking_uri):
            why = "being trained by another runner" if not mine else "finished by another runner"
            return RunOutcome(cfg.run_key, cfg.run_name, SKIPPED, None, 0.0, error=why)
        return _train_point(train, cfg, tracking_uri, metric, t0, on_step)


def _train_point(
    train, cfg: RunConfig, tracking_uri: str, metric: str, t0: float, on_step
) -> RunOutcome:
    import shutil

    from isolab.rl.trainer import Checkpointing
    from isolab.sweep.resume import paused_checkpoint

    # a run a gone adaptive sweep paused carries on in its MLflow run: one run per key
    paused = paused_checkpoint(cfg.run_key, cfg.experiment, tracking_uri)
    carry_on = Checkpointing(lambda step, path, metrics: None, paused) if paused else None
    try:
        result = train(cfg, tracking_uri=tracking_uri, on_step=on_step, checkpointing=carry_on)
        if paused is not None:
            shutil.rmtree(paused, ignore_errors=True)
    except Exception as exc:  # one bad point must not stop the sweep
        run_id = _latest_run_id(cfg, tracking_uri)
        return RunOutcome(
            cfg.run_key,
            cfg.run_name,
            FAILED,
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


def runs_of(cfg: RunConfig, uri: str, pid: int) -> list:
    """The runs of `cfg` that process `pid` created, newest first (best effort)."""
    try:
        runs = find_runs(cfg.experiment, uri, run_key=cfg.run_key)
    except Exception:  # for reports and clean-up only
        return []
    return [r for r in runs if r.data.tags.get("isolab.pid") == str(pid)]


def _latest_run_id(cfg: RunConfig, uri: str) -> str | None:
    mine = runs_of(cfg, uri, os.getpid())
    return mine[0].info.run_id if mine else None


def end_orphaned_run(
    cfg: RunConfig, uri: str, pid: int, status: RunStatus = FAILED
) -> RunStatus | None:
    """A run of process `pid` left RUNNING (its worker died, or was interrupted before train
    could end the run): set its final status. Returns the run's status in the store as it now
    stands (train may have ended it KILLED before its worker went), None when it has no run."""
    from isolab.tracking import client

    stored: RunStatus | None = None
    for run in runs_of(cfg, uri, pid):
        # MLflow types a status as any string; isolab's runs only ever hold a RunStatus
        stored = cast(RunStatus, run.info.status)
        if stored == RUNNING:
            with contextlib.suppress(Exception):
                client(uri).set_terminated(run.info.run_id, status)
                stored = status
    return stored


def stopped(cfg: RunConfig, uri: str, pid: int) -> RunOutcome:
    """The outcome of a point that Ctrl-C cut short in process `pid`: its run ends KILLED, and
    the outcome says what the store holds (train may have ended the run itself)."""
    stored = end_orphaned_run(cfg, uri, pid, KILLED)
    return RunOutcome(cfg.run_key, cfg.run_name, stored or KILLED, error="stopped")


def setup_process(threads: int, env: dict[str, str], tracking_uri: str | None = None) -> None:
    """Prepare a worker: environment, torch threads, quiet libraries, heavy imports done once,
    and the connection to the store opened (so that none of it counts in a run's wall time)."""
    os.environ.update(env)
    quiet_worker()  # a worker's output is its runner's progress display
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

    return {"ISOLAB_CACHE": str(cache_root().resolve()), **parent_env()}


def parent_env() -> dict[str, str]:
    """The sweep's parent run, for the workers' runs to be its children."""
    return {PARENT_ENV: os.environ[PARENT_ENV]} if os.environ.get(PARENT_ENV) else {}
