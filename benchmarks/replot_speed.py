"""Re-plotting every notebook from the committed cpu-scale snapshots, as a reader with only the
repo does it (target: under a minute per notebook, kernel start-up included).

Copies runs/<study>/cpu/<sweep>/ snapshots into a temporary results folder, then executes each
notebook at `scale = "cpu"` with papermill against a throwaway MLflow store, and prints the
wall time per notebook next to the in-process time of the same analysis (`study.run`), so the
share of kernel start-up and imports is visible.

    .venv/bin/python benchmarks/replot_speed.py
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 60.0


def main() -> int:
    import matplotlib

    matplotlib.use("Agg")
    import papermill

    from isolab import study

    with tempfile.TemporaryDirectory(prefix="isolab-replot-") as tmp:
        root = Path(tmp) / "runs"
        for s in study.STUDIES.values():
            for sweep in s.sweeps:
                src = REPO / "runs" / s.data_study / "cpu" / sweep
                if not (src / "runs.parquet").exists():
                    print(f"missing snapshot {src}: run `isolab study run {s.name}` first")
                    return 1
                dst = root / s.data_study / "cpu" / sweep
                if not dst.exists():
                    shutil.copytree(src, dst)
        os.environ["ISOLAB_RESULTS_DIR"] = str(root)
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{Path(tmp) / 'mlflow.db'}"
        print(
            f"{'notebook':<26} {'kernel (s)':>10} {'in-process (s)':>15}  target {TARGET_S:.0f} s"
        )
        worst = 0.0
        for s in study.STUDIES.values():
            t0 = time.perf_counter()
            papermill.execute_notebook(
                str(REPO / "notebooks" / f"{s.notebook}.ipynb"),
                str(Path(tmp) / f"{s.notebook}.ipynb"),
                parameters={"scale": "cpu"},
                cwd=str(REPO / "notebooks"),
                progress_bar=False,
            )
            kernel = time.perf_counter() - t0
            t0 = time.perf_counter()
            study.run(s.name, "cpu", progress=False, log=False)
            inproc = time.perf_counter() - t0
            worst = max(worst, kernel)
            print(f"{s.notebook:<26} {kernel:>10.1f} {inproc:>15.1f}")
        print(f"slowest notebook {worst:.1f} s = {worst / TARGET_S:.2f} of the target")
    return 0 if worst <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
