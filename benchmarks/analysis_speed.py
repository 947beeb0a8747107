"""Speed of the frontier analysis on a synthetic store of 2,000 runs × 50 evaluation points.

Target (isolab issue 5): the full analysis, read from the parquet snapshot, in ≤ 5 s. Beside it,
the same runs table read through MLflow (`search_runs` + one metric history per run and key,
`isolab.tracking.runs.load_runs(experiment)`) is timed and the ratio printed.

    python benchmarks/analysis_speed.py                      # full: writes 2,000 runs to MLflow
    python benchmarks/analysis_speed.py --mlflow-runs 200    # quicker MLflow side, extrapolated
    python benchmarks/analysis_speed.py --store /tmp/bench   # keep (and reuse) the MLflow store

Writing 2,000 runs into SQLite through MLflow takes minutes (one-time: it is reused when
--store points at a store that already holds them); the analysis itself takes seconds.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from isolab import frontier as fr
from isolab.synthetic import make_isocompute_runs, make_rho_runs
from isolab.tracking.importing import import_runs
from isolab.tracking.runs import load_runs
from isolab.tracking.snapshot import export_runs

TARGET_S = 5.0


def full_analysis(iso: pl.DataFrame, rho: pl.DataFrame, pilot: pl.DataFrame) -> dict[str, float]:
    """Every analysis of isolab.frontier once, as `isolab frontier` runs them; seconds per step."""
    t: dict[str, float] = {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        out = fn()
        t[name] = time.perf_counter() - t0
        return out

    timed("frontier + records", lambda: (fr.frontier(iso), fr.record_points(iso, bin_width=0.01)))
    effect = timed("metric_effect (3 × optimal_n)", lambda: fr.metric_effect(iso))
    res = effect.results["eval/avg@4"]
    timed("tradeoff_fixed_batch", lambda: fr.tradeoff_fixed_batch(iso, 1024))
    timed("recommend", lambda: fr.recommend(iso, 1e7, n_star=res))
    timed("rho_frontier", lambda: fr.rho_frontier(rho))
    timed("race", lambda: fr.race(pilot, rho))
    return t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=2000, help="runs in the synthetic store")
    ap.add_argument("--eval-points", type=int, default=50, help="evaluation points per run")
    ap.add_argument(
        "--mlflow-runs", type=int, default=None, help="runs written to MLflow (default: all)"
    )
    ap.add_argument(
        "--store", type=Path, default=None, help="folder of the MLflow store to keep/reuse"
    )
    ap.add_argument("--skip-mlflow", action="store_true", help="time the snapshot path only")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    work = Path(tempfile.mkdtemp(prefix="isolab-bench-"))
    try:
        # ---- the synthetic store ----------------------------------------------------------
        configs = 30  # (n, B_p) pairs of the default grid with B_p·n ≤ 8192
        iso = make_isocompute_runs(
            seeds=-(-args.runs // configs), max_runs=args.runs, eval_points=args.eval_points
        )
        rho = make_rho_runs(eval_points=args.eval_points)
        pilot = make_rho_runs(rho_grid=(0.2, 0.5, 0.8), seeds=1, budget_flops=2e15, seed=1)
        n_runs = iso["run_key"].n_unique()
        print(
            f"synthetic store: {n_runs} runs × ≤{args.eval_points} points = {iso.height} rows "
            f"(+ ρ sweep {rho['run_key'].n_unique()} runs, pilot {pilot['run_key'].n_unique()})"
        )
        snaps = {
            name: export_runs(df, work / name)
            for name, df in (("iso", iso), ("rho", rho), ("pilot", pilot))
        }

        # ---- snapshot path: read + full analysis -------------------------------------------
        fr.optimal_n(iso.head(5000), n_boot=10)  # warm imports and caches, outside the clock
        t0 = time.perf_counter()
        iso_l, rho_l, pilot_l = (load_runs(snaps[k]) for k in ("iso", "rho", "pilot"))
        t_read = time.perf_counter() - t0
        steps = full_analysis(iso_l, rho_l, pilot_l)
        t_total = t_read + sum(steps.values())
        print(f"\nsnapshot path ({n_runs} runs):")
        print(f"  {'read parquet snapshots':<32} {t_read:7.3f} s")
        for name, dt in steps.items():
            print(f"  {name:<32} {dt:7.3f} s")
        verdict = "PASS" if t_total <= TARGET_S else "FAIL"
        print(f"  {'total':<32} {t_total:7.3f} s   (target ≤ {TARGET_S:.0f} s: {verdict})")

        # ---- MLflow path: the same table through search_runs + metric histories -------------
        if args.skip_mlflow:
            return 0 if verdict == "PASS" else 1
        k = min(args.mlflow_runs or n_runs, n_runs)
        store = args.store or work / "mlflow"
        store.mkdir(parents=True, exist_ok=True)
        uri = f"sqlite:///{store.resolve()}/mlflow.db"
        keys = iso["run_key"].unique(maintain_order=True).head(k)
        sub = iso.filter(pl.col("run_key").is_in(keys.implode()))
        sub_snap = export_runs(sub, work / "iso_sub", experiment=f"bench-{k}x{args.eval_points}")
        t0 = time.perf_counter()
        name, written, reused = import_runs(sub_snap, tracking_uri=uri)
        t_write = time.perf_counter() - t0
        print(f"\nMLflow store {uri}: {written} runs written in {t_write:.1f} s, {reused} reused")
        t0 = time.perf_counter()
        table = load_runs(name, tracking_uri=uri)
        t_mlflow = time.perf_counter() - t0
        t0 = time.perf_counter()
        load_runs(snaps["iso"]).filter(pl.col("run_key").is_in(keys.implode()))
        t_parquet_k = time.perf_counter() - t0
        assert table.height == sub.height, (table.height, sub.height)
        print(f"  read {k} runs via MLflow (search_runs + histories): {t_mlflow:8.2f} s")
        print(f"  read the same table from parquet:                  {t_parquet_k:8.3f} s")
        print(
            f"  ratio MLflow / parquet (table read):               {t_mlflow / t_parquet_k:8.0f}×"
        )
        est = t_mlflow * n_runs / k
        what = "measured" if k == n_runs else f"extrapolated from {k} runs"
        print(
            f"  MLflow read of all {n_runs} runs ({what}): {est:.1f} s — "
            f"{est / t_total:.1f}× the whole snapshot analysis ({t_total:.2f} s)"
        )
        return 0 if verdict == "PASS" else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
