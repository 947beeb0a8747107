"""The tables behind the report and comparison pages, runs tables in and polars frames out (no
I/O, no plots): one row per run, the FLOP split per configuration, and two sweeps' frontiers
read at equal compute."""

from __future__ import annotations

import math

import polars as pl

from isolab.frontier.envelope import common_points, read_at
from isolab.table import (
    CONFIG_COLUMNS,
    DERIVED_TYPES,
    SETTING_COLUMNS,
    final_rows,
    run_column,
)
from isolab.verdicts.noise import Noise, noise_model
from isolab.vocab import (
    EVAL_PREFIX,
    FLOPS_LEARNING,
    FLOPS_REWARD,
    FLOPS_SEARCH,
    FLOPS_TOTAL,
    RHO,
    ROLLOUTS,
    STEP,
)

#: The ledger's three parts of training compute (Wilhelm & Kao, arXiv 2607.13389):
#: C_total = C_search + C_learning + C_reward.
FLOP_PARTS = (FLOPS_SEARCH, FLOPS_LEARNING, FLOPS_REWARD)
#: The grid's axes, named first in a configuration's label (IsoCompute Playbook: C = B_p·n·M).
GRID_AXES = ("n", "B_p", "M")
#: Most compute points a comparison reads (C_max, C_max/2, C_max/4, …).
MAX_POINTS = 12


def short(metric: str) -> str:
    """`eval/avg@4` → `avg@4`."""
    return metric.removeprefix(EVAL_PREFIX)


def varying(df: pl.DataFrame, columns: tuple[str, ...] | list[str]) -> list[str]:
    """The `columns` of `df` holding more than one value (a missing value is not one: runs
    logged before a field existed leave it empty)."""
    return [c for c in columns if c in df.columns and df[c].drop_nulls().n_unique() > 1]


def label_columns(df: pl.DataFrame) -> list[str]:
    """The columns that name a configuration: the grid's axes (n, B_p, M) present, then any
    other configuration column that varies (values derived from the axes, such as B or a
    scaled lr, left out)."""
    axes = [c for c in GRID_AXES if c in df.columns]
    rest = [
        c
        for c in varying(df, CONFIG_COLUMNS)
        if c not in axes and c not in DERIVED_TYPES and c not in SETTING_COLUMNS
    ]
    return axes + rest


def config_label(row: dict, columns: list[str]) -> str:
    """`n=4 · B_p=16 · M=1024` for a row holding `columns`."""
    return " · ".join(f"{c}={row[c]}" for c in columns if row.get(c) is not None)


def runs_table(df: pl.DataFrame, metric: str) -> pl.DataFrame:
    """One row per run at its last evaluation: its name, the setting columns that vary, n, B_p,
    M, seed, the final `metric`, ρ, model FLOPs and rollouts (null where the table lacks one).
    Sorted by setting, then configuration, then seed."""
    last = final_rows(df, metric)
    settings = varying(df, SETTING_COLUMNS)
    name = "run_name" if "run_name" in last.columns else run_column(last)
    wanted = {
        "run": name,
        **{c: c for c in settings},
        "n": "n",
        "B_p": "B_p",
        "M": "M",
        "seed": "seed",
        f"final {short(metric)}": metric,
        "ρ": RHO,
        "FLOPs": FLOPS_TOTAL,
        "rollouts": ROLLOUTS,
    }
    cols = [
        (pl.col(src) if src in last.columns else pl.lit(None)).alias(out)
        for out, src in wanted.items()
    ]
    order = [*settings, *(c for c in ("n", "B_p", "M", "seed") if c in last.columns)]
    return last.sort(order or [name]).select(cols)


def flop_split(df: pl.DataFrame, x: str = ROLLOUTS) -> pl.DataFrame:
    """Cumulative search, learning and reward FLOPs per configuration and evaluation step,
    averaged over seeds: the label columns, `step`, `x` and the three parts (a part the
    table lacks counts 0, as a rule-based reward's does). Rows without a total are left out."""
    if FLOPS_TOTAL not in df.columns or x not in df.columns:
        return pl.DataFrame()
    labels = label_columns(df)
    parts = [
        (pl.col(p).fill_null(0.0) if p in df.columns else pl.lit(0.0)).alias(p) for p in FLOP_PARTS
    ]
    rows = df.filter(pl.col(FLOPS_TOTAL).is_finite()).with_columns(parts)
    aggs = [pl.col(c).mean() for c in dict.fromkeys([x, *FLOP_PARTS])]
    return rows.group_by([*labels, STEP]).agg(aggs).sort([*labels, x])


def final_shares(split: pl.DataFrame) -> pl.DataFrame:
    """Each configuration's share of search, learning and reward in its FLOPs at its last
    evaluation (`flop_split`'s rows): the label columns and one fraction per part, summing
    to 1; the learning share is ρ."""
    if split.height == 0:
        return split
    labels = _labels_of(split)
    latest = pl.col(STEP).max().over(labels) if labels else pl.col(STEP).max()
    last = split.filter(pl.col(STEP) == latest)
    total = pl.sum_horizontal(*FLOP_PARTS)
    return last.filter(total > 0).select(
        *labels, *[(pl.col(p) / total).alias(p) for p in FLOP_PARTS]
    )


def representative(split: pl.DataFrame, count: int = 3) -> list[dict]:
    """Up to `count` configurations of `flop_split`'s rows that span it: the smallest n, the
    middle one and the largest (by the label columns' order)."""
    labels = _labels_of(split)
    if not labels:
        return [{}]
    configs = split.select(labels).unique().sort(labels).to_dicts()
    if len(configs) <= count:
        return configs
    picks = sorted({round(i * (len(configs) - 1) / (count - 1)) for i in range(count)})
    return [configs[i] for i in picks]


def _labels_of(split: pl.DataFrame) -> list[str]:
    """The label columns of a `flop_split` frame."""
    return [c for c in split.columns if c in CONFIG_COLUMNS and c not in FLOP_PARTS]


def run_noise(df: pl.DataFrame, metric: str) -> Noise | None:
    """The noise of one run's final `metric` in `df` (one setting): evaluation sampling and
    seed to seed (`isolab.verdicts.noise.noise_model`); None for a metric that is no
    evaluation."""
    if not metric.startswith(EVAL_PREFIX):
        return None
    return noise_model(df, (metric,)).get(metric)


# ---- two sweeps at equal compute ----------------------------------------------------------------
def shared_settings(
    a: pl.DataFrame, b: pl.DataFrame
) -> tuple[list[tuple[str, pl.DataFrame, pl.DataFrame]], list[str]]:
    """The settings (model, task, split, reward) both tables hold, as (label, a's rows, b's
    rows), grouped by the setting columns that vary within either; and labels of the settings
    only one of them holds ("easy (only in A)")."""
    cols = [c for c in SETTING_COLUMNS if c in a.columns and c in b.columns]
    cols = [c for c in cols if a[c].n_unique() > 1 or b[c].n_unique() > 1]
    if not cols:
        return [("", a, b)], []

    def groups(df: pl.DataFrame) -> dict[str, pl.DataFrame]:
        return {
            "-".join(str(v) for v in key): g for key, g in df.group_by(cols, maintain_order=True)
        }

    ga, gb = groups(a), groups(b)
    both = [(k, ga[k], gb[k]) for k in sorted(ga) if k in gb]
    only = [f"{k} (only in A)" for k in sorted(ga) if k not in gb]
    only += [f"{k} (only in B)" for k in sorted(gb) if k not in ga]
    return both, only


def seed_frontier(df: pl.DataFrame, x: str, y: str) -> pl.DataFrame:
    """The frontier f(C) = max over points at ≤ C of the seed-mean `y` (IsoCompute Playbook,
    arXiv 2603.12151), over seed-averaged evaluation points: one lucky seed does not make it.
    Columns: `x`, `frontier`, and the label columns and `step` of the point that holds it."""
    labels = label_columns(df)
    points = (
        df.filter(pl.col(x).is_finite() & pl.col(y).is_finite())
        .group_by([*labels, STEP])
        .agg(pl.col(x).mean(), pl.col(y).mean())
        .sort([x, y], descending=[False, True])
    )
    if points.height == 0:
        return pl.DataFrame(schema={x: pl.Float64, "frontier": pl.Float64})
    points = points.with_columns(pl.col(y).cum_max().alias("frontier"))
    holder = pl.col(y) == pl.col("frontier")
    ids = [*labels, STEP]
    return points.select(
        x,
        "frontier",
        *[pl.when(holder).then(pl.col(c)).otherwise(None).forward_fill().alias(c) for c in ids],
    )


def equal_compute(
    a: pl.DataFrame, b: pl.DataFrame, x: str, y: str, max_points: int = MAX_POINTS
) -> pl.DataFrame:
    """Two sweeps' seed-mean frontiers read at common compute points (`common_points`): per
    point, each one's best configuration there and its `y`, and B − A. Columns: `x`, `A best`,
    `A <y>`, `B best`, `B <y>`, `B − A`."""
    fa, fb = seed_frontier(a, x, y), seed_frontier(b, x, y)
    points = common_points([fa, fb], x, max_points)
    name = short(y)
    schema = {x: pl.Float64, "A best": pl.String, f"A {name}": pl.Float64}
    schema |= {"B best": pl.String, f"B {name}": pl.Float64, "B − A": pl.Float64}
    if not points:
        return pl.DataFrame(schema=schema)
    ra, rb = read_at(fa, x, points), read_at(fb, x, points)
    rows = []
    for row_a, row_b in zip(ra.iter_rows(named=True), rb.iter_rows(named=True), strict=True):
        va, vb = row_a["frontier"], row_b["frontier"]
        diff = vb - va if va is not None and vb is not None else math.nan
        rows.append(
            {
                x: row_a[x],
                "A best": _holder(row_a, label_columns(a)),
                f"A {name}": va,
                "B best": _holder(row_b, label_columns(b)),
                f"B {name}": vb,
                "B − A": diff,
            }
        )
    return pl.DataFrame(rows, schema=schema)


def _holder(row: dict, labels: list[str]) -> str:
    if row.get("frontier") is None:
        return "–"
    return f"{config_label(row, labels) or 'all'} @ step {row.get(STEP)}"


def differences(a: pl.DataFrame, b: pl.DataFrame, limit: int = 8) -> pl.DataFrame:
    """The configuration and setting columns whose values differ between two runs tables, and
    the seeds and runs of each: `column`, `A`, `B` (values listed, at most `limit`)."""

    def values(df: pl.DataFrame, col: str) -> list:
        if col not in df.columns:
            return []
        return df[col].drop_nulls().unique().sort().to_list()

    def shown(vals: list) -> str:
        text = ", ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in vals[:limit])
        return text + (f", … ({len(vals)} values)" if len(vals) > limit else "")

    rows = []
    for col in dict.fromkeys([*SETTING_COLUMNS, *CONFIG_COLUMNS, "seed"]):
        va, vb = values(a, col), values(b, col)
        if (va or vb) and va != vb:
            rows.append({"column": col, "A": shown(va), "B": shown(vb)})
    key_a, key_b = run_column(a), run_column(b)
    rows.append({"column": "runs", "A": str(a[key_a].n_unique()), "B": str(b[key_b].n_unique())})
    return pl.DataFrame(rows, schema={"column": pl.String, "A": pl.String, "B": pl.String})
