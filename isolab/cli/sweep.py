"""`isolab sweep plan|run`: iso-compute sweeps from a YAML spec (see `isolab.sweep.spec`).

Wired into the main CLI with `register(app)`.
A bad spec or option exits 2 with the library's message naming the field and the fix, before
anything starts: the checks themselves live in `isolab.sweep` (`plan_sweep`, `check_run`), so a
notebook meets the same ones.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.measure import Measurement
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from isolab.cli.common import (
    LineProgress,
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
        f"estimated wall time {_duration(plan.est_wall_s / max(1, workers))} with {workers} "
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
                _duration(p.est_wall_s) if p.wall_known else "unknown" for p in plan.points
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


@sweep_app.command("adaptive")
def adaptive_cmd(
    spec: SpecPath,
    workers: Annotated[int, typer.Option("--workers", "-k", help="Runs at once.")] = 1,
    z: Annotated[
        float | None,
        typer.Option(
            help="Stop an arm below the best by more than z standard errors (default: the "
            "calibrated rule's, printed at the start)."
        ),
    ] = None,
    grace: Annotated[int | None, typer.Option(help="Rungs judged before any stop.")] = None,
    judge_from: Annotated[
        float | None,
        typer.Option(
            help="Stop no arm before this share of the budget. The default waits for half: "
            "an arm that overtakes the leader late is kept (docs/statistics.md); 0 judges from "
            "the first checkpoint past --grace."
        ),
    ] = None,
    eta: Annotated[
        float | None,
        typer.Option(
            help="Also stop every arm below the top 1/eta of a rung (ASHA's rank cut: it "
            "ignores the noise, and drops the true best more often; for comparison)."
        ),
    ] = None,
    tracking_uri: TrackingUri = None,
) -> None:
    """Run a sweep adaptively: stop the arms worse than the best by more than their noise at each checkpoint, carry on with the rest (successive halving on Ray Tune).

    Every run pauses at each common checkpoint until all live runs reach it; the rung is then judged, the runs of the arms stopped end KILLED with the reason as a tag, the others resume from their checkpoint. It prints the kinds of planted world the rule was validated on and how often it kept their best arm, and says so when the best arm changed within the sweep (an early stop is then not advice about the budget). The same command resumes an interrupted sweep. See docs/statistics.md for the rule and its calibration.
    """
    from isolab.sweep.adaptive import StoppingRule
    from isolab.sweep.adaptive_live import run_adaptive
    from isolab.tracking import resolve_uri

    plan = load_plan(spec)
    default = StoppingRule()  # an option not given is the calibrated rule's
    try:
        rule = StoppingRule(
            z=default.z if z is None else z,
            grace=default.grace if grace is None else grace,
            eta=eta,
            judge_from=default.judge_from if judge_from is None else judge_from,
        )
    except ValueError as exc:  # its message opens with the field: "eta = inf: …"
        fail(f"{spec}: option --{str(exc).replace('judge_from', 'judge-from', 1)}")
    uri = resolve_uri(tracking_uri)
    check_artifacts(uri, plan.spec.name)
    console.print(
        f"adaptive sweep [bold]{safe(plan.spec.name)}[/]: {len(plan.points)} runs, rule "
        f"{rule.text}, {workers} worker(s) · store {safe(uri)}"
    )
    _print_validation(rule)

    def judged(setting, C, decision, stopped) -> None:
        where = ", ".join(f"{k}={v}" for k, v in setting.items()) or "all"
        alive = decision.arms.height - len(stopped)
        line = f"{safe(where)} · rung C = {C:,.0f}: {alive} arm(s) go on"
        if stopped:
            line += ", stopped " + ", ".join(sorted(stopped))
        console.print(line)

    try:
        report = run_adaptive(plan, tracking_uri, rule=rule, workers=workers, on_rung=judged)
    except ValueError as exc:
        fail(f"{spec}: {exc}")
    except RuntimeError as exc:
        fail(f"{spec}: {exc}", code=1)
    except KeyboardInterrupt:
        resume = _adaptive_command(spec, workers, rule, tracking_uri)
        err.print(f"[yellow]interrupted[/]: run again to resume:\n  {safe(resume, 1000)}")
        exit_interrupted()
    for r in report.settings:
        _print_setting(r, plan.spec.metric)
    console.print(
        f"[green]done[/] in {_duration(report.wall_s)}: {report.spent / report.grid:.0%} of the "
        "full grid's compute"
    )


def _print_validation(rule) -> None:
    """What the rule was validated on (planted worlds drawn like the committed nstar sweep)
    and how often it kept their best arm; a warning where it drops late bloomers."""
    from isolab.sweep.adaptive_calibration import KEEP_TARGET, validation

    try:
        checked = validation(rule)
    except FileNotFoundError as exc:
        err.print(f"[yellow]rule not validated[/]: {safe(str(exc), 500)}")
        return
    console.print(safe(checked.text, 2000))
    if not checked.keeps_late_bloomers:
        err.print(
            f"[yellow]this rule stops late bloomers[/] (best kept in under {KEEP_TARGET:.0%} of "
            "some split's late-bloomer worlds): an arm it stops early may have overtaken the "
            "best by the budget, so its stops are not advice about the budget (the default "
            "rule waits for half the budget)."
        )


def _print_setting(r, metric: str) -> None:
    """One setting's outcome: the best arm, the compute, each arm; where the best arm changed
    between rungs, that the optimum moved and that the early stops are not advice."""
    from isolab.frontier.validate import WITHIN_SE
    from isolab.sweep.adaptive import leader_path

    where = ", ".join(f"{k}={v}" for k, v in r.setting.items()) or "all"
    path = leader_path([*r.decisions, r.final] if r.final is not None else r.decisions)
    console.print(
        f"{safe(where)}: {safe(r.best_text(metric))} · compute {r.spent:,.0f} of "
        f"the full grid's {r.grid:,.0f} rollouts ({r.fraction:.0%})"
    )
    if path.moved:
        console.print(
            f"  [yellow]the optimum moved within this sweep[/]: best {safe(path.text, 1000)}"
        )
        stopped = int(r.arms["stopped_at"].is_not_null().sum())
        if stopped:
            console.print(
                f"  that best is the best of the arms run to the budget, not of the grid: "
                f"{stopped} arm(s) were stopped before it"
            )
        for C, gap, se in path.behind:
            console.print(
                f"  the best at the budget was behind the best at C = {C:,.0f} by {gap:.3f} "
                f"(> {WITHIN_SE:g} × {se:.3f}, the SE of the difference): a late bloomer"
            )
    for a in r.arms.iter_rows(named=True):
        if a["stopped_at"] is None:
            state = "ran to the budget"
        elif path.moved:
            state = (
                f"stopped early at C = {a['stopped_at']:,.0f}, not a verdict at the budget "
                f"(the optimum moved within the sweep): {a['reason']}"
            )
        else:
            state = f"stopped at C = {a['stopped_at']:,.0f}: {a['reason']}"
        console.print(f"  {safe(a['arm'])}: {a['last']:.3f} · {safe(state)}")


def _adaptive_command(spec: Path, workers: int, rule, tracking_uri: str | None) -> str:
    """The command that resumes an adaptive sweep: every option given, so that the resumed
    sweep judges its rungs by the same rule (`--judge-from` where it is not the default)."""
    from isolab.sweep.adaptive import StoppingRule

    # str(float): the shortest text that reads back as the same number
    command = f"isolab sweep adaptive {spec} --workers {workers} --z {rule.z} --grace {rule.grace}"
    if rule.judge_from != StoppingRule.judge_from:
        command += f" --judge-from {rule.judge_from}"
    command += f" --eta {rule.eta}" if rule.eta is not None else ""
    return command + (f" --tracking-uri {tracking_uri}" if tracking_uri else "")


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _run_with_progress(execute, todo, plan: SweepPlan, uri, workers, backend, address):
    """A line per ended run, each running run's steps, and the sweep's share done with an ETA
    from the steps so far (`SweepProgress`, which weighs each run by its estimated wall time).

    On a terminal: the sweep's bar with a bar per running run under it. Piped (a log file, CI):
    a line per quarter of each run's steps and one per ended run, each with the sweep's share
    and ETA. (The ray backend reports no steps: its runs show when they end.)
    """
    from isolab.sweep.point import optimizer_steps
    from isolab.sweep.runner import SweepProgress

    metric = plan.spec.metric
    tracker = SweepProgress(todo, workers)
    live = console.is_terminal
    bars: Progress | LineProgress = _sweep_bars() if live else LineProgress(every=0.25)
    running: dict[str, TaskID] = {}  # run key → its bar

    def runs_ended() -> str:
        return f"{tracker.ended}/{len(todo)} runs"

    def eta() -> str:
        left = tracker.eta_s()
        return (
            f"ETA {_clock(left)}"
            if left is not None
            else f"≈ {_duration(tracker.planned_s)} planned"
        )

    def status() -> str:
        return f"{runs_ended()} · {tracker.fraction:.0%} · {eta()}"

    with bars:
        sweep_bar = None
        if isinstance(bars, Progress):
            sweep_bar = bars.add_task(safe(plan.spec.name), total=1.0, what="", eta="")

        def refresh() -> None:
            if sweep_bar is not None:
                bars.update(sweep_bar, completed=tracker.fraction, what=runs_ended(), eta=eta())

        def on_start(point) -> None:
            tracker.start(point)
            label = f"  {safe(point.config.run_name)} seed {point.config.seed}"
            steps = optimizer_steps(point.config)
            running[point.run_key] = bars.add_task(
                label, total=steps, what=f"step 0/{steps}", eta="", info=""
            )
            refresh()

        def on_step(point, step: int) -> None:
            tracker.step(point, step)
            task = running.get(point.run_key)
            if task is not None:
                steps = optimizer_steps(point.config)
                bars.update(task, completed=step, what=f"step {step}/{steps}", info=status())
            refresh()

        def on_result(outcome, point) -> None:
            tracker.end(point)
            task = running.pop(point.run_key, None)
            if task is not None:
                bars.remove_task(task)
            line = _outcome_line(outcome, point, metric)
            bars.console.print(line if live else f"{line} · {status()}")
            refresh()

        refresh()
        return execute(
            todo,
            plan,
            uri,
            workers=workers,
            backend=backend,
            address=address,
            on_result=on_result,
            on_start=on_start,
            on_step=on_step,
        )


def _sweep_bars() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[what]}"),
        TimeElapsedColumn(),
        TextColumn("{task.fields[eta]}"),
        console=console,
    )


def _outcome_line(outcome, point, metric: str) -> str:
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
    return line


def _clock(seconds: float) -> str:
    """h:mm:ss, as rich's own time columns print it."""
    return str(datetime.timedelta(seconds=round(seconds)))
