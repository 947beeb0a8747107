"""Sweeps: a spec (`spec`: base config, axes, budget) → a grid at equal compute (`plan`) → runs,
resumably (`resume`: what the store holds, what is left), on local workers (`local`), Ray
(`ray_backend`) or inline (`runner`), one point at a time (`point`).

    from isolab.sweep import SweepSpec, plan_sweep, run_sweep
    plan = plan_sweep(SweepSpec.from_yaml("studies/smoke.yaml"))
    report = run_sweep(plan, workers=2)
"""

from isolab.sweep.plan import GridPoint, SweepPlan, plan_sweep, split_sizes
from isolab.sweep.point import RunOutcome
from isolab.sweep.resume import pending, scan_store
from isolab.sweep.runner import SweepReport, check_run, execute, run_sweep
from isolab.sweep.spec import SpecError, SweepSpec

__all__ = [
    "GridPoint",
    "RunOutcome",
    "SpecError",
    "SweepPlan",
    "SweepReport",
    "SweepSpec",
    "check_run",
    "execute",
    "pending",
    "scan_store",
    "plan_sweep",
    "run_sweep",
    "split_sizes",
]
