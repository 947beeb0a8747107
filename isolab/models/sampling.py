"""Sampling from a causal LM with HF `generate` and grading the completions: what difficulty
labelling, evaluation and the warm start's probes share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass
class SampleResult:
    """Correct counts per prompt and the exact token counts of the sampling (for the ledger)."""

    counts: np.ndarray
    n_samples: int
    prompt_lens: list[int] = field(default_factory=list)
    completion_lens: list[int] = field(default_factory=list)
    #: every completion's text, prompt by prompt (`n_samples` each)
    texts: list[str] = field(default_factory=list)


@torch.no_grad()
def sample_and_grade(
    model,
    tokenizer,
    prompts: Sequence[str],
    answers: Sequence[str],
    verify: Callable[[str, str], bool],
    n_samples: int,
    temperature: float = 1.0,
    max_new_tokens: int = 8,
    batch_prompts: int = 128,
    seed: int = 0,
) -> SampleResult:
    """Sample `n_samples` completions per prompt with HF generate and count correct ones.

    The global RNG state is saved and restored, so evaluating in the middle of a training run
    does not change the run's own random stream.
    """
    was_training = model.training
    model.eval()
    counts = np.zeros(len(prompts), dtype=int)
    prompt_lens: list[int] = []
    completion_lens: list[int] = []
    all_texts: list[str] = []
    eos = tokenizer.eos_token_id
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for start in range(0, len(prompts), batch_prompts):
            chunk = list(prompts[start : start + batch_prompts])
            enc = tokenizer(chunk, return_tensors="pt", padding=True).to(model.device)
            out = model.generate(
                **enc,
                do_sample=True,
                temperature=temperature,
                top_k=0,
                top_p=1.0,
                max_new_tokens=max_new_tokens,
                num_return_sequences=n_samples,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=eos,
            )
            completions = out[:, enc["input_ids"].shape[1] :]
            texts = tokenizer.batch_decode(completions, skip_special_tokens=True)
            lengths = enc["attention_mask"].sum(1).repeat_interleave(n_samples).tolist()
            for row, (ids, text) in enumerate(zip(completions.tolist(), texts, strict=True)):
                prompt_index = start + row // n_samples
                counts[prompt_index] += bool(verify(text, answers[prompt_index]))
                completion_lens.append(ids.index(eos) + 1 if eos in ids else len(ids))
            prompt_lens.extend(lengths)
            all_texts.extend(texts)
    if was_training:
        model.train()
    return SampleResult(counts, n_samples, prompt_lens, completion_lens, all_texts)
