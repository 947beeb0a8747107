"""One GRPO run: `RunConfig` → TRL `GRPOTrainer`, with the FLOP ledger, evaluation and MLflow.

TRL does the RL. isolab maps the config onto `GRPOConfig` (`num_generations = n`, a generation
batch of `B = B_p·n` completions per optimizer step, `max_steps = M·num_iterations`), applies the
healthy recipe, and adds one callback that evaluates at the chosen steps and writes every metric
to MLflow. A thin trainer subclass only *observes* what TRL computes (token counts of rollouts
and update batches) to feed the ledger; it changes no part of the algorithm.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from isolab import models
from isolab.compute.ledger import FlopLedger
from isolab.config import RunConfig
from isolab.models.reward_models import reward_model_config_for
from isolab.rl import difficulty, engines, vllm_cpu
from isolab.rl.evaluate import Evaluator
from isolab.rl.plan import LORA_TARGETS, lora_spec
from isolab.rl.rewards import get_reward
from isolab.stop import STOP
from isolab.tasks import Task
from isolab.tasks.base import as_text
from isolab.tracking import BASE_DIGEST_TAG, RunLogger
from isolab.vocab import FLOPS_EVAL, FLOPS_TOTAL, ROLLOUTS

log = logging.getLogger(__name__)

@dataclass
class RunResult:
    """What a finished run returns (everything is also in MLflow)."""

    run_id: str
    run_key: str
    status: str
    wall_time_s: float
    base_eval: dict[str, float] = field(default_factory=dict)
    final_eval: dict[str, float] = field(default_factory=dict)
    final_metrics: dict[str, float] = field(default_factory=dict)


def grpo_args(
    cfg: RunConfig,
    output_dir: str,
    max_completion_tokens: int,
    max_prompt_tokens: int = 32,
    max_positions: int | None = None,
):
    """The `GRPOConfig` of a run: the mapping from isolab's names to TRL's. vLLM's context is
    the longest prompt plus the completion cap, within the model's positions. TRL loads the
    reference model and vLLM its copy of the policy itself, trusting the model's own code as
    the run config says (`trust_remote_code`)."""
    from trl import GRPOConfig

    cuda = torch.cuda.is_available()
    context = max_prompt_tokens + max_completion_tokens
    generation = (
        engines.vllm_grpo_args(cfg, min(context, max_positions or context))
        if engines.engine(cfg) == "vllm"
        else {"use_vllm": False}
    )
    return GRPOConfig(
        output_dir=output_dir,
        # One optimizer step consumes one generation batch of B = B_p·n completions.
        per_device_train_batch_size=cfg.B,
        gradient_accumulation_steps=1,
        num_generations=cfg.n,
        num_iterations=cfg.num_iterations,
        max_steps=cfg.M * cfg.num_iterations,
        max_completion_length=max_completion_tokens,
        temperature=cfg.temperature,
        learning_rate=cfg.lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        gradient_checkpointing=cfg.gradient_checkpointing,
        beta=cfg.resolved_beta,
        entropy_coef=cfg.resolved_entropy_coef,
        seed=cfg.seed,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        use_cpu=not cuda,
        bf16=cuda,
        **generation,
        dataloader_num_workers=0,
        log_completions=False,
        trust_remote_code=cfg.trust_remote_code,
        **cfg.extra.get("grpo", {}),
    )


def max_prompt_tokens(task: Task, problems, tokenizer) -> int:
    """Longest prompt of the training problems in tokens (vLLM sizes its context by it)."""
    texts = [as_text(task.prompt(p), tokenizer) for p in problems]
    return max((len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts), default=1)


def _lens(mask: torch.Tensor) -> list[int]:
    return mask.sum(dim=1).tolist()


def _logits_lens(seq_lens: list[int], completion_lens: list[int]) -> list[int]:
    """Positions TRL's fused log-prob head projects: completion positions on CUDA; on CPU every
    position of the row but the last (TRL 1.16). Padding is not counted (model FLOPs)."""
    if torch.cuda.is_available():
        return completion_lens
    return [s - 1 for s in seq_lens]


def make_trainer_class(with_vllm: bool = False):
    """`GRPOTrainer` subclass that reports token counts to a `FlopLedger` (import-time lazy;
    TRL's vLLM half is imported only `with_vllm`, see `engines.grpo_trainer_class`)."""
    GRPOTrainer = engines.grpo_trainer_class(with_vllm)

    class LedgerGRPOTrainer(GRPOTrainer):
        ledger: FlopLedger
        rollouts_since_step: int = 0
        search_time_s: float = 0.0  # wall time inside TRL's `_generate` (HF generate or vLLM)
        completion_tokens: int = 0

        def _generate(self, prompts):
            t0 = time.perf_counter()
            out = super()._generate(prompts)
            self.search_time_s += time.perf_counter() - t0
            return out

        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            prompt_lens = _lens(out["prompt_mask"])
            completion_lens = _lens(out["completion_mask"])
            seq_lens = [p + c for p, c in zip(prompt_lens, completion_lens, strict=True)]
            logits_lens = _logits_lens(seq_lens, completion_lens)
            self.ledger.record_generation(prompt_lens, completion_lens)
            if "old_per_token_logps" in out:
                self.ledger.record_old_policy_forward(seq_lens, logits_lens)
            if "ref_per_token_logps" in out:
                self.ledger.record_reference_forward(seq_lens, logits_lens)
            self.rollouts_since_step += len(prompt_lens)
            self.completion_tokens += sum(completion_lens)
            return out

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
        if getattr(fn, "reward_model_config", None) is not None:
            ledger.record_reward_model(fn.last_seq_lens)
        return out

    wrapper.__name__ = getattr(fn, "__name__", "reward")
    return wrapper


def make_callback(
    trainer_ref: dict,
    cfg: RunConfig,
    evaluator: Evaluator,
    logger: RunLogger,
    ledger: FlopLedger,
    max_new_tokens: int,
    state: dict,
    on_step: Callable[[int, dict], None] | None,
):
    from transformers import TrainerCallback

    total_steps = cfg.M * cfg.num_iterations

    class IsolabCallback(TrainerCallback):
        def on_train_begin(self, args, st, control, model=None, **kw):
            metrics = evaluator(model, 0, max_new_tokens)
            state["base_eval"] = metrics
            state["last_eval"] = metrics
            start = {ROLLOUTS: 0.0, FLOPS_TOTAL: 0.0, FLOPS_EVAL: _eval_flops(ledger)}
            logger.log_metrics({**metrics, **start}, step=0)
            logger.flush()

        def on_step_end(self, args, st, control, model=None, **kw):
            if STOP.is_set():  # a stop request whose KeyboardInterrupt something swallowed
                raise KeyboardInterrupt
            trainer = trainer_ref["trainer"]
            rollouts = trainer.rollouts_since_step
            trainer.rollouts_since_step = 0
            step = st.global_step
            metrics = ledger.end_step(rollouts)
            state["search_s"] = state.get("search_s", 0.0) + trainer.search_time_s
            trainer.search_time_s = 0.0
            metrics["time/search_s"] = state["search_s"]
            if state["search_s"] > 0:
                metrics["throughput/completion_tokens_per_s"] = (
                    trainer.completion_tokens / state["search_s"]
                )
            cum_rollouts = int(metrics[ROLLOUTS])
            if evaluator.due(step, cum_rollouts, step >= total_steps):
                ev = evaluator(model, step, max_new_tokens)
                state["last_eval"] = ev
                metrics = {**metrics, **ev, FLOPS_EVAL: _eval_flops(ledger)}
                logger.log_metrics(metrics, step=step)
                logger.flush()  # an evaluation point is a finished result: never lose it
            else:
                logger.log_metrics(metrics, step=step)
            state["last_metrics"] = metrics
            if on_step is not None:
                on_step(step, metrics)

        def on_log(self, args, st, control, logs=None, **kw):
            numeric = {
                k: v
                for k, v in (logs or {}).items()
                if isinstance(v, (int, float)) and math.isfinite(v)
            }
            logger.log_metrics(numeric, step=st.global_step)

    return IsolabCallback()


def _eval_flops(ledger: FlopLedger) -> float:
    return float(ledger.state_dict()["eval"])


def prepare(cfg: RunConfig):
    """Model, tokenizer, task, splits: everything a run needs before it can be logged.

    A model that ships its own code loads only with `cfg.trust_remote_code`; a chat task needs
    a model with a chat template. Both are refused here, before the run exists."""
    model_name = cfg.model
    trust = cfg.trust_remote_code
    task = difficulty.task_for(model_name, cfg.task)
    if cfg.split == "all":
        train_problems, val_problems = difficulty.unlabelled(
            cfg.task, cfg.pool_size, cfg.eval_problems, data_dir=cfg.data_dir
        )
    else:
        splits = difficulty.load_or_label(
            model_name, cfg.task, cfg.pool_size, data_dir=cfg.data_dir, trust_remote_code=trust
        )
        train_problems = splits.train(cfg.split)
        val_problems = splits.val(cfg.split)
    val_problems = val_problems[: cfg.eval_problems]
    if cfg.train_limit is not None:
        train_problems = train_problems[: cfg.train_limit]
    if len(train_problems) < cfg.B_p:
        raise ValueError(
            f"split {cfg.split!r} of {model_name} has {len(train_problems)} training problems but "
            f"B_p = {cfg.B_p} problems per step: lower B_p or raise pool_size (now {cfg.pool_size})."
        )
    if not val_problems:
        raise ValueError(
            f"split {cfg.split!r} has no validation problems: raise pool_size (now {cfg.pool_size})."
        )
    model, tok = models.load(model_name, trust_remote_code=trust)
    if task.style == "chat" and tok.chat_template is None:
        raise ValueError(
            f"model: {model_name} has no chat template, but task {cfg.task!r} prompts every "
            "model but the tiny presets with chat messages: give an instruct model (a "
            "chat_template in its tokenizer_config.json, or a chat_template.jinja)."
        )
    return model, tok, task, train_problems, val_problems


def train(
    cfg: RunConfig,
    tracking_uri: str | None = None,
    on_step: Callable[[int, dict], None] | None = None,
) -> RunResult:
    """Run one GRPO training run and log it to MLflow; returns its final metrics.

    The MLflow run is FINISHED on success, FAILED on an exception and KILLED on Ctrl-C —
    never left RUNNING by a Python-level failure.
    """
    from datasets import Dataset

    t0 = time.perf_counter()
    engine = engines.engine(cfg)
    torch.manual_seed(cfg.seed)
    model, tok, task, train_problems, val_problems = prepare(cfg)
    max_new = cfg.max_completion_tokens
    ledger = FlopLedger(
        model.config,
        lora=lora_spec(cfg),
        reward_model_config=reward_model_config_for(cfg),
        gradient_checkpointing=cfg.gradient_checkpointing,
        lora_merged_for_generation=engine == "vllm",  # TRL merges adapters for vLLM
    )
    # the reward model loads before the run exists: a model that cannot load (or whose own code
    # is not trusted) leaves no FAILED run behind
    reward = timed_reward(
        get_reward(cfg.reward, task, cfg.extra.get("reward_model"), cfg.trust_remote_code), ledger
    )
    vllm_on_cpu = engine == "vllm" and not torch.cuda.is_available()
    if vllm_on_cpu:  # refused before the run exists; kernels that keep the weights (vllm_cpu)
        vllm_cpu.check_head_size(model.config, cfg.model)
        vllm_cpu.keep_weights()
    out_dir = tempfile.TemporaryDirectory(prefix="isolab-trl-")  # the trainer's files
    # TRL checks its settings (`extra.grpo`) as they are built: one it refuses leaves no run
    args = grpo_args(
        cfg,
        out_dir.name,
        max_new,
        max_prompt_tokens(task, train_problems, tok),
        getattr(model.config, "max_position_embeddings", None),
    )
    logger = RunLogger(cfg.experiment, cfg.run_name, cfg.run_key, tracking_uri)
    status = "FAILED"
    state: dict[str, Any] = {}
    try:
        logger.log_params(cfg.resolved())
        logger.set_tags(
            {
                "isolab.split_sizes": f"train={len(train_problems)},val={len(val_problems)}",
                BASE_DIGEST_TAG: models.digest(cfg.model) or "unrecorded",
                "isolab.engine": engine,
                **vllm_cpu.cpu_tags(),  # floats and vLLM's kernels depend on the CPU
            }
        )
        source = f"{cfg.task} pool of {cfg.pool_size}, {cfg.split} split of {cfg.model}"
        for context, problems in (("train", train_problems), ("eval", val_problems)):
            logger.log_split(
                f"{cfg.task}-{cfg.split}-{context}", context, [p.id for p in problems], source
            )
        dataset = Dataset.from_dict(
            {
                "prompt": [task.prompt(p) for p in train_problems],
                "answer": [p.answer for p in train_problems],
            }
        )
        evaluator = Evaluator(cfg, task, val_problems, tok, ledger)
        trainer_ref: dict[str, Any] = {}
        callback = make_callback(
            trainer_ref, cfg, evaluator, logger, ledger, max_new, state, on_step
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            trainer = make_trainer_class(engine == "vllm")(
                model=model,
                reward_funcs=[reward],
                args=args,
                train_dataset=dataset,
                processing_class=tok,
                callbacks=[callback],
                peft_config=_peft_config(cfg),
            )
            from transformers import PrinterCallback

            trainer.remove_callback(PrinterCallback)  # metrics go to MLflow, not stdout
            trainer.ledger = ledger
            trainer_ref["trainer"] = trainer
            if vllm_on_cpu:  # vLLM serves the weights of each sync, whatever its kernels
                gemm = vllm_cpu.follow_syncs(trainer.vllm_generation)
                logger.set_tags({"isolab.vllm_gemm": vllm_cpu.describe(gemm)})
            trainer.train()
        logger.log_dict(
            {
                "problem_ids": evaluator.ids,
                "n_samples": cfg.eval_k_samples,
                "correct_counts_by_step": evaluator.history,
            },
            "eval/per_problem_counts.json",
        )
        status = "FINISHED"
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    finally:
        logger.end(status)
        out_dir.cleanup()
    return RunResult(
        run_id=logger.run_id,
        run_key=cfg.run_key,
        status=status,
        wall_time_s=time.perf_counter() - t0,
        base_eval=state.get("base_eval", {}),
        final_eval=state.get("last_eval", {}),
        final_metrics=state.get("last_metrics", {}),
    )


def _peft_config(cfg: RunConfig):
    if not cfg.lora_rank:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=cfg.lora_rank,
        lora_alpha=2 * cfg.lora_rank,
        target_modules=list(LORA_TARGETS),
        lora_dropout=0.0,
        task_type="CAUSAL_LM",
    )


os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
