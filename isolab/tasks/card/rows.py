"""A task card's rows: read from JSONL, CSV, parquet or the hub, and checked field by field,
each refusal naming the card, the key, the row and the fix.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from isolab.hub import hub_reachable
from isolab.tasks.card.taskcard import ANSWER, FIELD, SUFFIXES, TRL_NAMES, CardError, fail
from isolab.userinput import brief


def _read_rows(path: Path, key: str, card: Path) -> list[dict]:
    if not path.is_file():
        raise fail(card, key, f"no file {path}: give a path relative to the card's folder")
    if path.suffix not in SUFFIXES:
        raise fail(card, key, f"{path.name}: give a {', '.join(SUFFIXES)} file")
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
                raise fail(card, key, f"{shown}: column {twice!r} is given twice: keep one")
        else:
            import polars as pl

            rows = pl.read_parquet(path).to_dicts()
    except CardError:
        raise
    except Exception as exc:
        raise fail(card, key, f"{path.name} does not parse: {type(exc).__name__}: {exc}") from exc
    if not all(isinstance(r, dict) for r in rows):
        raise fail(card, key, f"{path.name}: every line must be a JSON object")
    return rows


def _once(card: Path, key: str, where: str) -> Callable[[list[tuple[str, Any]]], dict]:
    """json's `object_pairs_hook` that refuses a key given twice in one object (json keeps the
    last: `{"answer": "1", "answer": "2"}` was read as 2 without a word)."""

    def pairs_once(pairs: list[tuple[str, Any]]) -> dict:
        out: dict = {}
        for name, value in pairs:
            if name in out:
                raise fail(card, key, f"{where}: key {name!r} is given twice: keep one")
            out[name] = value
        return out

    return pairs_once


def _hub_rows(spec: Any, key: str, card: Path) -> tuple[list[dict], list[Path]]:
    """Rows of a `datasets` data set: a hub id (`owner/name`, with `config`, `split` and an
    optional `revision` to pin it), or a local folder of data files (relative to the card), which
    `datasets` reads as it reads a hub repository and whose files then enter the card's digest."""
    if not isinstance(spec, dict) or "id" not in spec:
        raise fail(card, key, "give a file, or hub: {id: owner/name, config: ..., split: ...}")
    unknown = sorted(set(spec) - {"id", "config", "split", "revision"})
    if unknown:
        raise fail(card, key, f"hub: unknown key {unknown[0]!r}; give id, config, split, revision")
    ident, split = str(spec["id"]), str(spec.get("split", "train"))
    if not ident.strip() or Path(ident).is_absolute():  # `/` once walked the whole disk
        raise fail(
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
            raise fail(
                card,
                key,
                f"hub: id {brief(ident)} is neither a folder of data files next to the card nor "
                "a valid hub id: give owner/name (letters, digits, - _ .) or a folder",
            ) from None
    from datasets import load_dataset

    if not files and not hub_reachable() and not _in_datasets_cache(ident):
        raise fail(
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
        raise fail(
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


def source_rows(value: Any, key: str, card: Path) -> tuple[list[dict], list[Path]]:
    if isinstance(value, dict) and "hub" in value:
        return _hub_rows(value["hub"], key, card)
    if not isinstance(value, str):
        raise fail(card, key, "give a file name (problems.jsonl) or hub: {id: ..., split: ...}")
    path = card.parent / value
    return _read_rows(path, key, card), [path]


def digest_of(files: list[Path], card_text: bytes) -> str:
    h = hashlib.sha256(card_text)
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def check_fields(rows: list[dict], fields: list[str], key: str, where: str, card: Path) -> None:
    for i, row in enumerate(rows):
        missing = [f for f in fields if f not in row]
        if missing:
            have = ", ".join(sorted(map(str, row))) or "none"
            raise fail(
                card, key, f"row {i} of {where} has no field {missing[0]!r} (it has: {have})"
            )


def check_column_names(rows: list[dict], answer: str, prompt: str, card: Path) -> None:
    """No column is named as an argument TRL gives a reward itself (`TRL_NAMES`; `prompt` only
    as the card's prompt field), nor `answer` unless it is the answer field."""
    for name in dict.fromkeys(str(k) for r in rows for k in r):
        if name == "prompt" and prompt == "prompt":
            continue  # the prompt field itself: it reaches a reward as `prompts`
        if name in TRL_NAMES:
            raise fail(
                card,
                "data",
                f"column {name!r}: TRL passes a reward function its own {name!r} (keyword "
                f"arguments {', '.join(TRL_NAMES)}), so the column would never reach it; "
                f"rename the column (e.g. {name}_text) in your data"
                + (" and in the card" if name == prompt or f"{{{name}}}" in prompt else ""),
            )
        if name == ANSWER and answer != ANSWER:
            raise fail(
                card,
                "data",
                f"column 'answer': a reward gets the gold answer (answer: {answer}) as `answer`; "
                f"rename the column, or make it the answer field (answer: answer)",
            )


def template_fields(prompt: str, card: Path) -> list[str]:
    """The fields a prompt template names: each `{field}` a plain name, formatted with a row's
    value as it is (indexing, attributes, format specs and `{}` raised at the first row)."""
    import string

    try:
        parts = list(string.Formatter().parse(prompt))
    except ValueError as exc:  # a lone brace
        raise fail(card, "prompt", f"{exc}: write {{{{ and }}}} for a literal brace") from None
    fields = []
    for _, field, spec, conversion in parts:
        if field is None:
            continue
        if not FIELD.fullmatch(f"{{{field}}}") or spec or conversion:
            shown = field + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
            whole = "{" + shown + "}"
            raise fail(
                card,
                "prompt",
                f"{brief(whole)}: a template names whole fields, e.g. '{{question}}' (no "
                "indexing, attributes, conversions or format specs); write {{ and }} for a "
                "literal brace",
            )
        fields.append(field)
    if not fields:
        raise fail(card, "prompt", "a template names fields in braces: '{question}'")
    return fields


def _missing(value: Any) -> bool:
    """A null: JSON's null, an empty parquet cell, NaN."""
    return value is None or (isinstance(value, float) and value != value)


def check_values(
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
        where = row_place(source, i, card)
        for name in [*fields, answer, *([id_field] if id_field else [])]:
            if _missing(row[name]):
                raise fail(card, key, f"{where}: {name} is null: fill it in, or drop the row")
        gold = row[answer]
        if isinstance(gold, (list, dict)):
            raise fail(
                card, key, f"{where}: {answer} = {brief(gold)}: give one gold answer, as text"
            )
        if not str(gold).strip():
            raise fail(card, key, f"{where}: {answer} is empty: give the gold answer")
        if id_field:
            pid = str(row[id_field])
            if pid in ids:
                raise fail(
                    card,
                    key,
                    f"{where}: {id_field} {brief(pid)} is also "
                    f"{row_place(source, ids[pid], card, short=True)}'s: give every row an id of "
                    "its own",
                )
            ids[pid] = i
        question = prompt.format_map(row) if "{" in prompt else str(row[prompt])
        first = problems.setdefault(question, (i, str(gold)))
        if first[1] != str(gold):
            raise fail(
                card,
                key,
                f"{where}: the problem of {row_place(source, first[0], card, short=True)} again, "
                f"with answer {brief(str(gold))} ({row_place(source, first[0], card, short=True)}: "
                f"{brief(first[1])}): one problem has one gold answer; fix or drop one",
            )
    return ids


def row_place(source: Any, i: int, card: Path, short: bool = False) -> str:
    """Row `i` of a card's `data` or `validation` as one finds it in the file: `p.jsonl line 7`
    (blank lines counted), `p.csv row 7` (after the header), `row 7` of parquet or hub data;
    `short`: without the file's name."""
    name = "" if short or not isinstance(source, str) else f"{source} "
    if isinstance(source, str) and source.endswith(".jsonl"):
        with (card.parent / source).open(encoding="utf-8") as f:
            numbers = [n for n, line in enumerate(f, 1) if line.strip()]
        return f"{name}line {numbers[i]}"
    return f"{name}row {i + 1}"
