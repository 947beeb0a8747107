"""YAML and `--set` values turned into a dataclass's declared field types, with plain errors.

A pydantic model built from the dataclass's type hints does the checking, lax where YAML is
ambiguous ("5e-5" is a float, 8.0 an int) and strict where a value is surely wrong (8.5 is not
an int, NaN and ±inf are refused, true/false is not a count). `RunConfig.__post_init__` calls
`typed_fields`; the message names every wrong field and, where pydantic's wording hides it,
the fix.
"""

from __future__ import annotations

import functools
import typing
from dataclasses import fields
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BeforeValidator, ConfigDict, ValidationError, create_model

from isolab.userinput import brief

if TYPE_CHECKING:
    from _typeshed import DataclassInstance
    from pydantic_core import ErrorDetails


def _no_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("a count, not true/false")
    return value


def _nonempty(value: Any) -> Any:
    if isinstance(value, str) and not value.strip():
        raise ValueError("must not be empty")
    return value


@functools.cache
def _field_model(cls: type[DataclassInstance]):
    """A pydantic model of dataclass `cls`'s fields and types: what turns YAML and `--set`
    values into typed ones (lax: "5e-5" is a float, 8.0 an int; 8.5 is not an int, NaN and ±inf
    are refused, a bool is not a number)."""
    hints = typing.get_type_hints(cls)
    specs: dict[str, Any] = {}
    for f in fields(cls):
        kind = hints[f.name]
        if kind is int:
            kind = Annotated[int, BeforeValidator(_no_bool)]
        elif kind is str:
            kind = Annotated[str, BeforeValidator(_nonempty)]
        specs[f.name] = (kind, ...)
    config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=False)
    return create_model(f"{cls.__name__}Fields", __config__=config, **specs)


def typed_fields(obj: Any) -> dict[str, Any]:
    """Dataclass instance `obj`'s field values checked and converted to their declared types;
    ValueError names every field that is wrong."""
    values = {f.name: getattr(obj, f.name) for f in fields(obj)}
    try:
        return dict(_field_model(type(obj))(**values))
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"])
            problems.append(f"{where} = {brief(error['input'])}: {_plain(error)}")
        raise ValueError("; ".join(problems)) from None


def _plain(error: ErrorDetails) -> str:
    """pydantic's message, with the fix spelled out where it is not obvious."""
    kind, msg = error["type"], error["msg"]
    if kind in ("finite_number",) or (kind == "float_parsing" and "inf" in str(error["input"])):
        return "must be a finite number"
    if kind == "int_from_float":
        return "must be a whole number"
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    if kind == "string_type":
        return f"{msg.lower()}; quote it in YAML"
    return msg[0].lower() + msg[1:]
