"""Matmul FLOPs of every compute component of a GRPO step, from a config and exact token counts.

The ledger of "Where Should RL Post-Training Compute Go?" (Wilhelm & Kao, arXiv 2607.13389)
splits a run into ``C_total = C_search + C_learning + C_reward``. This module gives each term
as a small pure function over a transformers ``PretrainedConfig`` and per-sequence lengths:

- search: ``generation_flops`` (prefill + KV-cached decode of every rollout);
- learning: ``training_flops`` (policy forward + backward), ``forward_flops`` (reference
  model, old-policy log-probs);
- reward: ``reward_model_flops`` (a sequence-classification model over the scored tokens).

Convention (the one ``torch.utils.flop_counter.FlopCounterMode`` uses, against which every
formula here is verified by ``benchmarks/flops_accuracy.py``):

- Only matrix products count, 2 FLOPs per multiply-accumulate. A product of an ``(m, k)`` by a
  ``(k, n)`` matrix costs ``2·m·k·n``. Norms, softmax, rotary embeddings (applied elementwise),
  activations, residual adds, biases (added after the product), embedding look-ups and the
  log-softmax of the LM head are not matmuls and count 0: they are sub-leading terms, dropped
  by Kaplan et al. (2020, §2.1) too. (transformers 5 builds rotary angles by broadcasting,
  not by a matmul, so they are absent from the measured count as well.)
- A linear layer with ``P`` weights costs ``2·P`` FLOPs per token forward; its backward costs
  ``2·P`` for the input gradient plus ``2·P`` for the weight gradient, hence the familiar
  ``6·P`` per token for training (Kaplan et al. 2020, §2.1 and Table 1).
- Attention is counted at each position's real context length, as the kernels compute it:
  ``Q·Kᵀ`` and ``P·V`` for ``q`` queries over ``k`` keys cost ``2·q·k·d`` each per head, the
  "attention logits" and "softmax @ values" terms of Hoffmann et al. (2022, Chinchilla, App. F);
  Kaplan et al. (2020, Table 1) fold them into one ``2·n_layer·n_ctx·d_attn`` term. Eager
  attention and ``FlopCounterMode``'s SDPA formula both count the dense ``q × k`` block, so no
  causal halving is applied.

Mixtures of experts (``ModelShape.moe``): a sparse block costs, per token, its router
(``h → experts``), the ``top_k`` experts it is routed to, and the shared expert and its gate if
any; which experts a token picks does not change the count, and nothing is dropped. That is
what transformers 5 runs in each of its experts implementations: ``grouped_mm`` (the default,
which isolab's models use for training and prefill; one grouped GEMM over the tokens sorted by
expert), ``batched_mm`` (which ``generate`` switches to for decoding off CPU; one ``bmm`` row
per token and expert) and ``eager`` (a loop over the experts that were hit). None computes an
expert for a token not routed to it. The routing softmax and top-k are not matmuls and count 0.
``FlopCounterMode`` has no formula for ``aten._grouped_mm``; the benchmark registers one.

Counts are exact Python integers. Pass the real per-sequence lengths to get model FLOPs that do
not depend on padding (what vLLM computes); pass padded lengths to reproduce a padded batch.
Equal to the measured count, FLOP for FLOP, on Llama (multi-head, and grouped-query in
SmolLM2-135M's shape), Qwen2 (q/k/v biases, tied embeddings), Mistral, Qwen3, Gemma2, Phi3
(fused q/k/v and gate/up: the same products), OLMo2, GPT-NeoX (parallel attention, plain MLP),
Granite, and the mixtures of experts Qwen2-MoE (shared expert and its gate, dense and sparse
blocks mixed) and Mixtral (``tests/test_flops_families.py``). Configs of other decoder-only
families with the standard ``hidden_size`` / ``num_hidden_layers`` / ``num_attention_heads`` /
``num_key_value_heads`` / ``head_dim`` / ``intermediate_size`` / ``vocab_size`` fields are read
the same way (``isolab.compute.shapes``). Sliding-window attention is counted at full context:
exact while sequences fit in the window (4096 tokens in Mistral-7B-v0.1 and Gemma2).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from isolab.compute.shapes import ModelShape, lora_targets, model_shape


def _ints(lens: Iterable[Any], name: str) -> list[int]:
    out = [int(x) for x in lens]
    if any(x < 0 for x in out):
        raise ValueError(f"{name} has a negative length: {out}")
    return out


def _paired(
    a: Iterable[Any], b: Iterable[Any] | None, a_name: str, b_name: str
) -> list[tuple[int, int]]:
    xs = _ints(a, a_name)
    ys = xs if b is None else _ints(b, b_name)
    if len(xs) != len(ys):
        raise ValueError(
            f"{a_name} has {len(xs)} sequences but {b_name} has {len(ys)}: give one length per sequence."
        )
    return list(zip(xs, ys, strict=True))


# ---- building blocks (per sequence) -------------------------------------------------------
@functools.lru_cache(maxsize=128)  # called once per sequence by the ledger: keep it O(1)
def linear_flops_per_token(shape: ModelShape, sparse: bool = False) -> int:
    """Forward FLOPs of one block's weight matrices for one token: ``2 · Σ in·out``.

    The "2N per token" rule (Kaplan et al. 2020, §2.1): each weight is one multiply-accumulate
    per token. In a sparse block (``sparse``) N is what the token runs through: router,
    ``top_k`` routed experts, shared expert and its gate (``ModelShape.linears``); more
    experts add parameters, not FLOPs per token (Fedus et al. 2022, Switch Transformers).
    """
    return 2 * sum(i * o for i, o in shape.linears(sparse).values())


@functools.lru_cache(maxsize=128)
def blocks_linear_flops_per_token(shape: ModelShape) -> int:
    """Forward FLOPs of all blocks' weight matrices for one token: dense and sparse blocks summed."""
    return sum(
        linear_flops_per_token(shape, shape.is_sparse(layer)) for layer in range(shape.layers)
    )


def adapter_flops_per_token(shape: ModelShape, lora: Any | None) -> int:
    """Forward FLOPs of one block's LoRA adapters for one token: ``2 · r · Σ (in + out)``.

    An adapter ``B·A`` on an ``in → out`` projection is two matmuls, ``in → r`` then ``r → out``
    (Hu et al. 2021, LoRA), so ``r·(in + out)`` multiply-accumulates per token. The same in
    every block: a mixture of experts is adapted on attention projections only.
    """
    if lora is None:
        return 0
    linears = shape.linears()
    return 2 * lora.r * sum(sum(linears[m]) for m in lora_targets(shape, lora))


def _token_flops(shape: ModelShape, lora: Any | None) -> int:
    """Forward FLOPs of all blocks' weights and adapters for one token."""
    return blocks_linear_flops_per_token(shape) + shape.layers * adapter_flops_per_token(
        shape, lora
    )


def attention_flops(shape: ModelShape, queries: int, keys: int) -> int:
    """Forward FLOPs of one block's attention scores and mixing: ``4 · q_dim · queries · keys``.

    ``Q·Kᵀ`` and ``P·V`` each cost ``2·queries·keys·head_dim`` per query head (Hoffmann et
    al. 2022, App. F). Grouped-query attention shares K/V across heads but still computes one
    score matrix per query head, so it costs the same as multi-head attention here.
    """
    return 4 * shape.q_dim * queries * keys


def backbone_forward_flops(shape: ModelShape, seq_len: int, lora: Any | None = None) -> int:
    """Forward FLOPs of all decoder blocks on one sequence of ``seq_len`` tokens, no cache.

    ``Σ_blocks seq_len · (2·P_block + adapters) + layers · 4·q_dim·seq_len²``, with ``P_block``
    a sparse block's active parameters.
    """
    attention = shape.layers * attention_flops(shape, seq_len, seq_len)
    return seq_len * _token_flops(shape, lora) + attention


def lm_head_flops(shape: ModelShape, positions: int) -> int:
    """Forward FLOPs of the LM head on ``positions`` hidden states: ``2 · h · V`` each."""
    return 2 * shape.hidden * shape.vocab * positions


# ---- the components -----------------------------------------------------------------------
def generation_flops(
    model_config: Any,
    prompt_lens: Iterable[int],
    completion_lens: Iterable[int],
    lora: Any | None = None,
) -> int:
    """FLOPs of generating each completion after its prompt with a KV cache (the search cost).

    For a prompt of ``p`` tokens and a completion of ``c ≥ 1`` tokens, ``generate`` runs:

    - a prefill over the ``p`` prompt tokens: blocks on ``p`` tokens, attention ``p × p``, and
      the LM head on the last position only (transformers sets ``logits_to_keep=1``; vLLM also
      projects only the sampled positions), which yields completion token 1;
    - ``c − 1`` decode steps: step ``j`` feeds completion token ``j`` at position ``p + j − 1``,
      attends over ``p + j`` cached keys, and projects 1 position. The last token is never fed.

    Summing, with ``F = Σ_blocks 2·P_block (+ adapters)`` per token (active parameters in a
    sparse block)::

        F·(p + c − 1) + layers · 4·q_dim·(p² + (c − 1)·p + c·(c − 1)/2) + 2·h·V·c

    That is the per-token ``2N`` of Kaplan et al. (2020, §2.1) plus attention over each
    position's real context (Hoffmann et al. 2022, App. F), as nanochat's
    ``estimate_decode_flops`` counts decoding. LoRA adapters that are not merged (PEFT, vLLM's
    punica kernels) add their matmuls to every position.

    Args:
        model_config: the policy's ``PretrainedConfig``.
        prompt_lens: prompt tokens of each rollout.
        completion_lens: generated tokens of each rollout (EOS included), each ≥ 1.
        lora: adapters active during generation (``LoraSpec`` or ``peft.LoraConfig``), if any.
    """
    shape = model_shape(model_config)
    per_token = _token_flops(shape, lora)
    total = 0
    for p, c in _paired(prompt_lens, completion_lens, "prompt_lens", "completion_lens"):
        if c < 1:
            raise ValueError(
                f"completion length {c}: generation produces at least one token per rollout."
            )
        keys = p * p + (c - 1) * p + c * (c - 1) // 2
        total += per_token * (p + c - 1) + shape.layers * attention_flops(shape, 1, keys)
        total += lm_head_flops(shape, c)
    return total


def forward_flops(
    model_config: Any,
    seq_lens: Iterable[int],
    logits_lens: Iterable[int] | None = None,
    lora: Any | None = None,
) -> int:
    """FLOPs of one forward pass (no cache) over whole sequences: log-prob passes without grad.

    Per sequence of ``s`` tokens with ``ℓ`` positions projected through the LM head, with ``F``
    as in ``generation_flops``::

        s·F + layers · 4·q_dim·s² + 2·h·V·ℓ

    (``2N`` per token, Kaplan et al. 2020 §2.1; attention as in Hoffmann et al. 2022 App. F.)

    TRL's GRPO reference-model and old-policy passes run the policy on prompt + completion and
    score the completion only (``_get_per_token_logps_and_entropies``). Its fused LM head
    projects only the completion positions on CUDA/XPU (``ℓ = completion length``), and every
    position but the last of the padded row elsewhere (``ℓ = s − 1``). Under LoRA the reference
    is the base model with adapters disabled (pass ``lora=None``); the old policy has them on.

    Args:
        model_config: the model's ``PretrainedConfig``.
        seq_lens: tokens of each sequence.
        logits_lens: LM-head positions of each sequence; default: every position (``ℓ = s``).
        lora: active adapters, if any.
    """
    shape = model_shape(model_config)
    total = 0
    for s, ell in _paired(seq_lens, logits_lens, "seq_lens", "logits_lens"):
        if ell > s:
            raise ValueError(f"logits length {ell} > sequence length {s}.")
        total += backbone_forward_flops(shape, s, lora) + lm_head_flops(shape, ell)
    return total


def _lora_backward_block(
    shape: ModelShape,
    targets: frozenset[str],
    r: int,
    seq_len: int,
    input_grad: bool,
    sparse: bool = False,
) -> tuple[int, bool]:
    """Backward FLOPs of one block whose base weights are frozen, and whether its output needs grad.

    Autograd computes a matmul's input gradient only for inputs that require grad, and no
    weight gradient for a frozen weight. In the first block the input comes from a frozen
    embedding, so nothing upstream of the first adapter needs a gradient (unless PEFT's
    ``enable_input_require_grads`` is on, which TRL sets under gradient checkpointing).
    In a sparse block the router, experts, shared expert and its gate all read the residual
    stream; each ``*down`` matrix reads its own MLP's ``act(gate)·up`` (``ModelShape.linears``).
    """
    linears = shape.linears(sparse)
    flops_per_token = 0
    requires = {}  # projection → whether its output requires grad

    def linear(name: str, x_grad: bool) -> None:
        nonlocal flops_per_token
        d_in, d_out = linears[name]
        if x_grad:  # base input gradient dX = dY·Wᵀ
            flops_per_token += 2 * d_in * d_out
        if name in targets:  # dB, d(A·x), dA, and dx through A when x needs it
            flops_per_token += 2 * r * d_out * 2 + 2 * d_in * r * (2 if x_grad else 1)
        requires[name] = x_grad or name in targets

    for name in ("q", "k", "v"):
        linear(name, input_grad)
    scores_grad = requires["q"] or requires["k"]
    mixed_grad = scores_grad or requires["v"]
    # Q·Kᵀ → dQ, dK; P·V → dP, dV; each as costly as its forward product.
    n_grads = sum((requires["q"], requires["k"], scores_grad, requires["v"]))
    attention = n_grads * attention_flops(shape, seq_len, seq_len) // 2
    linear("o", mixed_grad)
    residual_grad = input_grad or requires["o"]
    mlp = [name for name in linears if name not in ("q", "k", "v", "o")]
    for name in mlp:  # in forward order: an MLP's gate and up come before its down
        if name.endswith("down"):
            prefix = name.removesuffix("down")
            linear(name, requires.get(prefix + "gate", False) or requires[prefix + "up"])
        else:
            linear(name, residual_grad)
    out_grad = residual_grad or any(requires[name] for name in mlp)
    return seq_len * flops_per_token + attention, out_grad


def training_flops(
    model_config: Any,
    seq_lens: Iterable[int],
    logits_lens: Iterable[int] | None = None,
    lora: Any | None = None,
    *,
    gradient_checkpointing: bool = False,
    fused_lm_head: bool = True,
) -> int:
    """FLOPs of one policy forward + backward (one update pass), as TRL's GRPOTrainer runs it.

    Full fine-tuning: every matmul has an input gradient and a weight gradient, each as costly
    as the forward, so forward + backward = 3 × forward (Kaplan et al. 2020, §2.1: ``C ≈ 6N``
    per token; the same ratio holds for the attention products ``dQ, dK`` and ``dP, dV``)::

        3 · layers · (s·2·P_block + 4·q_dim·s²)  +  LM head

    LoRA: the frozen backbone costs its forward plus activation gradients (``dX = dY·Wᵀ``, no
    ``dW``), the adapters their forward plus both gradients. Activation gradients stop where
    nothing upstream requires grad: in the first block (fed by a frozen embedding) only what
    lies downstream of an adapter is differentiated; see ``_lora_backward_block``.

    LM head on ``ℓ`` positions: TRL ≥ 1.x scores completions with a fused, chunked log-prob
    kernel (``trl.kernels.ChunkedLogProbFunction``) whose backward recomputes the logits, then
    forms ``dH`` and, if the head is trainable, ``dW``: ``2·h·V·ℓ`` × (1 + 1 + 1 + [trainable]).
    A plain head (``fused_lm_head=False``) skips the recompute. With tied embeddings the head
    is trainable under full fine-tuning and frozen under LoRA, like an untied one.

    Gradient checkpointing (transformers checkpoints each decoder block) recomputes the blocks'
    forward during backward: hardware FLOPs, as opposed to model FLOPs, in the sense of PaLM's
    model/hardware FLOPs utilization (Chowdhery et al. 2022). The LM head is not checkpointed.
    transformers 5 uses PyTorch's non-reentrant checkpoint, whose recomputation stops once the
    last tensor that backward needs is rebuilt, so a dense block's final matmul (``down_proj``,
    or its LoRA ``B`` when adapted), whose output only feeds the residual add, is not
    recomputed; a sparse block is recomputed whole (``_unrecomputed_flops_per_token``). Under
    LoRA, checkpointing also turns on the embedding output's ``requires_grad`` (transformers and
    TRL both do), so the first block's input gradients are formed too.

    Args:
        model_config: the policy's ``PretrainedConfig``.
        seq_lens: tokens of each sequence (prompt + completion).
        logits_lens: LM-head positions of each sequence (see ``forward_flops``); default ``s``.
        lora: ``LoraSpec`` / ``peft.LoraConfig`` for LoRA training, ``None`` for full fine-tuning.
        gradient_checkpointing: count the recomputed block forwards (and, under LoRA, the input
            gradients that PEFT's ``enable_input_require_grads`` turns on).
        fused_lm_head: TRL's chunked log-prob head (True) or a plain ``nn.Linear`` head.
    """
    shape = model_shape(model_config)
    head_passes = (2 if fused_lm_head else 1) + (1 if lora is None else 0)
    sparse = [shape.is_sparse(layer) for layer in range(shape.layers)]
    targets = frozenset() if lora is None else lora_targets(shape, lora)
    unrecomputed = sum(_unrecomputed_flops_per_token(shape, lora, sp) for sp in sparse)
    total = 0
    for s, ell in _paired(seq_lens, logits_lens, "seq_lens", "logits_lens"):
        if ell > s:
            raise ValueError(f"logits length {ell} > sequence length {s}.")
        backbone = backbone_forward_flops(shape, s, lora)
        if lora is None:
            backward = 2 * backbone
        else:
            backward, grad = 0, gradient_checkpointing
            for sp in sparse:
                flops, grad = _lora_backward_block(shape, targets, lora.r, s, grad, sp)
                backward += flops
        total += backbone + backward + (1 + head_passes) * lm_head_flops(shape, ell)
        if gradient_checkpointing:
            total += backbone - s * unrecomputed
    return total


def _unrecomputed_flops_per_token(shape: ModelShape, lora: Any | None, sparse: bool) -> int:
    """Forward FLOPs per token of a block's last matmul, skipped by non-reentrant recomputation.

    ``torch.utils.checkpoint(use_reentrant=False)`` stops recomputing after the last saved
    tensor (PyTorch ≥ 2.1, "early stopping"). A dense block ends ``h + down(m)`` (+ ``B·A·m``
    under LoRA): the output of the final matmul is saved by nothing, so that matmul is not
    rerun. A sparse block ends with products that save their inputs: each expert's output
    times its routing weight (which requires grad through the router), and Qwen2-MoE's shared
    expert times ``sigmoid(shared_expert_gate(x))`` (sigmoid saves its output), so every
    matmul of the block is rerun. So is the down projection of a block that normalises the
    MLP's output before the residual add (Gemma 2, OLMo 2: the norm's backward needs its input).
    """
    if sparse or shape.post_mlp_norm:
        return 0
    if lora is not None and "down" in lora_targets(shape, lora):
        return 2 * lora.r * shape.hidden
    d_in, d_out = shape.linears()["down"]
    return 2 * d_in * d_out


def reward_model_flops(reward_model_config: Any, seq_lens: Iterable[int]) -> int:
    """FLOPs of a sequence-classification reward model's forward over the scored tokens.

    ``*ForSequenceClassification`` runs the backbone over all ``s`` tokens and its ``score``
    head (``h → num_labels``) on every position before pooling the last one::

        s·Σ_blocks 2·P_block + layers · 4·q_dim·s² + 2·h·num_labels·s

    A generative judge is a causal LM: count it with ``forward_flops`` / ``generation_flops``.
    """
    shape = model_shape(reward_model_config)
    return sum(
        backbone_forward_flops(shape, s) + 2 * shape.hidden * shape.num_labels * s
        for s in _ints(seq_lens, "seq_lens")
    )
