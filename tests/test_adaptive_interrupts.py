"""A live adaptive sweep interrupted (issue 52): a stopped arm stays stopped, the parent says
the sweep is not done, and a plain `sweep run` after a killed adaptive sweep neither redoes nor
doubles its runs. (Split from tests/test_adaptive_live.py, so that xdist can run these two long
tests beside that file's others: `make test` hands out whole files.)"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ADAPTIVE_SPEC, adaptive_runs, rollouts_logged
from mlflow.tracking import MlflowClient

from isolab.tracking import RUN_KEY_TAG, mlflow_key
from isolab.vocab import EVAL_AVG

pytest.importorskip("ray", reason="ray is not installed (pip install -e '.[dev]')")

ARGS = ("--workers", "2", "--z", "2.5", "--grace", "1", "--eta", "2.0")


def _start_adaptive(tmp_path: Path, uri: str, log: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "isolab.cli", "sweep", "adaptive", "spec.yaml", *ARGS]
    return subprocess.Popen(
        [*cmd, "--tracking-uri", uri],
        cwd=tmp_path,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, as a terminal job would be
    )


def _paused_at(
    uri: str, C: int, proc: subprocess.Popen, log: Path, behind: bool = False, timeout_s=300
):
    """Wait for a run paused (SCHEDULED) at rung C (`behind`: while another run is still short
    of C, so the rung is judged only after a resume); the run."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        with contextlib.suppress(Exception):  # the store may not exist yet
            runs = adaptive_runs(uri)
            spent = {r.info.run_id: max(rollouts_logged(uri, r), default=0) for r in runs}
            short = not behind or len(runs) < 3 or min(spent.values()) < C
            for run in runs:
                if run.info.status == "SCHEDULED" and spent[run.info.run_id] == C and short:
                    return run
        time.sleep(0.2)
    raise AssertionError(f"no run paused at C = {C} after {timeout_s} s: {log.read_text()}")


def _processes_gone(uri: str, timeout_s: float = 120) -> None:
    """Wait until no process that trained a RUNNING run is alive. Ray's trial workers outlive a
    SIGKILL of the sweep's group by seconds (they end when they find their raylet gone); a
    command run before that would rightly leave their runs to them."""
    from isolab.tracking.leases import process_alive

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pids = {
            int(r.data.tags["isolab.pid"])
            for r in adaptive_runs(uri)
            if r.info.status == "RUNNING" and "isolab.pid" in r.data.tags
        }
        if not any(process_alive(pid) for pid in pids):
            return
        time.sleep(0.5)
    raise AssertionError(f"processes {pids} still alive {timeout_s} s after the SIGKILL")


def _store_settled(uri: str, quiet_s: float = 10, timeout_s: float = 120) -> None:
    """Wait until the sweep's runs (their ids, statuses and tags) stay unchanged for `quiet_s`:
    a Ray trial that was starting as the sweep was killed can still create or tag its run
    after `_processes_gone` found no live pid to wait for (it had none tagged yet). Once a
    subprocess's start hid this; the fresh-clone CI met it once in-process."""
    deadline, last, since = time.monotonic() + timeout_s, None, time.monotonic()
    while time.monotonic() < deadline:
        now = sorted(
            (r.info.run_id, r.info.status, tuple(sorted(r.data.tags.items())))
            for r in adaptive_runs(uri)
        )
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.5)
    raise AssertionError(f"the store still changed {timeout_s} s after the SIGKILL")


def _plain_sweep(cli, uri: str) -> None:
    """`isolab sweep run spec.yaml` (not adaptive) on the same store; it must succeed. In this
    process (another than the adaptive sweep's, as a user's next command would be): a Python
    start and TRL's import fewer than a subprocess."""
    plain = cli("sweep", "run", "spec.yaml", "--backend", "inline", "--tracking-uri", uri)
    assert plain.exit_code == 0, plain.output


def _parent(uri: str):
    c = MlflowClient(uri)
    exp = c.get_experiment_by_name("adaptive-smoke")
    (parent,) = c.search_runs([exp.experiment_id], filter_string="tags.`isolab.kind` = 'sweep'")
    return parent


def _plant(db: Path, run_id: str, rollouts: int, value: float) -> None:
    """Set a run's evaluation at `rollouts` to `value` in the store (the run then ranks last
    there, whatever the tiny model's rewards were): makes the test's rung decision certain."""
    with sqlite3.connect(db) as con:
        (step,) = con.execute(
            "SELECT step FROM metrics WHERE run_uuid = ? AND key = 'compute/rollouts' AND "
            "value = ?",
            (run_id, rollouts),
        ).fetchone()
        for table in ("metrics", "latest_metrics"):
            con.execute(
                f"UPDATE {table} SET value = ? WHERE run_uuid = ? AND key = ? AND step = ?",
                (value, run_id, mlflow_key(EVAL_AVG), step),
            )


def test_a_stopped_arm_stays_stopped_after_ctrl_c_and_resume(isolab_cache, cli, tmp_path):
    """Ctrl-C while one run waits at rung 32 with its checkpoint and the rung is not yet judged;
    that run is the worst there. Resumed, the rung is judged: the run stays at 32, KILLED and
    tagged stopped, never trained to the budget (it was: FINISHED with `stopped_at` = 32, the
    best arm, 100% of the compute). Meanwhile the interrupted sweep's parent is KILLED, the hint
    repeats every option, and a plain `sweep run` after it trains nothing."""
    (tmp_path / "spec.yaml").write_text(ADAPTIVE_SPEC)
    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    log = tmp_path / "sweep.log"
    proc = _start_adaptive(tmp_path, uri, log)
    try:
        waiting = _paused_at(uri, 32, proc, log, behind=True)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        assert proc.wait(timeout=120) == 130, log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    out = " ".join(log.read_text().split())
    assert f"isolab sweep adaptive spec.yaml {' '.join(ARGS)} --tracking-uri {uri}" in out
    assert _parent(uri).info.status == "KILLED"  # the sweep is not done
    assert not [r for r in adaptive_runs(uri) if r.info.status in ("RUNNING", "SCHEDULED")]
    _plant(db, waiting.info.run_id, 32, -1.0)

    # the hinted command, run again (in this process: one Python start and import fewer)
    again = cli("sweep", "adaptive", "spec.yaml", *ARGS, "--tracking-uri", uri)
    assert again.exit_code == 0, again.output
    runs = {r.info.run_id: r for r in adaptive_runs(uri)}
    assert len(runs) == 3
    run = runs[waiting.info.run_id]
    assert run.data.tags.get("isolab.adaptive.stopped_at") == "32", run.data.tags
    assert run.info.status == "KILLED" and max(rollouts_logged(uri, run)) == 32
    for r in runs.values():  # every stopped run ended at its rung, the others at the budget
        at = int(r.data.tags.get("isolab.adaptive.stopped_at", 64))
        assert max(rollouts_logged(uri, r)) == at
        assert r.info.status == ("FINISHED" if at == 64 else "KILLED")
    parent = _parent(uri)
    assert parent.info.status == "FINISHED"
    assert float(parent.data.tags["isolab.adaptive.compute_fraction"]) < 1

    _plain_sweep(cli, uri)
    assert {r.info.run_id: r.info.status for r in adaptive_runs(uri)} == {
        k: r.info.status for k, r in runs.items()
    }  # the stopped arm is done: nothing trained again, no run added


def test_a_plain_sweep_after_a_killed_adaptive_one_reuses_its_runs(isolab_cache, cli, tmp_path):
    """SIGKILL of an adaptive sweep while a run waits at a rung: its parent is left RUNNING with
    no runner, which the next command on the sweep ends KILLED; a plain `sweep run` then
    carries the paused run on in its MLflow run (no second run for its key, none left
    SCHEDULED) and ends the parent FINISHED."""
    (tmp_path / "spec.yaml").write_text(ADAPTIVE_SPEC)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    log = tmp_path / "sweep.log"
    proc = _start_adaptive(tmp_path, uri, log)
    try:
        waiting = _paused_at(uri, 16, proc, log)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    _processes_gone(uri)
    _store_settled(uri)
    _processes_gone(uri)  # a pid tagged while the store settled
    assert _parent(uri).info.status == "RUNNING"  # its runner is gone: not FINISHED

    _plain_sweep(cli, uri)
    runs = adaptive_runs(uri)
    assert not [r for r in runs if r.info.status in ("RUNNING", "SCHEDULED")]
    key = waiting.data.tags[RUN_KEY_TAG]
    (same,) = [r for r in runs if r.data.tags[RUN_KEY_TAG] == key]
    assert same.info.run_id == waiting.info.run_id and same.info.status == "FINISHED"
    assert max(rollouts_logged(uri, same)) == 64
    finished = {r.data.tags[RUN_KEY_TAG] for r in runs if r.info.status == "FINISHED"}
    assert len(finished) == 3  # every point done, each FINISHED once
    assert _parent(uri).info.status == "FINISHED"
