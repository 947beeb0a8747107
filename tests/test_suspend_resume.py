"""A run suspended at an evaluation and resumed from its checkpoint (adaptive sweeps pause runs
at their rungs) carries on in the same MLflow run, as if it had never stopped."""

import json
import shutil
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from isolab import models
from isolab.config import RunConfig
from isolab.rl.train import train
from isolab.rl.trainer import STATE_FILE, Checkpointing, Suspended
from isolab.tracking import mlflow_key


@pytest.fixture(scope="module")
def tiny_m():
    models.build("tiny-m")


@pytest.fixture
def one_thread():
    """One intra-op thread while the runs train: a multi-threaded reduction may sum in another
    order from one run to the next, and a last-bit difference in the logits samples another
    token. In a busy CI worker the uninterrupted run and the suspended one parted at step 2,
    before any checkpoint (2026-12-04), with the same config and seed."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _cfg(experiment: str) -> RunConfig:
    return RunConfig(experiment=experiment, n=4, B_p=4, M=8, eval_every=3, eval_problems=16, seed=3)


def test_a_suspended_run_resumes_where_it_stopped(tiny_m, one_thread, tracking_uri, tmp_path):
    whole = train(_cfg("whole"), tracking_uri=tracking_uri)

    saved: list[tuple[int, dict]] = []

    def suspend(step, path, metrics):
        shutil.copytree(path, tmp_path / "ckpt")  # the trainer's copy goes with its run
        saved.append((step, metrics))
        raise Suspended

    with pytest.raises(Suspended):
        train(_cfg("parts"), tracking_uri=tracking_uri, checkpointing=Checkpointing(suspend))
    assert [s for s, _ in saved] == [3] and (tmp_path / "ckpt" / STATE_FILE).exists()
    client = MlflowClient(tracking_uri)
    (run,) = client.search_runs([client.get_experiment_by_name("parts").experiment_id])
    assert run.info.status == "RUNNING"  # left open for its caller to resume or end

    later: list[int] = []
    resumed = train(
        _cfg("parts"),
        tracking_uri=tracking_uri,
        checkpointing=Checkpointing(lambda s, p, m: later.append(s), tmp_path / "ckpt"),
    )
    assert resumed.run_id == run.info.run_id and later == [6]
    assert client.get_run(resumed.run_id).info.status == "FINISHED"
    assert resumed.base_eval == whole.base_eval  # restored, not evaluated again

    def history(run_id, key):
        return [(m.step, m.value) for m in client.get_metric_history(run_id, mlflow_key(key))]

    # every step once, with the totals of the uninterrupted run: the ledger carried on, and the
    # rollouts sampled after the checkpoint have the same lengths (the RNG was restored)
    for key in ("compute/rollouts", "flops/total"):
        assert history(resumed.run_id, key) == history(whole.run_id, key), key
    evals = [s for s, _ in history(resumed.run_id, "eval/avg@4")]
    assert evals == [s for s, _ in history(whole.run_id, "eval/avg@4")] == [0, 3, 6, 8]
    counts = client.download_artifacts(
        resumed.run_id, "eval/per_problem_counts.json", str(tmp_path)
    )
    assert set(json.loads(Path(counts).read_text())["correct_counts_by_step"]) == {
        "0",
        "3",
        "6",
        "8",
    }
