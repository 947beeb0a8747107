"""Per-prompt allocation through vLLM (`generation: vllm`, TRL's colocated engine on this CPU):
early stopping generates twice a step (the pilots, then the rest of the kept groups) and joins
vLLM's per-rollout outputs (its sampling log-probabilities included); every generated sequence
is charged to search exactly, as under HF generate (tests/test_allocation.py).

Slow (a vLLM engine starts per run, ~45 s on 2 cores): `make test-all` runs it."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from isolab import models
from isolab.compute.flops import generation_flops
from isolab.config import RunConfig
from isolab.rl import engines, train

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not engines.vllm_installed(), reason="vllm is not installed"),
]


def test_early_stopping_through_vllm_charges_every_generated_sequence(
    isolab_cache, tmp_path, monkeypatch
):
    seen: dict[str, list[int]] = {"prompt": [], "completion": []}
    original = train.make_trainer_class

    def make(with_vllm: bool = False):
        class Counting(original(with_vllm)):
            def _generate(self, prompts):
                out = super()._generate(prompts)
                if self._replay is None and self.model.training:
                    seen["prompt"] += [len(ids) for ids in out[0]]
                    seen["completion"] += [len(ids) for ids in out[1]]
                return out

        return Counting

    monkeypatch.setattr(train, "make_trainer_class", make)
    for key in engines.DISTRIBUTED_ENV:  # TRL sets them for vLLM: restored after the test
        monkeypatch.delenv(key, raising=False)
    cfg = RunConfig(
        experiment="test-allocation-vllm",
        generation="vllm",
        allocation="early_stop",
        search_oversample=2,
        n=4,
        B_p=4,
        M=3,
        eval_problems=8,
        eval_k_samples=4,
    )
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    result = train.train(cfg, tracking_uri=uri)
    assert result.status == "FINISHED"
    m = MlflowClient(uri).get_run(result.run_id).data.metrics
    assert len(seen["completion"]) == cfg.rollouts == m["compute/rollouts"]
    config = models.load("tiny-m")[0].config
    assert m["flops/search"] == generation_flops(config, seen["prompt"], seen["completion"])
    assert m["compute/rollouts_discarded"] == cfg.rollouts - cfg.B * cfg.M > 0
