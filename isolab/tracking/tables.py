"""Tables on a run as MLflow's `log_table` writes them (pandas' split JSON, listed in the run's
`mlflow.loggedArtifacts` tag, where the UI's evaluation view finds them), but replaced rather
than appended: `log_table` appends to a table of that name, so every re-save duplicated its
rows (and downloaded the old file first, with a progress bar), and its `load_table` finds
nothing on a run whose table was not written by `log_table` itself."""

from __future__ import annotations

import json
import math
import posixpath
import tempfile
from pathlib import Path
from typing import Any

#: Past this magnitude a number is shown in scientific notation (FLOPs, large rollout counts).
SCIENTIFIC_FROM = 1e6


def shown_number(value: float) -> float | str:
    """A number as a reader of MLflow's table view expects it: FLOPs as `1.90e12` (three
    significant digits, no `+`), counts as whole numbers, a ratio or a score to 3 decimals
    (ρ 0.841, not 0.8408951676137474). Small values stay numbers, so that a column still sorts."""
    x = float(value)
    if not math.isfinite(x):
        return x
    if abs(x) >= SCIENTIFIC_FROM:
        mantissa, exponent = f"{x:.2e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    if x.is_integer():
        return int(x)
    return round(x, 3) if abs(x) >= 1e-3 else float(f"{x:.3g}")


def readable(frame: Any) -> Any:
    """A copy of `frame` (pandas) with every float shown as `shown_number` does: what MLflow's
    table view displays, cell by cell, as it is written."""
    import pandas as pd

    out = frame.copy()
    for column in out.columns:
        if pd.api.types.is_float_dtype(out[column]):
            values = [None if pd.isna(v) else shown_number(v) for v in out[column]]
            out[column] = pd.Series(values, index=out.index, dtype=object)
    return out


def replace_table(client: Any, run_id: str, frame: Any, path: str) -> None:
    """Write `frame` (a pandas DataFrame) as the table `path` of run `run_id`, replacing it;
    its numbers as a reader expects them (`readable`)."""
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / path
        local.parent.mkdir(parents=True, exist_ok=True)
        readable(frame).to_json(local, orient="split", index=False, date_format="iso")
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
