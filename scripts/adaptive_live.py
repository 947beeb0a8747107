"""The live adaptive sweep against the full grid and against its own replay (issue 32, part 2:
"then live").

    .venv/bin/python scripts/adaptive_live.py [SNAPSHOT]

SNAPSHOT (default runs/nstar/cpu/adaptive) is `isolab runs export nstar/cpu/adaptive` of
`isolab sweep adaptive studies/nstar/cpu/adaptive.yaml --workers 2`: nstar/cpu/main's Easy grid
(the same configs and seeds) run adaptively with the rule of issue 32 (z = 2.5, grace = 2, judged from the third checkpoint:
`ISSUE_32_RULE`; the default since issue 47 waits for half the budget). A run
whose last evaluation is below the budget was stopped there.

It prints, per checkpoint C: the full grid's best arm (runs/nstar/cpu/main, Easy) and whether
the grid resolves n* there, the live sweep's best arm among those still running, and whether
its n is within one grid step of the grid's; then the compute the live sweep spent against
the full grid's, the arms it stopped against those the replay of the same rule on the grid's
curves stops, and how far the live runs' avg@4 lies from the grid's same runs (same config and
seed) at the checkpoints both reached.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import polars as pl

from isolab.sweep.adaptive import StoppingRule, arm_label_expr, replay
from isolab.table import as_float
from isolab.tracking.runs import load_runs
from isolab.vocab import DEFAULT_X, DEFAULT_Y

RUNS = Path(__file__).resolve().parents[1] / "runs"
CFG = ("n", "B_p", "M")

#: The rule the committed live sweep ran with (before issue 47 made the default wait).
ISSUE_32_RULE = StoppingRule(z=2.5, judge_from=0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("snapshot", nargs="?", type=Path, default=RUNS / "nstar/cpu/adaptive")
    args = parser.parse_args()
    x, y = DEFAULT_X, DEFAULT_Y
    grid = load_runs(RUNS / "nstar/cpu/main", statuses=["FINISHED"]).filter(
        pl.col("split") == "easy"
    )
    live = load_runs(args.snapshot, statuses=None).filter(pl.col("split") == "easy")
    budget = as_float(grid[x].max())
    grid, live = (
        d.filter(pl.col(x) > 0).with_columns(arm=arm_label_expr(CFG)) for d in (grid, live)
    )
    r = replay(grid, ISSUE_32_RULE)

    ends = live.group_by("arm", "seed").agg(pl.col(x).max().alias("end"))
    stopped = {
        row["arm"]: row["end"]
        for row in ends.group_by("arm").agg(pl.col("end").max()).iter_rows(named=True)
        if row["end"] < budget
    }
    print("| C | grid best | resolved | live best | live n within a step | live arms |")
    print("|---|---|---|---|---|---|")
    within = []
    for p in r.path.iter_rows(named=True):
        C = p["C"]
        at = live.filter(pl.col(x) == C)
        if at.is_empty():
            continue
        means = at.group_by("arm", "n").agg(pl.col(y).mean()).sort(y, descending=True)
        best, n = means["arm"][0], means["n"][0]
        ok = abs(math.log2(n / p["grid_n"])) <= 1 + 1e-9
        if p["resolved"]:
            within.append(ok)
        print(
            f"| {C:,.0f} | {p['grid_best']} | {'yes' if p['resolved'] else 'no'} | {best} | "
            f"{'yes' if ok else 'NO'} | {means.height} |"
        )
    spent = as_float(ends["end"].sum())
    full = as_float(grid.group_by("arm", "seed").agg(pl.col(x).max())[x].sum())
    print(
        f"\nlive: {spent:,.0f} of the grid's {full:,.0f} rollouts ({spent / full:.1%}); "
        f"replay of the same rule on the grid's curves: {r.fraction:.1%}"
    )
    print(f"n* within a step at every resolved C: {'yes' if all(within) else 'NO'}")
    print(
        f"the grid's best at the budget ({r.path['grid_best'][-1]}) stopped live: "
        f"{'YES' if r.path['grid_best'][-1] in stopped else 'no'}"
    )
    replayed = {
        row["arm"]: row["stopped_at"]
        for row in r.arms.filter(pl.col("stopped_at").is_not_null()).iter_rows(named=True)
    }
    print("\n| arm | stopped live at | stopped in the replay at |")
    print("|---|---|---|")
    for arm in sorted(set(stopped) | set(replayed), key=lambda a: (len(a), a)):
        live_at = f"{stopped[arm]:,.0f}" if arm in stopped else "—"
        replay_at = f"{replayed[arm]:,.0f}" if arm in replayed else "—"
        print(f"| {arm} | {live_at} | {replay_at} |")
    both = live.join(grid, on=["arm", "seed", x], suffix="_grid")
    diff = (both[y] - both[f"{y}_grid"]).abs()
    print(
        f"\nlive vs grid, same config and seed, {both.height} evaluations both reached: "
        f"|Δ avg@4| mean {diff.mean():.4f}, max {diff.max():.4f}; identical "
        f"{(diff == 0).sum()} of {both.height}"
    )


if __name__ == "__main__":
    main()
