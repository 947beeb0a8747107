"""What a model's matmul FLOPs depend on: its shape, read from a transformers config, and the
projections LoRA adapts.

`ModelShape` holds the few numbers of a decoder-only transformer that `isolab.compute.flops`
needs (layers, widths, heads, vocabulary); `model_shape` reads them from any
``PretrainedConfig`` with the standard field names. `LoraSpec` mirrors ``peft.LoraConfig``'s
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
class ModelShape:
    """The numbers of a decoder-only transformer that its matmul FLOPs depend on.

    Attributes:
        layers: decoder blocks.
        hidden: residual width ``h``.
        heads: query heads.
        kv_heads: key/value heads (``< heads`` for grouped-query attention, Ainslie et al. 2023).
        head_dim: width of one head ``d`` (not always ``h / heads``, e.g. Gemma, Qwen3).
        intermediate: MLP width.
        vocab: vocabulary (LM-head rows).
        gated_mlp: gate + up + down matrices (SwiGLU) rather than up + down.
        tied_embeddings: the LM head reuses the input embedding matrix (changes parameters and
            which weight receives the head's gradient, not the FLOPs).
        num_labels: outputs of a sequence-classification head (reward models).
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

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def linears(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each weight matrix of one decoder block, by projection name."""
        h, i = self.hidden, self.intermediate
        attn = {
            "q": (h, self.q_dim),
            "k": (h, self.kv_dim),
            "v": (h, self.kv_dim),
            "o": (self.q_dim, h),
        }
        mlp = (
            {"gate": (h, i), "up": (h, i), "down": (i, h)}
            if self.gated_mlp
            else {"up": (h, i), "down": (i, h)}
        )
        return attn | mlp


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
    """Read a ``ModelShape`` from a transformers ``PretrainedConfig`` (or anything with its fields)."""
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
    )


def lora_targets(shape: ModelShape, lora: Any) -> frozenset[str]:
    """The projections of ``shape.linears()`` that ``lora`` adapts (``lora.target_modules``)."""
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
    return frozenset(names)


def lora_spec(cfg: RunConfig) -> LoraSpec | None:
    """The LoRA the ledger counts for a run (None: full fine-tuning)."""
    return LoraSpec(r=cfg.lora_rank, target_modules=LORA_TARGETS) if cfg.lora_rank else None
