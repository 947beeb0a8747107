"""isolab's overhead per training step: the wrapped run vs a bare TRL `GRPOTrainer`.

Both runs use the same `GRPOConfig`, model, data and reward; the wrapped run adds the FLOP
ledger's token accounting, the MLflow logging (buffered) and the evaluation callback (evaluation
itself happens only at the first and last step, outside the median). Runs alternate in one
process so that machine load hits both alike; the median step time of each is compared.

    python benchmarks/overhead.py [--steps 20] [--rounds 3]

Target: ratio ≤ 1.03.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings

from transformers import PrinterCallback, TrainerCallback

from isolab import models
from isolab.config import RunConfig
from isolab.logs import quiet_libraries
from isolab.rl.prepare import grpo_args, prepare
from isolab.rl.rewards import get_reward
from isolab.rl.train import train


class StepTimer(TrainerCallback):
    """Full-cycle step times: the interval between consecutive step ends (everything a step
    costs, logging included), measured the same way as `wrapped_run`'s `on_step`."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._last = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        now = time.perf_counter()
        self.times.append(now - self._last)
        self._last = now


def bare_run(cfg: RunConfig) -> list[float]:
    from datasets import Dataset
    from trl import GRPOTrainer

    model, tok, task, train_problems, _ = prepare(cfg)
    data = Dataset.from_dict(
        {
            "prompt": [task.prompt(p) for p in train_problems],
            "answer": [p.answer for p in train_problems],
        }
    )
    timer = StepTimer()
    with tempfile.TemporaryDirectory() as out:
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=[get_reward(cfg.reward, task)],
            args=grpo_args(cfg, out, cfg.max_completion_tokens),
            train_dataset=data,
            processing_class=tok,
            callbacks=[timer],
        )
        trainer.remove_callback(PrinterCallback)
        trainer.train()
    return timer.times[1:]  # the first interval includes set-up, as in wrapped_run


OWN_TIME = {"s": 0.0}
OWN_PER_STEP: list[float] = []


def _timed_method(fn):
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            OWN_TIME["s"] += time.perf_counter() - t0

    return wrapper


def instrument() -> None:
    """Attribute wall time to isolab's own per-step code — every ledger method, the trainer
    hooks' bookkeeping and the callback's step and log hooks — one figure per step. Unlike
    the ratio of two noisy medians, this attributed overhead hardly moves with machine load.
    (The last step, which holds the final evaluation, is dropped like in the ratio.)"""
    from isolab.compute.ledger import FlopLedger
    from isolab.rl.callback import IsolabCallback

    for name in dir(FlopLedger):
        if name.startswith("record_") or name == "end_step":
            setattr(FlopLedger, name, _timed_method(getattr(FlopLedger, name)))
    IsolabCallback.on_log = _timed_method(IsolabCallback.on_log)
    original_end = IsolabCallback.on_step_end

    def on_step_end(self, *a, **kw):
        t0 = time.perf_counter()
        out = original_end(self, *a, **kw)
        OWN_PER_STEP.append(OWN_TIME["s"] + time.perf_counter() - t0)
        OWN_TIME["s"] = 0.0
        return out

    IsolabCallback.on_step_end = on_step_end


def wrapped_run(cfg: RunConfig, uri: str) -> list[float]:
    """Step times of `isolab.rl.train.train`, from the same TrainerCallback hooks."""
    times: list[float] = []
    last = [time.perf_counter()]

    def on_step(step: int, metrics: dict) -> None:
        now = time.perf_counter()
        times.append(now - last[0])
        last[0] = now

    train(cfg, tracking_uri=uri, on_step=on_step)
    # on_step fires at the end of each step: the first interval includes set-up, drop it.
    return times[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--B_p", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: least noise)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    quiet_libraries()
    warnings.filterwarnings("ignore")
    models.build("tiny-m")
    instrument()
    cfg = RunConfig(
        experiment="bench-overhead",
        n=args.n,
        B_p=args.B_p,
        M=args.steps,
        eval_problems=16,
        eval_k_samples=4,
    )
    bare: list[float] = []
    wrapped: list[float] = []
    own: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        uri = f"sqlite:///{tmp}/mlflow.db"
        for r in range(args.rounds):
            # Skip the first step of every run (warm-up) and the last of both (the wrapped run
            # holds its final evaluation there).
            b = bare_run(cfg.replace(seed=r))[1:-1]
            mark = len(OWN_PER_STEP)
            w = wrapped_run(cfg.replace(seed=r), uri)[1:-1]
            own += OWN_PER_STEP[mark:][2:-1]  # same steps as w (the hooks also fire at step 1)
            bare += b
            wrapped += w
            print(
                f"round {r}: bare median {statistics.median(b) * 1e3:.1f} ms, "
                f"isolab median {statistics.median(w) * 1e3:.1f} ms"
            )
    mb, mw = statistics.median(bare), statistics.median(wrapped)
    print(
        f"\nmedian step time over {len(bare)} / {len(wrapped)} steps: bare {mb * 1e3:.1f} ms, "
        f"isolab {mw * 1e3:.1f} ms"
    )
    ratio = mw / mb
    own_ms = statistics.mean(own) * 1e3
    print(
        f"isolab's own code per step (ledger + hooks, attributed): mean {own_ms:.2f} ms "
        f"= {own_ms / (mb * 1e3):.2%} of the bare median step"
    )
    print(
        f"ratio isolab / bare = {ratio:.3f} (target ≤ 1.03): {'PASS' if ratio <= 1.03 else 'FAIL'}"
    )


if __name__ == "__main__":
    main()
