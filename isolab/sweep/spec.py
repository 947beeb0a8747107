"""Sweep specs: a YAML file naming a base run config, the axes swept around it, and a budget.

A sweep varies some `RunConfig` fields (the axes) around a base config and gives every grid
point the same budget, in rollouts (IsoCompute, ``C = B_p · n · M``, arXiv 2603.12151; with
dynamic sampling every generated rollout counts, ``C = k · B_p · n · M`` for
``search_oversample`` k) or in FLOPs (IsoFLOP; Wilhelm & Kao, arXiv 2607.13389).
`combos` lists settings of fields that vary together (six (k, μ) pairs rather than all
twelve), crossed with the axes. `isolab.sweep.plan` turns a spec into the grid;
`isolab.sweep.runner` runs it. Checkpoints geometric in C up to the budget are passed to every
run as ``RunConfig.eval_at_rollouts``, so all runs are measured at the same compute.

Example (``studies/smoke.yaml``)::

    name: smoke
    base: {model: tiny-m, split: easy, eval_problems: 16, eval_k_samples: 4}
    axes: {n: [2, 4, 8, 16, 32], B_p: [1, 2, 4]}
    budget_rollouts: 128
    max_batch: 32
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from isolab.config import MAX_SEED, SIZE_GUARD_ENV, SIZE_GUARDS, RunConfig
from isolab.sweep.spec_checks import (
    RESERVED_FIELDS,
    SpecError,
    axis_values,
    check_axes,
    check_combos,
    check_name,
    field_in,
    number,
    reserved_reason,
    yaml_key,
)
from isolab.userinput import brief, read_yaml
from isolab.vocab import EVAL_AVG, EVAL_PREFIX

#: Most checkpoints a sweep may ask for: each is an evaluation of every run.
MAX_EVAL_POINTS = 100
#: The metrics a run reports (`isolab.metrics.metrics_from_counts`), k from its `eval_ks`.
METRIC = re.compile(rf"{re.escape(EVAL_PREFIX)}(avg|best|worst)@(\d+)")


@dataclass(frozen=True)
class Resources:
    """What one run needs, for the Ray backend (and the thread count of local workers).

    A run of K processes (`RunConfig.processes`) needs K times both: Ray places its one task,
    with K·cpus_per_run CPUs and K·gpus_per_run GPUs, on one node.

    Attributes:
        cpus_per_run: CPU cores per run and process (local workers use this many torch threads).
        gpus_per_run: GPUs per run and process (Ray's `num_gpus`; fractions share a GPU).
    """

    cpus_per_run: float = 1.0
    gpus_per_run: float = 0.0

    def for_processes(self, processes: int) -> tuple[float, float]:
        """(CPUs, GPUs) of a run of `processes` processes."""
        return self.cpus_per_run * processes, self.gpus_per_run * processes


@dataclass(frozen=True)
class Timing:
    """Coefficients of the wall-time estimate of a run (rough; calibrate from a pilot run).

    ``wall_s ≈ setup_s + steps · step_s + rollouts · passes · rollout_s
    + evaluations · eval_problems · eval_k_samples · eval_sample_s``. The defaults are fitted
    to the committed CPU sweeps' runs (tiny presets, 2 workers on 2 cores), the worst sweep's
    median run within 1.51× either way (`tests/test_wall_defaults.py`): about 1.7 ms per
    rollout generated and trained on and 1.5 ms per evaluation sample.
    """

    setup_s: float = 0.47
    step_s: float = 0.0114
    rollout_s: float = 0.00173
    eval_sample_s: float = 0.00153


@dataclass(frozen=True)
class SweepSpec:
    """One iso-compute sweep: a base config, the axes swept around it, and a common budget.

    Attributes:
        name: the sweep's name: its MLflow experiment, `RunConfig.experiment` of every run.
        base: the config every grid point starts from: RunConfig fields, or the path of a
            RunConfig YAML relative to the spec (its `M`, `seed`, `experiment` are the sweep's).
        axes: swept fields and their values, in grid order (`n`, `B_p`, `lr_base`, `recipe`,
            `reward`, `model`, `num_iterations`, `lora_rank`… any `RunConfig` field but
            those in `RESERVED_FIELDS`; or `B` with `n` to fix the batch, B_p = B / n).
        combos: settings of fields that vary together, crossed with the axes: each a mapping of
            the same fields (sweepable as axes are, and not axes themselves), e.g.
            ``({"search_oversample": 8, "num_iterations": 1}, {"search_oversample": 1,
            "num_iterations": 4})``. Empty: the grid is the axes' full product.
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
    combos: tuple[dict[str, Any], ...] = ()
    budget_rollouts: int | None = None
    budget_flops: float | None = None
    max_batch: int | None = None
    seeds: tuple[int, ...] = (0,)
    eval_points: int = 4
    eval_ratio: float = 2.0
    metric: str = EVAL_AVG
    resources: Resources = field(default_factory=Resources)
    timing: Timing = field(default_factory=Timing)
    description: str = ""

    def __post_init__(self) -> None:
        check_name(self.name)
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
        for seed in self.seeds:
            if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
                raise SpecError("seeds", f"{brief(seed)}: seeds are integers from 0 to 2**32 - 1.")
        if len(set(self.seeds)) != len(self.seeds):
            raise SpecError("seeds", f"{brief(list(self.seeds))} repeats a seed.")
        if not 1 <= self.eval_points <= MAX_EVAL_POINTS:
            raise SpecError(
                "eval_points",
                f"{self.eval_points:,}: give 1 to {MAX_EVAL_POINTS} checkpoints (each one "
                "evaluates every run).",
            )
        if not self.eval_ratio > 1:
            raise SpecError("eval_ratio", f"{self.eval_ratio}: checkpoints need a ratio > 1.")
        if not isinstance(self.metric, str) or not METRIC.fullmatch(self.metric):
            raise SpecError(
                "metric",
                f"{brief(self.metric)}: pick eval/avg@k, eval/best@k or eval/worst@k, e.g. "
                "eval/avg@4.",
            )
        if not self.resources.cpus_per_run > 0 or not self.resources.gpus_per_run >= 0:
            raise SpecError("resources", "cpus_per_run must be > 0 and gpus_per_run ≥ 0.")
        for part in dataclasses.fields(self.timing):
            if not getattr(self.timing, part.name) >= 0:
                raise SpecError(
                    f"timing.{part.name}",
                    f"{getattr(self.timing, part.name)}: a time in seconds, ≥ 0.",
                )
        object.__setattr__(self, "axes", check_axes(self.axes, self.base, bool(self.combos)))
        object.__setattr__(self, "combos", check_combos(self.combos, self.axes, self.base))
        self._check_metric_k()
        self._check_steps()

    def _check_metric_k(self) -> None:
        """The metric's k is evaluated by every run (in `eval_ks` of the base and each axis
        value)."""
        match = METRIC.fullmatch(self.metric)
        assert match is not None  # __post_init__ checked the metric's form before this
        k = int(match.group(2))
        where = "every value of eval_ks" if "eval_ks" in self.varying else "base.eval_ks"
        for eval_ks in self.values_of("eval_ks"):
            if k not in eval_ks:
                raise SpecError(
                    "metric",
                    f"{self.metric}: k = {k} is not in eval_ks {list(eval_ks)}; add {k} to "
                    f"{where} (with eval_k_samples ≥ {k}) or pick a metric of those k.",
                )
            # avg@k is one number whatever k, logged under the largest k only; best@1 and
            # worst@1 equal it (isolab.metrics.metrics_from_counts)
            logged = f"{self.metric.split('@')[0]}@{max(eval_ks)}"
            if self.metric.startswith(f"{EVAL_PREFIX}avg@") and k != max(eval_ks):
                raise SpecError(
                    "metric",
                    f"{self.metric}: avg@k is the mean accuracy for every k and is logged once, "
                    f"as {logged} (the largest of eval_ks {list(eval_ks)}); use metric: {logged}.",
                )
            if k == 1 and len(eval_ks) > 1:
                raise SpecError(
                    "metric",
                    f"{self.metric}: best@1 and worst@1 equal avg@k and are not logged beside "
                    f"it; use metric: eval/avg@{max(eval_ks)}.",
                )

    def _check_steps(self) -> None:
        """A rollout budget whose smallest batch would take more steps than the size guard of
        M allows (`isolab.config.SIZE_GUARDS`)."""
        if self.budget_rollouts is None or os.environ.get(SIZE_GUARD_ENV) == "1":
            return
        if "B" in self.varying:
            smallest = min(self.values_of("B"))
        else:
            smallest = min(self.values_of("n")) * min(self.values_of("B_p"))
        steps = self.budget_rollouts // smallest
        if steps > SIZE_GUARDS["M"]:
            raise SpecError(
                "budget_rollouts",
                f"{self.budget_rollouts:,} gives M = {steps:,} steps at B = {smallest}, over "
                f"isolab's guard of {SIZE_GUARDS['M']:,}: lower the budget, or set "
                f"{SIZE_GUARD_ENV}=1 to plan it anyway.",
            )

    @property
    def varying(self) -> tuple[str, ...]:
        """The fields the grid varies: the axes, then the fields of the combos."""
        return (*self.axes, *(self.combos[0] if self.combos else ()))

    def values_of(self, name: str) -> tuple[Any, ...]:
        """Every value field `name` takes in the grid: its axis, its combos' or the base's."""
        if name in self.axes:
            return self.axes[name]
        if self.combos and name in self.combos[0]:
            return tuple(combo[name] for combo in self.combos)
        return (getattr(self.base, name),)

    @property
    def mode(self) -> str:
        """`isocompute` (budget in rollouts) or `isoflop` (budget in FLOPs)."""
        return "isocompute" if self.budget_rollouts is not None else "isoflop"

    def replace(self, **changes: Any) -> SweepSpec:
        return dataclasses.replace(self, **changes)

    # ---- I/O ------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: dict[str, Any], root: Path | None = None) -> SweepSpec:
        """Build a spec from parsed YAML; `root` resolves a `base` given as a file path."""
        if not isinstance(data, dict):
            raise SpecError("spec", "expected a mapping of sweep fields at the top level.")
        known = {f.name for f in dataclasses.fields(cls)}
        for key in data:
            if key not in known:
                raise SpecError(
                    yaml_key(key), f"unknown sweep field; valid fields: {sorted(known)}."
                )
        check_name(data.get("name"))
        data = dict(data)
        data["base"] = _load_base(data.get("base") or {}, data.get("name"), root)
        axes = data.get("axes", {} if "combos" in data else None)
        if not isinstance(axes, dict) or not (axes or "combos" in data):
            raise SpecError("axes", "give at least one axis, e.g. axes: {n: [2, 4, 8]}.")
        data["axes"] = {str(k): axis_values(str(k), v) for k, v in axes.items()}
        if "combos" in data:
            combos = data["combos"]
            if not isinstance(combos, list) or not combos:
                raise SpecError(
                    "combos",
                    f"{brief(combos)}: give a list of mappings of fields that vary together, "
                    "e.g. [{search_oversample: 8, num_iterations: 1}, …], or remove the key.",
                )
            data["combos"] = tuple(combos)
        if "seeds" in data:
            seeds = data["seeds"]
            if isinstance(seeds, int) and not isinstance(seeds, bool):  # not read as [5]
                raise SpecError(
                    "seeds",
                    f"{brief(seeds)}: give a list, e.g. seeds: [{brief(seeds)}] for one seed "
                    "or seeds: [0, 1, 2] for three.",
                )
            if not isinstance(seeds, list) or not all(isinstance(s, int) for s in seeds):
                raise SpecError("seeds", f"{brief(seeds)}: give a list of integers, e.g. [0, 1].")
            data["seeds"] = tuple(seeds)
        for name, kind in (("budget_rollouts", int), ("max_batch", int), ("eval_points", int)):
            if data.get(name) is not None:
                data[name] = number(name, data[name], kind)
        for name in ("budget_flops", "eval_ratio"):
            if data.get(name) is not None:
                data[name] = number(name, data[name], float)
        for name, klass in (("resources", Resources), ("timing", Timing)):
            if name in data:
                data[name] = _sub(name, data[name] or {}, klass)
        return cls(**data)

    @classmethod
    def from_yaml(cls, path: str | Path) -> SweepSpec:
        path = Path(path)
        if not path.exists():
            raise SpecError("spec", f"file {path} does not exist.")
        if not path.is_file():
            raise SpecError("spec", f"{path} is not a file: give a sweep spec YAML.")
        try:
            data = read_yaml(path)
        except ValueError as exc:
            raise SpecError("spec", f"{path} is not a readable YAML file ({exc}).") from None
        if data is None:
            raise SpecError(
                "spec", f"{path} is empty: write a sweep spec (see studies/smoke.yaml)."
            )
        if isinstance(data, dict) and "name" not in data and "axes" not in data:
            raise SpecError(
                "spec",
                f"{path} has no `name` nor `axes`: it looks like a run config, not a sweep spec; "
                "run it with `isolab train` (or give it as a sweep's `base`).",
            )
        return cls.from_dict(data, root=path.parent)


def _load_base(base: Any, name: Any, root: Path | None) -> RunConfig:
    if isinstance(base, str):
        path = Path(base) if root is None or Path(base).is_absolute() else root / base
        try:
            base = read_yaml(path) or {}
        except FileNotFoundError:
            raise SpecError("base", f"config file {path} does not exist.") from None
        except ValueError as exc:
            raise SpecError("base", f"{path} is not a readable run config YAML ({exc}).") from None
        if isinstance(base, dict):  # a run's config file: the sweep sets these fields
            base = {k: v for k, v in base.items() if k not in RESERVED_FIELDS or k == "extra"}
    if not isinstance(base, dict):
        raise SpecError("base", "give a mapping of RunConfig fields or the path of a config YAML.")
    known = {f.name for f in dataclasses.fields(RunConfig)}
    for key in base:
        if key in RESERVED_FIELDS and key != "extra":
            raise SpecError(f"base.{yaml_key(key)}", reserved_reason(key))
        if key not in known:
            raise SpecError(
                f"base.{yaml_key(key)}", f"unknown RunConfig field; valid: {sorted(known)}."
            )
    config: dict[str, Any] = {**base, "experiment": str(name or "default")}
    try:
        return RunConfig(**config)
    except (ValueError, TypeError) as exc:
        raise SpecError(field_in(str(exc)), str(exc)) from exc


def _sub(name: str, data: Any, klass: type[Resources] | type[Timing]) -> Resources | Timing:
    """The spec's `resources:` or `timing:` mapping as its dataclass, every value a number."""
    if not isinstance(data, dict):
        raise SpecError(name, "give a mapping.")
    known = {f.name for f in dataclasses.fields(klass)}
    for key in data:
        if key not in known:
            raise SpecError(f"{name}.{yaml_key(key)}", f"unknown field; valid: {sorted(known)}.")
    return klass(**{k: number(f"{name}.{k}", v, float) for k, v in data.items()})
