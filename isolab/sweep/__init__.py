"""Sweeps: a spec (`spec`: base config, axes, budget) → a grid at equal compute (`plan`) → runs,
resumably, on local workers, Ray or inline (`runner`).

    from isolab.sweep import SweepSpec, plan_sweep, run_sweep
    plan = plan_sweep(SweepSpec.from_yaml("studies/smoke.yaml"))
    report = run_sweep(plan, workers=2)
"""

from isolab.sweep.plan import GridPoint, SweepPlan, plan_sweep, split_sizes
from isolab.sweep.runner import execute, run_sweep
from isolab.sweep.spec import SpecError, SweepSpec
from isolab.sweep.store import pending, scan_store

__all__ = [
    "GridPoint",
    "SpecError",
    "SweepPlan",
    "SweepSpec",
    "execute",
    "pending",
    "scan_store",
    "plan_sweep",
    "run_sweep",
    "split_sizes",
]
