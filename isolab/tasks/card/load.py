"""Reading a task card (`load_card`): its keys checked, its rows read and checked, its golds
graded, cached while its files are unchanged.
"""

from __future__ import annotations

import re
from pathlib import Path

from isolab.tasks.card.rows import (
    check_column_names,
    check_fields,
    check_values,
    digest_of,
    row_place,
    source_rows,
    template_fields,
)
from isolab.tasks.card.taskcard import (
    CARD_KEYS,
    GOLD_FORMATS,
    GOLD_SLOT,
    CardError,
    TaskCard,
    default_gold_format,
    fail,
    log,
    written,
)
from isolab.tasks.card.verifiers import VERIFIERS, check_golds, verifier_of
from isolab.tasks.usercode import VERIFIER, check_spec
from isolab.userinput import brief, read_yaml

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def _load(card: Path) -> tuple[TaskCard, list[Path]]:
    data = read_yaml(card)
    if not isinstance(data, dict):
        raise CardError(f"task card {card}: write a mapping (name: ..., data: ..., ...)")
    unknown = sorted(set(data) - set(CARD_KEYS))
    if unknown:
        raise fail(card, unknown[0], f"unknown key; a card has {', '.join(CARD_KEYS)}")
    for key in ("name", "data", "prompt", "answer"):
        if key not in data:
            raise fail(card, key, "missing (see examples/word-problems/task.yaml)")
    name = str(data["name"])
    if not _NAME.match(name):
        raise fail(card, "name", f"{brief(name)}: use letters, digits, - and _ (≤ 64)")
    train, files = source_rows(data["data"], "data", card)
    val = None
    if data.get("validation") is not None:
        val, more = source_rows(data["validation"], "validation", card)
        files += more
    prompt, answer = str(data["prompt"]), str(data["answer"])
    fields = template_fields(prompt, card) if "{" in prompt else [prompt]
    for rows, where in ((train, "data"), (val, "validation")):
        if rows is not None:  # a field the prompt names: the message names `prompt`
            check_fields(rows, fields, "prompt", where, card)
    needed = [*fields, answer] + ([str(data["id"])] if data.get("id") else [])
    check_fields(train, needed, "data", "data", card)
    if val is not None:
        check_fields(val, needed, "validation", "validation", card)
    check_column_names([*train, *(val or [])], answer, prompt, card)
    id_field = str(data["id"]) if data.get("id") else None
    ids = check_values(train, data["data"], "data", prompt, fields, answer, id_field, card)
    if val is not None:
        val_ids = check_values(
            val, data["validation"], "validation", prompt, fields, answer, id_field, card
        )
        for pid, i in val_ids.items():
            if pid in ids:  # a problem held out and trained on
                raise fail(
                    card,
                    "validation",
                    f"{row_place(data['validation'], i, card)}: {id_field} {brief(pid)} is also "
                    f"data's {row_place(data['data'], ids[pid], card, short=True)}: validation "
                    "problems are held out of training; drop one, or give it another id",
                )
    verifier = str(data.get("verifier", "numeric"))
    if verifier not in VERIFIERS and ":" not in verifier:
        raise fail(
            card,
            "verifier",
            f"{brief(verifier)}: choose one of {', '.join(VERIFIERS)}, or module:function",
        )
    regex = data.get("answer_regex")
    if verifier == "regex":
        if not regex:
            raise fail(card, "answer_regex", "verifier: regex needs answer_regex: 'Answer: (.*)'")
        try:
            re.compile(str(regex))
        except re.error as exc:
            raise fail(card, "answer_regex", f"does not compile: {exc}") from exc
    few_shot = data.get("few_shot", 0)
    if not isinstance(few_shot, int) or few_shot < 0:
        raise fail(card, "few_shot", f"{brief(few_shot)}: give a count ≥ 0 of example rows")
    val_share = data.get("val_share", 0.2)
    if not isinstance(val_share, int | float) or not 0 < val_share < 1:
        raise fail(card, "val_share", f"{brief(val_share)}: give a share in (0, 1), e.g. 0.2")
    max_tokens = data.get("max_completion_tokens", 256)
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise fail(card, "max_completion_tokens", f"{brief(max_tokens)}: give tokens ≥ 1")
    system = str(data["system"]) if data.get("system") else None
    gold_format = _gold_format(data, verifier, str(regex) if regex else None, system, card)
    out = TaskCard(
        path=card,
        name=name,
        digest=digest_of(files, card.read_bytes()),
        train_rows=tuple(train),
        val_rows=None if val is None else tuple(val),
        prompt=prompt,
        answer=answer,
        id_field=str(data["id"]) if data.get("id") else None,
        system=system,
        few_shot=few_shot,
        verifier=verifier,
        answer_regex=str(regex) if regex else None,
        max_completion_tokens=max_tokens,
        val_share=float(val_share),
        gold_format=gold_format,
    )
    _check_splits(out)
    if verifier in VERIFIERS:
        check_golds(out, verifier_of(out))
    else:  # code of the card's own: refused here only where that runs none of it
        try:
            check_spec(verifier, card.parent, f"task card {card}: verifier", VERIFIER)
        except ValueError as exc:
            raise CardError(str(exc)) from exc
    return out, [card, *files]


def _gold_format(
    data: dict, verifier: str, regex: str | None, system: str | None, card: Path
) -> str:
    """The card's `gold_format` (checked), else `default_gold_format`. A format that writes no
    box while the system message asks for one is said in a warning: the prompt and its
    worked examples then disagree."""
    value = data.get("gold_format")
    if value is None:
        return default_gold_format(verifier, regex, system)
    if not isinstance(value, str) or (value not in GOLD_FORMATS and GOLD_SLOT not in value):
        raise fail(
            card,
            "gold_format",
            f"{brief(value)}: give boxed (\\boxed{{answer}}), bare (the answer as it is) or a "
            f"template with {GOLD_SLOT} in it (e.g. 'Answer: {GOLD_SLOT}')",
        )
    if "\\boxed" in (system or "") and "\\boxed" not in written(value, ""):
        log.warning(
            "task card %s: the system message asks for \\boxed, and gold_format %s writes the "
            "worked examples and golds without one: they disagree (gold_format: boxed?)",
            card,
            value,
        )
    return value


def _check_splits(card: TaskCard) -> None:
    train, val = card.problems("train"), card.problems("test")
    if not train:
        raise fail(card.path, "data", "no training problems (after few_shot examples)")
    if not val:
        key = "validation" if card.val_rows is not None else "data"
        raise fail(card.path, key, "no validation problems: add rows or a validation file")


def load_card(path: str | Path, run_code: bool = False) -> TaskCard:
    """The task card at `path`, read and checked (cached while the file is unchanged), or a
    `CardError` (a ValueError) naming the key and the fix. A verifier of the card's own is
    imported and tried on the golds only with `run_code` (`verifier_of`)."""
    card = Path(path)
    if not card.is_file():
        raise CardError(
            f"task = {brief(str(path))}: no task card there; give a built-in task (arithmetic, "
            "gsm8k, math500) or the path of a card (see examples/word-problems/task.yaml)"
        )
    key = str(card.resolve())
    cached = _CACHE.get(key)
    if cached is not None and cached[1] == _stamp(cached[2]):
        loaded = cached[0]
    else:
        loaded, files = _load(card.resolve())
        _CACHE[key] = (loaded, _stamp(files), files)
    if run_code:
        verifier_of(loaded, run_code=True)
    return loaded


#: Cards read in this process: path → (card, files' modification times, files).
_CACHE: dict[str, tuple[TaskCard, tuple[float, ...], list[Path]]] = {}


def _stamp(files: list[Path]) -> tuple[float, ...]:
    return tuple(f.stat().st_mtime_ns if f.exists() else -1 for f in files)
