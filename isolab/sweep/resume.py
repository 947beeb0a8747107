"""Resuming a sweep: what the store holds of each point of its plan, and the points still to
run. Per run key of the plan, the sweep's runs are FINISHED, RUNNING with a live process, RUNNING
with none (stale), or FAILED / KILLED:

- a FINISHED run exists → skip (never redone, so a finished result is never lost or doubled),
  unless it ran on other base weights than the model now in use (a rebuilt base);
- a RUNNING run whose process is alive (tags `isolab.host` = this host, `isolab.pid` alive and
  started before the run) → leave it to that process;
- a RUNNING run with no live process (a killed runner, a lost machine) → mark it FAILED, redo;
- FAILED / KILLED runs, or none → run;
- a run of an adaptive sweep whose arm the rule stopped (`STOPPED_AT_TAG`, KILLED) → done:
  skipped as a FINISHED one is;
- a run an adaptive sweep paused (SCHEDULED) whose runner is gone → carried on from its
  checkpoint in the same MLflow run (`paused_checkpoint`), or ended KILLED and run again.

While a point trains, its run key is leased in the store (`lease`): of runners started together
on one spec and store, one trains the point and the others skip it.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path

from isolab.models import current_digest
from isolab.paths import cache_root
from isolab.sweep.plan import GridPoint, SweepPlan
from isolab.tracking import (
    BASE_DIGEST_TAG,
    RUN_KEY_TAG,
    client,
    experiment_id,
    find_runs,
    leases,
    mark_failed,
    resolve_uri,
)
from isolab.tracking.leases import process_alive  # also `isolab.sweep.resume.process_alive`
from isolab.tracking.tags import SCHEDULED, STOPPED_AT_TAG
from isolab.vocab import FINISHED, KILLED, RUN_ID, RUNNING

log = logging.getLogger(__name__)


@contextlib.contextmanager
def lease(run_key: str, experiment: str, uri: str) -> Generator[bool, None, None]:
    """The lease on one point while it trains, held in the store itself
    (`isolab.tracking.leases`), so that every runner of that store sees it, on this machine or
    any other in front of one tracking server. Yields False when another live runner holds it
    (that runner trains the point). Two runners never hold one point at once; a lease goes stale
    with its process (this host's dead ones are ended by whoever finds them, other hosts' by
    `pending(reclaim_remote=True)`)."""
    # Held for the whole training, not just taken and dropped: the store scan that planned this
    # runner's points is already stale when it starts, so the lease is what keeps a second
    # runner off a point while its run exists. No wait (`wait_s` = 0): a point someone else
    # holds is theirs to finish, and this runner moves on to its next one.
    with leases.lease(experiment, [run_key], uri, label=f"lease {run_key}") as held:
        yield held


def finished_elsewhere(run_key: str, experiment: str, model: str, uri: str) -> bool:
    """Whether a FINISHED run of this key on the current base weights exists (another runner
    finished the point after this one planned it), or a run an adaptive sweep stopped."""
    digest = current_digest(model)
    for run in find_runs(experiment, uri, run_key=run_key):
        used = run.data.tags.get(BASE_DIGEST_TAG)
        if STOPPED_AT_TAG in run.data.tags:
            return True
        if run.info.status == FINISHED and not (used and digest and used != digest):
            return True
    return False


def adaptive_storage(sweep: str) -> Path:
    """Where `isolab sweep adaptive` keeps sweep `sweep`'s files by default; its runs'
    checkpoints are under ``checkpoints/<run_key>``."""
    return cache_root() / "adaptive" / sweep.replace("/", "-")


def paused_checkpoint(run_key: str, experiment: str, uri: str) -> Path | None:
    """The checkpoint of a run of this key that an adaptive sweep paused and left (SCHEDULED or
    KILLED, not stopped), to carry it on in the same MLflow run; None where there is none. Its
    other paused runs are ended KILLED: none is left SCHEDULED. Call it holding the key's
    lease: a live adaptive runner holds it, so its paused runs are never taken."""
    from isolab.rl.trainer import STATE_FILE, read_state

    keep = adaptive_storage(experiment) / "checkpoints" / run_key
    saved = read_state(keep) if (keep / STATE_FILE).exists() else None
    found = None
    for run in find_runs(experiment, uri, run_key=run_key):
        if STOPPED_AT_TAG in run.data.tags or run.info.status not in (SCHEDULED, KILLED):
            continue
        if saved is not None and saved[RUN_ID] == run.info.run_id:
            found = keep
        elif run.info.status == SCHEDULED:
            log.info(
                "run %s of %s was paused by an adaptive sweep that is gone: KILLED",
                run.info.run_id,
                run_key,
            )
            client(uri).set_terminated(run.info.run_id, status=KILLED)
    return found


@dataclass
class StoreState:
    """The sweep's runs in the store, by run key of the plan's points."""

    finished: dict[str, str] = field(default_factory=dict)  # key → FINISHED run id
    live: dict[str, str] = field(default_factory=dict)  # key → RUNNING run with a live process
    stale: dict[str, list[str]] = field(default_factory=dict)  # key → RUNNING, no process
    failed: dict[str, list[str]] = field(default_factory=dict)  # key → FAILED / KILLED runs
    stopped: dict[str, str] = field(default_factory=dict)  # key → run an adaptive sweep stopped


def scan_store(
    plan: SweepPlan, tracking_uri: str | None = None, reclaim_remote: bool = False
) -> StoreState:
    """Sort the sweep's runs by state (see the module docstring), without changing anything.

    A RUNNING run started on another host cannot be checked: it counts as live unless
    `reclaim_remote` (that machine is gone) makes it stale.
    """
    digests = {p.run_key: current_digest(p.config.model) for p in plan.points}
    host = os.uname().nodename
    state = StoreState()
    for run in find_runs(plan.spec.name, tracking_uri):
        key = run.data.tags.get(RUN_KEY_TAG)
        if key not in digests:
            continue
        status, run_id = run.info.status, run.info.run_id
        used = run.data.tags.get(BASE_DIGEST_TAG)
        if STOPPED_AT_TAG in run.data.tags:  # its arm stopped early: done, never run again
            state.stopped.setdefault(key, run_id)
        elif status == FINISHED and used and digests[key] and used != digests[key]:
            # finished on other base weights (a rebuilt model): not this point's result
            log.info("run %s of %s used base %s, not %s: redone", run_id, key, used, digests[key])
        elif status == FINISHED:
            state.finished.setdefault(key, run_id)
        elif status == RUNNING:
            tags = run.data.tags
            if tags.get("isolab.host") == host:
                pid = int(tags.get("isolab.pid", "0") or 0)
                alive = pid > 0 and process_alive(pid, run.info.start_time)
            else:
                alive = not reclaim_remote
            if alive:
                state.live.setdefault(key, run_id)
            else:
                state.stale.setdefault(key, []).append(run_id)
        else:
            state.failed.setdefault(key, []).append(run_id)
    for key in [*state.finished, *state.stopped]:  # done, whatever else its key left
        state.live.pop(key, None)
        state.failed.pop(key, None)
    return state


def pending(
    plan: SweepPlan,
    tracking_uri: str | None = None,
    reclaim_remote: bool = False,
    limit: int | None = None,
) -> tuple[list[GridPoint], StoreState]:
    """The points still to run, in grid order, after marking stale RUNNING runs FAILED
    (the returned state's `stale` lists those runs, now FAILED).

    Creates the sweep's experiment (and a fresh store's tables) so that workers never race
    to do it. `limit` keeps the first points only (a pilot).
    """
    uri = resolve_uri(tracking_uri)
    experiment_id(plan.spec.name, uri)
    state = scan_store(plan, uri, reclaim_remote)
    c = client(uri)
    ended = leases.release_stale(plan.spec.name, uri, reclaim_remote)
    if ended:
        log.info("%d lease(s) of gone runners ended", ended)
    for key, run_ids in state.stale.items():
        for run_id in run_ids:
            log.info("run %s of %s was RUNNING with no live process: marked FAILED", run_id, key)
            mark_failed(run_id, uri)
            c.set_tag(run_id, "isolab.failure", "RUNNING with no live process: redone by a sweep")
            if key not in state.finished:
                state.failed.setdefault(key, []).append(run_id)
    done = state.finished.keys() | state.stopped.keys() | state.live.keys()
    todo = [p for p in plan.points if p.run_key not in done]
    return (todo if limit is None else todo[: max(0, limit)]), state
