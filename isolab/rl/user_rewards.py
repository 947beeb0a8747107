"""A reward function of the user's (`reward: module:function`): loading it with TRL's signature
and checking every batch it scores (`user_reward`), the data set whose columns every reward is
given (`reward_dataset`), and the pre-flight call on gold and wrong answers that refuses a
broken one before any model loads (`preflight`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from isolab.config import is_user_reward, reward_parts
from isolab.deadline import CallTimeout, call_with_deadline
from isolab.tasks import Task
from isolab.tasks.arithmetic import raw_target
from isolab.tasks.base import Problem, completion_text
from isolab.tasks.card import is_card, load_card
from isolab.tasks.usercode import REWARD, load_function


class RewardFunctionError(RuntimeError):
    """A user's reward function failed on a batch: the message names the function, the
    problem and the completion."""


def _shown(x: Any, limit: int = 300) -> str:
    text = completion_text(x) if isinstance(x, list | str) else repr(x)
    return text if len(text) <= limit else text[:limit] + "…"


def _missing_key(exc: BaseException, got: list[str]) -> str:
    """For a KeyError on a keyword the function did not get: which, and what it got."""
    if not isinstance(exc, KeyError) or not exc.args or exc.args[0] in got:
        return ""
    return (
        f"; it read {exc.args[0]!r}, which is not among the keyword arguments it got "
        f"({', '.join(sorted(got))}): a reward gets the prompts, the completions and every "
        "column of the task's data under its own name (docs/your-setting.md)"
    )


def user_reward(spec: str) -> Callable[..., list[float]]:
    """The function `module:function` (or `path/to/file.py:function`, relative to the working
    folder), with TRL's reward-function signature — `fn(prompts, completions, **kwargs)` with
    every dataset column among the keyword arguments (`reward_dataset`), one float per
    completion — so that a function written for TRL runs unchanged. Costs no FLOPs.

    Every batch is checked: a function that raises, returns a length other than the
    completions', or a value that is not a finite number stops the run with a
    `RewardFunctionError` naming the problem (its prompt and gold answer) and the completion.
    TRL's own None ("not applicable") is not accepted: isolab needs a reward per rollout."""
    func = load_function(spec, Path.cwd(), "reward", REWARD)

    def checked(prompts, completions, answer=None, **kwargs) -> list[float]:
        where = f"reward {spec}"
        try:
            out = call_with_deadline(
                where, func, prompts=prompts, completions=completions, answer=answer, **kwargs
            )
        except CallTimeout as exc:
            raise RewardFunctionError(str(exc)) from exc
        except (Exception, SystemExit) as exc:  # sys.exit() in it must fail the run, not end it
            got = ["prompts", "completions", *(["answer"] if answer is not None else []), *kwargs]
            raise RewardFunctionError(
                f"{where} raised {type(exc).__name__}: {exc} on a batch of {len(completions)} "
                f"completions; the first: problem {_shown(prompts[0])!r} (answer "
                f"{answer[0] if answer else None!r}), completion {_shown(completions[0])!r}"
                + _missing_key(exc, got)
            ) from exc
        values = list(out) if isinstance(out, list | tuple) else None
        if values is None or len(values) != len(completions):
            got = f"{type(out).__name__}" + (f" of {len(values)}" if values is not None else "")
            raise RewardFunctionError(
                f"{where} returned {got} for {len(completions)} completions: return a list "
                "with one float per completion"
            )
        for i, v in enumerate(values):  # a bool is an int: True and False are rewards too
            if not (isinstance(v, int | float) and math.isfinite(v)):
                raise RewardFunctionError(
                    f"{where} returned {v!r} for completion {i}: every reward must be a finite "
                    f"number. Problem {_shown(prompts[i])!r} (answer "
                    f"{answer[i] if answer else None!r}), completion {_shown(completions[i])!r}"
                )
        return [float(v) for v in values]

    checked.__name__ = getattr(func, "__name__", "user_reward")
    return checked


def reward_dataset(task: Task, problems: list[Problem]):
    """The training data set TRL's `GRPOTrainer` is given, whose every column but `prompt` it
    passes to each reward function as a keyword argument: `prompt` (the task's prompt),
    `answer` (the gold as text, which isolab's rules read) and, for a task card, each column of
    the problem's data row under its own name (`TaskCard.columns`; the answer field too, with
    its value as the row has it: `answer` is the text one where the field is named so)."""
    from datasets import Dataset

    columns = load_card(task.name).columns(problems) if is_card(task.name) else {}
    return Dataset.from_dict(
        {
            "prompt": [task.prompt(p) for p in problems],
            **columns,
            "answer": [p.answer for p in problems],
        }
    )


#: Problems and completions per problem of the pre-flight call of a user's reward.
PREFLIGHT_PROBLEMS = 2


def written_gold(task: Task, problem: Problem) -> str:
    """`problem`'s gold answer as a correct completion writes it: a card's own way
    (`TaskCard.written_answer`), the tiny models' target (`raw_target`), else boxed."""
    if is_card(task.name):
        return load_card(task.name).written_answer(problem.answer)
    return raw_target(problem) if task.style == "raw" else f"\\boxed{{{problem.answer}}}"


def wrong_answer(gold: str) -> str:
    """A deliberately wrong answer beside `gold`: an integer or a decimal plus one (`49` →
    `50`), a choice letter the next one (`B` → `C`), other text reversed (`Paris` → `siraP`;
    `wrong` where it reads the same backwards)."""
    text = gold.strip()
    if re.fullmatch(r"-?\d+", text):
        return str(int(text) + 1)
    if re.fullmatch(r"-?\d*\.\d+", text):
        places = len(text.rpartition(".")[2])
        return f"{float(text) + 1:.{places}f}"
    if re.fullmatch(r"[A-J]", text):
        return "ABCDEFGHIJ"[("ABCDEFGHIJ".index(text) + 1) % 10]
    return text[::-1] if text[::-1] != text else "wrong"


def preflight_batch(task: Task, problems: list[Problem]) -> dict[str, Any]:
    """The keyword arguments of a first reward call, as TRL builds them (trl 1.16,
    `_calculate_rewards`): `problems`' data set rows, each repeated for its two completions (its
    own gold, then a deliberately wrong answer, `wrong_answer`, both as a correct completion
    writes its answer), `completion_ids`, and the trainer's `trainer_state`, `log_extra` and
    `log_metric` (a fresh `TrainerState`, and functions that log nothing). No model is loaded
    yet, so `completion_ids` are each completion's UTF-8 bytes: their count, not their values,
    is what a reward may read here."""
    from transformers import TrainerState

    rows = reward_dataset(task, problems).to_list()
    texts_of = [
        (
            written_gold(task, p),
            written_gold(task, dataclasses.replace(p, answer=wrong_answer(p.answer))),
        )
        for p in problems
    ]
    batch = [(row, text) for row, pair in zip(rows, texts_of, strict=True) for text in pair]
    texts = [g for _, g in batch]
    chat = task.style == "chat"
    out: dict[str, Any] = {
        "prompts": [row["prompt"] for row, _ in batch],
        "completions": [[{"role": "assistant", "content": t}] if chat else t for t in texts],
        "completion_ids": [list(t.encode()) for t in texts],
    }
    for key in rows[0]:
        if key != "prompt":
            out[key] = [row[key] for row, _ in batch]
    out["trainer_state"] = TrainerState()
    out["log_extra"] = lambda column, values: None
    out["log_metric"] = lambda name, value: None
    return out


def preflight(
    reward: str, functions: list[Callable[..., list[float]]], task: Task, problems: list[Problem]
) -> None:
    """Call each of the user's own reward functions among `functions` (the parts of `reward`,
    as `get_rewards` built them) once, on `preflight_batch`: a column it reads and does not get,
    a raise, a wrong length or a non-number is a `RewardFunctionError` now, before any model
    loads, not minutes into the run. A reward of the user's that is the whole reward must also
    score some gold above its deliberately wrong answer (`tells_right_from_wrong`)."""
    parts = reward_parts(reward)
    if not any(is_user_reward(part) for part in parts) or not problems:
        return
    kwargs = preflight_batch(task, problems[:PREFLIGHT_PROBLEMS])
    for part, fn in zip(parts, functions, strict=True):
        if is_user_reward(part):
            try:
                scores = fn(**kwargs)
            except RewardFunctionError as exc:
                raise RewardFunctionError(
                    f"before the run, on {len(kwargs['completions'])} completions written of "
                    f"gold answers and of wrong ones: {exc}"
                ) from exc
            if len(parts) == 1:
                tells_right_from_wrong(part, kwargs, scores)


def tells_right_from_wrong(spec: str, kwargs: dict[str, Any], scores: list[float]) -> None:
    """A `RewardFunctionError` unless reward `spec` scored some gold of the pre-flight batch
    (`preflight_batch`: a gold, then a wrong answer, per problem) above its wrong answer. One
    that scores every wrong answer as high as the gold reads no answer (a column holding
    something else, the completion read the wrong way) and would train on nothing, minutes
    later. A reward meant to ignore correctness (a format or length term) goes in a sum."""
    pairs = list(zip(scores[::2], scores[1::2], strict=True))
    if any(right > wrong for right, wrong in pairs):
        return
    texts = [completion_text(c) for c in kwargs["completions"]]
    shown = "; ".join(
        f"{_shown(texts[2 * i], 60)!r} → {right:g}, {_shown(texts[2 * i + 1], 60)!r} → {wrong:g}"
        for i, (right, wrong) in enumerate(pairs)
    )
    got = ", ".join(sorted(k for k in kwargs if k not in ("prompts", "completions")))
    raise RewardFunctionError(
        f"before the run: reward {spec} scores every deliberately wrong answer as high as the "
        f"gold ({shown}), so it cannot tell a right completion from a wrong one. Check the "
        f"column it compares with (it got {got}) and how it reads the completion; a reward "
        f"meant to ignore correctness goes in a sum (reward: sparse + {spec})"
    )
