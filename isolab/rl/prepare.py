"""What a run needs before it exists: its problems, model and tokenizer (`prepare`), the problems
a reward of the user's is tried on (`preflight_problems`), and TRL's `GRPOConfig`
(`grpo_args`: the mapping from isolab's names to TRL's). Everything here may refuse a run, and
does so before `isolab.rl.train.train` logs anything.
"""

from __future__ import annotations

import torch

from isolab import difficulty, models
from isolab.compute.shapes import LORA_TARGETS
from isolab.config import RunConfig, is_user_reward, reward_parts
from isolab.rl import engines
from isolab.rl.allocation import prompt_key
from isolab.rl.user_rewards import PREFLIGHT_PROBLEMS
from isolab.tasks import Task
from isolab.tasks.base import as_text


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
        # One optimizer step consumes one generation batch of B = B_p·n completions, B/K on
        # each of the run's K processes (`RunConfig.processes`).
        per_device_train_batch_size=cfg.B // cfg.processes,
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
        max_grad_norm=cfg.max_grad_norm,
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


def preflight_problems(cfg: RunConfig, task: Task) -> list:
    """A few of the task's problems for the pre-flight call of a reward of the user's, read
    without a model: a card's training rows, drawn sums, GSM8K's or MATH-500's rows from a
    `data_dir` (none from the hub: a run whose splits are cached may never need it)."""
    if not any(is_user_reward(part) for part in reward_parts(cfg.reward)):
        return []
    if cfg.task in ("gsm8k", "math500") and cfg.data_dir is None:
        return []
    split = "test" if cfg.task == "math500" else "train"
    return task.problems(
        split=split, data_dir=cfg.data_dir, limit=PREFLIGHT_PROBLEMS, seed=cfg.seed
    )


def prepare(cfg: RunConfig):
    """Model, tokenizer, task, splits: everything a run needs before it can be logged.

    A model that ships its own code loads only with `cfg.trust_remote_code`; a chat task needs
    a model with a chat template. Both are refused here, before the run exists."""
    model_name = cfg.model
    trust = cfg.trust_remote_code
    task = difficulty.task_for(model_name, cfg.task, run_code=trust)
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
    if len(train_problems) < cfg.problems_per_step:
        per_step = (
            f"B_p = {cfg.B_p}"
            if cfg.search_oversample == 1
            else f"search_oversample·B_p = {cfg.problems_per_step}"
        )
        raise ValueError(
            f"split {cfg.split!r} of {model_name} has {len(train_problems)} training problems but "
            f"{per_step} problems per step: lower B_p or raise pool_size (now {cfg.pool_size})."
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


def base_priors(cfg: RunConfig, task: Task, problems: list) -> dict[str, float]:
    """The base model's avg@16 of each training problem, by `allocation.prompt_key`: where the
    per-prompt allocators start their estimates (`isolab.rl.allocation.Beliefs`); none for
    split `all`, whose problems were never labelled."""
    if cfg.split == "all":
        return {}
    splits = difficulty.load_or_label(
        cfg.model,
        cfg.task,
        cfg.pool_size,
        data_dir=cfg.data_dir,
        trust_remote_code=cfg.trust_remote_code,
    )
    avg = {p.id: a for p, a in zip(splits.problems, splits.avg, strict=True)}
    return {prompt_key(task.prompt(p)): avg[p.id] for p in problems if p.id in avg}


def peft_config(cfg: RunConfig):
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
