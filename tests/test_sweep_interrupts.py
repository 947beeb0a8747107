"""Interrupted sweeps: a SIGKILLed runner resumes without losing or redoing a run, Ctrl-C stops
within its bound and says how to resume, a worker that swallows Ctrl-C still stops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import yaml
from mlflow.tracking import MlflowClient
from test_sweep_run import REPO, SMOKE, _start, assert_complete, runs_by_status
from test_sweep_run import cli as sweep_cli

from isolab.cli.common import EXIT_GRACE_S
from isolab.sweep import SweepSpec, plan_sweep
from isolab.sweep import resume as sweep
from isolab.sweep.runner import STOP_GRACE_S
from isolab.tracking import KIND_TAG, RUN_KEY_TAG


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


def test_interrupted_sweeps_resume_without_losing_or_redoing_runs(
    isolab_cache, tracking_uri, tmp_path
):
    """Three points on one worker; the runner is SIGKILLed at a fixed moment (the first point
    FINISHED, the second RUNNING), then the same command resumes: nothing finished is lost or
    redone, the orphan is marked FAILED and redone."""
    log = tmp_path / "sweep.log"
    # three of the smoke study's points with a larger evaluation, so that a point runs long
    # enough (seconds) for the test to catch the second one mid-flight on a fast machine
    data = yaml.safe_load(SMOKE.read_text())
    data["axes"] = {"n": [2, 4, 8], "B_p": [2]}
    data["base"].update(eval_problems=32, eval_k_samples=4)
    spec = tmp_path / "smoke3.yaml"
    spec.write_text(yaml.safe_dump(data))
    plan = plan_sweep(SweepSpec.from_yaml(spec))
    assert len(plan.points) == 3
    one = ("--workers", "1")
    # 1. SIGKILL of the runner alone: its worker dies with it, its run stays RUNNING.
    proc = _start(tracking_uri, log, spec, how=one)
    _wait_for(tracking_uri, 1, 1, proc)  # one run finished, the next mid-run
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    time.sleep(2)
    state = runs_by_status(tracking_uri)
    orphans = state.get("RUNNING", [])
    assert len(orphans) == 1, "the kill should leave the run in flight RUNNING"
    for run in orphans:
        assert not sweep.process_alive(int(run.data.tags["isolab.pid"])), "a worker outlived it"
    done_2 = {r.data.tags[RUN_KEY_TAG]: r.info.run_id for r in state["FINISHED"]}
    assert len(done_2) == 1

    # 2. Run again to the end: nothing finished is lost or redone; dead RUNNING runs → FAILED.
    # (inline: the resume reads the store, whatever backend runs the rest; no worker start-up;
    # in this process, another than the killed runner's: no Python start and import either)
    again = sweep_cli("run", str(spec), "--backend", "inline", "--tracking-uri", tracking_uri)
    assert again.exit_code == 0, again.output
    final = assert_complete(plan, tracking_uri)
    assert done_2.items() <= final.items()
    client = MlflowClient(tracking_uri)
    for run in orphans:
        assert client.get_run(run.info.run_id).info.status == "FAILED"
    assert _parent_status(tracking_uri) == "FINISHED"  # every point ran: the sweep is done
    assert "1 finished (skipped)" in " ".join(again.output.split())


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
    print(f"\nCtrl-C: the sweep exited {time.time() - signalled_ms / 1000:.1f} s after the signal")
    assert code == 130, text
    assert "Resume with:" in text, text
    state = runs_by_status(tracking_uri)
    assert set(state) <= {"FINISHED", "KILLED"}, {k: len(v) for k, v in state.items()}
    assert state.get("KILLED"), "the run cut short should be KILLED"
    # one line per run cut short, with the status the store gives it (not "worker died")
    for run in state["KILLED"]:
        assert f"✗ KILLED {run.data.tags[RUN_KEY_TAG]}" in text, text
    assert "worker process died" not in text and "Traceback" not in text, text
    started_late = [
        r.info.run_name
        for runs in state.values()
        for r in runs
        if r.info.start_time > signalled_ms + 1000  # 1 s for the clock of the store's writes
    ]
    assert not started_late, f"runs started after Ctrl-C: {started_late}\n{text}"
    # the sweep's parent says it was cut short (`test_a_completed_sweep_s_parent_...`: then
    # FINISHED once a rerun completes it)
    assert _parent_status(tracking_uri) == "KILLED"


def test_a_completed_sweep_s_parent_is_finished_again(tracking_uri):
    """A parent left KILLED by an interrupted run ends FINISHED when a later run completes the
    sweep (`finish_parent`), or finds nothing left to run (`complete_parent`); an interrupted
    one stays KILLED. On a real store, with a real child run."""
    from isolab.tracking import sweep_parent
    from isolab.tracking.parents import complete_parent, finish_parent

    parent = sweep_parent("cut", "cut", tracking_uri)
    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name("cut").experiment_id
    child = client.create_run(exp, tags={"mlflow.parentRunId": parent})
    client.set_terminated(child.info.run_id, status="FINISHED")
    finish_parent("cut", parent, tracking_uri, interrupted=True)
    assert client.get_run(parent).info.status == "KILLED"
    finish_parent("cut", parent, tracking_uri)
    assert client.get_run(parent).info.status == "FINISHED"
    client.set_terminated(parent, status="KILLED")
    complete_parent("cut", "cut", tracking_uri)
    assert client.get_run(parent).info.status == "FINISHED"
    complete_parent("none", "none", tracking_uri)  # no parent: nothing is made
    assert not client.search_runs([client.get_experiment_by_name("none").experiment_id])


def _parent_status(uri: str) -> str:
    """The status of the sweep's parent run (the one run tagged as a sweep)."""
    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    (parent,) = client.search_runs(experiments, filter_string=f"tags.`{KIND_TAG}` = 'sweep'")
    return parent.info.status


def test_a_worker_that_swallows_ctrl_c_still_stops_and_shows_where(tmp_path):
    """A library that catches KeyboardInterrupt (or hangs at exit) cannot keep a stopped worker
    alive: after WORKER_STOP_S it prints every thread's stack and exits."""
    script = tmp_path / "stuck.py"
    script.write_text(
        "import signal, time\n"
        "from isolab.sweep import local\n"
        "local.WORKER_STOP_S = 2.0\n"
        "signal.signal(signal.SIGINT, local._interrupt_once)\n"
        "def stuck_in_a_library():\n"
        "    ready = False\n"
        "    while True:\n"
        "        try:  # 'ready' inside: a Ctrl-C that lands during the print is swallowed too\n"
        "            if not ready:\n"
        "                ready = True\n"
        "                print('ready', flush=True)\n"
        "            time.sleep(0.1)\n"
        "        except KeyboardInterrupt:\n"
        "            pass\n"
        "stuck_in_a_library()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=REPO,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout.readline().strip() == "ready"
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode != 0 and time.monotonic() - t0 < 60
    assert "stuck_in_a_library" in err, err  # where it was stuck, for the sweep's log
