"""A page on MLflow: logged as an artifact of the sweep's parent run, beside the analysis
that `isolab frontier --log` and `isolab study run` put there (`isolab.study.pipeline`)."""

from __future__ import annotations

from pathlib import Path

#: Folder of the parent run's artifacts that holds the pages (the MLflow UI previews HTML).
ARTIFACT_DIR = "report"


def log_page(experiment: str, path: Path, tracking_uri: str | None = None) -> str:
    """Log the page at `path` on the parent run of sweep `experiment` (created when missing),
    under `report/`. Returns the parent's run id."""
    from isolab import tracking

    uri = tracking.resolve_uri(tracking_uri)
    parent = tracking.sweep_parent(experiment, experiment, uri)
    tracking.client(uri).log_artifact(parent, str(path), artifact_path=ARTIFACT_DIR)
    return parent
