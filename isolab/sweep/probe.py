"""A measured wall-time estimate: a short probe of the sweep's own model on this machine.

`Timing`'s defaults are fitted to the tiny presets' CPU sweeps; a real LM is orders of
magnitude slower per rollout (`sweep plan` once estimated 8 s for a SmolLM2 run that took 159 s). `probe_timing`
loads the model, generates one batch of the task's prompts freely (untimed: its mean completion
length is recorded for the plans, `isolab.sweep.lengths`), then at full completion length, runs
one forward and backward pass over it and one AdamW step, and turns those times into a `Timing`:

- `eval_sample_s`: generation seconds per sampled completion;
- `rollout_s`: generation plus one forward and backward pass, per rollout (TRL's extra
  log-prob passes — reference, old policy — are not timed: a lower bound of the rate);
- `step_s`: the optimizer step, plus the tiny-model default's fixed cost per step;
- `setup_s`: loading the model, plus the default's.

Each is at least the default (the defaults hold TRL's per-rollout overhead, which a bare probe
does not see). The result is cached per model (weights digest, or the folder's path and
modification time), task, completion length and machine (CPU model, threads, GPU) under
`<cache>/timing/`: a probe costs a model load and a few seconds of compute, once.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict
from pathlib import Path

from isolab import difficulty, models
from isolab.config import RunConfig
from isolab.paths import cache_root
from isolab.sweep.spec import Timing
from isolab.tasks import task_id
from isolab.tasks.base import as_text

#: Prompts of a probe (the task's first training prompts), and completions per prompt: a batch
#: of 16, as GRPO generates in groups (per-sample cost falls with the batch on a CPU).
PROBE_PROMPTS, PROBE_GROUP = 4, 4


def machine_signature() -> str:
    """CPU model, usable threads and GPU: what a timing measured here holds for."""
    import torch

    from isolab.rl.vllm_cpu import cpu_tags

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return f"{cpu_tags()['isolab.cpu']} · {torch.get_num_threads()} threads · {gpu}"


def _model_identity(name: str) -> str:
    """What a probe's cache is keyed by: the weights' digest (a preset's shipped one before it
    is installed: the same key before and after), else a folder's path and modification time,
    else the name (a hub id)."""
    digest = models.current_digest(name)
    if digest:
        return digest
    path = Path(name)
    if path.is_dir():
        return f"{path.resolve()}@{max(p.stat().st_mtime_ns for p in path.iterdir())}"
    return name  # a hub id: its revision is not known before loading


def timing_path(cfg: RunConfig) -> Path:
    """Where the probe of `cfg`'s model, task and completion length on this machine is cached."""
    key = json.dumps(
        [
            _model_identity(cfg.model),
            task_id(cfg.task),
            cfg.max_completion_tokens,
            machine_signature(),
        ]
    )
    safe = cfg.model.replace("/", "--")[-60:]
    return cache_root() / "timing" / f"{safe}__{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def cached_record(cfg: RunConfig) -> dict | None:
    """What the probe of `cfg`'s model, task and completion length cached on this machine
    measured (`probe_timing`'s record), without measuring anything; None when there is none."""
    path = timing_path(cfg)
    return json.loads(path.read_text()) if path.exists() else None


def cached_timing(cfg: RunConfig) -> Timing | None:
    """The probe of `cfg`'s model, task and completion length cached on this machine, without
    measuring anything (None when there is none): `sweep plan` estimates from it unasked."""
    record = cached_record(cfg)
    return Timing(**record["timing"]) if record is not None else None


def completion_tokens(completions, eos_token_id: int | None) -> float:
    """Mean tokens of generated `completions` (token ids after the prompt), each up to and
    including its first EOS, as TRL's `completions/mean_length` counts them; a completion
    without one counts whole (it hit the cap)."""
    lengths = []
    for row in completions.tolist():
        end = row.index(eos_token_id) + 1 if eos_token_id in row else len(row)
        lengths.append(end)
    return sum(lengths) / max(1, len(lengths))


def probe_timing(cfg: RunConfig, *, refresh: bool = False) -> tuple[Timing, dict]:
    """(Timing, what was measured) for `cfg`'s model, task and completion length on this
    machine, from the cache unless `refresh` (see the module docstring)."""
    path = timing_path(cfg)
    if path.exists() and not refresh:
        record = json.loads(path.read_text())
        return Timing(**record["timing"]), record
    import torch
    import transformers  # noqa: F401  (imported once per worker: not part of a run's setup)

    t0 = time.perf_counter()
    model, tok = models.load(cfg.model, trust_remote_code=cfg.trust_remote_code)
    load_s = time.perf_counter() - t0
    task = difficulty.task_for(cfg.model, cfg.task)
    problems = task.problems(split="train", limit=PROBE_PROMPTS, data_dir=cfg.data_dir)
    prompts = [as_text(task.prompt(p), tok) for p in problems for _ in range(PROBE_GROUP)]
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    tokens = cfg.max_completion_tokens
    gen = dict(do_sample=True, temperature=cfg.temperature, pad_token_id=tok.pad_token_id)
    with torch.no_grad():
        # free generation, untimed: one-time costs (kernels, caches) out of the measurement,
        # and the length the model writes when it may stop (`isolab.sweep.lengths`)
        free = model.generate(**enc, max_new_tokens=tokens, **gen)
        free_len = completion_tokens(free[:, enc["input_ids"].shape[1] :], tok.eos_token_id)
        t0 = time.perf_counter()
        out = model.generate(**enc, max_new_tokens=tokens, min_new_tokens=tokens, **gen)
        generate_s = time.perf_counter() - t0
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-7)
    t0 = time.perf_counter()
    logits = model(out).logits
    logits.float().log_softmax(-1).mean().backward()
    backward_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    optimizer.step()
    step_s = time.perf_counter() - t0
    default = Timing()
    n = len(prompts)
    timing = Timing(
        setup_s=default.setup_s + load_s,
        step_s=default.step_s + step_s,
        rollout_s=max(default.rollout_s, (generate_s + backward_s) / n),
        eval_sample_s=max(default.eval_sample_s, generate_s / n),
    )
    record = {
        "timing": asdict(timing),
        "measured": {
            "load_s": load_s,
            "generate_s": generate_s,
            "forward_backward_s": backward_s,
            "optimizer_step_s": step_s,
            "samples": n,
            "completion_tokens": tokens,
            "completion_tokens_mean": free_len,
            "prompt_tokens": int(enc["input_ids"].shape[1]),
        },
        "model": cfg.model,
        "task": task_id(cfg.task),
        "machine": machine_signature(),
    }
    path = timing_path(cfg)  # the load may have built it: keyed by the digest it now has
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    tmp.replace(path)
    return timing, record
