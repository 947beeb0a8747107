"""Models: the tiny presets (shipped weights), SmolLM2, reward models; build, load, sample.

    from isolab import models
    models.build("tiny-m")            # installs the shipped weights (sha256-checked)
    model, tok = models.load("tiny-m")
    models.digest("tiny-m")           # sha256 of the weights in use

Modules: `tiny` (specs and shapes of the tiny presets), `weights` (install, build, load,
digests), `warm_start` (the supervised warm start to a target regime), `sampling` (sample and
grade with HF generate), `smollm2` (the offline real-LM preset), and the package `reward`
(tiny ORM/PRM, hub reward models, and the configs the ledger charges).
"""

from isolab.models.tiny import (
    REAL_PRESETS,
    REWARD_MODEL_PRESETS,
    TINY_PRESETS,
    RewardModelSpec,
    TinySpec,
    WarmStartTarget,
    build_char_tokenizer,
    is_reward_preset,
    is_tiny,
    param_count,
    preset_names,
    reward_preset_config,
    tiny_model_config,
)
from isolab.models.weights import (
    BUILD_INFO,
    WEIGHTS,
    build,
    check_source,
    current_digest,
    digest,
    install_shipped,
    list_models,
    load,
    model_dir,
    reward_model_dir,
    save_atomically,
    sha256_file,
    shipped_dir,
    shipped_info,
)

__all__ = [
    "BUILD_INFO",
    "REAL_PRESETS",
    "REWARD_MODEL_PRESETS",
    "TINY_PRESETS",
    "WEIGHTS",
    "RewardModelSpec",
    "SampleResult",
    "TinySpec",
    "WarmStartTarget",
    "build",
    "build_char_tokenizer",
    "check_source",
    "current_digest",
    "digest",
    "install_shipped",
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
]


def __getattr__(name: str):
    """`sampling` imports torch: loaded on first use, so that a process that only reads results
    (a notebook re-plotting a snapshot, `isolab study run` from runs/) never imports torch."""
    if name in ("SampleResult", "sample_and_grade"):
        from isolab.models import sampling

        return getattr(sampling, name)
    raise AttributeError(f"module 'isolab.models' has no attribute {name!r}")
