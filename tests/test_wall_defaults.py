"""The wall-time defaults of the tiny presets (`isolab.sweep.spec.Timing`) against what this
machine measured (issue 48): for every committed CPU sweep, the median run `sweep plan`
estimates against the median run's wall time (end − start, 2 workers on 2 cores) of its
snapshot. No one set of rates fits them all closer: the same work (steps, rollouts,
evaluation samples) took twice as long in the nstar sweeps as in the later healthy-recipe
ones. The adaptive sweep is left out: its runs' wall times hold their pauses at each rung.
A new committed sweep that falls outside the band asks for the rates to be fitted again."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import polars as pl
import pytest

from isolab.sweep.checkpoints import eval_steps
from isolab.sweep.plan import plan_sweep
from isolab.sweep.spec import SweepSpec, Timing
from isolab.sweep.wall import estimate_wall_s

REPO = Path(__file__).resolve().parents[1]
#: The worst committed sweep's median estimate over its median run, either way.
BAND = 1.51
#: The defaults before issue 48, measured once with tiny-m: 2.3× over on healthy-recipe's grid.
OLD = Timing(setup_s=1.5, step_s=0.1, rollout_s=0.003, eval_sample_s=0.0015)


def _snapshots() -> list[tuple[str, Path, Path]]:
    found = []
    for runs in sorted(REPO.glob("runs/*/cpu/*/runs.parquet")):
        study, sweep = runs.parts[-4], runs.parts[-2]
        spec = REPO / "studies" / study / "cpu" / f"{sweep}.yaml"
        if spec.exists() and sweep != "adaptive":
            found.append((f"{study}/{sweep}", spec, runs))
    return found


def _medians(spec: Path, runs: Path, uri: str) -> tuple[float, float, float, int]:
    """(median estimate, median estimate with `OLD`, median measured wall, runs compared)."""
    plan = plan_sweep(SweepSpec.from_yaml(spec), tracking_uri=uri)
    points = {p.run_key: p for p in plan.points}
    assert {p.timing_source for p in plan.points} == {"tiny defaults"}
    walls = (
        pl.read_parquet(runs, columns=["run_key", "status", "start_time", "end_time"])
        .filter(pl.col("status") == "FINISHED")
        .group_by("run_key")
        .agg(((pl.col("end_time") - pl.col("start_time")) / 1000).first().alias("wall_s"))
        .filter(pl.col("run_key").is_in(list(points)))
    )
    keys = walls["run_key"].to_list()
    est = [points[k].est_wall_s for k in keys]
    old = [
        estimate_wall_s(points[k].config, 1 + len(eval_steps(points[k].config)), OLD) for k in keys
    ]
    return (
        statistics.median(est),
        statistics.median(old),
        statistics.median(walls["wall_s"]),
        len(keys),
    )


def test_the_default_rates_estimate_every_committed_cpu_sweeps_median_run(tmp_path):
    sweeps = _snapshots()
    if not sweeps:
        pytest.skip("no committed CPU snapshot with its spec under runs/ and studies/")
    uri = f"sqlite:///{tmp_path / 'empty.db'}"  # no runs: no measured completion lengths
    rows = {name: _medians(spec, runs, uri) for name, spec, runs in sweeps}
    table = "\n".join(
        f"{name:30s} {est:7.0f} s (was {old:5.0f} s)  measured {wall:6.0f} s  ({n} runs)"
        for name, (est, old, wall, n) in rows.items()
    )
    print(table)
    assert all(n >= 5 for *_, n in rows.values()), table
    off = {name: est / wall for name, (est, _, wall, _) in rows.items()}
    assert max(abs(math.log(r)) for r in off.values()) <= math.log(BAND), table
    # the band is a claim about these rates: the old ones fall outside it
    was = {name: old / wall for name, (_, old, wall, _) in rows.items()}
    assert max(abs(math.log(r)) for r in was.values()) > math.log(BAND), table
