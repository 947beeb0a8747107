"""Every decoder family's FLOPs against `FlopCounterMode`, around the GRPO calls that run it.

One tiny random model per family: Llama, Qwen2, Mistral, Qwen3, Gemma2, Phi3, OLMo2, GPT-NeoX,
Granite (dense) and Qwen2-MoE, Mixtral, Qwen3-MoE (mixtures of experts, under each of
transformers' experts implementations). Each is measured by `benchmarks/flops_accuracy.py`'s helpers: KV-cached
`generate`, TRL's fused-head log-prob forward (the old-policy pass) and one update (that forward,
a GRPO loss, backward), and compared with `generation_flops`, `forward_flops` and
`training_flops`. Counts are integers on both sides, so they must be equal, not close.

What each family adds to the Llama block, and why the count does not change: Qwen2 q/k/v biases
and tied embeddings (biases are added after the product); Mistral and Gemma2 sliding windows
wider than the sequences (they bind beyond 4096 tokens); Qwen3 and OLMo2 q/k norms and Qwen3's
head dim ≠ hidden / heads; Gemma2 softcapped logits, GeLU, sandwich norms; Phi3 fused
``qkv_proj`` and ``gate_up_proj`` (same products, one matmul each); GPT-NeoX parallel attention
and MLP, fused ``query_key_value``, a plain (ungated) MLP and partial rotary; Granite's
embedding, residual, attention and logit multipliers (elementwise). Qwen2-MoE has a shared
expert and its sigmoid gate; Qwen3-MoE a dense block before a sparse one.

Gradient checkpointing reruns each block's forward up to its last saved tensor: a block that
ends ``h + down(m)`` skips the down projection, but Gemma2 and OLMo2 normalise the MLP's output
before the add, and the norm's backward needs it, so they rerun it (`ModelShape.post_mlp_norm`;
counting it as skipped was 4–6% low on their real shapes).

A sliding window narrower than the context does change one count: KV-cached decoding then
attends over the window only, and `generation_flops` (full context) overcounts it (+0.4% for
Mistral with a 4-token window on these lengths); the forward and update passes still compute
the whole masked score matrix. Real windows (4096) are wider than GRPO rollouts here.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from transformers import (
    Gemma2Config,
    GPTNeoXConfig,
    GraniteConfig,
    LlamaConfig,
    MistralConfig,
    MixtralConfig,
    Olmo2Config,
    Phi3Config,
    PretrainedConfig,
    Qwen2Config,
    Qwen2MoeConfig,
    Qwen3Config,
    Qwen3MoeConfig,
)

from isolab.compute.flops import forward_flops, generation_flops, training_flops

pytestmark = pytest.mark.usefixtures("one_thread")


COMMON = dict(
    pad_token_id=0,
    eos_token_id=1,
    bos_token_id=2,
    max_position_embeddings=64,
    vocab_size=40,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
)
GQA = dict(COMMON, num_key_value_heads=2)
MOE_BLOCK = dict(num_experts_per_tok=2, num_key_value_heads=2, **COMMON)

# Builders, not configs: `from_config` writes the experts implementation back into its config.
DENSE: dict[str, Callable[[], PretrainedConfig]] = {
    "llama": lambda: LlamaConfig(intermediate_size=64, **GQA),
    "qwen2": lambda: Qwen2Config(intermediate_size=64, tie_word_embeddings=True, **GQA),
    "mistral": lambda: MistralConfig(intermediate_size=64, sliding_window=32, **GQA),
    "qwen3": lambda: Qwen3Config(intermediate_size=64, head_dim=16, **GQA),
    "gemma2": lambda: Gemma2Config(
        intermediate_size=64, head_dim=16, query_pre_attn_scalar=16, sliding_window=32, **GQA
    ),
    "phi3": lambda: Phi3Config(intermediate_size=64, **GQA),
    "olmo2": lambda: Olmo2Config(intermediate_size=64, **GQA),
    "gpt-neox": lambda: GPTNeoXConfig(intermediate_size=128, **COMMON),
    "granite": lambda: GraniteConfig(
        intermediate_size=64,
        embedding_multiplier=12.0,
        residual_multiplier=0.22,
        attention_multiplier=0.0625,
        logits_scaling=8.0,
        **GQA,
    ),
}
MOE: dict[str, Callable[..., PretrainedConfig]] = {
    "qwen2-moe": lambda **kw: Qwen2MoeConfig(
        intermediate_size=64,
        moe_intermediate_size=16,
        shared_expert_intermediate_size=48,
        num_experts=4,
        **MOE_BLOCK,
        **kw,
    ),
    "mixtral": lambda **kw: MixtralConfig(
        intermediate_size=16, num_local_experts=4, **MOE_BLOCK, **kw
    ),
    "qwen3-moe": lambda **kw: Qwen3MoeConfig(
        intermediate_size=64,
        moe_intermediate_size=16,
        num_experts=4,
        decoder_sparse_step=2,
        head_dim=16,
        **MOE_BLOCK,
        **kw,
    ),
}
# transformers 5 runs experts with `grouped_mm` by default, `generate` switches to `batched_mm`
# for decoding off CPU; `eager` loops over experts. All three compute each token's k experts only.
EXPERTS_IMPLEMENTATIONS = ("grouped_mm", "batched_mm", "eager")
CASES: dict[str, Callable[[], PretrainedConfig]] = DENSE | {
    f"{name}/{impl}": (lambda build=build, impl=impl: build(experts_implementation=impl))
    for name, build in MOE.items()
    for impl in EXPERTS_IMPLEMENTATIONS
}
BUCKETS = ((5, 3, 2), (8, 2, 1))  # (prompt, completion, rollouts)


def measured_and_planned(bench, config) -> dict[str, tuple[int, int]]:
    """(measured, formula) FLOPs of generation, the log-prob forward and one update, without
    and with gradient checkpointing (hardware FLOPs: the recomputed forward counts)."""
    model, _ = bench.build_policy(config)
    prompts, completions = bench.lengths(BUCKETS)
    seqs = [p + c for p, c in zip(prompts, completions, strict=True)]
    logits = [s - 1 for s in seqs]  # TRL's fused head off CUDA: every position but the last
    vocab = config.vocab_size
    with bench.trl_head_path(compact=False):
        return {
            "generate": (
                bench.measure_generation(model, vocab, BUCKETS),
                generation_flops(config, prompts, completions),
            ),
            "forward": (
                bench.measure_logprob_forward(model, vocab, BUCKETS),
                forward_flops(config, seqs, logits),
            ),
            "update": (
                bench.measure_update(model, vocab, BUCKETS),
                training_flops(config, seqs, logits),
            ),
        } | _checkpointed(bench, model, config, seqs, logits)


def _checkpointed(bench, model, config, seqs, logits) -> dict[str, tuple[int, int]]:
    """Last: the model is not reused after checkpointing."""
    with bench.gradient_checkpointing(model, is_peft=False):
        return {
            "update, checkpointed": (
                bench.measure_update(model, config.vocab_size, BUCKETS),
                training_flops(config, seqs, logits, gradient_checkpointing=True),
            )
        }


@pytest.mark.parametrize("family", list(CASES))
def test_family_matches_flop_counter(bench, family):
    counts = measured_and_planned(bench, CASES[family]())
    off = {
        name: f"formula {planned} vs measured {measured} ({planned / measured - 1:+.3%})"
        for name, (measured, planned) in counts.items()
        if planned != measured
    }
    assert not off, off
