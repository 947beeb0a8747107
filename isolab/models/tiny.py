"""The tiny presets: small Llama policies and reward models isolab builds for CPU studies.

The `tiny-*` policies (`TINY_PRESETS`) are Llama-architecture transformers with a
character-level tokenizer over the raw arithmetic alphabet, warm-started by a supervised phase
on the task to a target regime (`WarmStartTarget`): some sums solved reliably, some rarely,
some never — the spread that difficulty splits and RL need. They prompt raw arithmetic only
(`is_tiny`). `tiny-chat` (`CHAT_PRESETS`) is the tiny model of every other task: a byte-level
tokenizer (any text, one token per UTF-8 byte) with a ChatML chat template, warm-started on a
generic numeric-answer format (`isolab.models.chat_warm_start`); on a task card it trains in
seconds and measures plumbing and allocation mechanics, not the task (`TINY_CHAT_SCOPE`). The
tiny reward models (`tiny-orm`, `tiny-prm`) share tiny-m's shape with a "next-step" head (see
`isolab.models.reward`). This module holds their specs and shapes only: nothing here builds,
loads or downloads weights.
"""

from __future__ import annotations

from dataclasses import dataclass

from isolab.tasks.arithmetic import RAW_ALPHABET

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"


@dataclass(frozen=True)
class WarmStartTarget:
    """When the supervised warm start stops: a base-model regime, not a step count.

    The warm start has phase changes (tiny-l at a constant 5e-4 went from mean avg@16 0.11 to
    0.53 in 100 steps), and where a given step lands depends on the CPU's float arithmetic (the
    same 600-step recipe left 10% of the pool Easy on one machine and 1% on another). So the
    warm start samples a probe pool every `probe_every` steps and stops at the first probe whose
    avg@16 histogram puts `easy_share` of the problems in the Easy band [0.3, 0.6] and at least
    `hard_share_min` solved at most once in 16 but at least once, (0, 1/16] (the Hard band
    without its never-solved problems, as the shipped bases were built): both splits then have
    enough problems.

    Attributes:
        easy_share: [low, high] share of probe problems in the Easy band.
        hard_share_min: least share of probe problems in the Hard band.
        probe_problems: problems of the probe pool (drawn with `probe_seed`, apart from the
            difficulty pools, which use small seeds).
        probe_k: samples per probe problem (avg@k).
        probe_every: steps between probes.
        first_probe: step of the first probe (before it nothing is solved).
        probe_seed: seed of the probe pool and of its sampling.
    """

    easy_share: tuple[float, float] = (0.10, 0.20)
    hard_share_min: float = 0.10
    probe_problems: int = 500
    probe_k: int = 16
    probe_every: int = 25
    first_probe: int = 200
    probe_seed: int = 1_000_003

    def met(self, shares: dict[str, float]) -> bool:
        low, high = self.easy_share
        return low <= shares["easy"] <= high and _solved_hard(shares) >= self.hard_share_min

    def distance(self, shares: dict[str, float]) -> float:
        """How far a probe is from the target (0 when met): picks the fallback checkpoint."""
        low, high = self.easy_share
        easy_gap = max(low - shares["easy"], shares["easy"] - high, 0.0)
        return easy_gap + max(self.hard_share_min - _solved_hard(shares), 0.0)


def _solved_hard(shares: dict[str, float]) -> float:
    """Share of problems in the Hard band that were solved at least once, (0, 1/16]."""
    return shares["hard"] - shares["never"]


@dataclass(frozen=True)
class TinySpec:
    """A tiny Llama preset and its supervised warm start.

    Attributes:
        hidden_size: model width.
        num_layers: transformer blocks.
        num_heads: attention heads (full multi-head: key/value heads = heads).
        intermediate_size: gated-MLP width.
        max_sft_steps: most supervised steps; the warm start stops earlier, at `target`.
        sft_batch: sequences per supervised step.
        sft_peak_lr: learning rate after the linear warm-up (then constant: the stop is set by
            the target, so no schedule needs to know the length in advance).
        warmup_steps: linear warm-up of the learning rate.
        seed: initialisation and data seed.
        target: the base-model regime at which the warm start stops.
    """

    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_sft_steps: int = 1500
    sft_batch: int = 64
    sft_peak_lr: float = 2e-3
    warmup_steps: int = 100
    seed: int = 0
    target: WarmStartTarget = WarmStartTarget()


# Clearly different sizes (0.08M, 0.66M, 2.2M parameters) for the model-size study, each warm-
# started to the same regime (`WarmStartTarget`). tiny-l learns at 5e-4: at 2e-3 (one-cycle) it
# stayed below mean avg@16 0.13 for 900 steps. The weights built this way ship in isolab/presets/.
TINY_PRESETS: dict[str, TinySpec] = {
    "tiny-s": TinySpec(hidden_size=64, num_layers=2, num_heads=4, intermediate_size=128),
    "tiny-m": TinySpec(hidden_size=128, num_layers=4, num_heads=4, intermediate_size=256),
    "tiny-l": TinySpec(
        hidden_size=192, num_layers=6, num_heads=6, intermediate_size=384, sft_peak_lr=5e-4
    ),
}

REAL_PRESETS: dict[str, str] = {"smollm2-135m": "HuggingFaceTB/SmolLM2-135M-Instruct"}


@dataclass(frozen=True)
class ChatSpec:
    """A tiny chat preset: a Llama over UTF-8 bytes with a chat template, and its supervised
    warm start on a generic numeric-answer format (`isolab.models.chat_warm_start`).

    Attributes:
        hidden_size, num_layers, num_heads, intermediate_size: the shape (as `TinySpec`).
        max_positions: longest prompt + completion in bytes (a card's few-shot prompt is a few
            hundred).
        sft_steps: supervised steps of the warm start.
        sft_batch: conversations per step.
        sft_peak_lr: learning rate after the linear warm-up (AdamW, clipping at 1.0).
        warmup_steps: linear warm-up of the learning rate.
        seed: initialisation and data seed.
    """

    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    intermediate_size: int = 128
    max_positions: int = 2048
    sft_steps: int = 200
    sft_batch: int = 32
    sft_peak_lr: float = 3e-3
    warmup_steps: int = 50
    seed: int = 0


#: The tiny chat model of task cards, GSM8K and MATH-500 (chat prompts): seconds per step on a CPU.
CHAT_PRESETS: dict[str, ChatSpec] = {"tiny-chat": ChatSpec()}
#: What a run of `tiny-chat` tells: said wherever one is planned or trained on a task.
TINY_CHAT_SCOPE = (
    "tiny-chat (0.12M parameters over bytes, warm-started only to answer \\boxed{a number}) "
    "measures plumbing and allocation mechanics on your task card, in seconds: FLOPs, ρ, the "
    "sweep, the frontier's machinery. Its rewards and avg@k say nothing about the task; for "
    "those use smollm2-135m, a local instruct model folder or a hub id"
)


@dataclass(frozen=True)
class RewardModelSpec:
    """A reward model isolab trains on the raw arithmetic task.

    Attributes:
        kind: `orm` (outcome labels) or `prm` (step labels).
        base: tiny policy preset whose warm start initialises the model (same shape).
        steps: supervised steps.
        batch: (prompt, completion) pairs per step.
        peak_lr: peak of the one-cycle learning-rate schedule (AdamW, gradient clipping at
            1.0, as the tiny presets' warm start).
        negative_fraction: share of perturbed (wrong) completions in the training data.
        seed: data seed.
    """

    kind: str
    base: str = "tiny-m"
    steps: int = 600
    batch: int = 64
    peak_lr: float = 5e-4
    negative_fraction: float = 0.5
    seed: int = 0


REWARD_MODEL_PRESETS: dict[str, RewardModelSpec] = {
    "tiny-orm": RewardModelSpec(kind="orm"),
    "tiny-prm": RewardModelSpec(kind="prm"),
}


def preset_names() -> list[str]:
    """The policy presets: tiny arithmetic ones, the tiny chat model, then real LMs."""
    return [*TINY_PRESETS, *CHAT_PRESETS, *REAL_PRESETS]


def is_tiny(name: str) -> bool:
    """A tiny arithmetic preset: raw prompts over the arithmetic alphabet (not `tiny-chat`)."""
    return name in TINY_PRESETS


def is_chat_preset(name: str) -> bool:
    """`tiny-chat`: a tiny model of chat prompts (task cards, GSM8K, MATH-500)."""
    return name in CHAT_PRESETS


def tiny_refusal(name: str, task: str) -> str:
    """Why tiny arithmetic preset `name` cannot run `task`, and the model to use instead."""
    return (
        f"model {name} runs the arithmetic task only (raw prompts over its "
        f"{len(RAW_ALPHABET)}-character alphabet), not {task!r}: for a task card, GSM8K or "
        "MATH-500 use model: tiny-chat (seconds per step: plumbing and allocation mechanics, "
        "not the task), smollm2-135m, a local instruct model folder or a hub id"
    )


def is_reward_preset(name: str) -> bool:
    return name in REWARD_MODEL_PRESETS


def build_char_tokenizer(alphabet: str = RAW_ALPHABET):
    """A character-level `PreTrainedTokenizerFast`: one token per character of `alphabet`.

    No special tokens are added around inputs (no BOS), so prompts tokenize the same way in
    the supervised warm start, in TRL's GRPO and in evaluation. Padding is on the left, as
    batched generation needs.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {PAD: 0, BOS: 1, EOS: 2}
    for ch in alphabet:
        vocab.setdefault(ch, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=PAD))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()  # "7", "5", "3" decode to "753", not "7 5 3"
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token=PAD, bos_token=BOS, eos_token=EOS, padding_side="left"
    )
    tok.model_input_names = ["input_ids", "attention_mask"]
    return tok


#: The chat template of `tiny-chat` (ChatML, as SmolLM2's and Qwen's): the assistant's turn ends
#: with `<|im_end|>`, its end-of-sequence token.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CHAT_SPECIALS = ("<pad>", "<|im_start|>", "<|im_end|>")


def build_byte_tokenizer():
    """A byte-level `PreTrainedTokenizerFast` with a ChatML template: one token per UTF-8 byte
    of any text (the 256 of GPT-2's byte alphabet), so every card's text is covered, plus
    `<pad>`, `<|im_start|>` and `<|im_end|>` (its EOS). No BOS is added; padding on the left."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {t: i for i, t in enumerate([*CHAT_SPECIALS, *alphabet])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=CHAT_SPECIALS[0]))
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            pre_tokenizers.Split(Regex("."), behavior="isolated"),  # one token per byte
        ]
    )
    core.decoder = decoders.ByteLevel()
    pad, start, end = CHAT_SPECIALS
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=pad,
        bos_token=start,
        eos_token=end,
        additional_special_tokens=[start, end],
        padding_side="left",
    )
    tok.chat_template = CHAT_TEMPLATE
    tok.model_input_names = ["input_ids", "attention_mask"]
    return tok


def chat_model_config(spec: ChatSpec, vocab_size: int = len(CHAT_SPECIALS) + 256):
    """The `LlamaConfig` of a tiny chat preset, without building it (planning reads it)."""
    return _llama_config(spec, vocab_size, spec.max_positions)


def tiny_model_config(spec: TinySpec, vocab_size: int):
    """The `LlamaConfig` of a tiny arithmetic preset (64 positions: its prompts are short)."""
    return _llama_config(spec, vocab_size, 64)


def _llama_config(spec: TinySpec | ChatSpec, vocab_size: int, max_positions: int):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_heads,
        max_position_embeddings=max_positions,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
        # a `PreTrainedConfig` keyword, which the config's dataclass `__init__` passes on
        attn_implementation="eager",  # ty: ignore[unknown-argument]
    )


def reward_preset_config(name: str):
    """The `LlamaConfig` of a preset reward model, without building it (for FLOP planning).

    Its head maps the hidden state to one logit per vocabulary entry (``num_labels = V``).
    """
    spec = REWARD_MODEL_PRESETS[name]
    vocab = len(build_char_tokenizer())
    config = tiny_model_config(TINY_PRESETS[spec.base], vocab)
    config.num_labels = vocab
    config.architectures = ["LlamaForTokenClassification"]
    return config


def param_count(spec: TinySpec, vocab_size: int = len(RAW_ALPHABET) + 3) -> int:
    """Parameters of a tiny preset without building it (embeddings + blocks + head)."""
    h, f, layers = spec.hidden_size, spec.intermediate_size, spec.num_layers
    per_layer = 4 * h * h + 3 * h * f + 2 * h
    return 2 * vocab_size * h + layers * per_layer + h
