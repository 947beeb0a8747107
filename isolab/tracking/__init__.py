"""MLflow tracking: where runs are stored, how they are written, and the runs table read back.

    from isolab import tracking
    tracking.resolve_uri()            # sqlite:///…/runs/mlflow.db unless told otherwise

Modules, from the bottom:

- `tags`: the names isolab writes into a store (run tags, MLflow-safe metric names);
- `interrupts`: store writes that Ctrl-C does not cut in half;
- `locks`: a SQLite store's lock, and the sentence for a store another process keeps busy;
- `store`: the store's URI, making it ready, a client, experiments, finding runs;
- `logger`: `RunLogger`, one training run written; `parents`: a sweep's parent run;
- `leases`: which writer is writing a run key, recorded in the store;
- `columns`, `runs`, `snapshot`, `importing`: the runs table, from MLflow or a parquet
  snapshot, and a snapshot loaded back into a store.
"""

from isolab.tracking.logger import RunLogger
from isolab.tracking.parents import sweep_parent
from isolab.tracking.store import (
    artifact_root,
    client,
    experiment_id,
    find_runs,
    mark_failed,
    resolve_uri,
)
from isolab.tracking.tags import (
    BASE_DIGEST_TAG,
    KIND_TAG,
    PARENT_ENV,
    PARENT_TAG,
    RUN_KEY_TAG,
    canonical_key,
    git_sha,
    mlflow_key,
    source_tags,
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
