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


def _cfg(experiment: str) -> RunConfig:
    return RunConfig(experiment=experiment, n=4, B_p=4, M=8, eval_every=3, eval_problems=16, seed=3)


def test_a_suspended_run_resumes_where_it_stopped(tiny_m, tracking_uri, tmp_path):
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

    # every step once, with the totals of the uninterrupted run: the ledger carried on
    assert history(resumed.run_id, "compute/rollouts") == history(whole.run_id, "compute/rollouts")
    mine, theirs = history(resumed.run_id, "flops/total"), history(whole.run_id, "flops/total")
    assert [s for s, _ in mine] == [s for s, _ in theirs] == list(range(9))
    if mine[:4] == theirs[:4]:
        # where two runs of one config agree bit for bit before the checkpoint, the rollouts
        # sampled after it have the same lengths too: the RNG was restored
        assert mine == theirs
    else:
        # On one intra-op thread (OMP_NUM_THREADS=1, as in CI's workers) two runs of the same
        # config and seed part at step 2 on this AVX-512 CPU, before any checkpoint: the
        # machine's kernels, not the resume. The totals must still agree to a few percent (a
        # ledger restarted from zero at step 3 would be 37% low at step 8).
        for (step, a), (_, b) in zip(mine, theirs, strict=True):
            assert a == pytest.approx(b, rel=0.02), step
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


def test_a_resumed_run_keeps_its_allocators_estimates(tiny_m, tracking_uri, tmp_path):
    """`allocation: variance` learns a Beta estimate per problem from every scored rollout: the
    checkpoint carries them (`BELIEFS_FILE`), and the resumed run goes on from them, so that at
    its next checkpoint they hold every rollout since step 0 (without the reload, only those
    since the resume)."""
    from isolab.rl.trainer import BELIEFS_FILE

    cfg = _cfg("variance").replace(split="mix", allocation="variance")

    def observed(path: Path) -> float:  # successes + failures, summed over problems
        return sum(sum(v) for v in json.loads((path / BELIEFS_FILE).read_text()).values())

    def suspend(step, path, metrics):
        shutil.copytree(path, tmp_path / "ckpt")
        raise Suspended

    with pytest.raises(Suspended):
        train(cfg, tracking_uri=tracking_uri, checkpointing=Checkpointing(suspend))
    assert observed(tmp_path / "ckpt") == pytest.approx(3 * cfg.B)  # 3 steps of B rollouts

    seen: list[float] = []
    train(
        cfg,
        tracking_uri=tracking_uri,
        checkpointing=Checkpointing(lambda s, p, m: seen.append(observed(p)), tmp_path / "ckpt"),
    )
    assert seen == [pytest.approx(6 * cfg.B)]
