"""Adaptive sweeps replayed on the committed nstar/cpu/main curves, and calibrated on planted
worlds (issue 32, part 2: replay).

    .venv/bin/python scripts/adaptive_replay.py [--worlds 300] [--tune]

Per split (`isolab.sweep.adaptive.replay`): at each checkpoint C the full grid's best arm and
adaptive's best surviving arm, whether the grid resolves n* there (every arm within
2 standard errors of its best has n within one grid step), whether adaptive's n* is within
one grid step of the grid's; then the compute spent as a fraction of the grid's and whether
the grid's best arm at the last checkpoint was stopped. The rule is the default
`StoppingRule` (z = 2.5, grace = 2 rungs); z = 1.5 (`--z 1.5`: the cheaper rule that meets
the 40% target on Hard) and ASHA's rank cut (η = 3) are shown for comparison.

Then `calibrate` on planted worlds drawn like each split (its arms' seed-mean curves, the
measured seed spread per checkpoint and its lag-1 correlation): *planted*, a random arm raised
to beat the rest at the last checkpoint by one run's SD there; *own best*, the split's own best
at the last checkpoint as the truth, with its real lead (within noise, so a drop there costs
little reward). Rates with their two-sided 95% Clopper–Pearson upper bounds.

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

from isolab.sweep.adaptive import StoppingRule, calibrate, measured_noise, replay
from isolab.tracking.runs import load_runs

RUNS = Path(__file__).resolve().parents[1] / "runs"
RULES = (StoppingRule(), StoppingRule(z=1.5), StoppingRule(eta=3))


def replay_table(df: pl.DataFrame) -> None:
    for split in sorted(df["split"].unique()):
        d = df.filter(pl.col("split") == split)
        for rule in RULES:
            r = replay(d, rule)
            print(f"\n### nstar/cpu/main, {split}: {rule.text}\n")
            print("| C | grid best | grid n* | resolved | adaptive best | adaptive n* | "
                  "within a step | arms alive |")  # fmt: skip
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


def calibration_table(df: pl.DataFrame, worlds: int) -> None:
    print(f"\n### planted worlds ({worlds} per split and kind)\n")
    print("| split | rule | worlds | best dropped | rate (95% upper) | compute |")
    print("|---|---|---|---|---|---|")
    for split in sorted(df["split"].unique()):
        d = df.filter(pl.col("split") == split)
        margin = list(measured_noise(d).sd.values())[-1]
        for rule in RULES:
            for kind, planted in (
                (f"planted (lead {margin:.3f})", True),
                ("own best (lead within noise)", False),
            ):
                c = calibrate(d, rule, worlds=worlds, seed=1, random_best=planted,
                              margin=margin if planted else 0.0)  # fmt: skip
                print(
                    f"| {split} | {rule.text} | {kind} | {c.dropped}/{c.worlds} | "
                    f"{c.rate:.1%} (≤ {c.upper:.1%}) | {c.fraction:.1%} |"
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
    parser.add_argument("--worlds", type=int, default=300, help="planted worlds per row")
    parser.add_argument(
        "--tune", action="store_true", help="also replay through Ray Tune's scheduler"
    )
    args = parser.parse_args()
    if args.worlds < 1:
        parser.error(f"--worlds {args.worlds}: need at least 1 world (e.g. 300).")
    df = load_runs(RUNS / "nstar" / "cpu" / "main", statuses=["FINISHED"])
    replay_table(df)
    calibration_table(df, args.worlds)
    if args.tune:
        tune_table(df)


if __name__ == "__main__":
    main()
