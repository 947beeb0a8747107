"""The completion length a plan assumes, and where it comes from: what a model actually writes
on a task, where this machine has measured it, else the cap.

`isolab.planning` plans a chat task's completions at `max_completion_tokens`, an upper bound:
on a card whose runs wrote 15 of 48 tokens the FLOP plan was 24% high (issue 48). So
`isolab flops`, `sweep plan` and the wall estimate first look for a measured mean:

1. the last finished runs of the same model, task and cap in the MLflow store (TRL's
   `completions/mean_length`, averaged over each run's steps: what its ledger charged);
2. else the probe of the model cached on this machine (`isolab.sweep.probe`: the mean length
   of its free generation before the timed one);
3. else the cap, said so.

The tiny arithmetic models plan their task's exact targets and look nowhere. Only estimates
change: a run's config, its key and its steps (an IsoFLOP grid's M included) never depend on
what was measured, which differs between machines and stores.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from isolab import models
from isolab.config import RunConfig
from isolab.tracking.store import readable, resolve_uri, sqlite_path
from isolab.tracking.tags import KIND_TAG, mlflow_key

log = logging.getLogger(__name__)

#: TRL's metric of the mean completion length of a step's generations, in tokens.
MEAN_LENGTH = "completions/mean_length"
#: Finished runs a measured length is averaged over, newest first.
RECENT_RUNS = 5


@dataclass(frozen=True)
class Lengths:
    """A plan's completion length and its source.

    Attributes:
        completion_len: mean completion tokens to plan with, to a whole token; None: the
            task's default (the cap for a chat task, the exact targets for the tiny arithmetic
            models).
        source: where it comes from, in words, for the plan's reader.
    """

    completion_len: float | None
    source: str

    @property
    def measured(self) -> bool:
        return self.completion_len is not None


def completion_lengths(cfg: RunConfig, uri: str | None = None) -> Lengths:
    """The completion length to plan `cfg` with: measured by the store's last finished runs
    of its model, task and cap, else by a probe cached here, else the cap (module docstring).
    `uri`: the MLflow store (default `$MLFLOW_TRACKING_URI`, else runs/mlflow.db); a SQLite
    file that is not there is not created."""
    if models.is_tiny(cfg.model):
        return Lengths(None, "the task's own targets (answer digits + EOS)")
    runs = _from_store(cfg, uri)
    if runs is not None:
        return runs
    probe = _from_probe(cfg)
    if probe is not None:
        return probe
    return Lengths(
        None,
        f"the cap max_completion_tokens = {cfg.max_completion_tokens}, an upper bound: no "
        f"finished run of {cfg.model} on this task in the store, nor a probe here (`isolab "
        "sweep plan --probe`)",
    )


def _from_store(cfg: RunConfig, uri: str | None) -> Lengths | None:
    """The mean of `MEAN_LENGTH` over the last `RECENT_RUNS` finished runs of `cfg`'s model,
    task and cap in the store, or None (no such run, no store, or a store that cannot be
    read: a plan is made without it)."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    try:
        uri = resolve_uri(uri)
        db = sqlite_path(uri)
        if db is None or not db.exists():  # servers are not asked: a plan works offline
            return None
        c = MlflowClient(tracking_uri=readable(uri))
        ids = [e.experiment_id for e in c.search_experiments()]
        if not ids:
            return None
        where = " and ".join(
            [
                f"params.model = {_quoted(cfg.model)}",
                f"params.task = {_quoted(cfg.task)}",
                f"params.max_completion_tokens = '{cfg.max_completion_tokens}'",
                "attributes.status = 'FINISHED'",
            ]
        )
        found = c.search_runs(
            ids, where, max_results=4 * RECENT_RUNS, order_by=["attributes.end_time DESC"]
        )
        means = []
        for run in found:
            if run.data.tags.get(KIND_TAG) or len(means) == RECENT_RUNS:  # parents, analyses
                continue
            history = [
                m.value for m in c.get_metric_history(run.info.run_id, mlflow_key(MEAN_LENGTH))
            ]
            if history:
                means.append(sum(history) / len(history))
    except (MlflowException, ValueError, OSError) as exc:
        log.warning("completion lengths not read from the store: %s", exc)
        return None
    if not means:
        return None
    mean = sum(means) / len(means)
    return Lengths(
        float(round(mean)),  # whole tokens: the ledger's functions truncate a fraction
        f"measured: {mean:.1f} tokens, TRL's {MEAN_LENGTH} over the last {len(means)} "
        f"finished run(s) of {cfg.model} on this task in {_shown(db)}",
    )


def _from_probe(cfg: RunConfig) -> Lengths | None:
    """The mean free completion length of the probe of `cfg`'s model cached here, or None
    (no probe, or one made before probes measured lengths)."""
    from isolab.sweep.probe import cached_record

    try:
        record = cached_record(cfg)
    except (ValueError, OSError):  # a card that does not load: the plan itself says why
        return None
    mean = (record or {}).get("measured", {}).get("completion_tokens_mean")
    if mean is None:
        return None
    samples = record["measured"].get("samples", "?") if record else "?"
    return Lengths(
        float(round(mean)),
        f"measured: {mean:.1f} tokens, the mean of {samples} free completions of the probe of "
        f"{cfg.model} cached on this machine",
    )


def _quoted(value: str) -> str:
    """A string literal of MLflow's filter language."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _shown(db: Path) -> str:
    from isolab.paths import shown

    return f"the store {shown(db)}"
