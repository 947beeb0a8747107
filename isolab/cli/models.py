"""`isolab models build|list` and `isolab difficulty`: base models and their difficulty splits."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from isolab.cli.common import console, fail, fit_names, progress, safe

models_app = typer.Typer(help="Install and list model presets.", no_args_is_help=True)


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
    from isolab import models
    from isolab.models import reward as reward_models

    names = [*models.preset_names(), *reward_models.REWARD_MODEL_PRESETS]
    if name not in names:
        fail(f"unknown preset {name!r}; choose one of {', '.join(names)}")
    built_here = models.is_tiny(name) or models.is_chat_preset(name)
    if from_scratch and not (built_here or models.is_reward_preset(name)):
        fail(
            f"--from-scratch: {name} is not built by isolab; only tiny presets and tiny-orm/prm are"
        )
    try:
        if models.is_chat_preset(name):
            with console.status(f"{'warm-starting' if from_scratch else 'installing'} {name}…"):
                path = models.build(name, force=force, from_scratch=from_scratch)
        elif models.is_reward_preset(name):
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
    with progress() as bar:
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
    for row in models.list_models():
        params = f"{row['params'] / 1e6:.2f}M" if row["params"] else "—"
        sha = row["digest"][:12] if row["digest"] else "—"
        if row["installed"] != "no" and row["shipped"] and not row["matches_shipped"]:
            sha += " ≠ shipped"
        easy, hard = (
            f"{row[s]['train']}/{row[s]['val']}" if row[s] else "—" for s in ("easy", "hard")
        )
        table.add_row(row["name"], row["installed"], params, sha, easy, hard)
    console.print(fit_names(table))


def _band(text: str, name: str) -> tuple[float, float]:
    try:
        low, high = (float(x) for x in text.split(","))
    except ValueError:
        fail(f"--{name} {text!r}: give two numbers LOW,HIGH, e.g. 0.3,0.6")
    if not 0 <= low <= high <= 1:
        fail(f"--{name} {text!r}: need 0 ≤ LOW ≤ HIGH ≤ 1")
    return low, high


def difficulty(
    model: Annotated[str, typer.Argument(help="Model preset or path.")] = "tiny-m",
    task: Annotated[str, typer.Option(help="arithmetic, gsm8k or math500.")] = "arithmetic",
    pool_size: Annotated[int, typer.Option(help="Problems to label.")] = 4000,
    k: Annotated[int, typer.Option(help="Samples per problem (avg@k).")] = 16,
    easy: Annotated[str, typer.Option(help="Easy band [LOW,HIGH] of avg@k.")] = "0.3,0.6",
    hard: Annotated[str, typer.Option(help="Hard band [LOW,HIGH] of avg@k.")] = "0,0.0625",
    val_fraction: Annotated[
        float, typer.Option(help="Held-out validation share per split.")
    ] = 0.25,
    seed: Annotated[int, typer.Option(help="Pool and split seed.")] = 0,
    data_dir: Annotated[str | None, typer.Option(help="Local GSM8K/MATH-500 folder.")] = None,
    force: Annotated[bool, typer.Option(help="Relabel even when cached.")] = False,
    trust_remote_code: Annotated[
        bool,
        typer.Option(
            help="Run the code a task card or the model ships (a card's own verifier, a "
            "model's auto_map), as the run config's trust_remote_code: true does."
        ),
    ] = False,
) -> None:
    """Label a problem pool by the base model's avg@k and write easy / hard splits."""
    from isolab import difficulty as diff
    from isolab.tasks import card as cards

    if cards.is_card(task) and not trust_remote_code:  # refused before any model loads
        try:
            refusal = cards.code_refusal(cards.load_card(task))
        except ValueError as exc:
            fail(str(exc))
        if refusal:
            fail(refusal.replace("in the run config", "(here: --trust-remote-code)"))

    bands = diff.Bands(easy=_band(easy, "easy"), hard=_band(hard, "hard"))
    if pool_size < 2 or k < 1:
        fail("--pool-size must be ≥ 2 and --k ≥ 1")
    path = diff.splits_path(model, task, pool_size, seed)
    try:
        if bands == diff.Bands() and k == 16 and val_fraction == 0.25:
            with console.status(f"labels of {pool_size} problems (shipped, cached or sampled)…"):
                splits = diff.load_or_label(
                    model,
                    task,
                    pool_size=pool_size,
                    seed=seed,
                    data_dir=data_dir,
                    force=force,
                    trust_remote_code=trust_remote_code,
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
                    trust_remote_code=trust_remote_code,
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
    console.print(f"labels of {safe(model)}{digest}: {source} → {safe(path)}")


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")
    app.command()(difficulty)
