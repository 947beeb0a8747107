"""Reward systems: plain functions TRL's `GRPOTrainer` accepts as `reward_funcs`.

TRL calls each with the prompts, the completions and every dataset column as keyword
arguments (here `answer`), and expects one float per completion.
"""

from __future__ import annotations

from collections.abc import Callable

from isolab.tasks import Task

REWARDS = ("sparse",)


def completion_text(completion) -> str:
    """TRL passes strings for raw prompts and message lists for chat prompts."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content", "") for m in completion if isinstance(m, dict))


def sparse(task: Task) -> Callable[..., list[float]]:
    """Rule-based sparse reward: 1.0 when the final answer is correct, else 0.0.

    >>> from isolab.tasks import get_task
    >>> reward = sparse(get_task("arithmetic", "raw"))
    >>> reward(prompts=["12+345="], completions=["753"], answer=["357"])
    [1.0]
    """

    def sparse_reward(prompts, completions, answer, **kwargs) -> list[float]:
        return [
            float(task.verify(completion_text(c), a))
            for c, a in zip(completions, answer, strict=True)
        ]

    return sparse_reward


def get_reward(name: str, task: Task) -> Callable[..., list[float]]:
    """The reward function `name` for `task`."""
    if name == "sparse":
        return sparse(task)
    raise ValueError(f"reward = {name!r}: choose one of {', '.join(REWARDS)}.")
