"""The iso-compute planner: a sweep spec → the grid of runs at equal compute.

Every grid point gets the same budget, in rollouts (IsoCompute, ``C = B_p · n · M``,
arXiv 2603.12151) or in FLOPs (IsoFLOP, through the ledger's plan; Wilhelm & Kao, arXiv
2607.13389). Rollouts are those generated: ``C = k · B_p · n · M`` under dynamic sampling
(`RunConfig.search_oversample` k), of which ``B_p · n`` per step are trained on. The budget
fixes each point's number of steps M; points that cannot spend it (a batch over the cap, a
budget below one step, n not dividing B…) are dropped with their reason.
Every run is evaluated at the same compute: checkpoints geometric in C up to the budget.

Wall times are estimated from a `Timing` (`timing_of`): the spec's own (or `--probe`'s), a probe
of the model cached on this machine, or for the tiny arithmetic presets the defaults measured
with them; any other model's is unknown (`GridPoint.timing_source`), and says so rather than a
tiny-model figure (SmolLM2 was once planned at 2 s a run).
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass
from typing import Any, Literal

from isolab import difficulty, models
from isolab.config import SIZE_GUARD_ENV, RunConfig
from isolab.frontier.recommend import CHECK_FACTORS
from isolab.planning import plan_config
from isolab.sweep.spec import SpecError, SweepSpec, Timing
from isolab.vocab import FLOPS_TOTAL, RHO

#: Where a point's wall-time estimate comes from: the spec's `timing` (or `--probe`'s), a probe
#: of its model cached on this machine, the tiny presets' defaults, or nowhere.
TimingSource = Literal["given", "cached probe", "tiny defaults", "unknown"]


@dataclass(frozen=True)
class GridPoint:
    """One run of the sweep: its config (M and checkpoints filled in) and its planned cost.

    Attributes:
        config: the run's `RunConfig` (`run_key` identifies it in MLflow).
        values: the axis values of this point and its seed, for display.
        planned_flops: planned model FLOPs of the run (`flops/total`), NaN if unknown.
        rho: planned update fraction ρ = C_learning / C_total.
        est_wall_s: estimated wall time (`estimate_wall_s`); with an `unknown` timing, the tiny
            defaults' figure, kept only to weigh the point in a progress bar.
        timing_source: where the estimate's `Timing` comes from (`timing_of`).
    """

    config: RunConfig
    values: dict[str, Any]
    planned_flops: float
    rho: float
    est_wall_s: float
    timing_source: TimingSource = "given"

    @property
    def run_key(self) -> str:
        return self.config.run_key

    @property
    def wall_known(self) -> bool:
        """Whether `est_wall_s` estimates this model's speed (not the tiny defaults')."""
        return self.timing_source != "unknown"


@dataclass(frozen=True)
class DroppedPoint:
    """A grid point the budget or the cap rules out, and why."""

    values: dict[str, Any]
    reason: str


@dataclass(frozen=True)
class SweepPlan:
    """The grid of a sweep: the runs to do, the points dropped, the checkpoints."""

    spec: SweepSpec
    points: list[GridPoint]
    dropped: list[DroppedPoint]
    eval_fractions: tuple[float, ...]

    @property
    def total_rollouts(self) -> int:
        return sum(p.config.rollouts for p in self.points)

    @property
    def total_flops(self) -> float:
        return sum(p.planned_flops for p in self.points)

    @property
    def est_wall_s(self) -> float:
        return sum(p.est_wall_s for p in self.points)

    @property
    def unknown_wall_models(self) -> list[str]:
        """The models whose wall time the plan cannot estimate (no timing, no probe here)."""
        return sorted({p.config.model for p in self.points if not p.wall_known})


def eval_fractions(points: int, ratio: float) -> tuple[float, ...]:
    """Checkpoint fractions of the budget, geometric, ending at 1: (1/ratio^(k-1), …, 1)."""
    return tuple(ratio ** -(points - 1 - j) for j in range(points))


def checkpoints(budget_rollouts: float, fractions: tuple[float, ...]) -> tuple[int, ...]:
    """Rollout counts at which a run is evaluated: the fractions of its budget, ≥ 1, distinct."""
    return tuple(sorted({max(1, int(round(budget_rollouts * f))) for f in fractions}))


def estimate_wall_s(cfg: RunConfig, n_evals: int, timing: Timing) -> float:
    """Rough wall time of a run (see `Timing`)."""
    steps = cfg.M * cfg.num_iterations
    samples = n_evals * cfg.eval_problems * cfg.eval_k_samples
    # every rollout generated once, those trained on once more per extra update pass
    rollouts = cfg.rollouts + cfg.B * cfg.M * (cfg.num_iterations - 1)
    return (
        timing.setup_s
        + steps * timing.step_s
        + rollouts * timing.rollout_s
        + samples * timing.eval_sample_s
    )


def timing_of(spec: SweepSpec, cfg: RunConfig) -> tuple[Timing, TimingSource]:
    """The `Timing` of a point's wall-time estimate and where it comes from: the spec's own
    when it gives one (`--probe` puts its measurement there), else a probe of the point's model,
    task and completion length cached on this machine (`isolab.sweep.probe`), else the defaults
    for the tiny arithmetic presets they were measured with. Any other model (SmolLM2, a hub id,
    `tiny-chat`'s few-hundred-byte prompts) is `unknown`: `Timing()` then only weighs the point
    in a progress bar."""
    if spec.timing != Timing():
        return spec.timing, "given"
    if models.is_tiny(cfg.model):
        return Timing(), "tiny defaults"
    from isolab.sweep.probe import cached_timing

    cached = cached_timing(cfg)
    return (cached, "cached probe") if cached is not None else (Timing(), "unknown")


def _grid(spec: SweepSpec):
    """The values of every point: each combination of the axes × each combo × each seed."""
    names = list(spec.axes)
    for point in itertools.product(*(spec.axes[n] for n in names)):
        values = dict(zip(names, point, strict=True))
        for combo in spec.combos or ({},):
            for seed in spec.seeds:
                yield {**values, **combo, "seed": seed}


#: Grid points (axes × combos × seeds) past which a spec is refused before it is expanded
#: (200,000 points hung the planner), unless `$ISOLAB_NO_SIZE_GUARDS=1`.
MAX_GRID_POINTS = 5000
#: Estimated wall hours past which a sweep is refused before it runs, unless
#: `$ISOLAB_NO_SIZE_GUARDS=1` (a 2,000-point spec planned 2,080 h without a word).
MAX_WALL_HOURS = 168


def _check_grid_size(spec: SweepSpec) -> None:
    size = math.prod(len(v) for v in spec.axes.values())
    size *= max(1, len(spec.combos)) * len(spec.seeds)
    if size > MAX_GRID_POINTS and os.environ.get(SIZE_GUARD_ENV) != "1":
        raise SpecError(
            "axes",
            f"{size:,} grid points (axes × combos × seeds) is over isolab's guard of "
            f"{MAX_GRID_POINTS:,}: narrow the axes, or set {SIZE_GUARD_ENV}=1 to plan it anyway.",
        )


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity: a container's or `taskset`'s
    share), else the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def check_machine(spec: SweepSpec, address: str | None = None) -> None:
    """Refuse a sweep one of whose runs cannot fit this machine: a run asks for processes ×
    cpus_per_run cores (`Resources.for_processes`), and one that asks for more than there are
    would wait for Ray forever or crawl on oversubscribed threads. SpecError naming the field
    and what fits. A Ray cluster (`address`) counts its own CPUs; `$ISOLAB_NO_SIZE_GUARDS=1`
    plans for a larger machine."""
    if address or os.environ.get(SIZE_GUARD_ENV) == "1":
        return
    cores, cpus = usable_cores(), spec.resources.cpus_per_run
    elsewhere = (
        f"or set {SIZE_GUARD_ENV}=1 to plan it for a larger machine (or run it on a Ray "
        "cluster with --address)"
    )
    if cpus > cores:
        raise SpecError(
            "resources.cpus_per_run",
            f"{cpus:g} cores per run, and this machine has {cores} cores: give at most "
            f"{cores}, {elsewhere}.",
        )
    processes = max(spec.values_of("processes"))
    need = spec.resources.for_processes(processes)[0]
    if need > cores:
        if "processes" in spec.axes:
            where = "axes.processes"
        elif spec.combos and "processes" in spec.combos[0]:
            i = next(i for i, c in enumerate(spec.combos) if c["processes"] == processes)
            where = f"combos[{i}].processes"
        else:
            where = "base.processes"
        raise SpecError(
            where,
            f"processes = {processes} × cpus_per_run = {cpus:g} needs {need:g} cores per run, "
            f"and this machine has {cores}: give processes ≤ {max(1, int(cores // cpus))}, "
            f"{elsewhere}.",
        )


def wall_hours(plan: SweepPlan, workers: int = 1) -> float:
    """The plan's estimated wall time in hours, its points shared among `workers`."""
    return plan.est_wall_s / max(1, workers) / 3600


def check_wall_time(plan: SweepPlan, workers: int = 1) -> None:
    """Refuse a sweep estimated at over `MAX_WALL_HOURS` with `workers` (ValueError with the
    fix), unless `$ISOLAB_NO_SIZE_GUARDS=1`. Every way of running a sweep checks it
    (`isolab.sweep.runner.check_run`): the command line, `run_sweep`, a study's `collect`."""
    hours = wall_hours(plan, workers)
    if hours > MAX_WALL_HOURS and os.environ.get(SIZE_GUARD_ENV) != "1":
        raise ValueError(
            f"an estimated {hours:,.0f} h with {workers} worker(s), over isolab's guard "
            f"of {MAX_WALL_HOURS} h: narrow the axes, lower the budget, add workers, or set "
            f"{SIZE_GUARD_ENV}=1 to run it anyway."
        )


def plan_sweep(
    spec: SweepSpec, train_problems: dict[tuple[str, str, str, int], int] | None = None
) -> SweepPlan:
    """Expand the axes (× the combos), give every point the budget, drop those that cannot
    spend it.

    Args:
        spec: the sweep.
        train_problems: training problems per (model, task, split, pool_size), when known;
            points with more
            problems per step than the split holds are dropped (see `split_sizes`).

    Raises:
        SpecError: when every point is dropped (naming the budget or the cap at fault), or a
            point's config is invalid (the budget's M over the size guard: naming the budget).
    """
    _check_grid_size(spec)
    fractions = eval_fractions(spec.eval_points, spec.eval_ratio)
    points: list[GridPoint] = []
    dropped: list[DroppedPoint] = []
    reasons: set[str] = set()
    for values in _grid(spec):
        changes = {k: v for k, v in values.items() if k != "B"}
        n = int(changes.get("n", spec.base.n))
        if "B" in values:
            B = int(values["B"])
            if B % n:
                dropped.append(DroppedPoint(values, f"B = {B} not divisible by n = {n}"))
                reasons.add("divisible")
                continue
            changes["B_p"] = B // n
        try:
            cfg = spec.base.replace(**changes, M=1)
        except (ValueError, TypeError) as exc:  # axes that are valid alone but not together
            dropped.append(DroppedPoint(values, str(exc)))
            reasons.add("config")
            continue
        if models.is_tiny(cfg.model) and cfg.task != "arithmetic":  # its FLOPs cannot be planned
            dropped.append(DroppedPoint(values, models.tiny_refusal(cfg.model, cfg.task)))
            reasons.add("tiny")
            continue
        if spec.max_batch is not None and spec.max_batch < cfg.B:
            dropped.append(DroppedPoint(values, f"B = {cfg.B} over max_batch = {spec.max_batch}"))
            reasons.add("max_batch")
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
                reasons.add("split")
                continue
        try:
            point = _plan_point(spec, cfg, values, fractions)
        except ValueError as exc:  # the steps the budget gives make an invalid RunConfig
            raise _budget_error(spec, exc) from None
        if isinstance(point, DroppedPoint):
            dropped.append(point)
            reasons.add("budget")
        else:
            points.append(point)
    if not points:
        raise SpecError(*_why_empty(spec, reasons))
    _check_first_checkpoint(spec)
    return SweepPlan(spec, points, dropped, fractions)


def _check_first_checkpoint(spec: SweepSpec) -> None:
    """The first checkpoint, budget / eval_ratio^(eval_points - 1), is at least one rollout:
    else the checkpoints under one merge into one and a run has fewer than `eval_points`."""
    gaps = spec.eval_points - 1
    budget = spec.budget_rollouts
    if budget is not None and gaps * math.log(spec.eval_ratio) > math.log(budget):
        raise SpecError(
            "eval_ratio",
            f"{spec.eval_ratio:g}: the first of {spec.eval_points} checkpoints would be at "
            f"budget_rollouts / eval_ratio^{gaps} = {budget:,} / {spec.eval_ratio:g}^{gaps}, "
            f"under one rollout, so a run would have fewer than {spec.eval_points}; lower "
            "eval_ratio or eval_points.",
        )


def _plan_point(
    spec: SweepSpec, cfg: RunConfig, values: dict[str, Any], fractions: tuple[float, ...]
) -> GridPoint | DroppedPoint:
    step = _planned(cfg)  # one step of this point
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
    timing, source = timing_of(spec, cfg)
    return GridPoint(
        config=cfg,
        values=values,
        planned_flops=M * step_flops,
        rho=step.get(RHO, math.nan),
        est_wall_s=estimate_wall_s(cfg, evals, timing),
        timing_source=source,
    )


def eval_steps(cfg: RunConfig) -> list[int]:
    """The optimizer steps after which a run evaluates (`isolab.rl.evaluate.Evaluator.due`):
    the first step whose rollouts reach each checkpoint of `eval_at_rollouts`, and the last."""
    per_step = cfg.rollouts_per_step
    return sorted({min(-(-c // per_step), cfg.M) for c in cfg.eval_at_rollouts or ()} | {cfg.M})


def self_check_gaps(plan: SweepPlan, factors: tuple[float, ...] = CHECK_FACTORS) -> list[str]:
    """Why the recommendation's held-out self-checks (`isolab.frontier.validate`: the advice
    made from the evaluations at ≤ C / factor, scored at C, C the compute every run reaches)
    will be off, one sentence per factor naming the points: a point whose evaluation nearest
    C / factor (in log compute) is at C or beyond has seen C already, so that check cannot be
    made, and without the C/2 one `recommend` vouches for no budget beyond the data (it was
    once switched off so, silently). Iso-compute sweeps only: an IsoFLOP grid's runs reach
    different rollouts."""
    if plan.spec.budget_rollouts is None or not plan.points:
        return []
    reached = {
        p.run_key: [s * p.config.rollouts_per_step for s in eval_steps(p.config)]
        for p in plan.points
    }
    C = min(r[-1] for r in reached.values())
    out = []
    for factor in factors:
        target = math.log(C / factor)
        late = [
            p.config.run_name
            for p in plan.points
            if min(reached[p.run_key], key=lambda r: abs(math.log(r) - target)) >= C
        ]
        if late:
            out.append(
                f"no evaluation near C/{factor:g} = {C / factor:,.0f} rollouts before C = "
                f"{C:,.0f} for {', '.join(dict.fromkeys(late))}: the recommendation's "
                f"C/{factor:g} self-check will be off (raise budget_rollouts or lower B_p·n "
                "so that each takes more steps, or place a checkpoint near it with eval_points "
                "and eval_ratio)"
            )
    return out


def _planned(cfg: RunConfig) -> dict[str, float]:
    """The ledger's plan of one step; empty when the model's config is not reachable."""
    try:
        return plan_config(cfg.replace(M=1))
    except (OSError, ValueError, RuntimeError):
        return {}


def _budget_error(spec: SweepSpec, exc: ValueError) -> SpecError:
    """A point's config made invalid by its M (over the size guard): the budget's doing, so
    named after it; any other invalid config is the axes'."""
    if str(exc).startswith(("M = ", "M·")):
        return SpecError(_budget_field(spec), f"the budget gives {exc}")
    return SpecError("axes", str(exc))


def _budget_field(spec: SweepSpec) -> str:
    return "budget_rollouts" if spec.mode == "isocompute" else "budget_flops"


def _why_empty(spec: SweepSpec, reasons: set[str]) -> tuple[str, str]:
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
    if "tiny" in reasons:
        model = next(m for m in spec.values_of("model") if models.is_tiny(m))
        task = next(t for t in spec.values_of("task") if t != "arithmetic")
        return "model", models.tiny_refusal(model, task)
    return "axes", "no combination of the axes makes a valid RunConfig (see `sweep plan`)."


def split_sizes(spec: SweepSpec) -> dict[tuple[str, str, str, int], int]:
    """Training problems per (model, task, split, pool_size), for the splits already labelled."""
    sizes: dict[tuple[str, str, str, int], int] = {}
    models, splits, tasks, pools = map(spec.values_of, ("model", "split", "task", "pool_size"))
    for model, split, task, pool in itertools.product(models, splits, tasks, pools):
        if split == "all":  # split `all` trains on the whole pool, not on a labelled split
            continue
        path = difficulty.splits_path(model, task, pool, 0)
        if path.exists():
            try:
                sizes[(model, task, split, pool)] = len(difficulty.Splits.load(path).train(split))
            except (ValueError, KeyError, OSError):
                continue
    return sizes
