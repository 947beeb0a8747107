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

This module runs the parts and writes the report; its siblings hold the shapes, budgets and
device (`gpu_check_setup`), the runs of parts 1–3 (`gpu_check_measure`) and the self-check
(`gpu_check_install`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from isolab.cli.common import check_out, console, fail, safe
from isolab.cli.gpu_check_install import self_check, versions
from isolab.cli.gpu_check_measure import (
    EXPERIMENT,
    STUDY_EXPERIMENT,
    STUDY_SPEC,
    grpo_steps,
    study_smoke,
)
from isolab.cli.gpu_check_setup import (
    BUDGETS,
    SHAPES,
    engines_to_measure,
    peak,
    random_model,
    resolve_device,
    tiny,
)


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
