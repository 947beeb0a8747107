"""What a `RunConfig` field may take, and the check of every field: choices, ceilings, size
guards and references (tasks, task cards, reward functions), each error naming the fix.

`RunConfig.__post_init__` calls `check` once its fields have their types, so that a config that
exists is one that can run.
"""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path
from typing import Any

from isolab.paths import check_visible, name_path
from isolab.trl_args import check_extra
from isolab.userinput import brief
from isolab.vocab import MODEL_BASED, REWARDS

LR_SCALINGS = ("sqrt", "const", "linear")
RECIPES = ("auto", "kl_entropy", "kl", "entropy", "none")
#: Difficulty splits of a pool by the base model's avg@16 (`isolab.difficulty`): `never` (the
#: Hard problems the base never solves in 16 samples) and `mix` (Easy and Hard, one to one) are
#: cut from Easy and Hard (issue 31). A data set's own train/test split is another word:
#: `DATASET_SPLITS` in `isolab.tasks.gsm8k`/`math500`.
SPLITS = ("easy", "hard", "all", "never", "mix")
#: Splits trained without KL and entropy losses under `recipe: auto` (the healthy recipe).
UNREGULARISED_SPLITS = ("hard", "never")
GENERATIONS = ("auto", "hf", "vllm")
#: Seeds are what numpy's RNG takes (TRL seeds numpy, torch and Python's `random` with one).
MAX_SEED = 2**32 - 1

# Healthy-recipe coefficients used when `recipe` turns a term on and no explicit value is given.
# The papers use KL + entropy on Easy sets and neither on Hard sets (IsoCompute §4); the values
# are isolab's CPU defaults for tiny models, chosen so that neither term dominates the policy loss.
DEFAULT_BETA = 0.02
DEFAULT_ENTROPY_COEF = 0.005

# Ceilings of values no training wants (not size guards: nothing is meant above them).
#: Adam moves every weight by about the learning rate per step, so η > 1 wrecks a model in one
#: step (isolab's pilots pick 1e-6 to 1e-4).
MAX_LR = 1.0
#: Logits are divided by T: at T = 10 sampling is all but uniform over the vocabulary.
MAX_TEMPERATURE = 10.0
#: A KL or entropy coefficient over 100 drowns the policy loss (the papers use 0.001 to 0.04).
MAX_COEF = 100.0
#: float32's largest finite value: a clip norm above it is inf in the gradient clip's dtype.
MAX_FLOAT32 = 3.4028234663852886e38


#: Sizes past which a run is almost surely a typo (n: 100000 failed to allocate after 70 s):
#: refused unless `$ISOLAB_NO_SIZE_GUARDS=1` says it is meant. Every factor of a run's work is
#: under one (`_check_sizes`): batches, steps × update passes, tokens, evaluations.
SIZE_GUARDS = {
    "n": 4096,
    "B": 65536,
    "M": 1_000_000,
    "eval samples": 10_000_000,  # of one evaluation
    "eval samples per run": 100_000_000,  # of every evaluation of the run, on every set
    # past the longest context of today's models (128 Ki tokens)
    "max_completion_tokens": 131_072,
    "tokens per step": 100_000_000,  # generated: B · max_completion_tokens
    # a LoRA update of a d×d weight has rank ≤ d, and the widest models have d = 16 Ki
    "lora_rank": 65_536,
    "pool_size": 10_000_000,  # difficulty labelling samples 16 completions of each
}
SIZE_GUARD_ENV = "ISOLAB_NO_SIZE_GUARDS"
#: `RunConfig.lr` of each `lr_scaling`, as messages write it.
_LR_RULES = {"sqrt": "lr_base·sqrt(B/B_base)", "linear": "lr_base·B/B_base", "const": "lr_base"}


#: How a step spends its rollouts across problems (`RunConfig.allocation`; isolab.rl.allocation).
ALLOCATIONS = ("uniform", "dynamic", "early_stop", "variance")


def allocator_of(allocation: str, search_oversample: int) -> str:
    """The allocation a run with these fields uses: `allocation`, but `dynamic` for `uniform`
    with `search_oversample` k > 1 (how dynamic sampling was asked for before `allocation`)."""
    return "dynamic" if allocation == "uniform" and search_oversample > 1 else allocation


def pilot_size(n: int) -> int:
    """Rollouts of the pilot chunk `allocation: early_stop` draws for every candidate problem
    before it decides which to stop: a quarter of the group, at least 2 (so that a group can
    show two different rewards)."""
    return max(2, n // 4)


def check(cfg: Any) -> None:
    """Raise ValueError naming the field and the fix for the first value `cfg`, a `RunConfig`,
    may not take. (`cfg` is typed `Any`: `isolab.config.run` imports this module, and an import
    back, even for types, would be a cycle to the layer check.)"""
    per_step_name = "B_p" if cfg.search_oversample == 1 else "search_oversample·B_p"
    for name in ("model", "task", "data_dir", "eval_judge"):  # paths and hub ids
        if getattr(cfg, name) is not None:
            check_visible(getattr(cfg, name), name, "remove it")
    for name, spec in cfg.eval_sets.items():
        check_visible(spec, f"eval_sets.{name}", "remove it")
    if cfg.n < 2:
        raise ValueError(
            f"n = {cfg.n}: GRPO needs at least 2 rollouts per problem to form a group "
            "baseline; set n ≥ 2."
        )
    for name in ("B_p", "M", "max_completion_tokens", "B_base", "num_iterations"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"{name} = {getattr(cfg, name)}: must be ≥ 1.")
    if cfg.search_oversample < 1:
        raise ValueError(
            f"search_oversample = {cfg.search_oversample}: must be ≥ 1 (1 trains on every "
            "group generated; k > 1 generates k·B_p groups and trains on the B_p whose "
            "rewards vary most)."
        )
    if cfg.processes < 1:
        raise ValueError(f"processes = {cfg.processes}: must be ≥ 1 (1 runs in this process).")
    if cfg.B % cfg.processes:
        raise ValueError(
            f"processes = {cfg.processes} does not divide the batch B = B_p·n = {cfg.B} "
            f"(each process takes B/processes completions): choose processes among "
            f"{[k for k in range(1, min(cfg.B, 64) + 1) if cfg.B % k == 0]}, or change "
            "B_p or n."
        )
    if cfg.processes > 1 and cfg.search_oversample > 1:
        raise ValueError(
            f"search_oversample = {cfg.search_oversample} runs in one process: set "
            "processes = 1, or search_oversample = 1."
        )
    _check_allocation(cfg)
    if cfg.lr_base <= 0:
        raise ValueError(f"lr_base = {cfg.lr_base}: must be > 0 (e.g. 5e-5 for tiny models).")
    if cfg.lr_base > MAX_LR:
        raise ValueError(
            f"lr_base = {cfg.lr_base}: over {MAX_LR}; Adam moves every weight by about the "
            "learning rate each step, so this wrecks the model in one step. Use 1e-6 to "
            "1e-4 (5e-5 for the tiny models)."
        )
    if not cfg.max_grad_norm > 0:
        raise ValueError(
            f"max_grad_norm = {cfg.max_grad_norm}: must be > 0 (1.0 clips as TRL does; a "
            "large value such as 1e6 leaves gradients unclipped)."
        )
    if cfg.max_grad_norm > MAX_FLOAT32:
        raise ValueError(
            f"max_grad_norm = {cfg.max_grad_norm}: over float32's largest number "
            f"({MAX_FLOAT32:.3g}), it is inf where the gradient is clipped; 1e6 already "
            "leaves gradients unclipped."
        )
    if cfg.temperature <= 0:
        raise ValueError(f"temperature = {cfg.temperature}: must be > 0 for sampling.")
    if cfg.temperature > MAX_TEMPERATURE:
        raise ValueError(
            f"temperature = {cfg.temperature}: over {MAX_TEMPERATURE}; logits are divided "
            "by the temperature, so sampling is all but uniform over the vocabulary. Use "
            "0.6 to 1.2 (1.0 samples the model as it is)."
        )
    _check_choice("lr_scaling", cfg.lr_scaling, LR_SCALINGS)
    _check_choice("recipe", cfg.recipe, RECIPES)
    _check_choice("split", cfg.split, SPLITS)
    _check_choice("generation", cfg.generation, GENERATIONS)
    if cfg.lr > MAX_LR:
        raise ValueError(
            f"lr_base = {cfg.lr_base} gives lr = {_LR_RULES[cfg.lr_scaling]} = "
            f"{cfg.lr:g} at B = {cfg.B} and B_base = {cfg.B_base} (lr_scaling "
            f"{cfg.lr_scaling}), over {MAX_LR}: lower lr_base, or raise B_base to a batch "
            "you tuned lr_base at."
        )
    _check_reward(cfg.reward, cfg.extra)
    if cfg.lora_rank < 0:
        raise ValueError(f"lora_rank = {cfg.lora_rank}: use 0 for full fine-tuning or r > 0.")
    if not cfg.eval_ks or min(cfg.eval_ks) < 1:
        raise ValueError(f"eval_ks = {cfg.eval_ks}: give k values ≥ 1, e.g. [1, 4].")
    if cfg.eval_k_samples < max(cfg.eval_ks):
        raise ValueError(
            f"eval_k_samples = {cfg.eval_k_samples} < max(eval_ks) = {max(cfg.eval_ks)}: "
            "the unbiased best@k/worst@k estimators need at least k samples; raise eval_k_samples."
        )
    if cfg.eval_judge is not None and not str(cfg.eval_judge).strip():
        raise ValueError(
            "eval_judge = '': name a process reward model (`tiny-prm`, or a hub PRM id), or "
            "leave it out for no judge."
        )
    if cfg.eval_problems < 1:
        raise ValueError(f"eval_problems = {cfg.eval_problems}: must be ≥ 1.")
    if cfg.train_limit is not None and cfg.train_limit < cfg.problems_per_step:
        raise ValueError(
            f"train_limit = {cfg.train_limit}: must be ≥ {per_step_name} = "
            f"{cfg.problems_per_step} (a step draws that many distinct problems), or None "
            "for the whole split."
        )
    if cfg.pool_size < 1:
        raise ValueError(f"pool_size = {cfg.pool_size}: must be ≥ 1 (the default is 4000).")
    if not 0 <= cfg.seed <= MAX_SEED:
        raise ValueError(f"seed = {brief(cfg.seed)}: seeds are integers from 0 to 2**32 - 1.")
    from isolab.tasks import check_task

    check_task(cfg.task)
    if cfg.eval_every < 0:
        raise ValueError(f"eval_every = {cfg.eval_every}: use 0 (start and end only) or > 0.")
    if cfg.beta is not None and cfg.beta < 0:
        raise ValueError(f"beta = {cfg.beta}: the KL coefficient must be ≥ 0.")
    if cfg.entropy_coef is not None and cfg.entropy_coef < 0:
        raise ValueError(f"entropy_coef = {cfg.entropy_coef}: must be ≥ 0.")
    for name in ("beta", "entropy_coef"):
        if (getattr(cfg, name) or 0) > MAX_COEF:
            raise ValueError(
                f"{name} = {getattr(cfg, name)}: over {MAX_COEF:g}, the term drowns the "
                "policy loss; the papers use 0.001 to 0.04 (leave it out for the recipe's)."
            )
    at = cfg.eval_at_rollouts
    if at is not None and (not at or min(at) < 1 or any(b <= a for a, b in pairwise(at))):
        raise ValueError(
            f"eval_at_rollouts = {brief(list(at))}: give rollout counts ≥ 1 in increasing "
            "order, each once (e.g. [64, 128, 256]), or leave it out to evaluate every "
            "eval_every steps."
        )
    check_extra(cfg.extra)  # isolab.trl_args: what `extra` and `extra.grpo` may hold
    _check_eval_sets(cfg.eval_sets)
    _check_card_code(cfg)  # after the cards read: a card that does not read says why
    name_path(cfg.experiment, "experiment")
    _check_sizes(cfg)


def reward_parts(name: str) -> list[str]:
    """The reward functions of `reward`: `sparse + my_reward.py:fn` → two, summed by TRL (or
    weighted by `extra.grpo.reward_weights`); a single name → itself."""
    return [part.strip() for part in str(name).split("+")]


def is_user_reward(name: str) -> bool:
    """Whether reward `name` is a function of the user's (`module:function`)."""
    return ":" in str(name)


def _check_reward(reward: str, extra: dict[str, Any]) -> None:
    """One reward system, a function of the user's, or a sum of them (`+`) with at most one
    model-based part and as many `extra.grpo.reward_weights` as parts. A function of the
    user's is checked here without importing it (`check_spec`: no standard-library or
    installed function); `isolab.rl.user_rewards.user_reward` imports it before a run exists and
    checks that it is a Python function with TRL's signature."""
    from isolab.tasks.usercode import REWARD, check_spec

    parts = reward_parts(reward)
    for part in parts:
        if not part:
            raise ValueError(f"reward = {brief(reward)}: an empty part; write a + b")
        if is_user_reward(part):
            check_spec(part, Path.cwd(), "reward", REWARD)
        else:
            _check_choice("reward", part, REWARDS)
    if sum(part in MODEL_BASED for part in parts) > 1:
        raise ValueError(
            f"reward = {brief(reward)}: at most one model-based part (orm, prm, proxy-prm) in a "
            "sum: the ledger charges one reward model"
        )
    grpo = extra.get("grpo")  # its shape is check_extra's to refuse
    weights = grpo.get("reward_weights") if isinstance(grpo, dict) else None
    if weights is not None and (not isinstance(weights, list) or len(weights) != len(parts)):
        raise ValueError(
            f"extra.grpo.reward_weights = {brief(weights)}: give one weight per part of reward "
            f"({len(parts)}: {', '.join(parts)})"
        )


def _check_card_code(cfg: Any) -> None:
    """A task card (the task's, or an evaluation set's) whose verifier is code of its own is
    code from a data folder: refused, naming the card and the file, unless the config says
    `trust_remote_code: true` (the one switch, as for a model's own code)."""
    from isolab.tasks import card

    if cfg.trust_remote_code:
        return
    for spec in [cfg.task, *cfg.eval_sets.values()]:
        refusal = card.code_refusal(card.load_card(spec)) if card.is_card(spec) else None
        if refusal:
            raise ValueError(refusal)


def _check_eval_sets(sets: dict[str, str]) -> None:
    from isolab.tasks import TRAIN_SAMPLE, check_task, parse_eval_set

    for name, spec in sets.items():
        if not _EVAL_SET_NAME.match(name):
            raise ValueError(
                f"eval_sets.{brief(name)}: name a set with lower-case letters, digits and _ "
                "(it becomes the metric prefix eval-<name>/)"
            )
        if spec == TRAIN_SAMPLE:  # the run's own training problems: nothing to load
            continue
        try:
            task, _ = parse_eval_set(spec)
            check_task(task)
        except ValueError as exc:
            raise ValueError(f"eval_sets.{name}: {exc}") from exc


_EVAL_SET_NAME = re.compile(r"^[a-z0-9][a-z0-9_]{0,31}$")


def _check_allocation(cfg: Any) -> None:
    """`allocation` against the fields it needs (`RunConfig.allocation` says what each does)."""
    allocation, k = cfg.allocation, cfg.search_oversample
    if allocation not in ALLOCATIONS:
        raise ValueError(
            f"allocation = {allocation!r}: choose one of {', '.join(ALLOCATIONS)} (uniform is "
            "GRPO's n rollouts for every problem)."
        )
    if allocation in ("dynamic", "early_stop") and k < 2:
        raise ValueError(
            f"allocation = {allocation} with search_oversample = {k}: it draws "
            "search_oversample·B_p candidate problems and trains on B_p of them; set "
            "search_oversample: 2 or more."
        )
    if allocation == "variance" and k > 1:
        raise ValueError(
            f"allocation = variance with search_oversample = {k}: it splits B = B_p·n among "
            "the B_p problems a step draws, discarding none; set search_oversample: 1 (or "
            "allocation: dynamic to filter k·B_p groups)."
        )
    if allocation == "early_stop" and cfg.n <= pilot_size(cfg.n):
        raise ValueError(
            f"allocation = early_stop with n = {cfg.n}: its pilot is {pilot_size(cfg.n)} "
            "rollouts per candidate, so n must exceed it; set n ≥ 3."
        )
    if allocation != "uniform" and cfg.processes > 1:
        raise ValueError(
            f"allocation = {allocation} runs in one process: set processes: 1, or "
            "allocation: uniform."
        )


def _check_sizes(cfg: Any) -> None:
    import os

    if os.environ.get(SIZE_GUARD_ENV) == "1":
        return
    batch = "B = B_p·n" if cfg.search_oversample == 1 else "search_oversample·B_p·n"
    per_eval = cfg.eval_problems * cfg.eval_k_samples
    evaluations, when = _evaluations(cfg)
    sets = 1 + len(cfg.eval_sets)
    per_step = cfg.rollouts_per_step * cfg.max_completion_tokens
    sizes = [  # (guard, value, what the message names)
        ("n", cfg.n, "n"),
        ("B", cfg.rollouts_per_step, batch),
        ("B", cfg.B_base, "B_base"),  # a reference batch is a batch
        ("M", cfg.M, "M"),
        ("M", cfg.M * cfg.num_iterations, "M·num_iterations"),  # update passes
        ("M", cfg.eval_every, "eval_every"),
        ("max_completion_tokens", cfg.max_completion_tokens, "max_completion_tokens"),
        ("tokens per step", per_step, batch.split(" = ")[0] + "·max_completion_tokens"),
        ("eval samples", per_eval, "eval_problems·eval_k_samples"),
        (
            "eval samples per run",
            evaluations * sets * per_eval,
            f"eval_problems·eval_k_samples × {evaluations:,} evaluations ({when}) × {sets} "
            "evaluation set(s)",
        ),
        ("lora_rank", cfg.lora_rank, "lora_rank"),
        ("pool_size", cfg.pool_size, "pool_size"),
        ("pool_size", cfg.train_limit or 0, "train_limit"),  # a share of the pool
    ]
    for key, value, name in sizes:
        if value > SIZE_GUARDS[key]:
            raise ValueError(
                f"{name} = {value:,}: over isolab's guard of {SIZE_GUARDS[key]:,} on {key} (a "
                f"size this large is usually a typo and fails after minutes or never ends); set "
                f"{SIZE_GUARD_ENV}=1 to run it anyway."
            )


def _evaluations(cfg: Any) -> tuple[int, str]:
    """The most evaluations a run makes (`isolab.rl.evaluate.Evaluator.due`), and why."""
    if cfg.eval_at_rollouts:  # at most one a step, and the last step's
        count = min(len(cfg.eval_at_rollouts), cfg.M) + 1
        return count, f"eval_at_rollouts has {len(cfg.eval_at_rollouts):,} checkpoints"
    if cfg.eval_every > 0:  # step 0, every eval_every steps, the last step
        return 2 + cfg.M // cfg.eval_every, f"eval_every = {cfg.eval_every}, M = {cfg.M:,}"
    return 2, "at the start and the end"


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} = {brief(value)}: choose one of {', '.join(choices)}.")
