"""MLflow tracking: embedded SQLite by default, a server when a team shares one.

The store is `sqlite:///runs/mlflow.db` unless `MLFLOW_TRACKING_URI` or an explicit URI says
otherwise (MLflow 3 refuses the old file store). One experiment per sweep; each run carries a
deterministic run key (hash of the resolved config) so sweeps can skip finished work.
Metrics are buffered and written in batches: one SQLite transaction per step would cost more
than a tiny model's whole training step.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities import Metric, Param, RunStatus, RunTag
from mlflow.tracking import MlflowClient

import isolab
from isolab.paths import default_db, name_path

log = logging.getLogger(__name__)


RUN_KEY_TAG = "isolab.run_key"
#: sha256 of the base model's weights (`isolab.models.digest`): ties a result to its exact base.
BASE_DIGEST_TAG = "isolab.base_digest"
FLUSH_EVERY_S = 5.0
END_RETRIES = 8  # status writes tried over ≈ 50 s of a busy store
KIND_TAG = "isolab.kind"  # "sweep" on a sweep's parent run, "analysis" on figure-only runs
PARENT_TAG = "mlflow.parentRunId"  # MLflow's own: the UI nests a child under its parent
#: The parent run of every run this process creates (set by the sweep runner; workers and Ray
#: tasks inherit it), so that a sweep's points are children of the sweep's run.
PARENT_ENV = "ISOLAB_PARENT_RUN_ID"
#: MLflow 3 opens an experiment on the page its kind asks for: these are model training runs
#: (the runs table), not GenAI traces.
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}


def resolve_uri(uri: str | None = None) -> str:
    """Explicit URI, else `MLFLOW_TRACKING_URI`, else SQLite at `runs/mlflow.db` (absolute).
    Nothing is created: a client (`client`) makes a SQLite store `ready` on first use."""
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    db = default_db()
    db.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{db.resolve()}"


_READY: set[str] = set()


def ready(uri: str) -> str:
    """Create and migrate a SQLite store once, under a file lock beside it: MLflow migrates a
    fresh store's schema on first use, and processes that open it at the same moment race
    (8 `isolab train` on a new store: 7 failed with `duplicate column name`). Servers migrate
    their own store."""
    if uri in _READY or not uri.startswith("sqlite:///"):
        return uri
    Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    with _store_lock(uri):
        MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
    _READY.add(uri)
    return uri


def artifact_root(uri: str) -> str | None:
    """Artifacts beside a local SQLite store (`runs/artifacts/`); servers pick their own."""
    if uri.startswith("sqlite:///"):
        db = Path(uri.removeprefix("sqlite:///"))
        return (db.parent / "artifacts").resolve().as_uri()
    return None


def client(uri: str | None = None) -> MlflowClient:
    return MlflowClient(tracking_uri=ready(resolve_uri(uri)))


def experiment_id(name: str, uri: str | None = None) -> str:
    """Id of experiment `name`, created (with artifacts beside the store) when missing."""
    uri = resolve_uri(uri)
    c = client(uri)
    exp = c.get_experiment_by_name(name)
    if exp is not None:
        if exp.tags.get("mlflow.experimentKind") is None:  # made before isolab tagged them
            c.set_experiment_tag(exp.experiment_id, *next(iter(EXPERIMENT_KIND.items())))
        return exp.experiment_id
    root = artifact_root(uri)
    location = f"{root}/{name_path(name, 'experiment').as_posix()}" if root else None
    try:
        return c.create_experiment(name, artifact_location=location, tags=EXPERIMENT_KIND)
    except mlflow.exceptions.MlflowException:
        # Another worker created it between our lookup and create.
        exp = c.get_experiment_by_name(name)
        if exp is None:
            raise
        return exp.experiment_id


@functools.cache
def git_sha() -> str:
    """Commit of the isolab checkout, `unknown` outside a git work tree."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(isolab.__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def source_tags() -> dict[str, str]:
    """Where a run's code came from, under MLflow's own tag names (the UI shows them) and
    isolab's."""
    sha = git_sha()
    tags = {"isolab.version": isolab.__version__, "isolab.git_sha": sha}
    tags["mlflow.source.name"] = "isolab"
    tags["mlflow.source.type"] = "LOCAL"
    if sha != "unknown":
        tags["mlflow.source.git.commit"] = sha
    return tags


class RunLogger:
    """One MLflow run: params and tags up front, metrics buffered, status set at the end. A
    run created while `$ISOLAB_PARENT_RUN_ID` is set is that run's child (a sweep's point)."""

    def __init__(self, experiment: str, run_name: str, run_key: str, uri: str | None = None):
        self.uri = resolve_uri(uri)
        self.client = client(self.uri)
        self.experiment_id = experiment_id(experiment, self.uri)
        tags = {
            RUN_KEY_TAG: run_key,
            **source_tags(),
            "isolab.pid": str(os.getpid()),
            "isolab.host": os.uname().nodename,
            "mlflow.runName": run_name,
        }
        if os.environ.get(PARENT_ENV):
            tags[PARENT_TAG] = os.environ[PARENT_ENV]
        run = self.client.create_run(self.experiment_id, run_name=run_name, tags=tags)
        self.run_id = run.info.run_id
        self._buffer: list[Metric] = []
        self._last_flush = time.monotonic()

    def log_params(self, params: dict[str, Any]) -> None:
        items = [Param(k, _param_str(v)) for k, v in sorted(params.items())]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[i : i + 100])

    def set_tags(self, tags: dict[str, str]) -> None:
        self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        now_ms = int(time.time() * 1000)
        for key, value in metrics.items():
            if value is None:
                continue
            self._buffer.append(Metric(mlflow_key(key), float(value), now_ms, step))
        if time.monotonic() - self._last_flush > FLUSH_EVERY_S:
            self.flush()

    def flush(self) -> None:
        while self._buffer:
            chunk, self._buffer = self._buffer[:1000], self._buffer[1000:]
            self.client.log_batch(self.run_id, metrics=chunk)
        self._last_flush = time.monotonic()

    def log_dict(self, data: Any, artifact_file: str) -> None:
        self.client.log_dict(self.run_id, data, artifact_file)

    def log_split(self, name: str, context: str, ids: list[str], source: str) -> str:
        """A problem split as an MLflow dataset input (`log_input`): its name, a digest of its
        problem ids (equal digests, equal problems), its size and where it came from; the UI
        lists it under the run's datasets. Returns the digest."""
        import hashlib
        import json

        from mlflow.entities import Dataset, DatasetInput, InputTag

        digest = hashlib.sha256("\n".join(map(str, ids)).encode()).hexdigest()[:16]
        dataset = Dataset(
            name=name,
            digest=digest,
            source_type="isolab",
            source=json.dumps({"source": source}),
            profile=json.dumps({"num_rows": len(ids)}),
        )
        tags = [InputTag("mlflow.data.context", context)]
        for attempt in range(4):
            try:
                self.client.log_inputs(self.run_id, datasets=[DatasetInput(dataset, tags=tags)])
                return digest
            except mlflow.exceptions.MlflowException as exc:
                # two runs logging the same split at once race on MLflow's unique dataset row;
                # a retry finds the row the other made (the record is metadata: never fatal)
                if attempt == 3:
                    log.warning("could not record dataset %s of run %s: %s", name, self.run_id, exc)
                time.sleep(0.1 * (attempt + 1))
        return digest

    def log_figure(self, figure, artifact_file: str) -> None:
        self.client.log_figure(self.run_id, figure, artifact_file)

    def end(self, status: str = "FINISHED") -> None:
        """Flush and close the run; status FINISHED, FAILED or KILLED. The status write is
        retried while the store is busy (`database is locked` under many writers): a run
        must not stay RUNNING because a stop came at a busy moment."""
        try:
            self.flush()
        finally:
            for attempt in range(END_RETRIES):
                try:
                    self.client.set_terminated(self.run_id, status=status)
                    break
                except mlflow.exceptions.MlflowException:
                    if attempt == END_RETRIES - 1:
                        raise
                    time.sleep(0.2 * 2**attempt)


def _param_str(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 6000 else text[:5997] + "..."


def mlflow_key(key: str) -> str:
    """MLflow's name for an isolab metric: MLflow rejects `@`, so `eval/avg@4` → `eval/avg_at_4`."""
    return key.replace("@", "_at_")


def canonical_key(key: str) -> str:
    """Inverse of `mlflow_key`: `eval/best_at_4` → `eval/best@4`."""
    return key.replace("_at_", "@")


def find_runs(experiment: str, uri: str | None = None, run_key: str | None = None) -> list:
    """Training runs of `experiment` (optionally one run key), newest first: not the sweep's
    parent run nor analysis runs."""
    c = client(uri)
    exp = c.get_experiment_by_name(experiment)
    if exp is None:
        return []
    filt = f"tags.`{RUN_KEY_TAG}` = '{run_key}'" if run_key else ""
    runs = c.search_runs(
        [exp.experiment_id],
        filter_string=filt,
        max_results=50000,
        order_by=["attributes.start_time DESC"],
    )
    return [r for r in runs if KIND_TAG not in r.data.tags]


def mark_failed(run_id: str, uri: str | None = None) -> None:
    client(uri).set_terminated(run_id, status=RunStatus.to_string(RunStatus.FAILED))


def sweep_parent(experiment: str, name: str, uri: str | None = None, **tags: str) -> str:
    """The id of sweep `name`'s parent run in `experiment`, created when missing (runs of a
    sweep, imported or trained, are its children; its analysis is logged on it)."""
    uri = resolve_uri(uri)
    c = client(uri)
    exp_id = experiment_id(experiment, uri)
    with _store_lock(uri):  # two runners starting together make one parent, not two
        return _find_or_create_parent(c, exp_id, name, tags)


@contextlib.contextmanager
def _store_lock(uri: str):
    """An exclusive lock beside a SQLite store (nothing for a server, which has its own)."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    import fcntl

    db = Path(uri.removeprefix("sqlite:///"))
    with open(db.parent / f".{db.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _find_or_create_parent(c: MlflowClient, exp_id: str, name: str, tags: dict) -> str:
    found = c.search_runs(
        [exp_id],
        filter_string=f"tags.`{KIND_TAG}` = 'sweep' and tags.`isolab.sweep` = '{_quoted(name)}'",
        max_results=1,
    )
    if found:
        return found[0].info.run_id
    run_tags = {KIND_TAG: "sweep", "isolab.sweep": name, **source_tags(), **tags}
    run = c.create_run(exp_id, run_name=f"{name.rsplit('/', 1)[-1]} (sweep)", tags=run_tags)
    c.set_terminated(run.info.run_id, status="FINISHED")
    return run.info.run_id


def _quoted(text: str) -> str:
    return text.replace("'", "\\'")
