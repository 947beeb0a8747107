"""A live adaptive sweep (issue 32): runs trained as Ray Tune trials, paused at each common
checkpoint until the rung is judged, the stopped arms' runs KILLED with their reason, the rest
resumed in the same MLflow run to the budget; run again, it trains nothing and stops the same."""

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
from mlflow.tracking import MlflowClient

from isolab import models
from isolab.tracking import RUN_KEY_TAG, mlflow_key
from isolab.vocab import EVAL_AVG, ROLLOUTS

pytest.importorskip("ray", reason="ray is not installed (pip install -e '.[dev]')")

SPEC = """\
name: adaptive-smoke
description: three arms at B_p = 2; the rank cut stops at least one at the second rung.
base: {model: tiny-m, task: arithmetic, B_p: 2, eval_problems: 16, eval_k_samples: 4}
axes:
  n: [2, 4, 8]
budget_rollouts: 64
eval_points: 3
"""


def _runs(uri: str) -> list:
    c = MlflowClient(uri)
    exp = c.get_experiment_by_name("adaptive-smoke")
    return [r for r in c.search_runs([exp.experiment_id]) if RUN_KEY_TAG in r.data.tags]


def _rollouts(uri: str, run) -> list[int]:
    history = MlflowClient(uri).get_metric_history(run.info.run_id, ROLLOUTS)
    return sorted(int(m.value) for m in history)


def test_an_adaptive_sweep_stops_arms_and_resumes_the_rest(cli, tmp_path: Path):
    models.build("tiny-m")
    (tmp_path / "spec.yaml").write_text(SPEC)
    uri = f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}"
    # grace 1, rank cut η = 2: at C = 32 the worst of the 3 arms stops (whatever the rewards)
    args = ("sweep", "adaptive", "spec.yaml", "--workers", "2", "--grace", "1", "--eta", "2")
    handlers = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]
    first = cli(*args)
    assert first.exit_code == 0, first.output
    # Ray's and Tune's handlers are not left behind: Ctrl-C in this process still raises
    assert [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)] == handlers
    assert "rung C = 32" in first.output and "stopped n=" in first.output

    runs = _runs(uri)
    keys = [r.data.tags[RUN_KEY_TAG] for r in runs]
    assert len(runs) == 3 and len(set(keys)) == 3  # one MLflow run per run, paused or not
    stopped = [r for r in runs if "isolab.adaptive.stopped_at" in r.data.tags]
    finished = [r for r in runs if r not in stopped]
    assert stopped and finished
    for r in stopped:  # ended at its rung, with the reason the scheduler gave
        at = int(r.data.tags["isolab.adaptive.stopped_at"])
        assert r.info.status == "KILLED" and at == 32
        assert "ranked" in r.data.tags["isolab.adaptive.reason"]
        assert max(_rollouts(uri, r)) == at
    for r in finished:  # resumed after each rung, evaluated at every checkpoint, to the budget
        assert r.info.status == "FINISHED" and max(_rollouts(uri, r)) == 64
        evals = MlflowClient(uri).get_metric_history(r.info.run_id, mlflow_key(EVAL_AVG))
        rollouts = dict(
            (m.step, m.value) for m in MlflowClient(uri).get_metric_history(r.info.run_id, ROLLOUTS)
        )
        assert sorted(rollouts[m.step] for m in evals) == [0, 16, 32, 64]
    spent = sum(max(_rollouts(uri, r)) for r in runs)
    assert f"compute {spent:,} of the full grid's 192 rollouts" in first.output
    parent = MlflowClient(uri).search_runs(
        [MlflowClient(uri).get_experiment_by_name("adaptive-smoke").experiment_id],
        filter_string="tags.`isolab.adaptive.rule` != ''",
    )
    assert float(parent[0].data.tags["isolab.adaptive.compute_fraction"]) == pytest.approx(
        spent / 192, abs=1e-4
    )

    again = cli(*args)  # resumed: nothing left to train, the same decisions from the store
    assert again.exit_code == 0, again.output
    assert len(_runs(uri)) == 3

    def verdict(output: str) -> str:
        return output.split("all: best arm")[1].split("done in")[0]

    assert verdict(again.output) == verdict(first.output)


def test_a_sweep_that_cannot_pause_is_refused(cli, tmp_path: Path):
    (tmp_path / "spec.yaml").write_text(SPEC.replace("B_p: 2,", "B_p: 2, num_iterations: 2,"))
    result = cli("sweep", "adaptive", "spec.yaml")
    assert result.exit_code == 2
    assert "num_iterations" in result.output and "set processes: 1" in result.output
    assert not (tmp_path / "runs" / "mlflow.db").exists()


def test_a_sweep_another_runner_holds_is_refused(cli, tmp_path: Path):
    from isolab.sweep import SweepSpec, plan_sweep, split_sizes
    from isolab.tracking import leases

    (tmp_path / "spec.yaml").write_text(SPEC)
    spec = SweepSpec.from_yaml(tmp_path / "spec.yaml")
    key = plan_sweep(spec, split_sizes(spec)).points[0].run_key
    uri = f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}"
    with leases.lease("adaptive-smoke", [key], uri) as held:
        assert held
        result = cli("sweep", "adaptive", "spec.yaml")
    assert result.exit_code == 1
    assert "another runner holds some of its runs" in result.output


# Interruptions (issue 52): a stopped arm stays stopped, the parent says the sweep is not done,
# and a plain `sweep run` after a killed adaptive sweep neither redoes nor doubles its runs.

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
            runs = _runs(uri)
            spent = {r.info.run_id: max(_rollouts(uri, r), default=0) for r in runs}
            short = not behind or len(runs) < 3 or min(spent.values()) < C
            for run in runs:
                if run.info.status == "SCHEDULED" and spent[run.info.run_id] == C and short:
                    return run
        time.sleep(0.2)
    raise AssertionError(f"no run paused at C = {C} after {timeout_s} s: {log.read_text()}")


def _plain_sweep(tmp_path: Path, uri: str) -> None:
    """`isolab sweep run spec.yaml` (not adaptive) on the same store; it must succeed."""
    plain = subprocess.run(
        [
            sys.executable,
            "-m",
            "isolab.cli",
            "sweep",
            "run",
            "spec.yaml",
            "--backend",
            "inline",
            "--tracking-uri",
            uri,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert plain.returncode == 0, plain.stdout + plain.stderr


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


def test_a_stopped_arm_stays_stopped_after_ctrl_c_and_resume(isolab_cache, tmp_path: Path):
    """Ctrl-C while one run waits at rung 32 with its checkpoint and the rung is not yet judged;
    that run is the worst there. Resumed, the rung is judged: the run stays at 32, KILLED and
    tagged stopped, never trained to the budget (it was: FINISHED with `stopped_at` = 32, the
    best arm, 100% of the compute). Meanwhile the interrupted sweep's parent is KILLED, the hint
    repeats every option, and a plain `sweep run` after it trains nothing."""
    (tmp_path / "spec.yaml").write_text(SPEC)
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
    assert not [r for r in _runs(uri) if r.info.status in ("RUNNING", "SCHEDULED")]
    _plant(db, waiting.info.run_id, 32, -1.0)

    again = _start_adaptive(tmp_path, uri, log)
    assert again.wait(timeout=600) == 0, log.read_text()
    runs = {r.info.run_id: r for r in _runs(uri)}
    assert len(runs) == 3
    run = runs[waiting.info.run_id]
    assert run.data.tags.get("isolab.adaptive.stopped_at") == "32", run.data.tags
    assert run.info.status == "KILLED" and max(_rollouts(uri, run)) == 32
    for r in runs.values():  # every stopped run ended at its rung, the others at the budget
        at = int(r.data.tags.get("isolab.adaptive.stopped_at", 64))
        assert max(_rollouts(uri, r)) == at
        assert r.info.status == ("FINISHED" if at == 64 else "KILLED")
    parent = _parent(uri)
    assert parent.info.status == "FINISHED"
    assert float(parent.data.tags["isolab.adaptive.compute_fraction"]) < 1

    _plain_sweep(tmp_path, uri)
    assert {r.info.run_id: r.info.status for r in _runs(uri)} == {
        k: r.info.status for k, r in runs.items()
    }  # the stopped arm is done: nothing trained again, no run added


def test_a_plain_sweep_after_a_killed_adaptive_one_reuses_its_runs(isolab_cache, tmp_path):
    """SIGKILL of an adaptive sweep while a run waits at a rung: its parent is left RUNNING with
    no runner, which the next command on the sweep ends KILLED; a plain `sweep run` then
    carries the paused run on in its MLflow run (no second run for its key, none left
    SCHEDULED) and ends the parent FINISHED."""
    (tmp_path / "spec.yaml").write_text(SPEC)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    log = tmp_path / "sweep.log"
    proc = _start_adaptive(tmp_path, uri, log)
    try:
        waiting = _paused_at(uri, 16, proc, log)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    time.sleep(2)  # Ray's processes go with their group
    assert _parent(uri).info.status == "RUNNING"  # its runner is gone: not FINISHED

    _plain_sweep(tmp_path, uri)
    runs = _runs(uri)
    assert not [r for r in runs if r.info.status in ("RUNNING", "SCHEDULED")]
    key = waiting.data.tags[RUN_KEY_TAG]
    (same,) = [r for r in runs if r.data.tags[RUN_KEY_TAG] == key]
    assert same.info.run_id == waiting.info.run_id and same.info.status == "FINISHED"
    assert max(_rollouts(uri, same)) == 64
    finished = {r.data.tags[RUN_KEY_TAG] for r in runs if r.info.status == "FINISHED"}
    assert len(finished) == 3  # every point done, each FINISHED once
    assert _parent(uri).info.status == "FINISHED"
