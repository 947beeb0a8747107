"""isolab's own reward-model presets (`tiny-orm`, `tiny-prm`): install, train, evaluate.

A preset installs the weights shipped with isolab (digest-checked), or, `from_scratch`, is
trained here from the installed `tiny-m` on `isolab.models.reward.data` (CPU-dependent, as
every warm start). Cached under ``cache_root()/reward_models/<name>``, with a build record of
its spec and held-out metrics.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from isolab.models import weights
from isolab.models.reward.data import (
    KINDS,
    UNLABELLED,
    Example,
    outcome_labels,
    step_labels,
    synthetic_examples,
)
from isolab.models.reward.scoring import aggregate, score_steps, step_log_probs
from isolab.models.tiny import (
    REWARD_MODEL_PRESETS,
    RewardModelSpec,
    build_char_tokenizer,
    is_reward_preset,
)
from isolab.models.warm_start import one_thread
from isolab.models.weights import reward_model_dir

log = logging.getLogger(__name__)


def build(name: str, force: bool = False, from_scratch: bool = False) -> Path:
    """Install preset `name` into the cache (no-op when it is there) and return its folder:
    the weights shipped with isolab (digest-checked), or with `from_scratch` trained here from
    the installed `tiny-m` (CPU-dependent, as every warm start)."""
    if not is_reward_preset(name):
        raise ValueError(
            f"reward model {name!r} is not a preset ({', '.join(REWARD_MODEL_PRESETS)}); "
            "pass a hub id or a local folder to `load` instead."
        )
    out = reward_model_dir(name)
    if (out / weights.BUILD_INFO).exists() and not (force or from_scratch):
        return out
    if not from_scratch and weights.shipped_info(name) is not None:
        return weights.install_shipped(name, out)
    spec = REWARD_MODEL_PRESETS[name]
    t0 = time.perf_counter()
    with one_thread():
        model, tok, losses = _train(spec)
        metrics = evaluate(model, tok, spec.kind)
    info = {
        "preset": name,
        "source": "from-scratch",
        "spec": asdict(spec),
        "base_digest": weights.digest(spec.base),
        "params": sum(p.numel() for p in model.parameters()),
        "final_loss": losses[-1],
        "heldout": metrics,
        "build_time_s": round(time.perf_counter() - t0, 1),
    }
    weights.save_atomically(model, tok, info, out)
    log.info("built %s in %.1fs: held-out %s", name, info["build_time_s"], metrics)
    return out


def build_info(name: str) -> dict[str, Any]:
    """The build record of a preset: spec, parameters, held-out metrics, digests."""
    return json.loads((build(name) / weights.BUILD_INFO).read_text())


def _train(spec: RewardModelSpec):
    from transformers import LlamaForCausalLM, LlamaForTokenClassification

    if spec.kind not in KINDS:
        raise ValueError(f"kind = {spec.kind!r}: choose one of {', '.join(KINDS)}.")
    torch.manual_seed(spec.seed)
    base = weights.build(spec.base)
    tok = build_char_tokenizer()
    own: dict[str, Any] = {
        "trust_remote_code": False
    }  # isolab's own tiny-m: no code of its own to run
    model = LlamaForTokenClassification.from_pretrained(
        base, num_labels=len(tok), attn_implementation="eager", **own
    )
    policy = LlamaForCausalLM.from_pretrained(base, **own)
    with torch.no_grad():  # start the head from the policy's next-token beliefs
        model.score.weight.copy_(policy.lm_head.weight)
    del policy
    opt = torch.optim.AdamW(model.parameters(), lr=spec.peak_lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=spec.peak_lr, total_steps=spec.steps)
    data = synthetic_examples(spec.steps * spec.batch, spec.seed + 1, spec.negative_fraction)
    losses: list[float] = []
    model.train()
    for step in range(spec.steps):
        loss = _loss(model, tok, data[step * spec.batch : (step + 1) * spec.batch], spec.kind)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    model.eval()
    return model, tok, losses


def _labels(kind: str, example: Example) -> list[int]:
    labels = step_labels if kind == "prm" else outcome_labels
    return labels(example.completion, example.target)


def _loss(model, tok, batch: Sequence[Example], kind: str) -> torch.Tensor:
    """Binary cross-entropy of the step probabilities against the labelled steps."""
    rows, _ = step_log_probs(model, tok, [e.prompt for e in batch], [e.completion for e in batch])
    logp = torch.cat(rows).clamp(max=-1e-6)  # log(1 − p) must stay finite
    y = torch.tensor([y for e in batch for y in _labels(kind, e)], dtype=torch.float32)
    keep = y != UNLABELLED
    logp, y = logp[keep], y[keep]
    return -(y * logp + (1 - y) * torch.log1p(-logp.exp())).mean()


def evaluate(model, tok, kind: str, count: int = 2000, seed: int = 10_007) -> dict[str, float]:
    """Held-out metrics on `count` examples (half wrong) from problems never trained on.

    `accuracy`: the completion score (min over steps) above 0.5 against correctness; `auc`:
    P(a correct completion outscores a wrong one); `step_accuracy`: steps with a PRM label
    (up to the first mistake) called right at 0.5.
    """
    data = synthetic_examples(count, seed, negative_fraction=0.5, held_out_only=True)
    steps, _ = score_steps(model, tok, [e.prompt for e in data], [e.completion for e in data])
    scores = [aggregate(s) for s in steps]
    truth = [e.correct for e in data]
    hits = [
        (p > 0.5) == bool(y)
        for e, s in zip(data, steps, strict=True)
        for p, y in zip(s, step_labels(e.completion, e.target), strict=True)
        if y != UNLABELLED
    ]
    return {
        "examples": float(count),
        "accuracy": sum((s > 0.5) == t for s, t in zip(scores, truth, strict=True)) / count,
        "auc": _auc(
            [s for s, t in zip(scores, truth, strict=True) if t],
            [s for s, t in zip(scores, truth, strict=True) if not t],
        ),
        "step_accuracy": sum(hits) / len(hits),
    }


def _auc(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """Mann–Whitney estimate of P(positive > negative), ties counted half."""
    import numpy as np

    pos, neg = np.asarray(positives)[:, None], np.asarray(negatives)[None, :]
    return float(np.mean((pos > neg) + 0.5 * (pos == neg)))
