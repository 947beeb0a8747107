"""The supervised warm start of `tiny-chat`: a generic numeric-answer format, not any task.

A randomly initialised chat model writes bytes at random, so every rule-based reward is 0 and
GRPO's advantages vanish. This warm start teaches the format alone: synthetic ChatML
conversations (an optional system message, 0–1 worked example, a question made of neutral
words and 1–3 numbers) whose assistant turns are `\\boxed{N}`, N one of the numbers of its
question, drawn at random. In 200 steps it learns the format and the numbers' range (0–99),
hardly the copy (the loss plateaus from step 100 at the entropy of a random two-digit number;
the record keeps the greedy format and copy rates). On a task card it then answers
`\\boxed{N}` with N drawn about uniformly: a reward that checks the answer is right now and
then for small golds, sampling varies N within a group, and GRPO has advantages to follow.
What it learned is the format, not the task (`isolab.models.tiny.TINY_CHAT_SCOPE`).

AdamW, linear warm-up to a constant learning rate, gradient clipping at 1.0, loss on the last
assistant turn (the answer and its `<|im_end|>`) only. The bytes depend on the CPU's floats:
isolab ships the weights it built (`isolab/presets/tiny-chat/`).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable

import torch

from isolab.models.tiny import ChatSpec, build_byte_tokenizer, chat_model_config
from isolab.models.warm_start import padded, sft_step

#: Words of the synthetic questions: neutral, so that no task's vocabulary is favoured.
WORDS = (
    "has", "buys", "gives", "makes", "sees", "finds", "keeps", "sells", "needs", "takes", "the",
    "a", "of", "and", "more", "left", "each", "in", "all", "boxes", "apples", "books", "coins",
    "cards", "stamps", "marbles", "cups", "pens", "days", "hours", "how", "many", "what", "is",
    "total", "now", "then", "after", "before", "with", "per",
)  # fmt: skip
SYSTEMS = (
    "Solve the problem.",
    "Answer with a number.",
    "End with the final answer in \\boxed{}.",
    "You are a helpful assistant.",
)
_NUMBER = re.compile(r"\d+")


def question(rng: random.Random) -> str:
    """A synthetic question: 4–12 words with 1–3 numbers (0–99) among them, ending in '?'."""
    words = [rng.choice(WORDS) for _ in range(rng.randint(4, 12))]
    for _ in range(rng.randint(1, 3)):
        words.insert(rng.randrange(len(words) + 1), str(rng.randint(0, 99)))
    return " ".join(words).capitalize() + "?"


def answer(text: str, rng: random.Random) -> str:
    """`\\boxed{N}`, N one of the numbers of `text` (drawn at random)."""
    return f"\\boxed{{{rng.choice(_NUMBER.findall(text))}}}"


def conversation(rng: random.Random) -> tuple[list[dict[str, str]], str]:
    """(the prompt's messages, the assistant's answer) of one synthetic conversation."""
    messages = [{"role": "system", "content": rng.choice(SYSTEMS)}] if rng.random() < 0.7 else []
    for _ in range(rng.randint(0, 1)):
        q = question(rng)
        messages += [
            {"role": "user", "content": q},
            {"role": "assistant", "content": answer(q, rng)},
        ]
    q = question(rng)
    return [*messages, {"role": "user", "content": q}], answer(q, rng)


def batch(tok, rng: random.Random, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded (prompt + answer + `<|im_end|>`) sequences, the prompt and padding masked."""
    rows, label_rows = [], []
    for _ in range(size):
        messages, target = conversation(rng)
        prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        target_ids = tok(target, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        rows.append(prompt_ids + target_ids)
        label_rows.append([-100] * len(prompt_ids) + target_ids)
    return padded(rows, label_rows, tok.pad_token_id)


def format_rate(model, tok, rng: random.Random, problems: int = 64) -> dict[str, float]:
    """Greedy answers to fresh synthetic questions: the share in the `\\boxed{N}` format, and
    the share whose N is a number of the question (the warm start's record)."""
    model.eval()
    boxed = copied = 0
    with torch.no_grad():
        for _ in range(problems):
            messages, _ = conversation(rng)
            prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            ids = tok(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
            out = model.generate(ids, max_new_tokens=12, do_sample=False)
            text = tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
            found = re.fullmatch(r"\\boxed\{(\d+)\}", text.strip())
            boxed += found is not None
            copied += found is not None and found.group(1) in _NUMBER.findall(
                messages[-1]["content"]
            )
    model.train()
    return {"boxed": boxed / problems, "copied": copied / problems}


def warm_start_chat(
    spec: ChatSpec, progress: Callable[[int, int, str], None] | None = None
) -> tuple:
    """Supervised warm start of a tiny chat preset on the generic format (module docstring).
    Returns (model, tokenizer, record): the record holds the steps, the last loss and the
    greedy format and copy rates on 64 fresh questions."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(spec.seed)
    tok = build_byte_tokenizer()
    model = LlamaForCausalLM(chat_model_config(spec, len(tok)))
    for key in ("pad_token_id", "eos_token_id", "bos_token_id"):
        setattr(model.generation_config, key, getattr(tok, key))
    opt = torch.optim.AdamW(model.parameters(), lr=spec.sft_peak_lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda step: min(1.0, (step + 1) / max(spec.warmup_steps, 1))
    )
    rng = random.Random(spec.seed + 1)
    model.train()
    loss_value = math.nan
    for step in range(1, spec.sft_steps + 1):
        loss_value = sft_step(model, opt, sched, *batch(tok, rng, spec.sft_batch))
        if progress is not None:
            progress(step, spec.sft_steps, f"loss {loss_value:.3f}")
    rates = format_rate(model, tok, random.Random(spec.seed + 2))
    model.eval()
    record = {"sft_steps": spec.sft_steps, "final_sft_loss": round(loss_value, 5), **rates}
    return model, tok, record
