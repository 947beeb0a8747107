"""`isolab` command line: every command has --help; bad input exits 2 with the fix.

Exit status: 0 done; 1 a run failed (the message says which); 2 bad input (the message names
the field and the fix; nothing was started), or an MLflow store another process keeps locked
(`EXIT_STORE_BUSY`: the message names the holder; the same command may succeed later); 130
Ctrl-C (runs cut short are KILLED); 143 SIGTERM of `isolab train` (its run KILLED too).

One module per subject, each with a `register(app)`: `models` (models build|list,
difficulty), `train` (train, flops), `ui`, `demo`, `sweep` (sweep plan|run), `analysis`
(frontier), `report` (report, compare: one HTML page per sweep or pair of sweeps), `runs`
(runs export|import), `study` (study list|run, init), `bundle` (an offline bundle for a GPU
node) and `gpu_check` (gpu-check). This is the only
package that imports typer, and nothing outside it imports it. Modules import only typer, rich
and light isolab modules at the top; a command imports what it needs (torch, MLflow, polars)
when it runs, so that `isolab --help` takes a fraction of a second
(tests/test_cli_startup.py).
"""

from __future__ import annotations

import sys

import typer
from typer.core import TyperGroup

from isolab.cli import (
    analysis,
    bundle,
    demo,
    gpu_check,
    models,
    report,
    runs,
    study,
    sweep,
    train,
    ui,
)
from isolab.cli.common import EXIT_STORE_BUSY, fail
from isolab.logs import configure


class _Commands(TyperGroup):
    """Every command, with one answer to a store another process keeps locked (a sentence
    naming it and exit `EXIT_STORE_BUSY`, not SQLAlchemy's traceback), and one to a store it
    cannot write (`StoreUnwritable`, raised before any run exists: exit 2)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except Exception as exc:
            store = sys.modules.get("isolab.tracking.store")  # not loaded: not the store's
            if store and isinstance(exc, store.StoreUnwritable):
                fail(str(exc))
            locks = sys.modules.get("isolab.tracking.locks")
            message = locks.busy_store_message(exc) if locks else None
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
# `--help` lists single commands, then groups, each in the order registered here
for module in (models, train, ui, demo, sweep, analysis, report, runs, study, bundle, gpu_check):
    module.register(app)


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
