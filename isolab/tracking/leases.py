"""Leases: which writer is writing a run key of an experiment, recorded in the MLflow store
itself, so that every writer of that store sees it: the processes of one machine, runners on
many machines in front of one `mlflow server`, two imports of one snapshot.

A lease is a run of the experiment tagged ``isolab.kind = lease``. It names the run keys it
leases (their digests, in ``isolab.lease.keys.<i>``) and its holder (``isolab.host``,
``isolab.pid``). `take` writes it in one `create_run`, then lists the experiment's live leases:

- no other lease names any of its keys → it is held (tagged ``isolab.lease.held``);
- another one does → it is ended. A held rival has the keys: `take` returns None at once, or
  waits up to `wait_s` for it to let go. A rival not yet held leased at the same moment: both
  back off a random while and try again.

Guarantee: two leases that share a key are never held at once. Each leaseholder lists only after
its own lease is written, so if both were held, each list came before the other's write, which
cannot happen in a store that orders its writes (a SQLite file, or the one database behind a
server). Nothing rests on clocks, on a shared folder or on the backend's kind. Colliding costs
a retry, never a double write; leaseholders that collide every time all give up (their point is
left to the next `isolab sweep run`).

Why a run: the store is the one thing every writer already shares. A lock file works only on
one machine's disk, and a table of our own would need a migration on every backend; a run is
written by `create_run` with all its tags at once, listed by `search_runs` with a filter, and
ended by `set_terminated`, on SQLite and on a server alike. A live lease is a RUNNING one, so
the listing asks the store for exactly those.

Expiry and takeover: a lease has no time limit (no clock to trust across machines); it lasts
while its holder writes: `release` ends and deletes it. The lease of a dead process of this
host is stale, and whoever finds it ends it (`_rivals` does on every `take`): that is the
takeover, the next `take` then sees no rival. A lease of another host cannot be checked and
counts as live until `release_stale(..., reclaim_remote=True)` (that machine is gone).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import random
import time
from collections.abc import Generator, Iterable
from typing import Any

from mlflow.utils.validation import MAX_TAG_VAL_LENGTH

from isolab.tracking.store import client, experiment_id, resolve_uri
from isolab.tracking.tags import HOST_TAG, KIND_TAG, PID_TAG
from isolab.vocab import FINISHED, RUNNING

log = logging.getLogger(__name__)

LEASE_KIND = "lease"  # the value of `isolab.kind` on a lease run
KEYS_TAG = "isolab.lease.keys"  # `.0`, `.1`, …: the leased keys' digests, space-separated
HELD_TAG = "isolab.lease.held"
DIGEST_CHARS = 16  # of sha256: 64 bits, no collision among any store's run keys
#: Collisions a leaseholder backs off from before it gives up; the n-th wait is a random
#: 0–BACKOFF_S·2ⁿ s, so that two leaseholders soon stop colliding.
COLLISION_TRIES = 6
BACKOFF_S = 0.2
POLL_S = 0.5  # how often a waiting leaseholder looks whether a held rival let go


def key_digest(key: str) -> str:
    """What a lease records of a run key (fixed length, any key)."""
    return hashlib.sha256(key.encode()).hexdigest()[:DIGEST_CHARS]


@contextlib.contextmanager
def lease(
    experiment: str,
    keys: Iterable[str],
    uri: str | None = None,
    *,
    wait_s: float = 0.0,
    label: str | None = None,
) -> Generator[bool, None, None]:
    """Hold run keys `keys` of `experiment` for the block (see the module docstring). Yields
    True when held (released on exit, even on an error), False when another live writer holds
    one of them and did not let go within `wait_s`."""
    uri = resolve_uri(uri)
    lease_id = take(experiment, keys, uri, wait_s=wait_s, label=label)
    try:
        yield lease_id is not None
    finally:
        if lease_id is not None:
            release(lease_id, uri)


def take(
    experiment: str,
    keys: Iterable[str],
    uri: str | None = None,
    *,
    wait_s: float = 0.0,
    label: str | None = None,
) -> str | None:
    """The id of a held lease on `keys` of `experiment`, or None (another writer holds one of
    them for longer than `wait_s`, or leaseholders kept colliding). `label` names the lease run."""
    uri = resolve_uri(uri)
    c = client(uri)
    exp_id = experiment_id(experiment, uri)
    digests = {key_digest(k) for k in keys}
    deadline = time.monotonic() + wait_s
    attempt = 0
    while True:
        rivals = _rivals(c, exp_id, digests)  # a cheap look first: no write while one is held
        if not rivals:
            mine = _write(c, exp_id, digests, label)
            try:
                # The look that counts comes after our own write: a rival that listed before
                # our write must see it when it lists after its own (the guarantee above).
                rivals = _rivals(c, exp_id, digests, besides=mine)
                if not rivals:
                    # rivals that find it held wait for its release, not back off and retry
                    c.set_tag(mine, HELD_TAG, "true")
                    return mine
            except BaseException:
                _end(c, mine)
                raise
            _end(c, mine)  # a rival names a key too: step back (it may be stepping back too)
        held = any(r.data.tags.get(HELD_TAG) for r in rivals)
        if time.monotonic() >= deadline and (held or attempt + 1 >= COLLISION_TRIES):
            return None
        # wait for a held rival to release; after a collision, a random back-off so that the
        # two do not collide again
        time.sleep(POLL_S if held else random.uniform(0, BACKOFF_S * 2 ** min(attempt, 4)))
        attempt += 1


def release(lease_id: str, uri: str | None = None) -> None:
    """End and delete lease `lease_id` (best effort: a lease left behind goes stale with its
    process)."""
    _end(client(uri), lease_id)


def release_stale(experiment: str, uri: str | None = None, reclaim_remote: bool = False) -> int:
    """End the leases of `experiment` whose holder is gone: a dead process of this host, and
    with `reclaim_remote` every lease of another host. Returns how many."""
    c = client(uri)
    exp = c.get_experiment_by_name(experiment)
    if exp is None:
        return 0
    stale = [r for r in _live_leases(c, exp.experiment_id) if _stale(r, reclaim_remote)]
    for run in stale:
        log.info("lease %s (%s) has no live holder: ended", run.info.run_id, run.info.run_name)
        _end(c, run.info.run_id)
    return len(stale)


def process_alive(pid: int, started_ms: int | None = None) -> bool:
    """Whether `pid` runs on this host and is old enough to be the process that began a run."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil comes with mlflow and ray
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        # A recycled pid belongs to a process that started after the run did.
        return started_ms is None or proc.create_time() <= started_ms / 1000 + 1.0
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def _write(c: Any, exp_id: str, digests: set[str], label: str | None) -> str:
    """A new lease on `digests`, every key in the one write that creates it."""
    ordered = sorted(digests)
    per_tag = MAX_TAG_VAL_LENGTH // (DIGEST_CHARS + 1)
    tags = {KIND_TAG: LEASE_KIND, HOST_TAG: os.uname().nodename, PID_TAG: str(os.getpid())}
    for i, start in enumerate(range(0, len(ordered), per_tag)):
        tags[f"{KEYS_TAG}.{i}"] = " ".join(ordered[start : start + per_tag])
    name = (label or f"lease of {len(ordered)} run key(s)")[:250]  # MLflow's run names: 250
    return c.create_run(exp_id, run_name=name, tags=tags).info.run_id


def _live_leases(c: Any, exp_id: str) -> list:
    """The experiment's leases not yet ended (few: one per writer at work)."""
    return c.search_runs(
        [exp_id],
        filter_string=f"tags.`{KIND_TAG}` = '{LEASE_KIND}' and attributes.status = '{RUNNING}'",
        max_results=50000,
    )


def _rivals(c: Any, exp_id: str, digests: set[str], besides: str | None = None) -> list:
    """Live leases other than `besides` that name one of `digests`; stale ones found on the
    way are ended."""
    out = []
    for run in _live_leases(c, exp_id):
        if run.info.run_id == besides:
            continue
        if _stale(run, reclaim_remote=False):
            log.info("lease %s has no live holder: ended", run.info.run_id)
            _end(c, run.info.run_id)
        elif digests & _digests(run):
            out.append(run)
    return out


def _digests(run: Any) -> set[str]:
    tags = run.data.tags
    return {d for k, v in tags.items() if k.startswith(f"{KEYS_TAG}.") for d in v.split()}


def _stale(run: Any, reclaim_remote: bool) -> bool:
    tags = run.data.tags
    if tags.get(HOST_TAG) != os.uname().nodename:
        return reclaim_remote
    pid = tags.get(PID_TAG, "")
    return not (pid.isdigit() and process_alive(int(pid), run.info.start_time))


def _end(c: Any, lease_id: str) -> None:
    """Terminate (no longer live, even if the delete fails), then delete (out of the UI)."""
    for step in (lambda: c.set_terminated(lease_id, FINISHED), lambda: c.delete_run(lease_id)):
        try:
            step()
        except Exception as exc:  # ending a lease must not mask the real error
            log.debug("could not end lease %s: %s", lease_id, exc)  # already ended by another
