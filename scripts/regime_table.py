"""Where the CPU testbed sits against the IsoCompute Playbook's regime, measured from the nstar runs.

    .venv/bin/python scripts/regime_table.py [--scale cpu] [--sweep main]

Prints, per split: the training pool, the epochs a run makes at the largest compute (per n and
B_p), the share of zero-variance groups over each run's first 5 steps (per n), the best n at
each checkpoint (seed-averaged avg@4) and whether it is interior to the grid, and the B_p range.
These are the rows of the regime table of issue 27 (the paper: 6k Easy / 5k Hard problems,
n* interior at 512 / 128 of 8–2048, B_p 32–1024, Easy n = 8 ≈ 2% zero-variance groups).
"""

from __future__ import annotations

import argparse

import polars as pl

from isolab import study
from isolab.sweep import split_sizes
from isolab.tracking.runs import load_runs
from isolab.vocab import EVAL_AVG, ROLLOUTS

ZERO_STD = "frac_reward_zero_std"


def regime(scale: str, sweep: str) -> dict[str, pl.DataFrame]:
    s = study.get("nstar")
    snap = study.find_snapshot(s, scale, sweep)
    runs = load_runs(snap)
    history = pl.read_parquet(snap / "history.parquet")
    spec = study.load_spec(s, scale, sweep)
    sizes = split_sizes(spec)
    configs = runs.group_by("run_key").agg(pl.col("split", "n", "B_p", "seed", "pool_size").first())
    train = pl.DataFrame(
        [
            {"split": split, "pool_size": pool, "train_problems": count}
            for (_, _, split, pool), count in sizes.items()
        ]
    )
    c_max = runs[ROLLOUTS].max()
    epochs = (
        configs.join(train, on=["split", "pool_size"], how="left")
        .group_by("split", "B_p", "n")
        .agg(pl.col("train_problems").first())
        .with_columns(epochs=pl.lit(c_max) / pl.col("n") / pl.col("train_problems"))
        .sort("split", "B_p", "n")
    )
    zero = (
        history.filter((pl.col("key") == ZERO_STD) & (pl.col("step") <= 5))
        .join(configs, on="run_key")
        .group_by("split", "n")
        .agg(pl.col("value").mean().alias("zero_variance_share_first_5_steps"))
        .sort("split", "n")
    )
    cells = (
        runs.filter(pl.col(ROLLOUTS) > 0)
        .group_by("split", "n", "B_p", ROLLOUTS)
        .agg(pl.col(EVAL_AVG).mean())
        .sort(EVAL_AVG, descending=True)
    )
    n_min, n_max = runs["n"].min(), runs["n"].max()
    best = (
        cells.group_by("split", ROLLOUTS)
        .agg(pl.col("n").first().alias("best_n"), pl.col("B_p").first().alias("its_B_p"))
        .with_columns(interior=(pl.col("best_n") > n_min) & (pl.col("best_n") < n_max))
        .sort("split", ROLLOUTS)
    )
    return {
        "training pool": train,
        "epochs at C_max": epochs,
        "zero variance": zero,
        "best n": best,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--sweep", default="main")
    args = parser.parse_args()
    with pl.Config(tbl_rows=200, fmt_float="mixed"):
        for title, table in regime(args.scale, args.sweep).items():
            print(f"\n{title}\n{table}")


if __name__ == "__main__":
    main()
