"""`isolab demo`: the whole path in one command: build the tiny model, label difficulty, train
an easy and a hard run, print their results (`make demo`)."""

from __future__ import annotations

from typing import Annotated

import typer

from isolab.cli.common import TrackingUri, console, fail
from isolab.cli.models import difficulty, models_build
from isolab.cli.sweep_progress import duration
from isolab.cli.train import print_results, train_with_progress
from isolab.config import RunConfig

#: The demo's defaults (`demo`'s options), and what it took with them: 299 s of CPU (user +
#: sys; `/usr/bin/time`), measured on a 2-core x86-64 machine under a load of about 14 (10 min
#: 38 s of wall time there). CPU time is the figure a load changes least; on an idle machine
#: the wall time is about that or less (torch may use both cores).
DEMO_MODEL, DEMO_STEPS, DEMO_LR, DEMO_EVAL_PROBLEMS = "tiny-m", 150, 1e-4, 128
DEMO_CPU_S = 299.0


def demo(
    model: Annotated[str, typer.Option(help="Tiny preset.")] = DEMO_MODEL,
    steps: Annotated[int, typer.Option(help="Optimizer steps M per run.")] = DEMO_STEPS,
    lr_base: Annotated[float, typer.Option(help="Learning rate at B = 64.")] = DEMO_LR,
    eval_problems: Annotated[
        int, typer.Option(help="Validation problems per evaluation (16 samples each).")
    ] = DEMO_EVAL_PROBLEMS,
    tracking_uri: TrackingUri = None,
) -> None:
    """Build the tiny model, label difficulty, train an easy and a hard run, print the table."""
    from isolab import models

    if eval_problems < 1:
        fail(f"--eval-problems {eval_problems}: evaluate on at least 1 problem")
    if not models.is_tiny(model):
        fail(
            f"--model {model!r}: the demo runs on a tiny preset ({', '.join(models.TINY_PRESETS)})"
        )
    configs = demo_configs(model, steps, lr_base, eval_problems)
    console.print(up_front(configs))
    # the steps call the commands' own functions, so that the demo prints what
    # `isolab models build`, `isolab difficulty` and `isolab train` print
    console.rule("[bold]1 · base model")
    models_build(model, force=False)
    console.rule("[bold]2 · difficulty by avg@16")
    difficulty(
        model=model,
        task="arithmetic",
        pool_size=4000,
        k=16,
        easy="0.3,0.6",
        hard="0,0.0625",
        val_fraction=0.25,
        seed=0,
        data_dir=None,
        force=False,
    )
    console.rule("[bold]3 · GRPO on the easy and the hard split")
    rows = [(cfg, train_with_progress(cfg, tracking_uri)) for cfg in configs]
    console.rule("[bold]4 · results")
    print_results(rows)
    console.print(
        "FLOP shares are of flops/total; ρ = flops/learning / flops/total (evaluation kept apart)."
    )
    console.print(
        "Browse every metric: [bold]make ui[/] (or `isolab ui`), then open the link it prints after 'ready:' → experiment 'demo'."
    )


def demo_configs(model: str, steps: int, lr_base: float, eval_problems: int) -> list[RunConfig]:
    """The demo's two runs, Easy then Hard: n = 8, B_p = 8, evaluated every 25 steps on up to
    `eval_problems` validation problems × 16 samples (all 106 of tiny-m's Easy split at the
    default 128: ≈ 0.012 of evaluation noise)."""
    return [
        RunConfig(
            experiment="demo",
            model=model,
            split=split,
            n=8,
            B_p=8,
            M=steps,
            lr_base=lr_base,
            eval_every=25,
            eval_problems=eval_problems,
            eval_k_samples=16,
        )
        for split in ("easy", "hard")
    ]


def evaluations(cfg: RunConfig) -> int:
    """How many times a run with `eval_every` is evaluated: at step 0, every `eval_every`
    steps and at its last step (`isolab.rl.evaluate.Evaluator.due`)."""
    every = cfg.eval_every or cfg.M or 1
    return len({0, cfg.M, *range(every, cfg.M + 1, every)})


def estimate_cpu_s(configs: list[RunConfig]) -> float:
    """CPU seconds the demo's `configs` should take: the demo measured with its defaults
    (`DEMO_CPU_S`), scaled by what `isolab sweep plan`'s cost model (`estimate_wall_s`, the
    tiny presets' timing defaults) says these runs cost against the default ones. The model's
    coefficients alone set the level 2.2× low (134 s planned for the 299 s measured)."""
    from isolab.sweep.plan import estimate_wall_s
    from isolab.sweep.spec import Timing

    def planned(runs: list[RunConfig]) -> float:
        return sum(estimate_wall_s(cfg, evaluations(cfg), Timing()) for cfg in runs)

    default = demo_configs(DEMO_MODEL, DEMO_STEPS, DEMO_LR, DEMO_EVAL_PROBLEMS)
    return DEMO_CPU_S * planned(configs) / planned(default)


def up_front(configs: list[RunConfig]) -> str:
    """What the demo will run and how long it should take, said before it starts: the runs
    (steps, rollouts, evaluation samples) and the CPU time they should take
    (`estimate_cpu_s`), which is about the wall time on an idle machine: on a busy one wall
    time grows with the load."""
    first = configs[0]
    runs = " and ".join(cfg.split.capitalize() for cfg in configs)
    evals = evaluations(first)
    total_s = estimate_cpu_s(configs)
    return (
        f"[bold]isolab demo[/]: installs {first.model} and its difficulty labels (shipped), then "
        f"trains {len(configs)} GRPO runs ({runs}), each {first.M:,} steps of "
        f"B = {first.B_p}·{first.n} = {first.B} completions ({first.rollouts:,} rollouts) with "
        f"{evals} evaluations of up to {first.eval_problems} problems × {first.eval_k_samples} "
        f"samples.\nEstimated time: about {duration(total_s)} of CPU, about the wall time on an "
        "idle 2-core machine (measured with the defaults, scaled to these runs); wall time "
        "grows with the machine's load. `--steps 2 --eval-problems 16` runs the same path in "
        "seconds."
    )


def register(app: typer.Typer) -> None:
    app.command()(demo)
