"""Sweep parent runs: every run of a sweep, trained or imported, is a child of one run that
stands for the sweep (MLflow's UI nests children under it; a study logs its analysis on it).

The sweep runner makes the parent and puts its id in `tags.PARENT_ENV`; the processes it starts
(workers, Ray tasks) inherit the variable, and `logger.RunLogger` tags each run it creates with
it (`tags.PARENT_TAG`, MLflow's own tag). The parent holds no results (`tags.KIND_TAG` =
`tags.SWEEP_KIND`), so the runs table leaves it out.
"""

from __future__ import annotations

from mlflow.tracking import MlflowClient

from isolab.tracking.interrupts import interrupts_deferred
from isolab.tracking.locks import store_lock
from isolab.tracking.store import client, experiment_id, resolve_uri, sqlite_path
from isolab.tracking.tags import KIND_TAG, SWEEP_KIND, SWEEP_TAG, source_tags
from isolab.vocab import FINISHED


def sweep_parent(experiment: str, name: str, uri: str | None = None, **tags: str) -> str:
    """The id of sweep `name`'s parent run in `experiment`, created when missing (runs of a
    sweep, imported or trained, are its children; its analysis is logged on it)."""
    uri = resolve_uri(uri)
    c = client(uri)
    exp_id = experiment_id(experiment, uri)
    # runners started together would each find no parent and make one: the lock (nothing
    # for a server) makes the look-up and the creation one step
    with store_lock(sqlite_path(uri)), interrupts_deferred():
        return _find_or_create_parent(c, exp_id, name, tags)


def _find_or_create_parent(c: MlflowClient, exp_id: str, name: str, tags: dict) -> str:
    found = c.search_runs(
        [exp_id],
        filter_string=f"tags.`{KIND_TAG}` = '{SWEEP_KIND}' and tags.`{SWEEP_TAG}` = "
        f"'{_quoted(name)}'",
        max_results=1,
    )
    if found:
        return found[0].info.run_id
    run_tags = {KIND_TAG: SWEEP_KIND, SWEEP_TAG: name, **source_tags(), **tags}
    run = c.create_run(exp_id, run_name=f"{name.rsplit('/', 1)[-1]} (sweep)", tags=run_tags)
    c.set_terminated(run.info.run_id, status=FINISHED)
    return run.info.run_id


def _quoted(text: str) -> str:
    return text.replace("'", "\\'")
