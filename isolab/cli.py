"""`isolab` command line: every command has --help; bad input exits 2 with the fix."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from isolab.cli_common import TrackingUri, console, fail

app = typer.Typer(
    help="isolab: where should RL post-training compute go? GRPO runs, a FLOP ledger, "
    "iso-compute sweeps and frontier fits, tracked in MLflow.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
models_app = typer.Typer(help="Build and list model presets.", no_args_is_help=True)
app.add_typer(models_app, name="models")


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )


# ---- models --------------------------------------------------------------------------------
@models_app.command("build")
def models_build(
    name: Annotated[
        str,
        typer.Argument(help="Preset: tiny-s, tiny-m, tiny-l, smollm2-135m, tiny-orm or tiny-prm."),
    ],
    from_scratch: Annotated[
        bool,
        typer.Option(
            "--from-scratch",
            help="Train the tiny preset here (warm start to its target regime) instead of "
            "installing the shipped weights. CPU-dependent: the bytes differ between machines.",
        ),
    ] = False,
    force: Annotated[bool, typer.Option(help="Reinstall even when installed.")] = False,
) -> None:
    """Install a preset into the cache (runs/cache/models/NAME), checking its sha256 digest.

    Tiny presets and the tiny reward models ship with isolab: the same bytes on every machine.
    `--from-scratch` rebuilds a tiny preset by its supervised warm start, then labels the
    default pool so that its record holds the split sizes.
    """
    from isolab import models, reward_models

    names = [*models.preset_names(), *reward_models.REWARD_MODEL_PRESETS]
    if name not in names:
        fail(f"unknown preset {name!r}; choose one of {', '.join(names)}")
    if from_scratch and not (models.is_tiny(name) or reward_models.is_preset(name)):
        fail(
            f"--from-scratch: {name} is not built by isolab; only tiny presets and tiny-orm/prm are"
        )
    try:
        if reward_models.is_preset(name):
            with console.status(f"{'training' if from_scratch else 'installing'} {name}…"):
                path = reward_models.build(name, force=force, from_scratch=from_scratch)
        elif models.is_tiny(name) and from_scratch:
            path = _warm_start_with_progress(name)
        elif models.is_tiny(name):
            path = models.build(name, force=force)
        else:
            with console.status(f"converting {name} (about a minute the first time)…"):
                path = models.build(name, force=force)
    except (RuntimeError, FileNotFoundError) as exc:
        fail(str(exc))
    digest = models.digest(name)
    console.print(
        f"[green]installed[/] {name} → {path}" + (f" · sha256 {digest[:16]}…" if digest else "")
    )


def _warm_start_with_progress(name: str):
    from isolab import difficulty as diff
    from isolab import models

    spec = models.TINY_PRESETS[name]
    with _progress() as bar:
        task = bar.add_task(f"warm start {name}", total=spec.max_sft_steps, info="")

        def tick(step: int, total: int, status: str) -> None:
            bar.update(task, completed=step, info=status)

        path = models.build(name, from_scratch=True, progress=tick)
    info = json.loads((path / models.BUILD_INFO).read_text())
    if not info["target_met"]:
        console.print(
            f"[yellow]warning:[/] the warm start never met its target in {spec.max_sft_steps} "
            f"steps; kept step {info['sft_steps']}, the probe nearest it"
        )
    with console.status("labelling the default pool (4,000 problems × 16 samples)…"):
        splits = diff.load_or_label(name, "arithmetic", pool_size=4000, force=True)
        entry = diff.record_in_build_info(splits, 4000, 0)
    sizes = entry["sizes"]
    console.print(
        f"stopped at step {info['sft_steps']} (loss {info['final_sft_loss']:.3f}); Easy "
        f"{sizes['easy']['train']} train / {sizes['easy']['val']} val, Hard "
        f"{sizes['hard']['train']} / {sizes['hard']['val']}"
    )
    return path


@models_app.command("list")
def models_list() -> None:
    """The presets: installed or not (shipped / from-scratch), size, sha256 digest of the
    weights, and the Easy / Hard split sizes (train/val) of the default 4,000-problem pool."""
    from isolab import models

    table = Table("preset", "installed", "params", "sha256", "Easy tr/val", "Hard tr/val")
    for column in table.columns:
        column.no_wrap = True
    for row in models.list_models():
        params = f"{row['params'] / 1e6:.2f}M" if row["params"] else "—"
        sha = row["digest"][:12] if row["digest"] else "—"
        if row["installed"] != "no" and row["shipped"] and not row["matches_shipped"]:
            sha += " ≠ shipped"
        easy, hard = (
            f"{row[s]['train']}/{row[s]['val']}" if row[s] else "—" for s in ("easy", "hard")
        )
        table.add_row(row["name"], row["installed"], params, sha, easy, hard)
    console.print(table)


# ---- difficulty ----------------------------------------------------------------------------
def _band(text: str, name: str) -> tuple[float, float]:
    try:
        low, high = (float(x) for x in text.split(","))
    except ValueError:
        fail(f"--{name} {text!r}: give two numbers LOW,HIGH, e.g. 0.3,0.6")
    if not 0 <= low <= high <= 1:
        fail(f"--{name} {text!r}: need 0 ≤ LOW ≤ HIGH ≤ 1")
    return low, high


@app.command()
def difficulty(
    model: Annotated[str, typer.Argument(help="Model preset or path.")] = "tiny-m",
    task: Annotated[str, typer.Option(help="arithmetic, gsm8k or math500.")] = "arithmetic",
    pool_size: Annotated[int, typer.Option(help="Problems to label.")] = 4000,
    k: Annotated[int, typer.Option(help="Samples per problem (avg@k).")] = 16,
    easy: Annotated[str, typer.Option(help="Easy band [LOW,HIGH] of avg@k.")] = "0.3,0.6",
    hard: Annotated[str, typer.Option(help="Hard band (LOW,HIGH] of avg@k.")] = "0,0.0625",
    val_fraction: Annotated[
        float, typer.Option(help="Held-out validation share per split.")
    ] = 0.25,
    seed: Annotated[int, typer.Option(help="Pool and split seed.")] = 0,
    data_dir: Annotated[str | None, typer.Option(help="Local GSM8K/MATH-500 folder.")] = None,
    force: Annotated[bool, typer.Option(help="Relabel even when cached.")] = False,
) -> None:
    """Label a problem pool by the base model's avg@k and write easy / hard splits."""
    from isolab import difficulty as diff

    bands = diff.Bands(easy=_band(easy, "easy"), hard=_band(hard, "hard"))
    if pool_size < 2 or k < 1:
        fail("--pool-size must be ≥ 2 and --k ≥ 1")
    path = diff.splits_path(model, task, pool_size, seed)
    try:
        if bands == diff.Bands() and k == 16 and val_fraction == 0.25:
            with console.status(f"labels of {pool_size} problems (shipped, cached or sampled)…"):
                splits = diff.load_or_label(
                    model, task, pool_size=pool_size, seed=seed, data_dir=data_dir, force=force
                )
        else:
            with console.status(f"sampling {k} completions for each of {pool_size} problems…"):
                splits = diff.label(
                    model,
                    task,
                    pool_size=pool_size,
                    k=k,
                    bands=bands,
                    val_fraction=val_fraction,
                    seed=seed,
                    data_dir=data_dir,
                )
            splits.save(path)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        fail(str(exc))
    counts, centers = splits.histogram()
    table = Table(f"avg@{splits.k}", "problems", "", title="base model: problems per avg@k")
    peak = max(counts.max(), 1)
    for c, x in zip(counts, centers, strict=True):
        table.add_row(f"{x:.3f}", str(int(c)), "█" * int(40 * c / peak))
    console.print(table)
    for name, part in splits.splits.items():
        console.print(f"{name:>5}: {len(part['train'])} train, {len(part['val'])} validation")
    source = "shipped with the weights" if splits.source == "shipped" else "sampled here"
    digest = f" (sha256 {splits.model_digest[:12]}…)" if splits.model_digest else ""
    console.print(f"labels of {model}{digest}: {source} → {path}")


# ---- train / flops -------------------------------------------------------------------------
def _load_config(path: Path, overrides: list[str]):
    import yaml

    from isolab.config import RunConfig

    try:
        cfg = RunConfig.from_yaml(path)
        if overrides:
            changes = {}
            for item in overrides:
                if "=" not in item:
                    fail(f"--set {item!r}: write FIELD=VALUE, e.g. --set n=16")
                key, value = item.split("=", 1)
                changes[key] = yaml.safe_load(value)
            cfg = RunConfig.from_dict({**_asdict(cfg), **changes})
        return cfg
    except (ValueError, FileNotFoundError, TypeError) as exc:
        fail(f"{path}: {exc}")


def _asdict(cfg) -> dict:
    import dataclasses

    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}


Overrides = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a config field: --set n=16 (repeatable)."),
]


@app.command()
def train(
    config: Annotated[Path, typer.Argument(help="RunConfig YAML.")],
    tracking_uri: TrackingUri = None,
    set_: Overrides = None,
) -> None:
    """Run one GRPO training run from a YAML config and log it to MLflow."""
    cfg = _load_config(config, set_ or [])
    try:
        result = _train_with_progress(cfg, tracking_uri)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        fail(str(exc))
    _print_results([(cfg, result)])


def _train_with_progress(cfg, tracking_uri):
    from isolab.train import train as run_train

    with _progress() as bar:
        task = bar.add_task(cfg.run_name, total=cfg.M * cfg.num_iterations, info="")

        def on_step(step: int, metrics: dict) -> None:
            info = f"ρ {metrics.get('compute/rho', 0):.2f}"
            if "eval/avg@4" in metrics:
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
        evals.add_row(cfg.run_name, *cells)
        m = r.final_metrics
        total = m.get("flops/total", 0.0) or 1.0
        shares = [
            f"{m.get(f'flops/{k}', 0.0) / total:.0%}" for k in ("search", "learning", "reward")
        ]
        spend.add_row(
            cfg.run_name,
            *shares,
            f"{m.get('flops/total', 0):.2e}",
            f"{m.get('compute/rho', 0):.2f}",
            f"{r.wall_time_s:.0f}",
        )
    console.print(evals)
    console.print(spend)


@app.command()
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
    from isolab.planning import plan_config

    cfg = _load_config(config, set_ or [])
    try:
        plan = plan_config(cfg, prompt_len=prompt_len, completion_len=completion_len)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        fail(str(exc))
    table = Table("component", "per step", "total", "share", title=f"{cfg.run_name} · M={cfg.M}")
    total = plan["flops/total"] or 1.0
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


# ---- ui / demo -----------------------------------------------------------------------------
@app.command()
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
    console.print(f"MLflow UI on http://127.0.0.1:{port} (store {uri}); Ctrl-C stops it.")
    try:
        raise typer.Exit(subprocess.call(cmd))
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


@app.command()
def demo(
    model: Annotated[str, typer.Option(help="Tiny preset.")] = "tiny-m",
    steps: Annotated[int, typer.Option(help="Optimizer steps M per run.")] = 150,
    lr_base: Annotated[float, typer.Option(help="Learning rate at B = 64.")] = 1e-4,
    tracking_uri: TrackingUri = None,
) -> None:
    """Build the tiny model, label difficulty, train an easy and a hard run, print the table."""
    from isolab import models
    from isolab.config import RunConfig

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
            study="demo",
            model=model,
            split=split,
            n=8,
            B_p=8,
            M=steps,
            lr_base=lr_base,
            eval_every=25,
            eval_problems=128,
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


def _register_optional() -> None:
    """Sub-commands that live beside their modules."""
    from isolab import cli_analysis, cli_study, cli_sweep

    cli_analysis.register(app)
    cli_study.register(app)
    cli_sweep.register(app)


def main() -> None:
    logging.basicConfig(level=os.environ.get("ISOLAB_LOG", "WARNING"))
    quiet_libraries()
    _register_optional()
    app()


def quiet_libraries() -> None:
    """Keep the terminal for isolab's own progress: no per-load bars or deprecation chatter."""
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")  # read when mlflow is imported
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:
        pass


if __name__ == "__main__":
    main()
