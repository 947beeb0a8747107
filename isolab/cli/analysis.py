"""`isolab frontier` and `isolab runs export|import`: the analysis side of the command line.

`register(app)` adds the commands to the main `isolab` app (see isolab/cli.py).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from isolab.cli.common import TrackingUri, console, safe
from isolab.cli.common import fail as _fail
from isolab.vocab import EVAL_AVG, ROLLOUTS

if TYPE_CHECKING:
    import polars as pl

logger = logging.getLogger(__name__)


def _load(target: str, tracking_uri: str | None, statuses: list[str] | None) -> pl.DataFrame:
    from isolab.tracking.runs import load_runs

    try:
        return load_runs(target, tracking_uri=tracking_uri, statuses=statuses)
    except (FileNotFoundError, ValueError) as exc:
        _fail(str(exc))
        raise  # unreachable: _fail exits


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
            return f"{value:.3g}"
        return f"{value:.3f}"
    return str(value)


def print_frame(df: pl.DataFrame, title: str, max_rows: int = 20) -> None:
    """A polars frame as a rich table (first `max_rows` rows)."""
    table = Table(*map(safe, df.columns), title=safe(title), title_justify="left")
    for row in df.head(max_rows).iter_rows():
        table.add_row(*(safe(_fmt(v)) for v in row))
    if df.height > max_rows:
        table.caption = f"… {df.height - max_rows} more rows"
    console.print(table)


def _parse_band(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        _fail(f"--band {text!r}: give two FLOP counts LOW,HIGH, e.g. 1e15,2e15.")
        raise
    if not 0 <= lo < hi:
        _fail(f"--band {text!r}: need 0 ≤ LOW < HIGH.")
    return lo, hi


def frontier_cmd(
    target: Annotated[
        str,
        typer.Argument(
            help="MLflow experiment (the study name) or a snapshot folder runs/<study>/."
        ),
    ],
    metric: Annotated[
        str, typer.Option(help="Reward column to analyse (eval/avg@4, eval/best@4, …).")
    ] = EVAL_AVG,
    x: Annotated[str, typer.Option(help="Compute column.")] = ROLLOUTS,
    budget: Annotated[
        float | None,
        typer.Option(
            help="Budget (in units of --x) to recommend an allocation for; default: the largest in the data."
        ),
    ] = None,
    batch: Annotated[
        int | None,
        typer.Option(
            help="Batch B = B_p·n of the fixed-batch trade-off; default: the B with most splits."
        ),
    ] = None,
    band: Annotated[
        str | None,
        typer.Option(
            help="IsoFLOP band LOW,HIGH of flops/total for the ρ frontier; default: the largest every run reaches."
        ),
    ] = None,
    n_boot: Annotated[int, typer.Option(help="Bootstrap replicates of every fit.")] = 200,
    out: Annotated[
        Path | None,
        typer.Option(help="Output folder; default: runs/frontier/<experiment or snapshot name>/."),
    ] = None,
    log: Annotated[
        bool,
        typer.Option(
            "--log/--no-log",
            help="Also log figures and tables to MLflow, on the parent run of the experiment's sweep.",
        ),
    ] = False,
    tracking_uri: TrackingUri = None,
) -> None:
    """Frontier analysis of any runs: n*(C), metric effects, the fixed-batch trade-off, ρ frontiers.

    Reads an MLflow experiment or a snapshot folder (a folder holding runs.parquet, e.g.
    runs/nstar/cpu/main/), prints the tables and a recommendation, and writes figures, CSV
    tables and findings to an output folder of its own (never into the snapshot). The same
    report as `isolab.study.analyses.frontier.frontier_report`.
    """
    from isolab.paths import name_path, runs_dir
    from isolab.study.analyses.frontier import frontier_report
    from isolab.study.pipeline import save_report
    from isolab.tracking.runs import is_snapshot, read_snapshot_meta, snapshot_experiment

    if n_boot < 0:
        _fail(f"--n-boot {n_boot}: use 0 (no intervals) or a positive count.")
    flops_band = _parse_band(band)
    df = _load(target, tracking_uri, ["FINISHED"])
    if x not in df.columns:
        _fail(f"compute column {x!r} is not in the runs table; columns: {sorted(df.columns)}")
    if metric not in df.columns:
        evals = sorted(c for c in df.columns if c.startswith("eval/"))
        _fail(f"metric {metric!r} is not in the runs table; evaluation metrics there: {evals}")
    snapshot = is_snapshot(target)
    experiment = (
        snapshot_experiment(read_snapshot_meta(target)) or Path(target).name
        if snapshot
        else str(target)
    )
    try:
        out = out or runs_dir() / "frontier" / name_path(
            experiment, "experiment"
        ).as_posix().replace("/", "--")
    except ValueError as exc:
        _fail(str(exc))
    console.print(
        f"[bold]{safe(experiment)}[/]: {df['run_key'].n_unique() if 'run_key' in df.columns else '?'} "
        f"runs, {df.height} evaluation points"
    )
    try:
        options = dict(metric=metric, x=x, budget=budget, batch=batch, band=flops_band)
        report = frontier_report(df, experiment, n_boot=n_boot, **options)
    except ValueError as exc:
        _fail(str(exc))
    for name, table in report.tables.items():
        print_frame(table, name)
    for line in report.summary:
        console.print(line, markup=False)
    save_report(report, out, [experiment] if log else None, tracking_uri)
    console.print(f"figures and tables → {safe(out)}/ ({len(report.figures)} figures)")
    if log:
        console.print(f"logged to MLflow: experiment {safe(repr(experiment))}, run 'analysis'")


def export_cmd(
    experiment: Annotated[str, typer.Argument(help="MLflow experiment (the study name).")],
    dest: Annotated[
        Path | None, typer.Argument(help="Snapshot folder; default: runs/<experiment>/.")
    ] = None,
    all_statuses: Annotated[
        bool, typer.Option(help="Also export FAILED / RUNNING / KILLED runs.")
    ] = False,
    tracking_uri: TrackingUri = None,
) -> None:
    """Write a study's runs table as a parquet snapshot: runs.parquet (one row per evaluation),
    history.parquet (every logged metric, TRL's curves too) and snapshot.json."""
    from isolab.paths import name_path, runs_dir
    from isolab.tracking.runs import export_runs, is_snapshot, load_history

    if is_snapshot(experiment):
        _fail(f"{experiment} is already a snapshot; export takes an MLflow experiment name.")
    try:
        dest = dest or runs_dir() / name_path(experiment, "experiment")
    except ValueError as exc:
        _fail(str(exc))
    df = _load(experiment, tracking_uri, None if all_statuses else ["FINISHED"])
    statuses = None if all_statuses else ["FINISHED"]
    history = load_history(experiment, tracking_uri=tracking_uri, statuses=statuses)
    try:
        path = export_runs(df, dest, experiment=experiment, history=history)
    except ValueError as exc:  # a destination that is a symbolic link
        _fail(str(exc))
    runs = df["run_key"].n_unique() if "run_key" in df.columns else df["run_id"].n_unique()
    console.print(f"exported {runs} runs, {df.height} evaluation points → {safe(path)}/")


def import_cmd(
    snapshot: Annotated[
        Path, typer.Argument(help="Snapshot folder written by `isolab runs export`.")
    ],
    experiment: Annotated[
        str | None, typer.Option(help="Experiment to import into; default: the snapshot's study.")
    ] = None,
    tracking_uri: TrackingUri = None,
) -> None:
    """Load a parquet snapshot back into MLflow, to browse saved results in the UI."""
    import polars as pl

    from isolab.tracking.runs import import_runs, is_snapshot

    if not is_snapshot(snapshot):
        _fail(f"{snapshot} is not a snapshot folder (expected {snapshot}/runs.parquet).")
    try:
        with console.status(f"importing {safe(snapshot)} …"):
            name, done, skipped = import_runs(
                snapshot, experiment=experiment, tracking_uri=tracking_uri
            )
    except (ValueError, FileNotFoundError) as exc:
        _fail(f"{exc} (nothing was imported)")
    except TimeoutError as exc:  # another writer held these run keys all the while
        _fail(str(exc))
    except pl.exceptions.PolarsError as exc:  # a table that is not isolab's (no run_key column)
        first = str(exc).splitlines()[0][:300]
        _fail(f"{snapshot}: not a readable snapshot ({first}) (nothing was imported)")
    console.print(
        f"imported {done} runs into experiment {safe(repr(name))} ({skipped} already there)"
    )


def register(app: typer.Typer) -> None:
    """Add `frontier` and the `runs` sub-commands (`export`, `import`) to `app`."""
    app.command("frontier")(frontier_cmd)
    runs_app = typer.Typer(
        help="Snapshots of a study's runs: export to parquet, import back.", no_args_is_help=True
    )
    runs_app.command("export")(export_cmd)
    runs_app.command("import")(import_cmd)
    app.add_typer(runs_app, name="runs")
