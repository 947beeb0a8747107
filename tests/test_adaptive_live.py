"""A live adaptive sweep (issue 32): runs trained as Ray Tune trials, paused at each common
checkpoint until the rung is judged, the stopped arms' runs KILLED with their reason, the rest
resumed in the same MLflow run to the budget; run again, it trains nothing and stops the same.
Interrupted sweeps (Ctrl-C, SIGKILL) are tests/test_adaptive_interrupts.py's."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from helpers import ADAPTIVE_SPEC, adaptive_runs, rollouts_logged
from mlflow.tracking import MlflowClient

from isolab import models
from isolab.tracking import RUN_KEY_TAG, mlflow_key
from isolab.vocab import EVAL_AVG, ROLLOUTS

pytest.importorskip("ray", reason="ray is not installed (pip install -e '.[dev]')")


def test_an_adaptive_sweep_stops_arms_and_resumes_the_rest(cli, tmp_path: Path):
    models.build("tiny-m")
    (tmp_path / "spec.yaml").write_text(ADAPTIVE_SPEC)
    uri = f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}"
    # grace 1, rank cut η = 2: at C = 32 the worst of the 3 arms stops (whatever the rewards)
    args = ("sweep", "adaptive", "spec.yaml", "--workers", "2", "--grace", "1", "--eta", "2")
    handlers = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]
    first = cli(*args)
    assert first.exit_code == 0, first.output
    # Ray's and Tune's handlers are not left behind: Ctrl-C in this process still raises
    assert [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)] == handlers
    assert "rung C = 32" in first.output and "stopped n=" in first.output

    runs = adaptive_runs(uri)
    keys = [r.data.tags[RUN_KEY_TAG] for r in runs]
    assert len(runs) == 3 and len(set(keys)) == 3  # one MLflow run per run, paused or not
    stopped = [r for r in runs if "isolab.adaptive.stopped_at" in r.data.tags]
    finished = [r for r in runs if r not in stopped]
    assert stopped and finished
    for r in stopped:  # ended at its rung, with the reason the scheduler gave
        at = int(r.data.tags["isolab.adaptive.stopped_at"])
        assert r.info.status == "KILLED" and at == 32
        assert "ranked" in r.data.tags["isolab.adaptive.reason"]
        assert max(rollouts_logged(uri, r)) == at
    for r in finished:  # resumed after each rung, evaluated at every checkpoint, to the budget
        assert r.info.status == "FINISHED" and max(rollouts_logged(uri, r)) == 64
        evals = MlflowClient(uri).get_metric_history(r.info.run_id, mlflow_key(EVAL_AVG))
        rollouts = dict(
            (m.step, m.value) for m in MlflowClient(uri).get_metric_history(r.info.run_id, ROLLOUTS)
        )
        assert sorted(rollouts[m.step] for m in evals) == [0, 16, 32, 64]
    spent = sum(max(rollouts_logged(uri, r)) for r in runs)
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
    assert len(adaptive_runs(uri)) == 3

    def verdict(output: str) -> str:
        return output.split("all: best arm")[1].split("done in")[0]

    assert verdict(again.output) == verdict(first.output)


def test_a_sweep_that_cannot_pause_is_refused(cli, tmp_path: Path):
    (tmp_path / "spec.yaml").write_text(
        ADAPTIVE_SPEC.replace("B_p: 2,", "B_p: 2, num_iterations: 2,")
    )
    result = cli("sweep", "adaptive", "spec.yaml")
    assert result.exit_code == 2
    assert "num_iterations" in result.output and "set processes: 1" in result.output
    assert not (tmp_path / "runs" / "mlflow.db").exists()


def test_a_sweep_another_runner_holds_is_refused(cli, tmp_path: Path):
    from isolab.sweep import SweepSpec, plan_sweep, split_sizes
    from isolab.tracking import leases

    (tmp_path / "spec.yaml").write_text(ADAPTIVE_SPEC)
    spec = SweepSpec.from_yaml(tmp_path / "spec.yaml")
    key = plan_sweep(spec, split_sizes(spec)).points[0].run_key
    uri = f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}"
    with leases.lease("adaptive-smoke", [key], uri) as held:
        assert held
        result = cli("sweep", "adaptive", "spec.yaml")
    assert result.exit_code == 1
    assert "another runner holds some of its runs" in result.output
