"""`isolab sweep plan|run`: iso-compute sweeps from a YAML spec (see `isolab.sweep.spec`).

Wired into the main CLI with `register(app)`.
A bad spec or option exits 2 with the library's message naming the field and the fix, before
anything starts: the checks themselves live in `isolab.sweep` (`plan_sweep`, `check_run`), so a
notebook meets the same ones.
"""

from __future__ import annotations

import dataclasses
import math
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from isolab.cli.common import (
    TrackingUri,
    check_artifacts,
    console,
    err,
    exit_interrupted,
    fail,
    safe,
)
from isolab.config import SIZE_GUARD_ENV  # config is light: yaml and pydantic, no torch
from isolab.vocab import FAILED, FINISHED, KILLED, SKIPPED

if TYPE_CHECKING:  # the sweep package imports torch and MLflow: commands import it when run
    from isolab.sweep import SweepPlan

sweep_app = typer.Typer(
    help="Iso-compute sweeps: plan a sweep's grid at equal compute, run it resumably.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

SpecPath = Annotated[Path, typer.Argument(help="Sweep spec YAML (e.g. studies/smoke.yaml).")]


def register(app: typer.Typer) -> None:
    """Add the `sweep` sub-commands to the main `isolab` app."""
    app.add_typer(sweep_app, name="sweep")


def load_plan(spec_path: Path, probe: bool = False) -> SweepPlan:
    """Spec → plan, or exit 2 naming the field at fault; `probe`: wall times from a measured
    probe of the base model on this machine (`isolab.sweep.probe`)."""
    from isolab.sweep import SpecError, SweepSpec, plan_sweep, split_sizes

    try:
        spec = SweepSpec.from_yaml(spec_path)
        if probe:
            from isolab.sweep.probe import probe_timing

            timing, record = probe_timing(spec.base)
            m = record["measured"]
            console.print(
                f"probe of {safe(spec.base.model)} here ({safe(record['machine'])}): "
                f"{m['samples']} completions of {m['completion_tokens']} tokens in "
                f"{m['generate_s']:.2f} s, forward + backward {m['forward_backward_s']:.2f} s, "
                f"load {m['load_s']:.1f} s → {timing.rollout_s * 1e3:.1f} ms per rollout"
            )
            spec = dataclasses.replace(spec, timing=timing)
        return plan_sweep(spec, split_sizes(spec))
    except SpecError as exc:
        fail(f"{spec_path}: {exc}")
    raise AssertionError  # unreachable: fail raises


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _values(values: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in values.items())


@sweep_app.command("plan")
def plan_cmd(
    spec: SpecPath,
    workers: Annotated[int, typer.Option(help="Workers, for the wall-time estimate.")] = 1,
    probe: Annotated[
        bool,
        typer.Option(
            help="Measure the wall-time coefficients with a short probe of the base model on "
            "this machine (cached; a model load and seconds of compute)."
        ),
    ] = False,
) -> None:
    """Print the grid (n, B_p, B, M, planned FLOPs, ρ, estimated wall time) and every dropped point with its reason.

    Touches no store and starts no run. Wall times assume tiny-model speeds unless the spec
    gives `timing:` or `--probe` measures the base model here.
    """
    plan = load_plan(spec, probe=probe)
    s = plan.spec
    axes = [a for a in s.varying if a not in ("n", "B_p", "B")]  # those have their own columns
    table = Table(
        *axes,
        "seed",
        "n",
        "B_p",
        "B",
        "M",
        "rollouts",
        "FLOPs",
        "ρ",
        "est. wall",
        "run key",
        title=f"sweep {safe(s.name)}: {len(plan.points)} runs ({s.mode})",
    )
    for p in plan.points:
        c = p.config
        table.add_row(
            *(safe(p.values.get(a, "")) for a in axes),
            str(c.seed),
            str(c.n),
            str(c.B_p),
            str(c.B),
            str(c.M),
            f"{c.rollouts:,}",
            "—" if math.isnan(p.planned_flops) else f"{p.planned_flops:.3g}",
            "—" if math.isnan(p.rho) else f"{p.rho:.2f}",
            _duration(p.est_wall_s),
            p.run_key,
        )
    console.print(table)
    if plan.dropped:
        dropped = Table("point", "reason", title=f"{len(plan.dropped)} points dropped")
        for d in plan.dropped:
            dropped.add_row(safe(_values(d.values)), safe(d.reason))
        console.print(dropped)
    if s.budget_rollouts is not None:
        budget = f"{s.budget_rollouts:,} rollouts per run (C = B_p·n·M)"
        at = ", ".join(f"{c:,}" for c in plan.points[0].config.eval_at_rollouts or ())
        checkpoints = f"evaluation at C = {at} rollouts (and step 0)"
    else:
        budget = f"{s.budget_flops:.3g} FLOPs per run (IsoFLOP)"
        shares = ", ".join(f"{f:.3g}" for f in plan.eval_fractions)
        checkpoints = f"evaluation at {shares} of the FLOP budget (and step 0)"
    cap = f", B ≤ {s.max_batch}" if s.max_batch else ""
    console.print(f"budget {budget}{cap}; {checkpoints}")
    console.print(
        f"total {plan.total_rollouts:,} rollouts, {plan.total_flops:.3g} FLOPs; "
        f"estimated wall time {_duration(plan.est_wall_s / max(1, workers))} "
        f"with {workers} worker(s)"
    )
    from isolab.models import is_tiny
    from isolab.sweep.plan import MAX_WALL_HOURS, wall_hours
    from isolab.sweep.spec import Timing

    if not probe and not is_tiny(s.base.model) and s.timing == Timing():
        console.print(
            f"[bold yellow]note:[/] wall times assume tiny-model speeds; {safe(s.base.model)} is "
            "far slower per rollout: add --probe to measure it here."
        )

    if wall_hours(plan, workers) > MAX_WALL_HOURS:
        console.print(
            f"[bold yellow]warning:[/] over {MAX_WALL_HOURS} h: `sweep run` refuses it unless "
            f"{SIZE_GUARD_ENV}=1 (narrow the axes, lower the budget or add workers)."
        )


@sweep_app.command("run")
def run_cmd(
    spec: SpecPath,
    workers: Annotated[
        int, typer.Option("--workers", "-k", help="Runs at once (worker processes / Ray tasks).")
    ] = 1,
    backend: Annotated[
        str,
        typer.Option(
            help="local (worker processes), ray (a Ray task per run) or inline (one run after "
            "another in this process: no worker start-up, for small sweeps)."
        ),
    ] = "local",
    address: Annotated[
        str | None,
        typer.Option(help="Ray cluster address (ray backend); default: a local Ray instance."),
    ] = None,
    tracking_uri: TrackingUri = None,
    limit: Annotated[
        int | None, typer.Option(help="Run at most this many pending points (a pilot).")
    ] = None,
    reclaim_remote: Annotated[
        bool,
        typer.Option(
            help="Redo RUNNING runs started on other hosts (only when those machines are gone)."
        ),
    ] = False,
) -> None:
    """Run every grid point not yet FINISHED in the store; Ctrl-C stops cleanly.

    Finished run keys are skipped, so the same command resumes the sweep; a run left RUNNING by a dead process, or FAILED, is redone (the old one stays FAILED). The local backend runs points in K worker processes; the ray backend submits each point as a Ray task with the spec's resources (a local Ray instance, or --address with a tracking server).
    """
    from isolab import sweep
    from isolab.tracking import resolve_uri

    plan = load_plan(spec)
    try:
        sweep.check_run(
            plan, tracking_uri, workers=workers, backend=backend, address=address, limit=limit
        )
    except ValueError as exc:
        fail(f"{spec}: {exc}")
    uri = resolve_uri(tracking_uri)
    check_artifacts(uri, plan.spec.name)
    resume = f"isolab sweep run {spec} --workers {workers} --backend {backend}"
    resume += f" --address {address}" if address else ""
    resume += f" --tracking-uri {tracking_uri}" if tracking_uri else ""

    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        todo, state = sweep.pending(plan, uri, reclaim_remote, limit)
        reclaimed = sum(len(v) for v in state.stale.values())
        console.print(
            f"sweep [bold]{safe(plan.spec.name)}[/]: {len(plan.points)} points · "
            f"{len(state.finished)} finished (skipped) · {len(state.live)} running elsewhere · "
            f"{reclaimed} stale RUNNING marked FAILED · [bold]{len(todo)} to run[/] "
            f"({backend}, {workers} worker(s)) · store {safe(uri)}"
        )
        outcomes, interrupted = _run_with_progress(
            sweep.execute, todo, plan, uri, workers, backend, address
        )
    except KeyboardInterrupt:
        outcomes, interrupted = [], True
    finally:
        signal.signal(signal.SIGTERM, previous)
    finished = sum(o.status == FINISHED for o in outcomes)
    if interrupted:
        err.print(
            f"[yellow]interrupted[/]: {finished} run(s) finished in this session are kept; "
            f"runs cut short are marked KILLED. Resume with:\n  {safe(resume, 1000)}"
        )
        exit_interrupted()
    failed = [o for o in outcomes if o.status == FAILED]
    # KILLED without a Ctrl-C here: a worker was stopped by a signal of its own
    killed = [o for o in outcomes if o.status == KILLED]
    others = sum(o.status == SKIPPED for o in outcomes)
    console.print(
        f"[green]{finished} finished[/], {len(failed)} failed"
        + (f", {len(killed)} killed" if killed else "")
        + (f", {others} left to another runner on this spec and store" if others else "")
    )
    for o in failed + killed:
        why = safe(o.error or "see its MLflow run", 500)
        err.print(f"[red]{o.status}[/] {o.run_key} {safe(o.run_name)}: {why}")
    if failed or killed:
        err.print(
            f"Rerun to retry the failed points (finished ones are skipped):\n  {safe(resume, 1000)}"
        )
        raise typer.Exit(1)


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _run_with_progress(execute, todo, plan: SweepPlan, uri, workers, backend, address):
    """Progress bar weighted by each run's estimated wall time, a line per finished run."""
    metric = plan.spec.metric
    total = sum(p.est_wall_s for p in todo) or 1.0
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[runs]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
    )
    counts = {"done": 0}
    with progress:
        bar = progress.add_task(safe(plan.spec.name), total=total, runs=f"0/{len(todo)} runs")

        def on_result(outcome, point) -> None:
            counts["done"] += 1
            ok = outcome.status == FINISHED
            mark = "[green]✓[/]" if ok else f"[red]✗ {outcome.status}[/]"
            if outcome.status == SKIPPED:
                mark = f"[dim]· {safe(outcome.error)}[/]"
            value = "—" if math.isnan(outcome.metric) else f"{outcome.metric:.3f}"
            line = (
                f"{mark} {outcome.run_key}  {safe(outcome.run_name)} seed {point.config.seed}  "
                f"{metric} {value}  {outcome.wall_time_s:.1f} s"
            )
            if not ok and outcome.error:
                line += f"  [red]{safe(outcome.error)}[/]"
            progress.console.print(line)
            progress.update(
                bar, advance=point.est_wall_s, runs=f"{counts['done']}/{len(todo)} runs"
            )

        return execute(
            todo,
            plan,
            uri,
            workers=workers,
            backend=backend,
            address=address,
            on_result=on_result,
        )
