"""FLOP formulas against `torch.utils.flop_counter.FlopCounterMode` around the real calls.

The comparison is `benchmarks/flops_accuracy.py`'s, on tiny models: a Llama with full
multi-head attention, a Qwen2 with grouped-query attention, q/k/v biases and tied embeddings,
and two mixtures of experts under transformers' default `grouped_mm` experts: a Qwen2-MoE (a
dense block then a sparse one with a shared expert and its gate) and a Mixtral (4 experts,
top-2). `tests/test_flops_families.py` covers more families, without LoRA.
"""

from __future__ import annotations

import pytest
from helpers import tiny_llama
from transformers import MixtralConfig, Qwen2Config, Qwen2MoeConfig

from isolab.compute.flops import (
    forward_flops,
    generation_flops,
    reward_model_flops,
    training_flops,
)
from isolab.compute.shapes import LoraSpec, MoeShape, lora_targets, model_shape

pytestmark = pytest.mark.usefixtures("one_thread")


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
MOE_COMMON = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=48,
    num_experts_per_tok=2,
    **COMMON,
)
MOE = {
    "qwen2-moe": Qwen2MoeConfig(
        intermediate_size=96,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=48,
        num_experts=4,
        mlp_only_layers=[0],
        **MOE_COMMON,
    ),
    "mixtral": MixtralConfig(intermediate_size=32, num_local_experts=4, **MOE_COMMON),
}
BUCKETS = ((5, 4, 2), (9, 6, 1))  # (prompt, completion, rollouts)


LORA_CASES = {
    "full": (0, ()),
    "lora-qkvo": (4, ("q_proj", "k_proj", "v_proj", "o_proj")),
    "lora-qv": (4, ("q_proj", "v_proj")),  # PEFT's Llama default: k and the first block's dK skip
    "lora-all": (4, "all-linear"),  # MLP adapters: down_proj's B is the block's last matmul
}


# LoRA on a mixture of experts is counted on attention projections only.
CASES = [(arch, case) for arch in TINY for case in LORA_CASES] + [
    (arch, case) for arch in MOE for case in ("full", "lora-qkvo")
]


@pytest.mark.parametrize(("arch", "case"), CASES)
def test_every_component_matches_flop_counter(bench, arch, case):
    """Generation, update (CPU and CUDA head paths, gradient checkpointing), reference and
    old-policy forwards, reward model, and the ledger's step totals for β = 0 and β > 0."""
    rank, targets = LORA_CASES[case]
    config = (TINY | MOE)[arch]
    rows = bench.compare_arch(arch, config, rank, buckets=BUCKETS, lora_targets=targets)
    components = {r.component for r in rows}
    assert {
        "search: generate",
        "update: fwd+bwd",
        "reference fwd",
        "reward model fwd",
    } <= components
    assert {r.scenario for r in rows} >= {"β=0, μ=1", "β=0.04, μ=2"}
    bad = [r for r in rows if r.formula != r.measured]  # integers on both sides: equal
    assert not bad, "\n" + bench.format_table(bad)


def test_model_shape_reads_gqa_head_dim_and_tying():
    shape = model_shape(TINY["qwen2-gqa-bias-tied"])
    assert (shape.heads, shape.kv_heads, shape.head_dim) == (4, 2, 16)
    assert shape.tied_embeddings and shape.gated_mlp
    assert shape.linears()["k"] == (64, 32)
    explicit = tiny_llama(num_attention_heads=2, head_dim=48, num_hidden_layers=1)
    assert model_shape(explicit).q_dim == 96


def test_model_shape_reads_experts_and_sparse_layers():
    qwen = model_shape(MOE["qwen2-moe"])
    assert qwen.moe == MoeShape(
        experts=4,
        top_k=2,
        expert_intermediate=32,
        shared_intermediate=48,
        shared_expert_gate=True,
        sparse_layers=frozenset({1}),
    )
    assert (qwen.is_sparse(0), qwen.is_sparse(1)) == (False, True)
    assert qwen.linears()["up"] == (64, 96)  # the dense block's MLP
    sparse = qwen.linears(sparse=True)
    assert sparse["router"] == (64, 4) and sparse["experts_down"] == (2 * 32, 64)
    assert sparse["shared_up"] == (64, 48) and sparse["shared_expert_gate"] == (64, 1)
    mixtral = model_shape(MOE["mixtral"])
    assert mixtral.moe is not None and mixtral.moe.sparse_layers == {0, 1}
    assert mixtral.moe.expert_intermediate == 32 and not mixtral.moe.shared_intermediate
    assert "shared_expert_gate" not in mixtral.linears(sparse=True)
    every_other = Qwen2MoeConfig(num_hidden_layers=4, decoder_sparse_step=2, num_experts=4)
    assert model_shape(every_other).moe.sparse_layers == {1, 3}
    assert model_shape(TINY["llama-mha"]).moe is None


def test_lora_on_experts_is_refused():
    shape = model_shape(MOE["mixtral"])
    assert lora_targets(shape, LoraSpec(r=4)) == {"q", "k", "v", "o"}
    with pytest.raises(ValueError, match="attention projections only"):
        lora_targets(shape, LoraSpec(r=4, target_modules=("q_proj", "gate_proj")))
    with pytest.raises(ValueError, match="all-linear"):
        lora_targets(shape, LoraSpec(r=4, target_modules="all-linear"))


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
