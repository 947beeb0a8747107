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

import json
import logging
import os
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import polars as pl

from isolab import tracking
from isolab.config import param_types
from isolab.paths import default_db

logger = logging.getLogger(__name__)

SNAPSHOT_FILE = "runs.parquet"
SNAPSHOT_META = "snapshot.json"
# cumulative model FLOPs (flops/), hardware FLOPs with recompute (flops_hw/), compute/, eval/;
# per-step values (flops_step/) and TRL's own metrics are left out
METRIC_PREFIXES = ("compute/", "flops/", "flops_hw/", "eval/")
KIND_TAG = "isolab.kind"  # "analysis" on runs that hold figures, not training results

# MLflow stores params as strings; these get their types back (from `RunConfig`'s field types).
PARAM_TYPES = param_types()
META_COLUMNS = ("run_key", "run_id", "run_name", "status", "experiment", "base_digest", "step")

# MLflow's log_batch limits per request.
_MAX_METRICS, _MAX_PARAMS = 1000, 100


def _client(tracking_uri: str | None, must_exist: bool) -> tuple[Any, str]:
    """MLflow client and URI (`isolab.tracking.resolve_uri`); a missing SQLite store is an error
    when reading, rather than a new empty database."""
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
    return MlflowClient(tracking_uri=tracking.store.ready(uri)), uri


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


def _read_mlflow(
    name: str, tracking_uri: str | None, statuses: Sequence[str] | None, workers: int
) -> pl.DataFrame:
    client, uri = _client(tracking_uri, must_exist=True)
    exp = _experiment(client, name, uri)
    runs = [
        r
        for r in _search_all_runs(client, exp.experiment_id)
        if r.data.tags.get(KIND_TAG) != "analysis"
        and (statuses is None or r.info.status in statuses)
    ]
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
    params = _cast_params(params)
    if long.height == 0:
        raise ValueError("the runs logged no compute/, flops/ or eval/ metrics")
    # a key logged twice at one step (e.g. a resumed run): the last write wins
    long = long.sort("timestamp").unique(subset=["run_id", "step", "key"], keep="last")
    wide = long.pivot(on="key", index=["run_id", "step"], values="value", aggregate_function=None)
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
    meta = [c for c in META_COLUMNS if c in df.columns and c != "step"]
    metrics = sorted(c for c in df.columns if c.startswith(METRIC_PREFIXES))
    params = sorted(c for c in df.columns if c not in meta and c not in metrics and c != "step")
    return df.select([*meta, *params, "step", *metrics])


# ------------------------------------------------------------------------------------------
# Snapshots
# ------------------------------------------------------------------------------------------
def export_runs(
    df: pl.DataFrame,
    dest: str | os.PathLike[str],
    *,
    experiment: str | None = None,
    extra_meta: dict[str, Any] | None = None,
) -> Path:
    """Write the runs table as a snapshot folder: ``runs.parquet`` + ``snapshot.json``.

    The JSON records the experiment, when, the isolab version, the counts and which columns are
    params and which metrics (what `import_runs` needs). Returns the folder.
    """
    from isolab import __version__

    if df.height == 0:
        raise ValueError("the runs table is empty: nothing to export")
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    df.write_parquet(dest / SNAPSHOT_FILE, compression="zstd")
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
    (dest / SNAPSHOT_META).write_text(json.dumps(meta, indent=2) + "\n")
    return dest


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


def import_runs(
    snapshot: str | os.PathLike[str],
    *,
    experiment: str | None = None,
    tracking_uri: str | None = None,
) -> tuple[str, int, int]:
    """Load a snapshot back into MLflow: one run per run key, params, metrics per step.

    Idempotent: a run key already present (FINISHED) in the experiment is skipped. The experiment
    defaults to the snapshot's. Returns (experiment name, runs imported, runs skipped).
    """
    from mlflow.entities import Metric, Param, RunTag

    from isolab import __version__

    path = Path(snapshot)
    if not is_snapshot(path):
        raise FileNotFoundError(f"{path} is not a snapshot: expected a folder with {SNAPSHOT_FILE}")
    df = _read_snapshot(path, statuses=None)
    meta = read_snapshot_meta(path)
    name = experiment or snapshot_experiment(meta) or path.name
    params = [c for c in meta.get("params", _param_columns(df)) if c in df.columns]
    metrics = [c for c in df.columns if c.startswith(METRIC_PREFIXES)]
    key = "run_key" if "run_key" in df.columns else "run_id"

    client, uri = _client(tracking_uri, must_exist=False)
    exp_id = tracking.experiment_id(name, uri)
    existing = {
        (r.data.tags.get(tracking.RUN_KEY_TAG), r.info.status)
        for r in _search_all_runs(client, exp_id)
    }
    now = int(time.time() * 1000)
    imported = skipped = 0
    for (run_key,), grp in df.group_by([key], maintain_order=True):
        first = grp.row(0, named=True)
        # a RUNNING run in a snapshot will never finish: it comes back as KILLED
        status = first.get("status") or "FINISHED"
        status = "KILLED" if status in ("RUNNING", "SCHEDULED") else status
        if (str(run_key), status) in existing or (str(run_key), "FINISHED") in existing:
            skipped += 1
            continue
        tags = {tracking.RUN_KEY_TAG: str(run_key), "isolab.imported_from": path.name}
        if first.get("base_digest"):
            tags[tracking.BASE_DIGEST_TAG] = str(first["base_digest"])
        tags.setdefault("isolab.version", __version__)
        run = client.create_run(exp_id, run_name=first.get("run_name") or str(run_key), tags=tags)
        rid = run.info.run_id
        plist = [Param(p, str(first[p])) for p in params if first[p] is not None]
        mlist = [
            Metric(tracking.mlflow_key(m), float(v), now, int(step))
            for m in metrics
            for step, v in zip(grp["step"].to_list(), grp[m].to_list(), strict=True)
            if v is not None and v == v  # skip null and NaN: "not logged at this step"
        ]
        # as few transactions as MLflow's batch limits allow: SQLite commits dominate the cost
        p_chunks = list(_chunks(plist, _MAX_PARAMS)) or [[]]
        m_chunks = list(_chunks(mlist, _MAX_METRICS)) or [[]]
        for i in range(max(len(p_chunks), len(m_chunks))):
            client.log_batch(
                rid,
                params=list(p_chunks[i]) if i < len(p_chunks) else [],
                metrics=list(m_chunks[i]) if i < len(m_chunks) else [],
                tags=[RunTag("isolab.snapshot_rows", str(grp.height))] if i == 0 else [],
            )
        if COUNTS in grp.columns:  # the per-problem counts back as the run's artifact
            by_step = {
                str(step): c
                for step, c in zip(grp["step"].to_list(), grp[COUNTS].to_list(), strict=True)
                if c is not None
            }
            if by_step:
                client.log_dict(rid, {"correct_counts_by_step": by_step}, COUNTS_ARTIFACT)
        client.set_terminated(rid, status=status)
        imported += 1
    logger.info("imported %d run(s) into %r, skipped %d already there", imported, name, skipped)
    return name, imported, skipped
