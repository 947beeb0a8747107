"""Tasks: where problems come from, how a model is prompted, how an answer is checked.

A `Task` bundles those three for one (task, model kind) pair: tiny character-level models get
the raw arithmetic prompt, instruct LMs get chat messages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from isolab.tasks import arithmetic, card
from isolab.tasks.base import Problem
from isolab.userinput import brief, cut

TASKS = ("arithmetic", "gsm8k", "math500")


@dataclass(frozen=True)
class Task:
    """Problems, prompt builder and verifier of one task for one kind of model.

    Attributes:
        name: `arithmetic`, `gsm8k`, `math500`, or the path of a task card.
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
        difficulty split); arithmetic has no data set and draws `limit` problems from `seed`;
        a task card's `test` is its validation set."""
        if self.name == "arithmetic":
            return arithmetic.generate_problems(limit or 2000, seed=seed)
        if card.is_card(self.name):
            return card.load_card(self.name).problems(split, limit=limit, seed=seed)
        module = _module(self.name)
        return module.load_problems(split=split, data_dir=data_dir, limit=limit)


def check_task(name: str) -> None:
    """A built-in task, or a task card that reads and checks (ValueError naming the fix)."""
    if card.is_card(name):
        card.load_card(name)
    elif name not in TASKS:
        raise ValueError(
            f"task = {name!r}: choose one of {', '.join(TASKS)}, or give the path of a task card "
            "(.yaml) that makes a task of your own data (see examples/word-problems/task.yaml)."
        )


def task_id(name: str) -> str:
    """What caches and split records name a task by: the built-in name, or a card's
    `<name>-<digest of card and data>` (a path has slashes; changed data must not reuse labels)."""
    return card.load_card(name).task_id if card.is_card(name) else name


def get_task(name: str, style: str, run_code: bool = False) -> Task:
    """The task `name` (built-in, or the path of a task card) in prompt style `raw` or `chat`.
    A card's own verifier runs only with `run_code` (the run config's `trust_remote_code`;
    `card.verifier_of`): planning, which only prompts, leaves it off."""
    if style not in ("raw", "chat"):
        raise ValueError(f"style = {style!r}: choose raw (tiny models) or chat (instruct LMs).")
    check_task(name)
    if name == "arithmetic":
        if style == "raw":
            return Task(name, style, arithmetic.raw_prompt, arithmetic.verify_raw, 6)
        return Task(name, style, arithmetic.chat_prompt, arithmetic.verify_chat, 64)
    if style == "raw":
        raise ValueError(
            f"task {name} needs a chat model (chat prompts); tiny-s, tiny-m and tiny-l only know "
            "the raw arithmetic alphabet. Use model: tiny-chat (seconds per step on a CPU: "
            "plumbing and allocation mechanics, not the task), smollm2-135m, a hub id or a local "
            "instruct model folder."
        )
    if card.is_card(name):
        c = card.load_card(name)
        verify = card.verifier_of(c, run_code)
        return Task(name, style, c.chat_prompt, verify, c.max_completion_tokens)
    module = _module(name)
    return Task(name, style, module.chat_prompt, module.verify, 256 if name == "gsm8k" else 512)


def _module(name: str):
    if name == "gsm8k":
        from isolab.tasks import gsm8k

        return gsm8k
    from isolab.tasks import math500

    return math500


#: Seed of the problems an arithmetic evaluation set draws (fixed, so that every run of a sweep
#: is evaluated on the same problems; not a pool seed).
EVAL_SET_SEED = 1_000_003


#: The evaluation set of a run's own training problems (the first `eval_problems` of them,
#: the ones a `train_limit` keeps first): per-problem curves on problems the run trains on.
TRAIN_SAMPLE = "train"


def parse_eval_set(spec: str) -> tuple[str, dict[str, int]]:
    """`arithmetic:max_digits=4,max_terms=3` → ("arithmetic", {knob: value}); a task name or a
    card path → (it, {}). Knobs are `ArithmeticSpec`'s, for arithmetic only (ValueError)."""
    name, sep, knobs = str(spec).partition(":")
    if not sep or card.is_card(spec):
        return str(spec), {}
    if name != "arithmetic":
        raise ValueError(
            f"eval set {spec!r}: only arithmetic takes knobs (arithmetic:max_digits=4); give "
            "other tasks by name or a task card's path"
        )
    fields = set(arithmetic.ArithmeticSpec.__dataclass_fields__)
    out: dict[str, int] = {}
    for part in knobs.split(","):
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or key not in fields or not (value.isascii() and value.isdigit()):
            raise ValueError(
                f"eval set {spec!r}: write knob=integer, knobs from {', '.join(sorted(fields))}"
            )
        low, high = arithmetic.KNOB_RANGES[key]
        if len(value.lstrip("0")) > len(str(high)) or not low <= int(value) <= high:
            raise ValueError(
                f"eval set {brief(spec)}: {key} = {cut(value, 30)}: give {low} to {high} (a larger "
                "one is no sum a model is tested on, and drawing its problems never ends)"
            )
        out[key] = int(value)
    try:
        arithmetic.ArithmeticSpec(**out)  # how the knobs go together (min ≤ max)
    except ValueError as exc:
        raise ValueError(f"eval set {brief(spec)}: {exc}") from None
    return name, out


def eval_set_problems(
    spec: str, style: str, count: int, data_dir: str | None = None, run_code: bool = False
):
    """(Task, its first `count` evaluation problems) of an evaluation set `spec`: a built-in
    task (arithmetic drawn from `EVAL_SET_SEED`, optionally with knobs; GSM8K's and MATH-500's
    test problems) or a task card's validation set (its own verifier runs with `run_code`)."""
    name, knobs = parse_eval_set(spec)
    task = get_task(name, style, run_code)
    if name == "arithmetic":
        problems = arithmetic.generate_problems(
            count, seed=EVAL_SET_SEED, spec=arithmetic.ArithmeticSpec(**knobs)
        )
        return task, problems
    return task, task.problems(split="test", data_dir=data_dir, limit=count)
