"""Print the run count and CPU hours of every committed cpu snapshot, from its runs' own start
and end times: the figures the docs and closing notes quote for "sweep hours".

    .venv/bin/python scripts/sweep_hours.py [runs/<study>/cpu/<sweep> ...]

run-hours: the sum of every run's wall time (what one worker would take); span: first start to
last end (what the workers took, idle gaps between chunks included).
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

from isolab.tracking.runs import load_runs


def hours(snapshot: Path) -> dict[str, object]:
    runs = (
        load_runs(snapshot)
        .group_by("run_key")
        .agg(pl.col("start_time").min(), pl.col("end_time").max())
    )
    start, end = runs["start_time"].to_numpy(), runs["end_time"].to_numpy()  # ms since epoch
    return {
        "runs": runs.height,
        "run_hours": float((end - start).sum()) / 3.6e6,
        "span_hours": float(end.max() - start.min()) / 3.6e6,
    }


def main(argv: list[str]) -> None:
    snapshots = [Path(p) for p in argv] or sorted(
        p.parent for p in Path("runs").glob("*/cpu/*/runs.parquet")
    )
    print(f"{'snapshot':44} {'runs':>5} {'run-hours':>10} {'span h':>8}")
    for snap in snapshots:
        h = hours(snap)
        print(
            f"{snap.as_posix():44} {h['runs']:>5} {h['run_hours']:>10.2f} {h['span_hours']:>8.2f}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
