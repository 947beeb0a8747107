"""End-to-end: TRL GRPO on the tiny model must raise validation reward, and MLflow must hold it."""

import pytest
from mlflow.tracking import MlflowClient

from isolab import models
from isolab.config import RunConfig
from isolab.difficulty import load_or_label
from isolab.rl.train import train
from isolab.tracking import RUN_KEY_TAG, mlflow_key


@pytest.fixture(scope="module")
def tiny_m():
    """The shipped tiny-m and its shipped difficulty splits, installed into the cache."""
    models.build("tiny-m")
    splits = load_or_label("tiny-m", "arithmetic", pool_size=4000)
    assert splits.sizes() == models.shipped_info("tiny-m")["difficulty"]["sizes"]
    return splits


def test_grpo_raises_validation_reward_and_logs_everything(tiny_m, tracking_uri):
    # all 106 Easy validation problems × 16 samples: ≈ 0.012 of evaluation noise; on this
    # machine avg@4 gains ≈ 0.10 in 48 steps at this rate, ≈ 0.15 by step 150
    cfg = RunConfig(
        experiment="test-train",
        n=8,
        B_p=8,
        M=48,
        lr_base=1e-4,
        eval_every=24,
        eval_problems=106,
        eval_k_samples=16,
        seed=0,
    )
    result = train(cfg, tracking_uri=tracking_uri)

    gain = result.final_eval["eval/avg@4"] - result.base_eval["eval/avg@4"]
    print(f"\navg@4 {result.base_eval['eval/avg@4']:.3f} → {result.final_eval['eval/avg@4']:.3f}")
    assert gain > 0.05, (
        f"avg@4 {result.base_eval['eval/avg@4']:.3f} → {result.final_eval['eval/avg@4']:.3f}"
    )

    client = MlflowClient(tracking_uri)
    run = client.get_run(result.run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags[RUN_KEY_TAG] == cfg.run_key
    assert run.data.tags["mlflow.runName"] == "tiny-m·easy·n8·bp8"
    assert run.data.params["n"] == "8" and run.data.params["B"] == "64"
    assert float(run.data.params["beta"]) > 0  # healthy recipe on the easy split

    steps = {m.step for m in client.get_metric_history(result.run_id, mlflow_key("eval/avg@4"))}
    assert steps == {0, 24, 48}
    rollouts = client.get_metric_history(result.run_id, "compute/rollouts")
    assert max(m.value for m in rollouts) == cfg.rollouts
    m = run.data.metrics
    assert m["flops/total"] == pytest.approx(
        m["flops/search"] + m["flops/learning"] + m["flops/reward"]
    )
    assert m["compute/rho"] == pytest.approx(m["flops/learning"] / m["flops/total"])
    assert 0 < m["compute/rho"] < 1 and m["flops/reward"] == 0 and m["flops/eval"] > 0
    for trl_metric in ("reward", "loss", "kl", "entropy"):
        assert trl_metric in m, f"TRL's {trl_metric} is not in MLflow"
    artifacts = [a.path for a in client.list_artifacts(result.run_id, "eval")]
    assert "eval/per_problem_counts.json" in artifacts


def test_a_crash_marks_the_run_failed_and_keeps_what_was_logged(tiny_m, tracking_uri):
    def crash(step, metrics):
        if step == 2:
            raise RuntimeError("simulated crash")

    cfg = RunConfig(experiment="test-train", split="hard", n=4, B_p=4, M=5, eval_problems=8)
    with pytest.raises(RuntimeError, match="simulated"):
        train(cfg, tracking_uri=tracking_uri, on_step=crash)
    client = MlflowClient(tracking_uri)
    (run,) = client.search_runs([client.get_experiment_by_name("test-train").experiment_id])
    assert run.info.status == "FAILED"
    assert run.data.params["beta"] == "0.0"  # no KL on the hard split
    history = client.get_metric_history(run.info.run_id, "compute/rollouts")
    assert [m.step for m in history] == [0, 1, 2]
