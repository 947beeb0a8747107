"""MATH-500: the 500-problem test subset of MATH (Hendrycks et al. 2021, arXiv 2103.03874)
chosen for PRM800K (Lightman et al. 2023, arXiv 2305.20050).

Problems come from the hub (``HuggingFaceH4/MATH-500``) or from a local folder holding
``math500/test.jsonl`` in the hub's format: ``problem``, ``solution``, ``answer``, ``subject``,
``level`` (1–5, used as the difficulty) and ``unique_id``. Answers are LaTeX and are graded by
equivalence (:func:`isolab.tasks.grading.math_equal`, math-verify underneath).
"""

from __future__ import annotations

from pathlib import Path

from isolab.tasks.base import Problem, read_jsonl
from isolab.tasks.grading import extract_boxed, math_equal

HUB_ID = "HuggingFaceH4/MATH-500"
#: The data set's own splits, as the hub names them (not a difficulty split: `config.SPLITS`).
DATASET_SPLITS = ("test",)

SYSTEM_PROMPT = (
    "You are a careful math tutor. Reason step by step, then give the final answer "
    "in \\boxed{}, in simplest exact form."
)


def load_problems(
    split: str = "test", data_dir: str | Path | None = None, limit: int | None = None
) -> list[Problem]:
    """MATH-500 problems; the gold answer is the data set's ``answer`` field.

    Args:
        split: only ``test`` exists.
        data_dir: a folder with ``math500/test.jsonl``; None loads the
            hub's ``HuggingFaceH4/MATH-500``.
        limit: keep the first `limit` problems (the file's order).
    """
    if split not in DATASET_SPLITS:
        raise ValueError(f"MATH-500 split {split!r} does not exist: it has only {DATASET_SPLITS}")
    rows = (
        _hub_rows(split)
        if data_dir is None
        else read_jsonl(data_dir, "math500", split, "MATH-500", HUB_ID)
    )
    if limit is not None:
        rows = rows[:limit]
    return [
        Problem(
            id=row["unique_id"],
            question=row["problem"],
            answer=row["answer"],
            difficulty=int(row["level"]),
        )
        for row in rows
    ]


def chat_prompt(problem: Problem) -> list[dict[str, str]]:
    """System and user messages asking for step-by-step reasoning and a boxed answer."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {
            "role": "user",
            "content": f"{problem.question}\n\nPlease reason step by step, and put your final "
            "answer within \\boxed{}.",
        },
    ]


def extract_answer(completion: str) -> str | None:
    """The final answer of a completion: the last ``\\boxed{}``, else the line after ``####``."""
    boxed = extract_boxed(completion)
    if boxed is not None or not isinstance(completion, str) or "####" not in completion:
        return boxed
    tail = completion.rsplit("####", 1)[1].strip().split("\n", 1)[0].strip()
    return tail or None


def verify(completion: str, answer: str) -> bool:
    """Whether the completion's boxed (or ``####``) answer is equivalent to the gold LaTeX."""
    return math_equal(extract_answer(completion), answer)


def _hub_rows(split: str) -> list[dict]:
    from datasets import load_dataset

    return list(load_dataset(HUB_ID, split=split))
