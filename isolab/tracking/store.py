"""The MLflow store: where it is, making it ready, a client, experiments and their runs.

The store is `sqlite:///runs/mlflow.db` unless `MLFLOW_TRACKING_URI` or an explicit URI says
otherwise (MLflow 3 refuses the old file store); a team shares a server instead. One experiment
per sweep; each run carries a deterministic run key (hash of the resolved config, tag
`tags.RUN_KEY_TAG`) so sweeps can skip finished work. Writing runs is `logger.RunLogger`'s job,
locking a SQLite store `locks`'.
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

import mlflow
from mlflow.tracking import MlflowClient

from isolab.paths import default_db, name_path
from isolab.tracking.interrupts import interrupts_deferred, uninterrupted
from isolab.tracking.locks import StoreBusy, locked_message, note_opened, store_lock
from isolab.tracking.tags import EXPERIMENT_KIND, KIND_TAG, RUN_KEY_TAG
from isolab.vocab import FAILED

SQLITE_PREFIX = "sqlite:///"
ARTIFACTS_FIX = (
    "make it a folder you can write (chmod u+w), or keep the store where you can write "
    "(--tracking-uri sqlite:///OTHER/mlflow.db)"
)


#: The stores isolab reads and writes: MLflow's database stores and a tracking server. MLflow 3
#: refuses the file store (`file://`, a bare folder); a scheme MLflow does not know raised its
#: registry's exception deep inside the first client call.
URI_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql", "http", "https", "databricks")
URI_FORMS = (
    "sqlite:///PATH/mlflow.db (a store in a file), http(s)://HOST:PORT (an `mlflow server`) "
    "or postgresql://USER@HOST/DB"
)
#: How long a tracking server gets to answer once, before any work: MLflow's own client retries
#: an unreachable one with backoff for over two minutes.
SERVER_PROBE_S = 3.0


class TrackingUriError(ValueError):
    """A tracking URI isolab cannot use: the message names where it came from and the fix."""


class StoreUnwritable(ValueError):
    """A SQLite store this process cannot write (a read-only file, folder or mount), found
    when it is made ready (`ready`), before any run exists: the message names it and the fix."""


def check_uri(uri: str, source: str = "the tracking URI") -> str:
    """`uri` if isolab can use it: a scheme of `URI_SCHEMES`, and a server that answers
    (`server_problem`). `source` (`--tracking-uri`, `MLFLOW_TRACKING_URI`) starts the message
    of the `TrackingUriError` raised otherwise."""
    from isolab.userinput import brief

    try:
        scheme = urlparse(uri).scheme.split("+")[0].lower()  # postgresql+psycopg2://…
    except ValueError as exc:  # `http://[::1`
        raise TrackingUriError(
            f"{source} {brief(uri)}: not a URI ({exc}); give {URI_FORMS}"
        ) from None
    if scheme in ("", "file"):
        path = Path(unquote(urlparse(uri).path) if scheme else uri).resolve()
        db = path if path.suffix in (".db", ".sqlite") else path / "mlflow.db"
        raise TrackingUriError(
            f"{source} {brief(uri)}: MLflow 3 no longer writes the file store; use a SQLite "
            f"store, e.g. sqlite:///{db} (`mlflow migrate-filestore` moves old runs there)"
        )
    if scheme not in URI_SCHEMES:
        raise TrackingUriError(
            f"{source} {brief(uri)}: isolab does not know the scheme {scheme!r}; give {URI_FORMS}"
        )
    if scheme in ("http", "https"):
        problem = server_problem(uri.rstrip("/"))
        if problem:
            raise TrackingUriError(
                f"{source} {brief(uri)}: no MLflow server answers there ({problem}): is "
                "`mlflow server` running, on that host and port? Or use a local store: "
                "--tracking-uri sqlite:///runs/mlflow.db"
            )
    return uri


@functools.cache
def server_problem(uri: str, timeout_s: float = SERVER_PROBE_S) -> str | None:
    """Why the server at `uri` did not answer `GET /health` within `timeout_s`, or None when it
    did (a login in front of it, 401 or 403, counts: the client then says so). Once per
    process; 404 is not an MLflow server, and 5xx one that MLflow's client would retry."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=timeout_s):
            return None
    except urllib.error.HTTPError as exc:
        return None if exc.code in (401, 403) else f"GET /health answered HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):
            return f"no answer within {timeout_s:g} s"
        return str(getattr(reason, "strerror", None) or reason)


def resolve_uri(uri: str | None = None) -> str:
    """Explicit URI, else `MLFLOW_TRACKING_URI`, else SQLite at `runs/mlflow.db` (absolute),
    checked (`check_uri`). Nothing is created: a client (`client`) makes a SQLite store `ready`
    on first use."""
    if uri:
        return check_uri(uri)
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return check_uri(uri, "MLFLOW_TRACKING_URI")
    db = default_db()
    db.parent.mkdir(parents=True, exist_ok=True)
    return f"{SQLITE_PREFIX}{db.resolve()}"


def sqlite_path(uri: str) -> Path | None:
    """The database file of a SQLite store's URI (``sqlite:///runs/mlflow.db`` →
    ``runs/mlflow.db``, ``sqlite:////abs/mlflow.db`` → ``/abs/mlflow.db``); None for any other
    store (a server, ``postgresql://…``)."""
    return Path(uri.removeprefix(SQLITE_PREFIX)) if uri.startswith(SQLITE_PREFIX) else None


#: The SQLite stores this process made ready: each is created and migrated once.
_READY: set[str] = set()


def ready(uri: str) -> str:
    """Create and migrate a SQLite store once, under a file lock beside it: MLflow migrates a
    fresh store's schema on first use, and processes that open it at the same moment race
    (8 `isolab train` on a new store: 7 failed with `duplicate column name`). Servers migrate
    their own store."""
    db = sqlite_path(uri)
    if db is not None:
        note_opened(db)
    if uri in _READY or db is None:
        return uri
    fix = (
        "runs are written there; use a store you can write (--tracking-uri "
        "sqlite:///OTHER/mlflow.db), or read this one with `isolab frontier` / `isolab report`"
    )
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
        # root passes chmod; a read-only mount says so here (EROFS), not at the first write
        for path in (db, db.parent):
            if path.exists() and not os.access(path, os.W_OK):
                kind = "file" if path == db else "folder"
                raise StoreUnwritable(f"the store's {kind} {path} is read-only: {fix}")
        with store_lock(db):
            MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
    except OSError as exc:  # the lock file beside the store, or its folder, cannot be made
        where = exc.filename or db.parent
        raise StoreUnwritable(
            f"the store {db} cannot be written ({where}: {exc.strerror}): {fix}"
        ) from None
    except mlflow.exceptions.MlflowException as exc:
        if "readonly database" not in str(exc):
            raise
        raise StoreUnwritable(f"the store {db} is read-only (SQLite: {exc}): {fix}") from None
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
    db = sqlite_path(uri)
    if db is None:
        return uri
    note_opened(db)
    import sqlite3
    from urllib.parse import quote

    import mlflow.store.db.utils  # noqa: F401 - registers every table of the schema in Base
    from mlflow.store.db.base_sql_model import Base

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
            raise StoreBusy(locked_message(db)) from None
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
    db = sqlite_path(uri)
    if db is not None and db.exists():
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
    db = sqlite_path(uri)
    return (db.parent / "artifacts").resolve().as_uri() if db is not None else None


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


def search_all_runs(c: MlflowClient, experiment_id: str) -> list:
    """Every run of the experiment, of every kind and status, page by page."""
    runs, token = [], None
    while True:
        page = c.search_runs([experiment_id], max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


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


@uninterrupted
def mark_failed(run_id: str, uri: str | None = None) -> None:
    client(uri).set_terminated(run_id, status=FAILED)
