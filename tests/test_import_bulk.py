"""`isolab runs import` writes a fresh run's metric history, params and tags straight into
MLflow's tables, and ends it, in one transaction (`isolab.tracking.bulk.write_run`): what it
writes must be what MLflow's own `log_batch` and `set_terminated` write, history, latest values
and end alike, in a real SQLite store."""

from __future__ import annotations

import math

import polars as pl
import pytest
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from isolab.tracking import bulk, mlflow_key, store
from isolab.vocab import EVAL_AVG

#: Points MLflow orders with care: a step logged twice (the later timestamp wins), a larger
#: value at one step and timestamp, an infinity (stored as the largest float), steps out of
#: order, and a key logged once.
POINTS = [
    ("loss", 0, 1.0, 1000),
    ("loss", 2, 0.5, 1002),
    ("loss", 1, 0.7, 1001),
    ("loss", 2, 0.4, 1003),  # step 2 again, later: the latest value
    (mlflow_key(EVAL_AVG), 5, 0.25, 2000),
    (mlflow_key(EVAL_AVG), 5, 0.30, 2000),  # same step and time, larger value: MLflow's latest
    ("grad_norm", 3, math.inf, 1500),
    ("grad_norm", 1, -math.inf, 1400),
    ("once", 7, 3.0, 10),
]


def _frame(points: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(
        points,
        schema={"key": pl.Utf8, "step": pl.Int64, "value": pl.Float64, "timestamp": pl.Int64},
        orient="row",
    )


PARAMS = {f"p{i}": str(i) for i in range(130)}  # more than one `log_batch` takes (100)
TAGS = {"mlflow.note.content": "**n = 4**, seed 0", "isolab.snapshot_rows": "7"}


END = {"status": "KILLED", "end_time": 123_456}


def _stored(client: MlflowClient, run_id: str) -> tuple:
    run = client.get_run(run_id)
    history = {
        key: sorted((m.step, m.timestamp, m.value) for m in client.get_metric_history(run_id, key))
        for key in run.data.metrics
    }
    tags = {k: v for k, v in run.data.tags.items() if k in TAGS}
    end = {"status": run.info.status, "end_time": run.info.end_time}
    return run.data.metrics, history, run.data.params, tags, end


def test_bulk_write_and_its_server_fallback_write_what_log_batch_writes(
    tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The direct write (a database store; here in three transactions of at most 1,000
    points) and the fallback (a server: `log_batch` calls of at most `MAX_METRICS_PER_BATCH`
    points, `MAX_PARAMS_TAGS_PER_BATCH` params, then `set_terminated`) both leave the history,
    latest values, params, tags, status and end time that MLflow's own calls leave; a run
    with nothing logged ends too."""
    client = store.client(tracking_uri)
    exp = client.create_experiment("bulk")
    direct, fallback, mlflows, empty = (client.create_run(exp).info.run_id for _ in range(4))
    points = POINTS + [("curve", s, float(s), 5000 + s) for s in range(2100)]
    assert bulk._sql_store(client) is not None  # the direct path, not the fallback
    monkeypatch.setattr(bulk, "ROWS_PER_TRANSACTION", 1000)
    bulk.write_run(client, direct, PARAMS, TAGS, _frame(points), **END)
    bulk.write_run(client, empty, {}, {}, _frame([]), **END)
    for i in range(0, len(points), 1000):
        client.log_batch(
            mlflows, metrics=[Metric(k, v, t, s) for k, s, v, t in points[i : i + 1000]]
        )
    params = [Param(k, v) for k, v in PARAMS.items()]
    client.log_batch(mlflows, params=params[:100], tags=[RunTag(k, v) for k, v in TAGS.items()])
    client.log_batch(mlflows, params=params[100:])
    client.set_terminated(mlflows, **END)
    calls: list[tuple[int, int]] = []
    log_batch = client.log_batch

    def counted(run_id: str, metrics=(), params=(), tags=()) -> None:
        calls.append((len(metrics), len(params)))
        log_batch(run_id, metrics=metrics, params=params, tags=tags)

    monkeypatch.setattr(client, "log_batch", counted)
    monkeypatch.setattr(bulk, "_sql_store", lambda c: None)
    bulk.write_run(client, fallback, PARAMS, TAGS, _frame(points), **END)
    assert calls == [(0, 100), (0, 30), (1000, 0), (1000, 0), (len(points) - 2000, 0)]
    latest, history, params, tags, end = _stored(client, direct)
    assert (params, tags, end) == (PARAMS, TAGS, END)
    assert _stored(client, direct) == _stored(client, mlflows) == _stored(client, fallback)
    assert latest["loss"] == 0.4 and latest[mlflow_key(EVAL_AVG)] == 0.30
    assert latest["grad_norm"] == pytest.approx(bulk.FLOAT_MAX)
    assert len(history["curve"]) == 2100
    assert _stored(client, empty) == ({}, {}, {}, {}, END)
