"""GSM8K (Cobbe et al. 2021, arXiv 2110.14168): grade-school word problems with integer answers.

Problems come from the hub (``openai/gsm8k``, config ``main``) or from a local folder holding
``gsm8k/{train,test}.jsonl`` in the hub's format: ``question`` and ``answer``, a worked solution
ending in ``#### <number>``. Grading compares numbers (:func:`isolab.tasks.grading.gsm8k_equal`).
"""

from __future__ import annotations

from pathlib import Path

from isolab.tasks.base import Problem, read_jsonl
from isolab.tasks.grading import extract_gsm8k_answer, gsm8k_equal

HUB_ID = "openai/gsm8k"
#: The data set's own splits, as the hub names them (not a difficulty split: `config.SPLITS`).
DATASET_SPLITS = ("train", "test")

SYSTEM_PROMPT = (
    "You are a careful math tutor. Reason step by step, then give the final answer "
    "as a number in \\boxed{}."
)


def load_problems(
    split: str = "test", data_dir: str | Path | None = None, limit: int | None = None
) -> list[Problem]:
    """GSM8K problems of `split`, the gold answer being the number after ``####``.

    Args:
        split: ``train`` (7,473 problems) or ``test`` (1,319).
        data_dir: a folder with ``gsm8k/<split>.jsonl``; None loads
            the hub's ``openai/gsm8k``.
        limit: keep the first `limit` problems (the files' order).
    """
    if split not in DATASET_SPLITS:
        raise ValueError(f"GSM8K split {split!r} does not exist: use one of {DATASET_SPLITS}")
    rows = (
        _hub_rows(split)
        if data_dir is None
        else read_jsonl(data_dir, "gsm8k", split, "GSM8K", HUB_ID)
    )
    if limit is not None:
        rows = rows[:limit]
    return [
        Problem(
            id=f"gsm8k/{split}/{i}", question=row["question"], answer=gold_answer(row["answer"])
        )
        for i, row in enumerate(rows)
    ]


def gold_answer(solution: str) -> str:
    """The final number of a GSM8K worked solution (after ``####``), commas removed."""
    return solution.rsplit("####", 1)[-1].strip().replace(",", "")


def chat_prompt(problem: Problem) -> list[dict[str, str]]:
    """System and user messages asking for step-by-step reasoning and a boxed number."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {
            "role": "user",
            "content": f"{problem.question}\n\nPlease reason step by step, and put your final "
            "answer within \\boxed{} (or on a last line as `#### <number>`).",
        },
    ]


def verify(completion: str, answer: str) -> bool:
    """Whether the completion's final answer (``####``, else boxed, else last number) equals
    the gold number."""
    return gsm8k_equal(extract_gsm8k_answer(completion), answer)


def _hub_rows(split: str) -> list[dict]:
    from datasets import load_dataset

    return list(load_dataset(HUB_ID, "main", split=split))
