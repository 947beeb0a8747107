"""Importing a snapshot into an MLflow store: `import_runs`, and the checks that let it write
all of a snapshot or none of it.

Why all or nothing: the store is what sweeps and imports trust. A sweep skips a run key
FINISHED there, and an import skips one already imported; a run left half written (some
metrics, no counts) would be read as complete and never redone. So every value MLflow could
refuse is checked before the first write (`_import_plan`, `_check_names`, `_check_values`),
and a fault midway deletes what the import wrote (`_undo`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from isolab.paths import name_path
from isolab.tracking import leases, store
from isolab.tracking.bulk import latest_points, write_run
from isolab.tracking.columns import counts_artifact, counts_columns, param_columns
from isolab.tracking.describe import NOTE_TAG, point_name, run_note
from isolab.tracking.parents import finish_parent, sweep_parent
from isolab.tracking.run_figure import FIGURE_FILE, RunFigures
from isolab.tracking.snapshot import (
    HISTORY_FILE,
    SNAPSHOT_FILE,
    SNAPSHOT_META,
    is_snapshot,
    read_snapshot,
    read_snapshot_meta,
    snapshot_experiment,
)
from isolab.tracking.tags import (
    BASE_DIGEST_TAG,
    HOST_TAG,
    IMPORTED_FROM_TAG,
    PARENT_TAG,
    PID_TAG,
    RUN_KEY_TAG,
    mlflow_key,
)
from isolab.tracking.views import run_url
from isolab.vocab import FAILED, FINISHED, KILLED, METRIC_PREFIXES, RUN_ID, RUN_KEY, RUNNING, STEP

logger = logging.getLogger(__name__)

#: How long an import waits for another writer holding some of its run keys (another import,
#: a sweep training one of them) to let go.
IMPORT_WAIT_S = 600.0


def import_runs(
    snapshot: str | os.PathLike[str],
    *,
    experiment: str | None = None,
    tracking_uri: str | None = None,
) -> tuple[str, int, int]:
    """Load a snapshot back into MLflow: one run per run key, each a child of the sweep's
    parent run, with its params, its metrics at their steps and timestamps (every metric of
    ``history.parquet`` when the snapshot has one, TRL's curves included), its per-problem
    counts, and its real start and end times.

    All or nothing: the snapshot is read and checked whole, against MLflow's limits on names
    and values too, before anything is written; a store fault midway (a full disk, a lost
    server) ends and deletes every run the import created, the one being written included, and
    the sweep parent it made. Exactly once: the run keys it writes are leased in the store for
    the whole import (`isolab.tracking.leases`), so a concurrent import of the same runs, or a
    sweep training one of them, waits for the other writer and then finds its runs there; a
    run key already FINISHED in the experiment is skipped. The experiment defaults to the
    snapshot's. Each run gets its description and FLOP-split figure (`run_figure`), and the
    sweep's parent its duration, points table and description (`parents.finish_parent`).
    Returns (experiment name, runs imported, runs skipped).

    Raises:
        ValueError naming the file, column or value to fix (nothing is written);
        TimeoutError when another writer holds the run keys for over `IMPORT_WAIT_S`.
    """
    path = Path(snapshot)
    if not is_snapshot(path):
        raise FileNotFoundError(f"{path} is not a snapshot: expected a folder with {SNAPSHOT_FILE}")
    plans, name = _import_plan(path, experiment)
    uri = store.resolve_uri(tracking_uri)
    client = store.client(uri)
    exp_id = store.experiment_id(name, uri)
    _undo_killed_imports(client, exp_id)
    todo = _not_there(client, exp_id, plans)
    if todo:
        keys = [p["run_key"] for p in todo]
        label = f"lease: import of {path.name}"
        with leases.lease(name, keys, uri, wait_s=IMPORT_WAIT_S, label=label) as held:
            if not held:
                raise TimeoutError(
                    f"another writer (an import, or a sweep training them) has held run keys "
                    f"of {path.name} in {name!r} for over {IMPORT_WAIT_S:.0f} s: nothing was "
                    "imported. Import again when it ends; if its process is gone on another "
                    "machine, `isolab sweep run <spec> --reclaim-remote` ends its lease."
                )
            todo = _not_there(client, exp_id, todo)  # what that writer wrote meanwhile
            if todo:
                _import_all(client, exp_id, name, uri, path, todo)
    skipped = len(plans) - len(todo)
    logger.info("imported %d run(s) into %r, skipped %d already there", len(todo), name, skipped)
    return name, len(todo), skipped


def _not_there(client: Any, exp_id: str, plans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The planned runs the experiment lacks: no FINISHED run of the key, nor one with the
    planned status."""
    existing = {
        (r.data.tags.get(RUN_KEY_TAG), r.info.status) for r in store.search_all_runs(client, exp_id)
    }
    return [
        p
        for p in plans
        if (p["run_key"], p["status"]) not in existing and (p["run_key"], FINISHED) not in existing
    ]


def _import_all(
    client: Any, exp_id: str, name: str, uri: str, path: Path, todo: list[dict[str, Any]]
) -> None:
    """Write the planned runs under the sweep's parent run; on any fault, end and delete every
    run written so far and the parent if an import made it and nothing else is under it."""
    start = min(p["start_time"] for p in todo)
    parent = sweep_parent(name, name, uri, start, **{IMPORTED_FROM_TAG: path.name})
    created: list[str] = []
    figures = RunFigures()
    try:
        for plan in todo:
            _import_run(client, exp_id, parent, plan, created, figures)
    except BaseException as exc:
        _undo(client, exp_id, parent, created)
        problem = _write_fault(exc)
        if problem is None:
            raise
        raise ImportStopped(
            f"the import of {path} stopped partway through its {len(todo)} runs: {problem}. "
            "The runs it wrote are deleted; free space (or make the store writable) and import "
            "again"
        ) from exc
    finish_parent(name, parent, uri)


class ImportStopped(ValueError):
    """The store or its artifacts could not be written partway (a full disk): the runs written
    are deleted, and the message says what failed and the fix."""


def _write_fault(exc: BaseException) -> str | None:
    """What stopped a write, in words, when it is the disk or the file system (ENOSPC, EROFS,
    SQLite's `database or disk is full`); None for anything else."""
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else "")
    text = str(exc)
    for sign in ("database or disk is full", "No space left on device", "readonly database"):
        if sign in text:
            return f"the store answered `{sign}`"
    return None


def _undo(client: Any, exp_id: str, parent: str, created: list[str]) -> None:
    """End (KILLED: nothing left RUNNING for a sweep to take as live) and delete `created`; then
    the parent, when an import made it and no run is under it. Best effort: the store may be
    what failed."""
    for run_id in created:
        with contextlib.suppress(Exception):
            client.set_terminated(run_id, status=KILLED)
        with contextlib.suppress(Exception):
            client.delete_run(run_id)
    with contextlib.suppress(Exception):
        children = client.search_runs([exp_id], f"tags.`{PARENT_TAG}` = '{parent}'", max_results=1)
        if not children and IMPORTED_FROM_TAG in client.get_run(parent).data.tags:
            client.delete_run(parent)


def _undo_killed_imports(client: Any, exp_id: str) -> None:
    """Delete the runs an import killed outright (SIGKILL, a lost machine) left half written:
    RUNNING, tagged `IMPORTED_FROM_TAG`, their importer (`HOST_TAG`, `PID_TAG`) a process of
    this host that is gone. What `_undo` would have done had the import lived: an import writes
    all of a run or none of it, so the next one writes them again, once (without this, a key
    had a RUNNING run and the re-imported one)."""
    from isolab.tracking.leases import process_alive

    host = os.uname().nodename
    filt = f"attributes.status = '{RUNNING}' and tags.`{IMPORTED_FROM_TAG}` != ''"
    for run in client.search_runs([exp_id], filt, max_results=50000):
        tags = run.data.tags
        pid = tags.get(PID_TAG, "")
        # no start time to check the pid against: an imported run starts when it first did
        if tags.get(HOST_TAG) != host or (pid.isdigit() and process_alive(int(pid))):
            continue  # another host's import cannot be checked; a live one is writing it
        logger.info("run %s: half written by a killed import: deleted", run.info.run_id)
        _undo(client, exp_id, tags.get(PARENT_TAG, ""), [run.info.run_id])


def _import_plan(path: Path, experiment: str | None) -> tuple[list[dict[str, Any]], str]:
    """Everything an import will write, read and checked before anything is created:
    ValueError names the file and the problem (unreadable parquet, missing columns, bad
    values)."""
    from mlflow.entities import Param

    try:
        df = read_snapshot(path, statuses=None)
        history = pl.read_parquet(path / HISTORY_FILE) if (path / HISTORY_FILE).exists() else None
    except ValueError:  # read_snapshot's, naming the file
        raise
    except Exception as exc:  # noqa: BLE001 - polars raises several kinds on a bad file
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
                "run_key": str(run_key),
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
        where = f"{path / SNAPSHOT_FILE}, run {_short(plan['run_key'])}"
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


def _import_run(
    client: Any,
    exp_id: str,
    parent: str,
    plan: dict[str, Any],
    created: list[str],
    figures: RunFigures,
) -> str:
    """One planned run into the store, with its description and figure; its id goes into
    `created` as soon as it exists (a fault while it is written must delete it too). Returns
    its id."""
    from isolab import __version__

    # the importing process, as on training runs: a run that a killed import leaves RUNNING is
    # then stale to the next sweep on this host (`isolab.sweep.resume`), not "running elsewhere"
    holder = {HOST_TAG: os.uname().nodename, PID_TAG: str(os.getpid())}
    tags = {**plan["tags"], **holder, PARENT_TAG: parent}
    tags.setdefault("isolab.version", __version__)
    run = client.create_run(
        exp_id, run_name=plan["run_name"], start_time=plan["start_time"], tags=tags
    )
    rid = run.info.run_id
    created.append(rid)
    points = plan["metrics"]
    last = latest_points(points)
    latest = {k: v for k, _, v, _ in last.iter_rows()}
    params = {p.key: p.value for p in plan["params"]}
    note = run_note(params, latest, run_url("", exp_id, rid, FIGURE_FILE))
    extra = {"isolab.snapshot_rows": str(plan["rows"]), NOTE_TAG: note}
    # its files first, then the rest and its end at once: a run ended is a run whole
    upload_files(client, rid, plan, figures)
    write_run(
        client,
        rid,
        params,
        extra,
        points,
        status=plan["status"],
        end_time=plan["end_time"],
        latest=last,
    )
    return rid


def upload_files(client: Any, run_id: str, plan: dict[str, Any], figures: RunFigures) -> None:
    """A planned run's files in one upload: its per-problem counts and its FLOP-split figure."""
    with tempfile.TemporaryDirectory(prefix="isolab-import-") as tmp:
        for artifact, by_step in plan["counts"].items():
            counts = Path(tmp, artifact)
            counts.parent.mkdir(parents=True)
            counts.write_text(json.dumps({"correct_counts_by_step": by_step}))
        figures.save(plan["metrics"], Path(tmp), plan["run_name"])
        client.log_artifacts(run_id, tmp)
