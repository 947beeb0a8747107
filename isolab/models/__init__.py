"""Models: the tiny presets (shipped weights), SmolLM2, reward models; build, load, sample.

    from isolab import models
    models.build("tiny-m")            # installs the shipped weights (sha256-checked)
    model, tok = models.load("tiny-m")
    models.digest("tiny-m")           # sha256 of the weights in use

Modules: `tiny` (specs and shapes of the tiny presets, `tiny-chat` among them), `weights`
(install, build, load, digests), `warm_start` (the supervised warm start to a target regime),
`chat_warm_start` (`tiny-chat`'s warm start on a generic numeric-answer format), `sampling`
(sample and grade with HF generate), `smollm2` (the offline real-LM preset), and the package
`reward` (tiny ORM/PRM, hub reward models, and the configs the ledger charges).
"""

from isolab.models.loading import check_source, load
from isolab.models.tiny import (
    CHAT_PRESETS,
    REAL_PRESETS,
    REWARD_MODEL_PRESETS,
    TINY_CHAT_SCOPE,
    TINY_PRESETS,
    ChatSpec,
    RewardModelSpec,
    TinySpec,
    WarmStartTarget,
    build_byte_tokenizer,
    build_char_tokenizer,
    chat_model_config,
    is_chat_preset,
    is_reward_preset,
    is_tiny,
    param_count,
    preset_names,
    reward_preset_config,
    tiny_model_config,
    tiny_refusal,
)
from isolab.models.weights import (
    BUILD_INFO,
    WEIGHTS,
    build,
    current_digest,
    digest,
    install_shipped,
    list_models,
    model_dir,
    reward_model_dir,
    save_atomically,
    sha256_file,
    shipped_dir,
    shipped_info,
)

__all__ = [
    "BUILD_INFO",
    "CHAT_PRESETS",
    "REAL_PRESETS",
    "REWARD_MODEL_PRESETS",
    "TINY_CHAT_SCOPE",
    "TINY_PRESETS",
    "WEIGHTS",
    "ChatSpec",
    "RewardModelSpec",
    "SampleResult",
    "TinySpec",
    "WarmStartTarget",
    "build",
    "build_byte_tokenizer",
    "build_char_tokenizer",
    "chat_model_config",
    "check_source",
    "current_digest",
    "digest",
    "install_shipped",
    "is_chat_preset",
    "is_reward_preset",
    "is_tiny",
    "list_models",
    "load",
    "model_dir",
    "param_count",
    "preset_names",
    "reward_model_dir",
    "reward_preset_config",
    "sample_and_grade",
    "save_atomically",
    "sha256_file",
    "shipped_dir",
    "shipped_info",
    "tiny_model_config",
    "tiny_refusal",
]


def __getattr__(name: str):
    """`sampling` imports torch: loaded on first use, so that a process that only reads results
    (a notebook re-plotting a snapshot, `isolab study run` from runs/) never imports torch."""
    if name in ("SampleResult", "sample_and_grade"):
        from isolab.models import sampling

        return getattr(sampling, name)
    raise AttributeError(f"module 'isolab.models' has no attribute {name!r}")
