"""What every `isolab` sub-command shares: the consoles, the tracking option, the exit on bad input."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

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
