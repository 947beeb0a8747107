"""Sweep parent runs: every run of a sweep, trained or imported, is a child of one run that
stands for the sweep (MLflow's UI nests children under it; a study logs its analysis on it).

The sweep runner makes the parent and puts its id in `tags.PARENT_ENV`; the processes it starts
(workers, Ray tasks) inherit the variable, and `logger.RunLogger` tags each run it creates with
it (`tags.PARENT_TAG`, MLflow's own tag). The parent holds no results (`tags.KIND_TAG` =
`tags.SWEEP_KIND`), so the runs table leaves it out.

When the sweep's runs are written (`finish_parent`, after an import or a sweep), the parent
spans them in time (its duration is the sweep's), carries a table of its points
(`POINTS_TABLE`, MLflow's `log_table`) and a description, and the experiment gets a
description that links to the runs table, the charts against compute (`views`) and the parent.
"""

from __future__ import annotations

import logging
import os
import time

from mlflow.entities import RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from isolab.tracking.describe import NOTE_TAG, SWEEP_NOTE_START, avg_key, sweep_note
from isolab.tracking.interrupts import interrupts_deferred
from isolab.tracking.locks import store_lock
from isolab.tracking.store import client, experiment_id, resolve_uri, sqlite_path
from isolab.tracking.tables import replace_table
from isolab.tracking.tags import (
    HOST_TAG,
    KIND_TAG,
    PARENT_TAG,
    PID_TAG,
    SWEEP_KIND,
    SWEEP_TAG,
    source_tags,
)
from isolab.tracking.views import (
    COLOURS_NOTE,
    MODE_NOTE,
    POINTS_FILTER,
    colour_tags,
    ensure_view,
    run_url,
    runs_url,
)
from isolab.vocab import EVAL_PREFIX, FINISHED, FLOPS_TOTAL, KILLED, RHO, ROLLOUTS, RUN_ID, RUNNING

log = logging.getLogger(__name__)

#: The sweep's points, one row per run, among the parent's artifacts.
POINTS_TABLE = "sweep/points.json"
#: The lease key (`isolab.tracking.leases`) under which a sweep's parent is found or created:
#: one parent per sweep per store, whatever the runners' machines.
PARENT_LEASE_KEY = "isolab sweep parent: "
PARENT_WAIT_S = 60.0
#: When the runner holding a parent (`hold_parent`) took it, in ms: a pid recycled by a process
#: started later is not that runner.
HELD_SINCE_TAG = "isolab.parent.held_since"
#: The grid coordinates a points table shows, then its final metrics (MLflow's names).
POINT_PARAMS = ("model", "split", "n", "B_p", "M", "seed")


def sweep_parent(
    experiment: str,
    name: str,
    uri: str | None = None,
    start_time: int | None = None,
    **tags: str,
) -> str:
    """The id of sweep `name`'s parent run in `experiment`, created when missing (runs of a
    sweep, imported or trained, are its children; its analysis is logged on it). A parent
    made by an import starts when its first run did (`start_time`, ms)."""
    from isolab.tracking import leases

    uri = resolve_uri(uri)
    c = client(uri)
    exp_id = experiment_id(experiment, uri)
    found = _find_parent(c, exp_id, name)  # the common case: no lease to take
    if found is not None:
        _end_if_dead(c, found)
        return found.info.run_id
    # runners started together would each find no parent and make one: the lease (in the store:
    # runners in front of one server too) makes the look-up and the creation one step; the
    # lock keeps a SQLite file's writers from colliding on it meanwhile
    # (not held after PARENT_WAIT_S, a runner stuck holding it: carry on without; at worst a
    # second parent rather than a sweep that never starts)
    key = f"{PARENT_LEASE_KEY}{name}"
    with (
        leases.lease(experiment, [key], uri, wait_s=PARENT_WAIT_S, label=f"parent of {name}"),
        store_lock(sqlite_path(uri)),
        interrupts_deferred(),
    ):
        return _find_or_create_parent(c, exp_id, name, tags, start_time)


def complete_parent(experiment: str, name: str, uri: str | None = None) -> None:
    """Sweep `name` has nothing left to run: a parent an interrupted run of it left KILLED (or
    a killed runner left RUNNING) ends FINISHED (`finish_parent`). Nothing is created where the
    sweep has no parent."""
    uri = resolve_uri(uri)
    c = client(uri)
    found = _find_parent(c, experiment_id(experiment, uri), name)
    if found is not None and _end_if_dead(c, found) == KILLED:
        finish_parent(experiment, found.info.run_id, uri)


def hold_parent(parent: str, uri: str | None = None) -> None:
    """This process runs the sweep: its parent is RUNNING, tagged with the process
    (`HOST_TAG`, `PID_TAG`, `HELD_SINCE_TAG`) until `finish_parent` ends it. A runner killed
    outright (SIGKILL) so leaves a parent whose holder is gone: the next command that opens the
    sweep ends it KILLED (`_end_if_dead`), never a FINISHED sweep that is not."""
    c = client(uri)
    tags = {
        HOST_TAG: os.uname().nodename,
        PID_TAG: str(os.getpid()),
        HELD_SINCE_TAG: str(int(time.time() * 1000)),
    }
    with interrupts_deferred():
        c.log_batch(parent, tags=[RunTag(k, v) for k, v in tags.items()])
        c.update_run(parent, status=RUNNING)


def _end_if_dead(c: MlflowClient, parent) -> str:
    """End a RUNNING parent whose holder (`hold_parent`), a process of this host, is gone:
    KILLED. Returns the parent's status as it now stands. A holder on another host cannot be
    checked: its parent stays RUNNING."""
    from isolab.tracking.leases import process_alive

    status, tags = parent.info.status, parent.data.tags
    if status != RUNNING or tags.get(HOST_TAG) != os.uname().nodename:
        return status
    pid, since = tags.get(PID_TAG, ""), tags.get(HELD_SINCE_TAG, "")
    if pid.isdigit() and process_alive(int(pid), int(since) if since.isdigit() else None):
        return status
    log.info("sweep parent %s: its runner (pid %s) is gone: ended KILLED", parent.info.run_id, pid)
    c.set_terminated(parent.info.run_id, status=KILLED)
    return KILLED


def _find_parent(c: MlflowClient, exp_id: str, name: str):
    """Sweep `name`'s parent run in experiment `exp_id`, or None."""
    found = c.search_runs(
        [exp_id],
        filter_string=f"tags.`{KIND_TAG}` = '{SWEEP_KIND}' and tags.`{SWEEP_TAG}` = "
        f"'{_quoted(name)}'",
        max_results=1,
    )
    return found[0] if found else None


def _find_or_create_parent(
    c: MlflowClient, exp_id: str, name: str, tags: dict, start_time: int | None
) -> str:
    found = _find_parent(c, exp_id, name)
    if found is not None:
        _end_if_dead(c, found)
        return found.info.run_id
    run_tags = {
        KIND_TAG: SWEEP_KIND,
        SWEEP_TAG: name,
        **source_tags(),
        NOTE_TAG: f"Sweep `{name}`: its runs are this run's children.",
        **tags,
    }
    run = c.create_run(
        exp_id,
        run_name=f"{name.rsplit('/', 1)[-1]} (sweep)",
        tags=run_tags,
        start_time=start_time,
    )
    c.set_terminated(run.info.run_id, status=FINISHED)
    return run.info.run_id


def finish_parent(
    experiment: str,
    parent: str,
    uri: str | None = None,
    interrupted: bool = False,
    answer: tuple[str, ...] = (),
) -> None:
    """Bring sweep `parent` up to date with its children: its status and end time (FINISHED at
    the last child's end; KILLED when the sweep was `interrupted`, until a run of the same sweep
    completes it), its points table, its description and the experiment's (see the module
    docstring), stating `answer` (`isolab.frontier.answer.sweep_answers`, made by the sweep
    layer) when given. Best effort: a store that refuses a write leaves a warning, not a failed
    sweep."""
    uri = resolve_uri(uri)
    c = client(uri)
    try:
        with interrupts_deferred():
            _finish(c, experiment_id(experiment, uri), experiment, parent, interrupted, answer)
    except (MlflowException, OSError) as exc:
        log.warning("could not describe sweep %s on run %s: %s", experiment, parent, exc)


def _finish(
    c: MlflowClient, exp_id: str, name: str, parent: str, interrupted: bool, answer: tuple[str, ...]
) -> None:
    children = _children(c, exp_id, parent)
    ends = [r.info.end_time for r in children if r.info.end_time]
    if interrupted:  # not all its points ran: the sweep is not finished
        c.set_terminated(parent, status=KILLED, end_time=max(ends) if ends else None)
    if not children:
        if not interrupted and c.get_run(parent).info.status == RUNNING:  # held, none ran
            c.set_terminated(parent, status=FINISHED)
        return
    run = c.get_run(parent)
    if (
        not interrupted
        and ends
        and (max(ends) > (run.info.end_time or 0) or run.info.status != FINISHED)
    ):
        c.set_terminated(parent, status=FINISHED, end_time=max(ends))
    points = [
        {
            "id": r.info.run_id,
            "name": r.info.run_name,
            "params": r.data.params,
            "metrics": r.data.metrics,
        }
        for r in children
    ]
    _log_points(c, parent, points)
    _colour_by_n(c, children)
    key = ensure_view(c, exp_id)
    links = {
        "table_link": runs_url("", exp_id, key),
        "charts_link": runs_url("", exp_id, key, charts=True),
    }
    table = f"Its points, best first: `{POINTS_TABLE}` (Artifacts). {COLOURS_NOTE}"
    c.set_tag(parent, NOTE_TAG, f"{sweep_note(name, points, **links, answer=answer)}\n\n{table}")
    parent_link = run_url("", exp_id, parent)
    _describe_experiment(
        c,
        exp_id,
        f"{sweep_note(name, points, **links, parent_link=parent_link, answer=answer)}\n\n"
        f"{COLOURS_NOTE} {MODE_NOTE}",
    )


def _colour_by_n(c: MlflowClient, children: list) -> None:
    """Colour each of the sweep's runs by its n (`views.colour_tags`) where it is not yet:
    imported runs, and runs logged before isolab coloured them."""
    for r in children:
        tags = colour_tags(r.data.params)
        if tags and any(r.data.tags.get(k) != v for k, v in tags.items()):
            c.log_batch(r.info.run_id, tags=[RunTag(k, v) for k, v in tags.items()])


def _children(c: MlflowClient, exp_id: str, parent: str) -> list:
    """The parent's training runs (leases, analysis runs left out), page by page."""
    runs, token = [], None
    filt = f"tags.`{PARENT_TAG}` = '{parent}' and {POINTS_FILTER}"
    while True:
        page = c.search_runs([exp_id], filt, max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def _log_points(c: MlflowClient, parent: str, points: list[dict]) -> None:
    """The points table on the parent, every child in it, best first: replaced, not appended
    (`tables.replace_table`), so a resumed or re-imported sweep keeps one row per run."""
    replace_table(c, parent, _points_frame(points), POINTS_TABLE)


def _points_frame(points: list[dict]):
    """The points table: grid coordinates, then final avg@k, ρ, FLOPs and rollouts; best
    first. A pandas frame: what MLflow's `log_table` takes."""
    import pandas as pd

    rows = []
    for pt in points:
        avg = avg_key(pt["metrics"])
        row = {"run": pt["name"], RUN_ID: pt["id"]}
        row.update({p: pt["params"].get(p) for p in POINT_PARAMS})
        row[avg or "avg"] = pt["metrics"].get(avg) if avg else None
        row.update({k: pt["metrics"].get(k) for k in (RHO, FLOPS_TOTAL, ROLLOUTS)})
        rows.append(row)
    df = pd.DataFrame(rows)
    # text as object columns: MLflow's `log_table` looks for images among those, and pandas
    # 3 warns when its `str` columns are picked up that way
    df = df.astype({c: object for c in df.columns if pd.api.types.is_string_dtype(df[c])})
    score = next((c for c in df.columns if c.startswith(EVAL_PREFIX)), None)
    return df.sort_values(score, ascending=False, na_position="last") if score else df


def _describe_experiment(c: MlflowClient, exp_id: str, note: str) -> None:
    """The experiment's description (shown above its runs table), unless a person wrote
    another (one that does not open as isolab's do)."""
    current = c.get_experiment(exp_id).tags.get(NOTE_TAG)
    if current is None or current.startswith(SWEEP_NOTE_START):
        c.set_experiment_tag(exp_id, NOTE_TAG, note)


def _quoted(text: str) -> str:
    return text.replace("'", "\\'")
