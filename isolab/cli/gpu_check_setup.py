"""What `isolab gpu-check` measures, at what budget, on which device.

The two model shapes (`SHAPES`), the budget per device (`BUDGETS`, and `tiny`, the shapes cut
to CPU size), the random-weight models built from a shape, the device resolved from
`--device`, the engines measured on it and the peak its MFU divides by. Apart from the
measurements (`gpu_check_measure`) and the report (`gpu_check`) so that both read one
definition of the budgets, and tests can check each device decision without running a step
(tests/test_cuda_branches.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Device = Literal["auto", "cuda", "cpu"]


@dataclass(frozen=True)
class Shape:
    """A causal LM's shape (its Hugging Face config): `arch` is `llama` or `qwen2`."""

    arch: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    rope_theta: float


#: The two shapes measured, from the models' own config.json on the hub
#: (HuggingFaceTB/SmolLM2-135M-Instruct, Qwen/Qwen2.5-0.5B-Instruct); both tie embeddings.
SHAPES = {
    "smollm2-135m": Shape("llama", 49152, 576, 1536, 30, 9, 3, 100000.0),
    "qwen2.5-0.5b": Shape("qwen2", 151936, 896, 4864, 24, 14, 2, 1000000.0),
}


@dataclass(frozen=True)
class Budget:
    """What one check spends on a device.

    Attributes:
        full_shapes: the models at their real shape (else `tiny`: 2 layers, 16-wide heads in
            the same ratio of query to key-value heads, a 512-entry vocabulary).
        steps: GRPO optimizer steps per model and engine.
        n: completions per prompt.
        B_p: prompts per step.
        max_completion_tokens: completion cap.
        eval_problems: validation problems per evaluation (4 samples each).
        study_B_p: prompts per step of the study's smoke.
        study_steps: steps of its largest-n point (a smaller n gets proportionally more).
        study_max_completion_tokens: the smoke's completion cap.
    """

    full_shapes: bool
    steps: int
    n: int
    B_p: int
    max_completion_tokens: int
    eval_problems: int
    study_B_p: int
    study_steps: int
    study_max_completion_tokens: int


#: Designed to take ≤ 5 minutes on one H200 (not yet run on CUDA: docs/gpu.md) and about a
#: minute on 2 CPU cores.
BUDGETS = {
    "cuda": Budget(True, 5, 8, 16, 256, 16, 8, 2, 128),
    "cpu": Budget(False, 2, 2, 2, 16, 2, 1, 1, 16),
}


def tiny(shape: Shape) -> Shape:
    """`shape` cut to CPU size: 2 layers, heads 16 wide in the same query : key-value ratio
    (SmolLM2's 3 : 1, Qwen2.5's 7 : 1), a 512-entry vocabulary (the character tokenizer's
    ~100 symbols and padding)."""
    ratio = shape.num_attention_heads // shape.num_key_value_heads
    return Shape(shape.arch, 512, 16 * ratio, 32 * ratio, 2, ratio, 1, shape.rope_theta)


def random_model(shape: Shape, path: Path) -> Path:
    """A randomly initialised model of `shape` saved to `path`, with a character tokenizer
    padded to its vocabulary (so every sampled id decodes) and a plain chat template."""
    import string

    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        AutoModelForCausalLM,
        LlamaConfig,
        PreTrainedTokenizerFast,
        Qwen2Config,
    )

    vocab = {"<pad>": 0, "<bos>": 1, "<eos>": 2}
    for ch in string.printable:
        vocab.setdefault(ch, len(vocab))
    for i in range(len(vocab), shape.vocab_size):
        vocab[f"<t{i}>"] = i
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        padding_side="left",
    )
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    config_class = {"llama": LlamaConfig, "qwen2": Qwen2Config}[shape.arch]
    cfg = config_class(
        vocab_size=shape.vocab_size,
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=shape.num_key_value_heads,
        tie_word_embeddings=True,
        max_position_embeddings=4096,
        rope_parameters={"rope_theta": shape.rope_theta, "rope_type": "default"},
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def resolve_device(device: Device) -> str:
    """`cuda` or `cpu`: `auto` takes CUDA where torch sees it.

    Raises:
        ValueError: `cuda` asked for where torch sees no CUDA device.
    """
    import torch

    cuda = torch.cuda.is_available()
    if device == "cuda" and not cuda:
        raise ValueError(
            "--device cuda: torch sees no CUDA device here (a CPU build of torch, or no GPU "
            "visible); run on the GPU node, or --device cpu for the CPU fallback."
        )
    return "cuda" if device == "cuda" or (device == "auto" and cuda) else "cpu"


def engines_to_measure(device: str) -> list[str]:
    """HF generate always; vLLM too on CUDA where it is installed (on a CPU its start-up alone
    exceeds the fallback's budget)."""
    from isolab.rl.engines import vllm_installed

    return ["hf", "vllm"] if device == "cuda" and vllm_installed() else ["hf"]


def peak(device: str) -> dict[str, Any]:
    """The peak the MFU figures divide by (`run_device_peak`, as the runs' own ledger): the
    GPU table at bf16, or this host's measured fp32 matmul rate."""
    import torch

    from isolab.compute.peak import run_device_peak

    found = run_device_peak()
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    return {"device_name": name, "peak_flops_per_s": found.flops_per_s, "peak_source": found.source}
