"""One run on several processes (`processes: K`): isolab launches K torchrun processes of TRL's
data-parallel GRPO (gloo on a CPU), each on B/K of every batch; the ledger sums their slices
each step, and only the first process logs and evaluates. MFU is logged every step against a
peak the run names (datasheet, override or a CPU matmul probe)."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from isolab.config import RunConfig
from isolab.vocab import MFU_STEP, ROLLOUTS, TOKENS

#: Completions of exactly max_completion_tokens (EOS held back; HF generate's and vLLM's
#: names): both runs then see the same tokens, whatever each process samples, so their FLOPs
#: must be equal, not close.
FIXED_LENGTH = {
    "hf": {"grpo": {"generation_kwargs": {"min_new_tokens": 6}}},
    "vllm": {"grpo": {"generation_kwargs": {"min_tokens": 6}}},
}
STEP_COUNTS = ("flops_step/search", "flops_step/learning", "flops_step/total", ROLLOUTS, TOKENS)


def test_the_peak_comes_from_the_datasheet_an_override_or_a_probe_and_never_a_guess(monkeypatch):
    from isolab.compute.peak import OVERRIDE_ENV, cpu_matmul_peak, device_peak

    monkeypatch.delenv(OVERRIDE_ENV, raising=False)
    assert device_peak("bf16", "NVIDIA A100-SXM4-80GB").flops_per_s == 312e12
    assert device_peak("fp32", "NVIDIA A10G").flops_per_s == 31.2e12  # not A100's
    assert device_peak("bf16", "NVIDIA H100 PCIe").flops_per_s == 756e12
    unknown = device_peak("bf16", "NVIDIA GeForce GTX 1080")
    assert unknown.flops_per_s is None and OVERRIDE_ENV in unknown.source  # no figure at all
    cpu = device_peak("fp32")
    assert cpu.flops_per_s == cpu_matmul_peak() > 1e8 and "measured" in cpu.source
    monkeypatch.setenv(OVERRIDE_ENV, "42")
    assert device_peak("bf16", "NVIDIA GeForce GTX 1080").flops_per_s == 42e12
    monkeypatch.setenv(OVERRIDE_ENV, "fast")
    with pytest.raises(ValueError, match="give the device's peak in TFLOP/s"):
        device_peak("bf16")


def test_an_uneven_batch_is_refused_naming_processes(cli, tmp_path):
    (tmp_path / "run.yaml").write_text("model: tiny-m\nn: 3\nB_p: 1\nprocesses: 2\n")
    out = cli("train", "run.yaml")
    assert out.exit_code == 2, out.output
    text = " ".join(out.output.split())
    assert "processes = 2 does not divide the batch B = B_p·n = 3" in text, out.output
    assert "choose processes among [1, 3]" in text


@pytest.mark.parametrize(
    "generation",
    # both in the slow suite (`make test-all`): HF ≈ 35 s, vLLM (one colocated engine per
    # process) ≈ 3.5 min here, and `make test` must stay under 10 minutes on 2 cores
    [pytest.param("hf", marks=pytest.mark.slow), pytest.param("vllm", marks=pytest.mark.slow)],
)
def test_two_processes_train_log_once_and_count_what_one_process_counts(
    tracking_uri, isolab_cache, generation
):
    from isolab.rl.train import train

    base = dict(
        generation=generation,
        experiment="processes",
        model="tiny-m",
        split="easy",
        n=4,
        B_p=2,
        M=3,
        eval_problems=8,
        eval_k_samples=4,
        extra=FIXED_LENGTH[generation],
    )
    one = train(RunConfig(**base), tracking_uri=tracking_uri)
    two = train(RunConfig(**base, processes=2), tracking_uri=tracking_uri)
    assert one.status == two.status == "FINISHED"
    assert one.run_key != two.run_key  # the process count is part of the run
    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name("processes")
    assert exp is not None
    runs = {r.data.params["processes"]: r for r in client.search_runs([exp.experiment_id])}
    assert sorted(runs) == ["1", "2"]  # one MLflow run each: the second process logs nothing
    tags = runs["2"].data.tags
    assert (tags["isolab.processes"], tags["isolab.distributed"]) == ("2", "MULTI_CPU")
    assert runs["1"].data.tags["isolab.processes"] == "1"
    for key in STEP_COUNTS:
        series = {
            k: [(m.step, m.value) for m in client.get_metric_history(r.info.run_id, key)]
            for k, r in runs.items()
        }
        steps = [s for s, _ in series["2"]]
        assert steps == sorted(set(steps)), f"{key} logged more than once per step: {steps}"
        assert series["2"] == series["1"], key
    for run in runs.values():  # MFU every step, against the peak the run names
        assert "measured: fastest fp32 matmul" in run.data.tags["isolab.peak_source"]
        assert float(run.data.tags["isolab.peak_flops_per_s"]) > 0
        mfu = client.get_metric_history(run.info.run_id, MFU_STEP)
        assert [m.step for m in mfu] == [1, 2, 3] and all(0 < m.value < 1 for m in mfu)
    assert "summed over 2 processes" in tags["isolab.peak_source"]
    assert two.final_metrics[ROLLOUTS] == 3 * 8
    assert two.final_eval and "eval/avg@4" in two.final_eval  # the first process evaluated


#: Two points of two processes each: a local worker pair would ask for 2 × 2 = 4 cores.
MULTI_PROCESS_SWEEP = """\
name: two-process-points
base: {model: tiny-m, split: easy, processes: 2, B_p: 2, eval_problems: 8, eval_k_samples: 4,
       eval_ks: [1, 4]}
axes: {n: [2, 4]}
budget_rollouts: 16
seeds: [0]
eval_points: 2
metric: eval/avg@4
"""


def test_local_workers_of_multi_process_runs_must_fit_the_cores(tmp_path, monkeypatch):
    import os

    from isolab.sweep import runner
    from isolab.sweep.plan import plan_sweep
    from isolab.sweep.spec import SweepSpec

    (tmp_path / "spec.yaml").write_text(MULTI_PROCESS_SWEEP)
    plan = plan_sweep(SweepSpec.from_yaml(tmp_path / "spec.yaml"))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    with pytest.raises(ValueError, match=r"workers = 2 \(--workers\) × processes = 2") as info:
        runner._check_cores(plan, workers=2, backend="local")
    assert "run --workers 1" in str(info.value)
    runner._check_cores(plan, workers=1, backend="local")  # 2 cores for 1 × 2
    runner._check_cores(plan, workers=2, backend="ray")  # Ray counts CPUs itself


@pytest.mark.slow
def test_a_ray_sweep_runs_two_process_points_side_by_side(cli, isolab_cache, tmp_path):
    """Each point is one Ray task holding its two processes' CPUs (4 logical CPUs for two at
    once); both finish, each run made by two processes."""
    (tmp_path / "spec.yaml").write_text(MULTI_PROCESS_SWEEP)
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    out = cli(
        "sweep", "run", "spec.yaml", "--backend", "ray", "--workers", "2", "--tracking-uri", uri
    )
    assert out.exit_code == 0, out.output
    assert "2 finished, 0 failed" in out.output
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("two-process-points")
    assert exp is not None
    runs = [r for r in client.search_runs([exp.experiment_id]) if "isolab.run_key" in r.data.tags]
    assert sorted(r.data.params["n"] for r in runs) == ["2", "4"]
    assert {(r.info.status, r.data.tags["isolab.processes"]) for r in runs} == {("FINISHED", "2")}
