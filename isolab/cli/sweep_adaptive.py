"""`isolab sweep adaptive`: a sweep run adaptively on Ray Tune, its arms stopped at the
rungs where they fall behind the best by more than their noise (`isolab.sweep.adaptive_live`).

`isolab.cli.sweep` adds the command to its `sweep_app`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from isolab.cli.common import (
    TrackingUri,
    check_artifacts,
    console,
    err,
    exit_interrupted,
    fail,
    safe,
)
from isolab.cli.sweep_progress import duration
from isolab.cli.sweep_spec import SpecPath, load_plan


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
    for sentence in report.answer:  # word for word the experiment's description
        console.print(safe(sentence, 2000))
    console.print(
        f"[green]done[/] in {duration(report.wall_s)}: {report.spent / report.grid:.0%} of the "
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
    from isolab.frontier.evidence import WITHIN_SE
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
