"""`isolab demo`: the whole path in one command: build the tiny model, label difficulty, train
an easy and a hard run, print their results (`make demo`)."""

from __future__ import annotations

from typing import Annotated

import typer

from isolab.cli.common import TrackingUri, console, fail
from isolab.cli.models import difficulty, models_build
from isolab.cli.train import print_results, train_with_progress


def demo(
    model: Annotated[str, typer.Option(help="Tiny preset.")] = "tiny-m",
    steps: Annotated[int, typer.Option(help="Optimizer steps M per run.")] = 150,
    lr_base: Annotated[float, typer.Option(help="Learning rate at B = 64.")] = 1e-4,
    eval_problems: Annotated[
        int, typer.Option(help="Validation problems per evaluation (16 samples each).")
    ] = 128,
    tracking_uri: TrackingUri = None,
) -> None:
    """Build the tiny model, label difficulty, train an easy and a hard run, print the table."""
    from isolab import models
    from isolab.config import RunConfig

    if eval_problems < 1:
        fail(f"--eval-problems {eval_problems}: evaluate on at least 1 problem")
    if not models.is_tiny(model):
        fail(
            f"--model {model!r}: the demo runs on a tiny preset ({', '.join(models.TINY_PRESETS)})"
        )
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
    rows = []
    for split in ("easy", "hard"):
        # every validation problem up to 128, 16 samples each: ≈ 0.012 of evaluation noise
        cfg = RunConfig(
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
        rows.append((cfg, train_with_progress(cfg, tracking_uri)))
    console.rule("[bold]4 · results")
    print_results(rows)
    console.print(
        "FLOP shares are of flops/total; ρ = flops/learning / flops/total (evaluation kept apart)."
    )
    console.print(
        "Browse every metric: [bold]make ui[/] (or `isolab ui`), then open the link it prints after 'ready:' → experiment 'demo'."
    )


def register(app: typer.Typer) -> None:
    app.command()(demo)
