"""`isolab frontier` and `isolab runs export|import`: the analysis side of the command line.

`register(app)` adds the commands to the main `isolab` app (see isolab/cli.py).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Annotated, Any

import polars as pl
import typer
from rich.table import Table

from isolab.cli_common import TrackingUri, console
from isolab.cli_common import fail as _fail

logger = logging.getLogger(__name__)


def _load(target: str, tracking_uri: str | None, statuses: list[str] | None) -> pl.DataFrame:
    from isolab.runs import load_runs

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
    table = Table(*df.columns, title=title, title_justify="left")
    for row in df.head(max_rows).iter_rows():
        table.add_row(*(_fmt(v) for v in row))
    if df.height > max_rows:
        table.caption = f"… {df.height - max_rows} more rows"
    console.print(table)


def _settings(df: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    """(label, frame) per setting (model, task, split, reward) present in the table."""
    from isolab.frontier import SETTING_COLUMNS

    cols = [c for c in SETTING_COLUMNS if c in df.columns and df[c].n_unique() > 1]
    if not cols:
        return [("", df)]
    return [
        ("-".join(str(v) for v in key), grp) for key, grp in df.group_by(cols, maintain_order=True)
    ]


def _busiest_batch(df: pl.DataFrame) -> int | None:
    """The batch B with the most (B_p, n) splits: where the fixed-B trade-off says most."""
    if not {"n", "B_p"} <= set(df.columns):
        return None
    splits = (
        df.select("n", "B_p")
        .unique()
        .with_columns(B=pl.col("n") * pl.col("B_p"))
        .group_by("B")
        .len()
        .sort(["len", "B"], descending=[True, True])
    )
    return int(splits["B"][0]) if splits.height and splits["len"][0] > 1 else None


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
    ] = "eval/avg@4",
    x: Annotated[str, typer.Option(help="Compute column.")] = "compute/rollouts",
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
        typer.Option(
            help="Folder for the figures; default: <snapshot>/figures/ or runs/<study>/figures/."
        ),
    ] = None,
    log: Annotated[
        bool, typer.Option("--log/--no-log", help="Also log figures and tables to MLflow.")
    ] = True,
    tracking_uri: TrackingUri = None,
) -> None:
    """Frontier analysis of a study: n*(C), metric effects, the fixed-batch trade-off, ρ frontiers.

    Prints the tables and writes one figure per analysis (PNG), also logged to MLflow as an
    analysis run of the study's experiment.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from isolab import frontier as fr
    from isolab import plots
    from isolab.runs import is_snapshot, read_snapshot_meta
    from isolab.tracking import runs_dir

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
    study = (
        read_snapshot_meta(target).get("study") or Path(target).name if snapshot else str(target)
    )
    # beside the snapshot, or under runs/<study>/ for an MLflow experiment
    out = out or (Path(target) if Path(target).is_dir() else runs_dir() / study) / "figures"
    out.mkdir(parents=True, exist_ok=True)
    console.print(
        f"[bold]{study}[/]: {df['run_key'].n_unique() if 'run_key' in df.columns else '?'} runs, "
        f"{df.height} evaluation points"
    )
    figures: list[Path] = []
    tables: dict[str, pl.DataFrame] = {}

    def save(fig: Any, name: str) -> None:
        path = out / f"{name}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        figures.append(path)

    metrics = [m for m in dict.fromkeys([metric, *fr.DEFAULT_METRICS]) if m in df.columns]
    for label, sdf in _settings(df):
        suffix = f"-{label}" if label else ""
        title = f" ({label})" if label else ""
        if "n" not in sdf.columns or sdf["n"].n_unique() < 2:
            console.print(f"[yellow]n*(C){title}: skipped, the runs vary no n[/]")
            continue
        effect = fr.metric_effect(sdf, metrics, x=x, n_boot=n_boot)
        res = effect.results[metric]
        print_frame(res.per_n.select("n", "R0", "A", "C_mid", "B", "status"), f"per-n fits{title}")
        print_frame(effect.summary, f"n* saturation by metric{title}")
        tables[f"n_star{suffix}"] = res.table
        tables[f"metric_effect{suffix}"] = effect.summary
        fig, ax = plt.subplots(figsize=(7, 4.5))
        save(plots.plot_frontier(sdf, ax, x=x, y=metric, result=res).figure, f"frontier{suffix}")
        fig, ax = plt.subplots(figsize=(7, 4.5))
        save(plots.plot_n_star(res, ax).figure, f"n_star{suffix}")
        fig, ax = plt.subplots(figsize=(7, 4.5))
        save(plots.plot_metric_effect(effect, ax).figure, f"metric_effect{suffix}")
        B = batch if batch is not None else _busiest_batch(sdf)
        if B is not None:
            trade = fr.tradeoff_fixed_batch(sdf, B, y=metric)
            if trade.status == "ok":
                print_frame(trade.winners, f"fixed batch B = {B}{title}")
                tables[f"tradeoff{suffix}"] = trade.winners
                fig, ax = plt.subplots(figsize=(7, 4.5))
                save(plots.plot_tradeoff(trade, ax).figure, f"tradeoff{suffix}")
            else:
                console.print(f"[yellow]fixed batch B = {B}{title}: {trade.reason}[/]")
        if res.status != "not identifiable" and x in sdf.columns:
            rec = fr.recommend(sdf, budget or float(sdf[x].max()), x=x, y=metric, n_star=res)
            console.print(f"[bold green]recommendation{title}:[/] {rec.summary}")
            for note in rec.notes:
                console.print(f"  [yellow]note:[/] {note}")
        else:
            console.print(f"[yellow]no recommendation{title}: {res.reason}[/]")

    if {"flops/total", "compute/rho", "reward"} <= set(df.columns):
        has_rho = df.filter(pl.col("compute/rho").is_finite())["compute/rho"].round(2).n_unique()
        if has_rho >= 3:
            try:
                rho = fr.rho_frontier(df, flops_band, y=metric, n_boot=n_boot)
            except ValueError as exc:
                _fail(str(exc))
            print_frame(
                rho.fits.select(
                    "reward", "rho_star", "rho_lo", "rho_hi", "n_runs", "status", "reason"
                ),
                f"ρ frontier in IsoFLOP band [{rho.band[0]:.3g}, {rho.band[1]:.3g}]",
            )
            tables["rho_frontier"] = rho.fits
            fig, ax = plt.subplots(figsize=(7, 4.5))
            save(plots.plot_rho_frontier(rho, ax).figure, "rho_frontier")
    console.print(f"figures → {out}/ ({len(figures)} files)")
    for name, t in tables.items():
        t.write_csv(out / f"{name}.csv")
    if log:
        _log_analysis(study, metric, figures, [out / f"{n}.csv" for n in tables], tracking_uri)


def _log_analysis(
    study: str, metric: str, figures: list[Path], tables: list[Path], tracking_uri: str | None
) -> None:
    """Figures and tables as artifacts of an `isolab.kind = analysis` run of the study."""
    from mlflow.tracking import MlflowClient

    from isolab import tracking
    from isolab.runs import KIND_TAG

    uri = tracking.resolve_uri(tracking_uri)
    client = MlflowClient(tracking_uri=uri)
    exp_id = tracking.experiment_id(study, uri)
    run = client.create_run(
        exp_id, run_name=f"frontier·{metric}", tags={KIND_TAG: "analysis", "isolab.metric": metric}
    )
    try:
        for path in [*figures, *tables]:
            client.log_artifact(run.info.run_id, str(path), artifact_path="frontier")
        client.set_terminated(run.info.run_id, status="FINISHED")
    except Exception:
        client.set_terminated(run.info.run_id, status="FAILED")
        raise
    console.print(f"logged to MLflow: experiment {study!r}, run {run.info.run_id}")


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
    """Write a study's runs table as a parquet snapshot (runs.parquet + snapshot.json)."""
    from isolab.runs import export_runs, is_snapshot
    from isolab.tracking import runs_dir

    if is_snapshot(experiment):
        _fail(f"{experiment} is already a snapshot; export takes an MLflow experiment name.")
    df = _load(experiment, tracking_uri, None if all_statuses else ["FINISHED"])
    dest = dest or runs_dir() / experiment
    path = export_runs(df, dest, study=experiment)
    runs = df["run_key"].n_unique() if "run_key" in df.columns else df["run_id"].n_unique()
    console.print(f"exported {runs} runs, {df.height} evaluation points → {path}/")


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
    from isolab.runs import import_runs, is_snapshot

    if not is_snapshot(snapshot):
        _fail(f"{snapshot} is not a snapshot folder (expected {snapshot}/runs.parquet).")
    with console.status(f"importing {snapshot} …"):
        name, done, skipped = import_runs(
            snapshot, experiment=experiment, tracking_uri=tracking_uri
        )
    console.print(f"imported {done} runs into experiment {name!r} ({skipped} already there)")


def register(app: typer.Typer) -> None:
    """Add `frontier` and the `runs` sub-commands (`export`, `import`) to `app`."""
    app.command("frontier")(frontier_cmd)
    runs_app = typer.Typer(
        help="Snapshots of a study's runs: export to parquet, import back.", no_args_is_help=True
    )
    runs_app.command("export")(export_cmd)
    runs_app.command("import")(import_cmd)
    app.add_typer(runs_app, name="runs")
