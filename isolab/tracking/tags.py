"""The names isolab writes into an MLflow store besides params: run tags, experiment tags and
MLflow-safe metric names. Every writer (`logger`, `parents`, `leases`, `importing`) and reader
(`store.find_runs`, `runs`) of a store takes them from here.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import isolab

RUN_KEY_TAG = "isolab.run_key"
#: sha256 of the base model's weights (`isolab.models.digest`): ties a result to its exact base.
BASE_DIGEST_TAG = "isolab.base_digest"
#: What a run that holds no training results is: `SWEEP_KIND` on a sweep's parent run,
#: `ANALYSIS_KIND` on figure-only runs, `isolab.tracking.leases.LEASE_KIND` on a lease.
KIND_TAG = "isolab.kind"
SWEEP_KIND = "sweep"
ANALYSIS_KIND = "analysis"
SWEEP_TAG = "isolab.sweep"  # on a sweep's parent run: the sweep's name
PARENT_TAG = "mlflow.parentRunId"  # MLflow's own: the UI nests a child under its parent
#: The parent run of every run this process creates (set by the sweep runner; workers and Ray
#: tasks inherit it), so that a sweep's points are children of the sweep's run.
PARENT_ENV = "ISOLAB_PARENT_RUN_ID"
#: The process writing a run (a training run, a lease, an import): a RUNNING run whose process
#: is gone is stale (`isolab.sweep.resume`, `isolab.tracking.leases`).
HOST_TAG, PID_TAG = "isolab.host", "isolab.pid"
#: On a run of an adaptive sweep whose arm the rule stopped: the rung, in rollouts. Such a run
#: is done: no runner, adaptive or not, resumes or trains its run key again.
STOPPED_AT_TAG = "isolab.adaptive.stopped_at"
#: On a run of an adaptive sweep whose arm the rule stopped: why (`judge_rung`'s reason).
STOP_REASON_TAG = "isolab.adaptive.reason"
#: MLflow's status of an adaptive sweep's run paused at a rung, waiting to carry on.
SCHEDULED = "SCHEDULED"
#: On runs (and the sweep parent) an import wrote: the snapshot folder's name.
IMPORTED_FROM_TAG = "isolab.imported_from"
#: The experiment's kind for MLflow 3: model training runs (the runs table), not GenAI traces.
#: MLflow 3.17 does not read it while its GenAI / Model training switch exists: the mode comes
#: from the URL or the browser (`isolab.tracking.ui_mode`); a UI without the switch reads it.
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}


def mlflow_key(key: str) -> str:
    """MLflow's name for an isolab metric: MLflow rejects `@`, so `eval/avg@4` → `eval/avg_at_4`."""
    return key.replace("@", "_at_")


def canonical_key(key: str) -> str:
    """Inverse of `mlflow_key`: `eval/best_at_4` → `eval/best@4`."""
    return key.replace("_at_", "@")


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
