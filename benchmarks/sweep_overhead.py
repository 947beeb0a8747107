"""In-process sweep runner vs a loop of `isolab train` subprocesses, on the smoke study.

Both sides run the same grid points one at a time into fresh SQLite stores. The subprocess
loop pays an interpreter start and the torch / transformers / TRL imports for every run; the
runner pays them once per worker. Target: the runner is ≥ 1.5× faster.

    python benchmarks/sweep_overhead.py [--spec studies/smoke.yaml] [--points 12]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def isolab_command() -> list[str]:
    script = Path(sys.executable).with_name("isolab")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from isolab.cli import main; main()"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default=str(REPO / "studies" / "smoke.yaml"))
    parser.add_argument("--points", type=int, default=None, help="first N points only")
    args = parser.parse_args()

    import logging

    from isolab import models
    from isolab.difficulty import load_or_label
    from isolab.paths import cache_root
    from isolab.sweep import SweepSpec, plan_sweep, run_sweep

    logging.getLogger("mlflow").setLevel(logging.WARNING)
    os.environ["ISOLAB_CACHE"] = str(cache_root().resolve())
    spec = SweepSpec.from_yaml(args.spec)
    plan = plan_sweep(spec)
    if args.points is not None:
        plan = type(plan)(plan.spec, plan.points[: args.points], plan.dropped, plan.eval_fractions)
    for model in {p.config.model for p in plan.points}:
        models.build(model)
        load_or_label(model, "arithmetic", pool_size=plan.points[0].config.pool_size)
    n = len(plan.points)

    with tempfile.TemporaryDirectory(prefix="isolab-bench-") as tmp:
        tmp_path = Path(tmp)
        t0 = time.perf_counter()
        report = run_sweep(plan, f"sqlite:///{tmp_path / 'runner.db'}", workers=1)
        runner_s = time.perf_counter() - t0
        ok = sum(o.status == "FINISHED" for o in report.outcomes)
        print(f"in-process runner (1 worker): {n} runs, {ok} FINISHED, {runner_s:.1f} s")

        uri = f"sqlite:///{tmp_path / 'loop.db'}"
        t0 = time.perf_counter()
        for i, point in enumerate(plan.points):
            config = tmp_path / f"point{i}.yaml"
            point.config.to_yaml(config)
            subprocess.run(
                [*isolab_command(), "train", str(config), "--tracking-uri", uri],
                check=True,
                cwd=REPO,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        loop_s = time.perf_counter() - t0
        print(f"loop of `isolab train` subprocesses: {n} runs, {loop_s:.1f} s")

    ratio = loop_s / runner_s
    verdict = "meets" if ratio >= 1.5 else "MISSES"
    print(f"runner is {ratio:.2f}× faster ({verdict} the ≥ 1.5× target)")
    print(f"per run: runner {runner_s / n:.1f} s, subprocess {loop_s / n:.1f} s")


if __name__ == "__main__":
    main()
