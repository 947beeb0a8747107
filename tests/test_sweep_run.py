"""The smoke study end to end: two local workers, a killed and resumed runner, Ray."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer
import yaml
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from isolab.cli import sweep as cli_sweep
from isolab.cli.common import EXIT_GRACE_S
from isolab.sweep import SweepPlan, SweepSpec, plan_sweep
from isolab.sweep import store as sweep
from isolab.sweep.runner import STOP_GRACE_S
from isolab.tracking import RUN_KEY_TAG, find_runs

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "studies" / "smoke.yaml"
METRICS = (
    "eval/avg_at_4",
    "eval/best_at_4",
    "eval/worst_at_4",
    "eval/avg_at_1",
    "flops/total",
    "flops/search",
    "flops/learning",
    "compute/rho",
    "compute/rollouts",
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
        assert run.data.metrics["compute/rollouts"] == p.config.rollouts == 128
        B, M = p.config.B, p.config.M
        history = client.get_metric_history(run.info.run_id, "eval/avg_at_4")
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
    table; each run records its code's commit and its problem splits as dataset inputs."""
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("smoke")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    (parent,) = client.search_runs([exp.experiment_id], "tags.`isolab.kind` = 'sweep'")
    assert parent.data.tags["isolab.sweep"] == "smoke"
    for run_id in run_ids.values():
        run = client.get_run(run_id)
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
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


def _wait_for(
    uri: str, finished: int, running: int, proc: subprocess.Popen, timeout_s: float = 240
) -> None:
    """Until `finished` runs are FINISHED and `running` are RUNNING (mid-sweep)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = runs_by_status(uri)
        counts = {k: len(v) for k, v in state.items()}
        assert proc.poll() is None, f"the sweep ended before it could be interrupted: {counts}"
        if len(state.get("FINISHED", [])) >= finished and len(state.get("RUNNING", [])) >= running:
            return
        time.sleep(0.1)
    raise AssertionError(f"not {finished} finished and {running} running after {timeout_s} s")


@pytest.mark.slow  # 70–100 s: in `make test-all`, to keep `make test` within 10 minutes
def test_interrupted_sweeps_resume_without_losing_or_redoing_runs(
    isolab_cache, tracking_uri, tmp_path
):
    log = tmp_path / "sweep.log"
    # The smoke study with a larger evaluation, so that each point runs long enough for the
    # test to catch the sweep mid-flight on a fast machine (seconds per point, not one).
    data = yaml.safe_load(SMOKE.read_text())
    data["base"].update(eval_problems=64, eval_k_samples=8)
    spec = tmp_path / "smoke.yaml"
    spec.write_text(yaml.safe_dump(data))
    plan = plan_sweep(SweepSpec.from_yaml(spec))
    # 1. SIGKILL of the runner alone: its workers die with it, their runs stay RUNNING.
    proc = _start(tracking_uri, log, spec)
    _wait_for(tracking_uri, 1, 1, proc)  # one run finished, one mid-run
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    time.sleep(2)
    state = runs_by_status(tracking_uri)
    orphans = state.get("RUNNING", [])
    assert orphans, "the kill should leave runs RUNNING"
    for run in orphans:
        assert not sweep.process_alive(int(run.data.tags["isolab.pid"])), "a worker outlived it"
    done_2 = {r.data.tags[RUN_KEY_TAG]: r.info.run_id for r in state["FINISHED"]}

    # 2. Run again to the end: nothing finished is lost or redone; dead RUNNING runs → FAILED.
    proc = _start(tracking_uri, log, spec)
    assert proc.wait(timeout=400) == 0, log.read_text()
    final = assert_complete(plan, tracking_uri)
    assert done_2.items() <= final.items()
    client = MlflowClient(tracking_uri)
    for run in orphans:
        assert client.get_run(run.info.run_id).info.status == "FAILED"
    assert f"{len(done_2)} finished (skipped)" in log.read_text()


def test_two_runners_on_one_spec_and_store_split_the_work(
    isolab_cache, tracking_uri, tmp_path, plan
):
    """Each point is claimed (a lease beside the store) before it runs: two runners started
    together train every point once between them, not twice."""
    data = yaml.safe_load(SMOKE.read_text())
    data["axes"] = {"n": [2, 4, 8, 16], "B_p": [2]}  # four of the smoke study's points
    spec = tmp_path / "smoke4.yaml"
    spec.write_text(yaml.safe_dump(data))
    four = plan_sweep(SweepSpec.from_yaml(spec))
    logs = [tmp_path / f"runner{i}.log" for i in (1, 2)]
    one_thread = {"OMP_NUM_THREADS": "1"}  # two runners, two cores: no oversubscription
    procs = [
        _start(tracking_uri, log, spec, how=("--backend", "inline"), env=one_thread) for log in logs
    ]
    for proc, log in zip(procs, logs, strict=True):
        assert proc.wait(timeout=400) == 0, log.read_text()
    run_ids = assert_complete(four, tracking_uri)  # every point FINISHED exactly once
    assert_mlflow_native(tracking_uri, run_ids)
    text = " ".join(" ".join(log.read_text().split()) for log in logs)
    assert "another runner" in text, text[-2000:]


def test_ctrl_c_stops_cleanly_and_says_how_to_resume(isolab_cache, tracking_uri, tmp_path):
    """Ctrl-C (SIGINT to the job's process group) mid-sweep: the sweep exits 130 promptly, every
    run it had started ends KILLED or FINISHED (none left RUNNING), none starts after the signal,
    and the message says how to resume."""
    log = tmp_path / "sweep.log"
    data = yaml.safe_load(SMOKE.read_text())  # seconds per point, so the signal lands mid-run
    data["base"].update(eval_problems=64, eval_k_samples=8)
    spec = tmp_path / "smoke.yaml"
    spec.write_text(yaml.safe_dump(data))
    proc = _start(tracking_uri, log, spec)
    _wait_for(tracking_uri, 0, 2, proc)  # both workers mid-run
    signalled_ms = time.time() * 1000
    os.killpg(proc.pid, signal.SIGINT)
    try:
        # the runner's grace, its SIGKILL of workers still there, then its own way out
        code = proc.wait(timeout=STOP_GRACE_S + EXIT_GRACE_S + 15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(
            f"the sweep outlived its stop: {runs_by_status(tracking_uri)}\n{log.read_text()}"
        )
    text = log.read_text()
    assert code == 130, text
    assert "Resume with:" in text, text
    state = runs_by_status(tracking_uri)
    assert set(state) <= {"FINISHED", "KILLED"}, {k: len(v) for k, v in state.items()}
    assert state.get("KILLED"), "the run cut short should be KILLED"
    started_late = [
        r.info.run_name
        for runs in state.values()
        for r in runs
        if r.info.start_time > signalled_ms + 1000  # 1 s for the clock of the store's writes
    ]
    assert not started_late, f"runs started after Ctrl-C: {started_late}\n{text}"


def test_a_worker_that_swallows_ctrl_c_still_stops_and_shows_where(tmp_path):
    """A library that catches KeyboardInterrupt (or hangs at exit) cannot keep a stopped worker
    alive: after WORKER_STOP_S it prints every thread's stack and exits."""
    script = tmp_path / "stuck.py"
    script.write_text(
        "import signal, time\n"
        "from isolab.sweep import runner\n"
        "runner.WORKER_STOP_S = 2.0\n"
        "signal.signal(signal.SIGINT, runner._interrupt_once)\n"
        "print('ready', flush=True)\n"
        "def stuck_in_a_library():\n"
        "    while True:\n"
        "        try:\n"
        "            time.sleep(0.1)\n"
        "        except KeyboardInterrupt:\n"
        "            pass\n"
        "stuck_in_a_library()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)], cwd=REPO, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout.readline().strip() == "ready"
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode != 0 and time.monotonic() - t0 < 60
    assert "stuck_in_a_library" in err, err  # where it was stuck, for the sweep's log


@pytest.mark.slow  # 45 s: in `make test-all`, to keep `make test` within 10 minutes
def test_smoke_study_on_a_local_ray_instance(isolab_cache, tracking_uri, plan):
    pytest.importorskip("ray")
    # four points, two Ray tasks at a time: the backend end to end, in half the smoke study's time
    result = cli(
        "run", str(SMOKE), "--backend", "ray", "--workers", "2", "--limit", "4",
        "--tracking-uri", tracking_uri,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "4 finished, 0 failed" in result.output
    assert_complete(plan, tracking_uri, points=plan.points[:4])


def test_ray_cluster_needs_a_tracking_server(tracking_uri, tmp_path):
    result = cli(
        "run", str(SMOKE), "--backend", "ray", "--address", "ray://x:10001",
        "--tracking-uri", f"sqlite:///{tmp_path / 'x.db'}",
    )  # fmt: skip
    assert result.exit_code == 2 and "tracking" in result.output
    assert not (tmp_path / "x.db").exists()
