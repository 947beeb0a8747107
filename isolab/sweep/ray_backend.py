"""The Ray backend: each point is a Ray task with the spec's CPUs / GPUs, at most `workers` in
flight; on a local Ray instance by default (listening on 127.0.0.1 only, and shut down with the
sweep: `start_local_ray`), or on a cluster (`address`) logging to a tracking server.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from typing import Any

from isolab.config import RunConfig
from isolab.sweep.plan import GridPoint
from isolab.sweep.point import RunOutcome, parent_env, run_point, setup_process, worker_env
from isolab.vocab import FAILED

#: The node addresses a local Ray instance may have: this machine only.
LOOPBACK = ("127.0.0.1", "::1")


def start_local_ray(ray, num_cpus: int) -> None:
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


def run_ray(
    todo: list[GridPoint],
    uri: str,
    metric: str,
    workers: int,
    resources,
    address: str | None,
    on_result: Callable[[RunOutcome, GridPoint], None],
    on_start: Callable[[GridPoint], None],
    grace_s: float,
) -> bool:
    """Run `todo` as Ray tasks, at most `workers` in flight; True when interrupted. After
    Ctrl-C the tasks are cancelled and have `grace_s` to end their runs."""
    import ray

    started_here = not ray.is_initialized()
    # a cluster's nodes have their own model cache: only the parent run travels there
    env = parent_env() if address else worker_env()
    task = ray.remote(max_retries=0)(_ray_task)
    waiting = list(range(len(todo)))
    in_flight: dict[Any, int] = {}

    def submit() -> None:
        while waiting and len(in_flight) < workers:
            index = waiting.pop(0)
            cfg = todo[index].config
            # a run of K processes (`processes`) is one task with K processes' resources, so
            # Ray places all of them on one node (torchrun --standalone launches them there)
            cpus, gpus = resources.for_processes(cfg.processes)
            threads = max(1, int(cpus))
            ref = task.options(num_cpus=cpus, num_gpus=gpus).remote(cfg, uri, metric, threads, env)
            in_flight[ref] = index
            on_start(todo[index])

    def collect(timeout: float) -> None:
        ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=timeout)
        for ref in ready:
            point = todo[in_flight.pop(ref)]
            try:
                outcome = ray.get(ref)
            except Exception as exc:  # a crashed task is a failed point
                outcome = RunOutcome(
                    point.run_key, point.config.run_name, FAILED, error=f"{exc}"[:500]
                )
            on_result(outcome, point)

    try:  # from the start: a Ctrl-C while Ray starts still shuts down what it started
        if started_here and address:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        elif started_here:
            widest = max(resources.for_processes(p.config.processes)[0] for p in todo)
            start_local_ray(ray, num_cpus=max(1, math.ceil(workers * widest)))
        submit()
        while in_flight:
            collect(timeout=1.0)
            submit()
        return False
    except KeyboardInterrupt:
        for ref in in_flight:
            ray.cancel(ref)  # KeyboardInterrupt inside the task: train marks the run KILLED
        deadline = time.monotonic() + grace_s
        with contextlib.suppress(KeyboardInterrupt):
            while in_flight and time.monotonic() < deadline:
                ready, _ = ray.wait(list(in_flight), num_returns=len(in_flight), timeout=1.0)
                for ref in ready:
                    in_flight.pop(ref)
        return True
    finally:
        if started_here:
            ray.shutdown()
