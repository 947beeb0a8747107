"""What every task provides: problems with a gold answer, prompts, and a verifier."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


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


def as_text(prompt, tokenizer) -> str:
    """A prompt as HF `generate` takes it: raw prompts as they are, chat prompts rendered with
    the model's chat template."""
    if isinstance(prompt, str):
        return prompt
    return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)


def completion_text(completion) -> str:
    """TRL passes strings for raw prompts and message lists for chat prompts."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content", "") for m in completion if isinstance(m, dict))


def read_jsonl(
    data_dir: str | Path, folder: str, split: str, label: str, hub_id: str
) -> list[dict]:
    """Rows of `<data_dir>/<folder>/<split>.jsonl` (a local copy of a hub data set), or an
    error that says where the file should be."""
    path = Path(data_dir) / folder / f"{split}.jsonl"
    if not path.is_file():
        raise FileNotFoundError(
            f"no {label} {split} file at {path}: point data_dir at the folder that holds "
            f"`{folder}/`, or pass data_dir=None to load {hub_id} from the hub"
        )
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
