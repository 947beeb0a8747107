"""The runs table's shape: which columns define a configuration, the types MLflow's strings
are cast back to, and the frame helpers every analysis shares (columns present, finite rows,
seed averages, each run's final row, one training pool). Bottom layer (with `config`)."""

from __future__ import annotations

import logging
from dataclasses import fields
from typing import Any, cast

import polars as pl

from isolab.config import ADDED_FIELDS, RunConfig, allocator_of
from isolab.vocab import LR_SUM, RUN_ID, RUN_KEY, STEP

logger = logging.getLogger(__name__)


# ---- the schema ---------------------------------------------------------------------------------
#: Fields that say where a run is logged, how it is seeded, evaluated or executed, not which RL
#: it does; every other field (and the derived B, lr, beta, entropy_coef) defines a
#: configuration, the unit over which seeds are averaged.
BOOKKEEPING_FIELDS = (
    "experiment",
    "seed",
    "generation",
    "gradient_checkpointing",
    "eval_every",
    "eval_at_rollouts",
    "eval_problems",
    "eval_k_samples",
    "eval_ks",
    "eval_sets",
    "pool_size",
    "data_dir",
    "trust_remote_code",
    "extra",
)
#: The values `RunConfig.resolved()` adds to the fields, with their types.
DERIVED_TYPES: dict[str, type] = {
    "B": int,
    "rollouts": int,
    "lr": float,
    "beta": float,
    "entropy_coef": float,
}


def config_columns() -> tuple[str, ...]:
    """The columns of a runs table that define a configuration (see `BOOKKEEPING_FIELDS`)."""
    names = [f.name for f in fields(RunConfig) if f.name not in BOOKKEEPING_FIELDS]
    return tuple(dict.fromkeys([*names, *DERIVED_TYPES]))


def param_types() -> dict[str, type]:
    """The type of every logged param (`RunConfig.resolved()`) that is a scalar number: what
    the runs table casts MLflow's strings back to."""
    out: dict[str, type] = {}
    for f in fields(RunConfig):
        kind = str(f.type).replace(" | None", "")
        if kind in ("int", "float"):
            out[f.name] = int if kind == "int" else float
    return {**out, **DERIVED_TYPES}


#: The polars type of an added field's default, for the types `with_added_defaults` fills.
LITERAL_TYPES: dict[type, type[pl.DataType]] = {int: pl.Int64, float: pl.Float64, str: pl.String}


def with_added_defaults(df: pl.DataFrame) -> pl.DataFrame:
    """Runs logged before a field existed read as having its behaviour-preserving default
    (`isolab.config.ADDED_FIELDS`: e.g. max_grad_norm 1.0, the clip they ran with; allocation
    `uniform`, which a run key also leaves out), so that old and new runs of one configuration
    fall in one group; then `allocation` reads the allocator each run used (`with_allocator`).
    Applies to tables of isolab runs (those with a `run_key` column) only."""
    if RUN_KEY not in df.columns:
        return df
    fills = []
    for name, default in ADDED_FIELDS.items():
        kind = LITERAL_TYPES.get(type(default))
        if kind is None:  # numbers and words only: a flag, a path or a mapping is logged as text
            continue
        value = pl.lit(default, dtype=kind)
        if name in df.columns:  # a column of nulls only (dtype Null) takes the default's type
            target = df.schema[name]
            fill = value if target == pl.Null else value.cast(target)
            fills.append(pl.col(name).fill_null(fill).alias(name))
        else:
            fills.append(value.alias(name))
    return with_allocator(df.with_columns(fills) if fills else df)


def with_allocator(df: pl.DataFrame) -> pl.DataFrame:
    """`allocation` normalised in place to the allocator each run used (`RunConfig.allocator`):
    `dynamic` for `uniform` with `search_oversample` k > 1, how DAPO's filter was asked for
    before `allocation` existed (such runs read `uniform` from `with_added_defaults`) and a
    spelling a config may still use. The two spellings share one run key (`RunConfig.run_key`),
    so they are one configuration: normalised in place rather than in a second column, so that
    they fall in one group (`allocation` is a configuration column) and `allocation` reads
    what a run did."""
    if "allocation" not in df.columns or "search_oversample" not in df.columns:
        return df
    pairs = df.select("allocation", "search_oversample").unique().drop_nulls().iter_rows()
    expr = pl.col("allocation")
    for allocation, k in pairs:
        used = allocator_of(allocation, k)
        if used != allocation:
            same = (pl.col("allocation") == allocation) & (pl.col("search_oversample") == k)
            expr = pl.when(same).then(pl.lit(used)).otherwise(expr)
    return df.with_columns(expr.alias("allocation"))


def with_lr_sum(df: pl.DataFrame) -> pl.DataFrame:
    """`LR_SUM` (Σlr, the learning rate summed over the optimizer steps done) on every row: as
    logged, and for runs that never logged it (runs before it existed, committed snapshots)
    derived as lr · step — isolab's schedule is constant with no warm-up (`isolab.rl.train`),
    so each of the `step` optimizer steps applies the resolved `lr`. A table without `lr` or
    `step` (imported runs) is returned as it is."""
    if "lr" not in df.columns or STEP not in df.columns:
        return df
    derived = pl.col("lr").cast(pl.Float64) * pl.col(STEP).cast(pl.Float64)
    if LR_SUM in df.columns:
        derived = pl.col(LR_SUM).cast(pl.Float64).fill_null(derived)
    return df.with_columns(derived.alias(LR_SUM))


# Columns that define a configuration (everything swept except the seed): those present in a
# frame are what seeds are averaged over.
CONFIG_COLUMNS = config_columns()
# Columns that must hold one value for an n*(C) or trade-off analysis to mean anything.
SETTING_COLUMNS = ("model", "task", "split", "reward")


# ---- frame helpers ------------------------------------------------------------------------------
def as_float(value: object) -> float:
    """A polars aggregate (`Series.min()`, `.max()`, `.mean()`, `.sum()`) of a numeric column as
    a float. polars types these as any Python literal (a date, a string, None, ...); on the
    numeric columns the analyses aggregate it is a number (a None, of an empty or all-null
    column, still raises in `float`, as before)."""
    return float(cast(float, value))


def as_int(value: object) -> int:
    """`as_float`'s twin for an integer column's aggregate."""
    return int(cast(int, value))


def to_polars(df: Any) -> pl.DataFrame:
    """Accept polars (eager or lazy) or pandas; return an eager polars frame."""
    if isinstance(df, pl.LazyFrame):
        return df.collect()
    if isinstance(df, pl.DataFrame):
        return df
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        pd = None
    if pd is not None and isinstance(df, pd.DataFrame):
        return pl.from_pandas(df)
    raise TypeError(f"expected a polars or pandas DataFrame, got {type(df).__name__}")


def require(df: pl.DataFrame, *columns: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(
            f"column(s) {missing} not in the runs table; it has: {sorted(df.columns)}. "
            "Load runs with isolab.tracking.runs.load_runs or pass x=/y= naming existing columns."
        )


def finite_rows(df: pl.DataFrame, *columns: str, context: str = "") -> pl.DataFrame:
    """Rows where every column is finite; logs how many were dropped."""
    cond = pl.lit(True)
    for c in columns:
        cond = cond & pl.col(c).is_not_null() & pl.col(c).cast(pl.Float64).is_finite()
    out = df.filter(cond)
    if out.height < df.height:
        logger.info(
            "%sdropped %d of %d rows with missing or NaN %s",
            f"{context}: " if context else "",
            df.height - out.height,
            df.height,
            ", ".join(columns),
        )
    return out


def id_columns(df: pl.DataFrame) -> list[str]:
    return [c for c in (RUN_KEY, "n", "B_p", "M", STEP, "seed") if c in df.columns]


def check_single_setting(df: pl.DataFrame, what: str) -> None:
    mixed = {
        c: sorted(map(str, df[c].unique().to_list()))
        for c in SETTING_COLUMNS
        if c in df.columns and df[c].n_unique() > 1
    }
    if mixed:
        parts = "; ".join(f"{c} ∈ {v}" for c, v in mixed.items())
        raise ValueError(
            f"{what} compares allocations within one setting, but the table mixes {parts}: "
            "filter it to one value of each first (e.g. df.filter(pl.col('split') == 'easy'))."
        )


def seed_average(df: pl.DataFrame, x: str, y: str) -> pl.DataFrame:
    """Mean of `y` over seeds at each (configuration, step); `x` averaged alongside."""
    cfg = [c for c in CONFIG_COLUMNS if c in df.columns]
    key = [*cfg, STEP] if STEP in df.columns else [*cfg, x]
    aggs = [pl.col(y).mean(), pl.len().alias("n_seeds")]
    if x not in key:
        aggs.append(pl.col(x).mean())
    return df.group_by(key).agg(aggs).sort([*cfg, x])


def run_column(df: pl.DataFrame) -> str:
    return RUN_KEY if RUN_KEY in df.columns else RUN_ID


def with_cell(df: pl.DataFrame) -> pl.DataFrame:
    """`cell`: the configuration of each row (every config column present but the seed)."""
    cols = [c for c in CONFIG_COLUMNS if c in df.columns and df[c].n_unique() > 1]
    if not cols:
        return df.with_columns(cell=pl.lit("all"))
    # a null (a field a run predates) is a value of its own: concat_str would make the whole
    # cell null and lump every run holding one null into one configuration
    parts = [pl.col(c).cast(pl.String).fill_null("∅") for c in cols]
    return df.with_columns(cell=pl.concat_str(parts, separator="|"))


def final_rows(df: pl.DataFrame, metric: str) -> pl.DataFrame:
    """Each run's last evaluation with a finite `metric`."""
    key = run_column(df)
    ok = df.filter(pl.col(metric).is_finite())
    return ok.filter(pl.col(STEP) == pl.col(STEP).max().over(key))


def trained_rows(df: pl.DataFrame, metric: str) -> pl.DataFrame:
    """Evaluations after training began (step > 0): every run starts from the same base, so its
    step-0 evaluation carries no effect of the configuration."""
    return df.filter(pl.col(metric).is_finite() & (pl.col(STEP) > 0))


def _pool(df: pl.DataFrame) -> pl.Expr:
    return pl.col("train_limit") if "train_limit" in df.columns else pl.lit(None, pl.Int64)


def one_pool(frames: list[pl.DataFrame]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Several sweeps' runs tables as one, keeping the runs trained on the first table's pool
    (its `train_limit`, None = every training problem): a run trained on a cut pool answers
    another question. Returns (the combined runs, the runs left out)."""
    if not any(df.height for df in frames):
        raise ValueError("no runs to combine")
    first = frames[0]  # its pool decides, even when it has no runs yet (then: every problem)
    limit = first["train_limit"][0] if "train_limit" in first.columns and first.height else None
    kept, left = [first], []
    for df in frames[1:]:
        if not df.height:
            continue
        same = df.select(_pool(df).eq_missing(pl.lit(limit, pl.Int64))).to_series()
        kept.append(df.filter(same))
        left.append(df.filter(~same))
    combined = pl.concat(kept, how="diagonal_relaxed") if len(kept) > 1 else kept[0]
    out = [d for d in left if d.height]
    rest = pl.concat(out, how="diagonal_relaxed") if out else first.clear()
    return combined, rest
