"""What isolab hooks into TRL's `GRPOTrainer`: it observes, and changes no part of the algorithm
but one opt-in, the per-prompt allocation of rollouts (`RunConfig.allocation`).

- `make_trainer_class`: a thin subclass that reports the token counts TRL computes (rollouts,
  old-policy and reference forwards, update batches) to the `FlopLedger`, and times sampling;
  with `search_oversample` k > 1 it also draws k·B_p problems per step, generates and scores
  them all, and hands TRL's own scoring the B_p groups `isolab.rl.dynamic_sampling` keeps
  (`dynamic`), or pilots them all and completes the B_p `isolab.rl.allocation` keeps
  (`early_stop`); under `variance` it splits the step's B rollouts unevenly among its B_p
  problems and recomputes the advantages over those groups;
- `timed_reward`: a reward function's wall time, and a reward model's forward passes, to the ledger;
- `Checkpointing`: how a caller suspends a run at its evaluations and resumes it.

The step callback that closes each ledger step, evaluates and logs is `isolab.rl.callback`'s;
`isolab.rl.train` puts them together for one run.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch

from isolab.compute.ledger import FlopLedger
from isolab.config import RunConfig, pilot_size
from isolab.rl import engines
from isolab.rl.allocation import (
    Beliefs,
    early_stop_keep,
    flat_group_probability,
    group_advantages,
    prompt_key,
    variance_split,
)
from isolab.rl.dynamic_sampling import select_groups, selection_metrics

if TYPE_CHECKING:
    from isolab.rl.rewards import PricedReward


def _lens(mask: torch.Tensor) -> list[int]:
    return mask.sum(dim=1).tolist()


def logits_lens(seq_lens: list[int], completion_lens: list[int]) -> list[int]:
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


def _joined(first, second, sizes: tuple[int, int]):
    """Two generations' parts, one after the other: per-rollout lists concatenated (recursing
    into dicts of them); anything else (None, a scalar) kept from the first."""
    if isinstance(first, list) and isinstance(second, list) and (len(first), len(second)) == sizes:
        return first + second
    if isinstance(first, dict) and isinstance(second, dict):
        return {k: _joined(first[k], second.get(k), sizes) for k in first}
    return first


#: The file beside a checkpoint that holds the allocators' per-problem estimates (`Beliefs`).
BELIEFS_FILE = "isolab_beliefs.json"


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
        allocation: str = "uniform"  # `RunConfig.allocation`, set before `train()`
        beliefs: Beliefs | None = None  # per-problem success estimates (early_stop, variance)
        _last_rewards: torch.Tensor | None = None  # TRL's rewards_per_func of the last scoring
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
            out = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            self._last_rewards = out
            return out

        def _generated_and_scored(self, rows):
            """TRL's generation of `rows` (dataset rows, one per rollout) and its reward
            functions' scores of them (`rewards_per_func`), charged as TRL charges them."""
            prompts = [x["prompt"] for x in rows]
            generation = self._generate(prompts)
            return generation, self._calculate_rewards(rows, prompts, generation[3], generation[1])

        def _weighted(self, rewards_per_func: torch.Tensor) -> torch.Tensor:
            """TRL's weighted sum of the reward functions; NaN where none could score."""
            weights = self.reward_weights.to(rewards_per_func.device).unsqueeze(0)
            rewards = (rewards_per_func * weights).nansum(dim=1)
            rewards[torch.isnan(rewards_per_func).all(dim=1)] = torch.nan
            return rewards.cpu()

        def _observe(self, inputs, rewards: torch.Tensor) -> None:
            """Each rollout's reward into its problem's estimate (`Beliefs`)."""
            if self.beliefs is not None:
                for x, r in zip(inputs, rewards.tolist(), strict=True):
                    self.beliefs.update(prompt_key(x["prompt"]), [r])

        def _generate_and_score_completions(self, inputs):
            training = self.model.training
            if training and self.allocation == "early_stop":
                return self._early_stopped(inputs)
            if training and self.search_oversample > 1:
                return self._oversampled(inputs)
            sizes = None
            if training and self.allocation == "variance":
                inputs, sizes = self._reallocated(inputs)
            out = super()._generate_and_score_completions(inputs)
            prompt_lens = _lens(out["prompt_mask"])
            completion_lens = _lens(out["completion_mask"])
            self.ledger.record_generation(prompt_lens, completion_lens)
            self._record_log_prob_passes(out)
            self.rollouts_since_step += len(prompt_lens)
            self.completion_tokens += sum(completion_lens)
            if sizes is not None:  # TRL grouped the rows n by n: group them as allocated
                assert self._last_rewards is not None  # TRL scored the rows just now
                rewards = self._weighted(self._last_rewards)
                self._observe(inputs, rewards)
                advantages = group_advantages(rewards, sizes, self.scale_rewards)
                out["advantages"] = advantages.to(out["advantages"].device, out["advantages"].dtype)
                self._metrics["train"]["search/group_size_max"].append(float(max(sizes)))
                self._metrics["train"]["search/group_size_min"].append(float(min(sizes)))
            return out

        def _reallocated(self, inputs):
            """The step's B_p problems, each repeated as `variance_split` allots the B rows."""
            n = self.num_generations
            if self.multi_objective_aggregation != "sum_then_normalize" or self.num_iterations > 1:
                raise ValueError(
                    "allocation = variance recomputes GRPO's advantages over unequal groups: it "
                    "needs TRL's sum_then_normalize and num_iterations: 1."
                )
            firsts = inputs[::n]
            assert self.beliefs is not None
            p = [self.beliefs.mean(prompt_key(x["prompt"])) for x in firsts]
            sizes = variance_split(p, len(inputs))
            return [dict(x) for x, m in zip(firsts, sizes, strict=True) for _ in range(m)], sizes

        def _early_stopped(self, inputs):
            """Pilot each of the k·B_p candidates, complete the B_p least likely to be flat,
            let TRL score and train on those; the other pilots are discarded."""
            n, c = self.num_generations, pilot_size(self.num_generations)
            groups = len(inputs) // n
            keep = groups // self.search_oversample
            pilot_in = [inputs[g * n + j] for g in range(groups) for j in range(c)]
            pilot, pilot_pf = self._generated_and_scored(pilot_in)
            pilot_r = self._weighted(pilot_pf).view(groups, c)
            assert self.beliefs is not None
            flat = [
                flat_group_probability(
                    pilot_r[g].tolist(), *self.beliefs.ab(prompt_key(pilot_in[g * c]["prompt"])), n
                )
                for g in range(groups)
            ]
            self._observe(pilot_in, pilot_r.flatten())
            kept = early_stop_keep(flat, keep)
            rest_in = [inputs[g * n + j] for g in kept for j in range(c, n)]
            rest, rest_pf = self._generated_and_scored(rest_in)
            self._observe(rest_in, self._weighted(rest_pf))
            # each kept group: its pilot rows, then its rest, in the joined generation's rows
            sizes = (len(pilot_in), len(rest_in))
            rest_at = [sizes[0] + k * (n - c) for k in range(len(kept))]  # each kept group's rest
            rows = [
                i
                for g, at in zip(kept, rest_at, strict=True)
                for i in [*range(g * c, g * c + c), *range(at, at + n - c)]
            ]
            generation = tuple(_joined(a, b, sizes) for a, b in zip(pilot, rest, strict=True))
            total = sum(sizes)
            self._replay = (
                tuple(_rows(part, rows, total) for part in generation),
                torch.cat([pilot_pf, rest_pf])[rows],
            )
            try:
                out = super()._generate_and_score_completions(
                    [inputs[g * n + j] for g in kept for j in range(n)]
                )
            finally:
                self._replay = None
            self._metrics["train"]["search/kept_frac"].append(keep / groups)
            self._metrics["train"]["search/pilot_flat_frac"].append(
                sum(1 for f in flat if f > 0) / groups
            )
            dropped = sorted(set(range(sizes[0])) - set(rows))  # the stopped groups' pilots
            prompt_lens = [len(ids) for ids in generation[0]]
            completion_lens = [len(ids) for ids in generation[1]]
            self.ledger.record_generation(prompt_lens, completion_lens)
            self.ledger.record_discarded(
                [prompt_lens[i] for i in dropped], [completion_lens[i] for i in dropped]
            )
            self._record_log_prob_passes(out)
            self.rollouts_since_step += total
            self.completion_tokens += sum(completion_lens)
            return out

        def _save_checkpoint(self, model, trial):
            super()._save_checkpoint(model, trial)
            if self.beliefs is not None:
                path = os.path.join(self.args.output_dir, f"checkpoint-{self.state.global_step}")
                with open(os.path.join(path, BELIEFS_FILE), "w") as f:
                    json.dump(self.beliefs.state_dict(), f)

        def train(self, resume_from_checkpoint=None, *args, **kwargs):
            if self.beliefs is not None and resume_from_checkpoint:
                saved = Path(resume_from_checkpoint) / BELIEFS_FILE
                if saved.exists():
                    self.beliefs.load_state_dict(json.loads(saved.read_text()))
            return super().train(resume_from_checkpoint, *args, **kwargs)

        def _oversampled(self, inputs):
            """Generate and score k·B_p groups, let TRL score and train on the B_p kept."""
            n = self.num_generations
            generation, rewards_per_func = self._generated_and_scored(inputs)
            prompt_ids, completion_ids = generation[0], generation[1]
            grouped = self._weighted(rewards_per_func).view(-1, n)
            kept = select_groups(grouped, grouped.shape[0] // self.search_oversample)
            rows = (kept[:, None] * n + torch.arange(n)).flatten().tolist()
            total = len(inputs)
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
            prompt_lens = [len(ids) for ids in prompt_ids]
            self.ledger.record_generation(prompt_lens, completion_lens)
            dropped = sorted(set(range(total)) - set(rows))
            self.ledger.record_discarded(
                [prompt_lens[i] for i in dropped], [completion_lens[i] for i in dropped]
            )
            self._record_log_prob_passes(out)
            self.rollouts_since_step += total
            self.completion_tokens += sum(completion_lens)
            return out

        def _record_log_prob_passes(self, out) -> None:
            """Old-policy and reference forwards TRL ran on the rollouts it trains on."""
            prompt_lens = _lens(out["prompt_mask"])
            completion_lens = _lens(out["completion_mask"])
            seq_lens = [p + c for p, c in zip(prompt_lens, completion_lens, strict=True)]
            heads = logits_lens(seq_lens, completion_lens)
            if "old_per_token_logps" in out:
                self.ledger.record_old_policy_forward(seq_lens, heads)
            if "ref_per_token_logps" in out:
                self.ledger.record_reference_forward(seq_lens, heads)

        def _prepare_inputs(self, generation_batch):
            # Called once per optimizer step with the slice the policy loss will see.
            inputs = super()._prepare_inputs(generation_batch)
            if self.model.training:
                completion_lens = _lens(inputs["completion_mask"])
                prompt_lens = _lens(inputs["prompt_mask"])
                seq_lens = [p + c for p, c in zip(prompt_lens, completion_lens, strict=True)]
                self.ledger.record_policy_update(seq_lens, logits_lens(seq_lens, completion_lens))
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
