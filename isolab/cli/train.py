"""`isolab train|flops`: one GRPO run, and its planned FLOPs before spending any."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from isolab.cli.common import (
    Overrides,
    TrackingUri,
    check_artifacts,
    console,
    err,
    exit_interrupted,
    fail,
    fit_names,
    load_config,
    progress,
    safe,
)
from isolab.vocab import EVAL_AVG, FLOPS_STEP_PREFIX, FLOPS_TOTAL, RHO


def train(
    config: Annotated[Path, typer.Argument(help="RunConfig YAML.")],
    tracking_uri: TrackingUri = None,
    set_: Overrides = None,
) -> None:
    """Run one GRPO training run from a YAML config and log it to MLflow."""
    from isolab.tracking.interrupts import Terminated, terminate_as_interrupt

    cfg = load_config(config, set_ or [])
    check_artifacts(tracking_uri, cfg.experiment)
    say_scope(cfg.model)
    started_ms = int(time.time() * 1000)
    try:
        with terminate_as_interrupt():  # SIGTERM ends the run KILLED, as Ctrl-C does
            result = train_with_progress(cfg, tracking_uri)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        fail(str(exc), _failure_code(exc, cfg, tracking_uri, started_ms))
    except KeyboardInterrupt as exc:  # the run is ended KILLED by then
        how = "stopped (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
        err.print(f"[yellow]{how}[/]: the run is marked KILLED.")
        exit_interrupted(143 if isinstance(exc, Terminated) else 130)
    print_results([(cfg, result)])


def say_scope(model: str) -> None:
    """What a run of `tiny-chat` measures (plumbing, not the task), said before it is planned
    or trained: its avg@k would otherwise read as a result."""
    from isolab.models import TINY_CHAT_SCOPE, is_chat_preset

    if is_chat_preset(model):
        err.print(f"[yellow]note:[/] {safe(TINY_CHAT_SCOPE, 1000)}.")


def _failure_code(exc: Exception, cfg, tracking_uri: str | None, started_ms: int) -> int:
    """1 where the run failed: this command's run FAILED (a reward that raised or returned NaN,
    a killed rank), or user code called `sys.exit` (a verifier checking the golds, before the
    run exists: a failure, not a refusal); 2 where bad input was refused before the run existed
    (the command line's exit codes, docs/tracking.md)."""
    from isolab.tracking import find_runs

    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, SystemExit):
            return 1
        cause = cause.__cause__
    try:
        runs = find_runs(cfg.experiment, tracking_uri, run_key=cfg.run_key)
    except Exception:  # a store that cannot be read holds no run of ours
        return 2
    # a second's slack: MLflow's start time and this clock may round differently
    mine = [r for r in runs if (r.info.start_time or 0) >= started_ms - 1000]
    return 1 if any(r.info.status == "FAILED" for r in mine) else 2


def train_with_progress(cfg, tracking_uri):
    """`isolab.rl.train.train` under a progress bar: steps done of M·iterations, ρ, avg@4."""
    # imported here: the trainer pulls in torch, transformers and TRL (seconds), which `--help`
    # and argument errors must not wait for (tests/test_cli_startup.py)
    from isolab.rl.train import train as run_train

    with progress() as bar:
        # a run on several processes (torchrun) reports when they have finished
        info = f"on {cfg.processes} processes, shown when done" if cfg.processes > 1 else ""
        task = bar.add_task(safe(cfg.run_name), total=cfg.M * cfg.num_iterations, info=info)

        def on_step(step: int, metrics: dict) -> None:
            info = f"ρ {metrics.get(RHO, 0):.2f}"
            if EVAL_AVG in metrics:  # only the steps that evaluated have it
                info += f" avg@4 {metrics[EVAL_AVG]:.3f}"
            bar.update(task, completed=step, info=info)

        return run_train(cfg, tracking_uri=tracking_uri, on_step=on_step)


def print_results(rows) -> None:
    """Two compact tables: validation metrics base → final, then the FLOP split and ρ."""
    evals = Table("run", "avg@4", "best@4", "worst@4", title="validation: base → final")
    spend = Table(
        "run",
        "search",
        "learning",
        "reward",
        "FLOPs",
        "ρ",
        "wall s",
        title="compute (shares of flops/total)",
    )
    for cfg, r in rows:
        cells = [
            f"{r.base_eval.get(f'eval/{k}@4', float('nan')):.3f} → "
            f"{r.final_eval.get(f'eval/{k}@4', float('nan')):.3f}"
            for k in ("avg", "best", "worst")
        ]
        evals.add_row(safe(cfg.run_name), *cells)
        m = r.final_metrics
        total = m.get(FLOPS_TOTAL, 0.0) or 1.0  # a run that logged no FLOPs: shares of 0%
        shares = [
            f"{m.get(f'flops/{k}', 0.0) / total:.0%}" for k in ("search", "learning", "reward")
        ]
        spend.add_row(
            safe(cfg.run_name),
            *shares,
            f"{m.get(FLOPS_TOTAL, 0):.2e}",
            f"{m.get(RHO, 0):.2f}",
            f"{r.wall_time_s:.0f}",
        )
    console.print(fit_names(evals))
    console.print(fit_names(spend))


def flops(
    config: Annotated[Path, typer.Argument(help="RunConfig YAML.")],
    prompt_len: Annotated[
        float | None, typer.Option(help="Expected prompt tokens (default: measured on the task).")
    ] = None,
    completion_len: Annotated[
        float | None,
        typer.Option(
            help="Expected completion tokens (default: measured by the store's last runs of the "
            "model and task, or a probe here; else the cap max_completion_tokens)."
        ),
    ] = None,
    set_: Overrides = None,
) -> None:
    """Print the planned FLOP breakdown of a run (per step and total, ρ) before spending anything."""
    from isolab.planning import plan_config
    from isolab.sweep.lengths import Lengths, completion_lengths

    cfg = load_config(config, set_ or [])
    say_scope(cfg.model)
    given = Lengths(completion_len, "given (--completion-len)")
    lengths = given if completion_len is not None else completion_lengths(cfg)
    try:
        plan = plan_config(
            cfg, prompt_len=prompt_len, completion_len=lengths.completion_len, here=True
        )
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        fail(str(exc))
    title = f"{safe(cfg.run_name)} · M={cfg.M}"
    table = Table("component", "per step", "total", "share", title=title)
    total = plan[FLOPS_TOTAL] or 1.0  # a plan of 0 FLOPs prints shares of 0%, not a traceback
    for k in ("search", "learning", "reward", "total"):
        table.add_row(
            k,
            f"{plan[f'{FLOPS_STEP_PREFIX}{k}']:.3e}",
            f"{plan[f'flops/{k}']:.3e}",
            f"{plan[f'flops/{k}'] / total:.0%}",
        )
    console.print(table)
    console.print(
        f"ρ = {plan[RHO]:.3f} · rollouts = {cfg.rollouts:,} · "
        f"lengths: prompt {plan['prompt_len']:.1f}, completion {plan['completion_len']:.1f} tokens"
    )
    console.print(f"completion length: {safe(lengths.source, 400)}", soft_wrap=False)


def register(app: typer.Typer) -> None:
    for command in (train, flops):
        app.command()(command)
