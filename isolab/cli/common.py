"""What every `isolab` sub-command shares: the consoles, the tracking option, the exit on bad input."""

from __future__ import annotations

import faulthandler
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from isolab.userinput import cut

if TYPE_CHECKING:  # polars is imported by the commands that read runs, never by `--help`
    import polars as pl

console = Console()
#: Errors never wrap: a message is one line whatever the terminal's width, so that a config
#: snippet in it (`set trust_remote_code: true`) can be copied and a log grepped.
err = Console(stderr=True, soft_wrap=True)
#: Piped or captured output (a log, CI, a notebook's subprocess) is not wrapped at 80 columns
#: either; tables still fit the width.
console.soft_wrap = not console.is_terminal
#: After Ctrl-C the runs are ended: a process still here this long after prints its stacks and
#: exits (a library's thread that will not stop must not keep a terminal waiting).
EXIT_GRACE_S = 20.0
#: Exit status when another process keeps the store locked: 2, as for any refusal before work
#: starts (nothing was written; the message names the holder and says to retry).
EXIT_STORE_BUSY = 2
#: Longest message `fail` prints: user text in it is cut short already; this is the last guard.
MAX_MESSAGE_CHARS = 2000


def _checked_uri(ctx: typer.Context, value: str | None) -> str | None:
    """--tracking-uri (else $MLFLOW_TRACKING_URI) checked before the command does anything: a
    scheme isolab knows, a server that answers (`isolab.tracking.store.check_uri`)."""
    import os

    uri = value or os.environ.get("MLFLOW_TRACKING_URI")
    if not uri or ctx.resilient_parsing:  # the default store; shell completion
        return value
    from isolab.tracking.store import TrackingUriError, check_uri

    try:
        check_uri(uri, "--tracking-uri" if value else "MLFLOW_TRACKING_URI")
    except TrackingUriError as exc:
        fail(str(exc))
    return value


TrackingUri = Annotated[
    str | None,
    typer.Option(
        "--tracking-uri",
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///runs/mlflow.db).",
        callback=_checked_uri,
    ),
]


def exit_interrupted(code: int = 130) -> None:
    """Exit 130 after Ctrl-C (143 after SIGTERM), with a watchdog on the way out
    (`EXIT_GRACE_S`)."""
    faulthandler.dump_traceback_later(EXIT_GRACE_S, exit=True)
    raise typer.Exit(code)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a fix-it message to stderr and exit non-zero (2: bad input, `EXIT_STORE_BUSY`:
    the store is locked by another process)."""
    err.print(f"[bold red]error:[/] {safe(message, MAX_MESSAGE_CHARS)}")
    raise typer.Exit(code)


def safe(text: object, limit: int = 200) -> str:
    """User text (a name, a value, an error) ready for rich markup: cut to `limit` characters
    and escaped, so that `[/x]` in a sweep's name prints as it is."""
    return escape(cut(text, limit))


def check_out(path: Path, *, folder: bool, option: str = "--out") -> Path:
    """`path`, an output `folder` (else a file), checked before any work: exit 2 naming `option`
    when a file stands where the folder goes (or a folder where the file goes), or when the
    nearest existing folder above it is a file (`/dev/null/x`) or not writable."""
    import os

    if path.exists() and path.is_dir() != folder:
        kind, want = ("a file", "a folder") if folder else ("a folder", "a file")
        fail(f"{option} {path}: is {kind}; name {want} to write.")
    above = path if folder else path.parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir():
        fail(f"{option} {path}: {above} is not a folder, so nothing goes under it; pick another.")
    if not os.access(above, os.W_OK):
        fail(f"{option} {path}: the folder {above} is not writable; pick one you can write.")
    return path


def check_artifacts(tracking_uri: str | None, experiment: str) -> None:
    """Exit 2 when a run's artifacts could not be saved (a read-only folder): before the
    model loads, not after it trained."""
    from isolab.tracking.store import ARTIFACTS_FIX, artifacts_problem, resolve_uri

    problem = artifacts_problem(resolve_uri(tracking_uri), experiment)
    if problem:
        fail(f"{problem}: {ARTIFACTS_FIX}")


def fit_names(table: Table, names: int = 1) -> Table:
    """`table`, once its rows are in, made to fit the console (80 columns when piped) without
    cutting a name short: its first `names` columns (a preset's, a run's) neither wrap nor
    shrink below their longest cell, and the other columns fold onto a second line where they
    must. Rich's default shrinks every column alike, and a name came out as `tiny…`."""
    wide = console.options.update_width(10_000)  # a cell's natural width: no wrapping
    for i, column in enumerate(table.columns):
        if i < names:
            cells = [column.header, *column.cells]
            column.no_wrap = True
            column.min_width = max(Measurement.get(console, wide, c).maximum for c in cells)
        else:
            column.no_wrap, column.overflow = False, "fold"
    return table


def progress() -> Progress | LineProgress:
    """A progress bar on a terminal; elsewhere (a log file, CI, `!isolab` in a notebook) a
    line each tenth of the way (`LineProgress`). Tasks take an `info` field."""
    if not console.is_terminal:
        return LineProgress()
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )


class LineProgress:
    """Progress where the output is not a terminal: rich's bar redraws one line with carriage
    returns, and piped it printed only its last state when it stopped. This prints a line when a
    task crosses each `every` of its total, and at its end: `name: step 30/150 (20%) · info`.
    Takes the calls of rich's `Progress` that isolab makes (`add_task`, `update`,
    `remove_task`, a `with` block, `console`)."""

    def __init__(self, every: float = 0.1) -> None:
        self.every = every
        self.console = console
        self._tasks: dict[TaskID, _LineTask] = {}
        self._next = 0  # task ids are never reused

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self._tasks.clear()

    def add_task(self, description: str, total: float | None = None, **fields) -> TaskID:
        task = TaskID(self._next)
        self._next += 1
        self._tasks[task] = _LineTask(description, total or 0, fields)
        return task

    def update(
        self,
        task: TaskID,
        *,
        completed: float | None = None,
        advance: float | None = None,
        **fields,
    ) -> None:
        t = self._tasks.get(task)
        if t is None or t.total <= 0:
            return
        t.fields.update(fields)
        t.completed = completed if completed is not None else t.completed + (advance or 0)
        share = t.completed / t.total
        mark = math.inf if share >= 1 else math.floor(share / self.every + 1e-9)
        if mark > t.shown:  # a line per `every` crossed, one at the end
            t.shown = mark
            info = t.fields.get("info", "")
            self.console.print(
                f"{t.description}: step {t.completed:,.0f}/{t.total:,.0f} ({share:.0%})"
                + (f" · {info}" if info else "")
            )

    def remove_task(self, task: TaskID) -> None:
        self._tasks.pop(task, None)


@dataclass
class _LineTask:
    description: str
    total: float
    fields: dict
    completed: float = 0.0
    shown: float = 0.0  # the last mark printed (a multiple of `every`; inf: the end)


Overrides = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Override a config field: --set n=16, --set extra.grpo.top_p=0.9 (repeatable).",
    ),
]


def load_config(path: Path, overrides: list[str]):
    """The run config at `path` with `--set` overrides applied; exit 2 naming the field."""
    from isolab.config import RunConfig

    try:
        cfg = RunConfig.from_yaml(path)
        if overrides:
            cfg = cfg.with_overrides(overrides)
        return cfg
    except (ValueError, FileNotFoundError, TypeError) as exc:
        fail(f"{path}: {exc}")


def load_runs_table(
    target: str, tracking_uri: str | None, statuses: list[str] | None
) -> pl.DataFrame:
    """The runs table of an MLflow experiment or a snapshot folder; exit 2 saying what is missing."""
    from isolab.tracking.runs import load_runs

    try:
        return load_runs(target, tracking_uri=tracking_uri, statuses=statuses)
    except (FileNotFoundError, ValueError) as exc:
        fail(str(exc))
        raise  # unreachable: fail exits; tells type checkers that nothing is returned here
