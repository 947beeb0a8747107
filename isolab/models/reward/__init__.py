"""Reward models: small ones isolab trains itself on the synthetic task, and hub ones by id.

Two kinds, told apart by their supervision as in the reward-model literature (Uesato et al.
2022, arXiv 2211.14275; Lightman et al. 2023, "Let's Verify Step by Step", arXiv 2305.20050):

- **ORM**, an outcome reward model: trained on final-answer correctness only. As the verifiers
  of Cobbe et al. (2021, arXiv 2110.14168, §4.2), it predicts at every token, each prediction
  trained on the outcome label, which worked better for them than a single end-of-sequence one.
- **PRM**, a process reward model: trained on step labels. A raw arithmetic answer is written
  least significant digit first, so each digit is one step of the column addition; its label
  is whether the answer is still correct up to and including that digit. A last step at the
  EOS asks whether the answer ends there (without it a correct but unfinished prefix would
  score as well as the full answer). Steps after the first mistake carry no label: their
  correctness is settled, and the ``min`` aggregation reads only the first mistake.

A completion's score aggregates its step scores: ``min`` (the convention of Qwen2.5-Math-PRM and
of Math-Shepherd, Wang et al. 2024, arXiv 2312.08935) or ``prod`` (Lightman et al.: the
probability that every step is correct).

Architecture, shared by both: a ``LlamaForTokenClassification`` whose label set is the
vocabulary — a "next-step" head. P(step j is correct) is read at the position *before* step j,
in the row of the token actually written there (a Q-value over the possible next tokens).
Initialised from the ``tiny-m`` warm start, LM head included, as reward models are initialised
from the supervised policy (Ouyang et al. 2022, arXiv 2203.02155, §3.5), the head starts from
the policy's own next-digit beliefs: a pooled end-of-sequence classifier must relearn the whole
column addition at one position and stayed near 0.62 held-out accuracy in the same budget.

Training data: synthetic (prompt, completion) pairs, half correct, half perturbations of the
correct answer that mimic a policy's mistakes (a wrong digit, a missed or spurious carry, a
dropped, extra or swapped digit, garbage). A fixed tenth of the problem space (by hash) is never
trained on and holds the held-out evaluation. Deterministic by seed; cached under
``cache_root()/reward_models/<name>``.

Hub reward models (GPU): `load` takes a hub id or a local folder; `score_hub_outcome` and
`score_hub_steps` score with them.

Modules, one subject each: `data` (synthetic pairs and step labels), `scoring` (encoding and
step scores of the tiny models), `presets` (install or train `tiny-orm`/`tiny-prm`, held-out
evaluation), `hub` (`load` any reward model, score with hub ones), `configs` (the config a
model-based reward charges: for the ledger and planning, no weights read). The names below are
the package's API::

    from isolab.models import reward
    model, tok = reward.load("tiny-prm", "prm")
    steps, seq_lens = reward.score_steps(model, tok, prompts, completions)
"""

from isolab.models.reward.configs import (
    DEFAULT_REWARD_MODELS,
    hub_tokenizer,
    proxy_config,
    reward_model_config,
    reward_model_config_for,
    reward_model_name,
)
from isolab.models.reward.data import (
    HELD_OUT_MOD,
    KINDS,
    UNLABELLED,
    Example,
    held_out,
    outcome_labels,
    perturb,
    step_labels,
    synthetic_examples,
)
from isolab.models.tiny import REWARD_MODEL_PRESETS

# Loading, scoring and training import torch: loaded on first use, so that planning a run's
# reward FLOPs (configs) and reading results never import it.
_LAZY = {
    "hub": (
        "HUB_PRM_SYSTEM",
        "HUB_STEP_TOKEN",
        "hub_prm_texts",
        "load",
        "score_hub_outcome",
        "score_hub_steps",
    ),
    "presets": ("build", "build_info", "evaluate"),
    "scoring": ("AGGREGATIONS", "aggregate", "encode", "score_steps"),
}


def __getattr__(name: str):
    import importlib

    for module, names in _LAZY.items():
        if name in names:
            return getattr(importlib.import_module(f"isolab.models.reward.{module}"), name)
    raise AttributeError(f"module 'isolab.models.reward' has no attribute {name!r}")


__all__ = [
    "AGGREGATIONS",
    "DEFAULT_REWARD_MODELS",
    "HELD_OUT_MOD",
    "HUB_PRM_SYSTEM",
    "HUB_STEP_TOKEN",
    "KINDS",
    "REWARD_MODEL_PRESETS",
    "UNLABELLED",
    "Example",
    "aggregate",
    "build",
    "build_info",
    "encode",
    "evaluate",
    "held_out",
    "hub_prm_texts",
    "hub_tokenizer",
    "load",
    "outcome_labels",
    "perturb",
    "proxy_config",
    "reward_model_config",
    "reward_model_config_for",
    "reward_model_name",
    "score_hub_outcome",
    "score_hub_steps",
    "score_steps",
    "step_labels",
    "synthetic_examples",
]
