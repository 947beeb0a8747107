"""Allocators side by side (issue 51): a sweep that varies `allocation` (`RunConfig.allocation`:
uniform, dynamic, early_stop, variance) is read per allocator, and the allocators are compared
at equal FLOPs, never at equal rollouts.

Why FLOPs: the allocators spend different compute per rollout counted. `dynamic` and
`early_stop` generate rollouts (or pilots) that no update uses, `variance` reshapes the batch
and with it the learning FLOPs, and every generated rollout is charged to search
(`flops/search_discarded` is the part no update used). The papers the allocators come from
report savings in rollouts or steps (Knapsack RL arXiv 2509.25849, SARA arXiv 2607.26253);
`flops/total` is the one axis on which their costs are the same thing.

Pure functions, runs tables in (the layout of `isolab.tracking.runs.load_runs`, where
`allocation` already reads the allocator each run used: `isolab.table.with_allocator`) and
polars frames or sentences out.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import polars as pl

from isolab.config import ALLOCATIONS
from isolab.frontier import evidence
from isolab.frontier.envelope import common_points, frontier, read_at
from isolab.frontier.evidence import compute
from isolab.table import SETTING_COLUMNS, as_float, final_rows, finite_rows, seed_average
from isolab.vocab import (
    DEFAULT_Y,
    DISCARDED_SHARE,
    EVAL_PREFIX,
    FLOPS_TOTAL,
    ROLLOUTS,
    ROLLOUTS_DISCARDED,
    STEP,
)

#: The runs table's column of the allocator (`RunConfig.allocation`).
ALLOCATION = "allocation"
#: Allocators that generate nothing they do not train on: their discarded share is 0, also for
#: runs logged before `compute/discarded_share` existed (`isolab.vocab.DISCARDED_SHARE`).
DISCARDS_NOTHING = ("uniform", "variance")
#: Most FLOP points the equal-FLOPs table reads (C_max, C_max/2, …).
MAX_POINTS = 6


def settings(df: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    """(label, frame) per setting (model, task, split, reward) that varies in the table; one
    setting, unlabelled, when none varies."""
    cols = [c for c in SETTING_COLUMNS if c in df.columns and df[c].n_unique() > 1]
    if not cols:
        return [("", df)]
    return [
        ("-".join(str(v) for v in key), grp) for key, grp in df.group_by(cols, maintain_order=True)
    ]


class Group(NamedTuple):
    """The runs of one setting (model, task, split, reward) and, where the setting's runs vary
    `allocation`, one allocator: the unit every per-group analysis reads."""

    #: Names the group in file names and table keys: `easy-early_stop`, `easy`, or "".
    label: str
    #: The setting's label (`settings`), "" when none varies.
    setting: str
    #: The allocator, "" when the setting's runs use one.
    allocator: str
    frame: pl.DataFrame

    @property
    def spoken(self) -> str:
        """The group for a sentence: `easy, allocation early_stop`."""
        allocator = f"allocation {self.allocator}" if self.allocator else ""
        return ", ".join(p for p in (self.setting, allocator) if p)


def allocators(df: pl.DataFrame) -> list[str]:
    """The allocators `df` holds, in `isolab.config.ALLOCATIONS`' order (uniform first); none
    for a table without an `allocation` column."""
    if ALLOCATION not in df.columns:
        return []
    held = set(df[ALLOCATION].drop_nulls().to_list())
    order = {name: i for i, name in enumerate(ALLOCATIONS)}
    return sorted(held, key=lambda a: (order.get(a, len(order)), a))


def varies(df: pl.DataFrame) -> bool:
    """Whether `df` holds runs of more than one allocator."""
    return len(allocators(df)) > 1


def groups(df: pl.DataFrame) -> list[Group]:
    """`settings`, each split per allocator where its runs vary
    `allocation`: n*(C), the trade-off and the recommendation of one allocator are not mixed
    with another's."""
    out = []
    for setting, sdf in settings(df):
        for allocator in allocators(sdf) if varies(sdf) else [""]:
            rows = sdf.filter(pl.col(ALLOCATION) == allocator) if allocator else sdf
            label = "-".join(p for p in (setting, allocator) if p)
            out.append(Group(label, setting, allocator, rows))
    return out


def comparison_axis(df: pl.DataFrame, x: str, budget: float | None = None) -> tuple[str, str]:
    """The compute axis to read `df` on, and a sentence saying why where it is not `x`:
    `flops/total` whenever the runs vary `allocation` (the module's docstring says why), `x`
    otherwise ("" then).

    Raises:
        ValueError: the runs vary `allocation` but carry no FLOP ledger, or a `budget` was
            given in units of another `x` (it would be read as FLOPs).
    """
    names = allocators(df)
    if len(names) < 2:
        return x, ""
    if FLOPS_TOTAL not in df.columns or df[FLOPS_TOTAL].drop_nulls().len() == 0:
        raise ValueError(
            f"the runs vary allocation ({', '.join(names)}), which compare at equal FLOPs only, "
            f"but the table has no {FLOPS_TOTAL}: load runs logged with the FLOP ledger, or "
            "filter the table to one allocation."
        )
    if x != FLOPS_TOTAL and budget is not None:
        raise ValueError(
            f"budget {budget:g} is in units of {x}, but the runs vary allocation "
            f"({', '.join(names)}) and are compared at equal FLOPs: pass x = {FLOPS_TOTAL} "
            "(--x flops/total) and a budget in FLOPs."
        )
    instead = "" if x == FLOPS_TOTAL else f", not {x}"
    return FLOPS_TOTAL, (
        f"allocations differ ({', '.join(names)}): every comparison is at equal FLOPs "
        f"({FLOPS_TOTAL}){instead}, since discarded rollouts and pilots are charged to search "
        "and a reshaped batch changes the learning FLOPs."
    )


def allocator_frontiers(df: pl.DataFrame, y: str = DEFAULT_Y, x: str = FLOPS_TOTAL) -> pl.DataFrame:
    """Each allocator's frontier f(C) = max over points at ≤ C (IsoCompute Playbook, arXiv
    2603.12151) of seed-mean evaluation points, so that one lucky seed does not make it.
    Columns: `allocation`, `x`, `y`, `frontier`, and n, B_p, M, step of the point holding it."""
    parts = []
    for allocator in allocators(df):
        rows = finite_rows(df.filter(pl.col(ALLOCATION) == allocator), x, y, context=allocator)
        if rows.height == 0:
            continue
        front = frontier(seed_average(rows, x, y), x, y)
        parts.append(front.select(pl.lit(allocator).alias(ALLOCATION), pl.all()))
    if not parts:
        return pl.DataFrame(schema={ALLOCATION: pl.String, x: pl.Float64, "frontier": pl.Float64})
    return pl.concat(parts, how="diagonal_relaxed")


def at_equal_flops(
    df: pl.DataFrame, y: str = DEFAULT_Y, x: str = FLOPS_TOTAL, max_points: int = MAX_POINTS
) -> pl.DataFrame:
    """The allocators' frontiers (`allocator_frontiers`) read at the FLOPs every allocator
    reaches: C_max (the smallest of their largest), C_max/2, … (`common_points`). One row per
    point and allocator, best first: `x`, `allocation`, `y` (the frontier there), n, B_p, M,
    step of the point holding it, and `behind`: the best allocator's `y` there minus this one's."""
    fronts = allocator_frontiers(df, y, x)
    per = {a: fronts.filter(pl.col(ALLOCATION) == a) for a in allocators(fronts)}
    points = common_points(list(per.values()), x, max_points) if len(per) > 1 else []
    ids = [c for c in ("n", "B_p", "M", STEP) if c in fronts.columns]
    schema = {x: pl.Float64, ALLOCATION: pl.String, y: pl.Float64, "behind": pl.Float64}
    if not points:
        return pl.DataFrame(schema=schema)
    read = [
        read_at(front.drop(ALLOCATION), x, points).select(
            x, pl.lit(a).alias(ALLOCATION), pl.col("frontier").alias(y), *ids
        )
        for a, front in per.items()
    ]
    table = pl.concat(read, how="diagonal_relaxed")
    behind = pl.col(y).max().over(x) - pl.col(y)
    return table.with_columns(behind.alias("behind")).sort(
        [x, y], descending=[False, True], nulls_last=True
    )


def equal_flops_sentence(
    df: pl.DataFrame, table: pl.DataFrame, y: str = DEFAULT_Y, x: str = FLOPS_TOTAL
) -> str:
    """The allocators at `at_equal_flops`' largest common compute C, in a sentence: each one's
    best configuration there (its runs read at C as `recommend` reads them, interpolated in
    log compute, seed means) with its n and B_p, the best first, and whether each trails it
    beyond the noise of the difference (`WITHIN_SE` standard errors, the noise of one run from
    `budget_noise`): a winner is never named without its noise."""
    if table.height == 0:
        return (
            "allocators at equal FLOPs: no FLOPs that every allocator reaches (their ranges do "
            "not overlap), so none is compared."
        )
    C = as_float(table[x].max())
    at = evidence.runs_at_budget(df, C, x, y, config=(ALLOCATION, *evidence.ALLOCATION))
    noise = evidence.budget_noise(df, at, y)
    best = (
        evidence.with_standard_errors(at, noise, y)
        .group_by(ALLOCATION, maintain_order=True)  # best first: each allocator's best
        .first()
    )
    value, name = f"{y}_at_budget", y.removeprefix(EVAL_PREFIX)
    top = best.row(0, named=True)
    parts = []
    for row in best.iter_rows(named=True):
        config = ", ".join(f"{c} = {row[c]}" for c in ("n", "B_p") if row.get(c) is not None)
        gap = top[value] - row[value]
        margin = evidence.WITHIN_SE * math.hypot(top["se"], row["se"])
        if row[ALLOCATION] == top[ALLOCATION]:
            call = ""
        elif math.isfinite(margin):
            call = f", {gap:.3f} behind, {'within' if gap <= margin else 'beyond'} noise"
        else:
            call = f", {gap:.3f} behind, no noise estimate"
        parts.append(f"{row[ALLOCATION]} with {config} ({name} {row[value]:.3f}{call})")
    return (
        f"allocators at equal FLOPs ({x} = {compute(C)}, the most every allocator reaches; "
        f"seed means): {'; '.join(parts)}; noise: {noise.text}."
    )


def allocator_runs(df: pl.DataFrame, y: str = DEFAULT_Y) -> pl.DataFrame:
    """Per allocator and configuration (n, B_p, M), at each run's last evaluation, averaged
    over seeds: `seeds`, `flops/total`, `y`, the discarded share (`compute/discarded_share`:
    the search FLOPs of rollouts no update used over all FLOPs so far) and the share of
    generated rollouts discarded. 0 for `uniform` and `variance` runs logged before the
    metrics existed (they discard nothing); null for other such runs. Needs `allocation`."""
    last = final_rows(df, y)
    config = [c for c in (ALLOCATION, "n", "B_p", "M") if c in last.columns]
    nothing = pl.col(ALLOCATION).is_in(DISCARDS_NOTHING)

    def logged(column: str) -> pl.Expr:
        value = pl.col(column).cast(pl.Float64) if column in last.columns else pl.lit(None)
        return pl.when(value.is_null() & nothing).then(0.0).otherwise(value)

    rollouts = pl.col(ROLLOUTS).cast(pl.Float64) if ROLLOUTS in last.columns else pl.lit(None)
    rows = last.with_columns(
        logged(DISCARDED_SHARE).alias("discarded share"),
        (logged(ROLLOUTS_DISCARDED) / rollouts).alias("rollouts discarded"),
    )
    aggs = [
        pl.len().alias("seeds"),
        *(pl.col(c).mean() for c in (FLOPS_TOTAL, y) if c in rows.columns),
        pl.col("discarded share").mean(),
        pl.col("rollouts discarded").mean(),
    ]
    order = {a: i for i, a in enumerate(allocators(rows))}
    rank = pl.col(ALLOCATION).replace_strict(order, default=len(order), return_dtype=pl.Int64)
    out = rows.group_by(config).agg(aggs).with_columns(rank.alias("_order"))
    return out.sort(["_order", *config[1:]]).drop("_order")
