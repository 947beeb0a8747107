"""The FLOP ledger: per-step and cumulative search / learning / reward compute, and ρ.

``C_total = C_search + C_learning + C_reward`` and the update fraction
``ρ = C_learning / C_total`` (Wilhelm & Kao, "Where Should RL Post-Training Compute Go?",
arXiv 2607.13389). The training callback records each step's calls with their exact
per-sequence token counts; ``end_step`` returns the step's metrics under isolab's names:

- ``flops_step/{search,learning,reward,total}``: this step;
- ``flops/{search,learning,reward,total}``: cumulative model FLOPs; ``flops/eval`` and the
  evaluation judge's ``flops/judge`` apart;
- ``flops_hw/{learning,total}``: cumulative hardware FLOPs (gradient-checkpointing recompute);
- ``compute/rollouts``, ``compute/tokens`` (prompt + generated tokens of the rollouts),
  ``compute/rho`` (cumulative), ``compute/rho_step``; ``time/reward_s`` (cumulative);
- ``flops/search_discarded``, ``compute/rollouts_discarded`` and ``compute/discarded_share``:
  the part of search spent on rollouts no update used (`RunConfig.allocation`), cumulative.

Search is the generation of rollouts; learning is every policy update pass (forward +
backward) plus the reference-model forward (β > 0) and the old-policy forward (reused
rollouts); reward is the reward model's forward. Under an allocation that discards rollouts
(``RunConfig.allocation``: dynamic sampling, early stopping) search, reward and
``compute/rollouts`` count every rollout generated and scored, learning only those trained on,
and ``flops/search_discarded`` the discarded ones' share of search. A rule-based reward costs 0 FLOPs: only its
wall time is logged. FLOPs follow ``isolab.compute.flops`` (matmuls only, verified against
``torch.utils.flop_counter.FlopCounterMode``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields
from typing import Any

from isolab.compute.flops import forward_flops, generation_flops, reward_model_flops, training_flops
from isolab.vocab import (
    DISCARDED_SHARE,
    FLOPS_EVAL,
    FLOPS_HW_LEARNING,
    FLOPS_HW_TOTAL,
    FLOPS_LEARNING,
    FLOPS_PARTS,
    FLOPS_PREFIX,
    FLOPS_REWARD,
    FLOPS_SEARCH,
    FLOPS_SEARCH_DISCARDED,
    FLOPS_STEP_LEARNING,
    FLOPS_STEP_PREFIX,
    FLOPS_STEP_REWARD,
    FLOPS_STEP_SEARCH,
    FLOPS_STEP_TOTAL,
    FLOPS_TOTAL,
    RHO,
    RHO_STEP,
    ROLLOUTS,
    ROLLOUTS_DISCARDED,
    TIME_REWARD_S,
    TOKENS,
)


@dataclass
class _Tally:
    """FLOPs (and counts) of one accounting period: one step, or the whole run."""

    search: int = 0
    search_discarded: int = 0  # of `search`: rollouts generated but not trained on
    learning: int = 0
    learning_hw: int = 0
    reward: int = 0
    eval: int = 0
    judge: int = 0
    rollouts: int = 0
    rollouts_discarded: int = 0
    tokens: int = 0
    reward_s: float = 0.0

    def add(self, other: _Tally) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


def _rho(learning: float, total: float) -> float:
    """Update fraction; 0 before anything was computed (avoids NaN in the first logged point)."""
    return learning / total if total > 0 else 0.0


class FlopLedger:
    """Accumulates one run's compute, step by step, from exact per-sequence token counts.

    Args:
        model_config: the policy's ``PretrainedConfig``.
        lora: the policy's LoRA adapters (``LoraSpec`` or ``peft.LoraConfig``); ``None`` for full
            fine-tuning. Under LoRA the reference is the base model with adapters disabled.
        reward_model_config: the reward model's ``PretrainedConfig``; ``None`` for rule-based rewards.
        gradient_checkpointing: the policy update recomputes block forwards in backward; counted
            in ``flops_hw/*`` only.
        lora_merged_for_generation: rollouts and evaluation are generated on merged weights, so
            the adapters cost nothing there (TRL merges LoRA into the weights it syncs to vLLM;
            HF ``generate`` on a PEFT model runs them unmerged: leave False).
    """

    def __init__(
        self,
        model_config: Any,
        *,
        lora: Any | None = None,
        reward_model_config: Any | None = None,
        gradient_checkpointing: bool = False,
        lora_merged_for_generation: bool = False,
    ) -> None:
        self.model_config = model_config
        self.lora = lora
        self._generation_lora = None if lora_merged_for_generation else lora
        self.reward_model_config = reward_model_config
        self.gradient_checkpointing = gradient_checkpointing
        self._step = _Tally()
        self._run = _Tally()

    # ---- search ---------------------------------------------------------------------------
    def record_generation(self, prompt_lens: Iterable[int], completion_lens: Iterable[int]) -> None:
        """Rollout generation: prefill + KV-cached decode of each (prompt, completion) pair."""
        prompt_lens, completion_lens = list(prompt_lens), list(completion_lens)
        self._step.search += generation_flops(
            self.model_config, prompt_lens, completion_lens, self._generation_lora
        )
        self._step.tokens += sum(int(p) for p in prompt_lens) + sum(int(c) for c in completion_lens)

    def record_discarded(self, prompt_lens: Iterable[int], completion_lens: Iterable[int]) -> None:
        """Of the rollouts `record_generation` charged, those no update will use (a group
        dynamic sampling drops, an early-stopped pilot): their generation FLOPs again, into
        ``flops/search_discarded`` (a part of search, not an addition to it)."""
        prompt_lens, completion_lens = list(prompt_lens), list(completion_lens)
        self._step.search_discarded += generation_flops(
            self.model_config, prompt_lens, completion_lens, self._generation_lora
        )
        self._step.rollouts_discarded += len(completion_lens)

    # ---- learning -------------------------------------------------------------------------
    def record_policy_update(
        self, seq_lens: Iterable[int], logits_lens: Iterable[int] | None = None, passes: int = 1
    ) -> None:
        """``passes`` policy forward + backward passes over the sequences (one per update pass).

        ``logits_lens``: LM-head positions per sequence — the completion lengths on CUDA (TRL's
        fused head scores only them), ``padded row length − 1`` on CPU; see ``isolab.compute.flops``.
        """
        if passes < 1:
            raise ValueError(f"passes = {passes}: record at least one update pass.")
        seq_lens = list(seq_lens)
        logits_lens = None if logits_lens is None else list(logits_lens)
        model = training_flops(self.model_config, seq_lens, logits_lens, self.lora)
        hw = training_flops(
            self.model_config,
            seq_lens,
            logits_lens,
            self.lora,
            gradient_checkpointing=self.gradient_checkpointing,
        )
        self._step.learning += passes * model
        self._step.learning_hw += passes * hw

    def record_reference_forward(
        self, seq_lens: Iterable[int], logits_lens: Iterable[int] | None = None
    ) -> None:
        """Reference-model log-probs (β > 0): a no-grad forward of the base weights, no adapters."""
        flops = forward_flops(self.model_config, seq_lens, logits_lens)
        self._step.learning += flops
        self._step.learning_hw += flops

    def record_old_policy_forward(
        self, seq_lens: Iterable[int], logits_lens: Iterable[int] | None = None
    ) -> None:
        """Old-policy log-probs (rollouts reused over several passes): a no-grad policy forward."""
        flops = forward_flops(self.model_config, seq_lens, logits_lens, self.lora)
        self._step.learning += flops
        self._step.learning_hw += flops

    # ---- reward ---------------------------------------------------------------------------
    def record_reward_model(self, seq_lens: Iterable[int]) -> None:
        """Reward-model forward over the scored tokens of each sequence."""
        if self.reward_model_config is None:
            raise ValueError(
                "record_reward_model needs a reward model: pass reward_model_config to FlopLedger "
                "(rule-based rewards cost 0 FLOPs; log their time with record_reward_time)."
            )
        self._step.reward += reward_model_flops(self.reward_model_config, seq_lens)

    def record_reward_time(self, seconds: float) -> None:
        """Wall time spent computing rewards (any reward system, rule-based included)."""
        self._step.reward_s += float(seconds)

    # ---- evaluation (kept apart from the total) --------------------------------------------
    def record_eval(self, prompt_lens: Iterable[int], completion_lens: Iterable[int]) -> None:
        """Validation generation: counted in ``flops/eval`` only, never in ``flops/total``."""
        self._run.eval += generation_flops(
            self.model_config, prompt_lens, completion_lens, self._generation_lora
        )

    def record_judge(self, judge_config: Any, seq_lens: Iterable[int]) -> None:
        """The evaluation judge's forward (`RunConfig.eval_judge`) over the scored tokens of each
        completion: counted in ``flops/judge`` only, never in ``flops/total``."""
        self._run.judge += reward_model_flops(judge_config, seq_lens)

    # ---- closing a step -------------------------------------------------------------------
    def merge_step(
        self,
        sum_ints: Callable[[list[int]], list[int]],
        max_floats: Callable[[list[float]], list[float]],
    ) -> None:
        """Make the open step the whole run's when data-parallel processes each recorded only
        their slice (`RunConfig.processes`): FLOPs and tokens summed over processes
        (`sum_ints`), the reward's wall time their maximum (`max_floats`). Every process calls
        it at the same point of each step (it is a collective)."""
        step = self._step
        counts = [f.name for f in fields(step) if isinstance(getattr(step, f.name), int)]
        for name, value in zip(counts, sum_ints([getattr(step, n) for n in counts]), strict=True):
            setattr(step, name, int(value))
        (step.reward_s,) = max_floats([step.reward_s])

    def end_step(self, rollouts: int) -> dict[str, float]:
        """Close the step that generated ``rollouts`` completions and return its metrics."""
        if rollouts < 0:
            raise ValueError(f"rollouts = {rollouts}: give the number of completions of this step.")
        step = self._step
        step.rollouts = int(rollouts)
        self._run.add(step)
        self._step = _Tally()
        run = self._run
        step_total = step.search + step.learning + step.reward
        run_total = run.search + run.learning + run.reward
        return {
            FLOPS_STEP_SEARCH: float(step.search),
            FLOPS_STEP_LEARNING: float(step.learning),
            FLOPS_STEP_REWARD: float(step.reward),
            FLOPS_STEP_TOTAL: float(step_total),
            FLOPS_SEARCH: float(run.search),
            FLOPS_SEARCH_DISCARDED: float(run.search_discarded),
            FLOPS_LEARNING: float(run.learning),
            FLOPS_REWARD: float(run.reward),
            FLOPS_TOTAL: float(run_total),
            FLOPS_EVAL: float(run.eval),
            FLOPS_HW_LEARNING: float(run.learning_hw),
            FLOPS_HW_TOTAL: float(run.search + run.learning_hw + run.reward),
            ROLLOUTS: float(run.rollouts),
            ROLLOUTS_DISCARDED: float(run.rollouts_discarded),
            DISCARDED_SHARE: _rho(run.search_discarded, run_total),
            TOKENS: float(run.tokens),
            RHO: _rho(run.learning, run_total),
            RHO_STEP: _rho(step.learning, step_total),
            TIME_REWARD_S: run.reward_s,
        }

    # ---- resuming -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Cumulative totals, to save with a checkpoint (the open step is not included): the
        `_Tally` fields, counts as ints and ``reward_s`` as a float."""
        return asdict(self._run)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore cumulative totals saved by ``state_dict``."""
        self._run = _Tally(**state)


def plan_run(
    model_config: Any,
    *,
    n: int,
    B_p: int,
    M: int,
    prompt_len: float,
    completion_len: float,
    beta: float,
    num_iterations: int,
    lora: Any | None = None,
    reward_model_config: Any | None = None,
    gradient_checkpointing: bool = False,
    logits_len: int | None = None,
    old_policy_forward: bool | None = None,
    search_oversample: int = 1,
    reward_len: float | None = None,
    rollouts_per_step: int | None = None,
) -> dict[str, float]:
    """Planned FLOPs of a GRPO run from expected lengths, under the ledger's names.

    One step generates ``B = B_p · n`` rollouts of ``prompt_len + completion_len`` tokens, scores
    them with the reward model (if any), computes old-policy log-probs when the rollouts are
    reused (``num_iterations > 1``, TRL's rule with one gradient-accumulation step),
    reference log-probs when ``beta > 0``, and runs ``num_iterations`` update passes; the run has
    ``M`` steps (IsoCompute's ``C = B_p · n · M`` rollouts, arXiv 2603.12151).

    With dynamic sampling (``search_oversample`` k > 1) a step generates and scores
    ``k · B`` rollouts and trains on ``B`` of them: search and reward FLOPs and the rollouts
    ``C = k · B_p · n · M`` grow k-fold, learning FLOPs do not.

    Args:
        logits_len: LM-head positions per sequence in log-prob passes; default
            ``completion_len`` (TRL's fused head on CUDA).
        rollouts_per_step: rollouts generated per step, of which ``B`` are trained on and the
            rest discarded (`RunConfig.rollouts_per_step`); default ``search_oversample · B``.
        reward_len: tokens the reward model scores per rollout; default ``prompt_len +
            completion_len`` (a hub ORM or PRM reads its own transcript of the rollout:
            `isolab.planning` measures it).
        old_policy_forward: whether TRL computes old-policy log-probs; default
            ``num_iterations > 1``. Generation through vLLM always does (TRL's importance
            sampling correction of the vLLM–policy mismatch).

    Returns:
        ``flops_step/*`` (one step), ``flops/*`` and ``flops_hw/*`` (the run), ``compute/rho``,
        ``compute/rollouts``, ``compute/tokens``, ``steps`` and ``rollouts_per_step`` (generated).
    """
    for name, value in (
        ("n", n),
        ("B_p", B_p),
        ("M", M),
        ("num_iterations", num_iterations),
        ("search_oversample", search_oversample),
    ):
        if value < 1:
            raise ValueError(f"{name} = {value}: must be ≥ 1.")
    if completion_len < 1 or prompt_len < 0:
        raise ValueError(
            f"prompt_len = {prompt_len}, completion_len = {completion_len}: need prompt_len ≥ 0 and completion_len ≥ 1."
        )
    if beta < 0:
        raise ValueError(f"beta = {beta}: the KL coefficient is ≥ 0.")
    B = B_p * n
    generated = search_oversample * B if rollouts_per_step is None else rollouts_per_step
    if generated < B:
        raise ValueError(
            f"rollouts_per_step = {generated}: a step trains on B = B_p·n = {B} rollouts, so it "
            "generates at least that many."
        )
    # expected lengths may be fractional (`isolab.planning`): each one is truncated, as the
    # FLOP functions truncate every length they are given (a sequence: prompt + completion)
    seq = [int(prompt_len + completion_len)] * B
    logits = [int(completion_len) if logits_len is None else logits_len] * B
    ledger = FlopLedger(
        model_config,
        lora=lora,
        reward_model_config=reward_model_config,
        gradient_checkpointing=gradient_checkpointing,
    )
    ledger.record_generation([int(prompt_len)] * generated, [int(completion_len)] * generated)
    ledger.record_discarded(
        [int(prompt_len)] * (generated - B), [int(completion_len)] * (generated - B)
    )
    if reward_model_config is not None:
        scored = seq[0] if reward_len is None else int(reward_len)
        ledger.record_reward_model([scored] * generated)
    if num_iterations > 1 if old_policy_forward is None else old_policy_forward:
        ledger.record_old_policy_forward(seq, logits)
    if beta > 0:
        ledger.record_reference_forward(seq, logits)
    ledger.record_policy_update(seq, logits, passes=num_iterations)
    step = ledger.end_step(rollouts=generated)
    plan = {k: v for k, v in step.items() if k.startswith(FLOPS_STEP_PREFIX)}
    for part in FLOPS_PARTS:
        plan[f"{FLOPS_PREFIX}{part}"] = M * step[f"{FLOPS_STEP_PREFIX}{part}"]
    plan[FLOPS_HW_LEARNING] = M * step[FLOPS_HW_LEARNING]
    plan[FLOPS_HW_TOTAL] = M * step[FLOPS_HW_TOTAL]
    plan[RHO] = step[RHO_STEP]
    plan[ROLLOUTS] = float(generated * M)
    plan[FLOPS_SEARCH_DISCARDED] = M * step[FLOPS_SEARCH_DISCARDED]
    plan[ROLLOUTS_DISCARDED] = float((generated - B) * M)
    plan[DISCARDED_SHARE] = step[DISCARDED_SHARE]
    plan[TOKENS] = M * step[TOKENS]
    plan["steps"] = float(M)
    plan["rollouts_per_step"] = float(generated)
    return plan
