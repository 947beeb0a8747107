"""Your own problems: a task card, a small YAML file that makes a task of a JSONL, CSV or parquet
file (or a `datasets` id), so that `task: path/to/task.yaml` trains, labels difficulty, sweeps
and plots as `task: gsm8k` does.

A card (every path relative to the card's folder)::

    name: word-problems              # letters, digits, - and _: names its caches
    data: problems.jsonl             # .jsonl, .csv or .parquet; or hub: {id, config, split,
                                     #   revision}: a hub id, or a local folder of data files
    validation: held_out.jsonl       # optional: else `val_share` of `data` is held out
    prompt: "{question}"             # a field, or a template over fields ({a} and {b})
    answer: answer                   # the field with the gold answer
    system: "Answer with a number."  # optional system message
    few_shot: 2                      # optional: the first k rows of `data` as worked examples
    verifier: numeric                # a grader of VERIFIERS, or module:function / file.py:function
    answer_regex: "Answer: (.*)"     # with verifier: regex, the group that holds the answer
    gold_format: boxed               # optional: boxed, bare, or a template "Answer: {answer}"
    max_completion_tokens: 256

A verifier given as `module:function` (or `path/to/file.py:function`, relative to the card) is
called as `function(completion_text, gold_answer) -> bool`: a plain Python function of yours
(`isolab.tasks.usercode`). It is code from a data folder, so isolab imports and runs it only
with `trust_remote_code: true` in the run config, and planning (`isolab flops`, `isolab sweep
plan`) never does.

A correct completion writes its answer one way, `gold_format` (`TaskCard.written_answer`): the
few-shot turns show the golds that way, every gold must pass the card's verifier written that
way (a card whose grader rejects its own golds is refused before any run; a verifier of its
own, once trusted, before any model loads), and a reward's pre-flight gets them that way.
`boxed` is `\\boxed{answer}`, `bare` the answer as it is, a template any text with `{answer}`
in it. Unset, it follows the verifier (`default_gold_format`): `boxed` for `numeric` and
`math`, and for any verifier where the system message asks for `\\boxed` (a prompt that asks
for a box and examples that show none disagree); else the pattern's own text for `regex`
("Answer: (.*)" → "Answer: {answer}"), and `bare` for `exact`, `choice` and a verifier of
your own.

Every column of the data reaches a reward function as a keyword argument under its own name, as
TRL passes a data set's columns (`TaskCard.columns`); the answer field also as `answer`, the gold
as text, which isolab's rule-based rewards read. A column named as one of TRL's own arguments
(`TRL_NAMES`), or `answer` where it is not the answer field, is refused when the card is read.
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from isolab.deadline import CallTimeout, call_with_deadline
from isolab.hub import hub_reachable
from isolab.tasks.base import Problem
from isolab.tasks.grading import (
    extract_boxed,
    extract_gsm8k_answer,
    gsm8k_equal,
    math_equal,
)
from isolab.tasks.usercode import VERIFIER, check_spec, load_function
from isolab.userinput import brief, read_yaml

#: The graders a card can name, and what each compares.
VERIFIERS: dict[str, str] = {
    "numeric": "the final number (#### n, else \\boxed{n}, else the last number) equals the gold",
    "math": "the last \\boxed{} is equivalent to the gold LaTeX (math-verify)",
    "exact": "the last \\boxed{} (else the last non-empty line), trimmed, equals the gold",
    "regex": "the last match of `answer_regex`'s first group, trimmed, equals the gold",
    "choice": "the last standalone capital letter A–J (or \\boxed{X}) equals the gold letter",
}
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
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_CHOICE = re.compile(r"(?<![A-Za-z])([A-J])(?![A-Za-z])")
_SUFFIXES = (".jsonl", ".csv", ".parquet")

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


def _fail(path: Path, key: str, problem: str) -> CardError:
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


# ---- graders -------------------------------------------------------------------------------
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


#: Why a card's own verifier did not run: the one switch that lets it.
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
    and tried on every gold answer once (`_check_golds`); without, the grader returned refuses
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
        _check_golds(card, user_verify)
        _CHECKED.add(key)
    return user_verify


#: Cards whose own verifier passed its golds in this process: (task id, path, function).
_CHECKED: set[tuple[str, str, Callable]] = set()


# ---- reading ---------------------------------------------------------------------------------
def _read_rows(path: Path, key: str, card: Path) -> list[dict]:
    if not path.is_file():
        raise _fail(card, key, f"no file {path}: give a path relative to the card's folder")
    if path.suffix not in _SUFFIXES:
        raise _fail(card, key, f"{path.name}: give a {', '.join(_SUFFIXES)} file")
    shown = path.relative_to(card.parent)
    try:
        if path.suffix == ".jsonl":
            with path.open(encoding="utf-8") as f:
                rows = [
                    json.loads(line, object_pairs_hook=_once(card, key, f"{shown} line {number}"))
                    for number, line in enumerate(f, 1)
                    if line.strip()
                ]
        elif path.suffix == ".csv":
            with path.open(encoding="utf-8", newline="") as f:
                reader = csv.DictReader(f)
                rows = list(reader)
            header = list(reader.fieldnames or ())
            twice = next((h for i, h in enumerate(header) if h in header[:i]), None)
            if twice is not None:  # DictReader keeps the last column of a name
                raise _fail(card, key, f"{shown}: column {twice!r} is given twice: keep one")
        else:
            import polars as pl

            rows = pl.read_parquet(path).to_dicts()
    except CardError:
        raise
    except Exception as exc:
        raise _fail(card, key, f"{path.name} does not parse: {type(exc).__name__}: {exc}") from exc
    if not all(isinstance(r, dict) for r in rows):
        raise _fail(card, key, f"{path.name}: every line must be a JSON object")
    return rows


def _once(card: Path, key: str, where: str) -> Callable[[list[tuple[str, Any]]], dict]:
    """json's `object_pairs_hook` that refuses a key given twice in one object (json keeps the
    last: `{"answer": "1", "answer": "2"}` was read as 2 without a word)."""

    def pairs_once(pairs: list[tuple[str, Any]]) -> dict:
        out: dict = {}
        for name, value in pairs:
            if name in out:
                raise _fail(card, key, f"{where}: key {name!r} is given twice: keep one")
            out[name] = value
        return out

    return pairs_once


def _hub_rows(spec: Any, key: str, card: Path) -> tuple[list[dict], list[Path]]:
    """Rows of a `datasets` data set: a hub id (`owner/name`, with `config`, `split` and an
    optional `revision` to pin it), or a local folder of data files (relative to the card), which
    `datasets` reads as it reads a hub repository and whose files then enter the card's digest."""
    if not isinstance(spec, dict) or "id" not in spec:
        raise _fail(card, key, "give a file, or hub: {id: owner/name, config: ..., split: ...}")
    unknown = sorted(set(spec) - {"id", "config", "split", "revision"})
    if unknown:
        raise _fail(card, key, f"hub: unknown key {unknown[0]!r}; give id, config, split, revision")
    ident, split = str(spec["id"]), str(spec.get("split", "train"))
    if not ident.strip() or Path(ident).is_absolute():  # `/` once walked the whole disk
        raise _fail(
            card,
            key,
            f"hub: id {brief(ident)}: give a hub id (owner/name) or a folder of data files "
            "relative to the card's folder",
        )
    folder = card.parent / ident
    files = sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
    if not files:
        from huggingface_hub.errors import HFValidationError
        from huggingface_hub.utils import validate_repo_id

        try:
            validate_repo_id(ident)
        except HFValidationError:
            raise _fail(
                card,
                key,
                f"hub: id {brief(ident)} is neither a folder of data files next to the card nor "
                "a valid hub id: give owner/name (letters, digits, - _ .) or a folder",
            ) from None
    from datasets import load_dataset

    if not files and not hub_reachable() and not _in_datasets_cache(ident):
        raise _fail(
            card,
            key,
            f"hub id {ident!r}: the Hugging Face Hub is not reachable from here and the data set "
            "is not in the local datasets cache; give a file (data: problems.jsonl) or a folder "
            "of data files as the id, or load it once with the hub reachable",
        )
    try:
        rows = load_dataset(
            str(folder) if files else ident,
            spec.get("config"),
            split=split,
            revision=spec.get("revision"),
        )
    except Exception as exc:
        raise _fail(
            card,
            key,
            f"datasets could not load {ident!r} (config {spec.get('config')!r}, split "
            f"{split!r}): {type(exc).__name__}: {brief(str(exc))}. Check the id, config and "
            "split; without the hub, give a file (data: problems.jsonl) or a folder of data "
            "files as the id",
        ) from exc
    return [dict(r) for r in rows], files


def _in_datasets_cache(ident: str) -> bool:
    """Whether `datasets` has prepared `ident` before on this machine (any config or version)."""
    from datasets import config

    return any(Path(config.HF_DATASETS_CACHE).glob(f"{ident.replace('/', '___')}*"))


def _rows(value: Any, key: str, card: Path) -> tuple[list[dict], list[Path]]:
    if isinstance(value, dict) and "hub" in value:
        return _hub_rows(value["hub"], key, card)
    if not isinstance(value, str):
        raise _fail(card, key, "give a file name (problems.jsonl) or hub: {id: ..., split: ...}")
    path = card.parent / value
    return _read_rows(path, key, card), [path]


def _digest(files: list[Path], card_text: bytes) -> str:
    h = hashlib.sha256(card_text)
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def _check_fields(rows: list[dict], fields: list[str], key: str, where: str, card: Path) -> None:
    for i, row in enumerate(rows):
        missing = [f for f in fields if f not in row]
        if missing:
            have = ", ".join(sorted(map(str, row))) or "none"
            raise _fail(
                card, key, f"row {i} of {where} has no field {missing[0]!r} (it has: {have})"
            )


def _check_column_names(rows: list[dict], answer: str, prompt: str, card: Path) -> None:
    """No column is named as an argument TRL gives a reward itself (`TRL_NAMES`; `prompt` only
    as the card's prompt field), nor `answer` unless it is the answer field."""
    for name in dict.fromkeys(str(k) for r in rows for k in r):
        if name == "prompt" and prompt == "prompt":
            continue  # the prompt field itself: it reaches a reward as `prompts`
        if name in TRL_NAMES:
            raise _fail(
                card,
                "data",
                f"column {name!r}: TRL passes a reward function its own {name!r} (keyword "
                f"arguments {', '.join(TRL_NAMES)}), so the column would never reach it; "
                f"rename the column (e.g. {name}_text) in your data"
                + (" and in the card" if name == prompt or f"{{{name}}}" in prompt else ""),
            )
        if name == ANSWER and answer != ANSWER:
            raise _fail(
                card,
                "data",
                f"column 'answer': a reward gets the gold answer (answer: {answer}) as `answer`; "
                f"rename the column, or make it the answer field (answer: answer)",
            )


def _template_fields(prompt: str, card: Path) -> list[str]:
    """The fields a prompt template names: each `{field}` a plain name, formatted with a row's
    value as it is (indexing, attributes, format specs and `{}` raised at the first row)."""
    import string

    try:
        parts = list(string.Formatter().parse(prompt))
    except ValueError as exc:  # a lone brace
        raise _fail(card, "prompt", f"{exc}: write {{{{ and }}}} for a literal brace") from None
    fields = []
    for _, field, spec, conversion in parts:
        if field is None:
            continue
        if not _FIELD.fullmatch(f"{{{field}}}") or spec or conversion:
            shown = field + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
            whole = "{" + shown + "}"
            raise _fail(
                card,
                "prompt",
                f"{brief(whole)}: a template names whole fields, e.g. '{{question}}' (no "
                "indexing, attributes, conversions or format specs); write {{ and }} for a "
                "literal brace",
            )
        fields.append(field)
    if not fields:
        raise _fail(card, "prompt", "a template names fields in braces: '{question}'")
    return fields


def _missing(value: Any) -> bool:
    """A null: JSON's null, an empty parquet cell, NaN."""
    return value is None or (isinstance(value, float) and value != value)


def _check_values(
    rows: list[dict],
    source: Any,
    key: str,
    prompt: str,
    fields: list[str],
    answer: str,
    id_field: str | None,
    card: Path,
) -> dict[str, int]:
    """Every row has its prompt's fields and a gold answer (text or a number: not null, not
    empty), an id of its own where the card names an `id` field, and a problem given twice has
    one answer. Returns the rows' ids (id → row index)."""
    ids: dict[str, int] = {}
    problems: dict[str, tuple[int, str]] = {}
    for i, row in enumerate(rows):
        where = _where(source, i, card)
        for name in [*fields, answer, *([id_field] if id_field else [])]:
            if _missing(row[name]):
                raise _fail(card, key, f"{where}: {name} is null: fill it in, or drop the row")
        gold = row[answer]
        if isinstance(gold, (list, dict)):
            raise _fail(
                card, key, f"{where}: {answer} = {brief(gold)}: give one gold answer, as text"
            )
        if not str(gold).strip():
            raise _fail(card, key, f"{where}: {answer} is empty: give the gold answer")
        if id_field:
            pid = str(row[id_field])
            if pid in ids:
                raise _fail(
                    card,
                    key,
                    f"{where}: {id_field} {brief(pid)} is also "
                    f"{_where(source, ids[pid], card, short=True)}'s: give every row an id of "
                    "its own",
                )
            ids[pid] = i
        question = prompt.format_map(row) if "{" in prompt else str(row[prompt])
        first = problems.setdefault(question, (i, str(gold)))
        if first[1] != str(gold):
            raise _fail(
                card,
                key,
                f"{where}: the problem of {_where(source, first[0], card, short=True)} again, "
                f"with answer {brief(str(gold))} ({_where(source, first[0], card, short=True)}: "
                f"{brief(first[1])}): one problem has one gold answer; fix or drop one",
            )
    return ids


def _where(source: Any, i: int, card: Path, short: bool = False) -> str:
    """Row `i` of a card's `data` or `validation` as one finds it in the file: `p.jsonl line 7`
    (blank lines counted), `p.csv row 7` (after the header), `row 7` of parquet or hub data;
    `short`: without the file's name."""
    name = "" if short or not isinstance(source, str) else f"{source} "
    if isinstance(source, str) and source.endswith(".jsonl"):
        with (card.parent / source).open(encoding="utf-8") as f:
            numbers = [n for n, line in enumerate(f, 1) if line.strip()]
        return f"{name}line {numbers[i]}"
    return f"{name}row {i + 1}"


def _load(card: Path) -> tuple[TaskCard, list[Path]]:
    data = read_yaml(card)
    if not isinstance(data, dict):
        raise CardError(f"task card {card}: write a mapping (name: ..., data: ..., ...)")
    unknown = sorted(set(data) - set(CARD_KEYS))
    if unknown:
        raise _fail(card, unknown[0], f"unknown key; a card has {', '.join(CARD_KEYS)}")
    for key in ("name", "data", "prompt", "answer"):
        if key not in data:
            raise _fail(card, key, "missing (see examples/word-problems/task.yaml)")
    name = str(data["name"])
    if not _NAME.match(name):
        raise _fail(card, "name", f"{brief(name)}: use letters, digits, - and _ (≤ 64)")
    train, files = _rows(data["data"], "data", card)
    val = None
    if data.get("validation") is not None:
        val, more = _rows(data["validation"], "validation", card)
        files += more
    prompt, answer = str(data["prompt"]), str(data["answer"])
    fields = _template_fields(prompt, card) if "{" in prompt else [prompt]
    for rows, where in ((train, "data"), (val, "validation")):
        if rows is not None:  # a field the prompt names: the message names `prompt`
            _check_fields(rows, fields, "prompt", where, card)
    needed = [*fields, answer] + ([str(data["id"])] if data.get("id") else [])
    _check_fields(train, needed, "data", "data", card)
    if val is not None:
        _check_fields(val, needed, "validation", "validation", card)
    _check_column_names([*train, *(val or [])], answer, prompt, card)
    id_field = str(data["id"]) if data.get("id") else None
    ids = _check_values(train, data["data"], "data", prompt, fields, answer, id_field, card)
    if val is not None:
        val_ids = _check_values(
            val, data["validation"], "validation", prompt, fields, answer, id_field, card
        )
        for pid, i in val_ids.items():
            if pid in ids:  # a problem held out and trained on
                raise _fail(
                    card,
                    "validation",
                    f"{_where(data['validation'], i, card)}: {id_field} {brief(pid)} is also "
                    f"data's {_where(data['data'], ids[pid], card, short=True)}: validation "
                    "problems are held out of training; drop one, or give it another id",
                )
    verifier = str(data.get("verifier", "numeric"))
    if verifier not in VERIFIERS and ":" not in verifier:
        raise _fail(
            card,
            "verifier",
            f"{brief(verifier)}: choose one of {', '.join(VERIFIERS)}, or module:function",
        )
    regex = data.get("answer_regex")
    if verifier == "regex":
        if not regex:
            raise _fail(card, "answer_regex", "verifier: regex needs answer_regex: 'Answer: (.*)'")
        try:
            re.compile(str(regex))
        except re.error as exc:
            raise _fail(card, "answer_regex", f"does not compile: {exc}") from exc
    few_shot = data.get("few_shot", 0)
    if not isinstance(few_shot, int) or few_shot < 0:
        raise _fail(card, "few_shot", f"{brief(few_shot)}: give a count ≥ 0 of example rows")
    val_share = data.get("val_share", 0.2)
    if not isinstance(val_share, int | float) or not 0 < val_share < 1:
        raise _fail(card, "val_share", f"{brief(val_share)}: give a share in (0, 1), e.g. 0.2")
    max_tokens = data.get("max_completion_tokens", 256)
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise _fail(card, "max_completion_tokens", f"{brief(max_tokens)}: give tokens ≥ 1")
    system = str(data["system"]) if data.get("system") else None
    gold_format = _gold_format(data, verifier, str(regex) if regex else None, system, card)
    out = TaskCard(
        path=card,
        name=name,
        digest=_digest(files, card.read_bytes()),
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
        _check_golds(out, verifier_of(out))
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
        raise _fail(
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
        raise _fail(card.path, "data", "no training problems (after few_shot examples)")
    if not val:
        key = "validation" if card.val_rows is not None else "data"
        raise _fail(card.path, key, "no validation problems: add rows or a validation file")


def _check_golds(card: TaskCard, verify: Callable[[str, str], bool]) -> None:
    """Every gold, written in the card's `gold_format`, passes `verify`."""
    for p in [*card.problems("train"), *card.problems("test"), *card.examples()]:
        try:
            ok = verify(card.written_answer(p.answer), p.answer)
        except Exception as exc:
            raise _fail(
                card.path,
                "verifier",
                f"raised {type(exc).__name__}: {exc} on problem {p.id}'s own gold answer",
            ) from exc
        if not ok:
            raise _fail(
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
            except Exception:  # noqa: BLE001 - only a hint: the refusal stands either way
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
