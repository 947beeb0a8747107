"""The smoke study end to end: local workers, two runners on one store, Ray (interrupted
sweeps: tests/test_sweep_interrupts.py)."""

from __future__ import annotations

import contextlib
import ipaddress
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import typer
import yaml
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from isolab.cli import sweep as cli_sweep
from isolab.sweep import SweepPlan, SweepSpec, plan_sweep
from isolab.tracking import RUN_KEY_TAG, find_runs, mlflow_key
from isolab.vocab import (
    DEFAULT_METRICS,
    EVAL_AVG,
    FLOPS_LEARNING,
    FLOPS_SEARCH,
    FLOPS_TOTAL,
    RHO,
    ROLLOUTS,
)

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "studies" / "smoke.yaml"
METRICS = (
    *(mlflow_key(m) for m in DEFAULT_METRICS),
    FLOPS_TOTAL,
    FLOPS_SEARCH,
    FLOPS_LEARNING,
    RHO,
    ROLLOUTS,
    "reward",
    "loss",
    "kl",
)


@pytest.fixture(scope="module")
def plan() -> SweepPlan:
    return plan_sweep(SweepSpec.from_yaml(SMOKE))


def cli(*args: str):
    app = typer.Typer()
    cli_sweep.register(app)
    return CliRunner().invoke(app, ["sweep", *args])


def runs_by_status(uri: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for run in find_runs("smoke", uri):
        out.setdefault(run.info.status, []).append(run)
    return out


def assert_complete(plan: SweepPlan, uri: str, points=None) -> dict[str, str]:
    """Every point FINISHED exactly once, with all its metrics at the common checkpoints."""
    client = MlflowClient(uri)
    finished = runs_by_status(uri).get("FINISHED", [])
    by_key: dict[str, list] = {}
    for run in finished:
        by_key.setdefault(run.data.tags[RUN_KEY_TAG], []).append(run)
    points = plan.points if points is None else points
    assert sorted(by_key) == sorted(p.run_key for p in points)
    for p in points:
        (run,) = by_key[p.run_key]
        missing = [m for m in METRICS if m not in run.data.metrics]
        assert not missing, f"{p.config.run_name} lacks {missing}"
        assert run.data.metrics[ROLLOUTS] == p.config.rollouts == 128
        B, M = p.config.B, p.config.M
        history = client.get_metric_history(run.info.run_id, mlflow_key(EVAL_AVG))
        expected = {0, M} | {min(math.ceil(c / B), M) for c in (32, 64, 128)}
        assert {m.step for m in history} == expected
    assert "RUNNING" not in runs_by_status(uri)
    return {key: runs[0].info.run_id for key, runs in by_key.items()}


@pytest.mark.slow  # 45 s: in `make test-all` (the two-runner test covers the runner in `make test`)
def test_smoke_study_with_two_workers(isolab_cache, tracking_uri, plan):
    t0 = time.perf_counter()
    result = cli("run", str(SMOKE), "--workers", "2", "--tracking-uri", tracking_uri)
    assert result.exit_code == 0, result.output
    wall = time.perf_counter() - t0
    assert "12 finished, 0 failed" in result.output
    assert result.output.count("✓") == 12
    first = assert_complete(plan, tracking_uri)
    print(f"12-point smoke study, --workers 2: {wall:.1f} s")
    assert_mlflow_native(tracking_uri, first)

    again = cli("run", str(SMOKE), "--workers", "2", "--tracking-uri", tracking_uri)
    assert again.exit_code == 0, again.output
    assert "12 finished (skipped)" in again.output and "0 to run" in again.output
    assert assert_complete(plan, tracking_uri) == first


def assert_mlflow_native(uri: str, run_ids: dict[str, str]) -> None:
    """The sweep is a parent run with every point its child; the experiment opens on its runs
    table; each run is named with its seed and records its code's commit and its problem splits as dataset inputs."""
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("smoke")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    (parent,) = client.search_runs([exp.experiment_id], "tags.`isolab.kind` = 'sweep'")
    assert parent.data.tags["isolab.sweep"] == "smoke"
    for run_id in run_ids.values():
        run = client.get_run(run_id)
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert run.info.run_name.endswith(f"·s{run.data.params['seed']}"), run.info.run_name
        assert len(run.data.tags["mlflow.source.git.commit"]) == 40
        inputs = {d.dataset.name: d for d in run.inputs.dataset_inputs}
        assert set(inputs) == {"arithmetic-easy-train", "arithmetic-easy-eval"}
        contexts = {d.tags[0].value for d in inputs.values()}
        assert contexts == {"train", "eval"}


def _start(
    uri: str,
    log: Path,
    spec: Path = SMOKE,
    how: tuple[str, ...] = ("--workers", "2"),
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "isolab.cli", "sweep", "run", str(spec), *how]
    return subprocess.Popen(
        [*cmd, "--tracking-uri", uri],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, as a terminal job would be
    )


def test_two_runners_on_one_spec_and_store_split_the_work(
    isolab_cache, tracking_uri, tmp_path, plan
):
    """Each point is leased in the store (`isolab.tracking.leases`) before it runs: two runners started
    together train every point once between them, not twice."""
    data = yaml.safe_load(SMOKE.read_text())
    # two of the smoke study's points: both runners lease the first at once, one gets it and
    # the other moves on, so each runner meets the other's lease
    data["axes"] = {"n": [8, 16], "B_p": [2]}
    spec = tmp_path / "smoke2.yaml"
    spec.write_text(yaml.safe_dump(data))
    two = plan_sweep(SweepSpec.from_yaml(spec))
    logs = [tmp_path / f"runner{i}.log" for i in (1, 2)]
    one_thread = {"OMP_NUM_THREADS": "1"}  # two runners, two cores: no oversubscription
    procs = [
        _start(tracking_uri, log, spec, how=("--backend", "inline"), env=one_thread) for log in logs
    ]
    for proc, log in zip(procs, logs, strict=True):
        assert proc.wait(timeout=400) == 0, log.read_text()
    run_ids = assert_complete(two, tracking_uri)  # every point FINISHED exactly once
    assert_mlflow_native(tracking_uri, run_ids)
    text = " ".join(" ".join(log.read_text().split()) for log in logs)
    # they met: one found a point the other held (or, started late, one it was running)
    assert "another runner" in text or "1 running elsewhere" in text, text[-2000:]


def test_smoke_study_on_a_local_ray_instance(isolab_cache, tracking_uri, plan, monkeypatch):
    """One point as a Ray task on a local instance of one CPU: the backend end to end. Every
    socket Ray's processes listen on, seen while the task runs, is on loopback, and none of
    those processes outlives the sweep."""
    ray = pytest.importorskip("ray")
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    # what this test process listened on already (an earlier vLLM test's torch TCPStore) is not
    # Ray's: only the sockets opened while the sweep runs count
    mine = {(c.laddr.ip, c.laddr.port) for c in me.net_connections("tcp")}
    ray_procs: dict[int, psutil.Process] = {}
    listeners: set[tuple[str, str, int]] = set()
    wait = ray.wait

    def wait_and_look(*args, **kwargs):  # the runner polls its tasks with ray.wait
        for proc in [me, *me.children(recursive=True)]:
            if proc.pid in before:
                continue
            ray_procs.setdefault(proc.pid, proc)
            with contextlib.suppress(psutil.Error):
                listeners.update(
                    (proc.name(), c.laddr.ip, c.laddr.port)
                    for c in proc.net_connections("tcp")
                    if c.status == psutil.CONN_LISTEN
                    and not (proc.pid == me.pid and (c.laddr.ip, c.laddr.port) in mine)
                )
        return wait(*args, **kwargs)

    monkeypatch.setattr(ray, "wait", wait_and_look)
    result = cli(
        "run",
        str(SMOKE),
        "--backend",
        "ray",
        "--workers",
        "1",
        "--limit",
        "1",
        "--tracking-uri",
        tracking_uri,
    )
    assert result.exit_code == 0, result.output
    assert "1 finished, 0 failed" in result.output
    assert_complete(plan, tracking_uri, points=plan.points[:1])
    names = {name for name, _, _ in listeners}
    assert {"gcs_server", "raylet"} <= names, listeners  # the look saw Ray running
    exposed = sorted(x for x in listeners if not _loopback(x[1]))
    assert not exposed, f"Ray listens beyond loopback: {exposed}"
    deadline = time.monotonic() + 15  # the agents exit once they see the raylet gone
    while (left := [p for p in ray_procs.values() if p.pid != me.pid and _alive(p)]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.5)
    assert not left, f"Ray processes outlive the sweep: {left}"


def _loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    return (getattr(address, "ipv4_mapped", None) or address).is_loopback


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_ray_cluster_needs_a_tracking_server(tracking_uri, tmp_path):
    result = cli(
        "run",
        str(SMOKE),
        "--backend",
        "ray",
        "--address",
        "ray://x:10001",
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'x.db'}",
    )
    assert result.exit_code == 2 and "tracking" in result.output
    assert not (tmp_path / "x.db").exists()


def test_run_sweep_shows_the_store_before_any_point_and_ctrl_c_there_ends_it_interrupted(
    tracking_uri, plan
):
    """`on_pending` (what `isolab sweep run` prints its header and starts its bars from) gets the
    points to run and the store's state before any point starts; a Ctrl-C (or SIGTERM) at that
    moment is an interrupted sweep in the report, not a traceback, and no point starts."""
    from isolab.sweep import run_sweep

    seen: list[tuple[list[str], int]] = []
    started: list[str] = []

    def on_pending(todo, state) -> None:
        seen.append(([p.run_key for p in todo], len(state.finished)))
        raise KeyboardInterrupt

    report = run_sweep(
        plan,
        tracking_uri,
        backend="inline",
        limit=2,
        on_pending=on_pending,
        on_start=lambda point: started.append(point.run_key),
    )
    assert seen == [([p.run_key for p in plan.points[:2]], 0)]
    assert report.interrupted and report.outcomes == [] and started == []
    assert "FINISHED" not in runs_by_status(tracking_uri)
