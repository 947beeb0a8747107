"""The runs table's columns besides metrics and params, shared by the table read from MLflow
(`runs`), its snapshots (`snapshot`) and their import (`importing`): which columns are the
run's bookkeeping, which hold per-problem counts, and so which are params.
"""

from __future__ import annotations

import polars as pl

from isolab.vocab import (
    COUNTS_FILE,
    EVAL_PREFIX,
    EVAL_SET_PREFIX,
    METRIC_PREFIXES,
    RUN_ID,
    RUN_KEY,
    STEP,
)

#: Per-run columns that are not params; `start_time`/`end_time` (ms since the epoch) and the
#: row's `timestamp` (when its step was logged) let an import keep the run's real times.
META_COLUMNS = (
    RUN_KEY,
    RUN_ID,
    "run_name",
    "status",
    "experiment",
    "base_digest",
    "start_time",
    "end_time",
    STEP,
    "timestamp",
)
TIME_COLUMNS = ("start_time", "end_time", "timestamp")
#: Per-problem correct counts of every evaluation (list column; `eval_k_samples` samples each),
#: from each run's `eval/per_problem_counts.json`: what the noise model reads
#: (`isolab.verdicts.noise`), kept in snapshots.
COUNTS = "eval_counts"
COUNTS_ARTIFACT = f"{EVAL_PREFIX}{COUNTS_FILE}"
#: The same for an evaluation set (`RunConfig.eval_sets`): column `eval_counts-<set>`, artifact
#: `eval-<set>/per_problem_counts.json`.


def counts_column(eval_set: str | None = None) -> str:
    """The runs-table column of the per-problem counts of validation (None) or of `eval_set`."""
    return COUNTS if eval_set is None else f"{COUNTS}-{eval_set}"


def counts_artifact(eval_set: str | None = None) -> str:
    """The run artifact that holds them."""
    return COUNTS_ARTIFACT if eval_set is None else f"{EVAL_SET_PREFIX}{eval_set}/{COUNTS_FILE}"


def counts_columns(df: pl.DataFrame) -> dict[str | None, str]:
    """The counts columns of `df`: evaluation set (None for validation) → column."""
    out: dict[str | None, str] = {}
    for c in df.columns:
        if c == COUNTS:
            out[None] = c
        elif c.startswith(f"{COUNTS}-"):
            out[c.removeprefix(f"{COUNTS}-")] = c
    return out


def param_columns(df: pl.DataFrame) -> list[str]:
    """The columns of runs table `df` that are the runs' params: neither bookkeeping, counts nor
    metrics."""
    return [
        c
        for c in df.columns
        if c not in META_COLUMNS
        and c != COUNTS
        and not c.startswith((f"{COUNTS}-", *METRIC_PREFIXES))
    ]
