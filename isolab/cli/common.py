"""What every `isolab` sub-command shares: the consoles, the tracking option, the exit on bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

console = Console()
err = Console(stderr=True)

TrackingUri = Annotated[
    str | None,
    typer.Option(
        "--tracking-uri",
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///runs/mlflow.db).",
    ),
]


def fail(message: str, code: int = 2) -> None:
    """Print a fix-it message to stderr and exit non-zero (2: bad input)."""
    err.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )


Overrides = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a config field: --set n=16 (repeatable)."),
]


def load_config(path: Path, overrides: list[str]):
    import yaml

    from isolab.config import RunConfig

    try:
        cfg = RunConfig.from_yaml(path)
        if overrides:
            changes = {}
            for item in overrides:
                if "=" not in item:
                    fail(f"--set {item!r}: write FIELD=VALUE, e.g. --set n=16")
                key, value = item.split("=", 1)
                changes[key] = yaml.safe_load(value)
            cfg = RunConfig.from_dict({**asdict(cfg), **changes})
        return cfg
    except (ValueError, FileNotFoundError, TypeError) as exc:
        fail(f"{path}: {exc}")


def asdict(cfg) -> dict:
    import dataclasses

    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
