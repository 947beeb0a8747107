"""`isolab frontier`: frontier analysis of any runs, from an MLflow experiment or a snapshot."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from isolab.cli.common import (
    TrackingUri,
    check_out,
    console,
    fail,
    fit_names,
    load_runs_table,
    safe,
)
from isolab.cli.report import check_budget
from isolab.vocab import EVAL_AVG, EVAL_PREFIX, ROLLOUTS, RUN_KEY

if TYPE_CHECKING:
    import polars as pl


def _fmt(value: Any) -> str:
    """A table cell: NaN as a dash, very large or small numbers in scientific notation."""
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
            return f"{value:.3g}"
        return f"{value:.3f}"
    return str(value)


#: Longest text cell a table prints whole; a longer one becomes a footnote mark, its text given
#: in full under the table, so that a 'reason' does not wrap over twenty lines.
MAX_CELL_CHARS = 24


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def print_frame(df: pl.DataFrame, title: str, max_rows: int = 12) -> None:
    """A polars frame as a rich table that fits the console: columns and rows holding nothing
    but NaN dropped (a row is not kept for its first column alone), long text cells as
    footnotes, and past `max_rows` rows an evenly spaced selection (the saved CSV has all)."""
    rows = [r for r in df.iter_rows() if not all(map(_blank, r[1:]))] if df.width > 1 else []
    keep = [j for j in range(df.width) if not all(_blank(r[j]) for r in rows)]
    if not rows or len(keep) < 2:
        console.print(f"{safe(title)}: no finite values ({df.height} rows)")
        return
    shown = rows
    if len(rows) > max_rows:
        step = (len(rows) - 1) / (max_rows - 1)
        shown = [rows[i] for i in sorted({round(k * step) for k in range(max_rows)})]
    notes: dict[str, int] = {}
    table = Table(*(safe(df.columns[j]) for j in keep), title=safe(title), title_justify="left")
    for row in shown:
        cells = []
        for j in keep:
            text = _fmt(row[j])
            if len(text) > MAX_CELL_CHARS:
                mark = notes.setdefault(text, len(notes) + 1)
                text = f"[{mark}]"
            cells.append(safe(text))
        table.add_row(*cells)
    caption = []
    if len(shown) < len(rows):
        caption.append(f"{len(shown)} of {len(rows)} rows, evenly spaced")
    if len(rows) < df.height:
        caption.append(f"{df.height - len(rows)} rows without a finite value left out")
    table.caption = "; ".join(caption) or None
    console.print(fit_names(table))
    for text, mark in notes.items():
        console.print(f"  [{mark}] {text}", markup=False, highlight=False)


def _parse_band(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        fail(f"--band {text!r}: give two FLOP counts LOW,HIGH, e.g. 1e15,2e15.")
        raise
    if not 0 <= lo < hi:
        fail(f"--band {text!r}: need 0 ≤ LOW < HIGH.")
    return lo, hi


def frontier_cmd(
    target: Annotated[
        str,
        typer.Argument(
            help="MLflow experiment (the sweep's name) or a snapshot folder runs/<experiment>/."
        ),
    ],
    metric: Annotated[
        str, typer.Option(help="Reward column to analyse (eval/avg@4, eval/best@4, …).")
    ] = EVAL_AVG,
    x: Annotated[
        str,
        typer.Option(
            help="Compute column; flops/total whenever the runs vary allocation (allocators "
            "compare at equal FLOPs, not rollouts)."
        ),
    ] = ROLLOUTS,
    budget: Annotated[
        float | None,
        typer.Option(
            help="Budget (in units of --x) to recommend an allocation for; default: the largest in the data. "
            "Beyond 2× the largest (beyond the data, if the advice fails or cannot fail its check "
            "on ≤ C/2, or the fitted optimum moved within the data) the advice is refused and the "
            "allocation at that limit given instead."
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
    report as `isolab.study.frontier.frontier_report`.

    Runs that vary `allocation` (uniform, dynamic, early_stop, variance) are analysed per
    allocator, each with its own frontier and recommendation, and compared at equal FLOPs
    (flops/total, whatever --x says): the best allocator at the most FLOPs every one reaches,
    with its n and B_p, and per allocator the share of FLOPs spent on discarded rollouts.

    The recommendation prints its own validation next to it (ScaleRL's protocol,
    `isolab.frontier.validate`): the same advice made from the runs up to C/2 and C/4, C the
    largest compute every run reaches, with its regret at C against the noise, beside its
    baselines (the best seed mean at ≤ C/2 or C/4, a random arm) and the kind of world each
    check covered (did the best move between C/2 and C?). A check that even a random arm
    passes is printed as one that cannot fail. It refuses a point allocation beyond 2× the
    largest compute in the data, and beyond the data when the C/2 check is not within noise
    or the fitted optimum moved within the data (the planted worlds of docs/statistics.md:
    there the advice did not beat holding the optimum fixed).
    """
    from isolab.frontier.fit import MAX_N_BOOT
    from isolab.paths import name_path, runs_dir
    from isolab.study.frontier import frontier_report
    from isolab.study.pipeline import save_report
    from isolab.tracking.snapshot import is_snapshot, read_snapshot_meta, snapshot_experiment

    if not 0 <= n_boot <= MAX_N_BOOT:
        fail(f"--n-boot {n_boot:,}: use 0 (no intervals) to {MAX_N_BOOT:,} (default 200).")
    check_budget(budget, x)
    flops_band = _parse_band(band)  # before the runs load: a typo in --band fails at once
    df = load_runs_table(target, tracking_uri, ["FINISHED"])
    if x not in df.columns:
        fail(f"compute column {x!r} is not in the runs table; columns: {sorted(df.columns)}")
    if metric not in df.columns:
        evals = sorted(c for c in df.columns if c.startswith(EVAL_PREFIX))
        fail(f"metric {metric!r} is not in the runs table; evaluation metrics there: {evals}")
    snapshot = is_snapshot(target)
    # a snapshot is reported (and --log logs) under the experiment it was exported from; one
    # without that record, under its folder's name
    try:
        experiment = (
            snapshot_experiment(read_snapshot_meta(target)) or Path(target).name
            if snapshot
            else str(target)
        )
    except ValueError as exc:  # a snapshot.json that is not a JSON object
        fail(str(exc))
    try:
        # one folder per experiment, even for a name with slashes (nstar/cpu/main →
        # nstar--cpu--main); name_path refuses a name that would reach outside runs/
        out = out or runs_dir() / "frontier" / name_path(
            experiment, "experiment"
        ).as_posix().replace("/", "--")
    except ValueError as exc:
        fail(str(exc))
    check_out(out, folder=True)
    console.print(
        f"[bold]{safe(experiment)}[/]: {df[RUN_KEY].n_unique() if RUN_KEY in df.columns else '?'} "
        f"runs, {df.height} evaluation points"
    )
    try:
        report = frontier_report(
            df,
            experiment,
            n_boot=n_boot,
            metric=metric,
            x=x,
            budget=budget,
            batch=batch,
            band=flops_band,
        )
    except ValueError as exc:
        fail(str(exc))
    for name, table in report.tables.items():
        print_frame(table, name)
    for line in report.summary:
        console.print(line, markup=False)
    save_report(report, out, [experiment] if log else None, tracking_uri)
    console.print(f"figures and tables → {safe(out)}/ ({len(report.figures)} figures)")
    if log:
        console.print(f"logged to MLflow: experiment {safe(repr(experiment))}, run 'analysis'")


def register(app: typer.Typer) -> None:
    """Add `frontier` to `app`."""
    app.command("frontier")(frontier_cmd)
