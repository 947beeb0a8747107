"""MLflow tracking: the store and the run logger (`store`), and the runs table and its parquet
snapshots (`runs`).

    from isolab import tracking
    tracking.resolve_uri()            # sqlite:///…/runs/mlflow.db unless told otherwise
"""

from isolab.tracking.store import (
    BASE_DIGEST_TAG,
    KIND_TAG,
    PARENT_ENV,
    PARENT_TAG,
    RUN_KEY_TAG,
    RunLogger,
    artifact_root,
    canonical_key,
    client,
    experiment_id,
    find_runs,
    git_sha,
    mark_failed,
    mlflow_key,
    resolve_uri,
    source_tags,
    sweep_parent,
)

__all__ = [
    "BASE_DIGEST_TAG",
    "KIND_TAG",
    "PARENT_ENV",
    "PARENT_TAG",
    "RUN_KEY_TAG",
    "RunLogger",
    "artifact_root",
    "canonical_key",
    "client",
    "experiment_id",
    "find_runs",
    "git_sha",
    "mark_failed",
    "mlflow_key",
    "resolve_uri",
    "source_tags",
    "sweep_parent",
]
