"""Importing a snapshot into an MLflow store: `import_runs`, and the checks that let it write
all of a snapshot or none of it.

Why all or nothing: the store is what sweeps and imports trust. A sweep skips a run key
FINISHED there, and an import skips one already imported; a run left half written (some
metrics, no counts) would be read as complete and never redone. So every value MLflow could
refuse is checked before the first write (`isolab.tracking.import_plan.plan_import`), and a
fault midway deletes what the import wrote (`_undo`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from isolab.tracking import leases, store
from isolab.tracking.bulk import latest_points, write_run
from isolab.tracking.describe import NOTE_TAG, run_note
from isolab.tracking.import_plan import plan_import
from isolab.tracking.parents import finish_parent, sweep_parent
from isolab.tracking.run_figure import FIGURE_FILE, RunFigures
from isolab.tracking.snapshot import (
    SNAPSHOT_FILE,
    is_snapshot,
)
from isolab.tracking.tags import (
    HOST_TAG,
    IMPORTED_FROM_TAG,
    PARENT_TAG,
    PID_TAG,
    RUN_KEY_TAG,
)
from isolab.tracking.views import run_url
from isolab.vocab import FINISHED, KILLED, RUN_KEY, RUNNING

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
    plans, name = plan_import(path, experiment)
    uri = store.resolve_uri(tracking_uri)
    client = store.client(uri)
    exp_id = store.experiment_id(name, uri)
    _undo_killed_imports(client, exp_id)
    todo = _not_there(client, exp_id, plans)
    if todo:
        keys = [p[RUN_KEY] for p in todo]
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
        if (p[RUN_KEY], p["status"]) not in existing and (p[RUN_KEY], FINISHED) not in existing
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
