"""The measurements of `isolab gpu-check`: parts 1–2 (GRPO steps of one model and engine:
throughput, step time, MFU) and part 3 (the nstar GPU spec's smoke through the sweep runner).

Each runs one case and returns its record for gpu-check.json; `gpu_check.check` runs them in
turn and keeps one failing case from losing the others. Apart from the report so that a
case's run and what it records read in one place.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from isolab.cli.gpu_check_setup import Budget
from isolab.vocab import (
    FLOPS_TOTAL,
    MFU_LEARNING,
    MFU_RUN,
    MFU_SEARCH,
    RUN_ID,
    THROUGHPUT_TOKENS_PER_S,
    TIME_SEARCH_S,
)

#: Sweep spec whose smoke part 3 runs, and how many of its n it keeps.
STUDY_SPEC = "nstar/gpu/main.yaml"
STUDY_POINTS = 4
#: Experiments the check logs to (its store is the output folder's own).
EXPERIMENT = "gpu-check"
STUDY_EXPERIMENT = "gpu-check/nstar-smoke"


def grpo_steps(model: str, label: str, engine: str, budget: Budget, data_dir: str | None,
               uri: str, processes: int = 1) -> dict[str, Any]:  # fmt: skip
    """Parts 1–2 for one model and engine: a short GRPO run on GSM8K on `processes` devices
    (data-parallel, `RunConfig.processes`), its measurements."""
    from isolab.config import RunConfig
    from isolab.rl.train import train

    cfg = RunConfig(
        experiment=EXPERIMENT,
        model=model,
        task="gsm8k",
        split="all",
        n=budget.n,
        B_p=budget.B_p,
        M=budget.steps,
        max_completion_tokens=budget.max_completion_tokens,
        generation=engine,
        eval_problems=budget.eval_problems,
        eval_k_samples=1,
        eval_ks=(1,),
        pool_size=256,
        data_dir=data_dir,
        lr_base=1e-6,
        processes=processes,
    )
    stamps: list[float] = []
    t0 = time.perf_counter()
    result = train(
        cfg, tracking_uri=uri, on_step=lambda step, metrics: stamps.append(time.perf_counter())
    )
    wall = time.perf_counter() - t0
    m = result.final_metrics
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]  # the first step warms up
    return {
        "model": label,
        "engine": engine,
        "processes": processes,
        RUN_ID: result.run_id,
        "steps": budget.steps,
        "completion_tokens_per_s": m.get(THROUGHPUT_TOKENS_PER_S),
        "step_s": statistics.median(gaps) if gaps else None,
        "search_s": m.get(TIME_SEARCH_S),
        "flops_total": m.get(FLOPS_TOTAL),
        "mfu_run": m.get(MFU_RUN),
        "mfu_search": m.get(MFU_SEARCH),
        "mfu_learning": m.get(MFU_LEARNING),
        "wall_s": wall,
    }


def study_smoke(
    model: str, device: str, budget: Budget, data_dir: str | None, uri: str
) -> dict[str, Any]:
    """Part 3: the nstar GPU spec's first `STUDY_POINTS` n at a smoke budget (split `all`, one
    seed, one evaluation at the budget) through the sweep runner, one point at a time."""
    from isolab.paths import studies_dir
    from isolab.sweep import SweepSpec, plan_sweep
    from isolab.sweep.runner import run_sweep
    from isolab.userinput import read_yaml

    path = studies_dir() / STUDY_SPEC
    data = read_yaml(path)
    ns = sorted(data["axes"]["n"])[:STUDY_POINTS]
    data["base"] = {
        **data["base"],
        "model": model,
        "split": "all",
        "data_dir": data_dir,
        "B_p": budget.study_B_p,
        "max_completion_tokens": budget.study_max_completion_tokens,
        "eval_problems": budget.eval_problems,
        "eval_k_samples": 4,
    }
    data.update(
        name=STUDY_EXPERIMENT,
        axes={"n": ns},
        budget_rollouts=budget.study_B_p * max(ns) * budget.study_steps,
        seeds=[0],
        eval_points=1,
        resources={"cpus_per_run": 1, "gpus_per_run": 1 if device == "cuda" else 0},
    )
    smoke = SweepSpec.from_dict(data, root=path.parent)
    plan = plan_sweep(smoke)
    report = run_sweep(plan, uri, workers=1)
    statuses = [str(o.status).upper() for o in report.outcomes]
    return {
        "spec": STUDY_SPEC,
        "experiment": STUDY_EXPERIMENT,
        "n": list(ns),
        "steps": [p.config.M for p in plan.points],
        "finished": statuses.count("FINISHED"),
        "failed": len(statuses) - statuses.count("FINISHED"),
        "errors": [o.error for o in report.outcomes if o.error],
        "wall_s": report.wall_time_s,
    }
