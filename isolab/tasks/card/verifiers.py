"""The graders a task card can name (`VERIFIERS`), a verifier of the card's own (run only with
`trust_remote_code`), and the check that every gold passes its card's grader.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from isolab.deadline import CallTimeout, call_with_deadline
from isolab.tasks.card.taskcard import (
    GOLD_FORMATS,
    GOLD_SLOT,
    CardError,
    TaskCard,
    fail,
    written,
)
from isolab.tasks.grading import extract_boxed, extract_gsm8k_answer, gsm8k_equal, math_equal
from isolab.tasks.usercode import VERIFIER, load_function
from isolab.userinput import brief

#: The graders a card can name, and what each compares.
VERIFIERS: dict[str, str] = {
    "numeric": "the final number (#### n, else \\boxed{n}, else the last number) equals the gold",
    "math": "the last \\boxed{} is equivalent to the gold LaTeX (math-verify)",
    "exact": "the last \\boxed{} (else the last non-empty line), trimmed, equals the gold",
    "regex": "the last match of `answer_regex`'s first group, trimmed, equals the gold",
    "choice": "the last standalone capital letter A–J (or \\boxed{X}) equals the gold letter",
}
_CHOICE = re.compile(r"(?<![A-Za-z])([A-J])(?![A-Za-z])")


def _numeric(completion: str, gold: str) -> bool:
    return gsm8k_equal(extract_gsm8k_answer(completion), gold)


def _math(completion: str, gold: str) -> bool:
    return math_equal(extract_boxed(completion), gold)


def _exact(completion: str, gold: str) -> bool:
    boxed = extract_boxed(completion)
    if boxed is None:
        lines = [line.strip() for line in str(completion).splitlines() if line.strip()]
        boxed = lines[-1] if lines else None
    return boxed is not None and boxed.strip() == gold.strip()


def _choice(completion: str, gold: str) -> bool:
    boxed = extract_boxed(completion)
    found = _CHOICE.findall(boxed if boxed is not None else str(completion))
    return bool(found) and found[-1] == gold.strip().upper()


def _regex(pattern: str) -> Callable[[str, str], bool]:
    compiled = re.compile(pattern)

    def verify(completion: str, gold: str) -> bool:
        matches = list(compiled.finditer(str(completion)))
        if not matches:
            return False
        m = matches[-1]
        got = m.group(1) if compiled.groups else m.group(0)
        return got is not None and got.strip() == gold.strip()

    return verify


OPT_IN = "code from a data folder runs only with trust_remote_code: true in the run config"


def code_refusal(card: TaskCard) -> str | None:
    """The refusal of a card whose verifier is code of its own (`file.py:function`, or a
    module), naming the card and the file; None for a built-in grader."""
    if card.verifier in VERIFIERS:
        return None
    module = card.verifier.rpartition(":")[0]
    file = f" ({card.path.parent / module})" if module.endswith(".py") else ""
    return f"task card {card.path} names verifier {card.verifier}{file}: {OPT_IN}"


def verifier_of(card: TaskCard, run_code: bool = False) -> Callable[[str, str], bool]:
    """The card's grader as (completion text, gold) → bool. A verifier of the card's own runs
    only with `run_code` (the run config's `trust_remote_code`): it is then imported, checked
    and tried on every gold answer once (`check_golds`); without, the grader returned refuses
    to grade, so that a plan, which never grades, still has its task."""
    refusal = code_refusal(card)
    if refusal is not None and not run_code:

        def refused(completion: str, gold: str) -> bool:
            raise CardError(refusal)

        return refused
    if card.verifier == "numeric":
        return _numeric
    if card.verifier == "math":
        return _math
    if card.verifier == "exact":
        return _exact
    if card.verifier == "choice":
        return _choice
    if card.verifier == "regex":
        return _regex(card.answer_regex or "")
    try:
        func = load_function(
            card.verifier, card.path.parent, f"task card {card.path}: verifier", VERIFIER
        )
    except ValueError as exc:  # a verifier of the user's that does not import or qualify
        raise CardError(str(exc)) from exc

    def user_verify(completion: str, gold: str) -> bool:
        try:
            out = call_with_deadline(
                f"verifier {card.verifier} of task card {card.path}", func, completion, gold
            )
        except CallTimeout:
            raise
        except (Exception, SystemExit) as exc:  # the run stops FAILED, with what it graded
            # (sys.exit() in a verifier would otherwise end the command with exit 0)
            raise RuntimeError(
                f"verifier {card.verifier} of task card {card.path} raised "
                f"{type(exc).__name__}: {exc} on the completion {brief(completion)} (gold "
                f"answer {brief(gold)})"
            ) from exc
        if not isinstance(out, bool | int) or isinstance(out, float):
            raise RuntimeError(
                f"verifier {card.verifier} of task card {card.path} returned {brief(out)} for "
                f"the completion {brief(completion)} (gold answer {brief(gold)}): return "
                "True or False"
            )
        return bool(out)

    key = (card.task_id, str(card.path), func)  # an edited verifier file: a new function
    if key not in _CHECKED:  # the pre-flight on golds, once per version of card and code
        check_golds(card, user_verify)
        _CHECKED.add(key)
    return user_verify


#: Cards whose own verifier passed its golds in this process: (task id, path, function).
_CHECKED: set[tuple[str, str, Callable]] = set()


def check_golds(card: TaskCard, verify: Callable[[str, str], bool]) -> None:
    """Every gold, written in the card's `gold_format`, passes `verify`."""
    for p in [*card.problems("train"), *card.problems("test"), *card.examples()]:
        try:
            ok = verify(card.written_answer(p.answer), p.answer)
        except Exception as exc:
            raise fail(
                card.path,
                "verifier",
                f"raised {type(exc).__name__}: {exc} on problem {p.id}'s own gold answer",
            ) from exc
        if not ok:
            raise fail(
                card.path,
                "verifier",
                f"{card.verifier} rejects problem {p.id}'s own gold answer {brief(p.answer)} "
                f"written as {brief(card.written_answer(p.answer))} (gold_format: "
                f"{card.gold_format}): {_gold_fix(card, verify, p.answer)}",
            )


def _gold_fix(card: TaskCard, verify: Callable[[str, str], bool], gold: str) -> str:
    """The fix of a gold its verifier rejects: the named `gold_format` it accepts the gold in,
    where one does; else pick another grader (a verifier of the card's own: fix it)."""
    for name in GOLD_FORMATS:
        if name != card.gold_format:
            try:
                accepted = verify(written(name, gold), gold)
            except Exception:  # only a hint: the refusal stands either way
                accepted = False
            if accepted:
                return f"it accepts it written {name}: set gold_format: {name} in the card"
    if card.verifier not in VERIFIERS:
        return (
            "set gold_format to how a correct completion writes its answer (boxed, bare or a "
            f"template with {GOLD_SLOT}), or fix the verifier"
        )
    graders = "; ".join(f"{k}: {v}" for k, v in VERIFIERS.items())
    return f"pick the grader that fits the answers ({graders}), or set gold_format"
