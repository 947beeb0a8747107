"""`isolab train|flops|demo|ui`: one GRPO run, its planned FLOPs, the demo, the MLflow UI."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from isolab.cli.common import (
    Overrides,
    TrackingUri,
    check_artifacts,
    console,
    err,
    exit_interrupted,
    fail,
    load_config,
    progress,
    safe,
)
from isolab.cli.models import difficulty, models_build
from isolab.vocab import EVAL_AVG, FLOPS_TOTAL


def train(
    config: Annotated[Path, typer.Argument(help="RunConfig YAML.")],
    tracking_uri: TrackingUri = None,
    set_: Overrides = None,
) -> None:
    """Run one GRPO training run from a YAML config and log it to MLflow."""
    cfg = load_config(config, set_ or [])
    check_artifacts(tracking_uri, cfg.experiment)
    try:
        result = _train_with_progress(cfg, tracking_uri)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        fail(str(exc))
    except KeyboardInterrupt:  # the run is ended KILLED by then
        err.print("[yellow]interrupted[/]: the run is marked KILLED.")
        exit_interrupted()
    _print_results([(cfg, result)])


def _train_with_progress(cfg, tracking_uri):
    from isolab.rl.train import train as run_train

    with progress() as bar:
        task = bar.add_task(safe(cfg.run_name), total=cfg.M * cfg.num_iterations, info="")

        def on_step(step: int, metrics: dict) -> None:
            info = f"ρ {metrics.get('compute/rho', 0):.2f}"
            if EVAL_AVG in metrics:
                info += f" avg@4 {metrics['eval/avg@4']:.3f}"
            bar.update(task, completed=step, info=info)

        return run_train(cfg, tracking_uri=tracking_uri, on_step=on_step)


def _print_results(rows) -> None:
    """Two compact tables: validation metrics base → final, then the FLOP split and ρ."""
    evals = Table("run", "avg@4", "best@4", "worst@4", title="validation: base → final")
    spend = Table(
        "run",
        "search",
        "learning",
        "reward",
        "FLOPs",
        "ρ",
        "wall s",
        title="compute (shares of flops/total)",
    )
    for cfg, r in rows:
        cells = [
            f"{r.base_eval.get(f'eval/{k}@4', float('nan')):.3f} → "
            f"{r.final_eval.get(f'eval/{k}@4', float('nan')):.3f}"
            for k in ("avg", "best", "worst")
        ]
        evals.add_row(safe(cfg.run_name), *cells)
        m = r.final_metrics
        total = m.get(FLOPS_TOTAL, 0.0) or 1.0
        shares = [
            f"{m.get(f'flops/{k}', 0.0) / total:.0%}" for k in ("search", "learning", "reward")
        ]
        spend.add_row(
            safe(cfg.run_name),
            *shares,
            f"{m.get('flops/total', 0):.2e}",
            f"{m.get('compute/rho', 0):.2f}",
            f"{r.wall_time_s:.0f}",
        )
    console.print(evals)
    console.print(spend)


def flops(
    config: Annotated[Path, typer.Argument(help="RunConfig YAML.")],
    prompt_len: Annotated[
        float | None, typer.Option(help="Expected prompt tokens (default: measured on the task).")
    ] = None,
    completion_len: Annotated[
        float | None,
        typer.Option(help="Expected completion tokens (default: task's typical length)."),
    ] = None,
    set_: Overrides = None,
) -> None:
    """Print the planned FLOP breakdown of a run (per step and total, ρ) before spending anything."""
    from isolab.rl.plan import plan_config

    cfg = load_config(config, set_ or [])
    try:
        plan = plan_config(cfg, prompt_len=prompt_len, completion_len=completion_len)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        fail(str(exc))
    title = f"{safe(cfg.run_name)} · M={cfg.M}"
    table = Table("component", "per step", "total", "share", title=title)
    total = plan[FLOPS_TOTAL] or 1.0
    for k in ("search", "learning", "reward", "total"):
        table.add_row(
            k,
            f"{plan[f'flops_step/{k}']:.3e}",
            f"{plan[f'flops/{k}']:.3e}",
            f"{plan[f'flops/{k}'] / total:.0%}",
        )
    console.print(table)
    console.print(
        f"ρ = {plan['compute/rho']:.3f} · rollouts = {cfg.rollouts:,} · "
        f"lengths: prompt {plan['prompt_len']:.1f}, completion {plan['completion_len']:.1f} tokens"
    )


#: The UI's start page for isolab's experiments: the model-training view (runs tables).
UI_HOME = "#/experiments?workflowType=machine_learning"


def ui(
    tracking_uri: TrackingUri = None,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 5000,
) -> None:
    """Start the MLflow UI on 127.0.0.1 for the isolab store."""
    from isolab.tracking import artifact_root, resolve_uri

    uri = resolve_uri(tracking_uri)
    cmd = [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        uri,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    root = artifact_root(uri)
    if root:
        cmd += ["--default-artifact-root", root]
    base = f"http://127.0.0.1:{port}"
    console.print(f"MLflow UI for the store {safe(uri)}; Ctrl-C stops it.")
    # MLflow 3.17 opens an experiment in its GenAI view (traces) unless the link asks for the
    # model-training one, whatever the experiment's kind tag says: these links land on the
    # runs tables
    console.print(f"  experiments   {base}/{UI_HOME}", soft_wrap=True, highlight=False)
    for exp_id, name in _recent_experiments(uri):
        link = f"{base}/#/experiments/{exp_id}/runs?workflowType=machine_learning"
        console.print(f"  {name}   {link}", soft_wrap=True, highlight=False, markup=False)
    raise typer.Exit(_serve(cmd))


def _recent_experiments(uri: str, count: int = 10) -> list[tuple[str, str]]:
    """(id, name) of the store's most recently updated experiments (none if it cannot be read)."""
    from isolab.tracking import client

    try:
        found = client(uri).search_experiments(
            max_results=count + 1, order_by=["last_update_time DESC"]
        )
    except Exception:  # noqa: BLE001 - the links are a convenience; the UI still starts
        return []
    return [(e.experiment_id, e.name) for e in found if e.name != "Default"][:count]


def _serve(cmd: list[str]) -> int:
    """Run the MLflow server in a process group of its own and stop that whole group (the
    server, uvicorn and its workers) when this process gets SIGINT, SIGTERM or SIGHUP."""
    import os
    import signal

    server = subprocess.Popen(cmd, start_new_session=True)

    def stop(signum, frame) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    try:
        code = server.wait()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)  # whatever ignored SIGTERM
    return 0 if code in (0, -signal.SIGTERM, -signal.SIGINT) else code


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
        rows.append((cfg, _train_with_progress(cfg, tracking_uri)))
    console.rule("[bold]4 · results")
    _print_results(rows)
    console.print(
        "FLOP shares are of flops/total; ρ = flops/learning / flops/total (evaluation kept apart)."
    )
    console.print(
        "Browse every metric: [bold]make ui[/] (or `isolab ui`), then open http://127.0.0.1:5000 → experiment 'demo'."
    )


def register(app: typer.Typer) -> None:
    for command in (train, flops, ui, demo):
        app.command()(command)
