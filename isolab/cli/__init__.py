"""`isolab` command line: every command has --help; bad input exits 2 with the fix.

One module per command group (`models`, `run`, `sweep`, `analysis`, `study`); this is the only
package that imports typer, and nothing outside it imports it.
"""

from __future__ import annotations

import typer

from isolab.cli import analysis, models, run, study, sweep
from isolab.logs import configure

app = typer.Typer(
    help="isolab: where should RL post-training compute go? GRPO runs, a FLOP ledger, "
    "iso-compute sweeps and frontier fits, tracked in MLflow.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
for group in (models, run, sweep, analysis, study):
    group.register(app)


def _version(value: bool) -> None:
    if value:
        from isolab import __version__

        typer.echo(f"isolab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """isolab: where should RL post-training compute go? GRPO runs, a FLOP ledger,
    iso-compute sweeps and frontier fits, tracked in MLflow."""


def main() -> None:
    configure()
    app()


if __name__ == "__main__":
    main()
