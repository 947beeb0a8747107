"""What every task provides: problems with a gold answer, prompts, and a verifier."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One problem of a task.

    Attributes:
        id: stable identifier (deterministic from the task's seed or the data set's own id).
        question: the problem text without any prompt template.
        answer: the gold final answer as a string.
        difficulty: the task's own difficulty label when it has one (e.g. MATH level), else None.
    """

    id: str
    question: str
    answer: str
    difficulty: int | None = None
