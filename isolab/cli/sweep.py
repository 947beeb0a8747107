"""`isolab sweep plan|run|adaptive`: iso-compute sweeps from a YAML spec (`isolab.sweep.spec`).

Wired into the main CLI with `register(app)`. `run` is `isolab.sweep.run_sweep` with a progress
display (`isolab.cli.sweep_progress`); `adaptive` lives in `isolab.cli.sweep_adaptive`.
A bad spec or option exits 2 with the library's message naming the field and the fix, before
anything starts: the checks themselves live in `isolab.sweep` (`plan_sweep`, `check_run`), so a
notebook meets the same ones.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.measure import Measurement
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
from isolab.cli.sweep_adaptive import adaptive_cmd
from isolab.cli.sweep_progress import duration
from isolab.cli.sweep_spec import SpecPath, load_plan
from isolab.config import SIZE_GUARD_ENV  # config is light: yaml and pydantic, no torch

if TYPE_CHECKING:  # the sweep package imports torch and MLflow: commands import it when run
    from isolab.sweep import SweepPlan

sweep_app = typer.Typer(
    help="Iso-compute sweeps: plan a sweep's grid at equal compute, run it resumably.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def register(app: typer.Typer) -> None:
    """Add the `sweep` sub-commands to the main `isolab` app."""
    app.add_typer(sweep_app, name="sweep")


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

    Touches no store and starts no run. Wall times come from the spec's `timing:`, `--probe`
    (measures the base model here, cached), a probe cached on this machine, or for the tiny
    arithmetic presets their defaults; for any other model they are `unknown`. Warns where a
    point evaluates too seldom for the recommendation's C/2 and C/4 self-checks.
    """
    from isolab.sweep import SpecError
    from isolab.sweep.plan import check_machine

    plan = load_plan(spec, probe=probe)
    try:
        check_machine(plan.spec)  # `sweep run` checks it with its backend (`check_run`)
    except SpecError as exc:
        if not plan.spec.resources.gpus_per_run:
            fail(f"{spec}: {exc}")
        # a GPU spec is made for another machine: its plan is worth reading here, its run is not
        err.print(f"[yellow]note:[/] {safe(exc, 400)} (`sweep run` here refuses it)")
    from isolab.cli.train import say_scope

    s = plan.spec
    for model in sorted(set(s.values_of("model"))):
        say_scope(model)
    same, table = _plan_table(plan)
    console.print(f"[bold]sweep {safe(s.name)}[/]: {len(plan.points)} runs ({s.mode})")
    if same:
        console.print("every run: " + " · ".join(f"{k}={v}" for k, v in same.items()))
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
    # prose wraps at the console's width, piped too (`console.soft_wrap` is for tables)
    console.print(f"budget {budget}{cap}", soft_wrap=False)
    console.print(checkpoints, soft_wrap=False)
    from isolab.sweep.plan import MAX_WALL_HOURS, self_check_gaps, wall_hours

    unknown = plan.unknown_wall_models
    console.print(
        f"total {plan.total_rollouts:,} rollouts, {plan.total_flops:.3g} FLOPs; "
        + _wall_line(plan, workers),
        soft_wrap=False,
    )
    if unknown:
        console.print(
            f"[bold yellow]note:[/] no wall-time estimate for {safe(', '.join(unknown))} here: "
            f"run `isolab sweep plan {safe(spec)} --probe` (loads the model once and measures "
            "it, cached) or give `timing:` in the spec.",
            soft_wrap=False,
        )
    for source in plan.length_sources:
        console.print(f"completion lengths, {safe(source, 400)}", soft_wrap=False)
    for gap in self_check_gaps(plan):
        console.print(f"[bold yellow]warning:[/] {safe(gap, 1000)}", soft_wrap=False)
    if not unknown and wall_hours(plan, workers) > MAX_WALL_HOURS:
        console.print(
            f"[bold yellow]warning:[/] over {MAX_WALL_HOURS} h: `sweep run` refuses it unless "
            f"{SIZE_GUARD_ENV}=1 (narrow the axes, lower the budget or add workers).",
            soft_wrap=False,
        )


def _wall_line(plan: SweepPlan, workers: int) -> str:
    """The plan's wall time with `workers`, and where its timing comes from; `unknown` where a
    point's model has no timing here (a tiny-model figure would mislead by minutes per run)."""
    if plan.unknown_wall_models:
        return "estimated wall time unknown"
    sources = sorted({p.timing_source for p in plan.points})
    return (
        f"estimated wall time {duration(plan.est_wall_s / max(1, workers))} with {workers} "
        f"worker(s) (timing: {', '.join(sources)})"
    )


def _plan_table(plan: SweepPlan) -> tuple[dict[str, str], Table]:
    """The grid as a table that fits 100 columns: the columns with one value for every run
    come out as `{column: value}` (shown once above the table), axis names wrap at their
    underscores where the table would not fit otherwise, and no cell is cut short (a cell too
    wide folds)."""
    s = plan.spec
    axes = [a for a in s.varying if a not in ("n", "B_p", "B")]  # those have their own columns
    columns: dict[str, list[str]] = {
        a: [safe(p.values.get(a, "")) for p in plan.points] for a in axes
    }
    columns.update(
        {
            "seed": [str(p.config.seed) for p in plan.points],
            "n": [str(p.config.n) for p in plan.points],
            "B_p": [str(p.config.B_p) for p in plan.points],
            "B": [str(p.config.B) for p in plan.points],
            "M": [str(p.config.M) for p in plan.points],
            "rollouts": [f"{p.config.rollouts:,}" for p in plan.points],
            "FLOPs": [_flops(p.planned_flops) for p in plan.points],
            "ρ": ["—" if math.isnan(p.rho) else f"{p.rho:.2f}" for p in plan.points],
            "est. wall": [
                duration(p.est_wall_s) if p.wall_known else "unknown" for p in plan.points
            ],
        }
    )
    same = {k: v[0] for k, v in columns.items() if len(set(v)) == 1} if len(plan.points) > 1 else {}
    shown = [k for k in columns if k not in same]

    def table(wrap: bool) -> Table:
        out = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
        for name in [*shown, "run key"]:
            out.add_column(name.replace("_", "_\n") if wrap else name, overflow="fold")
        for i, p in enumerate(plan.points):
            out.add_row(*(columns[k][i] for k in shown), p.run_key)
        return out

    wide = table(wrap=False)
    natural = Measurement.get(console, console.options.update_width(10_000), wide).maximum
    fits = natural <= console.width
    return same, wide if fits else table(wrap=True)


def _flops(flops: float) -> str:
    """3 significant digits, no `+` in the exponent: 2.38e11."""
    return "—" if math.isnan(flops) else f"{flops:.3g}".replace("e+", "e")


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
    from isolab.cli.sweep_progress import SweepBars
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

    with SweepBars(plan, workers) as bars:

        def begin(todo, state) -> None:
            reclaimed = sum(len(v) for v in state.stale.values())
            console.print(
                f"sweep [bold]{safe(plan.spec.name)}[/]: {len(plan.points)} points · "
                f"{len(state.finished)} finished (skipped) · {len(state.live)} running "
                f"elsewhere · {reclaimed} stale RUNNING marked FAILED · [bold]{len(todo)} to "
                f"run[/] ({backend}, {workers} worker(s)) · store {safe(uri)}"
            )
            bars.begin(todo, state)

        report = sweep.run_sweep(
            plan,
            uri,
            workers=workers,
            backend=backend,
            address=address,
            limit=limit,
            reclaim_remote=reclaim_remote,
            on_pending=begin,
            on_start=bars.started,
            on_step=bars.stepped,
            on_result=bars.ended,
        )
    _summary(report, resume)


def _summary(report, resume: str) -> None:
    """What the sweep did, and the command that resumes or retries it; exit 130 when
    interrupted, 1 when runs failed or were killed."""
    finished = len(report.finished)
    if report.interrupted:
        err.print(
            f"[yellow]interrupted[/]: {finished} run(s) finished in this session are kept; "
            f"runs cut short are marked KILLED. Resume with:\n  {safe(resume, 1000)}"
        )
        exit_interrupted()
    failed = report.failed
    # KILLED without a Ctrl-C here: a worker was stopped by a signal of its own
    killed = report.killed
    others = len(report.skipped)
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


sweep_app.command("adaptive")(adaptive_cmd)  # after plan and run: `--help` lists them in order
