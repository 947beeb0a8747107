"""Encoding and scoring with isolab's tiny, character-level reward models.

The model is a ``LlamaForTokenClassification`` whose label set is the vocabulary: P(step j is
correct) is read at the position *before* step j, in the row of the token actually written
there (see `isolab.models.reward`). A completion's score aggregates its step scores.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

#: How step scores make a completion's: `min` (Qwen2.5-Math-PRM, Math-Shepherd) or `prod`.
AGGREGATIONS = ("min", "prod")


def encode(tok, prompts: Sequence[str], completions: Sequence[str]):
    """Right-padded ids of prompt + completion + EOS and the positions of each row's steps.

    The steps are the completion characters and the EOS. Returns ``(input_ids,
    attention_mask, step_spans, seq_lens)`` with ``step_spans[i] = (first step position,
    number of steps)`` and ``seq_lens`` the tokens each row feeds the model (what it costs).
    """
    rows, spans = [], []
    for prompt, completion in zip(prompts, completions, strict=True):
        if not prompt:
            raise ValueError("an empty prompt leaves no position to score the first step from")
        ids = tok.convert_tokens_to_ids(list(prompt + completion)) + [tok.eos_token_id]
        rows.append(ids)
        spans.append((len(prompt), len(completion) + 1))
    width = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), width), tok.pad_token_id)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        input_ids[i, : len(r)] = torch.tensor(r)
        attention_mask[i, : len(r)] = 1
    return input_ids, attention_mask, spans, [len(r) for r in rows]


def step_log_probs(model, tok, prompts: Sequence[str], completions: Sequence[str]):
    """log P(step correct) of every step of every row, and the tokens each row fed the model.

    Step ``j`` at position ``t`` is read at position ``t − 1``, in the row of token ``x_t``:
    ``log_softmax(score(h_{t−1}))[x_t]``.
    """
    input_ids, mask, spans, seq_lens = encode(tok, prompts, completions)
    logp = torch.log_softmax(model(input_ids=input_ids, attention_mask=mask).logits.float(), -1)
    rows = []
    for i, (start, n) in enumerate(spans):
        pos = torch.arange(start, start + n)
        rows.append(logp[i, pos - 1, input_ids[i, pos]])
    return rows, seq_lens


def score_steps(model, tok, prompts: Sequence[str], completions: Sequence[str]):
    """P(correct) at each step of each completion, and the tokens each forward row scored."""
    with torch.inference_mode():
        rows, seq_lens = step_log_probs(model, tok, prompts, completions)
    return [r.exp().tolist() for r in rows], seq_lens


def aggregate(step_scores: Sequence[float], how: str = "min") -> float:
    """Completion score from step scores: `min` (Qwen2.5-Math-PRM, Math-Shepherd) or `prod`
    (Lightman et al. 2023: the probability that every step is correct).

    >>> aggregate([0.9, 0.5, 0.8])
    0.5
    >>> round(aggregate([0.9, 0.5, 0.8], "prod"), 2)
    0.36
    """
    if how not in AGGREGATIONS:
        raise ValueError(f"aggregation {how!r}: choose one of {', '.join(AGGREGATIONS)}.")
    if not step_scores:
        return 0.0
    if how == "min":
        return float(min(step_scores))
    out = 1.0
    for s in step_scores:
        out *= s
    return float(out)
