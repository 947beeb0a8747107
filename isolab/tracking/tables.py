"""Tables on a run as MLflow's `log_table` writes them (pandas' split JSON, listed in the run's
`mlflow.loggedArtifacts` tag, where the UI's evaluation view finds them), but replaced rather
than appended: `log_table` appends to a table of that name, so every re-save duplicated its
rows (and downloaded the old file first, with a progress bar), and its `load_table` finds
nothing on a run whose table was not written by `log_table` itself."""

from __future__ import annotations

import json
import posixpath
import tempfile
from pathlib import Path
from typing import Any


def replace_table(client: Any, run_id: str, frame: Any, path: str) -> None:
    """Write `frame` (a pandas DataFrame) as the table `path` of run `run_id`, replacing it."""
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / path
        local.parent.mkdir(parents=True, exist_ok=True)
        frame.to_json(local, orient="split", index=False, date_format="iso")
        client.log_artifact(run_id, str(local), artifact_path=posixpath.dirname(path) or None)
    mark_tables(client, run_id, [path])


def mark_tables(client: Any, run_id: str, paths: list[str]) -> None:
    """List the tables `paths` in the run's `mlflow.loggedArtifacts` tag, as `log_table` does."""
    from mlflow.utils.mlflow_tags import MLFLOW_LOGGED_ARTIFACTS

    tag = client.get_run(run_id).data.tags.get(MLFLOW_LOGGED_ARTIFACTS, "[]")
    logged = json.loads(tag)
    new = [
        {"path": p, "type": "table"} for p in paths if {"path": p, "type": "table"} not in logged
    ]
    if new:
        client.set_tag(run_id, MLFLOW_LOGGED_ARTIFACTS, json.dumps(logged + new))
