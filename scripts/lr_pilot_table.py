"""The learning-rate pilot's table: reward at each checkpoint and what a gradient clip would see.

    .venv/bin/python scripts/lr_pilot_table.py [SNAPSHOT] [--clip 1.0 --clip 2.0 ...] [--csv OUT]

SNAPSHOT is the pilot sweep's parquet snapshot (default `runs/pilot/lr-cpu/`, written by
`isolab runs export pilot/lr-cpu runs/pilot/lr-cpu`). The pilot trains unclipped
(`max_grad_norm: 1e6` in `studies/pilot/lr-cpu.yaml`), so each step's logged `grad_norm` is the
norm before any clip: the share of steps above a threshold is the rate at which a clip at that
threshold would bind. One row per run: split, n, B, lr_base, lr, avg@4 at each checkpoint,
whether it rose at every checkpoint, and the grad-norm quantiles and clip rates.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl

from isolab.tracking.runs import load_runs
from isolab.vocab import EVAL_AVG, ROLLOUTS


def pilot_table(snapshot: Path, clips: list[float]) -> pl.DataFrame:
    runs = load_runs(snapshot)
    history = pl.read_parquet(snapshot / "history.parquet").filter(pl.col("key") == "grad_norm")
    curves = (
        runs.sort(ROLLOUTS)
        .group_by("run_key", maintain_order=True)
        .agg(
            pl.col("split", "n", "B", "lr_base", "lr").first(),
            pl.col(EVAL_AVG).alias("avg4"),
        )
    )
    grads = history.group_by("run_key").agg(
        pl.col("value").quantile(0.5).alias("grad_p50"),
        pl.col("value").quantile(0.9).alias("grad_p90"),
        pl.col("value").quantile(0.99).alias("grad_p99"),
        pl.col("value").max().alias("grad_max"),
        *[(pl.col("value") > c).mean().alias(f"clip_rate@{c:g}") for c in clips],
    )
    table = curves.join(grads, on="run_key", how="left").with_columns(
        pl.col("avg4").list.first().alias("avg4_start"),
        pl.col("avg4").list.last().alias("avg4_end"),
        pl.col("avg4").list.diff(null_behavior="drop").list.min().gt(0).alias("rises_throughout"),
    )
    return table.drop("avg4").sort("split", "n", "lr_base")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("snapshot", nargs="?", type=Path, default=Path("runs/pilot/lr-cpu"))
    parser.add_argument("--clip", type=float, action="append", default=None)
    parser.add_argument("--csv", type=Path, default=None, help="also write the table here")
    args = parser.parse_args()
    table = pilot_table(args.snapshot, args.clip or [1.0, 2.0, 4.0])
    with pl.Config(tbl_rows=100, tbl_cols=30, tbl_width_chars=200, fmt_float="mixed"):
        print(table.drop("run_key"))
    if args.csv:
        table.drop("run_key").write_csv(args.csv)


if __name__ == "__main__":
    main()
