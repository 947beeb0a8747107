"""The iso-compute planner: a sweep spec → the grid of runs at equal compute.

Every grid point gets the same budget, in rollouts (IsoCompute, ``C = B_p · n · M``,
arXiv 2603.12151) or in FLOPs (IsoFLOP, through the ledger's plan; Wilhelm & Kao, arXiv
2607.13389). Rollouts are those generated: ``C = k · B_p · n · M`` under dynamic sampling
(`RunConfig.search_oversample` k), of which ``B_p · n`` per step are trained on. The budget
fixes each point's number of steps M; points that cannot spend it (a batch over the cap, a
budget below one step, n not dividing B…) are dropped with their reason.
Every run is evaluated at the same compute: checkpoints geometric in C up to the budget.

Wall times are estimated from a `Timing` (`isolab.sweep.wall.timing_of`): the spec's own (or
`--probe`'s), a probe of the model cached on this machine, or for the tiny arithmetic presets
the defaults measured with them; any other model's is unknown (`GridPoint.timing_source`).
FLOPs and wall times are estimated at the completion length measured by the store's last runs
of the model and task or by a probe (`isolab.sweep.lengths`), else at the cap; a point's steps
M (an IsoFLOP grid's too) never depend on what was measured, so neither do run keys. The
guards a sweep meets before it runs are `isolab.sweep.guards`.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from isolab import difficulty
from isolab.config import RunConfig
from isolab.planning import CannotRun, Unreadable, plan_config
from isolab.sweep.checkpoints import (
    check_first_checkpoint,
    checkpoints,
    eval_fractions,
    eval_steps,
    self_check_gaps,
)
from isolab.sweep.grid import DroppedPoint, GridPoint, SweepPlan
from isolab.sweep.guards import (
    MAX_GRID_POINTS,
    MAX_WALL_HOURS,
    check_grid_size,
    check_machine,
    check_wall_time,
    usable_cores,
    wall_hours,
)
from isolab.sweep.lengths import Lengths, completion_lengths
from isolab.sweep.spec import SpecError, SweepSpec
from isolab.sweep.wall import TimingSource, estimate_wall_s, timing_of
from isolab.vocab import FLOPS_TOTAL, RHO

__all__ = [  # the guards and the wall estimate are read from here too
    "MAX_GRID_POINTS",
    "MAX_WALL_HOURS",
    "DroppedPoint",
    "GridPoint",
    "SweepPlan",
    "TimingSource",
    "check_machine",
    "check_wall_time",
    "checkpoints",
    "estimate_wall_s",
    "eval_fractions",
    "eval_steps",
    "plan_sweep",
    "self_check_gaps",
    "split_sizes",
    "timing_of",
    "usable_cores",
    "wall_hours",
]


def _grid(spec: SweepSpec):
    """The values of every point: each combination of the axes × each combo × each seed."""
    names = list(spec.axes)
    for point in itertools.product(*(spec.axes[n] for n in names)):
        values = dict(zip(names, point, strict=True))
        for combo in spec.combos or ({},):
            for seed in spec.seeds:
                yield {**values, **combo, "seed": seed}


def plan_sweep(
    spec: SweepSpec,
    train_problems: dict[tuple[str, str, str, int], int] | None = None,
    tracking_uri: str | None = None,
) -> SweepPlan:
    """Expand the axes (× the combos), give every point the budget, drop those that cannot
    spend it.

    Args:
        spec: the sweep.
        train_problems: training problems per (model, task, split, pool_size), when known;
            points with more
            problems per step than the split holds are dropped (see `split_sizes`).
        tracking_uri: the MLflow store whose finished runs measure completion lengths
            (`isolab.sweep.lengths`; default `$MLFLOW_TRACKING_URI`, else runs/mlflow.db).

    Raises:
        SpecError: when every point is dropped (naming the budget or the cap at fault), or a
            point's config is invalid (the budget's M over the size guard: naming the budget).
    """
    check_grid_size(spec)
    fractions = eval_fractions(spec.eval_points, spec.eval_ratio)
    points: list[GridPoint] = []
    dropped: list[DroppedPoint] = []
    reasons: dict[str, str] = {}  # why points were dropped → one of the reasons given

    measured: dict[tuple[str, str, int], Lengths] = {}  # one look per model and task

    for values in _grid(spec):
        changes = {k: v for k, v in values.items() if k != "B"}
        n = int(changes.get("n", spec.base.n))
        if "B" in values:
            B = int(values["B"])
            if B % n:
                dropped.append(DroppedPoint(values, f"B = {B} not divisible by n = {n}"))
                reasons["divisible"] = ""
                continue
            changes["B_p"] = B // n
        try:
            cfg = spec.base.with_overrides(**changes, M=1)
        except (ValueError, TypeError) as exc:  # axes that are valid alone but not together
            dropped.append(DroppedPoint(values, str(exc)))
            reasons["config"] = ""
            continue
        if spec.max_batch is not None and spec.max_batch < cfg.B:
            dropped.append(DroppedPoint(values, f"B = {cfg.B} over max_batch = {spec.max_batch}"))
            reasons["max_batch"] = ""
            continue
        if train_problems is not None:
            have = train_problems.get((cfg.model, cfg.task, cfg.split, cfg.pool_size))
            if have is not None and have < cfg.B_p:
                dropped.append(
                    DroppedPoint(
                        values,
                        f"B_p = {cfg.B_p} over the {have} training problems of split {cfg.split}",
                    )
                )
                reasons["split"] = ""
                continue
        try:
            step = _planned(cfg)  # one step of this point, at the task's lengths
        except CannotRun as exc:  # a tiny arithmetic model on a card: it names the fix
            dropped.append(DroppedPoint(values, str(exc)))
            reasons["cannot run"] = str(exc)
            continue
        key = (cfg.model, cfg.task, cfg.max_completion_tokens)
        if key not in measured:
            measured[key] = completion_lengths(cfg, tracking_uri)
        try:
            point = _plan_point(spec, cfg, values, fractions, step, measured[key])
        except ValueError as exc:  # the steps the budget gives make an invalid RunConfig
            raise _budget_error(spec, exc) from None
        if isinstance(point, DroppedPoint):
            dropped.append(point)
            reasons["budget"] = ""
        else:
            points.append(point)
    if not points:
        raise SpecError(*_why_empty(spec, reasons))
    check_first_checkpoint(spec)
    return SweepPlan(spec, points, dropped, fractions)


def _plan_point(
    spec: SweepSpec,
    cfg: RunConfig,
    values: dict[str, Any],
    fractions: tuple[float, ...],
    step: dict[str, float],
    lengths: Lengths,
) -> GridPoint | DroppedPoint:
    """The point's steps M from its budget and the plan of one `step` at the task's lengths
    (never the measured ones: M, and so the run's key, must not depend on a store or a
    machine), its FLOPs and wall time estimated at the measured `lengths` where there are."""
    step_flops = step.get(FLOPS_TOTAL, math.nan)
    per_step = cfg.rollouts_per_step  # generated: B, or k·B under dynamic sampling
    if spec.budget_rollouts is not None:
        M = spec.budget_rollouts // per_step
        if M < 1:
            what = f"B = {cfg.B}" if per_step == cfg.B else f"search_oversample·B = {per_step}"
            return DroppedPoint(
                values, f"budget {spec.budget_rollouts} rollouts < one step of {what}"
            )
        at = checkpoints(spec.budget_rollouts, fractions)
    else:
        # SweepSpec.__post_init__ refuses a spec with neither budget or both
        assert spec.budget_flops is not None
        budget = float(spec.budget_flops)
        if not step_flops > 0:
            return DroppedPoint(
                values, "FLOPs of one step unknown: cannot place it on an IsoFLOP grid"
            )
        M = int(budget // step_flops)
        while M > 0 and M * step_flops > budget:  # guard against rounding at the boundary
            M -= 1
        if M < 1:
            return DroppedPoint(
                values, f"budget {budget:.3g} FLOPs < one step ({step_flops:.3g} FLOPs)"
            )
        # The same fractions of the FLOP budget, in this point's rollouts.
        at = checkpoints(budget / step_flops * per_step, fractions)
    cfg = cfg.replace(M=M, eval_at_rollouts=at)
    evals = 1 + len(eval_steps(cfg))
    timing, source = timing_of(spec, cfg, lengths.completion_len)
    if step and lengths.measured:
        # with a measured length, the estimate as a run here is charged; without one, the plan
        # that set M (the same on every machine: within an IsoFLOP budget by construction)
        step = _planned(cfg, lengths.completion_len, here=True)
    return GridPoint(
        config=cfg,
        values=values,
        planned_flops=M * step.get(FLOPS_TOTAL, math.nan),
        rho=step.get(RHO, math.nan),
        est_wall_s=estimate_wall_s(cfg, evals, timing),
        timing_source=source,
        lengths=lengths,
    )


def _planned(
    cfg: RunConfig, completion_len: float | None = None, here: bool = False
) -> dict[str, float]:
    """The ledger's plan of one step; empty when the model's config, tokenizer or the task's
    data cannot be read here (a hub id offline: the point is planned without FLOPs).

    Raises:
        CannotRun: this model cannot run this task (the caller drops the point with its fix);
            any other error is a bad input and goes through.
    """
    try:
        return plan_config(cfg.replace(M=1), completion_len=completion_len, here=here)
    except (Unreadable, OSError):
        return {}


def _budget_error(spec: SweepSpec, exc: ValueError) -> SpecError:
    """A point's config made invalid by its M (over the size guard): the budget's doing, so
    named after it; any other invalid config is the axes'."""
    if str(exc).startswith(("M = ", "M·")):
        return SpecError(_budget_field(spec), f"the budget gives {exc}")
    return SpecError("axes", str(exc))


def _budget_field(spec: SweepSpec) -> str:
    return "budget_rollouts" if spec.mode == "isocompute" else "budget_flops"


def _why_empty(spec: SweepSpec, reasons: dict[str, str]) -> tuple[str, str]:
    if "budget" in reasons:
        return _budget_field(spec), (
            "below one step for every grid point that fits the cap; raise the budget "
            "or add smaller n / B_p values."
        )
    if "max_batch" in reasons:
        return "max_batch", f"{spec.max_batch}: every grid point's B = B_p·n is over the cap."
    if "divisible" in reasons:
        return "axes.B", "no value of B is divisible by any n."
    if "split" in reasons:
        return "axes.B_p", "every B_p is over the training problems of its split."
    if "cannot run" in reasons:
        return "model", reasons["cannot run"]
    return "axes", "no combination of the axes makes a valid RunConfig (see `sweep plan`)."


def split_sizes(spec: SweepSpec) -> dict[tuple[str, str, str, int], int]:
    """Training problems per (model, task, split, pool_size), for the splits already labelled."""
    sizes: dict[tuple[str, str, str, int], int] = {}
    names, splits, tasks, pools = map(spec.values_of, ("model", "split", "task", "pool_size"))
    for model, split, task, pool in itertools.product(names, splits, tasks, pools):
        if split == "all":  # split `all` trains on the whole pool, not on a labelled split
            continue
        path = difficulty.splits_path(model, task, pool, 0)
        if path.exists():
            try:
                sizes[(model, task, split, pool)] = len(difficulty.Splits.load(path).train(split))
            except (ValueError, KeyError, OSError):
                continue
    return sizes
