"""The runs table: MLflow runs (or a parquet snapshot of them) as one tidy polars DataFrame.

One row per run × evaluation step (a step at which any ``eval/*`` metric exists), with the run's
key and swept params as typed columns and the ``compute/*``, ``flops/*`` and ``eval/*`` metrics
taken at that step (missing → null, e.g. FLOP metrics of old runs). TRL's own metrics are left
out. A snapshot (a folder with ``runs.parquet`` + ``snapshot.json``) is the same table on disk:
`export_runs` writes it, `load_runs` reads it, `import_runs` loads it back into MLflow so saved
results can be browsed in the UI without re-running.

Store conventions (written by `isolab.tracking`): one experiment per sweep; params = the
resolved `RunConfig` as strings; tag ``isolab.run_key``; metrics logged with step = optimizer
step, under MLflow-safe names (``eval/avg_at_4``; MLflow rejects ``@``) that are mapped back to
isolab's names (``eval/avg@4``) here.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO

import polars as pl

from isolab import tracking
from isolab.paths import default_db, name_path
from isolab.table import param_types
from isolab.tracking import leases
from isolab.vocab import METRIC_PREFIXES

logger = logging.getLogger(__name__)

SNAPSHOT_FILE = "runs.parquet"
SNAPSHOT_META = "snapshot.json"
KIND_TAG = tracking.KIND_TAG  # "sweep" parents and "analysis" runs hold no training results

# MLflow stores params as strings; these get their types back (from `RunConfig`'s field types).
PARAM_TYPES = param_types()
#: Per-run columns that are not params; `start_time`/`end_time` (ms since the epoch) and the
#: row's `timestamp` (when its step was logged) let an import keep the run's real times.
META_COLUMNS = (
    "run_key",
    "run_id",
    "run_name",
    "status",
    "experiment",
    "base_digest",
    "start_time",
    "end_time",
    "step",
    "timestamp",
)
TIME_COLUMNS = ("start_time", "end_time", "timestamp")
#: Every metric of every run, long (run_key, key, step, value, timestamp): TRL's reward, KL and
#: entropy curves too, which the runs table leaves out; written beside runs.parquet.
HISTORY_FILE = "history.parquet"

# MLflow's log_batch limits per request.
_MAX_METRICS, _MAX_PARAMS = 1000, 100


def _client(tracking_uri: str | None, must_exist: bool) -> tuple[Any, str]:
    """MLflow client and URI (`isolab.tracking.resolve_uri`); a missing SQLite store is an error
    when reading, rather than a new empty database, and reading creates, migrates and locks
    nothing (`isolab.tracking.store.readable`: a read-only store reads)."""
    from mlflow.tracking import MlflowClient

    if must_exist:
        explicit = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        path = (
            Path(explicit.removeprefix("sqlite:///"))
            if explicit and explicit.startswith("sqlite:///")
            else None
            if explicit
            else default_db()
        )
        if path is not None and not path.exists():
            raise FileNotFoundError(
                f"no MLflow store at {path}: run a sweep first, point --tracking-uri / "
                "MLFLOW_TRACKING_URI at the store, or pass a snapshot folder (with runs.parquet)."
            )
    uri = tracking.resolve_uri(tracking_uri)
    store = tracking.store.readable(uri) if must_exist else tracking.store.ready(uri)
    return MlflowClient(tracking_uri=store), uri


def is_snapshot(source: str | os.PathLike[str]) -> bool:
    """True when `source` is a snapshot folder (holding runs.parquet) or a .parquet file."""
    p = Path(source)
    return (p.is_dir() and (p / SNAPSHOT_FILE).exists()) or (p.is_file() and p.suffix == ".parquet")


def load_runs(
    source: str | os.PathLike[str],
    *,
    tracking_uri: str | None = None,
    statuses: Sequence[str] | None = ("FINISHED",),
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
        return _read_snapshot(Path(source), statuses)
    if isinstance(source, Path) or str(source).endswith(".parquet"):
        raise FileNotFoundError(
            f"snapshot {source} not found (expected a folder with {SNAPSHOT_FILE})"
        )
    return _read_mlflow(str(source), tracking_uri, statuses, workers)


def _read_snapshot(path: Path, statuses: Sequence[str] | None) -> pl.DataFrame:
    file = path / SNAPSHOT_FILE if path.is_dir() else path
    df = pl.read_parquet(file)
    if statuses is not None and "status" in df.columns:
        df = df.filter(pl.col("status").is_in(list(statuses)))
    return df


def _experiment(client: Any, name: str, uri: str) -> Any:
    exp = client.get_experiment_by_name(name)
    if exp is None:
        names = sorted(e.name for e in client.search_experiments())
        raise ValueError(
            f"no MLflow experiment named {name!r} at {uri}; experiments there: {names or 'none'}. "
            "Pass an experiment name, a snapshot folder (with runs.parquet), or --tracking-uri."
        )
    return exp


def _search_all_runs(client: Any, experiment_id: str) -> list[Any]:
    runs, token = [], None
    while True:
        page = client.search_runs([experiment_id], max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def _training_runs(client: Any, experiment_id: str, statuses: Sequence[str] | None) -> list:
    """The experiment's training runs (not sweep parents, analysis runs or leases) with a
    status in `statuses` (None: any)."""
    return [
        r
        for r in _search_all_runs(client, experiment_id)
        if r.data.tags.get(KIND_TAG) not in ("analysis", "sweep", leases.LEASE_KIND)
        and (statuses is None or r.info.status in statuses)
    ]


def load_history(
    name: str, *, tracking_uri: str | None = None, statuses: Sequence[str] | None = ("FINISHED",)
) -> pl.DataFrame:
    """Every metric every training run of experiment `name` logged, long: run_key, key (isolab's
    name), step, value, timestamp. What `export_runs(history=...)` keeps beside the runs table."""
    client, uri = _client(tracking_uri, must_exist=True)
    exp = _experiment(client, name, uri)
    rows = []
    for r in _training_runs(client, exp.experiment_id, statuses):
        key = r.data.tags.get(tracking.RUN_KEY_TAG, r.info.run_id)
        for metric in r.data.metrics:
            for m in client.get_metric_history(r.info.run_id, metric):
                rows.append((key, tracking.canonical_key(metric), m.step, m.value, m.timestamp))
    schema = {
        "run_key": pl.String,
        "key": pl.String,
        "step": pl.Int64,
        "value": pl.Float64,
        "timestamp": pl.Int64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def _read_mlflow(
    name: str, tracking_uri: str | None, statuses: Sequence[str] | None, workers: int
) -> pl.DataFrame:
    client, uri = _client(tracking_uri, must_exist=True)
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
        if tracking.canonical_key(key).startswith(METRIC_PREFIXES)
    ]

    def fetch(job: tuple[str, str]) -> list[tuple[str, str, int, float, int]]:
        run_id, key = job
        return [
            (run_id, tracking.canonical_key(key), m.step, m.value, m.timestamp)
            for m in client.get_metric_history(run_id, key)
        ]

    with ThreadPoolExecutor(max_workers=max(workers, 1)) as pool:
        rows = [row for part in pool.map(fetch, jobs) for row in part]
    meta = [
        {
            "run_id": r.info.run_id,
            "run_key": r.data.tags.get(tracking.RUN_KEY_TAG, r.info.run_id),
            "run_name": r.info.run_name,
            "status": r.info.status,
            "experiment": name,
            "base_digest": r.data.tags.get(tracking.BASE_DIGEST_TAG),
            "start_time": r.info.start_time,
            "end_time": r.info.end_time,
            **r.data.params,
        }
        for r in runs
    ]
    table = _assemble(rows, meta)
    counts = _eval_counts(client, [r.info.run_id for r in runs])
    return table.join(counts, on=["run_id", "step"], how="left") if counts.height else table


#: Per-problem correct counts of every evaluation (list column; `eval_k_samples` samples each),
#: from each run's `eval/per_problem_counts.json`: what the noise model reads
#: (`isolab.verdicts.noise`), kept in snapshots.
COUNTS = "eval_counts"
COUNTS_ARTIFACT = "eval/per_problem_counts.json"


def _eval_counts(client: Any, run_ids: Sequence[str]) -> pl.DataFrame:
    """(run_id, step, eval_counts) for every run that logged per-problem counts."""
    import tempfile

    rows = []
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one bar per run
    with tempfile.TemporaryDirectory(prefix="isolab-counts-") as tmp:
        for run_id in run_ids:
            try:
                path = client.download_artifacts(run_id, COUNTS_ARTIFACT, tmp)
            except Exception:  # noqa: BLE001 - a run without counts (old, or crashed early)
                continue
            data = json.loads(Path(path).read_text())
            for step, counts in data.get("correct_counts_by_step", {}).items():
                rows.append((run_id, int(step), [int(c) for c in counts]))
    schema = {"run_id": pl.String, "step": pl.Int64, COUNTS: pl.List(pl.Int64)}
    return pl.DataFrame(rows, schema=schema, orient="row")


def _assemble(
    rows: list[tuple[str, str, int, float, int]], meta: list[dict[str, Any]]
) -> pl.DataFrame:
    """Long metric rows + per-run params → the wide runs table."""
    schema = {
        "run_id": pl.String,
        "key": pl.String,
        "step": pl.Int64,
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
    long = long.sort("timestamp").unique(subset=["run_id", "step", "key"], keep="last")
    wide = long.pivot(on="key", index=["run_id", "step"], values="value", aggregate_function=None)
    logged = long.group_by(["run_id", "step"]).agg(pl.col("timestamp").max())
    wide = wide.join(logged, on=["run_id", "step"], how="left")
    eval_cols = [c for c in wide.columns if c.startswith("eval/")]
    if not eval_cols:
        raise ValueError("no eval/* metric in any run: the runs were never evaluated")
    wide = wide.filter(pl.any_horizontal(pl.col(c).is_not_null() for c in eval_cols))
    table = params.join(wide, on="run_id", how="inner")
    return _order_columns(table).sort(["run_key", "step"])


def _cast_params(df: pl.DataFrame) -> pl.DataFrame:
    casts = []
    for c in df.columns:
        if PARAM_TYPES.get(c) is int:
            casts.append(pl.col(c).cast(pl.Float64, strict=False).cast(pl.Int64, strict=False))
        elif PARAM_TYPES.get(c) is float:
            casts.append(pl.col(c).cast(pl.Float64, strict=False))
    return df.with_columns(casts) if casts else df


def _order_columns(df: pl.DataFrame) -> pl.DataFrame:
    meta = [c for c in META_COLUMNS if c in df.columns and c not in ("step", "timestamp")]
    metrics = sorted(c for c in df.columns if c.startswith(METRIC_PREFIXES))
    after = [c for c in ("step", "timestamp") if c in df.columns]
    params = sorted(c for c in df.columns if c not in meta and c not in metrics and c not in after)
    return df.select([*meta, *params, *after, *metrics])


# ------------------------------------------------------------------------------------------
# Snapshots
# ------------------------------------------------------------------------------------------
def export_runs(
    df: pl.DataFrame,
    dest: str | os.PathLike[str],
    *,
    experiment: str | None = None,
    extra_meta: dict[str, Any] | None = None,
    history: pl.DataFrame | None = None,
) -> Path:
    """Write the runs table as a snapshot folder: ``runs.parquet`` + ``snapshot.json`` (and
    ``history.parquet``, every logged metric, when `history` from `load_history` is given).

    The JSON records the experiment, when, the isolab version, the counts and which columns are
    params and which metrics (what `import_runs` needs). Returns the folder.

    Each file is written whole or not at all (`_write_whole`), and never through a symbolic
    link: a folder or file of the snapshot that is a link is a ValueError, before anything is
    written.
    """
    from isolab import __version__

    if df.height == 0:
        raise ValueError("the runs table is empty: nothing to export")
    dest = Path(dest)
    for path in (dest, *(dest / name for name in (SNAPSHOT_FILE, HISTORY_FILE, SNAPSHOT_META))):
        if path.is_symlink():  # it may lead out of the folder, onto a store or a config
            raise ValueError(
                f"{path} is a symbolic link (to {os.readlink(path)}): an export never writes "
                "through one. Remove the link, or export to another folder."
            )
    dest.mkdir(parents=True, exist_ok=True)
    _write_whole(dest / SNAPSHOT_FILE, lambda f: df.write_parquet(f, compression="zstd"))
    if history is not None and history.height:
        _write_whole(dest / HISTORY_FILE, lambda f: history.write_parquet(f, compression="zstd"))
    if experiment is None and "experiment" in df.columns:
        experiment = str(df["experiment"][0])
    key = "run_key" if "run_key" in df.columns else "run_id"
    meta = {
        "experiment": experiment or dest.name,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "isolab_version": __version__,
        "runs": df[key].n_unique(),
        "rows": df.height,
        "params": _param_columns(df),
        "metrics": [c for c in df.columns if c.startswith(METRIC_PREFIXES)],
        "base_digests": base_digests(df),
        **(extra_meta or {}),
    }
    text = json.dumps(meta, indent=2) + "\n"
    _write_whole(dest / SNAPSHOT_META, lambda f: f.write(text.encode()))
    return dest


def _write_whole(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Write `path` whole or not at all: `write` fills a new file beside it, which then replaces
    `path` (`os.replace`: a crash or a full disk leaves the previous file, not half of one). The
    new file is created exclusively, so it is never a link, and a link at `path` is replaced,
    not written through."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())  # on disk before the rename makes it the snapshot
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def base_digests(df: pl.DataFrame) -> dict[str, list[str]]:
    """Model → the distinct base-model digests its runs recorded (empty when none did)."""
    if "base_digest" not in df.columns or "model" not in df.columns:
        return {}
    pairs = df.select("model", "base_digest").drop_nulls().unique().sort("model", "base_digest")
    out: dict[str, list[str]] = {}
    for model, digest in pairs.iter_rows():
        out.setdefault(str(model), []).append(str(digest))
    return out


def digest_mismatches(df: pl.DataFrame) -> list[str]:
    """Sentences for each model whose runs used other base weights than the ones in use now
    (`isolab.models.current_digest`), or recorded none: their results are for another base."""
    from isolab import models

    if "model" not in df.columns:
        return []
    recorded = base_digests(df)
    out = []
    for model in sorted(df["model"].unique().to_list()):
        now = models.current_digest(str(model))
        seen = recorded.get(str(model), [])
        if not seen:
            out.append(
                f"{model}: the runs record no base-model digest (made before isolab "
                "recorded one), so they may come from other weights than those in use"
            )
        elif now is not None and seen != [now]:
            out.append(
                f"{model}: the runs used weights {', '.join(d[:12] for d in seen)}…, the "
                f"model in use is {now[:12]}…: their results are for another base"
            )
    return out


def _param_columns(df: pl.DataFrame) -> list[str]:
    return [
        c
        for c in df.columns
        if c not in META_COLUMNS and c != COUNTS and not c.startswith(METRIC_PREFIXES)
    ]


def snapshot_experiment(meta: dict[str, Any]) -> str | None:
    """The experiment a snapshot came from (`study` in snapshots of isolab 0.1)."""
    return meta.get("experiment") or meta.get("study")


def read_snapshot_meta(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The snapshot's ``snapshot.json`` ({} when absent)."""
    p = Path(path)
    meta = (p if p.is_dir() else p.parent) / SNAPSHOT_META
    return json.loads(meta.read_text()) if meta.exists() else {}


def _chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


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
    snapshot's. Returns (experiment name, runs imported, runs skipped).

    Raises:
        ValueError naming the file, column or value to fix (nothing is written);
        TimeoutError when another writer holds the run keys for over `IMPORT_WAIT_S`.
    """
    path = Path(snapshot)
    if not is_snapshot(path):
        raise FileNotFoundError(f"{path} is not a snapshot: expected a folder with {SNAPSHOT_FILE}")
    plans, name = _import_plan(path, experiment)
    client, uri = _client(tracking_uri, must_exist=False)
    exp_id = tracking.experiment_id(name, uri)
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
        (r.data.tags.get(tracking.RUN_KEY_TAG), r.info.status)
        for r in _search_all_runs(client, exp_id)
    }
    return [
        p
        for p in plans
        if (p["run_key"], p["status"]) not in existing
        and (p["run_key"], "FINISHED") not in existing
    ]


def _import_all(
    client: Any, exp_id: str, name: str, uri: str, path: Path, todo: list[dict[str, Any]]
) -> None:
    """Write the planned runs under the sweep's parent run; on any fault, end and delete every
    run written so far and the parent if an import made it and nothing else is under it."""
    parent = tracking.sweep_parent(name, name, uri, **{"isolab.imported_from": path.name})
    created: list[str] = []
    try:
        for plan in todo:
            _import_run(client, exp_id, parent, plan, created)
    except BaseException:
        _undo(client, exp_id, parent, created)
        raise


def _undo(client: Any, exp_id: str, parent: str, created: list[str]) -> None:
    """End (KILLED: nothing left RUNNING for a sweep to take as live) and delete `created`; then
    the parent, when an import made it and no run is under it. Best effort: the store may be
    what failed."""
    for run_id in created:
        with contextlib.suppress(Exception):
            client.set_terminated(run_id, status="KILLED")
        with contextlib.suppress(Exception):
            client.delete_run(run_id)
    with contextlib.suppress(Exception):
        children = client.search_runs(
            [exp_id], f"tags.`{tracking.PARENT_TAG}` = '{parent}'", max_results=1
        )
        if not children and "isolab.imported_from" in client.get_run(parent).data.tags:
            client.delete_run(parent)


def _import_plan(path: Path, experiment: str | None) -> tuple[list[dict[str, Any]], str]:
    """Everything an import will write, read and checked before anything is created:
    ValueError names the file and the problem (unreadable parquet, missing columns, bad
    values)."""
    from mlflow.entities import Metric, Param

    try:
        df = _read_snapshot(path, statuses=None)
        history = pl.read_parquet(path / HISTORY_FILE) if (path / HISTORY_FILE).exists() else None
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
    if "step" not in df.columns or df.height == 0:
        raise ValueError(f"{path / SNAPSHOT_FILE}: no rows with a `step` column: not a runs table")
    params = [c for c in meta.get("params", _param_columns(df)) if c in df.columns]
    metrics = [c for c in df.columns if c.startswith(METRIC_PREFIXES)]
    key = "run_key" if "run_key" in df.columns else "run_id"
    if key not in df.columns or df[key].null_count() or (df[key].cast(pl.Utf8) == "").any():
        raise ValueError(
            f"{path / SNAPSHOT_FILE}: every row needs a run_key (or run_id) naming its run; "
            "export the snapshot again with `isolab runs export`"
        )
    now = int(time.time() * 1000)
    plans = []
    for (run_key,), grp in df.group_by([key], maintain_order=True):
        first = grp.row(0, named=True)
        where = f"{path / SNAPSHOT_FILE}, run {run_key}"
        # a RUNNING run in a snapshot will never finish: it comes back as KILLED
        status = str(first.get("status") or "FINISHED")
        status = "KILLED" if status in ("RUNNING", "SCHEDULED") else status
        if status not in ("FINISHED", "FAILED", "KILLED"):
            raise ValueError(f"{where}: status {status!r} is not an MLflow run status")
        try:
            steps = [int(s) for s in grp["step"].to_list()]
            stamps = (
                [int(t) if t is not None else now for t in grp["timestamp"].to_list()]
                if "timestamp" in grp.columns
                else [now] * grp.height
            )
            if history is not None:
                rows = history.filter(pl.col("run_key") == str(run_key))
                mlist = [
                    Metric(tracking.mlflow_key(k), float(v), int(t), int(st))
                    for k, st, v, t in rows.select("key", "step", "value", "timestamp").iter_rows()
                    if v is not None and v == v
                ]
            else:
                mlist = [
                    Metric(tracking.mlflow_key(m), float(v), t, st)
                    for m in metrics
                    for st, t, v in zip(steps, stamps, grp[m].to_list(), strict=True)
                    if v is not None and v == v  # skip null and NaN: "not logged at this step"
                ]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None
        tags = {tracking.RUN_KEY_TAG: str(run_key), "isolab.imported_from": path.name}
        if first.get("base_digest"):
            tags[tracking.BASE_DIGEST_TAG] = str(first["base_digest"])
        counts = {}
        if COUNTS in grp.columns:  # the per-problem counts back as the run's artifact
            counts = {
                str(st): [int(x) for x in c]
                for st, c in zip(steps, grp[COUNTS].to_list(), strict=True)
                if c is not None
            }
        plans.append(
            {
                "run_key": str(run_key),
                "run_name": str(first.get("run_name") or run_key),
                "status": status,
                "start_time": _ms(first.get("start_time")) or min(stamps),
                "end_time": _ms(first.get("end_time")) or max(stamps),
                "tags": tags,
                "params": [Param(p, str(first[p])) for p in params if first[p] is not None],
                "metrics": mlist,
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
    named = [(file, "param", c, c, _validate_param_name) for c in params]
    if history is not None:  # the metrics an import writes come from the history then
        keys = history["key"].drop_nulls().unique(maintain_order=True).to_list()
        named += [(path / HISTORY_FILE, "metric", str(k), str(k), None) for k in keys]
    else:
        named += [(file, "metric column", c, c, None) for c in metrics]
    for where, kind, column, key, check in named:
        key = key if check else tracking.mlflow_key(key)
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
        if any(m.timestamp < 0 for m in plan["metrics"]):
            raise ValueError(f"{where}: a metric timestamp is negative; MLflow refuses it")


def _ms(value: Any) -> int | None:
    return int(value) if value is not None and value == value else None


def _import_run(
    client: Any, exp_id: str, parent: str, plan: dict[str, Any], created: list[str]
) -> str:
    """One planned run into the store; its id goes into `created` as soon as it exists (a
    fault while it is written must delete it too). Returns its id."""
    from mlflow.entities import RunTag

    from isolab import __version__

    # the importing process, as on training runs: a run that a killed import leaves RUNNING is
    # then stale to the next sweep on this host (`isolab.sweep.store`), not "running elsewhere"
    holder = {"isolab.host": os.uname().nodename, "isolab.pid": str(os.getpid())}
    tags = {**plan["tags"], **holder, tracking.PARENT_TAG: parent}
    tags.setdefault("isolab.version", __version__)
    run = client.create_run(
        exp_id, run_name=plan["run_name"], start_time=plan["start_time"], tags=tags
    )
    rid = run.info.run_id
    created.append(rid)
    # as few transactions as MLflow's batch limits allow: SQLite commits dominate the cost
    p_chunks = list(_chunks(plan["params"], _MAX_PARAMS)) or [[]]
    m_chunks = list(_chunks(plan["metrics"], _MAX_METRICS)) or [[]]
    for i in range(max(len(p_chunks), len(m_chunks))):
        client.log_batch(
            rid,
            params=list(p_chunks[i]) if i < len(p_chunks) else [],
            metrics=list(m_chunks[i]) if i < len(m_chunks) else [],
            tags=[RunTag("isolab.snapshot_rows", str(plan["rows"]))] if i == 0 else [],
        )
    if plan["counts"]:
        client.log_dict(rid, {"correct_counts_by_step": plan["counts"]}, COUNTS_ARTIFACT)
    client.set_terminated(rid, status=plan["status"], end_time=plan["end_time"])
    return rid
