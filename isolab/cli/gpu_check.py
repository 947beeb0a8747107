"""`isolab gpu-check`: what isolab does on a GPU, measured in a few minutes, carried back as files.

Four parts (issue 50), each at a budget set by the device (`BUDGETS`):

1. GRPO steps of a SmolLM2-135M-shaped and a Qwen2.5-0.5B-shaped model (`SHAPES`), with random
   weights unless `--model` names real ones: the throughput and MFU are real, the rewards not;
2. for each, HF generate and, where installed and on CUDA, vLLM: completion tokens/s, the
   median step time, and MFU against the peak table (`isolab.compute.peak`, bf16 on CUDA);
3. the nstar GPU spec (studies/nstar/gpu/main.yaml) at a smoke budget (its first four n × a
   few steps, split `all`: random weights label no problem easy) through the sweep runner;
4. one JSON (`gpu-check.json`, fields in `check`'s docstring) and a snapshot folder per
   experiment (`isolab runs export`), which `isolab runs import` reads on a laptop.

`--device cpu` runs the same on CPU at tiny budgets and shapes (the fallback, and the test
of an offline install: tests/test_bundle.py). `--self-check` only imports what a run needs and
logs one run to a SQLite store (install.sh's last step).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from isolab.cli.common import check_out, console, fail, safe
from isolab.vocab import (
    FLOPS_TOTAL,
    MFU_LEARNING,
    MFU_RUN,
    MFU_SEARCH,
    RUN_ID,
    THROUGHPUT_TOKENS_PER_S,
    TIME_SEARCH_S,
)

Device = Literal["auto", "cuda", "cpu"]


@dataclass(frozen=True)
class Shape:
    """A causal LM's shape (its Hugging Face config): `arch` is `llama` or `qwen2`."""

    arch: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    rope_theta: float


#: The two shapes measured, from the models' own config.json on the hub
#: (HuggingFaceTB/SmolLM2-135M-Instruct, Qwen/Qwen2.5-0.5B-Instruct); both tie embeddings.
SHAPES = {
    "smollm2-135m": Shape("llama", 49152, 576, 1536, 30, 9, 3, 100000.0),
    "qwen2.5-0.5b": Shape("qwen2", 151936, 896, 4864, 24, 14, 2, 1000000.0),
}


@dataclass(frozen=True)
class Budget:
    """What one check spends on a device.

    Attributes:
        full_shapes: the models at their real shape (else `tiny`: 2 layers, 16-wide heads in
            the same ratio of query to key-value heads, a 512-entry vocabulary).
        steps: GRPO optimizer steps per model and engine.
        n: completions per prompt.
        B_p: prompts per step.
        max_completion_tokens: completion cap.
        eval_problems: validation problems per evaluation (4 samples each).
        study_B_p: prompts per step of the study's smoke.
        study_steps: steps of its largest-n point (a smaller n gets proportionally more).
        study_max_completion_tokens: the smoke's completion cap.
    """

    full_shapes: bool
    steps: int
    n: int
    B_p: int
    max_completion_tokens: int
    eval_problems: int
    study_B_p: int
    study_steps: int
    study_max_completion_tokens: int


#: Designed to take ≤ 5 minutes on one H200 (not yet run on CUDA: docs/gpu.md) and about a
#: minute on 2 CPU cores.
BUDGETS = {
    "cuda": Budget(True, 5, 8, 16, 256, 16, 8, 2, 128),
    "cpu": Budget(False, 2, 2, 2, 16, 2, 1, 1, 16),
}
#: Sweep spec whose smoke part 3 runs, and how many of its n it keeps.
STUDY_SPEC = "nstar/gpu/main.yaml"
STUDY_POINTS = 4
#: Experiments the check logs to (its store is the output folder's own).
EXPERIMENT = "gpu-check"
STUDY_EXPERIMENT = "gpu-check/nstar-smoke"
#: What a run on the node imports: `--self-check` imports each and prints its version.
NEEDED = (
    "torch", "transformers", "accelerate", "peft", "trl", "datasets", "mlflow", "sqlalchemy",
    "alembic", "polars", "pyarrow", "pydantic", "math_verify", "numpy", "scipy", "matplotlib",
)  # fmt: skip


def tiny(shape: Shape) -> Shape:
    """`shape` cut to CPU size: 2 layers, heads 16 wide in the same query : key-value ratio
    (SmolLM2's 3 : 1, Qwen2.5's 7 : 1), a 512-entry vocabulary (the character tokenizer's
    ~100 symbols and padding)."""
    ratio = shape.num_attention_heads // shape.num_key_value_heads
    return Shape(shape.arch, 512, 16 * ratio, 32 * ratio, 2, ratio, 1, shape.rope_theta)


def random_model(shape: Shape, path: Path) -> Path:
    """A randomly initialised model of `shape` saved to `path`, with a character tokenizer
    padded to its vocabulary (so every sampled id decodes) and a plain chat template."""
    import string

    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        AutoModelForCausalLM,
        LlamaConfig,
        PreTrainedTokenizerFast,
        Qwen2Config,
    )

    vocab = {"<pad>": 0, "<bos>": 1, "<eos>": 2}
    for ch in string.printable:
        vocab.setdefault(ch, len(vocab))
    for i in range(len(vocab), shape.vocab_size):
        vocab[f"<t{i}>"] = i
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        padding_side="left",
    )
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    config_class = {"llama": LlamaConfig, "qwen2": Qwen2Config}[shape.arch]
    cfg = config_class(
        vocab_size=shape.vocab_size,
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=shape.num_key_value_heads,
        tie_word_embeddings=True,
        max_position_embeddings=4096,
        rope_parameters={"rope_theta": shape.rope_theta, "rope_type": "default"},
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def resolve_device(device: Device) -> str:
    """`cuda` or `cpu`: `auto` takes CUDA where torch sees it.

    Raises:
        ValueError: `cuda` asked for where torch sees no CUDA device.
    """
    import torch

    cuda = torch.cuda.is_available()
    if device == "cuda" and not cuda:
        raise ValueError(
            "--device cuda: torch sees no CUDA device here (a CPU build of torch, or no GPU "
            "visible); run on the GPU node, or --device cpu for the CPU fallback."
        )
    return "cuda" if device == "cuda" or (device == "auto" and cuda) else "cpu"


def engines_to_measure(device: str) -> list[str]:
    """HF generate always; vLLM too on CUDA where it is installed (on a CPU its start-up alone
    exceeds the fallback's budget)."""
    from isolab.rl.engines import vllm_installed

    return ["hf", "vllm"] if device == "cuda" and vllm_installed() else ["hf"]


def peak(device: str) -> dict[str, Any]:
    """The peak the MFU figures divide by (`run_device_peak`, as the runs' own ledger): the
    GPU table at bf16, or this host's measured fp32 matmul rate."""
    import torch

    from isolab.compute.peak import run_device_peak

    found = run_device_peak()
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    return {"device_name": name, "peak_flops_per_s": found.flops_per_s, "peak_source": found.source}


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


def versions() -> dict[str, str | None]:
    """Version of the distribution behind each module of `NEEDED`, vLLM and isolab (None: not
    installed); `mlflow` is mlflow-skinny's in a bundle's install."""
    import importlib.metadata as md

    dists = md.packages_distributions()
    out: dict[str, str | None] = {}
    for module in (*NEEDED, "vllm", "isolab"):
        names = dists.get(module) or []
        out[module] = md.version(names[0]) if names else None
    return out


def self_check() -> dict[str, Any]:
    """Import every module a run needs and log one run to a fresh SQLite store: what an
    offline install must pass before a study starts. Raises ImportError naming a missing one."""
    import importlib

    import torch

    for module in NEEDED:
        importlib.import_module(module)
    import mlflow

    with tempfile.TemporaryDirectory(prefix="isolab-self-check-") as tmp:
        mlflow.set_tracking_uri(f"sqlite:///{tmp}/mlflow.db")
        mlflow.set_experiment("self-check")
        with mlflow.start_run():
            mlflow.log_metric("ok", 1.0)
    cuda = torch.cuda.is_available()
    return {
        "versions": versions(),
        "cuda": cuda,
        "device_name": torch.cuda.get_device_name() if cuda else None,
    }


def _summary(row: dict[str, Any]) -> str:
    """One line of a case's measurements, or its error."""
    if "error" in row:
        return f"failed: {safe(row['error'])}"
    return (
        f"{row['completion_tokens_per_s'] or 0:.0f} completion tokens/s · step "
        f"{row['step_s'] or 0:.2f} s · MFU {row['mfu_run'] or 0:.2%} "
        f"(search {row['mfu_search'] or 0:.2%})"
    )


def check(device: str, out: Path, data_dir: str | None, model: str | None,
          skip_study: bool) -> dict[str, Any]:  # fmt: skip
    """The whole check into `out`; returns what `gpu-check.json` holds: `device`,
    `device_name`, `peak_flops_per_s`, `peak_source`, `budget` (a `Budget`), `versions`,
    `models` (one record per model, engine and process count — every GPU once more for the
    first model where there are several: `completion_tokens_per_s`, `step_s` the median
    step, `search_s`, `flops_total`, `mfu_run`, `mfu_search`, `mfu_learning`, `wall_s`),
    `study` (points `finished` / `failed`, their `steps`, `errors`, `wall_s`); a case that
    raised has its `error` instead of measurements, and the rest still run; `snapshots` (experiment →
    folder), `store` (the SQLite URI) and `wall_s`."""
    import torch

    from isolab.cli.runs import export_cmd
    from isolab.logs import quiet_libraries

    quiet_libraries()
    t0 = time.perf_counter()
    budget = BUDGETS[device]
    uri = f"sqlite:///{(out / 'mlflow.db').resolve()}"
    record: dict[str, Any] = {"device": device, **peak(device), "budget": asdict(budget),
                              "versions": versions(), "store": uri}  # fmt: skip
    models: dict[str, str] = {}
    weights = Path(tempfile.mkdtemp(prefix="isolab-gpu-check-"))  # GBs: not carried back
    if model is not None:
        models[model] = model
    else:
        for label, shape in SHAPES.items():
            sized = shape if budget.full_shapes else tiny(shape)
            models[label] = str(random_model(sized, weights / label))
    record["random_weights"] = model is None
    cases = [(label, engine, 1) for label in models for engine in engines_to_measure(device)]
    gpus = torch.cuda.device_count() if device == "cuda" else 1
    if gpus > 1:  # the first model's HF run once more on every GPU: the data-parallel scaling
        cases.append((next(iter(models)), "hf", gpus))
    record["models"] = []
    for label, engine, processes in cases:
        try:  # one failing case (a vLLM that will not start) must not lose the others
            row = grpo_steps(models[label], label, engine, budget, data_dir, uri, processes)
        except Exception as exc:
            row = {"model": label, "engine": engine, "processes": processes, "error": repr(exc)}
        record["models"].append(row)
        console.print(f"{label} · {engine} × {processes}: " + _summary(row))
    experiments = [EXPERIMENT]
    if not skip_study:
        try:
            record["study"] = study_smoke(models[next(iter(models))], device, budget, data_dir, uri)
            study = record["study"]
            console.print(
                f"study smoke: {study['finished']} of {len(study['n'])} points finished in "
                f"{study['wall_s']:.0f} s"
            )
        except Exception as exc:
            record["study"] = {"spec": STUDY_SPEC, "error": repr(exc)}
            console.print(f"study smoke: failed: {safe(repr(exc))}")
        experiments.append(STUDY_EXPERIMENT)
    shutil.rmtree(weights, ignore_errors=True)
    record["snapshots"] = {}
    for name in experiments:
        dest = out / "snapshots" / name.replace("/", "--")
        try:
            export_cmd(name, dest, all_statuses=True, tracking_uri=uri)
        except (typer.Exit, ValueError):  # no run of it reached the store: nothing to carry
            continue
        record["snapshots"][name] = str(dest.relative_to(out))
    record["wall_s"] = time.perf_counter() - t0
    (out / "gpu-check.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def gpu_check(
    device: Annotated[
        str,
        typer.Option(
            help="auto (CUDA where torch sees it), cuda, or cpu: the fallback at tiny budgets."
        ),
    ] = "auto",
    out: Annotated[
        Path | None,
        typer.Option(
            help="Folder for gpu-check.json, snapshots/ and the store; default: runs/gpu-check/<UTC time>."
        ),
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            help="Folder with gsm8k/ and math500/ JSONL (the bundle's data/); default: the hub."
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="Real weights (a folder or hub id) instead of the two random-weight shapes."
        ),
    ] = None,
    skip_study: Annotated[
        bool, typer.Option(help="Leave out part 3, the nstar spec's smoke.")
    ] = False,
    self_check_only: Annotated[
        bool,
        typer.Option(
            "--self-check", help="Only import what a run needs and log one run (seconds)."
        ),
    ] = False,
) -> None:
    """Measure isolab on this machine's GPU: GRPO steps of two model shapes (HF and vLLM), MFU,
    the nstar spec's smoke; writes gpu-check.json and snapshots to carry back."""
    import datetime

    from isolab.paths import runs_dir

    if device not in ("auto", "cuda", "cpu"):
        fail(f"--device {device!r}: choose auto, cuda or cpu.")
    if self_check_only:
        try:
            found = self_check()
        except ImportError as exc:
            fail(
                f"self-check: {exc}: the bundle lacks it; rebuild it with "
                f"`isolab bundle DIR --with {exc.name or 'PACKAGE'}` and rerun install.sh.",
                1,
            )
        names = ", ".join(f"{k} {v}" for k, v in found["versions"].items() if v)
        console.print(f"self-check passed: {names}")
        console.print(
            f"CUDA: {safe(found['device_name'])}" if found["cuda"] else "CUDA: none seen by torch"
        )
        return
    if device == "cpu":  # the runs (and the sweep's workers) must not find the GPU either
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    if data_dir is not None and not (data_dir / "gsm8k" / "train.jsonl").is_file():
        fail(f"--data-dir {data_dir}: no gsm8k/train.jsonl there; give the bundle's data/ folder.")
    try:
        resolved = resolve_device(device)  # type: ignore[arg-type]
    except ValueError as exc:
        fail(str(exc))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = check_out(out or runs_dir() / "gpu-check" / stamp, folder=True)
    out.mkdir(parents=True, exist_ok=True)
    record = check(resolved, out, str(data_dir) if data_dir else None, model, skip_study)
    console.print(
        f"gpu-check on {safe(record['device_name'])} in {record['wall_s']:.0f} s → "
        f"{safe(out)}/gpu-check.json; on a laptop: isolab runs import {safe(out)}/snapshots/<experiment>"
    )
    study = record.get("study", {})
    if study.get("failed") or "error" in study or any("error" in r for r in record["models"]):
        fail(
            "gpu-check: some parts failed (their `error` in gpu-check.json); the rest came back.", 1
        )


def register(app: typer.Typer) -> None:
    app.command("gpu-check")(gpu_check)
