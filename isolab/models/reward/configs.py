"""Configs of reward models, for the ledger and planning: no weights read, no code run.

A model-based reward charges the forward passes of a reward model (`flops/reward`); the
`PretrainedConfig` it charges comes from here, read from a preset's shape or a hub config,
so planning never builds or downloads a model.
"""

from __future__ import annotations

from typing import Any

from isolab.config import is_user_reward, reward_parts
from isolab.models import loading
from isolab.models.tiny import (
    TINY_PRESETS,
    build_char_tokenizer,
    is_reward_preset,
    is_tiny,
    reward_preset_config,
    tiny_model_config,
)
from isolab.vocab import MODEL_BASED, REWARDS

#: Default reward models by (reward system, prompt style). CPU (raw, tiny models): isolab's own.
#: Proxy on CPU: the `tiny-l` shape, ≈ 3.4× the matmul FLOPs per token of `tiny-m`, so that
#: the reward model takes a large share of the budget, as the paper's 7B PRM does for 1.5B–7B
#: policies. GPU (chat, instruct LMs): hub models.
DEFAULT_REWARD_MODELS: dict[tuple[str, str], str] = {
    ("orm", "raw"): "tiny-orm",
    ("prm", "raw"): "tiny-prm",
    ("proxy-prm", "raw"): "tiny-l",
    ("orm", "chat"): "Skywork/Skywork-Reward-V2-Llama-3.1-8B",
    ("prm", "chat"): "Qwen/Qwen2.5-Math-PRM-7B",
    ("proxy-prm", "chat"): "Qwen/Qwen2.5-Math-PRM-7B",
}


def proxy_config(spec: str | dict):
    """The config a `proxy-prm` charges: a tiny preset, `LlamaConfig` fields over `tiny-m`'s,
    or a hub id / local folder.

    >>> proxy_config({"hidden_size": 256, "num_hidden_layers": 8}).num_hidden_layers
    8
    """
    if isinstance(spec, dict):
        config = _tiny_config("tiny-m")
        for key, value in spec.items():
            if not hasattr(config, key):
                raise ValueError(f"reward_model field {key!r} is not a LlamaConfig field.")
            setattr(config, key, value)
        if "num_attention_heads" in spec and "num_key_value_heads" not in spec:
            config.num_key_value_heads = config.num_attention_heads
        if "hidden_size" in spec and "head_dim" not in spec:
            config.head_dim = config.hidden_size // config.num_attention_heads
        return config
    if is_tiny(spec):
        return _tiny_config(spec)
    if is_reward_preset(spec):
        return reward_preset_config(spec)
    return _hub_config(spec)


def _tiny_config(preset: str):
    config = tiny_model_config(TINY_PRESETS[preset], len(build_char_tokenizer()))
    config.num_labels = 1
    return config


def refuse_reward_model_code(err: ValueError, name: str) -> None:
    """transformers' "needs trust_remote_code" refusal, as isolab's message (nothing ran)."""
    loading.refuse_remote_code(err, loading.REMOTE_CODE.format(what="reward model", name=name))


def _from_hub(load, model_id: str, what: str):
    """`load(model_id)` without running the model's own code (configs and tokenizers need
    none; planning never runs any), or an error that says how to get the model."""
    try:
        return load(model_id, trust_remote_code=False)
    except ValueError as err:
        refuse_reward_model_code(err, model_id)
        raise RuntimeError(f"cannot read the {what} of reward model {model_id!r}: {err}") from err
    except OSError as err:
        raise RuntimeError(
            f"cannot read the {what} of reward model {model_id!r}: {err}\nIt is neither a local "
            "folder nor reachable on the Hugging Face Hub (offline?). Download it where the hub "
            f"is reachable (`hf download {model_id}`) or, on CPU, use the defaults (tiny-orm, "
            "tiny-prm, tiny-l for proxy-prm)."
        ) from err


def _hub_config(model_id: str):
    from transformers import AutoConfig

    return _from_hub(AutoConfig.from_pretrained, model_id, "config")


def hub_tokenizer(model_id: str):
    """The tokenizer of a hub reward model (proxy-prm counts the tokens it would score)."""
    from transformers import AutoTokenizer

    return _from_hub(AutoTokenizer.from_pretrained, model_id, "tokenizer")


def reward_model_name(name: str, reward_model: str | dict | None) -> str | None:
    """The model `extra["reward_model"]` names for reward system `name` (`orm`, `prm`), or None
    for its default. Only `proxy-prm` takes a dict of `LlamaConfig` fields: it charges a model it
    never runs, where an ORM or a PRM has to load one."""
    if isinstance(reward_model, dict):
        if reward_model:
            raise ValueError(
                f"extra.reward_model = {reward_model!r}: reward {name!r} loads a reward model, "
                "so name one (an isolab preset, a hub id or a local folder); only proxy-prm "
                "takes LlamaConfig fields."
            )
        return None  # empty: the default, as before
    return reward_model or None


def reward_model_config(name: str, style: str, reward_model: str | dict | None = None):
    """The `PretrainedConfig` whose forward passes reward system `name` charges, or None for a
    rule-based one. Reads no weights, so planning never builds or downloads a model."""
    parts = reward_parts(name)
    if len(parts) > 1:  # a sum of rewards: the one model-based part (if any) is charged
        priced = [p for p in parts if p in MODEL_BASED]
        return reward_model_config(priced[0], style, reward_model) if priced else None
    if is_user_reward(name):  # a function of the user's: no reward model to charge
        return None
    if name not in REWARDS:
        raise ValueError(f"reward = {name!r}: choose one of {', '.join(REWARDS)}.")
    if name not in MODEL_BASED:
        return None
    if name == "proxy-prm":
        return proxy_config(reward_model or DEFAULT_REWARD_MODELS[(name, style)])
    spec = reward_model_name(name, reward_model) or DEFAULT_REWARD_MODELS[(name, style)]
    if is_reward_preset(spec):
        return reward_preset_config(spec)
    return _hub_config(spec)


def reward_model_config_for(cfg) -> Any | None:
    """The reward model config of a `RunConfig` (reward system, prompt style, and
    `extra["reward_model"]`), for `FlopLedger` and `plan_run`; None for rule-based rewards."""
    style = "raw" if is_tiny(cfg.model) else "chat"
    return reward_model_config(cfg.reward, style, cfg.extra.get("reward_model"))
