"""`isolab study list|run`: the notebooks' studies without Jupyter (see `isolab.study`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from isolab.cli.common import TrackingUri, console, err, exit_interrupted, fail, fit_names

study_app = typer.Typer(
    help="The curated studies behind the notebooks: list them, run one at a scale.",
    no_args_is_help=True,
)


@study_app.command("list")
def list_cmd() -> None:
    """Every study: its notebook, sweeps, and which scales have specs and committed results."""
    from isolab import study

    table = Table(title="isolab studies (notebooks/<notebook>.ipynb)")
    for col in ("study", "notebook", "sweeps", "scales"):
        table.add_column(col, overflow="fold")
    for s in study.STUDIES.values():
        scales = []
        for scale in study.SCALES:
            specs = all(study.spec_path(s, scale, w).exists() for w in s.sweeps)
            if specs:
                scales.append(f"{scale}{' ✓' if study.has_snapshots(s, scale) else ''}")
        table.add_row(s.name, s.notebook, ", ".join(s.sweeps), " ".join(scales))
    console.print(fit_names(table, names=2))
    console.print(
        "scales listed have specs under studies/; ✓ = results under runs/<study>/<scale>/,\n"
        "which `isolab study run` and the notebooks re-plot from without training."
    )


@study_app.command("run")
def run_cmd(
    name: Annotated[str, typer.Argument(help="Study name (see `isolab study list`).")],
    scale: Annotated[
        str, typer.Option(help="smoke (CI, seconds), cpu (a laptop, minutes), gpu (real LLMs).")
    ] = "cpu",
    workers: Annotated[int, typer.Option("--workers", "-k", help="Runs at once.")] = 2,
    rerun: Annotated[
        bool,
        typer.Option(
            help="Run the sweeps even when a snapshot exists (finished runs are still skipped)."
        ),
    ] = False,
    log: Annotated[
        bool, typer.Option("--log/--no-log", help="Log figures and tables to MLflow.")
    ] = True,
    tracking_uri: TrackingUri = None,
) -> None:
    """Run a study's sweeps (or re-plot from its snapshot), analyse them, save the figures.

    Same code path as the study's notebook: sweeps resume (finished points are skipped), the
    snapshot goes to runs/<study>/<scale>/<sweep>/, figures and findings to
    runs/<study>/<scale>/.
    """
    import matplotlib

    matplotlib.use("Agg")  # figures go to files: no window, and no display needed (CI, ssh)
    from isolab import study

    if workers < 1:
        fail(f"--workers {workers}: must be ≥ 1.")
    try:
        s = study.get(name)
        if scale not in study.SCALES:
            raise ValueError(f"--scale {scale!r}: choose one of {', '.join(study.SCALES)}.")
        plan = study.describe(s, scale)
    except (ValueError, FileNotFoundError) as exc:
        fail(str(exc))
        return  # unreachable: fail exits; tells linters that `s` and `plan` are set below
    source = "snapshot" if study.has_snapshots(s, scale) and not rerun else "sweep"
    console.print(f"[bold]{s.name}[/] ({scale}): {s.title} — from {source}")
    t0 = time.perf_counter()
    try:
        report = study.run(
            name, scale, workers=workers, rerun=rerun, log=log, tracking_uri=tracking_uri
        )
    except RuntimeError as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(1) from None
    except ValueError as exc:  # the library's guards (a sweep over 168 h, a bad run option)
        fail(str(exc))
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/]: finished runs are kept; run the same command to resume.")
        exit_interrupted()
    out = study.output_dir(s, scale)
    console.print(
        f"{plan['points'].sum()} points in {plan.height} sweep(s); {time.perf_counter() - t0:.1f} s"
    )
    console.print(report.summary_text(), markup=False)
    console.print(f"figures → {out}/figures/ ({len(report.figures)}), findings → {out}/findings.md")


#: What `isolab init` copies into a project, from the checkout or the installed bundle: the
#: notebooks (and their jupytext scripts), the studies' specs, and the examples the README and
#: docs/your-setting.md run (run configs, the word-problems card, its data and reward).
INIT_FOLDERS = ("notebooks", "studies", "examples")
INIT_SUFFIXES = (".ipynb", ".py", ".yaml", ".jsonl")


def init_cmd(
    folder: Annotated[
        Path, typer.Argument(help="Project folder to lay out (created if missing).")
    ] = Path("."),
    force: Annotated[bool, typer.Option(help="Overwrite notebooks already there.")] = False,
) -> None:
    """Lay out an isolab project: the notebooks, the studies' sweep specs, the example run
    configs and task card (`examples/`, word-problems among them), the committed cpu-scale
    snapshots, and runs/ (the MLflow store and caches go there). Works from an installed
    isolab, no checkout needed."""
    import shutil

    from isolab.paths import bundle_dir

    source = bundle_dir()
    if not (source / "notebooks").is_dir():
        fail(f"no notebooks at {source}: reinstall isolab (`pip install isolab`).")
    files = [
        path
        for name in INIT_FOLDERS
        for path in sorted((source / name).rglob("*"))
        if path.is_file() and path.suffix in INIT_SUFFIXES and "__pycache__" not in path.parts
    ]
    snapshots = [p.parent for p in sorted((source / "runs").glob("*/*/*/runs.parquet"))]
    blocker = _in_the_way(
        [folder / p.relative_to(source) for p in files],
        [folder / "runs" / "cache", *(folder / p.relative_to(source) for p in snapshots)],
    )
    if blocker is not None:  # checked before anything is copied: no half laid-out project
        what = "a folder where init writes a file" if blocker.is_dir() else "a file in the way"
        fail(
            f"init: {blocker} is {what}; move it, or pick another FOLDER (--force overwrites "
            "the notebooks and specs init wrote, never this)."
        )
    folder.mkdir(parents=True, exist_ok=True)
    copied = kept = 0
    for path in files:
        dest = folder / path.relative_to(source)
        if dest.exists() and not force:
            kept += 1
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest)
        copied += 1
    for snap in snapshots:
        dest = folder / "runs" / snap.relative_to(source / "runs")
        if not dest.exists():  # the data only: figures and tables are remade from it
            shutil.copytree(snap, dest, ignore=shutil.ignore_patterns("*.png", "*.csv"))
            copied += 1
    (folder / "runs" / "cache").mkdir(parents=True, exist_ok=True)  # marks runs/ as isolab's
    console.print(
        f"{folder.resolve()}: {copied} file(s) and snapshot(s) laid out"
        + (f", {kept} kept (--force overwrites)" if kept else "")
        + f" ({', '.join(f'{name}/' for name in INIT_FOLDERS)}, runs/).\nNext: `isolab study "
        "list`, `isolab study run nstar --scale cpu` (re-plots the shipped snapshot), "
        "`isolab train examples/tiny-easy.yaml`, or `jupyter lab notebooks/`."
    )


def _in_the_way(files: list[Path], folders: list[Path]) -> Path | None:
    """What stops `init` laying out `files` and `folders`: a folder where one of the files goes,
    or a file where a folder goes or above one (FOLDER itself, `notebooks`, `runs`)."""
    for dest in files:
        if dest.is_dir():
            return dest
    for dest in [*(f.parent for f in files), *folders]:
        for above in (dest, *dest.parents):
            if above.exists():
                if not above.is_dir():
                    return above
                break  # a folder: everything above it is one too
    return None


def register(app: typer.Typer) -> None:
    app.add_typer(study_app, name="study")
    app.command("init")(init_cmd)
