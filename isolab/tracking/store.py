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
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlparse

import mlflow
from mlflow.entities import Metric, Param, RunStatus, RunTag
from mlflow.tracking import MlflowClient

import isolab
from isolab.paths import default_db, name_path
from isolab.userinput import cut

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
#: How long a process waits for the lock beside a SQLite store (`_store_lock`) before it says
#: who holds it; MLflow itself waits 20 s (SQLite's busy timeout) for the database's own lock.
LOCK_WAIT_S = 60.0


def _not_a_lock(record: logging.LogRecord) -> bool:
    """Drop MLflow's ERROR traceback of SQLite's `database is locked`: the MlflowException it
    raises says the same, and isolab's command line turns it into a sentence (`StoreBusy`)."""
    return "database is locked" not in record.getMessage()


logging.getLogger("mlflow.store.db.utils").addFilter(_not_a_lock)


class StoreBusy(Exception):
    """Another process holds a SQLite store's lock for longer than isolab waits (not a
    RuntimeError: callers that turn those into "bad input" must let this one through)."""


_Fn = TypeVar("_Fn", bound=Callable[..., Any])


@contextlib.contextmanager
def interrupts_deferred():
    """Hold SIGINT and SIGTERM while a store write is in flight, and deliver them after it.

    A KeyboardInterrupt raised inside SQLAlchemy (a commit, a connection going back to its
    pool) can leave this process's connection in an open write transaction: the status write
    that ends the run KILLED then waits on the process's own lock, and the run stays RUNNING
    (1 in 8 Ctrl-C of `isolab train` during `log_params`: 188 s, exit 1). A write is short, so
    the signal waits for it; the previous handler then gets it as it would have. Only the main
    thread can set handlers: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[tuple[int, Any]] = []

    def hold(signum: int, frame: Any) -> None:
        caught.append((signum, frame))

    previous = {sig: signal.signal(sig, hold) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if caught:
            signum, frame = caught[0]
            handler = previous[signum]
            if callable(handler):
                handler(signum, frame)
            elif handler != signal.SIG_IGN:  # the default action: SIGINT raises, SIGTERM ends
                if signum == signal.SIGINT:
                    raise KeyboardInterrupt
                os.kill(os.getpid(), signum)


def _uninterrupted(fn: _Fn) -> _Fn:
    """`fn` runs with `interrupts_deferred`: a store write is never cut in half."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with interrupts_deferred():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


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
#: The SQLite stores this process opened, most recent last: a `database is locked` is about
#: the last one.
_OPENED: dict[str, None] = {}


def _opened(uri: str) -> None:
    _OPENED.pop(uri, None)
    _OPENED[uri] = None


def ready(uri: str) -> str:
    """Create and migrate a SQLite store once, under a file lock beside it: MLflow migrates a
    fresh store's schema on first use, and processes that open it at the same moment race
    (8 `isolab train` on a new store: 7 failed with `duplicate column name`). Servers migrate
    their own store."""
    if uri.startswith("sqlite:///"):
        _opened(uri)
    if uri in _READY or not uri.startswith("sqlite:///"):
        return uri
    Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    with _store_lock(uri):
        MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
    _READY.add(uri)
    return uri


def readable(uri: str) -> str:
    """`uri` checked for reading only: nothing is created, migrated or locked, so that a store
    in a folder this process cannot write (an archive, a colleague's runs) reads. A SQLite file
    that MLflow would make into a store, or migrate, on first use is refused instead: empty,
    not a database, or lacking a table of this MLflow's schema (MLflow's own test,
    `mlflow.store.db.utils._all_tables_exist`). Servers are read as they are.

    Raises:
        ValueError naming the file and the fix.
    """
    if not uri.startswith("sqlite:///"):
        return uri
    _opened(uri)
    import sqlite3
    from urllib.parse import quote

    import mlflow.store.db.utils  # noqa: F401 - registers every table of the schema in Base
    from mlflow.store.db.base_sql_model import Base

    db = Path(uri.removeprefix("sqlite:///"))
    fix = "point --tracking-uri (or MLFLOW_TRACKING_URI) at the mlflow.db of an MLflow store"
    if db.is_file() and db.stat().st_size == 0:
        raise ValueError(
            f"{db} is empty: not an MLflow store; {fix}, or delete the empty file (a sweep "
            "then starts a new store there)."
        )
    try:  # read-only: the check itself writes nothing, not even a journal
        with contextlib.closing(
            sqlite3.connect(f"file:{quote(str(db.resolve()))}?mode=ro", uri=True)
        ) as con:
            rows = con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            tables = {name for (name,) in rows}
    except sqlite3.Error as exc:
        if "locked" in str(exc):  # a writer holds it: busy, not broken
            raise StoreBusy(_locked_message(db)) from None
        raise ValueError(f"{db} is not an MLflow store ({exc}); {fix}.") from None
    if "experiments" not in tables:
        raise ValueError(f"{db} is not an MLflow store (it has no experiments table); {fix}.")
    missing = sorted(set(Base.metadata.tables) - tables)
    if missing:
        raise ValueError(
            f"{db} is an MLflow store of an older schema (no table {', '.join(missing[:3])}): "
            f"MLflow would migrate it on first use, and reading changes nothing; back it up "
            f"and run `mlflow db upgrade {uri}`, or read it with the MLflow that wrote it."
        )
    return uri


def artifacts_problem(uri: str, experiment: str) -> str | None:
    """Why the artifacts of `experiment` in a store with local artifacts could not be written
    (a read-only folder, a file in the way), or None: checked before a run exists, so that a
    run does not train fully and only then fail to save its files. Creates no folder."""
    location = _artifact_location(uri, experiment)
    if location is None:
        return None
    folder = location
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"the artifacts folder {location} cannot be made: {folder} is a file"
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return f"the artifacts folder {folder} is not writable ({exc.strerror})"
    return None


def _artifact_location(uri: str, experiment: str) -> Path | None:
    """The local folder the artifacts of `experiment` go to (None: not a local folder)."""
    location = None
    db = uri.removeprefix("sqlite:///")
    if uri.startswith("sqlite:///") and Path(db).exists():
        exp = client(uri).get_experiment_by_name(experiment)
        location = exp.artifact_location if exp is not None else None
    root = artifact_root(uri)
    if location is None and root is not None:
        location = f"{root}/{name_path(experiment, 'experiment').as_posix()}"
    if location is None:
        return None
    parsed = urlparse(location)
    if parsed.scheme not in ("", "file"):
        return None
    return Path(unquote(parsed.path))


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
            with interrupts_deferred():
                c.set_experiment_tag(exp.experiment_id, *next(iter(EXPERIMENT_KIND.items())))
        return exp.experiment_id
    root = artifact_root(uri)
    location = f"{root}/{name_path(name, 'experiment').as_posix()}" if root else None
    try:
        with interrupts_deferred():
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
    run created while `$ISOLAB_PARENT_RUN_ID` is set is that run's child (a sweep's point).
    Every write holds Ctrl-C until it is done (`interrupts_deferred`)."""

    def __init__(self, experiment: str, run_name: str, run_key: str, uri: str | None = None):
        self.uri = resolve_uri(uri)
        problem = artifacts_problem(self.uri, experiment)
        if problem:
            raise ValueError(f"{problem}: {ARTIFACTS_FIX}")
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
        with interrupts_deferred():
            run = self.client.create_run(self.experiment_id, run_name=run_name, tags=tags)
        self.run_id = run.info.run_id
        self._buffer: list[Metric] = []
        self._last_flush = time.monotonic()

    @_uninterrupted
    def log_params(self, params: dict[str, Any]) -> None:
        items = [Param(k, _param_str(v)) for k, v in sorted(params.items())]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[i : i + 100])

    @_uninterrupted
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

    @_uninterrupted
    def flush(self) -> None:
        while self._buffer:
            chunk, self._buffer = self._buffer[:1000], self._buffer[1000:]
            self.client.log_batch(self.run_id, metrics=chunk)
        self._last_flush = time.monotonic()

    @_uninterrupted
    def log_dict(self, data: Any, artifact_file: str) -> None:
        self.client.log_dict(self.run_id, data, artifact_file)

    @_uninterrupted
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

    @_uninterrupted
    def log_figure(self, figure, artifact_file: str) -> None:
        self.client.log_figure(self.run_id, figure, artifact_file)

    @_uninterrupted
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


@_uninterrupted
def mark_failed(run_id: str, uri: str | None = None) -> None:
    client(uri).set_terminated(run_id, status=RunStatus.to_string(RunStatus.FAILED))


def sweep_parent(experiment: str, name: str, uri: str | None = None, **tags: str) -> str:
    """The id of sweep `name`'s parent run in `experiment`, created when missing (runs of a
    sweep, imported or trained, are its children; its analysis is logged on it)."""
    uri = resolve_uri(uri)
    c = client(uri)
    exp_id = experiment_id(experiment, uri)
    with _store_lock(uri), interrupts_deferred():  # one parent of runners started together
        return _find_or_create_parent(c, exp_id, name, tags)


@contextlib.contextmanager
def _store_lock(uri: str, wait_s: float | None = None):
    """An exclusive lock beside a SQLite store (nothing for a server, which has its own). The
    holder writes its pid and command into the lock file, so that a process that waits
    `wait_s` (`LOCK_WAIT_S`) in vain raises StoreBusy naming it."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    import fcntl

    wait_s = LOCK_WAIT_S if wait_s is None else wait_s

    db = Path(uri.removeprefix("sqlite:///"))
    path = db.parent / f".{db.name}.lock"
    with open(path, "a+") as lock:  # not "w": that would erase the holder's name
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    lock.seek(0)
                    holder = lock.read().strip() or "another process"
                    raise StoreBusy(
                        f"the store {db} is locked by {holder} (lock file {path}, waited "
                        f"{wait_s:.0f} s): {BUSY_FIX}"
                    ) from None
                time.sleep(0.1)
        lock.truncate(0)
        lock.write(f"pid {os.getpid()} on {os.uname().nodename} ({_command(os.getpid())})\n")
        lock.flush()
        try:
            yield
        finally:
            lock.truncate(0)
            fcntl.flock(lock, fcntl.LOCK_UN)


#: What to do about a busy store, said by every message about one.
BUSY_FIX = (
    "retry when that process is done, or stop it; many writers at once want a tracking server "
    "(`mlflow server`, --tracking-uri http://HOST:PORT)"
)
ARTIFACTS_FIX = (
    "make it a folder you can write (chmod u+w), or keep the store where you can write "
    "(--tracking-uri sqlite:///OTHER/mlflow.db)"
)


def busy_store_message(exc: BaseException) -> str | None:
    """A sentence for a store another process keeps locked: `exc` is (or was caused by)
    StoreBusy or SQLite's `database is locked` after MLflow's 20 s wait; None otherwise. Names
    the processes that have the store's file open, where this machine lets us see them."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, StoreBusy):
            return str(cause)
        if "database is locked" in str(cause):
            break
        cause = cause.__cause__ or cause.__context__
    else:
        return None
    last = next(reversed(_OPENED), None)
    return _locked_message(Path(last.removeprefix("sqlite:///")) if last else None)


def _locked_message(db: Path | None) -> str:
    """The SQLite store `db` (None: not known) is locked: by whom, and what to do."""
    holders = _holders(db) if db is not None else []
    who = ", ".join(holders[:3]) if holders else "another process"
    where = f"the store {db}" if db is not None else "the SQLite store"
    return f"{where} is locked by {who} (SQLite's `database is locked`): {BUSY_FIX}"


def _holders(db: Path) -> list[str]:
    """The other processes of this machine that have `db` open (Linux's /proc; best effort)."""
    target = str(db.resolve())
    out = []
    for fds in Path("/proc").glob("[0-9]*/fd"):
        pid = int(fds.parent.name)
        if pid == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) == target for fd in fds.iterdir()):
                out.append(f"pid {pid} ({_command(pid)})")
    return out


def _command(pid: int) -> str:
    """The command line of process `pid`, cut short."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return cut(raw.replace(b"\0", b" ").decode(errors="replace").strip(), 80)


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
