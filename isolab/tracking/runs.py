"""The runs table: MLflow runs (or a parquet snapshot of them) as one tidy polars DataFrame.

One row per run × evaluation step (a step at which any ``eval/*`` metric exists), with the run's
key and swept params as typed columns and the ``compute/*``, ``flops/*`` and ``eval/*`` metrics
taken at that step (missing → null, e.g. FLOP metrics of old runs). TRL's own metrics are left
out. A snapshot (a folder with ``runs.parquet`` + ``snapshot.json``, `isolab.tracking.snapshot`)
is the same table on disk: `load_runs` reads either; `isolab.tracking.importing` loads a
snapshot back into MLflow so saved results can be browsed in the UI without re-running.

Store conventions (written by `isolab.tracking`): one experiment per sweep; params = the
resolved `RunConfig` as strings; tag ``isolab.run_key``; metrics logged with step = optimizer
step, under MLflow-safe names (``eval/avg_at_4``; MLflow rejects ``@``) that are mapped back to
isolab's names (``eval/avg@4``) here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import polars as pl

from isolab.paths import default_db
from isolab.table import param_types, with_added_defaults, with_lr_sum
from isolab.tracking.columns import (
    COUNTS,
    META_COLUMNS,
    TIME_COLUMNS,
    counts_artifact,
    counts_column,
)
from isolab.tracking.leases import LEASE_KIND
from isolab.tracking.snapshot import SNAPSHOT_FILE, is_snapshot, read_snapshot
from isolab.tracking.store import readable, resolve_uri, search_all_runs, sqlite_path
from isolab.tracking.tags import (
    ANALYSIS_KIND,
    BASE_DIGEST_TAG,
    KIND_TAG,
    RUN_KEY_TAG,
    SWEEP_KIND,
    canonical_key,
)
from isolab.vocab import (
    EVAL_PREFIX,
    EVAL_SET_PREFIX,
    FINISHED,
    METRIC_PREFIXES,
    RUN_ID,
    RUN_KEY,
    STEP,
)

# MLflow stores params as strings; these get their types back (from `RunConfig`'s field types).
PARAM_TYPES = param_types()


def _reading_client(tracking_uri: str | None) -> tuple[Any, str]:
    """MLflow client and URI (`isolab.tracking.store.resolve_uri`); a missing SQLite store is an
    error, rather than a new empty database, and reading creates, migrates and locks nothing
    (`isolab.tracking.store.readable`: a read-only store reads)."""
    from mlflow.tracking import MlflowClient

    explicit = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
    path = sqlite_path(explicit) if explicit else default_db()
    if path is not None and not path.exists():
        raise FileNotFoundError(
            f"no MLflow store at {path}: run a sweep first, point --tracking-uri / "
            "MLFLOW_TRACKING_URI at the store, or pass a snapshot folder (with runs.parquet)."
        )
    uri = resolve_uri(tracking_uri)
    return MlflowClient(tracking_uri=readable(uri)), uri


def load_runs(
    source: str | os.PathLike[str],
    *,
    tracking_uri: str | None = None,
    statuses: Sequence[str] | None = (FINISHED,),
    workers: int = 1,
) -> pl.DataFrame:
    """The runs table of an MLflow experiment or of a snapshot path.

    Args:
        source: a snapshot folder / parquet file, or the name of an MLflow experiment.
        tracking_uri: MLflow store (default: ``$MLFLOW_TRACKING_URI``, else ``runs/mlflow.db``).
        statuses: run statuses to keep (None = all); FINISHED by default.
        workers: threads fetching metric histories: they help against a tracking server (HTTP
            latency), not against SQLite (measured 20 s with 1 thread, 29 s with 4, 100 runs).

    Raises:
        FileNotFoundError / ValueError naming what is missing (no store, no experiment, no runs).
    """
    if is_snapshot(source):
        return with_lr_sum(with_added_defaults(read_snapshot(Path(source), statuses)))
    if isinstance(source, Path) or str(source).endswith(".parquet"):
        raise FileNotFoundError(
            f"snapshot {source} not found (expected a folder with {SNAPSHOT_FILE})"
        )
    return with_lr_sum(
        with_added_defaults(_read_mlflow(str(source), tracking_uri, statuses, workers))
    )


def _experiment(client: Any, name: str, uri: str) -> Any:
    exp = client.get_experiment_by_name(name)
    if exp is None:
        names = sorted(e.name for e in client.search_experiments())
        raise ValueError(
            f"no MLflow experiment named {name!r} at {uri}; experiments there: {names or 'none'}. "
            "Pass an experiment name, a snapshot folder (with runs.parquet), or --tracking-uri."
        )
    return exp


def _training_runs(client: Any, experiment_id: str, statuses: Sequence[str] | None) -> list:
    """The experiment's training runs (not sweep parents, analysis runs or leases) with a
    status in `statuses` (None: any)."""
    return [
        r
        for r in search_all_runs(client, experiment_id)
        if r.data.tags.get(KIND_TAG) not in (ANALYSIS_KIND, SWEEP_KIND, LEASE_KIND)
        and (statuses is None or r.info.status in statuses)
    ]


def load_history(
    name: str, *, tracking_uri: str | None = None, statuses: Sequence[str] | None = (FINISHED,)
) -> pl.DataFrame:
    """Every metric every training run of experiment `name` logged, long: run_key, key (isolab's
    name), step, value, timestamp. What `export_runs(history=...)` keeps beside the runs table."""
    client, uri = _reading_client(tracking_uri)
    exp = _experiment(client, name, uri)
    rows = []
    for r in _training_runs(client, exp.experiment_id, statuses):
        key = r.data.tags.get(RUN_KEY_TAG, r.info.run_id)
        for metric in r.data.metrics:
            for m in client.get_metric_history(r.info.run_id, metric):
                rows.append((key, canonical_key(metric), m.step, m.value, m.timestamp))
    schema = {
        RUN_KEY: pl.String,
        "key": pl.String,
        STEP: pl.Int64,
        "value": pl.Float64,
        "timestamp": pl.Int64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def _read_mlflow(
    name: str, tracking_uri: str | None, statuses: Sequence[str] | None, workers: int
) -> pl.DataFrame:
    client, uri = _reading_client(tracking_uri)
    exp = _experiment(client, name, uri)
    runs = _training_runs(client, exp.experiment_id, statuses)
    if not runs:
        raise ValueError(
            f"experiment {name!r} has no runs with status in {list(statuses or [])}: "
            "nothing to analyse (pass statuses=None to include failed or running runs)."
        )
    jobs = [
        (r.info.run_id, key)
        for r in runs
        for key in r.data.metrics
        if canonical_key(key).startswith(METRIC_PREFIXES)
    ]

    def fetch(job: tuple[str, str]) -> list[tuple[str, str, int, float, int]]:
        run_id, key = job
        return [
            (run_id, canonical_key(key), m.step, m.value, m.timestamp)
            for m in client.get_metric_history(run_id, key)
        ]

    with ThreadPoolExecutor(max_workers=max(workers, 1)) as pool:
        rows = [row for part in pool.map(fetch, jobs) for row in part]
    meta = [
        {
            RUN_ID: r.info.run_id,
            RUN_KEY: r.data.tags.get(RUN_KEY_TAG, r.info.run_id),
            "run_name": r.info.run_name,
            "status": r.info.status,
            "experiment": name,
            "base_digest": r.data.tags.get(BASE_DIGEST_TAG),
            "start_time": r.info.start_time,
            "end_time": r.info.end_time,
            **r.data.params,
        }
        for r in runs
    ]
    table = _assemble(rows, meta)
    counts = _eval_counts(client, [r.info.run_id for r in runs])
    return table.join(counts, on=[RUN_ID, STEP], how="left") if counts.height else table


def _eval_counts(client: Any, run_ids: Sequence[str]) -> pl.DataFrame:
    """(run_id, step, eval_counts[, eval_counts-<set> …]) for every run that logged per-problem
    counts: of validation, and of each evaluation set (`RunConfig.eval_sets`)."""
    import tempfile

    rows: dict[str, list[tuple[str, int, list[int]]]] = {}
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one bar per run
    with tempfile.TemporaryDirectory(prefix="isolab-counts-") as tmp:
        for run_id in run_ids:
            try:
                sets = [
                    f.path.removeprefix(EVAL_SET_PREFIX)
                    for f in client.list_artifacts(run_id)
                    if f.is_dir and f.path.startswith(EVAL_SET_PREFIX)
                ]
            except Exception:  # no artifact store reachable for this run
                sets = []
            for eval_set in [None, *sets]:
                try:
                    path = client.download_artifacts(run_id, counts_artifact(eval_set), tmp)
                except Exception:  # a run without counts (old, or crashed early)
                    continue
                data = json.loads(Path(path).read_text())
                column = rows.setdefault(counts_column(eval_set), [])
                for step, counts in data.get("correct_counts_by_step", {}).items():
                    column.append((run_id, int(step), [int(c) for c in counts]))
    out: pl.DataFrame | None = None
    for column in sorted(rows, key=lambda c: (c != COUNTS, c)):
        schema = {RUN_ID: pl.String, STEP: pl.Int64, column: pl.List(pl.Int64)}
        part = pl.DataFrame(rows[column], schema=schema, orient="row")
        out = part if out is None else out.join(part, on=[RUN_ID, STEP], how="full", coalesce=True)
    return out if out is not None else pl.DataFrame(schema={RUN_ID: pl.String, STEP: pl.Int64})


def _assemble(
    rows: list[tuple[str, str, int, float, int]], meta: list[dict[str, Any]]
) -> pl.DataFrame:
    """Long metric rows + per-run params → the wide runs table."""
    schema = {
        RUN_ID: pl.String,
        "key": pl.String,
        STEP: pl.Int64,
        "value": pl.Float64,
        "timestamp": pl.Int64,
    }
    long = pl.DataFrame(rows, schema=schema, orient="row")
    params = pl.DataFrame(meta, infer_schema_length=None)
    params = params.with_columns(
        [pl.col(c).cast(pl.String) for c in params.columns if params[c].dtype != pl.String]
    )
    params = _cast_params(params).with_columns(
        [pl.col(c).cast(pl.Int64, strict=False) for c in TIME_COLUMNS if c in params.columns]
    )
    # A numeric field no run logged (added to RunConfig later, or None everywhere and so not
    # re-logged by an import) is a null column, so that tables of old and new runs line up.
    params = params.with_columns(
        [
            pl.lit(None, dtype=pl.Int64 if kind is int else pl.Float64).alias(c)
            for c, kind in PARAM_TYPES.items()
            if c not in params.columns
        ]
    )
    if long.height == 0:
        raise ValueError("the runs logged no compute/, flops/ or eval/ metrics")
    # a key logged twice at one step (e.g. a resumed run): the last write wins
    long = long.sort("timestamp").unique(subset=[RUN_ID, STEP, "key"], keep="last")
    wide = long.pivot(on="key", index=[RUN_ID, STEP], values="value", aggregate_function=None)
    logged = long.group_by([RUN_ID, STEP]).agg(pl.col("timestamp").max())
    wide = wide.join(logged, on=[RUN_ID, STEP], how="left")
    eval_cols = [c for c in wide.columns if c.startswith(EVAL_PREFIX)]
    if not eval_cols:
        raise ValueError("no eval/* metric in any run: the runs were never evaluated")
    wide = wide.filter(pl.any_horizontal(pl.col(c).is_not_null() for c in eval_cols))
    table = params.join(wide, on=RUN_ID, how="inner")
    return _order_columns(table).sort([RUN_KEY, STEP])


def _cast_params(df: pl.DataFrame) -> pl.DataFrame:
    casts = []
    for c in df.columns:
        if PARAM_TYPES.get(c) is int:
            casts.append(pl.col(c).cast(pl.Float64, strict=False).cast(pl.Int64, strict=False))
        elif PARAM_TYPES.get(c) is float:
            casts.append(pl.col(c).cast(pl.Float64, strict=False))
    return df.with_columns(casts) if casts else df


def _order_columns(df: pl.DataFrame) -> pl.DataFrame:
    """Bookkeeping, params, then step and timestamp, then the metrics (sorted)."""
    meta = [c for c in META_COLUMNS if c in df.columns and c not in (STEP, "timestamp")]
    metrics = sorted(c for c in df.columns if c.startswith(METRIC_PREFIXES))
    after = [c for c in (STEP, "timestamp") if c in df.columns]
    params = sorted(c for c in df.columns if c not in meta and c not in metrics and c not in after)
    return df.select([*meta, *params, *after, *metrics])
