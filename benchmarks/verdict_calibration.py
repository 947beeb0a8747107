"""Calibration of every verdict: false-call rate in worlds with no effect, power in planted ones.

    .venv/bin/python benchmarks/verdict_calibration.py [--null 400] [--planted 200] [--scale cpu]

Each claim's test runs, unchanged, on simulated sweeps that keep the study's design (its
committed runs tables under runs/<study>/<scale>/: configurations, seeds, checkpoints) and the
noise that design measured (per split: evaluation sampling and seed-to-seed training noise,
`isolab.verdicts.noise`). Null worlds give every configuration the same mean learning curve
(a call there is a false call); planted worlds add an effect of the paper's sign and the size
printed (an `agrees` there is a detection). Target: false calls ≤ 5% for every claim; the
printed bound is the one-sided 95% Clopper–Pearson upper bound of the rate.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import polars as pl
from scipy import stats

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from isolab import study  # noqa: E402
from isolab.verdicts.calibration import PLANTS, calibrate  # noqa: E402
from isolab.verdicts.claims import CLAIMS  # noqa: E402


def design(study_name: str, scale: str) -> dict[str, pl.DataFrame]:
    """The study's committed runs tables (its design), by sweep."""
    s = study.get(study_name)
    return {sweep: pl.read_parquet(study.snapshot_dir(s, scale, sweep) / "runs.parquet")
            for sweep in s.sweeps}  # fmt: skip


def upper_bound(calls: int, sims: int) -> float:
    """One-sided 95% Clopper–Pearson upper bound of a rate seen `calls` times in `sims`."""
    return 1.0 if calls >= sims else float(stats.beta.ppf(0.95, calls + 1, sims - calls))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--null", type=int, default=400, help="null worlds per claim")
    ap.add_argument("--planted", type=int, default=200, help="planted worlds per claim")
    ap.add_argument("--scale", default="cpu", help="whose committed design to simulate")
    ap.add_argument("--claims", nargs="*", default=list(CLAIMS), help="claim ids (default: all)")
    args = ap.parse_args()
    print(
        f"{'claim':<26} {'false calls (null)':>22} {'95% bound':>9}  {'power':>6}  planted effect"
    )
    worst = 0.0
    for cid in args.claims:
        claim = CLAIMS[cid]
        data = design(claim.study, args.scale)
        t0 = time.perf_counter()
        null = calibrate(cid, data, args.null, planted=False, seed=1)
        hit = calibrate(cid, data, args.planted, planted=True, seed=100_000)
        false_calls = null["agrees"] + null["disagrees"]
        rate, bound = false_calls / args.null, upper_bound(false_calls, args.null)
        worst = max(worst, rate)
        power = hit["agrees"] / args.planted
        print(
            f"{cid:<26} {false_calls:>4}/{args.null:<4} = {rate:6.1%} {bound:>9.1%}  {power:>6.0%}  "
            f"{PLANTS[cid].describe} ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    print(f"largest false-call rate: {worst:.1%} (target ≤ 5%)")
    return 0 if worst <= 0.05 else 1


if __name__ == "__main__":
    raise SystemExit(main())
