"""What a run config's `extra` may hold, and the TRL settings it passes through.

`extra.grpo` hands fields straight to TRL's ``GRPOConfig`` (`isolab.rl.train.grpo_args` builds
it), so that any TRL option is reachable without isolab re-wrapping it. Two kinds are refused
while the config is read, before a run exists: the fields isolab sets itself from its own
(`TRL_OWNED`, each with the isolab field to set instead), and sampling values transformers
would refuse only at the first rollout. `extra.reward_model` picks a model-based reward's model.

Importing this module is light (no TRL): `grpo_config_fields` imports TRL on first use.
"""

from __future__ import annotations

import functools
from dataclasses import fields
from typing import Any

from isolab.userinput import brief

#: What `extra` may hold: keys isolab reads, and what each is.
EXTRA_KEYS = {
    "grpo": "TRL GRPOConfig fields passed through as they are",
    "reward_model": "the model of a model-based reward (a preset, hub id or folder)",
}
#: GRPOConfig fields that isolab sets from its own fields (`isolab.rl.train.grpo_args`): a
#: pass-through of one of these is refused, naming what to set instead.
TRL_OWNED = {
    "num_generations": "set n",
    "per_device_train_batch_size": "set B_p (each step takes B = B_p·n completions)",
    "gradient_accumulation_steps": "one generation batch is one optimizer step; set B_p",
    "num_iterations": "set num_iterations",
    "max_steps": "set M",
    "max_completion_length": "set max_completion_tokens",
    "temperature": "set temperature",
    "learning_rate": "set lr_base (scaled by lr_scaling to the batch)",
    "lr_scheduler_type": "isolab keeps the learning rate constant (IsoCompute's recipe)",
    "warmup_steps": "isolab keeps the learning rate constant (IsoCompute's recipe)",
    "weight_decay": "isolab's recipe has no weight decay",
    "max_grad_norm": "set max_grad_norm",
    "gradient_checkpointing": "set gradient_checkpointing",
    "beta": "set beta (or recipe)",
    "entropy_coef": "set entropy_coef (or recipe)",
    "seed": "set seed",
    "output_dir": "isolab writes the trainer's files to a temporary folder",
    "logging_steps": "isolab logs every step to MLflow",
    "report_to": "isolab logs to MLflow itself (--tracking-uri or $MLFLOW_TRACKING_URI)",
    "save_strategy": "isolab saves no trainer checkpoints",
    "disable_tqdm": "isolab shows its own progress",
    "use_cpu": "chosen by the machine (CUDA or not)",
    "bf16": "chosen by the machine (bf16 with CUDA)",
    "use_vllm": "set generation: vllm (or hf, auto)",
    "vllm_mode": "set generation: vllm (isolab colocates vLLM)",
    "vllm_max_model_length": "set max_completion_tokens (the context follows from it)",
    "vllm_enable_sleep_mode": "set generation; isolab turns sleep mode off on a CPU",
    "dataloader_num_workers": "isolab loads data in the training process",
    "log_completions": "isolab logs its own evaluation",
    "trust_remote_code": "set trust_remote_code (TRL's reference model and vLLM follow it)",
}


@functools.cache
def grpo_config_fields() -> frozenset[str]:
    """The names of TRL's `GRPOConfig` fields (imports TRL: seconds, paid once)."""
    from trl import GRPOConfig

    return frozenset(f.name for f in fields(GRPOConfig))


def trust_flags(value: Any, where: str = "extra") -> list[str]:
    """Where `value` holds a `trust_remote_code` key, at any depth (`extra.grpo.
    model_init_kwargs.trust_remote_code`): TRL hands such a mapping to a loader as it is."""
    if isinstance(value, dict):
        found = []
        for key, inner in value.items():
            path = f"{where}.{key}"
            found += [path] if key == "trust_remote_code" else trust_flags(inner, path)
        return found
    if isinstance(value, list | tuple):
        return [p for i, inner in enumerate(value) for p in trust_flags(inner, f"{where}[{i}]")]
    return []


def check_extra(extra: dict[str, Any]) -> None:
    """`extra` holds only keys isolab reads; `extra.grpo` only GRPOConfig fields that isolab
    does not set itself; no `trust_remote_code` at any depth (the run config's is the one
    switch)."""
    for path in trust_flags(extra):
        # A nested flag reached TRL's reference model past a top-level `false` (issue 52).
        raise ValueError(
            f"{path}: isolab takes one switch for a model's own code: remove this and set "
            "the run config's top-level `trust_remote_code: true` if you trust the model's "
            "source (the policy, TRL's reference model, vLLM and reward models all follow it)."
        )
    for key in extra:
        if key not in EXTRA_KEYS:
            known = "; ".join(f"{k}: {v}" for k, v in EXTRA_KEYS.items())
            raise ValueError(f"extra.{key}: not a key isolab reads (it reads {known}).")
    if "reward_model" in extra:
        _check_reward_model(extra["reward_model"])
    grpo = extra.get("grpo")
    if grpo is None:
        return
    if not isinstance(grpo, dict):
        raise ValueError(f"extra.grpo = {brief(grpo)}: give a mapping of GRPOConfig fields.")
    for key in grpo:
        if key in TRL_OWNED:
            raise ValueError(f"extra.grpo.{key}: isolab sets this itself: {TRL_OWNED[key]}.")
    unknown = sorted(set(grpo) - grpo_config_fields(), key=str)
    if unknown:
        raise ValueError(
            f"extra.grpo.{unknown[0]}: not a field of TRL's GRPOConfig (check the spelling "
            "against trl.GRPOConfig's documentation)."
        )
    _check_sampling(grpo)


def _check_reward_model(model: Any) -> None:
    """`extra.reward_model` is text naming a model (YAML's `5` is a number, not a name), or a
    mapping of LlamaConfig fields for proxy-prm's shape (checked where it is built)."""
    from isolab.paths import check_visible

    fix = (
        "name the model of the model-based reward: a preset (tiny-orm), a hub id or a folder "
        "(or, for proxy-prm, a mapping of its LlamaConfig fields)"
    )
    if isinstance(model, dict) and model:
        return
    if not isinstance(model, str) or not model.strip():
        raise ValueError(f"extra.reward_model = {brief(model)}: {fix}; quote it in YAML.")
    check_visible(model, "extra.reward_model", f"remove it ({fix})")


def _check_sampling(grpo: dict[str, Any]) -> None:
    """TRL's sampling fields as transformers checks them: TRL passes them on unchecked, and
    transformers' logits processor refuses an out-of-range one only at the first rollout, after
    the run exists (and vLLM's sampling parameters refuse the same)."""
    import transformers

    checks = {  # field: (the processor transformers samples with, the value that turns it off)
        "top_p": (transformers.TopPLogitsWarper, 1.0),
        "top_k": (transformers.TopKLogitsWarper, 0),
        "min_p": (transformers.MinPLogitsWarper, None),
        "repetition_penalty": (transformers.RepetitionPenaltyLogitsProcessor, 1.0),
    }
    for key, (processor, off) in checks.items():
        value = grpo.get(key, off)
        if value is None or value == off:
            continue
        try:
            processor(value)
        except (ValueError, TypeError) as err:
            raise ValueError(f"extra.grpo.{key} = {value!r}: {err}") from None
