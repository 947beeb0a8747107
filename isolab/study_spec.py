"""Study specs and the iso-compute planner: a YAML file → the grid of runs at equal compute.

A study sweeps some `RunConfig` fields (the axes) around a base config and gives every grid
point the same budget, either in rollouts (IsoCompute, ``C = B_p · n · M``, arXiv 2603.12151)
or in FLOPs (IsoFLOP, through the ledger's ``plan_run``; Wilhelm & Kao, arXiv 2607.13389).
The budget fixes each point's number of steps M; points that cannot spend it (a batch over
the cap, a budget below one step, n not dividing B…) are dropped with their reason.

Every run is evaluated at the same compute: checkpoints geometric in C up to the budget,
passed to the run as ``RunConfig.eval_at_rollouts``. Under IsoFLOP the checkpoints are the
same fractions of the FLOP budget, converted to each point's rollouts.

Example (``studies/smoke.yaml``)::

    name: smoke
    base: {model: tiny-m, split: easy, eval_problems: 16, eval_k_samples: 4}
    axes: {n: [2, 4, 8, 16, 32], B_p: [1, 2, 4]}
    budget_rollouts: 128
    max_batch: 32
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from isolab.config import RunConfig

# Fields a study may not sweep: the budget sets M, the spec sets the study, seeds and checkpoints.
RESERVED_FIELDS = ("study", "M", "seed", "eval_at_rollouts", "eval_every", "extra")
# `B` is not a RunConfig field: sweeping it with `n` fixes the batch and sets B_p = B / n
# (the IsoCompute n–B_p trade-off at fixed B).
AXES = tuple(f.name for f in dataclasses.fields(RunConfig) if f.name not in RESERVED_FIELDS) + (
    "B",
)


class SpecError(ValueError):
    """A study spec that cannot be planned; `field` names the offending key (e.g. `axes.n`)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class Resources:
    """What one run needs, for the Ray backend (and the thread count of local workers).

    Attributes:
        cpus_per_run: CPU cores per run (local workers use this many torch threads).
        gpus_per_run: GPUs per run (Ray's `num_gpus`; fractions share a GPU).
    """

    cpus_per_run: float = 1.0
    gpus_per_run: float = 0.0


@dataclass(frozen=True)
class Timing:
    """Coefficients of the wall-time estimate of a run (rough; calibrate from a pilot run).

    ``wall_s ≈ setup_s + steps · step_s + rollouts · passes · rollout_s
    + evaluations · eval_problems · eval_k_samples · eval_sample_s``. The defaults were
    measured with tiny-m on a busy 2-core CPU (TRL 1.16): about 0.1 s of fixed cost per step
    and 3 ms per rollout generated and trained on.
    """

    setup_s: float = 1.5
    step_s: float = 0.1
    rollout_s: float = 0.003
    eval_sample_s: float = 0.0015


@dataclass(frozen=True)
class StudySpec:
    """One iso-compute study: a base config, the axes swept around it, and a common budget.

    Attributes:
        name: study name: the MLflow experiment, and `RunConfig.study` of every run.
        base: the config every grid point starts from: RunConfig fields, or the path of a
            RunConfig YAML relative to the spec (its `M`, `seed`, `study` are the study's).
        axes: swept fields and their values, in grid order (`n`, `B_p`, `lr_base`, `recipe`,
            `reward`, `model`, `num_iterations`, `lora_rank`… any `RunConfig` field but
            those in `RESERVED_FIELDS`; or `B` with `n` to fix the batch, B_p = B / n).
        budget_rollouts: IsoCompute budget C in rollouts; each point gets
            M = budget_rollouts // (B_p · n) steps.
        budget_flops: IsoFLOP budget in model FLOPs (`flops/total` of the ledger); each point
            gets the largest M whose planned FLOPs fit. Give exactly one of the two budgets.
        max_batch: cap B_max on the batch B = B_p · n (None: no cap).
        seeds: one run per grid point and seed.
        eval_points: compute checkpoints, geometric in C, the last one at the budget.
        eval_ratio: ratio between consecutive checkpoints (2: budget/8, /4, /2, budget).
        metric: the evaluation metric reported per finished run (`eval/avg@4`).
        resources: CPUs / GPUs per run.
        timing: coefficients of the wall-time estimate.
        description: free text shown by `isolab sweep plan`.
    """

    name: str
    base: RunConfig
    axes: dict[str, tuple[Any, ...]]
    budget_rollouts: int | None = None
    budget_flops: float | None = None
    max_batch: int | None = None
    seeds: tuple[int, ...] = (0,)
    eval_points: int = 4
    eval_ratio: float = 2.0
    metric: str = "eval/avg@4"
    resources: Resources = field(default_factory=Resources)
    timing: Timing = field(default_factory=Timing)
    description: str = ""

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise SpecError("name", "give the study a non-empty name (the MLflow experiment).")
        if (self.budget_rollouts is None) == (self.budget_flops is None):
            raise SpecError(
                "budget_rollouts",
                "give exactly one budget: budget_rollouts (IsoCompute, C = B_p·n·M) "
                "or budget_flops (IsoFLOP).",
            )
        if self.budget_rollouts is not None and self.budget_rollouts < 1:
            raise SpecError("budget_rollouts", f"{self.budget_rollouts}: must be ≥ 1.")
        if self.budget_flops is not None and not self.budget_flops > 0:
            raise SpecError("budget_flops", f"{self.budget_flops}: must be > 0.")
        if self.max_batch is not None and self.max_batch < 2:
            raise SpecError(
                "max_batch", f"{self.max_batch}: B = B_p·n ≥ 2, so the cap must be ≥ 2."
            )
        if not self.seeds:
            raise SpecError("seeds", "empty: give at least one seed, e.g. [0].")
        if len(set(self.seeds)) != len(self.seeds):
            raise SpecError("seeds", f"{list(self.seeds)} repeats a seed.")
        if self.eval_points < 1:
            raise SpecError("eval_points", f"{self.eval_points}: must be ≥ 1.")
        if not self.eval_ratio > 1:
            raise SpecError("eval_ratio", f"{self.eval_ratio}: checkpoints need a ratio > 1.")
        if not self.metric.startswith("eval/"):
            raise SpecError("metric", f"{self.metric!r}: pick an evaluation metric, eval/avg@4.")
        if self.resources.cpus_per_run <= 0 or self.resources.gpus_per_run < 0:
            raise SpecError("resources", "cpus_per_run must be > 0 and gpus_per_run ≥ 0.")
        _check_axes(self.axes, self.base)

    @property
    def mode(self) -> str:
        """`isocompute` (budget in rollouts) or `isoflop` (budget in FLOPs)."""
        return "isocompute" if self.budget_rollouts is not None else "isoflop"

    def replace(self, **changes: Any) -> StudySpec:
        return dataclasses.replace(self, **changes)

    # ---- I/O ------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: dict[str, Any], root: Path | None = None) -> StudySpec:
        """Build a spec from parsed YAML; `root` resolves a `base` given as a file path."""
        if not isinstance(data, dict):
            raise SpecError("spec", "expected a mapping of study fields at the top level.")
        known = {f.name for f in dataclasses.fields(cls)}
        for key in data:
            if key not in known:
                raise SpecError(str(key), f"unknown study field; valid fields: {sorted(known)}.")
        if not data.get("name"):
            raise SpecError("name", "give the study a name (its MLflow experiment).")
        data = dict(data)
        data["base"] = _load_base(data.get("base") or {}, data.get("name"), root)
        axes = data.get("axes")
        if not isinstance(axes, dict) or not axes:
            raise SpecError("axes", "give at least one axis, e.g. axes: {n: [2, 4, 8]}.")
        data["axes"] = {str(k): _axis_values(str(k), v) for k, v in axes.items()}
        if "seeds" in data:
            seeds = data["seeds"]
            seeds = [seeds] if isinstance(seeds, int) else seeds
            if not isinstance(seeds, list) or not all(isinstance(s, int) for s in seeds):
                raise SpecError("seeds", f"{seeds!r}: give a list of integers, e.g. [0, 1].")
            data["seeds"] = tuple(seeds)
        for name, kind in (("budget_rollouts", int), ("max_batch", int), ("eval_points", int)):
            if data.get(name) is not None:
                data[name] = _number(name, data[name], kind)
        for name in ("budget_flops", "eval_ratio"):
            if data.get(name) is not None:
                data[name] = _number(name, data[name], float)
        for name, klass in (("resources", Resources), ("timing", Timing)):
            if name in data:
                data[name] = _sub(name, data[name] or {}, klass)
        return cls(**data)

    @classmethod
    def from_yaml(cls, path: str | Path) -> StudySpec:
        path = Path(path)
        if not path.exists():
            raise SpecError("spec", f"file {path} does not exist.")
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise SpecError("spec", f"{path} is not valid YAML: {exc}") from exc
        return cls.from_dict(data, root=path.parent)


def _load_base(base: Any, name: Any, root: Path | None) -> RunConfig:
    if isinstance(base, str):
        path = Path(base) if root is None or Path(base).is_absolute() else root / base
        if not path.exists():
            raise SpecError("base", f"config file {path} does not exist.")
        base = yaml.safe_load(path.read_text()) or {}
        if isinstance(base, dict):  # a run's config file: the study sets these fields
            base = {k: v for k, v in base.items() if k not in RESERVED_FIELDS or k == "extra"}
    if not isinstance(base, dict):
        raise SpecError("base", "give a mapping of RunConfig fields or the path of a config YAML.")
    known = {f.name for f in dataclasses.fields(RunConfig)}
    for key in base:
        if key in RESERVED_FIELDS and key != "extra":
            raise SpecError(f"base.{key}", _reserved_reason(key))
        if key not in known:
            raise SpecError(f"base.{key}", f"unknown RunConfig field; valid: {sorted(known)}.")
    try:
        return RunConfig(**{**_coerce(base), "study": str(name or "default")})
    except (ValueError, TypeError) as exc:
        raise SpecError(_field_in(str(exc)), str(exc)) from exc


def _reserved_reason(key: str) -> str:
    return {
        "study": "the study's `name` is every run's study; remove it.",
        "M": "M is set by the budget (budget_rollouts or budget_flops); remove it.",
        "seed": "list seeds in the top-level `seeds`.",
        "eval_at_rollouts": "checkpoints come from eval_points / eval_ratio; remove it.",
        "eval_every": "runs are evaluated at common compute checkpoints; use eval_points.",
    }.get(key, "set by the study; remove it.")


def _axis_values(name: str, values: Any) -> tuple[Any, ...]:
    """An axis as a tuple, with YAML's string floats (`1e-5`) turned into numbers."""
    values = values if isinstance(values, list) else [values]
    return tuple(_coerce({name: v})[name] for v in values)


def _check_axes(axes: dict[str, tuple[Any, ...]], base: RunConfig) -> None:
    if not axes:
        raise SpecError("axes", "give at least one axis, e.g. axes: {n: [2, 4, 8]}.")
    if "B" in axes and "B_p" in axes:
        raise SpecError("axes.B", "sweep either B (B_p = B / n) or B_p, not both.")
    for name, values in axes.items():
        if name not in AXES:
            reason = _reserved_reason(name) + " " if name in RESERVED_FIELDS else ""
            raise SpecError(
                f"axes.{name}", f"unknown axis. {reason}Sweepable fields: {', '.join(AXES)}."
            )
        if not values:
            raise SpecError(f"axes.{name}", "empty list: give at least one value.")
        if len(set(map(repr, values))) != len(values):
            raise SpecError(f"axes.{name}", f"{list(values)} repeats a value.")
        if name == "B":
            for v in values:
                if not isinstance(v, int) or v < 2:
                    raise SpecError("axes.B", f"B = {v!r}: batches are integers ≥ 2.")
            continue
        for v in values:  # each value alone must make a valid config (n ≥ 2, known recipe…)
            try:
                base.replace(**{name: v})
            except (ValueError, TypeError) as exc:
                raise SpecError(f"axes.{name}", str(exc)) from exc


def _field_in(message: str) -> str:
    """`base.n` for a RunConfig error that starts with `n = 1: …`, else `base`."""
    head = message.split(" ", 1)[0].strip(":=")
    return f"base.{head}" if head in {f.name for f in dataclasses.fields(RunConfig)} else "base"


def _coerce(values: dict[str, Any]) -> dict[str, Any]:
    """YAML 1.1 reads `5e-5` as a string: turn strings into floats for float fields."""
    types = {f.name: str(f.type) for f in dataclasses.fields(RunConfig)}
    out = {}
    for key, value in values.items():
        if isinstance(value, str) and types.get(key, "").startswith("float"):
            with contextlib.suppress(ValueError):  # a bad value is reported by RunConfig
                value = float(value)
        out[key] = value
    return out


def _number(name: str, value: Any, kind: type) -> int | float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SpecError(name, f"{value!r} is not a number.") from None
    if kind is int:
        if not number.is_integer():
            raise SpecError(name, f"{value!r}: give an integer.")
        return int(number)
    return number


def _sub(name: str, data: Any, klass: type) -> Any:
    if not isinstance(data, dict):
        raise SpecError(name, "give a mapping.")
    known = {f.name for f in dataclasses.fields(klass)}
    for key in data:
        if key not in known:
            raise SpecError(f"{name}.{key}", f"unknown field; valid: {sorted(known)}.")
    return klass(**{k: _number(f"{name}.{k}", v, float) for k, v in data.items()})


# ---- planning ------------------------------------------------------------------------------
@dataclass(frozen=True)
class GridPoint:
    """One run of the study: its config (M and checkpoints filled in) and its planned cost.

    Attributes:
        config: the run's `RunConfig` (`run_key` identifies it in MLflow).
        values: the axis values of this point and its seed, for display.
        planned_flops: planned model FLOPs of the run (`flops/total`), NaN if unknown.
        rho: planned update fraction ρ = C_learning / C_total.
        est_wall_s: estimated wall time from the spec's `timing`.
    """

    config: RunConfig
    values: dict[str, Any]
    planned_flops: float
    rho: float
    est_wall_s: float

    @property
    def run_key(self) -> str:
        return self.config.run_key


@dataclass(frozen=True)
class DroppedPoint:
    """A grid point the budget or the cap rules out, and why."""

    values: dict[str, Any]
    reason: str


@dataclass(frozen=True)
class StudyPlan:
    """The grid of a study: the runs to do, the points dropped, the checkpoints."""

    spec: StudySpec
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
    return (
        timing.setup_s
        + steps * timing.step_s
        + cfg.rollouts * cfg.num_iterations * timing.rollout_s
        + samples * timing.eval_sample_s
    )


def _grid(spec: StudySpec):
    """(axis values, config changes) for every combination of the axes and seeds."""
    names = list(spec.axes)
    for combo in itertools.product(*(spec.axes[n] for n in names)):
        values = dict(zip(names, combo, strict=True))
        for seed in spec.seeds:
            yield {**values, "seed": seed}


def plan_study(
    spec: StudySpec, train_problems: dict[tuple[str, str, str, int], int] | None = None
) -> StudyPlan:
    """Expand the axes, give every point the budget, drop those that cannot spend it.

    Args:
        spec: the study.
        train_problems: training problems per (model, task, split, pool_size), when known;
            points with more
            problems per step than the split holds are dropped (see `split_sizes`).

    Raises:
        SpecError: when every point is dropped (naming the budget or the cap at fault).
    """
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
        point = _plan_point(spec, cfg, values, fractions)
        if isinstance(point, DroppedPoint):
            dropped.append(point)
            reasons.add("budget")
        else:
            points.append(point)
    if not points:
        raise SpecError(*_why_empty(spec, reasons))
    return StudyPlan(spec, points, dropped, fractions)


def _plan_point(
    spec: StudySpec, cfg: RunConfig, values: dict[str, Any], fractions: tuple[float, ...]
) -> GridPoint | DroppedPoint:
    step = _planned(cfg)  # one step of this point
    step_flops = step.get("flops/total", math.nan)
    if spec.budget_rollouts is not None:
        M = spec.budget_rollouts // cfg.B
        if M < 1:
            return DroppedPoint(
                values, f"budget {spec.budget_rollouts} rollouts < one step of B = {cfg.B}"
            )
        at = checkpoints(spec.budget_rollouts, fractions)
    else:
        budget = float(spec.budget_flops)  # type: ignore[arg-type]
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
        at = checkpoints(budget / step_flops * cfg.B, fractions)
    cfg = cfg.replace(M=M, eval_at_rollouts=at)
    evals = 1 + len({min(-(-c // cfg.B), M) for c in at} | {M})
    return GridPoint(
        config=cfg,
        values=values,
        planned_flops=M * step_flops,
        rho=step.get("compute/rho", math.nan),
        est_wall_s=estimate_wall_s(cfg, evals, spec.timing),
    )


def _planned(cfg: RunConfig) -> dict[str, float]:
    """The ledger's plan of one step; empty when the model's config is not reachable."""
    from isolab.planning import plan_config

    try:
        return plan_config(cfg.replace(M=1))
    except (OSError, ValueError, RuntimeError):
        return {}


def _why_empty(spec: StudySpec, reasons: set[str]) -> tuple[str, str]:
    if "budget" in reasons:
        name = "budget_rollouts" if spec.mode == "isocompute" else "budget_flops"
        return name, (
            "below one step for every grid point that fits the cap; raise the budget "
            "or add smaller n / B_p values."
        )
    if "max_batch" in reasons:
        return "max_batch", f"{spec.max_batch}: every grid point's B = B_p·n is over the cap."
    if "divisible" in reasons:
        return "axes.B", "no value of B is divisible by any n."
    if "split" in reasons:
        return "axes.B_p", "every B_p is over the training problems of its split."
    return "axes", "no combination of the axes makes a valid RunConfig (see `sweep plan`)."


def split_sizes(spec: StudySpec) -> dict[tuple[str, str, str, int], int]:
    """Training problems per (model, task, split, pool_size), for the splits already labelled."""
    from isolab import difficulty

    sizes: dict[tuple[str, str], int] = {}
    models = spec.axes.get("model", (spec.base.model,))
    splits = spec.axes.get("split", (spec.base.split,))
    tasks = spec.axes.get("task", (spec.base.task,))
    pools = spec.axes.get("pool_size", (spec.base.pool_size,))
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
