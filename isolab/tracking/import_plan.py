"""What an import of a snapshot will write, read and checked before anything is written
(`plan_import`): one plan per run (its status, times, tags, params, metric points and
per-problem counts), with every name and value MLflow could refuse midway refused here, with a
ValueError naming the file, the run and the fix (`isolab.tracking.importing` writes the plans).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from isolab.paths import name_path
from isolab.tracking.columns import counts_artifact, counts_columns, param_columns
from isolab.tracking.describe import point_name
from isolab.tracking.snapshot import (
    HISTORY_FILE,
    SNAPSHOT_FILE,
    SNAPSHOT_META,
    read_snapshot,
    read_snapshot_meta,
    snapshot_experiment,
)
from isolab.tracking.tags import BASE_DIGEST_TAG, IMPORTED_FROM_TAG, RUN_KEY_TAG, mlflow_key
from isolab.vocab import FAILED, FINISHED, KILLED, METRIC_PREFIXES, RUN_ID, RUN_KEY, RUNNING, STEP


def plan_import(path: Path, experiment: str | None) -> tuple[list[dict[str, Any]], str]:
    """Everything an import will write, read and checked before anything is created:
    ValueError names the file and the problem (unreadable parquet, missing columns, bad
    values)."""
    from mlflow.entities import Param

    try:
        df = read_snapshot(path, statuses=None)
        history = pl.read_parquet(path / HISTORY_FILE) if (path / HISTORY_FILE).exists() else None
    except ValueError:  # read_snapshot's, naming the file
        raise
    except Exception as exc:  # polars raises several kinds on a bad file
        raise ValueError(f"{path}: not a readable snapshot ({type(exc).__name__}: {exc})") from None
    try:
        meta = read_snapshot_meta(path)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path / SNAPSHOT_META}: not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path / SNAPSHOT_META}: expected a JSON object")
    name = str(experiment or snapshot_experiment(meta) or path.name)
    name_path(name, f"the experiment of {path / SNAPSHOT_META}")
    if STEP not in df.columns or df.height == 0:
        raise ValueError(f"{path / SNAPSHOT_FILE}: no rows with a `step` column: not a runs table")
    params = [c for c in meta.get("params", param_columns(df)) if c in df.columns]
    metrics = [c for c in df.columns if c.startswith(METRIC_PREFIXES)]
    key = RUN_KEY if RUN_KEY in df.columns else RUN_ID
    if key not in df.columns or df[key].null_count() or (df[key].cast(pl.Utf8) == "").any():
        raise ValueError(
            f"{path / SNAPSHOT_FILE}: every row needs a run_key (or run_id) naming its run; "
            "export the snapshot again with `isolab runs export`"
        )
    now = int(time.time() * 1000)
    histories = {}
    if history is not None:
        missing = {RUN_KEY, "key", STEP, "value", "timestamp"} - set(history.columns)
        if missing:
            raise ValueError(
                f"{path / HISTORY_FILE}: no column {', '.join(sorted(missing))}; export the "
                "snapshot again with `isolab runs export`"
            )
        keyed = history.with_columns(pl.col(RUN_KEY).cast(pl.Utf8))
        histories = keyed.partition_by(RUN_KEY, as_dict=True)
    seeds = df["seed"].n_unique() if "seed" in df.columns else 0
    plans = []
    for (run_key,), grp in df.group_by([key], maintain_order=True):
        first = grp.row(0, named=True)
        where = f"{path / SNAPSHOT_FILE}, run {run_key}"
        # a RUNNING run in a snapshot will never finish: it comes back as KILLED
        status = str(first.get("status") or FINISHED)
        status = KILLED if status in (RUNNING, "SCHEDULED") else status
        if status not in (FINISHED, FAILED, KILLED):
            raise ValueError(f"{where}: status {status!r} is not an MLflow run status")
        try:
            steps = [int(s) for s in grp[STEP].to_list()]
            stamps = (
                [int(t) if t is not None else now for t in grp["timestamp"].to_list()]
                if "timestamp" in grp.columns
                else [now] * grp.height
            )
            if history is not None:
                rows = histories.get((str(run_key),), history.clear())
                mframe = _metric_frame(rows.select("key", STEP, "value", "timestamp"))
            else:
                wide = grp.select(pl.Series(STEP, steps), pl.Series("timestamp", stamps), *metrics)
                long = wide.unpivot(metrics, index=[STEP, "timestamp"], variable_name="key")
                mframe = _metric_frame(long.select("key", STEP, "value", "timestamp"))
        except (TypeError, ValueError, pl.exceptions.PolarsError) as exc:
            raise ValueError(f"{where}: {exc}") from None
        tags = {RUN_KEY_TAG: str(run_key), IMPORTED_FROM_TAG: path.name}
        if first.get("base_digest"):
            tags[BASE_DIGEST_TAG] = str(first["base_digest"])
        counts = {  # the per-problem counts back as the run's artifacts, one per set
            counts_artifact(eval_set): by_step
            for eval_set, column in counts_columns(grp).items()
            if (
                by_step := {
                    str(st): [int(x) for x in c]
                    for st, c in zip(steps, grp[column].to_list(), strict=True)
                    if c is not None
                }
            )
        }
        run_params = {p: first[p] for p in params if first[p] is not None}
        run_name = str(first.get("run_name") or run_key)
        plans.append(
            {
                RUN_KEY: str(run_key),
                # the seed in the name when runs differ by it: MLflow's UI shows names
                "run_name": point_name(run_name, run_params.get("seed")) if seeds > 1 else run_name,
                "status": status,
                "start_time": _ms(first.get("start_time")) or min(stamps),
                "end_time": _ms(first.get("end_time")) or max(stamps),
                "tags": tags,
                "params": [Param(p, str(v)) for p, v in run_params.items()],
                "metrics": mframe,
                "rows": grp.height,
                "counts": counts,
            }
        )
    _check_names(path, params, metrics, history)
    _check_values(path, name, plans)
    return plans, name


#: MLflow's runs.name column is VARCHAR(250) (`mlflow.store.tracking.dbmodels.models.SqlRun`):
#: SQLite ignores the size, PostgreSQL and MySQL refuse a longer name.
MAX_RUN_NAME_LENGTH = 250


def _short(text: str, keep: int = 60) -> str:
    """`text` quoted, cut to `keep` characters (a 300-character name in a message)."""
    return repr(text) if len(text) <= keep else f"{text[:keep]!r}…"


def _check_names(
    path: Path, params: list[str], metrics: list[str], history: pl.DataFrame | None
) -> None:
    """ValueError naming the column whose name MLflow would refuse midway through an import:
    over its `MAX_ENTITY_KEY_LENGTH`, or with characters it rejects (its own check)."""
    from mlflow.exceptions import MlflowException
    from mlflow.utils.validation import (
        MAX_ENTITY_KEY_LENGTH,
        _validate_metric_name,
        _validate_param_name,
    )

    file = path / SNAPSHOT_FILE
    # (file, kind, column, MLflow key, MLflow's check of the name; None: a metric's, after
    # `mlflow_key`)
    named: list[tuple[Path, str, str, str, Callable[[str], object] | None]] = [
        (file, "param", c, c, _validate_param_name) for c in params
    ]
    if history is not None:  # the metrics an import writes come from the history then
        keys = history["key"].drop_nulls().unique(maintain_order=True).to_list()
        named += [(path / HISTORY_FILE, "metric", str(k), str(k), None) for k in keys]
    else:
        named += [(file, "metric column", c, c, None) for c in metrics]
    for where, kind, column, key, check in named:
        key = key if check else mlflow_key(key)
        if len(key) > MAX_ENTITY_KEY_LENGTH:
            raise ValueError(
                f"{where}: {kind} {_short(column)} has a name of {len(key)} characters; MLflow "
                f"takes names of at most {MAX_ENTITY_KEY_LENGTH}: rename or drop it"
            )
        try:
            (check or _validate_metric_name)(key)
        except MlflowException as exc:
            raise ValueError(f"{where}: {kind} {_short(column)}: {exc.message}") from None


def _check_values(path: Path, name: str, plans: list[dict[str, Any]]) -> None:
    """ValueError naming the value MLflow would refuse (or cut) midway through an import: a
    param value over `MAX_PARAM_VAL_LENGTH`, a tag (run key, base digest) over
    `MAX_TAG_VAL_LENGTH`, a run name over `MAX_RUN_NAME_LENGTH`, an experiment name over
    `MAX_EXPERIMENT_NAME_LENGTH`, a negative metric timestamp."""
    from mlflow.utils.validation import (
        MAX_EXPERIMENT_NAME_LENGTH,
        MAX_PARAM_VAL_LENGTH,
        MAX_TAG_VAL_LENGTH,
    )

    if len(name) > MAX_EXPERIMENT_NAME_LENGTH:
        raise ValueError(
            f"experiment name {_short(name)} has {len(name)} characters; MLflow takes at most "
            f"{MAX_EXPERIMENT_NAME_LENGTH}: pass a shorter --experiment"
        )
    for plan in plans:
        where = f"{path / SNAPSHOT_FILE}, run {_short(plan[RUN_KEY])}"
        for p in plan["params"]:
            if len(p.value) > MAX_PARAM_VAL_LENGTH:
                raise ValueError(
                    f"{where}: the value of param {_short(p.key)} has {len(p.value)} "
                    f"characters; MLflow keeps at most {MAX_PARAM_VAL_LENGTH} (it would cut it)"
                )
        for tag, value in plan["tags"].items():
            if len(value) > MAX_TAG_VAL_LENGTH:
                raise ValueError(
                    f"{where}: its {tag} has {len(value)} characters; MLflow takes tag values "
                    f"of at most {MAX_TAG_VAL_LENGTH}"
                )
        if len(plan["run_name"]) > MAX_RUN_NAME_LENGTH:
            raise ValueError(
                f"{where}: its run_name has {len(plan['run_name'])} characters; MLflow stores "
                f"run names of at most {MAX_RUN_NAME_LENGTH}"
            )
        if (plan["metrics"]["timestamp"] < 0).any():
            raise ValueError(f"{where}: a metric timestamp is negative; MLflow refuses it")


def _metric_frame(rows: pl.DataFrame) -> pl.DataFrame:
    """A run's metric points as MLflow stores them: `key` (MLflow's name), `step`, `value`,
    `timestamp`; null and NaN values dropped ("not logged at this step"), and points logged
    twice kept once (MLflow's primary key is the whole point)."""
    keys = rows["key"].cast(pl.Utf8).drop_nulls().unique().to_list()
    out = rows.select(
        pl.col("key").cast(pl.Utf8).replace({k: mlflow_key(k) for k in keys}),
        pl.col(STEP).cast(pl.Int64, strict=True),
        pl.col("value").cast(pl.Float64, strict=True),
        pl.col("timestamp").cast(pl.Int64, strict=True),
    ).filter(pl.col("value").is_not_null() & pl.col("value").is_not_nan())
    if out["timestamp"].null_count() or out[STEP].null_count() or out["key"].null_count():
        raise ValueError("a metric point has no key, step or timestamp")
    return out.unique(maintain_order=True)


def _ms(value: Any) -> int | None:
    return int(value) if value is not None and value == value else None
