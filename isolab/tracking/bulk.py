"""Writing a fresh run's whole metric history, params and tags at once: what makes
`isolab runs import` fast.

MLflow's `log_batch` takes at most 1,000 metrics per call and turns each into an ORM object
(`SqlMetric`), validated and flushed one by one, then updates the run's latest values: ≈ 0.1 ms
of CPU per point. `runs/nstar/cpu/main` (72 runs) holds 1.3 million points (TRL's curves at
every step): imported through `log_batch` in 1,000-point calls it takes ≈ 148 s of CPU, and
≈ 15.5 s here, 9 s of it these inserts and 6 s drawing the runs' figures; 10.7× less wall time
side by side (`benchmarks/import_speed.py`, 2 cores shared with a sweep, 2026-12).
For a database store (`SqlAlchemyStore`: SQLite, PostgreSQL, MySQL) the rows go into MLflow's
own tables with one `executemany` per chunk instead, the run's latest values (`latest_metrics`,
what the runs table shows) computed here as MLflow does: the point with the largest (step,
timestamp, value) of each key. A server store (`http://…`) gets `log_batch` calls, chunked to
its limits. `tests/test_import_bulk.py` holds both to what `log_batch` writes.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl
from mlflow.utils.validation import MAX_METRICS_PER_BATCH, MAX_PARAMS_TAGS_PER_BATCH

from isolab.vocab import STEP

#: Points per transaction: short enough that a concurrent writer of a SQLite store (a sweep's
#: worker) waits well under MLflow's 20 s busy timeout, long enough to amortise the commit.
ROWS_PER_TRANSACTION = 50_000
#: MLflow stores ±inf as the largest finite doubles (`SqlAlchemyStore.sanitize_metric_value`).
FLOAT_MAX = 1.7976931348623157e308


def latest_points(points: pl.DataFrame) -> pl.DataFrame:
    """Each key's latest point: largest step, then timestamp, then value (MLflow's order in
    `_update_latest_metrics_if_necessary`). Columns `key`, `step`, `value`, `timestamp`."""
    return points.sort(STEP, "timestamp", "value").group_by("key", maintain_order=True).last()


def write_run(
    client: Any,
    run_id: str,
    params: dict[str, str],
    tags: dict[str, str],
    points: pl.DataFrame,
    *,
    status: str,
    end_time: int,
    latest: pl.DataFrame | None = None,
) -> None:
    """Write fresh run `run_id` whole and end it: its `params`, `tags` and metric `points`
    (columns `key` as MLflow names them, `step`, `value`, `timestamp`; no NaN, no repeated
    point), then its `status` and `end_time` as `set_terminated` sets them. The run must have
    none of them yet (an import's fresh run: its latest values are inserted, not merged), and
    the caller has checked the values against MLflow's limits; `latest` is `latest_points` of
    `points` when the caller has it already.

    A database store gets it in one transaction, so that the run turns from RUNNING and empty
    to ended and whole at once, for one commit where writing params, tags, points and the end
    apart took four (a SQLite commit is a few fsyncs, ≈ 14 ms each on this project's 2-core
    machine: as long as inserting 2,000 points); a run of over `ROWS_PER_TRANSACTION` points
    has its first points committed before, the run still RUNNING. A server gets `log_batch`
    calls, then `set_terminated`."""
    store = _sql_store(client)
    if store is None:
        _log_params_tags(client, run_id, params, tags)
        _log_metrics(client, run_id, points)
        client.set_terminated(run_id, status=status, end_time=end_time)
        return
    from mlflow.store.tracking.dbmodels.models import (
        SqlLatestMetric,
        SqlMetric,
        SqlParam,
        SqlRun,
        SqlTag,
    )

    rows = _rows(points, run_id)
    # the points before `split` in transactions of their own, the rest with the run's end
    split = max(len(rows) - 1, 0) // ROWS_PER_TRANSACTION * ROWS_PER_TRANSACTION
    for i in range(0, split, ROWS_PER_TRANSACTION):
        with store.ManagedSessionMaker(read_only=False) as session:
            _insert(session, SqlMetric.__table__, COLUMNS, rows[i : i + ROWS_PER_TRANSACTION])
    latest = latest if latest is not None else latest_points(points)
    with store.ManagedSessionMaker(read_only=False) as session:
        _insert(session, SqlMetric.__table__, COLUMNS, rows[split:])
        _insert(session, SqlLatestMetric.__table__, COLUMNS, _rows(latest, run_id))
        for table, values in ((SqlParam.__table__, params), (SqlTag.__table__, tags)):
            items = [(k, v, run_id) for k, v in values.items()]
            _insert(session, table, ("key", "value", "run_uuid"), items)
        runs = SqlRun.__table__
        ended = runs.update().where(runs.c.run_uuid == run_id)
        session.execute(ended.values(status=status, end_time=end_time))


def _sql_store(client: Any) -> Any:
    """The client's `SqlAlchemyStore`, or None (a server, another kind of store)."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    return store if isinstance(store, SqlAlchemyStore) else None


#: The metrics tables' columns, in the order of `_rows`' tuples.
COLUMNS = ("key", "value", "timestamp", STEP, "is_nan", "run_uuid")
#: A DB-API driver's placeholder (PEP 249 `paramstyle`) for the positional styles.
PLACEHOLDERS = {"qmark": "?", "format": "%s", "pyformat": "%s"}


def _rows(points: pl.DataFrame, run_id: str) -> list[tuple]:
    """`points` as rows of MLflow's metrics tables (`COLUMNS`)."""
    return points.select(
        "key",
        pl.col("value").clip(-FLOAT_MAX, FLOAT_MAX),
        "timestamp",
        STEP,
        pl.lit(False).alias("is_nan"),
        pl.lit(run_id).alias("run_uuid"),
    ).rows()


def _insert(session: Any, table: Any, columns: tuple[str, ...], rows: list[tuple]) -> None:
    """One `executemany` of `rows` into `columns` of `table` through the session's
    connection. Straight to the driver: SQLAlchemy's per-row parameter processing cost as
    much as SQLite's insert."""
    if not rows:  # no parameters at all would run the statement once, unbound
        return
    mark = PLACEHOLDERS.get(session.get_bind().dialect.paramstyle)
    if mark is None:  # a named-style driver: SQLAlchemy's own executemany
        session.execute(table.insert(), [dict(zip(columns, row, strict=True)) for row in rows])
        return
    marks = ", ".join([mark] * len(columns))
    sql = f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({marks})"
    session.connection().exec_driver_sql(sql, rows)


def _log_params_tags(
    client: Any, run_id: str, params: dict[str, str], tags: dict[str, str]
) -> None:
    """`params` and `tags` by `log_batch` calls of at most `MAX_PARAMS_TAGS_PER_BATCH` each."""
    from mlflow.entities import Param, RunTag

    items = [Param(k, v) for k, v in params.items()]
    labels = [RunTag(k, v) for k, v in tags.items()]
    for i in range(0, max(len(items), len(labels)), MAX_PARAMS_TAGS_PER_BATCH):
        chunk = slice(i, i + MAX_PARAMS_TAGS_PER_BATCH)
        client.log_batch(run_id, params=items[chunk], tags=labels[chunk])


def _log_metrics(client: Any, run_id: str, points: pl.DataFrame) -> None:
    """`points` by `log_batch` calls of at most `MAX_METRICS_PER_BATCH` each."""
    from mlflow.entities import Metric

    metrics = [
        Metric(key, value if math.isfinite(value) else math.copysign(FLOAT_MAX, value), ts, step)
        for key, step, value, ts in points.select("key", STEP, "value", "timestamp").iter_rows()
    ]
    for i in range(0, len(metrics), MAX_METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=metrics[i : i + MAX_METRICS_PER_BATCH])
