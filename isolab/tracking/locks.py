"""A SQLite store's lock, and what to say when another process keeps the store busy.

Two locks guard a SQLite store. SQLite's own (MLflow waits 20 s for it, then raises `database
is locked`), and isolab's file lock beside the database (`store_lock`), held while a store is
created and migrated and while a sweep's parent run is made. Either one, held too long by
another process, becomes one sentence that names the holder (`busy_store_message`, which
isolab's command line prints), not SQLAlchemy's traceback. A server has its own locking: none
of this applies to one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path

from isolab.userinput import cut

#: How long a process waits for the lock beside a SQLite store (`store_lock`) before it says
#: who holds it; MLflow itself waits 20 s (SQLite's busy timeout) for the database's own lock.
LOCK_WAIT_S = 60.0
#: What to do about a busy store, said by every message about one.
BUSY_FIX = (
    "retry when that process is done, or stop it; many writers at once want a tracking server "
    "(`mlflow server`, --tracking-uri http://HOST:PORT)"
)


class StoreBusy(Exception):
    """Another process holds a SQLite store's lock for longer than isolab waits (not a
    RuntimeError: callers that turn those into "bad input" must let this one through)."""


def _not_a_lock(record: logging.LogRecord) -> bool:
    """Drop MLflow's ERROR traceback of SQLite's `database is locked`: the MlflowException it
    raises says the same, and isolab's command line turns it into a sentence (`StoreBusy`)."""
    return "database is locked" not in record.getMessage()


logging.getLogger("mlflow.store.db.utils").addFilter(_not_a_lock)

#: The SQLite stores this process opened, most recent last: a `database is locked` (which does
#: not say which file) is about the last one.
_OPENED: dict[Path, None] = {}


def note_opened(db: Path) -> None:
    """Record that this process opens the SQLite store `db` (`busy_store_message` reads it)."""
    _OPENED.pop(db, None)
    _OPENED[db] = None


@contextlib.contextmanager
def store_lock(db: Path | None, wait_s: float | None = None):
    """An exclusive lock beside the SQLite store `db` (None, a server's store: nothing, it has
    its own). The holder writes its pid and command into the lock file, so that a process that
    waits `wait_s` (`LOCK_WAIT_S`) in vain raises StoreBusy naming it."""
    if db is None:
        yield
        return
    import fcntl

    wait_s = LOCK_WAIT_S if wait_s is None else wait_s
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
    return locked_message(next(reversed(_OPENED), None))


def locked_message(db: Path | None) -> str:
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
