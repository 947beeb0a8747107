"""A task card as read (`TaskCard`): its problems, prompts, columns and how a correct
completion writes its answer (`gold_format`), with the names a card may use. Reading and
checking a card is `isolab.tasks.card.load`'s; grading is `isolab.tasks.card.verifiers`'.
"""

from __future__ import annotations

import logging
import random
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from isolab.tasks.base import Problem

CARD_KEYS = (
    "name",
    "data",
    "validation",
    "val_share",
    "prompt",
    "answer",
    "id",
    "system",
    "few_shot",
    "verifier",
    "answer_regex",
    "gold_format",
    "max_completion_tokens",
)
#: The named ways a correct completion writes its answer (`gold_format`), beside templates.
GOLD_FORMATS = {"boxed": "\\boxed{{answer}}", "bare": "{answer}"}
#: The placeholder of a `gold_format` template.
GOLD_SLOT = "{answer}"
FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
SUFFIXES = (".jsonl", ".csv", ".parquet")

#: Keyword arguments TRL's `GRPOTrainer` gives a reward function itself (trl 1.16,
#: `_calculate_rewards`): a data column of one of these names would be dropped (`prompt`,
#: `completion`, `completion_ids`), collide with the batch's own, or be overwritten.
TRL_NAMES = (
    "prompt",
    "prompts",
    "completion",
    "completions",
    "completion_ids",
    "trainer_state",
    "log_extra",
    "log_metric",
    "environments",
)
#: What isolab's own rewards read the gold as (the card's answer field, as text).
ANSWER = "answer"

log = logging.getLogger(__name__)


def is_card(task: str) -> bool:
    """Whether `task` names a task card (a .yaml / .yml file) rather than a built-in task."""
    return str(task).endswith((".yaml", ".yml"))


class CardError(ValueError):
    """A task card that cannot be used: the message names the key and the fix."""


def fail(path: Path, key: str, problem: str) -> CardError:
    return CardError(f"task card {path}: {key}: {problem}")


@dataclass(frozen=True)
class TaskCard:
    """A task card, read and checked (`load_card`).

    Attributes:
        path: the card file.
        name: the task's name (caches and run names use it).
        digest: sha256 of the card and its data files (12 hex digits): a task id changes
            when either does, so that cached labels of other data are never reused.
        train_rows / val_rows: the rows (dicts) of the training pool and of the validation
            set (None: held out from the training pool at `val_share`).
        prompt, answer, id_field, system, few_shot, verifier, answer_regex,
        max_completion_tokens, val_share: as in the card.
        gold_format: how a correct completion writes its answer: `boxed`, `bare` or a template
            with `{answer}` (the card's, else `default_gold_format`).
    """

    path: Path
    name: str
    digest: str
    train_rows: tuple[dict, ...]
    val_rows: tuple[dict, ...] | None
    prompt: str
    answer: str
    id_field: str | None
    system: str | None
    few_shot: int
    verifier: str
    answer_regex: str | None
    max_completion_tokens: int
    val_share: float
    gold_format: str

    @property
    def task_id(self) -> str:
        """`<name>-<digest>`: what cache files and split records are named by."""
        return f"{self.name}-{self.digest}"

    def problem(self, row: dict, index: int, part: str) -> Problem:
        question = self.prompt.format_map(row) if "{" in self.prompt else str(row[self.prompt])
        pid = str(row[self.id_field]) if self.id_field else f"{part}/{index}"
        return Problem(id=f"{self.name}/{pid}", question=question, answer=str(row[self.answer]))

    @cached_property
    def column_names(self) -> tuple[str, ...]:
        """The data's columns, in the order they first appear in its rows (training rows, then
        validation rows), but `prompt` where it is the card's prompt field: TRL's prompt is the
        one the card builds of it, and reaches a reward as `prompts`."""
        rows = [*self.train_rows, *(self.val_rows or ())]
        names = dict.fromkeys(str(k) for r in rows for k in r)
        return tuple(n for n in names if n != "prompt")

    @cached_property
    def text_columns(self) -> frozenset[str]:
        """Columns whose values no one Arrow type holds (`1` in one row, `"a"` in another):
        `datasets` cannot make a column of them, so they reach a reward as text (`str`)."""
        import pyarrow as pa

        rows = [*self.train_rows, *(self.val_rows or ())]
        out = set()
        for name in self.column_names:
            try:
                pa.array([r.get(name) for r in rows])
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                out.add(name)
        if out:
            log.warning(
                "task card %s: column(s) %s mix value types; a reward gets them as text",
                self.path,
                ", ".join(sorted(out)),
            )
        return frozenset(out)

    @cached_property
    def _rows_by_id(self) -> dict[str, dict]:
        parts = (("train", self.train_rows), ("validation", self.val_rows or ()))
        return {self.problem(r, i, part).id: r for part, rows in parts for i, r in enumerate(rows)}

    def columns(self, problems: list[Problem]) -> dict[str, list]:
        """Every data column of `problems`' rows, as TRL hands a data set's columns to a reward:
        each value as the row has it (None where a row lacks the column; as text in a column
        of mixed types, `text_columns`)."""
        rows = [self._rows_by_id[p.id] for p in problems]
        text = self.text_columns
        return {
            name: [
                str(v) if name in text and v is not None else v for v in (r.get(name) for r in rows)
            ]
            for name in self.column_names
        }

    def examples(self) -> list[Problem]:
        """The worked examples of the prompt (the first `few_shot` rows of the data)."""
        return [self.problem(r, i, "train") for i, r in enumerate(self.train_rows[: self.few_shot])]

    def problems(self, part: str, limit: int | None = None, seed: int = 0) -> list[Problem]:
        """`train` (the data, few-shot rows excluded) or `test` (the validation set: its own
        file, else `val_share` of the data held out by `seed`), the first `limit` of them."""
        rows = list(enumerate(self.train_rows))[self.few_shot :]
        if self.val_rows is None:
            order = rows[:]
            random.Random(seed).shuffle(order)
            n_val = max(1, round(self.val_share * len(order)))
            held = {i for i, _ in order[:n_val]}
            rows = [(i, r) for i, r in rows if (i in held) == (part == "test")]
            out = [self.problem(r, i, "train") for i, r in rows]
        elif part == "test":
            out = [self.problem(r, i, "validation") for i, r in enumerate(self.val_rows)]
        else:
            out = [self.problem(r, i, "train") for i, r in rows]
        return out if limit is None else out[:limit]

    def chat_prompt(self, problem: Problem) -> list[dict[str, str]]:
        """System message (if any), the few-shot examples as user/assistant turns, the question."""
        messages = [{"role": "system", "content": self.system}] if self.system else []
        for ex in self.examples():
            messages.append({"role": "user", "content": ex.question})
            messages.append({"role": "assistant", "content": self.written_answer(ex.answer)})
        messages.append({"role": "user", "content": problem.question})
        return messages

    def written_answer(self, gold: str) -> str:
        """A gold answer as a correct completion writes it, in the card's `gold_format`: the
        few-shot turns, the check of the golds and a reward's pre-flight all use it."""
        return written(self.gold_format, gold)


def written(gold_format: str, gold: str) -> str:
    """`gold` written in `gold_format`: `boxed` → `\\boxed{gold}`, `bare` → gold, a template →
    the template with `{answer}` replaced by gold (its other braces kept as they are)."""
    return GOLD_FORMATS.get(gold_format, gold_format).replace(GOLD_SLOT, gold)


def default_gold_format(verifier: str, answer_regex: str | None, system: str | None) -> str:
    """How a correct completion writes its answer when the card does not say (`gold_format`):
    boxed for `numeric` and `math` and wherever the system message asks for `\\boxed`; for
    `regex`, the pattern's own text around its group; else bare."""
    if verifier in ("numeric", "math") or "\\boxed" in (system or ""):
        return "boxed"
    if verifier == "regex" and answer_regex:
        return _regex_template(answer_regex)
    return "bare"


def _regex_template(pattern: str) -> str:
    """`pattern` as a `gold_format` template where it is a simple literal around one group
    ("Answer: (.*)" → "Answer: {answer}"); else `bare`."""
    m = re.fullmatch(r"([^()\\\[\]*+?{}|^$.]*)\((.*)\)([^()\\\[\]*+?{}|^$.]*)", pattern)
    return f"{m.group(1)}{GOLD_SLOT}{m.group(3)}" if m else "bare"
