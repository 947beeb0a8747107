"""`isolab runs import` writes a fresh run's metric history, params and tags straight into
MLflow's tables (`isolab.tracking.bulk`): what it writes must be what MLflow's own `log_batch`
writes, history and latest values alike, in a real SQLite store."""

from __future__ import annotations

import math

import polars as pl
import pytest
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from isolab.tracking import bulk, store

#: Points MLflow orders with care: a step logged twice (the later timestamp wins), a larger
#: value at one step and timestamp, an infinity (stored as the largest float), steps out of
#: order, and a key logged once.
POINTS = [
    ("loss", 0, 1.0, 1000),
    ("loss", 2, 0.5, 1002),
    ("loss", 1, 0.7, 1001),
    ("loss", 2, 0.4, 1003),  # step 2 again, later: the latest value
    ("eval/avg_at_4", 5, 0.25, 2000),
    ("eval/avg_at_4", 5, 0.30, 2000),  # same step and time, larger value: MLflow's latest
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


def _stored(client: MlflowClient, run_id: str) -> tuple[dict, dict, dict, dict]:
    run = client.get_run(run_id)
    history = {
        key: sorted((m.step, m.timestamp, m.value) for m in client.get_metric_history(run_id, key))
        for key in run.data.metrics
    }
    tags = {k: v for k, v in run.data.tags.items() if k in TAGS}
    return run.data.metrics, history, run.data.params, tags


def test_bulk_insert_and_its_server_fallback_write_what_log_batch_writes(
    tracking_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The direct insert (a database store) and the fallback (a server: `log_batch` calls of
    at most `MAX_METRICS_PER_BATCH` points, `MAX_PARAMS_TAGS_PER_BATCH` params) both leave the
    history, latest values, params and tags that MLflow's own `log_batch` leaves."""
    client = store.client(tracking_uri)
    exp = client.create_experiment("bulk")
    direct, fallback, mlflows = (client.create_run(exp).info.run_id for _ in range(3))
    points = POINTS + [("curve", s, float(s), 5000 + s) for s in range(2100)]
    assert bulk._sql_store(client) is not None  # the direct path, not the fallback
    bulk.write_params_tags(client, direct, PARAMS, TAGS)
    bulk.write_metrics(client, direct, _frame(points))
    for i in range(0, len(points), 1000):
        client.log_batch(
            mlflows, metrics=[Metric(k, v, t, s) for k, s, v, t in points[i : i + 1000]]
        )
    params = [Param(k, v) for k, v in PARAMS.items()]
    client.log_batch(mlflows, params=params[:100], tags=[RunTag(k, v) for k, v in TAGS.items()])
    client.log_batch(mlflows, params=params[100:])
    calls: list[int] = []
    log_batch = client.log_batch

    def counted(run_id: str, metrics=(), params=(), tags=()) -> None:
        calls.append(len(metrics))
        log_batch(run_id, metrics=metrics, params=params, tags=tags)

    monkeypatch.setattr(client, "log_batch", counted)
    monkeypatch.setattr(bulk, "_sql_store", lambda c: None)
    bulk.write_metrics(client, fallback, _frame(points))
    assert calls == [1000, 1000, len(points) - 2000]
    bulk.write_params_tags(client, fallback, PARAMS, TAGS)
    latest, history, params, tags = _stored(client, direct)
    assert (params, tags) == (PARAMS, TAGS)
    assert _stored(client, direct) == _stored(client, mlflows) == _stored(client, fallback)
    assert latest["loss"] == 0.4 and latest["eval/avg_at_4"] == 0.30
    assert latest["grad_norm"] == pytest.approx(bulk.FLOAT_MAX)
    assert len(history["curve"]) == 2100
