"""Writing a training run: `RunLogger` creates the run with its tags, logs its params, buffers
its metrics and sets its final status; a FINISHED run gets its description and its FLOP-split
figure (`run_figure`) as it ends.

Metrics are buffered and written in batches: one SQLite transaction per step would cost more
than a tiny model's whole training step. Every write holds Ctrl-C until it is done
(`interrupts.interrupts_deferred`), so a stop never leaves a half-written transaction behind.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

import mlflow
from mlflow.entities import Metric, Param, RunTag
from mlflow.utils.validation import (
    MAX_METRICS_PER_BATCH,
    MAX_PARAM_VAL_LENGTH,
    MAX_PARAMS_TAGS_PER_BATCH,
)

from isolab.tracking.describe import NOTE_TAG, run_note
from isolab.tracking.interrupts import interrupts_deferred, uninterrupted
from isolab.tracking.run_figure import FIGURE_FILE, log_run_figure, stored_history
from isolab.tracking.store import (
    ARTIFACTS_FIX,
    artifacts_problem,
    client,
    experiment_id,
    resolve_uri,
)
from isolab.tracking.tags import (
    HOST_TAG,
    PARENT_ENV,
    PARENT_TAG,
    PID_TAG,
    RUN_KEY_TAG,
    mlflow_key,
    source_tags,
)
from isolab.tracking.views import colour_tags, ensure_view, run_url
from isolab.vocab import FINISHED, RunStatus

log = logging.getLogger(__name__)

FLUSH_EVERY_S = 5.0
END_RETRIES = 8  # status writes tried over ≈ 50 s of a busy store


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
            PID_TAG: str(os.getpid()),
            HOST_TAG: os.uname().nodename,
            "mlflow.runName": run_name,
        }
        if os.environ.get(PARENT_ENV):
            tags[PARENT_TAG] = os.environ[PARENT_ENV]
        with interrupts_deferred():
            run = self.client.create_run(self.experiment_id, run_name=run_name, tags=tags)
        self.run_id = run.info.run_id
        self.run_name = run_name
        self.params: dict[str, Any] = {}
        self._buffer: list[Metric] = []
        self._last_flush = time.monotonic()

    @classmethod
    def attach(cls, run_id: str, run_name: str, params: dict[str, Any], uri: str | None = None):
        """Carry on logging run `run_id`, suspended at a checkpoint (an adaptive sweep paused
        it): it is RUNNING again, tagged with this process's pid. `params` are the run's, for
        its description (`describe_run`)."""
        self = cls.__new__(cls)
        self.uri = resolve_uri(uri)
        self.client = client(self.uri)
        run = self.client.get_run(run_id)
        self.experiment_id = run.info.experiment_id
        self.run_id, self.run_name = run_id, run_name
        self.params = dict(params)
        self._buffer = []
        self._last_flush = time.monotonic()
        with interrupts_deferred():
            self.client.log_batch(run_id, tags=[RunTag(PID_TAG, str(os.getpid()))])
            self.client.update_run(run_id, status="RUNNING")
        return self

    @uninterrupted
    def log_params(self, params: dict[str, Any]) -> None:
        """Log `params`; with n among them, the run's chart colour too (`views.colour_tags`)."""
        self.params.update(params)  # what the run's description quotes (`describe_run`)
        items = [Param(k, _param_str(v)) for k, v in sorted(params.items())]
        for i in range(0, len(items), MAX_PARAMS_TAGS_PER_BATCH):
            batch = items[i : i + MAX_PARAMS_TAGS_PER_BATCH]
            self.client.log_batch(self.run_id, params=batch)
        colour = colour_tags(params)
        if colour:
            self.client.log_batch(self.run_id, tags=[RunTag(k, v) for k, v in colour.items()])

    @uninterrupted
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

    @uninterrupted
    def flush(self) -> None:
        while self._buffer:
            chunk = self._buffer[:MAX_METRICS_PER_BATCH]
            self._buffer = self._buffer[MAX_METRICS_PER_BATCH:]
            self.client.log_batch(self.run_id, metrics=chunk)
        self._last_flush = time.monotonic()

    @uninterrupted
    def log_dict(self, data: Any, artifact_file: str) -> None:
        self.client.log_dict(self.run_id, data, artifact_file)

    @uninterrupted
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

    @uninterrupted
    def log_figure(self, figure, artifact_file: str) -> None:
        self.client.log_figure(self.run_id, figure, artifact_file)

    @uninterrupted
    def end(self, status: RunStatus = FINISHED) -> None:
        """Flush and close the run; status FINISHED, FAILED or KILLED. A FINISHED run gets its
        description and FLOP-split figure first (`describe_run`). The status write is
        retried while the store is busy (`database is locked` under many writers): a run
        must not stay RUNNING because a stop came at a busy moment."""
        try:
            self.flush()
            if status == FINISHED:
                self.describe_run()
        finally:
            for attempt in range(END_RETRIES):
                try:
                    self.client.set_terminated(self.run_id, status=status)
                    break
                except mlflow.exceptions.MlflowException:
                    if attempt == END_RETRIES - 1:
                        raise
                    time.sleep(0.2 * 2**attempt)

    def describe_run(self) -> None:
        """The run's description (`describe.run_note`: its grid point, final avg@k, compute
        and ρ) and its figure (`run_figure`), from what the store holds, and its experiment's
        view (`views.ensure_view`). Best effort: a run whose figure cannot be drawn is still a
        finished run."""
        if _FORKED_AFTER_POLARS:
            log.info(
                "run %s: no description or figure: this process was forked after polars "
                "started its thread pool, where polars hangs (start workers with spawn)",
                self.run_id,
            )
            return
        try:
            history = stored_history(self.client, self.run_id)
            log_run_figure(self.client, self.run_id, history, self.run_name)
            latest = self.client.get_run(self.run_id).data.metrics
            link = run_url("", self.experiment_id, self.run_id, FIGURE_FILE)
            self.client.set_tag(self.run_id, NOTE_TAG, run_note(self.params, latest, link))
            ensure_view(self.client, self.experiment_id)  # the runs table's columns, charts
        except (mlflow.exceptions.MlflowException, OSError, ValueError) as exc:
            log.warning("could not describe run %s: %s", self.run_id, exc)


#: True in a child forked from a process that had imported polars: polars' thread pool does not
#: survive a fork, and its next query hangs (8 forked writers hung in
#: tests/test_concurrent_store.py). isolab's own workers are spawned, never forked.
_FORKED_AFTER_POLARS = False


def _after_fork_in_child() -> None:
    global _FORKED_AFTER_POLARS
    _FORKED_AFTER_POLARS = "polars" in sys.modules


os.register_at_fork(after_in_child=_after_fork_in_child)


def _param_str(value: Any) -> str:
    """`value` as MLflow keeps a param: cut to its limit (6000 characters), marked with `...`."""
    text = str(value)
    if len(text) <= MAX_PARAM_VAL_LENGTH:
        return text
    return text[: MAX_PARAM_VAL_LENGTH - 3] + "..."
