"""`isolab runs export|import`: an experiment's runs as a parquet snapshot, and back into MLflow."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from isolab.cli.common import TrackingUri, console, fail, load_runs_table, safe

runs_app = typer.Typer(
    help="Snapshots of an experiment's runs: export to parquet, import back.",
    no_args_is_help=True,
)


@runs_app.command("export")
def export_cmd(
    experiment: Annotated[str, typer.Argument(help="MLflow experiment (the sweep's name).")],
    dest: Annotated[
        Path | None, typer.Argument(help="Snapshot folder; default: runs/<experiment>/.")
    ] = None,
    all_statuses: Annotated[
        bool, typer.Option(help="Also export FAILED / RUNNING / KILLED runs.")
    ] = False,
    tracking_uri: TrackingUri = None,
) -> None:
    """Write an experiment's runs table as a parquet snapshot: runs.parquet (one row per
    evaluation), history.parquet (every logged metric, TRL's curves too) and snapshot.json."""
    from isolab.paths import name_path, runs_dir
    from isolab.table import run_column
    from isolab.tracking.runs import load_history
    from isolab.tracking.snapshot import export_runs, is_snapshot

    if is_snapshot(experiment):
        fail(f"{experiment} is already a snapshot; export takes an MLflow experiment name.")
    try:
        # name_path refuses a name that would reach outside runs/ (`..`, an absolute path)
        dest = dest or runs_dir() / name_path(experiment, "experiment")
    except ValueError as exc:
        fail(str(exc))
    statuses = None if all_statuses else ["FINISHED"]
    df = load_runs_table(experiment, tracking_uri, statuses)
    history = load_history(experiment, tracking_uri=tracking_uri, statuses=statuses)
    try:  # nothing written through a link: a folder under runs/ on the way is checked too
        path = export_runs(df, dest, experiment=experiment, history=history, root=runs_dir())
    except ValueError as exc:  # a destination, or a folder on the way, that is a symbolic link
        fail(str(exc))
    runs = df[run_column(df)].n_unique()
    console.print(f"exported {runs} runs, {df.height} evaluation points → {safe(path)}/")


@runs_app.command("import")
def import_cmd(
    snapshot: Annotated[
        Path, typer.Argument(help="Snapshot folder written by `isolab runs export`.")
    ],
    experiment: Annotated[
        str | None,
        typer.Option(help="Experiment to import into; default: the snapshot's experiment."),
    ] = None,
    tracking_uri: TrackingUri = None,
) -> None:
    """Load a parquet snapshot back into MLflow, to browse saved results in the UI."""
    import polars as pl

    from isolab.tracking.importing import import_runs
    from isolab.tracking.snapshot import is_snapshot

    if not is_snapshot(snapshot):
        fail(f"{snapshot} is not a snapshot folder (expected {snapshot}/runs.parquet).")
    try:
        with console.status(f"importing {safe(snapshot)} …"):
            name, done, skipped = import_runs(
                snapshot, experiment=experiment, tracking_uri=tracking_uri
            )
    except (ValueError, FileNotFoundError) as exc:
        fail(f"{exc} (nothing was imported)")
    except TimeoutError as exc:  # another writer held these run keys all the while
        fail(str(exc))
    except pl.exceptions.PolarsError as exc:  # a table that is not isolab's (no run_key column)
        first = str(exc).splitlines()[0][:300]
        fail(f"{snapshot}: not a readable snapshot ({first}) (nothing was imported)")
    console.print(
        f"imported {done} runs into experiment {safe(repr(name))} ({skipped} already there)"
    )


def register(app: typer.Typer) -> None:
    """Add the `runs` sub-commands (`export`, `import`) to `app`."""
    app.add_typer(runs_app, name="runs")
