"""What isolab hooks into TRL's `GRPOTrainer`: it observes, and changes no part of the algorithm
but one opt-in, dynamic sampling (`RunConfig.search_oversample`).

- `make_trainer_class`: a thin subclass that reports the token counts TRL computes (rollouts,
  old-policy and reference forwards, update batches) to the `FlopLedger`, and times sampling;
  with `search_oversample` k > 1 it also draws k·B_p problems per step, generates and scores
  them all, and hands TRL's own scoring the B_p groups `isolab.rl.dynamic_sampling` keeps;
- `timed_reward`: a reward function's wall time, and a reward model's forward passes, to the ledger;
- `make_callback`: the step callback that closes each ledger step, evaluates at the chosen
  steps, writes every metric to MLflow and honours a stop request.

`isolab.rl.train` puts them together for one run.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch

from isolab.compute.ledger import FlopLedger
from isolab.compute.peak import device_peak, raised_peak
from isolab.config import RunConfig, reward_parts
from isolab.rl import engines, ranks
from isolab.rl.dynamic_sampling import select_groups, selection_metrics
from isolab.rl.evaluate import Evaluator
from isolab.stop import STOP
from isolab.tracking import RunLogger
from isolab.vocab import (
    FLOPS_EVAL,
    FLOPS_JUDGE,
    FLOPS_TOTAL,
    LR_SUM,
    MFU_LEARNING,
    MFU_RUN,
    MFU_SEARCH,
    MFU_STEP,
    ROLLOUTS,
)

if TYPE_CHECKING:
    from isolab.rl.rewards import PricedReward


def _lens(mask: torch.Tensor) -> list[int]:
    return mask.sum(dim=1).tolist()


def _logits_lens(seq_lens: list[int], completion_lens: list[int]) -> list[int]:
    """Positions TRL's fused log-prob head projects: completion positions on CUDA; on CPU every
    position of the row but the last (TRL 1.16). Padding is not counted (model FLOPs)."""
    if torch.cuda.is_available():
        return completion_lens
    return [s - 1 for s in seq_lens]


def _rows(value, rows: list[int], total: int):
    """The `rows` of a per-rollout list (recursing into a dict of them); anything else as is."""
    if isinstance(value, list) and len(value) == total:
        return [value[i] for i in rows]
    if isinstance(value, dict):
        return {k: _rows(v, rows, total) for k, v in value.items()}
    return value


def make_trainer_class(with_vllm: bool = False):
    """`GRPOTrainer` subclass that reports token counts to a `FlopLedger` (import-time lazy;
    TRL's vLLM half is imported only `with_vllm`, see `engines.grpo_trainer_class`).

    Dynamic sampling (`search_oversample` k > 1, set on the instance before `train()`) goes
    through TRL's own extension points, not a loop of isolab's: the train sampler (TRL's
    `RepeatSampler`) draws k·B_p problems per generation batch; `_generate_and_score_completions`
    generates and scores all k·B_p·n rollouts (TRL's `_generate` and `_calculate_rewards`),
    keeps the B_p groups whose rewards vary most, and runs TRL's own scoring on those, replaying
    their completions and rewards instead of generating or scoring them again. TRL then computes
    the old-policy and reference log-probs, advantages and the update on B_p·n rollouts only.
    With k = 1 none of this runs: the trainer is TRL's, observed.
    """
    GRPOTrainer = engines.grpo_trainer_class(with_vllm)

    class LedgerGRPOTrainer(GRPOTrainer):
        ledger: FlopLedger
        search_oversample: int = 1  # k of dynamic sampling (`RunConfig.search_oversample`)
        rollouts_since_step: int = 0
        search_time_s: float = 0.0  # wall time inside TRL's `_generate` (HF generate or vLLM)
        completion_tokens: int = 0
        # the kept groups' (generation, rewards) while TRL's scoring replays them
        _replay: tuple | None = None

        def get_train_dataloader(self):
            if self.search_oversample == 1:
                return super().get_train_dataloader()
            if self.accelerator.num_processes > 1:  # rewards would be gathered across processes
                raise ValueError(
                    f"search_oversample = {self.search_oversample} runs in one process: launch "
                    "the run without accelerate's multi-process launcher, or set it to 1."
                )
            # TRL's own loader, with k times the generation batch: one optimizer step takes
            # k·B_p problems (map-style datasets only, as isolab builds)
            return self._get_dataloader(
                dataset=self.train_dataset,
                description="Training",
                batch_size=self.search_oversample
                * self._train_batch_size
                * self.args.steps_per_generation,
                sampler_fn=self._get_train_sampler,
                is_training=True,
            )

        def _get_train_sampler(self, dataset=None):
            if self.search_oversample == 1:
                return super()._get_train_sampler(dataset)
            from trl.trainer.utils import RepeatSampler

            # TRL's sampler with k·B_p problems per generation batch (each repeated n times,
            # the batch repeated over the num_iterations passes)
            return RepeatSampler(
                data_source=self.train_dataset if dataset is None else dataset,
                mini_repeat_count=self.num_generations,
                batch_size=self.search_oversample
                * self.args.generation_batch_size
                // self.num_generations,
                repeat_count=self.num_iterations * self.args.steps_per_generation,
                shuffle=self.shuffle_dataset,
                seed=self.args.seed,
            )

        def _generate(self, prompts):
            if self._replay is not None:  # the kept groups, generated (and timed) already
                return self._replay[0]
            t0 = time.perf_counter()
            out = super()._generate(prompts)
            self.search_time_s += time.perf_counter() - t0
            return out

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            if self._replay is not None:  # the kept groups, scored (and charged) already
                return self._replay[1]
            return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

        def _generate_and_score_completions(self, inputs):
            if self.search_oversample > 1 and self.model.training:
                return self._oversampled(inputs)
            out = super()._generate_and_score_completions(inputs)
            prompt_lens = _lens(out["prompt_mask"])
            completion_lens = _lens(out["completion_mask"])
            self.ledger.record_generation(prompt_lens, completion_lens)
            self._record_log_prob_passes(out)
            self.rollouts_since_step += len(prompt_lens)
            self.completion_tokens += sum(completion_lens)
            return out

        def _oversampled(self, inputs):
            """Generate and score k·B_p groups, let TRL score and train on the B_p kept."""
            n = self.num_generations
            prompts = [x["prompt"] for x in inputs]
            generation = self._generate(prompts)
            prompt_ids, completion_ids, completions = generation[0], generation[1], generation[3]
            rewards_per_func = self._calculate_rewards(inputs, prompts, completions, completion_ids)
            # TRL's weighted sum of the reward functions; NaN where none could score a rollout
            weights = self.reward_weights.to(rewards_per_func.device).unsqueeze(0)
            rewards = (rewards_per_func * weights).nansum(dim=1)
            rewards[torch.isnan(rewards_per_func).all(dim=1)] = torch.nan
            grouped = rewards.view(-1, n).cpu()
            kept = select_groups(grouped, grouped.shape[0] // self.search_oversample)
            rows = (kept[:, None] * n + torch.arange(n)).flatten().tolist()
            total = len(prompts)
            self._replay = (
                tuple(_rows(part, rows, total) for part in generation),
                rewards_per_func[rows],
            )
            try:
                out = super()._generate_and_score_completions([inputs[i] for i in rows])
            finally:
                self._replay = None
            for name, value in selection_metrics(grouped, kept).items():
                self._metrics["train"][name].append(value)
            # search: every rollout generated; learning (log-prob passes here, the update in
            # `_prepare_inputs`): the kept ones; reward: every one scored (`timed_reward`)
            completion_lens = [len(ids) for ids in completion_ids]
            self.ledger.record_generation([len(ids) for ids in prompt_ids], completion_lens)
            self._record_log_prob_passes(out)
            self.rollouts_since_step += total
            self.completion_tokens += sum(completion_lens)
            return out

        def _record_log_prob_passes(self, out) -> None:
            """Old-policy and reference forwards TRL ran on the rollouts it trains on."""
            prompt_lens = _lens(out["prompt_mask"])
            completion_lens = _lens(out["completion_mask"])
            seq_lens = [p + c for p, c in zip(prompt_lens, completion_lens, strict=True)]
            logits_lens = _logits_lens(seq_lens, completion_lens)
            if "old_per_token_logps" in out:
                self.ledger.record_old_policy_forward(seq_lens, logits_lens)
            if "ref_per_token_logps" in out:
                self.ledger.record_reference_forward(seq_lens, logits_lens)

        def _prepare_inputs(self, generation_batch):
            # Called once per optimizer step with the slice the policy loss will see.
            inputs = super()._prepare_inputs(generation_batch)
            if self.model.training:
                completion_lens = _lens(inputs["completion_mask"])
                prompt_lens = _lens(inputs["prompt_mask"])
                seq_lens = [p + c for p, c in zip(prompt_lens, completion_lens, strict=True)]
                self.ledger.record_policy_update(seq_lens, _logits_lens(seq_lens, completion_lens))
            return inputs

    return LedgerGRPOTrainer


def timed_reward(fn: Callable, ledger: FlopLedger) -> Callable:
    """Every reward's wall time goes to the ledger; a model-based reward's forward passes too,
    from the tokens it scored (`fn.last_seq_lens`, see `isolab.rl.rewards`). Rule-based: 0 FLOPs."""

    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        ledger.record_reward_time(time.perf_counter() - t0)
        if getattr(fn, "reward_model_config", None) is not None:  # model-based: a PricedReward
            ledger.record_reward_model(cast("PricedReward", fn).last_seq_lens)
        return out

    wrapper.__name__ = getattr(fn, "__name__", "reward")
    return wrapper


#: isolab's part of a checkpoint (beside the trainer's model, optimizer, scheduler and RNG state).
STATE_FILE = "isolab_state.json"


class Suspended(BaseException):  # noqa: N818 - not an error: the caller suspended the run
    """Raised by a `Checkpointing.at_eval` hook whose caller suspends the run at the checkpoint
    it was just given (an adaptive sweep pauses it until its rung is judged, or stops its
    arm): `train` leaves the MLflow run open, for the caller to resume or end."""


@dataclass(frozen=True)
class Checkpointing:
    """A run that can be suspended at each evaluation and resumed (adaptive sweeps).

    Attributes:
        at_eval: `at_eval(step, checkpoint_dir, metrics)` after each evaluation but the last,
            once the trainer has saved its state at that step in `checkpoint_dir` (model,
            optimizer, scheduler, RNG, and isolab's `STATE_FILE`: the MLflow run, the ledger's
            totals, the evaluations so far). It may raise `Suspended`.
        resume_from: a checkpoint directory `at_eval` was given: the run carries on from it,
            in the same MLflow run.
    """

    at_eval: Callable[[int, Path, dict], None]
    resume_from: Path | None = None


def check_checkpointable(cfg: RunConfig) -> None:
    """A run suspended at its evaluations runs on one process with one update per batch: a
    suspension would lose TRL's generations buffered for the next updates."""
    if cfg.processes > 1 or cfg.num_iterations > 1:
        raise ValueError(
            f"processes = {cfg.processes}, num_iterations = {cfg.num_iterations}: a run "
            "suspended at its evaluations (an adaptive sweep) runs on one process with one "
            "update per batch; set processes: 1 and num_iterations: 1, or run the full grid "
            "(isolab sweep run)."
        )


def read_state(checkpoint: Path) -> dict[str, Any]:
    """isolab's state saved in a checkpoint directory (`STATE_FILE`)."""
    path = Path(checkpoint) / STATE_FILE
    if not path.exists():
        raise ValueError(
            f"{checkpoint}: no {STATE_FILE}, so not a checkpoint of an isolab run: resume from "
            "a directory that `Checkpointing.at_eval` was given."
        )
    return json.loads(path.read_text())


def make_callback(
    trainer_ref: dict,
    cfg: RunConfig,
    evaluator: Evaluator,
    logger: RunLogger,
    ledger: FlopLedger,
    max_new_tokens: int,
    results: dict,
    on_step: Callable[[int, dict], None] | None,
    checkpointing: Checkpointing | None = None,
    resumed: dict[str, Any] | None = None,
):
    """The run's `TrainerCallback`: evaluates the base model at step 0, closes the ledger's step
    after each optimizer step, evaluates when `evaluator.due`, and logs it all to MLflow.
    With `checkpointing`, the trainer saves its state after each evaluation but the last and
    `checkpointing.at_eval` is called with it; `resumed` (a checkpoint's `STATE_FILE`) restores
    the clock and skips the base evaluation, done before the run was suspended.

    `trainer_ref["trainer"]` is filled in once the trainer exists (it is built with this
    callback, so it cannot be passed in); `results` collects what `train` returns (`base_eval`,
    `last_eval`, `last_metrics`) and the cumulative sampling time. `on_step(step, metrics)`
    is the caller's progress hook (the command line's progress bar).
    """
    from transformers import TrainerCallback

    total_steps = cfg.M * cfg.num_iterations

    main = ranks.is_main()  # of a run's processes, the first evaluates (and logs)
    clock = _MfuClock(charged_reward="proxy-prm" in reward_parts(cfg.reward))
    saving: dict[str, Any] = {}  # the evaluation a checkpoint is being saved for

    class IsolabCallback(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kw):
            clock.start(logger)
            if resumed is not None:  # the base model was evaluated before the run was suspended
                clock.load_state_dict(resumed["clock"])
                clock.restart()
                return
            if not main:
                ranks.barrier()  # while the first process evaluates the base model
                clock.restart()
                return
            metrics = evaluator(model, 0, max_new_tokens)
            results["base_eval"] = metrics
            results["last_eval"] = metrics
            start = {ROLLOUTS: 0.0, FLOPS_TOTAL: 0.0, LR_SUM: 0.0, **_eval_flops(ledger, cfg)}
            logger.log_metrics({**metrics, **start}, step=0)
            logger.flush()
            ranks.barrier()
            clock.restart()  # evaluation is not training time

        def on_step_begin(self, args, state, control, optimizer=None, **kw):
            # Σlr: the learning rate this optimizer step applies, summed (kept in `results`,
            # which a checkpoint saves, so a resumed run continues the sum)
            if optimizer is not None:
                lr = float(optimizer.param_groups[0]["lr"])
                results["lr_sum"] = results.get("lr_sum", 0.0) + lr

        def on_step_end(self, args, state, control, model=None, **kw):
            if STOP.is_set():  # a stop request whose KeyboardInterrupt something swallowed
                raise KeyboardInterrupt
            trainer = trainer_ref["trainer"]
            rollouts, completion_tokens = trainer.rollouts_since_step, trainer.completion_tokens
            search_s, step_s = trainer.search_time_s, clock.lap()
            if ranks.world_size() > 1:  # each process saw its slice: the step is their sum
                ledger.merge_step(ranks.sum_ints, ranks.max_floats)
                rollouts, completion_tokens = ranks.sum_ints([rollouts, completion_tokens])
                # the step waits for the slowest process
                search_s, step_s = ranks.max_floats([search_s, step_s])
            trainer.rollouts_since_step = 0
            step = state.global_step
            metrics = ledger.end_step(rollouts)
            results["search_s"] = results.get("search_s", 0.0) + search_s
            trainer.search_time_s = 0.0
            metrics["time/search_s"] = results["search_s"]
            if results["search_s"] > 0:
                metrics["throughput/completion_tokens_per_s"] = (
                    completion_tokens / results["search_s"]
                )
            metrics.update(clock.mfu(metrics, step_s, search_s))
            cum_rollouts = int(metrics[ROLLOUTS])
            due = evaluator.due(step, cum_rollouts, step >= total_steps)  # same on every process
            if main and due:
                ev = evaluator(model, step, max_new_tokens)
                results["last_eval"] = ev
                metrics = {**metrics, **ev, **_eval_flops(ledger, cfg)}
                metrics[LR_SUM] = results.get("lr_sum", 0.0)
                logger.log_metrics(metrics, step=step)
                logger.flush()  # an evaluation point is a finished result: never lose it
                if checkpointing is not None and step < total_steps:
                    control.should_save = True  # `on_save` hands the checkpoint over
                    saving["metrics"] = metrics
            else:
                logger.log_metrics(metrics, step=step)
            results["last_metrics"] = metrics
            if on_step is not None:
                on_step(step, metrics)
            if due:  # the other processes wait for the first one's evaluation
                ranks.barrier()
            clock.restart()  # evaluation and logging are not training time

        def on_save(self, args, state, control, **kw):
            if checkpointing is None or "metrics" not in saving:
                return
            metrics = saving.pop("metrics")
            path = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            saved = {
                "run_id": logger.run_id,
                "step": state.global_step,
                "ledger": ledger.state_dict(),
                "evaluator": evaluator.state_dict(),
                "results": {k: v for k, v in results.items() if k != "last_metrics"},
                "clock": clock.state_dict(),
            }
            (path / STATE_FILE).write_text(json.dumps(saved))
            logger.flush()  # TRL's metrics of this step too: the checkpoint holds all before it
            checkpointing.at_eval(state.global_step, path, metrics)
            clock.restart()  # the hand-over is not training time

        def on_log(self, args, state, control, logs=None, **kw):
            # TRL's own metrics (reward, completion lengths, KL, …) beside isolab's; a value
            # that is not a finite number (text, NaN) is not a metric MLflow can plot: dropped
            numeric = {
                k: v
                for k, v in (logs or {}).items()
                if isinstance(v, (int, float)) and math.isfinite(v)
            }
            logger.log_metrics(numeric, step=state.global_step)

    return IsolabCallback()


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
            state["train_s"], state["reward_s"], state["ran_total"]
        )  # fmt: skip

    def lap(self) -> float:
        """Seconds since the last `restart`: the step just finished."""
        return time.perf_counter() - self.t

    def mfu(self, metrics: dict[str, float], step_s: float, search_s: float) -> dict[str, float]:
        """The step's MFU, its search and learning parts (learning's time: the step's, less
        search and reward, so TRL's own overhead counts against it), and the run's so far."""
        reward_s = metrics["time/reward_s"] - self.reward_s
        self.reward_s = metrics["time/reward_s"]
        self.train_s += step_s
        if not self.peak or step_s <= 0:
            return {}
        learning_s = step_s - search_s - reward_s
        charged = metrics["flops_step/reward"] if self.charged_reward else 0.0
        ran = metrics["flops_step/total"] - charged  # FLOPs that ran this step
        self.ran_total += ran
        # a measured rate is one the device reaches: it raises the peak (MFU ≤ 1)
        self.peak = raised_peak(self.peak, ran, step_s, MFU_STEP)
        if search_s > 0:
            self.peak = raised_peak(self.peak, metrics["flops_step/search"], search_s, MFU_SEARCH)
        if learning_s > 0:
            self.peak = raised_peak(
                self.peak, metrics["flops_step/learning"], learning_s, MFU_LEARNING
            )
        out = {
            MFU_STEP: ran / (step_s * self.peak),
            MFU_RUN: self.ran_total / (self.train_s * self.peak),
        }
        if search_s > 0:
            out[MFU_SEARCH] = metrics["flops_step/search"] / (search_s * self.peak)
        if learning_s > 0:
            out[MFU_LEARNING] = metrics["flops_step/learning"] / (learning_s * self.peak)
        return out


def _eval_flops(ledger: FlopLedger, cfg: RunConfig) -> dict[str, float]:
    """Cumulative evaluation FLOPs, and the evaluation judge's where the run has one: logged
    apart (`flops/eval`, `flops/judge`), never part of `flops/total`."""
    state = ledger.state_dict()
    out = {FLOPS_EVAL: float(state["eval"])}
    if cfg.eval_judge:
        out[FLOPS_JUDGE] = float(state["judge"])
    return out
