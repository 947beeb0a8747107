"""Tasks: where problems come from, how a model is prompted, how an answer is checked.

A `Task` bundles those three for one (task, model kind) pair: tiny character-level models get
the raw arithmetic prompt, instruct LMs get chat messages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from isolab.tasks import arithmetic
from isolab.tasks.base import Problem

TASKS = ("arithmetic", "gsm8k", "math500")


@dataclass(frozen=True)
class Task:
    """Problems, prompt builder and verifier of one task for one kind of model.

    Attributes:
        name: `arithmetic`, `gsm8k` or `math500`.
        style: `raw` (string prompt, tiny models) or `chat` (list of messages).
        prompt: Problem → prompt (a string or chat messages, as TRL accepts them).
        verify: (completion text, gold answer) → correct?
        max_completion_tokens: a sensible default cap for this task and style.
    """

    name: str
    style: str
    prompt: Callable[[Problem], Any]
    verify: Callable[[str, str], bool]
    max_completion_tokens: int

    def problems(
        self,
        split: str = "train",
        data_dir: str | None = None,
        limit: int | None = None,
        seed: int = 0,
    ) -> list[Problem]:
        """Problems of a data set's `split` (`train` or `test`, the data set's own: not a
        difficulty split); arithmetic has no data set and draws `limit` problems from `seed`."""
        if self.name == "arithmetic":
            return arithmetic.generate_problems(limit or 2000, seed=seed)
        module = _module(self.name)
        return module.load_problems(split=split, data_dir=data_dir, limit=limit)


def get_task(name: str, style: str) -> Task:
    """The task `name` in prompt style `raw` or `chat`."""
    if name not in TASKS:
        raise ValueError(f"task = {name!r}: choose one of {', '.join(TASKS)}.")
    if style not in ("raw", "chat"):
        raise ValueError(f"style = {style!r}: choose raw (tiny models) or chat (instruct LMs).")
    if name == "arithmetic":
        if style == "raw":
            return Task(name, style, arithmetic.raw_prompt, arithmetic.verify_raw, 6)
        return Task(name, style, arithmetic.chat_prompt, arithmetic.verify_chat, 64)
    if style == "raw":
        raise ValueError(
            f"task {name} needs an instruct LM (chat prompts); the tiny models only know the "
            "raw arithmetic alphabet. Use model: smollm2-135m or a hub id."
        )
    module = _module(name)
    return Task(name, style, module.chat_prompt, module.verify, 256 if name == "gsm8k" else 512)


def _module(name: str):
    if name == "gsm8k":
        from isolab.tasks import gsm8k

        return gsm8k
    from isolab.tasks import math500

    return math500
