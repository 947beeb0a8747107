"""What isolab hooks into TRL's `GRPOTrainer`: it observes, and changes no part of the algorithm
but one opt-in, dynamic sampling (`RunConfig.search_oversample`).

- `make_trainer_class`: a thin subclass that reports the token counts TRL computes (rollouts,
  old-policy and reference forwards, update batches) to the `FlopLedger`, and times sampling;
  with `search_oversample` k > 1 it also draws k·B_p problems per step, generates and scores
  them all, and hands TRL's own scoring the B_p groups `isolab.rl.dynamic_sampling` keeps;
- `timed_reward`: a reward function's wall time, and a reward model's forward passes, to the ledger;
- `Checkpointing`: how a caller suspends a run at its evaluations and resumes it.

The step callback that closes each ledger step, evaluates and logs is `isolab.rl.callback`'s;
`isolab.rl.train` puts them together for one run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch

from isolab.compute.ledger import FlopLedger
from isolab.config import RunConfig
from isolab.rl import engines
from isolab.rl.dynamic_sampling import select_groups, selection_metrics

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


class Suspended(BaseException):  # not an error: the caller suspended the run
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
