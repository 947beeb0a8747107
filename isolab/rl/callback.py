"""The run's `TrainerCallback`: it evaluates the base model at step 0, closes the ledger's step
after each optimizer step, evaluates when the evaluator says so, logs it all to MLflow, hands a
checkpoint to the caller at each evaluation (`Checkpointing`) and honours a stop request.

A class, as TRL's own callbacks are (`transformers.TrainerCallback`): its state (the clock, the
sums a checkpoint saves, the evaluation a checkpoint is being saved for) is its attributes.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from isolab.compute.ledger import FlopLedger
from isolab.compute.peak import device_peak, raised_peak
from isolab.config import RunConfig, reward_parts
from isolab.logs import without_sklearn
from isolab.rl import ranks
from isolab.rl.evaluate import Evaluator
from isolab.rl.trainer import STATE_FILE, Checkpointing
from isolab.stop import STOP
from isolab.tracking import RunLogger
from isolab.vocab import (
    FLOPS_EVAL,
    FLOPS_JUDGE,
    FLOPS_STEP_LEARNING,
    FLOPS_STEP_REWARD,
    FLOPS_STEP_SEARCH,
    FLOPS_STEP_TOTAL,
    FLOPS_TOTAL,
    LR_SUM,
    MFU_LEARNING,
    MFU_RUN,
    MFU_SEARCH,
    MFU_STEP,
    ROLLOUTS,
    RUN_ID,
    STEP,
    THROUGHPUT_TOKENS_PER_S,
    TIME_REWARD_S,
    TIME_SEARCH_S,
)

without_sklearn()  # before transformers' first import: else it loads scikit-learn (5–6 s of CPU)
from transformers import TrainerCallback  # noqa: E402


class IsolabCallback(TrainerCallback):
    """Evaluates, closes the ledger's steps and logs, for one run (`isolab.rl.train.train`).

    Attributes:
        trainer: the `make_trainer_class` trainer, set once it exists (it is built with this
            callback, so it cannot be given to the constructor); its sampling counters are read
            and reset at each step's end.
        results: what `train` returns and a checkpoint saves: `base_eval`, `last_eval`,
            `last_metrics`, the cumulative sampling time `search_s` and `lr_sum` (Σlr).
    """

    def __init__(
        self,
        cfg: RunConfig,
        evaluator: Evaluator,
        logger: RunLogger,
        ledger: FlopLedger,
        max_new_tokens: int,
        *,
        on_step: Callable[[int, dict], None] | None = None,
        checkpointing: Checkpointing | None = None,
        resumed: dict[str, Any] | None = None,
    ) -> None:
        """`on_step(step, metrics)` is the caller's progress hook (the command line's progress
        bar). With `checkpointing`, the trainer saves its state after each evaluation but the
        last and `checkpointing.at_eval` is called with it; `resumed` (a checkpoint's
        `STATE_FILE`) restores the results and the clock and skips the base evaluation, done
        before the run was suspended."""
        self.cfg, self.evaluator, self.logger, self.ledger = cfg, evaluator, logger, ledger
        self.max_new_tokens = max_new_tokens
        self.on_step = on_step
        self.checkpointing = checkpointing
        self.resumed = resumed
        self.trainer: Any = None  # a make_trainer_class(...) instance, once built
        self.results: dict[str, Any] = dict(resumed["results"]) if resumed else {}
        self.total_steps = cfg.M * cfg.num_iterations
        self.main = ranks.is_main()  # of a run's processes, the first evaluates (and logs)
        self.clock = _MfuClock(charged_reward="proxy-prm" in reward_parts(cfg.reward))
        self.saving: dict[str, float] | None = None  # the evaluation a checkpoint is saved for

    def on_train_begin(self, args, state, control, model=None, **kw):
        self.clock.start(self.logger)
        if self.resumed is not None:  # the base model was evaluated before the run was suspended
            self.clock.load_state_dict(self.resumed["clock"])
            self.clock.restart()
            return
        if not self.main:
            ranks.barrier()  # while the first process evaluates the base model
            self.clock.restart()
            return
        metrics = self.evaluator(model, 0, self.max_new_tokens)
        self.results["base_eval"] = metrics
        self.results["last_eval"] = metrics
        start = {ROLLOUTS: 0.0, FLOPS_TOTAL: 0.0, LR_SUM: 0.0, **self._eval_flops()}
        self.logger.log_metrics({**metrics, **start}, step=0)
        self.logger.flush()
        ranks.barrier()
        self.clock.restart()  # evaluation is not training time

    def on_step_begin(self, args, state, control, optimizer=None, **kw):
        # Σlr: the learning rate this optimizer step applies, summed (kept in `results`, which a
        # checkpoint saves, so a resumed run continues the sum)
        if optimizer is not None:
            lr = float(optimizer.param_groups[0]["lr"])
            self.results["lr_sum"] = self.results.get("lr_sum", 0.0) + lr

    def on_step_end(self, args, state, control, model=None, **kw):
        if STOP.is_set():  # a stop request whose KeyboardInterrupt something swallowed
            raise KeyboardInterrupt
        trainer, results, logger = self.trainer, self.results, self.logger
        rollouts, completion_tokens = trainer.rollouts_since_step, trainer.completion_tokens
        search_s, step_s = trainer.search_time_s, self.clock.lap()
        if ranks.world_size() > 1:  # each process saw its slice: the step is their sum
            self.ledger.merge_step(ranks.sum_ints, ranks.max_floats)
            rollouts, completion_tokens = ranks.sum_ints([rollouts, completion_tokens])
            # the step waits for the slowest process
            search_s, step_s = ranks.max_floats([search_s, step_s])
        trainer.rollouts_since_step = 0
        step = state.global_step
        metrics = self.ledger.end_step(rollouts)
        results["search_s"] = results.get("search_s", 0.0) + search_s
        trainer.search_time_s = 0.0
        metrics[TIME_SEARCH_S] = results["search_s"]
        if results["search_s"] > 0:
            metrics[THROUGHPUT_TOKENS_PER_S] = completion_tokens / results["search_s"]
        metrics.update(self.clock.mfu(metrics, step_s, search_s))
        cum_rollouts = int(metrics[ROLLOUTS])
        # the same on every process
        due = self.evaluator.due(step, cum_rollouts, step >= self.total_steps)
        if self.main and due:
            ev = self.evaluator(model, step, self.max_new_tokens)
            results["last_eval"] = ev
            metrics = {**metrics, **ev, **self._eval_flops()}
            metrics[LR_SUM] = results.get("lr_sum", 0.0)
            logger.log_metrics(metrics, step=step)
            logger.flush()  # an evaluation point is a finished result: never lose it
            if self.checkpointing is not None and step < self.total_steps:
                control.should_save = True  # `on_save` hands the checkpoint over
                self.saving = metrics
        else:
            logger.log_metrics(metrics, step=step)
        results["last_metrics"] = metrics
        if self.on_step is not None:
            self.on_step(step, metrics)
        if due:  # the other processes wait for the first one's evaluation
            ranks.barrier()
        self.clock.restart()  # evaluation and logging are not training time

    def on_save(self, args, state, control, **kw):
        if self.checkpointing is None or self.saving is None:
            return
        metrics, self.saving = self.saving, None
        path = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        saved = {
            RUN_ID: self.logger.run_id,
            STEP: state.global_step,
            "ledger": self.ledger.state_dict(),
            "evaluator": self.evaluator.state_dict(),
            "results": {k: v for k, v in self.results.items() if k != "last_metrics"},
            "clock": self.clock.state_dict(),
        }
        (path / STATE_FILE).write_text(json.dumps(saved))
        self.logger.flush()  # TRL's metrics of this step too: the checkpoint holds all before it
        self.checkpointing.at_eval(state.global_step, path, metrics)
        self.clock.restart()  # the hand-over is not training time

    def on_log(self, args, state, control, logs=None, **kw):
        # TRL's own metrics (reward, completion lengths, KL, …) beside isolab's; a value that is
        # not a finite number (text, NaN) is not a metric MLflow can plot: dropped
        numeric = {
            k: v
            for k, v in (logs or {}).items()
            if isinstance(v, (int, float)) and math.isfinite(v)
        }
        self.logger.log_metrics(numeric, step=state.global_step)

    def _eval_flops(self) -> dict[str, float]:
        """Cumulative evaluation FLOPs, and the evaluation judge's where the run has one: logged
        apart (`flops/eval`, `flops/judge`), never part of `flops/total`."""
        state = self.ledger.state_dict()
        out = {FLOPS_EVAL: float(state["eval"])}
        if self.cfg.eval_judge:
            out[FLOPS_JUDGE] = float(state["judge"])
        return out


class _MfuClock:
    """Training wall time step by step (evaluation and logging left out) and the MFU it gives
    against the run's peak: every process's device peak summed (`isolab.compute.peak`)."""

    def __init__(self, charged_reward: bool = False) -> None:
        self.peak: float | None = None
        self.t = time.perf_counter()
        self.train_s = 0.0
        self.reward_s = 0.0
        #: a reward whose FLOPs are charged but never run (proxy-prm): not part of any rate
        self.charged_reward = charged_reward
        self.ran_total = 0.0

    def start(self, logger: RunLogger) -> None:
        """Find the peak (a collective when the run has several processes) and tag the run."""
        cuda = torch.cuda.is_available()
        found = device_peak(
            "bf16" if cuda else "fp32", torch.cuda.get_device_name() if cuda else None
        )
        peak = found.flops_per_s
        known, total = ranks.sum_ints([peak is not None, int(peak or 0)])
        if known == ranks.world_size():  # every process's device has a peak
            self.peak = float(total)
        logger.set_tags(
            {
                "isolab.peak_flops_per_s": f"{self.peak:.4g}" if self.peak else "unknown",
                "isolab.peak_source": found.source
                + (
                    f", summed over {ranks.world_size()} processes"
                    if ranks.world_size() > 1
                    else ""
                ),
            }
        )

    def restart(self) -> None:
        self.t = time.perf_counter()

    def state_dict(self) -> dict[str, Any]:
        """What a resumed run's MFU carries on from (`Checkpointing`)."""
        keys = ("peak", "train_s", "reward_s", "ran_total")
        return {k: getattr(self, k) for k in keys}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.peak = max(self.peak or 0.0, state["peak"] or 0.0) or None
        self.train_s, self.reward_s, self.ran_total = (
            state["train_s"],
            state["reward_s"],
            state["ran_total"],
        )

    def lap(self) -> float:
        """Seconds since the last `restart`: the step just finished."""
        return time.perf_counter() - self.t

    def mfu(self, metrics: dict[str, float], step_s: float, search_s: float) -> dict[str, float]:
        """The step's MFU, its search and learning parts (learning's time: the step's, less
        search and reward, so TRL's own overhead counts against it), and the run's so far."""
        reward_s = metrics[TIME_REWARD_S] - self.reward_s
        self.reward_s = metrics[TIME_REWARD_S]
        self.train_s += step_s
        if not self.peak or step_s <= 0:
            return {}
        learning_s = step_s - search_s - reward_s
        charged = metrics[FLOPS_STEP_REWARD] if self.charged_reward else 0.0
        ran = metrics[FLOPS_STEP_TOTAL] - charged  # FLOPs that ran this step
        self.ran_total += ran
        # a measured rate is one the device reaches: it raises the peak (MFU ≤ 1)
        self.peak = raised_peak(self.peak, ran, step_s, MFU_STEP)
        if search_s > 0:
            self.peak = raised_peak(self.peak, metrics[FLOPS_STEP_SEARCH], search_s, MFU_SEARCH)
        if learning_s > 0:
            self.peak = raised_peak(
                self.peak, metrics[FLOPS_STEP_LEARNING], learning_s, MFU_LEARNING
            )
        out = {
            MFU_STEP: ran / (step_s * self.peak),
            MFU_RUN: self.ran_total / (self.train_s * self.peak),
        }
        if search_s > 0:
            out[MFU_SEARCH] = metrics[FLOPS_STEP_SEARCH] / (search_s * self.peak)
        if learning_s > 0:
            out[MFU_LEARNING] = metrics[FLOPS_STEP_LEARNING] / (learning_s * self.peak)
        return out
