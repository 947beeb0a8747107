"""`isolab report` and `isolab compare`: one self-contained HTML page per sweep, or per pair of
sweeps at equal compute (`isolab.study.pages`), from MLflow experiments or snapshot folders."""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from isolab.cli.common import TrackingUri, check_out, console, fail, load_runs_table, safe
from isolab.vocab import COMPUTE_PREFIX, EVAL_AVG, ROLLOUTS

if TYPE_CHECKING:
    import polars as pl

#: Longest file name a page gets by default (file systems cap a name at 255 bytes).
MAX_FILE_BYTES = 200

Target = Annotated[
    str,
    typer.Argument(
        help="MLflow experiment (the sweep's name) or a snapshot folder runs/<experiment>/ "
        "(holding runs.parquet).",
        show_default=False,
    ),
]
Metric = Annotated[
    str, typer.Option(help="Reward column to read (eval/avg@4, eval/best@4, eval/worst@4, …).")
]
Out = Annotated[
    Path | None,
    typer.Option(help="HTML file to write; default: runs/report/<experiment>.html."),
]


def report_cmd(
    target: Target,
    metric: Metric = EVAL_AVG,
    x: Annotated[
        str,
        typer.Option(
            help="Compute column: compute/rollouts, or flops/total (always, where the runs "
            "vary allocation)."
        ),
    ] = ROLLOUTS,
    budget: Annotated[
        float | None,
        typer.Option(
            help="Budget (in units of --x) the recommendation is for; default: the largest in the data."
        ),
    ] = None,
    n_boot: Annotated[int, typer.Option(help="Bootstrap replicates of every fit.")] = 200,
    out: Out = None,
    log: Annotated[
        bool,
        typer.Option(
            "--log/--no-log",
            help="Also log the page to MLflow, on the parent run of the experiment's sweep "
            "(artifact report/<file>).",
        ),
    ] = False,
    tracking_uri: TrackingUri = None,
) -> None:
    """One sweep's report as a single HTML page that reads offline.

    The frontier and n*(C) with the recommendation (the analysis `isolab frontier` prints),
    the stacked FLOP split (search / learning / reward) against compute, the avg/best/worst@k
    curves, the verdicts of the curated studies that analyse the experiment (with the effect
    each design can detect), and the runs table (n, B_p, M, seed, final metric, ρ, FLOPs).
    Runs that vary `allocation` get a section of their own: the allocators' frontiers against
    FLOPs, read at equal FLOPs, and a table per allocator with its discarded share.
    Figures are embedded PNGs; the page links nowhere.

    Example: isolab report runs/nstar/cpu/main --out nstar-main.html
    """
    from isolab.frontier.fit import MAX_N_BOOT
    from isolab.paths import runs_dir
    from isolab.study.pages import log_page, report_page

    if not 0 <= n_boot <= MAX_N_BOOT:
        fail(f"--n-boot {n_boot:,}: use 0 (no intervals) to {MAX_N_BOOT:,} (default 200).")
    check_budget(budget, x)
    df, experiment, source = _load(target, tracking_uri)
    _check_columns(df, target, metric, x)
    path = _output(out or runs_dir() / "report" / _file_name(_flat(experiment)))
    try:
        page = report_page(
            df, experiment, source=source, metric=metric, x=x, budget=budget, n_boot=n_boot
        )
    except ValueError as exc:
        fail(f"{target}: {exc}")
    _write(path, page.html)
    console.print(f"report of {safe(experiment)} → {safe(path)} ({page.figures} figures)")
    if log:
        run_id = log_page(experiment, path, tracking_uri)
        console.print(
            f"logged to MLflow: experiment {safe(repr(experiment))}, sweep parent run {run_id}, "
            f"artifact report/{safe(path.name)}"
        )


def compare_cmd(
    a: Annotated[str, typer.Argument(help="Sweep A: MLflow experiment or snapshot folder.")],
    b: Annotated[str, typer.Argument(help="Sweep B: MLflow experiment or snapshot folder.")],
    metric: Metric = EVAL_AVG,
    x: Annotated[
        str,
        typer.Option(help="Compute axis both are read at: compute/rollouts, or flops/total."),
    ] = ROLLOUTS,
    out: Annotated[
        Path | None,
        typer.Option(help="HTML file to write; default: runs/report/<A>--vs--<B>.html."),
    ] = None,
    tracking_uri: TrackingUri = None,
) -> None:
    """Two sweeps side by side at equal compute, as a single HTML page that reads offline.

    Per setting (split, model, …) both hold: their seed-mean frontiers on one compute axis,
    each one's best configuration at common compute points (C_max, C_max/2, …), the
    difference B − A in the metric there with the noise it is read against, each sweep's own
    frontier, and what differs between their grids.

    Example: isolab compare runs/nstar/cpu/main runs/nstar/cpu/long
    """
    from isolab.paths import runs_dir
    from isolab.study.pages import compare_page

    df_a, name_a, source_a = _load(a, tracking_uri)
    df_b, name_b, source_b = _load(b, tracking_uri)
    for target, df in ((a, df_a), (b, df_b)):
        _check_columns(df, target, metric, x)
    names = (name_a, name_b) if name_a != name_b else (f"{name_a} ({a})", f"{name_b} ({b})")
    path = _output(
        out or runs_dir() / "report" / _file_name(f"{_flat(name_a)}--vs--{_flat(name_b)}")
    )
    page = compare_page(df_a, df_b, names, sources=(source_a, source_b), metric=metric, x=x)
    _write(path, page.html)
    console.print(f"{safe(names[0])} vs {safe(names[1])} → {safe(path)} ({page.figures} figures)")


def check_budget(budget: float | None, x: str) -> None:
    """Exit 2 unless `--budget` is a compute one can spend: positive and finite (`inf` read as
    a number recommended for no compute at all)."""
    if budget is not None and not (math.isfinite(budget) and budget > 0):
        fail(
            f"--budget {budget:g}: give the compute (in units of --x, {x}) to recommend for, a "
            "positive finite number; or leave it out for the largest in the data."
        )


def _load(target: str, tracking_uri: str | None) -> tuple[pl.DataFrame, str, str]:
    """(runs table of FINISHED runs, experiment name, where it was read); exit 2 on a folder
    that is not a snapshot, an unknown experiment or a store that is not there."""
    from isolab.paths import shown
    from isolab.tracking.snapshot import is_snapshot, read_snapshot_meta, snapshot_experiment

    if Path(target).is_dir() and not is_snapshot(target):
        fail(
            f"{target}: this folder holds no runs.parquet, so it is not a snapshot. Pass a "
            "snapshot folder (written by `isolab runs export` or `isolab study run`) or the "
            "name of an MLflow experiment."
        )
    df = load_runs_table(target, tracking_uri, ["FINISHED"])
    if is_snapshot(target):
        try:
            meta = read_snapshot_meta(target)
        except ValueError as exc:
            fail(str(exc))
        experiment = snapshot_experiment(meta) or Path(target).name
        return df, experiment, f"snapshot {shown(Path(target))}"
    from isolab.tracking.store import resolve_uri, sqlite_path

    # a server's address stays off the page (it reads offline and links nowhere)
    db = sqlite_path(resolve_uri(tracking_uri))
    store = f"the store {shown(db)}" if db is not None else "an MLflow tracking server"
    return df, target, f"MLflow experiment {target} in {store}"


def _check_columns(df: pl.DataFrame, target: str, metric: str, x: str) -> None:
    """Exit 2 unless `x` and `metric` are numeric columns of the runs table, listing those
    there."""
    from isolab.vocab import EVAL_PREFIX, EVAL_SET_PREFIX

    numeric = {c for c, t in df.schema.items() if t.is_numeric()}
    if x not in numeric:
        computes = sorted(c for c in numeric if c.startswith((COMPUTE_PREFIX, "flops")))
        fail(
            f"--x {x!r} is not a column of the runs of {target}; compute columns there: "
            f"{computes}. Pass one of them (compute/rollouts or flops/total)."
        )
    if metric not in numeric:
        evals = sorted(c for c in numeric if c.startswith((EVAL_PREFIX, EVAL_SET_PREFIX)))
        fail(
            f"--metric {metric!r} is not a column of the runs of {target}; evaluation metrics "
            f"there: {evals}. Pass one of them."
        )


def _flat(experiment: str) -> str:
    """An experiment as one file name (nstar/cpu/main → nstar--cpu--main); exit 2 on a name
    that would reach outside runs/report/ (`isolab.paths.name_path`)."""
    from isolab.paths import name_path

    try:
        return name_path(experiment, "experiment").as_posix().replace("/", "--")
    except ValueError as exc:
        fail(f"{exc} Or pass --out FILE.")


def _file_name(stem: str) -> str:
    """`stem.html`, or a digest of it when that is too long a file name."""
    if len(stem.encode()) > MAX_FILE_BYTES:
        stem = f"{stem[:60]}-{hashlib.sha256(stem.encode()).hexdigest()[:12]}"
    return f"{stem}.html"


def _output(path: Path) -> Path:
    """`path`, checked before any work: a folder there is exit 2, and so is a symbolic link
    there or on the way from runs/ (a write through it lands wherever it leads)."""
    from isolab.paths import first_link, runs_dir

    if path.is_dir():
        fail(f"--out {path}: is a folder; name an HTML file, e.g. {path / 'report.html'}.")
    link = first_link(path, runs_dir())
    if link is not None:
        fail(
            f"--out {path}: {link} is a symbolic link (to {os.readlink(link)}): a report is "
            "never written through one. Remove the link, or pick another file."
        )
    return check_out(path, folder=False)  # and a folder to write it in (not /dev/null/x)


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: a link made since `_output` checked is refused (ELOOP), not written through
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
    except OSError as exc:
        fail(f"--out {path}: cannot write the page ({exc.strerror}); pick another file.")


def register(app: typer.Typer) -> None:
    """Add `report` and `compare` to `app`."""
    app.command("report")(report_cmd)
    app.command("compare")(compare_cmd)
