"""Guards a sweep meets before it runs: a grid too large to expand, a run that asks for more
cores than this machine has, an estimated wall time over a week. Each refuses with the field
and the fix, and yields to `$ISOLAB_NO_SIZE_GUARDS=1`.
"""

from __future__ import annotations

import math
import os

from isolab.config import SIZE_GUARD_ENV
from isolab.sweep.grid import SweepPlan
from isolab.sweep.spec import SpecError, SweepSpec

#: Grid points (axes × combos × seeds) past which a spec is refused before it is expanded
#: (200,000 points hung the planner), unless `$ISOLAB_NO_SIZE_GUARDS=1`.
MAX_GRID_POINTS = 5000
#: Estimated wall hours past which a sweep is refused before it runs, unless
#: `$ISOLAB_NO_SIZE_GUARDS=1` (a 2,000-point spec planned 2,080 h without a word).
MAX_WALL_HOURS = 168


def check_grid_size(spec: SweepSpec) -> None:
    """Refuse a spec of over `MAX_GRID_POINTS` points before it is expanded."""
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
