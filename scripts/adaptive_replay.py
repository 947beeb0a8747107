"""Adaptive sweeps replayed on the committed nstar/cpu/main curves (issue 32, part 2: replay).

    .venv/bin/python scripts/adaptive_replay.py [--tune]

Per split (`isolab.sweep.adaptive.replay`): at each checkpoint C the full grid's best arm and
adaptive's best surviving arm, whether the grid resolves n* there (every arm within
2 standard errors of its best has n within one grid step), whether adaptive's n* is within
one grid step of the grid's; then the compute spent as a fraction of the grid's and whether
the grid's best arm at the last checkpoint was stopped. The rules: the default `StoppingRule`
(z = 3, nothing stopped before half the budget: issue 47), issue 32's default (z = 2.5 from the
third checkpoint) and its cheaper z = 1.5, for comparison.

How often each rule keeps the best arm of planted worlds (constant lead, late bloomers, null)
is benchmarks/adaptive_calibration.py's.

`--tune` then plays the default rule through Ray Tune (`isolab.sweep.adaptive_tune`: the
`AdaptiveScheduler`, one trial per run replaying its saved curve) on a local Ray instance, and
checks that it stops the same arms at the same checkpoints and spends the same compute.

n-vs-bp/cpu reads the same runs (nstar/cpu/main, grouped by batch B = n·B_p): its replay is
this one.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

import polars as pl

from isolab.sweep.adaptive import StoppingRule, replay
from isolab.tracking.runs import load_runs

RUNS = Path(__file__).resolve().parents[1] / "runs"
RULES = (StoppingRule(), StoppingRule(z=2.5, judge_from=0), StoppingRule(z=1.5, judge_from=0))


def replay_table(df: pl.DataFrame) -> None:
    for split in sorted(df["split"].unique()):
        d = df.filter(pl.col("split") == split)
        for rule in RULES:
            r = replay(d, rule)
            print(f"\n### nstar/cpu/main, {split}: {rule.text}\n")
            print(
                "| C | grid best | grid n* | resolved | adaptive best | adaptive n* | "
                "within a step | arms alive |"
            )
            print("|---|---|---|---|---|---|---|---|")
            for p in r.path.iter_rows(named=True):
                print(
                    f"| {p['C']:,.0f} | {p['grid_best']} | {p['grid_n']} | "
                    f"{'yes' if p['resolved'] else 'no'} | {p['adaptive_best']} | "
                    f"{p['adaptive_n']} | {'yes' if p['within_step'] else 'NO'} | {p['alive']} |"
                )
            print(
                f"\ncompute {r.fraction:.1%} of the grid's; n* found at every resolved C: "
                f"{'yes' if r.n_star_found else 'no'}; grid's best dropped: "
                f"{'YES' if r.best_dropped else 'no'}; kept: {', '.join(r.kept)}"
            )


def tune_table(df: pl.DataFrame) -> None:
    import ray

    from isolab.sweep.adaptive_tune import tune_replay
    from isolab.sweep.ray_backend import start_local_ray

    # Tune warns at every resumed trial that its result.json is not yet in the storage folder
    logging.getLogger("ray.tune.logger").setLevel(logging.ERROR)
    rows = []  # printed after Tune's own output
    start_local_ray(ray, num_cpus=2)
    try:
        for split in sorted(df["split"].unique()):
            d = df.filter(pl.col("split") == split)
            want = replay(d, StoppingRule()).arms.select("arm", "stopped_at", "spent").sort("arm")
            with tempfile.TemporaryDirectory() as storage:
                got = tune_replay(d, StoppingRule(), Path(storage))
            mine = got.arms.select("arm", "stopped_at", "spent").sort("arm")
            same = mine.drop("spent").equals(want.drop("spent"))
            rows.append(
                f"| {split} | {d['run_key'].n_unique()} | {'yes' if same else 'NO'} | "
                f"{'yes' if mine.equals(want) else 'NO'} | {got.wall_s:.1f} s |"
            )
    finally:
        ray.shutdown()
    print("\n### through Ray Tune (AdaptiveScheduler, trials paused at each rung)\n")
    print("| split | trials | same stops as replay | same compute | Tune wall time |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--tune", action="store_true", help="also replay through Ray Tune's scheduler"
    )
    args = parser.parse_args()
    df = load_runs(RUNS / "nstar" / "cpu" / "main", statuses=["FINISHED"])
    replay_table(df)
    if args.tune:
        tune_table(df)


if __name__ == "__main__":
    main()
