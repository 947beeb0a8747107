"""What a model's matmul FLOPs depend on: its shape, read from a transformers config, and the
projections LoRA adapts.

`ModelShape` holds the few numbers of a decoder-only transformer that `isolab.compute.flops`
needs (layers, widths, heads, vocabulary, and `MoeShape` for a mixture of experts);
`model_shape` reads them from any ``PretrainedConfig`` with the standard field names. `LoraSpec` mirrors ``peft.LoraConfig``'s
``r`` and ``target_modules``, and `lora_targets` maps PEFT module names to the projections of
``ModelShape.linears()``. `LORA_TARGETS` and `lora_spec` are the LoRA a run trains with
(``isolab.rl.train``) and the one the ledger charges for it: one definition for both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from isolab.config import RunConfig

# Model types whose MLP is `down(act(up(x)))` (2 matrices) rather than the gated
# `down(act(gate(x)) * up(x))` (3 matrices) of Llama-family models (Shazeer 2020, GLU variants).
_PLAIN_MLP_MODEL_TYPES = frozenset(
    {"gpt2", "gpt_neox", "gptj", "opt", "phi", "falcon", "bloom", "starcoder2", "gpt_bigcode"}
)
# Blocks that normalise the MLP's output before the residual add (`post_feedforward_layernorm`):
# the norm's backward needs the down projection's output, so recomputation reruns it.
_POST_MLP_NORM_MODEL_TYPES = frozenset({"gemma2", "gemma3", "gemma3_text", "olmo2", "olmo3"})

# Model types whose shared expert is scaled by ``sigmoid(shared_expert_gate(x))``, a Linear(h, 1)
# (transformers' ``Qwen2MoeSparseMoeBlock``). No config field says so.
_SHARED_EXPERT_GATE_MODEL_TYPES = frozenset({"qwen2_moe"})

# Projections of the attention, the only ones LoRA may adapt in a mixture of experts.
_ATTENTION = frozenset({"q", "k", "v", "o"})

# PEFT module names → the projection they adapt. "up"/"down" also name a plain MLP's matrices.
_LORA_MODULE_ALIASES = {
    "q_proj": "q",
    "k_proj": "k",
    "v_proj": "v",
    "o_proj": "o",
    "gate_proj": "gate",
    "up_proj": "up",
    "down_proj": "down",
    "fc1": "up",
    "fc2": "down",
    "dense_h_to_4h": "up",
    "dense_4h_to_h": "down",
}


@dataclass(frozen=True)
class MoeShape:
    """The sparse MLP of a mixture-of-experts decoder (Shazeer et al. 2017; Fedus et al. 2022).

    A sparse block routes each token to ``top_k`` of ``experts`` gated MLPs by a linear router
    ``h → experts`` and sums their outputs weighted by the router's top-k probabilities; a
    shared expert, when there is one, sees every token (Qwen2-MoE; DeepSeekMoE, Dai et al. 2024).
    Without token dropping a token costs its ``top_k`` experts whichever they are.

    Attributes:
        experts: routed experts per sparse block (``num_experts`` / ``num_local_experts``).
        top_k: experts each token is routed to (``num_experts_per_tok``).
        expert_intermediate: one routed expert's MLP width (``moe_intermediate_size``, or
            ``intermediate_size`` in Mixtral).
        shared_intermediate: the shared expert's MLP width (``shared_expert_intermediate_size``);
            0 when there is none.
        shared_expert_gate: the shared expert's output is scaled by ``sigmoid(x·w)``, a
            ``Linear(h, 1)`` (Qwen2-MoE).
        sparse_layers: blocks whose MLP is sparse; the others keep the dense MLP of width
            ``ModelShape.intermediate`` (Qwen2-MoE's ``decoder_sparse_step`` and
            ``mlp_only_layers``; every block in Mixtral).
    """

    experts: int
    top_k: int
    expert_intermediate: int
    shared_intermediate: int = 0
    shared_expert_gate: bool = False
    sparse_layers: frozenset[int] = frozenset()


@dataclass(frozen=True)
class ModelShape:
    """The numbers of a decoder-only transformer that its matmul FLOPs depend on.

    Attributes:
        layers: decoder blocks.
        hidden: residual width ``h``.
        heads: query heads.
        kv_heads: key/value heads (``< heads`` for grouped-query attention, Ainslie et al. 2023).
        head_dim: width of one head ``d`` (not always ``h / heads``, e.g. Gemma, Qwen3).
        intermediate: MLP width (of the dense blocks, in a mixture of experts).
        vocab: vocabulary (LM-head rows).
        gated_mlp: gate + up + down matrices (SwiGLU) rather than up + down; experts likewise.
        tied_embeddings: the LM head reuses the input embedding matrix (changes parameters and
            which weight receives the head's gradient, not the FLOPs).
        num_labels: outputs of a sequence-classification head (reward models).
        post_mlp_norm: the block normalises the MLP's output before adding it to the residual
            (Gemma 2/3, OLMo 2), so gradient checkpointing recomputes the down projection too.
        moe: the sparse MLP of a mixture of experts; ``None`` for a dense model.
    """

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    gated_mlp: bool = True
    tied_embeddings: bool = False
    num_labels: int = 1
    post_mlp_norm: bool = False
    moe: MoeShape | None = None

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def is_sparse(self, layer: int) -> bool:
        """Whether block ``layer`` (0-based) has the sparse MLP of a mixture of experts."""
        return self.moe is not None and layer in self.moe.sparse_layers

    def linears(self, sparse: bool = False) -> dict[str, tuple[int, int]]:
        """(in, out) of each weight matrix one token passes through in a decoder block, by name.

        A dense block has q, k, v, o and the MLP's (gate,) up, down. A sparse block (``sparse``)
        replaces the MLP by what one token runs in a mixture of experts: the ``router``
        (``h → experts``), its ``top_k`` routed experts, written as one MLP of width
        ``top_k · expert_intermediate`` (``experts_gate``, ``experts_up``, ``experts_down``: the
        same products, concatenated), the ``shared_*`` expert and the ``shared_expert_gate``.
        """
        h = self.hidden
        attn = {
            "q": (h, self.q_dim),
            "k": (h, self.kv_dim),
            "v": (h, self.kv_dim),
            "o": (self.q_dim, h),
        }
        if not sparse:
            return attn | self._mlp("", self.intermediate)
        if self.moe is None:
            raise ValueError("linears(sparse=True) of a dense model: it has no sparse block.")
        moe = self.moe
        block = attn | {"router": (h, moe.experts)}
        block |= self._mlp("experts_", moe.top_k * moe.expert_intermediate)
        if moe.shared_intermediate:
            block |= self._mlp("shared_", moe.shared_intermediate)
        if moe.shared_expert_gate:
            block["shared_expert_gate"] = (h, 1)
        return block

    def _mlp(self, prefix: str, width: int) -> dict[str, tuple[int, int]]:
        h = self.hidden
        mlp = {"gate": (h, width), "up": (h, width), "down": (width, h)}
        if not self.gated_mlp:
            del mlp["gate"]
        return {prefix + name: shape for name, shape in mlp.items()}


#: Modules LoRA adapts (attention projections), in the ledger's plan and in the run.
LORA_TARGETS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass(frozen=True)
class LoraSpec:
    """LoRA adapters ``W + (α/r)·B·A`` on some projections of every block (Hu et al. 2021).

    The attribute names match ``peft.LoraConfig``, so a ``LoraConfig`` can be passed wherever a
    ``LoraSpec`` is expected.

    Attributes:
        r: adapter rank.
        target_modules: adapted projections, as PEFT names (``q_proj``, ``k_proj``, ``v_proj``,
            ``o_proj``, ``gate_proj``, ``up_proj``, ``down_proj``) or ``"all-linear"``.
    """

    r: int
    target_modules: tuple[str, ...] = LORA_TARGETS


def model_shape(config: Any) -> ModelShape:
    """Read a ``ModelShape`` from a transformers ``PretrainedConfig`` (or anything with its fields).

    A config with ``num_experts`` or ``num_local_experts`` > 0 is a mixture of experts, read by
    `moe_shape`.
    """
    if hasattr(config, "get_text_config"):
        config = config.get_text_config()
    hidden = config.hidden_size
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    intermediate = (
        getattr(config, "intermediate_size", None) or getattr(config, "n_inner", None) or 4 * hidden
    )
    return ModelShape(
        layers=config.num_hidden_layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate=intermediate,
        vocab=config.vocab_size,
        gated_mlp=getattr(config, "model_type", "") not in _PLAIN_MLP_MODEL_TYPES,
        tied_embeddings=bool(getattr(config, "tie_word_embeddings", False)),
        num_labels=getattr(config, "num_labels", 1),
        post_mlp_norm=getattr(config, "model_type", "") in _POST_MLP_NORM_MODEL_TYPES,
        moe=moe_shape(config),
    )


def moe_shape(config: Any) -> MoeShape | None:
    """Read the sparse MLP of a mixture-of-experts ``PretrainedConfig``; ``None`` if dense.

    Field names of transformers' Qwen2-MoE, Qwen3-MoE and Mixtral configs. A block is sparse
    when it is not in ``mlp_only_layers`` and its 1-based index is a multiple of
    ``decoder_sparse_step``, as ``Qwen2MoeDecoderLayer`` decides; Mixtral has neither field,
    so all its blocks are sparse.
    """
    experts = getattr(config, "num_experts", None) or getattr(config, "num_local_experts", None)
    if not experts:
        return None
    expert_intermediate = getattr(config, "moe_intermediate_size", None) or config.intermediate_size
    dense_layers = set(getattr(config, "mlp_only_layers", None) or ())
    step = getattr(config, "decoder_sparse_step", None) or 1
    return MoeShape(
        experts=experts,
        top_k=config.num_experts_per_tok,
        expert_intermediate=expert_intermediate,
        shared_intermediate=getattr(config, "shared_expert_intermediate_size", None) or 0,
        shared_expert_gate=getattr(config, "model_type", "") in _SHARED_EXPERT_GATE_MODEL_TYPES,
        sparse_layers=frozenset(
            layer
            for layer in range(config.num_hidden_layers)
            if layer not in dense_layers and (layer + 1) % step == 0
        ),
    )


def lora_targets(shape: ModelShape, lora: Any) -> frozenset[str]:
    """The projections of ``shape.linears()`` that ``lora`` adapts (``lora.target_modules``).

    In a mixture of experts only attention projections are counted: PEFT cannot wrap experts
    stored as 3-D parameters, and adapters on a shared expert are not modelled.
    """
    targets = lora.target_modules
    if targets is None:
        raise ValueError(
            "LoRA target_modules is None: list the adapted projections, e.g. ['q_proj', 'v_proj']."
        )
    if isinstance(targets, str):
        if targets != "all-linear":
            raise ValueError(
                f"LoRA target_modules = {targets!r}: regular expressions are not supported; "
                "give a list of module names or 'all-linear'."
            )
        if shape.moe is not None:
            raise ValueError(
                "LoRA target_modules = 'all-linear' on a mixture-of-experts model is not "
                "counted: list attention projections (q_proj, k_proj, v_proj, o_proj)."
            )
        return frozenset(shape.linears())
    names = set()
    for name in targets:
        short = _LORA_MODULE_ALIASES.get(name.rsplit(".", 1)[-1])
        if short is None or short not in shape.linears():
            raise ValueError(
                f"LoRA target module {name!r} is not a projection of a decoder block; "
                f"use names among {sorted(_LORA_MODULE_ALIASES)}."
            )
        names.add(short)
    if not names:
        raise ValueError("LoRA target_modules is empty: nothing would be trained.")
    if shape.moe is not None and not names <= _ATTENTION:
        raise ValueError(
            f"LoRA on {sorted(names - _ATTENTION)} of a mixture-of-experts model is not counted: "
            "adapt attention projections only (q_proj, k_proj, v_proj, o_proj)."
        )
    return frozenset(names)


def lora_spec(cfg: RunConfig) -> LoraSpec | None:
    """The LoRA the ledger counts for a run (None: full fine-tuning)."""
    return LoraSpec(r=cfg.lora_rank, target_modules=LORA_TARGETS) if cfg.lora_rank else None
