"""Speed of `isolab runs import` against a straightforward MLflow import of the same snapshot.

Both import the committed snapshot (`runs/nstar/cpu/main`: 72 runs, 1.3 million metric points)
into a fresh temporary SQLite store, one after the other in this process, the order alternating
from round to round so that the machine's load hits both alike:

- MLflow: what an import through MLflow's client does (`mlflow_import` below) — per run
  `create_run`, `log_batch` of its params and tags (`MAX_PARAMS_TAGS_PER_BATCH` a call) and of
  its metric points (`MAX_METRICS_PER_BATCH` a call), the same description, counts and
  FLOP-split figure as artifacts, `set_terminated`; the sweep's parent made and finished alike.
  The snapshot is read and checked by isolab's own `plan_import` in both; isolab alone
  also leases the run keys and looks for runs already there (a few queries).
- isolab: `isolab.tracking.importing.import_runs` (points straight into MLflow's tables,
  `isolab.tracking.bulk`).

Prints wall and CPU time (every thread of the process, and children) of each, and the ratios;
checks that both stores hold as many metric points, latest values and params.

    .venv/bin/python benchmarks/import_speed.py                # 72 runs, 2 rounds: 5–10 min
    .venv/bin/python benchmarks/import_speed.py --runs 12      # the first 12 runs: ≈ 1 min
    .venv/bin/python benchmarks/import_speed.py --repeat 3

Target (isolab issue 30): a wall ratio of at least 5.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import resource
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET = 5.0


def mlflow_import(snapshot: Path, uri: str) -> None:
    """The snapshot into the store through MLflow's client, as an import without isolab's bulk
    writes would do it: the same runs, params, tags, points, description and artifacts."""
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.utils.validation import MAX_METRICS_PER_BATCH, MAX_PARAMS_TAGS_PER_BATCH

    from isolab.tracking import store
    from isolab.tracking.bulk import latest_points
    from isolab.tracking.describe import NOTE_TAG, run_note
    from isolab.tracking.import_plan import plan_import
    from isolab.tracking.importing import upload_files
    from isolab.tracking.parents import finish_parent, sweep_parent
    from isolab.tracking.run_figure import FIGURE_FILE, RunFigures
    from isolab.tracking.tags import IMPORTED_FROM_TAG, PARENT_TAG
    from isolab.tracking.views import run_url

    plans, name = plan_import(snapshot, None)
    client = store.client(uri)
    exp_id = store.experiment_id(name, uri)
    start = min(p["start_time"] for p in plans)
    parent = sweep_parent(name, name, uri, start, **{IMPORTED_FROM_TAG: snapshot.name})
    figures = RunFigures()
    for plan in plans:
        tags = {**plan["tags"], PARENT_TAG: parent}
        run = client.create_run(
            exp_id, run_name=plan["run_name"], start_time=plan["start_time"], tags=tags
        )
        rid = run.info.run_id
        points = plan["metrics"]
        latest = {k: v for k, _, v, _ in latest_points(points).iter_rows()}
        params = [Param(p.key, p.value) for p in plan["params"]]
        note = run_note(
            {p.key: p.value for p in params}, latest, run_url("", exp_id, rid, FIGURE_FILE)
        )
        labels = [RunTag("isolab.snapshot_rows", str(plan["rows"])), RunTag(NOTE_TAG, note)]
        for i in range(0, max(len(params), len(labels)), MAX_PARAMS_TAGS_PER_BATCH):
            chunk = slice(i, i + MAX_PARAMS_TAGS_PER_BATCH)
            client.log_batch(rid, params=params[chunk], tags=labels[chunk])
        metrics = [
            Metric(key, value, ts, step)
            for key, step, value, ts in points.select("key", "step", "value", "timestamp").rows()
        ]
        for i in range(0, len(metrics), MAX_METRICS_PER_BATCH):
            client.log_batch(rid, metrics=metrics[i : i + MAX_METRICS_PER_BATCH])
        upload_files(client, rid, plan, figures)  # the same files as isolab's import
        client.set_terminated(rid, status=plan["status"], end_time=plan["end_time"])
    finish_parent(name, parent, uri)


def isolab_import(snapshot: Path, uri: str) -> None:
    from isolab.tracking.importing import import_runs

    import_runs(snapshot, tracking_uri=uri)


IMPORTS: dict[str, Callable[[Path, str], None]] = {"MLflow": mlflow_import, "isolab": isolab_import}


def subset(snapshot: Path, runs: int, dest: Path) -> Path:
    """A snapshot of the first `runs` runs of `snapshot` (all of them when `runs` is 0), named
    as `snapshot` so that both imports tag the same source."""
    import polars as pl

    if not runs:
        return snapshot
    out = dest / snapshot.name
    out.mkdir(parents=True)
    df = pl.read_parquet(snapshot / "runs.parquet")
    keys = df["run_key"].unique(maintain_order=True).head(runs)
    df.filter(pl.col("run_key").is_in(keys.implode())).write_parquet(out / "runs.parquet")
    if (snapshot / "history.parquet").exists():
        history = pl.read_parquet(snapshot / "history.parquet")
        history = history.filter(pl.col("run_key").is_in(keys.implode()))
        history.write_parquet(out / "history.parquet")
    shutil.copy(snapshot / "snapshot.json", out / "snapshot.json")
    return out


def cpu_s() -> float:
    """CPU seconds of this process (all its threads) and of its children."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def timed(fn: Callable[[Path, str], None], snapshot: Path, folder: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one import into a fresh store in `folder`, made and migrated
    before the clock starts."""
    from isolab.tracking import store

    uri = f"sqlite:///{folder / 'mlflow.db'}"
    store.ready(uri)
    t0, c0 = time.perf_counter(), cpu_s()
    fn(snapshot, uri)
    return time.perf_counter() - t0, cpu_s() - c0


def stored_counts(folder: Path) -> dict[str, int]:
    """Rows of the tables both imports fill alike: live runs (isolab's lease on the run keys
    is a run, deleted when the import ends), metric points, latest values, params (isolab
    adds its host and pid tags)."""
    queries = {
        "runs": "SELECT count(*) FROM runs WHERE lifecycle_stage = 'active'",
        **{t: f"SELECT count(*) FROM {t}" for t in ("metrics", "latest_metrics", "params")},
    }
    with contextlib.closing(sqlite3.connect(folder / "mlflow.db")) as con:
        return {t: con.execute(query).fetchone()[0] for t, query in queries.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--snapshot", type=Path, default=REPO / "runs/nstar/cpu/main")
    ap.add_argument("--runs", type=int, default=0, help="import only the first N runs (0: all)")
    ap.add_argument("--repeat", type=int, default=2, help="rounds, the order alternating")
    args = ap.parse_args()
    if args.runs < 0 or args.repeat < 1:
        ap.error("--runs takes 0 (all) or more, --repeat 1 or more")

    import matplotlib

    matplotlib.use("Agg")
    from isolab.logs import quiet_libraries

    quiet_libraries()
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

    with tempfile.TemporaryDirectory(prefix="isolab-import-speed-") as tmp:
        root = Path(tmp)
        snapshot = subset(args.snapshot, args.runs, root / "snapshot")
        one = subset(args.snapshot, 1, root / "warm-up")
        for name, fn in IMPORTS.items():  # imports, fonts, caches: paid before the clock
            timed(fn, one, root / f"warm-up-{name}")
        print(f"snapshot {args.snapshot} ({args.runs or 'all'} runs), {args.repeat} round(s)")
        print(f"{'round':<6} {'import':<8} {'wall (s)':>9} {'CPU (s)':>9}")
        totals = {name: [0.0, 0.0] for name in IMPORTS}
        counts: dict[str, dict[str, int]] = {}
        for r in range(args.repeat):
            order = list(IMPORTS) if r % 2 == 0 else list(reversed(IMPORTS))
            rounds = {}
            for name in order:
                folder = root / f"{name}-{r}"
                wall, cpu = timed(IMPORTS[name], snapshot, folder)
                counts[name] = stored_counts(folder)
                shutil.rmtree(folder)
                rounds[name] = (wall, cpu)
                totals[name][0] += wall
                totals[name][1] += cpu
                print(f"{r + 1:<6} {name:<8} {wall:>9.1f} {cpu:>9.1f}")
            (bw, bc), (iw, ic) = rounds["MLflow"], rounds["isolab"]
            print(f"{r + 1:<6} {'ratio':<8} {bw / iw:>8.2f}× {bc / ic:>8.2f}×")
        (bw, bc), (iw, ic) = totals["MLflow"], totals["isolab"]
        wall_ratio = bw / iw
        print(f"{'all':<6} {'ratio':<8} {wall_ratio:>8.2f}× {bc / ic:>8.2f}×  target ≥ {TARGET}×")
        same = counts["MLflow"] == counts["isolab"]
        print(f"stored rows {counts['isolab']}: {'the same' if same else 'DIFFERENT'} in both")
    return 0 if same and wall_ratio >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
