"""Many processes on one fresh SQLite store: created and migrated once (under a lock beside it),
so that every run they start ends FINISHED and MLflow's migration leaves nothing behind."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

REPO = Path(__file__).resolve().parents[1]


def _log_one_run(i: int, uri: str) -> None:
    """One run as `isolab.rl.train` opens and closes it: the store, the experiment, params,
    metrics, the final status."""
    from isolab.tracking import RunLogger

    run = RunLogger("eight", f"run{i}", f"key{i}", uri)
    run.log_params({"n": i, "B_p": 2})
    for step in range(3):
        run.log_metrics({"compute/rollouts": 4.0 * step, "eval/avg@4": 0.1 * step}, step)
    run.end("FINISHED")


def _start_together(argvs: list[list[str]], tmp_path: Path) -> list[tuple[int, str]]:
    logs = [tmp_path / f"p{i}.log" for i in range(len(argvs))]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(argv, cwd=REPO, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
        for argv, log in zip(argvs, logs, strict=True)
    ]
    return [(p.wait(timeout=600), log.read_text()) for p, log in zip(procs, logs, strict=True)]


def _assert_eight_finished(db: Path, experiment: str = "eight") -> None:
    uri = f"sqlite:///{db}"
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id])
    assert sorted(r.info.status for r in runs) == ["FINISHED"] * 8
    with sqlite3.connect(db) as con:  # a migration cut short leaves alembic's temporary tables
        tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master")}
    assert not [t for t in tables if t.startswith("_alembic_tmp")], tables


def test_eight_processes_on_a_fresh_store_all_finish(tmp_path):
    """Eight processes forked at once (MLflow already imported: the race, not the imports)."""
    db = tmp_path / "fresh" / "mlflow.db"
    context = multiprocessing.get_context("fork")
    procs = [context.Process(target=_log_one_run, args=(i, f"sqlite:///{db}")) for i in range(8)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    assert [proc.exitcode for proc in procs] == [0] * 8
    _assert_eight_finished(db)


@pytest.mark.slow  # ≈ 100 s: eight trainings on two cores; `make test` runs the store part above
def test_eight_isolab_train_on_a_fresh_store_all_finish(isolab_cache, tmp_path):
    db = tmp_path / "fresh" / "mlflow.db"
    config = tmp_path / "tiny.yaml"
    config.write_text(
        "experiment: eight\nmodel: tiny-m\nsplit: easy\nn: 2\nB_p: 2\nM: 2\n"
        "eval_problems: 4\neval_k_samples: 1\neval_ks: [1]\n"
    )
    isolab = [sys.executable, "-m", "isolab.cli", "train", str(config)]
    results = _start_together(
        [[*isolab, "--set", f"seed={i}", "--tracking-uri", f"sqlite:///{db}"] for i in range(8)],
        tmp_path,
    )
    failed = [text[-1500:] for rc, text in results if rc != 0]
    assert not failed, failed
    _assert_eight_finished(db)
