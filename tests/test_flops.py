"""FLOP formulas against `torch.utils.flop_counter.FlopCounterMode` around the real calls.

The comparison is `benchmarks/flops_accuracy.py`'s, on two tiny models: a Llama with full
multi-head attention and a Qwen2 with grouped-query attention, q/k/v biases and tied embeddings.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
from helpers import tiny_llama
from transformers import Qwen2Config

from isolab.compute.flops import (
    forward_flops,
    generation_flops,
    reward_model_flops,
    training_flops,
)
from isolab.compute.shapes import LoraSpec, lora_targets, model_shape

BENCH_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "flops_accuracy.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("flops_accuracy", BENCH_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["flops_accuracy"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    # Tiny matmuls on shared cores: one thread avoids OpenMP contention (10× faster here).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


COMMON = dict(
    pad_token_id=0, eos_token_id=1, bos_token_id=2, max_position_embeddings=64, num_labels=1
)
TINY = {
    "llama-mha": tiny_llama(num_key_value_heads=4, **COMMON),
    "qwen2-gqa-bias-tied": Qwen2Config(
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=48,
        tie_word_embeddings=True,
        **COMMON,
    ),
}
BUCKETS = ((5, 4, 2), (9, 6, 1))  # (prompt, completion, rollouts)


LORA_CASES = {
    "full": (0, ()),
    "lora-qkvo": (4, ("q_proj", "k_proj", "v_proj", "o_proj")),
    "lora-qv": (4, ("q_proj", "v_proj")),  # PEFT's Llama default: k and the first block's dK skip
    "lora-all": (4, "all-linear"),  # MLP adapters: down_proj's B is the block's last matmul
}


@pytest.mark.parametrize("case", list(LORA_CASES))
@pytest.mark.parametrize("arch", list(TINY))
def test_every_component_matches_flop_counter(bench, arch, case):
    """Generation, update (CPU and CUDA head paths, gradient checkpointing), reference and
    old-policy forwards, reward model, and the ledger's step totals for β = 0 and β > 0."""
    rank, targets = LORA_CASES[case]
    rows = bench.compare_arch(arch, TINY[arch], rank, buckets=BUCKETS, lora_targets=targets)
    components = {r.component for r in rows}
    assert {
        "search: generate",
        "update: fwd+bwd",
        "reference fwd",
        "reward model fwd",
    } <= components
    assert {r.scenario for r in rows} >= {"β=0, μ=1", "β=0.04, μ=2"}
    bad = [r for r in rows if r.rel_err > 0.02]
    assert not bad, "\n" + bench.format_table(bad)


def test_model_shape_reads_gqa_head_dim_and_tying():
    shape = model_shape(TINY["qwen2-gqa-bias-tied"])
    assert (shape.heads, shape.kv_heads, shape.head_dim) == (4, 2, 16)
    assert shape.tied_embeddings and shape.gated_mlp
    assert shape.linears()["k"] == (64, 32)
    explicit = tiny_llama(num_attention_heads=2, head_dim=48, num_hidden_layers=1)
    assert model_shape(explicit).q_dim == 96


def test_lora_targets_accept_peft_names_and_reject_others():
    shape = model_shape(TINY["llama-mha"])
    assert lora_targets(shape, LoraSpec(r=4, target_modules=("q_proj", "v_proj"))) == {"q", "v"}
    assert lora_targets(shape, LoraSpec(r=4, target_modules="all-linear")) == set(shape.linears())
    with pytest.raises(ValueError, match="not a projection"):
        lora_targets(shape, LoraSpec(r=4, target_modules=("lm_head",)))
    with pytest.raises(ValueError, match="regular expressions"):
        lora_targets(shape, LoraSpec(r=4, target_modules=".*proj"))


def test_lengths_are_validated():
    config = TINY["llama-mha"]
    with pytest.raises(ValueError, match="one length per sequence"):
        generation_flops(config, [3, 4], [2])
    with pytest.raises(ValueError, match="at least one token"):
        generation_flops(config, [3], [0])
    with pytest.raises(ValueError, match="logits length"):
        forward_flops(config, [4], [5])
    with pytest.raises(ValueError, match="negative"):
        reward_model_flops(config, [-1])


def test_lora_update_sits_between_a_forward_and_a_full_update():
    config, seqs, logits = TINY["llama-mha"], [12, 20], [4, 8]
    lora = LoraSpec(r=4)
    full = training_flops(config, seqs, logits)
    adapted = training_flops(config, seqs, logits, lora)
    assert forward_flops(config, seqs, logits, lora) < adapted < full
    assert training_flops(config, seqs, logits, lora, gradient_checkpointing=True) > adapted
