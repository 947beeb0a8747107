"""The supervised warm start of a tiny preset, to a target regime rather than a step count.

AdamW, linear warm-up to a constant learning rate, gradient clipping at 1.0, loss on the answer
tokens only; a probe pool sampled every few steps decides when to stop (`WarmStartTarget`).
The result depends on the CPU's floats: isolab ships the weights it built (see
`isolab.models.weights`), and this runs only for `isolab models build NAME --from-scratch`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
from collections.abc import Callable, Generator

import torch

from isolab.metrics import Bands
from isolab.models.sampling import sample_and_grade
from isolab.models.tiny import TinySpec, WarmStartTarget, build_char_tokenizer, tiny_model_config
from isolab.tasks.arithmetic import (
    ArithmeticSpec,
    generate_problems,
    raw_prompt,
    raw_target,
    sample_problem,
    verify_raw,
)
from isolab.vocab import STEP

log = logging.getLogger(__name__)


@contextlib.contextmanager
def one_thread() -> Generator[None, None, None]:
    """Matmuls of a 0.66M-parameter model are too small to split: on a shared 2-core machine
    two intra-op threads made a training step 10× slower than one (1.85 s vs 0.18 s)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def warm_start(spec: TinySpec, progress: Callable[[int, int, str], None] | None = None):
    """Supervised warm start on raw-style sums until the base reaches `spec.target`.

    AdamW, linear warm-up to a constant learning rate, gradient clipping at 1.0; loss on the
    answer tokens (reversed digits + EOS) only. Every `probe_every` steps the model samples the
    probe pool; the first probe that meets the target stops the run. If none does within
    `max_sft_steps`, the probe nearest the target is kept and the record says so.
    Returns (model, tokenizer, record) with the record's steps, loss and probe history.
    """
    from transformers import LlamaForCausalLM

    torch.manual_seed(spec.seed)
    tok = build_char_tokenizer()
    model = LlamaForCausalLM(tiny_model_config(spec, len(tok)))
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.bos_token_id = tok.bos_token_id
    opt = torch.optim.AdamW(model.parameters(), lr=spec.sft_peak_lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda step: min(1.0, (step + 1) / max(spec.warmup_steps, 1))
    )
    rng = random.Random(spec.seed + 1)
    task = ArithmeticSpec()
    target = spec.target
    probe = _Probe(target, tok)
    probes: list[dict] = []
    best: tuple[float, int, dict] | None = None
    loss_value = math.nan
    for step in range(1, spec.max_sft_steps + 1):
        model.train()
        loss_value = sft_step(model, opt, sched, *_sft_batch(tok, rng, task, spec.sft_batch))
        status = f"loss {loss_value:.3f}"
        if step >= target.first_probe and step % target.probe_every == 0:
            shares = probe(model)
            probes.append({STEP: step, "loss": round(loss_value, 5), **shares})
            status += f" · easy {shares['easy']:.0%} hard {shares['hard']:.0%}"
            gap = target.distance(shares)
            if best is None or gap < best[0]:
                best = (gap, step, {k: v.clone() for k, v in model.state_dict().items()})
            if target.met(shares):
                if progress is not None:
                    progress(step, spec.max_sft_steps, status + " · target met")
                break
        if progress is not None:
            progress(step, spec.max_sft_steps, status)
    met = bool(probes) and target.met(probes[-1])
    stop_step = probes[-1][STEP] if met else (best[1] if best else spec.max_sft_steps)
    if not met and best is not None:
        model.load_state_dict(best[2])
        log.warning(
            "the warm start never met its target in %d steps: kept step %d, the probe nearest it",
            spec.max_sft_steps,
            stop_step,
        )
    model.eval()
    record = {
        "sft_steps": stop_step,
        "final_sft_loss": loss_value
        if met
        else next(p["loss"] for p in probes if p[STEP] == stop_step),
        "target_met": met,
        "probes": probes,
    }
    return model, tok, record


class _Probe:
    """avg@k band shares of the probe pool under the current model (see `WarmStartTarget`)."""

    def __init__(self, target: WarmStartTarget, tok):
        self.target, self.tok = target, tok
        problems = generate_problems(target.probe_problems, seed=target.probe_seed)
        self.prompts = [raw_prompt(p) for p in problems]
        self.answers = [p.answer for p in problems]
        self.verify = verify_raw

    def __call__(self, model) -> dict[str, float]:
        k = self.target.probe_k
        result = sample_and_grade(
            model,
            self.tok,
            self.prompts,
            self.answers,
            self.verify,
            n_samples=k,
            max_new_tokens=6,
            seed=self.target.probe_seed,
        )
        return Bands().shares(result.counts.tolist(), k)


def _sft_batch(tok, rng: random.Random, task: ArithmeticSpec, batch: int):
    """Right-padded (prompt + target + EOS) sequences with prompt and padding masked out."""
    rows, label_rows = [], []
    for _ in range(batch):
        problem = sample_problem(rng, task)
        prompt_ids = tok.convert_tokens_to_ids(list(raw_prompt(problem)))
        target_ids = tok.convert_tokens_to_ids(list(raw_target(problem))) + [tok.eos_token_id]
        rows.append(prompt_ids + target_ids)
        label_rows.append([-100] * len(prompt_ids) + target_ids)
    return padded(rows, label_rows, tok.pad_token_id)


def sft_step(model, opt, sched, input_ids: torch.Tensor, labels: torch.Tensor) -> float:
    """One supervised step of a warm start (gradients clipped at 1.0): the batch's loss."""
    loss = model(input_ids=input_ids, labels=labels).loss
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    return loss.item()


def padded(
    rows: list[list[int]], label_rows: list[list[int]], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows right-padded into one batch: `pad_id` in the inputs, -100 (ignored by the
    loss) in the labels."""
    width = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), width), pad_id)
    labels = torch.full((len(rows), width), -100)
    for i, (r, lab) in enumerate(zip(rows, label_rows, strict=True)):
        input_ids[i, : len(r)] = torch.tensor(r)
        labels[i, : len(lab)] = torch.tensor(lab)
    return input_ids, labels
