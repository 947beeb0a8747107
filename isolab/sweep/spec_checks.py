"""The checks a sweep spec's fields go through (`isolab.sweep.spec.SweepSpec`), each a
`SpecError` that names the field at fault (`axes.n`, `combos[2].num_iterations`) and the fix:
the sweep's name, which `RunConfig` fields may be swept (`AXES`), the axes' and combos' values
typed as their fields (each derived from the base with `RunConfig.with_overrides`, so a value
a config may not take is refused here), and numbers read from YAML.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from isolab.config import RunConfig
from isolab.paths import name_path
from isolab.userinput import brief, cut

# Fields a sweep may not vary: the budget sets M, the spec sets the experiment, seeds and
# checkpoints (`study` is the experiment's name in isolab 0.1 configs).
RESERVED_FIELDS = ("experiment", "study", "M", "seed", "eval_at_rollouts", "eval_every", "extra")
# `B` is not a RunConfig field: sweeping it with `n` fixes the batch and sets B_p = B / n
# (the IsoCompute n–B_p trade-off at fixed B).
AXES = tuple(f.name for f in dataclasses.fields(RunConfig) if f.name not in RESERVED_FIELDS) + (
    "B",
)


class SpecError(ValueError):
    """A sweep spec that cannot be planned; `field` names the offending key (e.g. `axes.n`)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


def yaml_key(key: Any) -> str:
    """A YAML key as a field name in a message, cut short."""
    return cut(key, 60)


def check_name(name: Any) -> None:
    """The sweep's name is its experiment's: text that can become a folder (`name_path`)."""
    if not name:
        raise SpecError("name", "give the sweep a name (its MLflow experiment).")
    if not isinstance(name, str):
        raise SpecError("name", f"{brief(name)}: a name is text; quote it in YAML.")
    try:
        name_path(name, "name")
    except ValueError as exc:
        raise SpecError("name", str(exc).removeprefix("name = ")) from None


def reserved_reason(key: str) -> str:
    return {
        "experiment": "the sweep's `name` is every run's experiment; remove it.",
        "study": "the sweep's `name` is every run's experiment; remove it.",
        "M": "M is set by the budget (budget_rollouts or budget_flops); remove it.",
        "seed": "list seeds in the top-level `seeds`.",
        "eval_at_rollouts": "checkpoints come from eval_points / eval_ratio; remove it.",
        "eval_every": "runs are evaluated at common compute checkpoints; use eval_points.",
    }.get(key, "set by the sweep; remove it.")


def axis_values(name: str, values: Any) -> tuple[Any, ...]:
    """An axis as a tuple (its values are typed by `_check_axes`)."""
    return tuple(values if isinstance(values, list) else [values])


def check_axes(
    axes: dict[str, tuple[Any, ...]], base: RunConfig, combos: bool = False
) -> dict[str, tuple[Any, ...]]:
    """The axes with every value typed as its RunConfig field (YAML's `1e-5` is a float, 2.0
    is the n 2), or SpecError naming the axis. No axes is fine when there are `combos`."""
    if not axes and not combos:
        raise SpecError("axes", "give at least one axis, e.g. axes: {n: [2, 4, 8]}.")
    if "B" in axes and "B_p" in axes:
        raise SpecError("axes.B", "sweep either B (B_p = B / n) or B_p, not both.")
    out: dict[str, tuple[Any, ...]] = {}
    for name, values in axes.items():
        _check_sweepable(f"axes.{yaml_key(name)}", name, "axis")
        if not values:
            raise SpecError(f"axes.{name}", "empty list: give at least one value.")
        values = tuple(_typed(f"axes.{name}", name, v, base) for v in values)
        if len(set(map(repr, values))) != len(values):
            raise SpecError(f"axes.{name}", f"{brief(list(values))} repeats a value.")
        out[name] = values
    return out


def check_combos(
    combos: Any, axes: dict[str, tuple[Any, ...]], base: RunConfig
) -> tuple[dict[str, Any], ...]:
    """The combos with every value typed as its RunConfig field, or SpecError naming the combo
    and field (`combos[2].num_iterations`). Every combo sets the same fields, none an axis."""
    if not isinstance(combos, (list, tuple)):
        raise SpecError("combos", f"{brief(combos)}: give a list of mappings of fields.")
    out: list[dict[str, Any]] = []
    for i, combo in enumerate(combos):
        where = f"combos[{i}]"
        if not isinstance(combo, dict) or not combo:
            raise SpecError(
                where,
                f"{brief(combo)}: give a mapping of the fields that vary together, e.g. "
                "{search_oversample: 8, num_iterations: 1}.",
            )
        first = out[0] if out else combo
        for name in combo:
            field_ = f"{where}.{yaml_key(name)}"
            _check_sweepable(field_, name, "field")
            if name in axes:
                raise SpecError(
                    field_,
                    f"{name} is also an axis: list its values either under axes (crossed with "
                    "every combo) or in every combo, not both.",
                )
            if name not in first:
                raise SpecError(field_, f"not in combos[0]: {_same_fields(first)}")
        for name in first:
            if name not in combo:
                raise SpecError(f"{where}.{yaml_key(name)}", f"missing: {_same_fields(first)}")
        if {"B", "B_p"} <= {*combo, *axes}:
            name = "B" if "B" in combo else "B_p"
            raise SpecError(f"{where}.{name}", "sweep either B (B_p = B / n) or B_p, not both.")
        # in combos[0]'s order, so that a repeat in another order is seen and shown alike
        typed = {k: _typed(f"{where}.{yaml_key(k)}", k, combo[k], base, combo) for k in first}
        for j, other in enumerate(out):
            if repr(other) == repr(typed):
                raise SpecError(where, f"{brief(combo)} repeats combos[{j}]; remove one.")
        out.append(typed)
    return tuple(out)


def _same_fields(first: dict[str, Any]) -> str:
    return (
        f"every combo sets the same fields ({', '.join(map(str, first))}, as combos[0] does); "
        "give each combo all of them, or move a field that does not vary to base."
    )


def _check_sweepable(where: str, name: Any, what: str) -> None:
    """A field a sweep may vary (`AXES`), or SpecError at `where` naming the sweepable ones."""
    if name not in AXES:
        reason = reserved_reason(name) + " " if name in RESERVED_FIELDS else ""
        raise SpecError(where, f"unknown {what}. {reason}Sweepable fields: {', '.join(AXES)}.")


def _typed(
    where: str, name: str, value: Any, base: RunConfig, combo: dict[str, Any] | None = None
) -> Any:
    """`value` typed as RunConfig field `name`: alone, or with the rest of its `combo` where
    only the fields together make sense (`allocation: dynamic` with its `search_oversample`), it
    must make a valid config (n ≥ 2, a known recipe…); `B` is an integer ≥ 2."""
    if name == "B":
        if isinstance(value, bool) or not isinstance(value, int) or value < 2:
            raise SpecError(where, f"B = {brief(value)}: batches are integers ≥ 2.")
        return value
    try:
        return getattr(base.with_overrides(**{name: value}), name)
    except (ValueError, TypeError) as exc:
        together = {k: v for k, v in (combo or {}).items() if k != "B"}
        try:
            return getattr(base.with_overrides(**{**together, name: value}), name)
        except (ValueError, TypeError):
            raise SpecError(where, str(exc)) from exc


def field_in(message: str) -> str:
    """`base.n` for a RunConfig error that starts with `n = 1: …`, else `base`."""
    head = message.split(" ", 1)[0].strip(":=")
    return f"base.{head}" if head in {f.name for f in dataclasses.fields(RunConfig)} else "base"


def number(name: str, value: Any, kind: type) -> int | float:
    """A YAML value read as a finite number of `kind` (int or float), or SpecError naming field
    `name`: YAML reads `1e5` as text and `true` as a bool, neither of which is a budget."""
    if isinstance(value, bool):
        raise SpecError(name, f"{value}: give a number, not true/false.")
    if kind is int and isinstance(value, int):
        return value  # exactly: float() would round a large one
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise SpecError(name, f"{brief(value)} is not a number.") from None
    if not math.isfinite(number):
        raise SpecError(name, f"{brief(value)}: give a finite number.")
    if kind is int:
        if not number.is_integer():
            raise SpecError(name, f"{brief(value)}: give an integer.")
        return int(number)
    return number
