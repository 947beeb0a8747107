"""`isolab` command line: every command has --help; bad input exits 2 with the fix.

Exit status: 0 done; 1 a run failed (the message says which); 2 bad input (the message names
the field and the fix; nothing was started), or an MLflow store another process keeps locked
(`EXIT_STORE_BUSY`: the message names the holder; the same command may succeed later); 130
Ctrl-C (runs cut short are KILLED).

One module per command group (`models`, `run`, `sweep`, `analysis`, `study`); this is the only
package that imports typer, and nothing outside it imports it.
"""

from __future__ import annotations

import sys

import typer
from typer.core import TyperGroup

from isolab.cli import analysis, models, run, study, sweep
from isolab.cli.common import EXIT_STORE_BUSY, fail
from isolab.logs import configure


class _Commands(TyperGroup):
    """Every command, with one answer to a store another process keeps locked: a sentence
    naming it and exit `EXIT_STORE_BUSY`, not SQLAlchemy's traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except Exception as exc:
            store = sys.modules.get("isolab.tracking.store")  # not loaded: not the store's
            message = store.busy_store_message(exc) if store else None
            if message is None:
                raise
            fail(message, EXIT_STORE_BUSY)


app = typer.Typer(
    cls=_Commands,
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
