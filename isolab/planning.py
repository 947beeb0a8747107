"""Planned compute of one run from its config, before anything is spent (`isolab flops`, and
each point of a sweep's plan, `isolab.sweep.plan`, which plans a grid of runs).

`plan_config` feeds `isolab.compute.ledger.plan_run` the model's config, the run's batch and
the expected prompt and completion lengths; the ledger's formulas are the ones a run charges.

Expected lengths come from the task: the mean tokenized prompt of a sample of problems, and
for completions the raw arithmetic target (answer digits + EOS) or, for chat tasks, the cap
`max_completion_tokens` (an upper bound: instruct LMs usually stop earlier). A measured mean
completion length (a probe's, or the store's last runs': `isolab.sweep.lengths`) is passed in
as `completion_len` by `isolab flops` and `sweep plan`; a run's config never depends on it.

Planning reads a model's config and tokenizer, never its weights, and never runs code a model
ships, whatever `trust_remote_code` says: that opt-in is for training.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import numpy as np

from isolab import models
from isolab.compute.ledger import plan_run
from isolab.compute.shapes import lora_spec
from isolab.config import RunConfig, reward_parts
from isolab.models.loading import refuse_remote_code
from isolab.models.reward import reward_model_config_for
from isolab.rl import engines
from isolab.tasks import arithmetic
from isolab.tasks.base import as_text


class CannotRun(ValueError):
    """This model cannot run this task (a tiny arithmetic model on a task card), with the model
    to use instead: a sweep drops such a point with this reason, `isolab flops` exits 2 on it."""


class Unreadable(ValueError):
    """A model's config or tokenizer, or the task's data, cannot be read here (not on the hub,
    no network, no such file): a sweep plans the point without FLOPs rather than fail."""


def model_config(name: str):
    """The transformers config of a model without building or loading its weights if possible."""
    if models.is_tiny(name):
        spec = models.TINY_PRESETS[name]
        return models.tiny_model_config(spec, len(models.build_char_tokenizer()))
    if models.is_chat_preset(name):
        return models.chat_model_config(models.CHAT_PRESETS[name])
    models.check_source(name)
    return copy.deepcopy(_read_config(name))


@functools.cache
def _read_config(name: str):
    """A hub, folder or real-preset config, read once per process: a sweep plans every point
    from it, and reading SmolLM2's from its GGUF takes seconds (36 points: 215 s uncached)."""
    from transformers import AutoConfig

    return _read(AutoConfig.from_pretrained, name, "config")


#: Why planning refused a model that ships its own code, and what to plan instead.
PLAN_REMOTE_CODE = (
    "model: {name} ships its own code (auto_map); isolab flops never runs it (nor does a "
    "sweep's planning), whatever trust_remote_code says: plan the same architecture from a copy "
    "of the folder without auto_map, whose config.json names a model_type transformers knows."
)


def _read(from_pretrained, name: str, what: str):
    """A model's config or tokenizer (`what`), read without running any code the model ships."""
    path, kwargs = _pretrained_source(name)
    try:
        return from_pretrained(path, trust_remote_code=False, **kwargs)
    except ValueError as err:
        refuse_remote_code(err, PLAN_REMOTE_CODE.format(name=name))
        raise
    except OSError as err:  # not on the hub, or no such file in the folder
        raise Unreadable(f"model: cannot read the {what} of {name!r}: {err}") from err


def _pretrained_source(name: str) -> tuple:
    """(path, from_pretrained kwargs) of a model's config and tokenizer: a real preset's
    without converting its weights (`models.smollm2.pretrained_source`), else `name` itself."""
    if name in models.REAL_PRESETS:
        from isolab.models.smollm2 import pretrained_source
        from isolab.paths import cache_root

        return pretrained_source(cache_root() / "models")
    return name, {}


@functools.cache
def expected_lengths(
    model: str, task: str, max_completion_tokens: int, data_dir: str | None = None
) -> tuple[float, float]:
    """(mean prompt tokens, mean completion tokens) of a task for a model: prompts measured on
    200 training problems (from `data_dir`, else the hub); completions at their cap."""
    if models.is_tiny(model):
        if task != "arithmetic":
            raise CannotRun(models.tiny_refusal(model, task))
        problems = arithmetic.generate_problems(500, seed=12345)
        prompt = np.mean([len(arithmetic.raw_prompt(p)) for p in problems])
        completion = np.mean([len(arithmetic.raw_target(p)) + 1 for p in problems])
        return float(prompt), float(min(completion, max_completion_tokens))
    from transformers import AutoTokenizer

    from isolab.tasks import get_task

    if models.is_chat_preset(model):  # built in code: planning installs nothing
        tok = models.build_byte_tokenizer()
    else:
        tok = _read(AutoTokenizer.from_pretrained, model, "tokenizer")
    t = get_task(task, "chat")
    try:
        sample = t.problems(split="train", limit=200, data_dir=data_dir)
    except Exception as exc:  # a missing file, no network: many types, one fix
        raise Unreadable(
            f"give --prompt-len for task {task!r}, or a data_dir: measuring the prompt length "
            f"needs the data set ({exc})"
        ) from exc
    # the chat-templated text tokenized as TRL tokenizes it (`apply_chat_template` alone returns
    # a BatchEncoding in transformers 5, whose len() is its 2 keys: prompts planned at 2 tokens)
    lens = [
        len(tok(as_text(t.prompt(p), tok), add_special_tokens=False)["input_ids"]) for p in sample
    ]
    return float(np.mean(lens)), float(max_completion_tokens)


def reward_length(cfg: RunConfig, completion_len: float) -> float | None:
    """Tokens a hub ORM or PRM scores per rollout: its own transcript of the prompt (measured
    with its tokenizer on 50 training problems) plus `completion_len`; None where the reward
    reads the policy's prompt and completion as they are (the tiny reward models, proxy-prm)."""
    from isolab.models.reward import configs as rm

    parts = [p for p in reward_parts(cfg.reward) if p in ("orm", "prm")]
    if not parts or models.is_tiny(cfg.model):
        return None
    name = rm.reward_model_name(parts[0], cfg.extra.get("reward_model"))
    name = name or rm.DEFAULT_REWARD_MODELS[(parts[0], "chat")]
    if models.is_reward_preset(name):
        return None
    return _reward_prompt_len(parts[0], name, cfg.task, cfg.data_dir) + completion_len


@functools.cache
def _reward_prompt_len(kind: str, reward_model: str, task: str, data_dir: str | None) -> float:
    """Mean tokens of reward model `reward_model`'s transcript (`kind`: orm or prm) of a task's
    prompt with an empty completion, once per process: a sweep plans every point from it."""
    from isolab.models.reward import configs as rm
    from isolab.models.reward import hub
    from isolab.tasks import get_task

    tok = rm.hub_tokenizer(reward_model)
    t = get_task(task, "chat")
    prompts = [t.prompt(p) for p in t.problems(split="train", limit=50, data_dir=data_dir)]
    texts = (hub.hub_orm_texts if kind == "orm" else hub.hub_prm_texts)(
        tok, prompts, [""] * len(prompts)
    )
    return float(np.mean([len(tok(x, add_special_tokens=False)["input_ids"]) for x in texts]))


def plan_config(
    cfg: RunConfig,
    prompt_len: float | None = None,
    completion_len: float | None = None,
    *,
    here: bool = False,
) -> dict[str, Any]:
    """The ledger's plan for `cfg`: per-step and total FLOPs of each component, and ρ.

    `here`: the log-prob passes' LM-head positions as a run on this machine is charged them
    (`isolab.rl.trainer`: the completion's on CUDA, TRL's fused head; every position of the row
    but the last on CPU), for an estimate of a run here (`isolab flops`, `sweep plan`'s FLOPs).
    Off, the completion's everywhere: a plan that sets a run's steps (an IsoFLOP grid's M) must
    be the same on every machine, or the run's key would follow the machine. On a CPU, a small
    vocabulary's head over a long prompt is a tenth of tiny-chat's learning FLOPs."""
    models.check_source(cfg.model)  # before the tokenizer: a typo fails here, not on the hub
    if prompt_len is None or completion_len is None:
        p, c = expected_lengths(cfg.model, cfg.task, cfg.max_completion_tokens, cfg.data_dir)
        prompt_len = p if prompt_len is None else prompt_len
        completion_len = c if completion_len is None else completion_len
    logits_len = None
    if here:
        from isolab.rl.trainer import logits_lens  # the rule the run's ledger follows

        # as plan_run truncates every length it is given
        row, completion = int(prompt_len + completion_len), int(completion_len)
        logits_len = logits_lens([row], [completion])[0]
    plan = plan_run(
        model_config(cfg.model),
        n=cfg.n,
        B_p=cfg.B_p,
        M=cfg.M,
        prompt_len=prompt_len,
        completion_len=completion_len,
        beta=cfg.resolved_beta,
        num_iterations=cfg.num_iterations,
        lora=lora_spec(cfg),
        gradient_checkpointing=cfg.gradient_checkpointing,
        reward_model_config=reward_model_config_for(cfg),
        old_policy_forward=cfg.num_iterations > 1 or engines.engine(cfg) == "vllm",
        search_oversample=cfg.search_oversample,
        rollouts_per_step=cfg.rollouts_per_step,
        reward_len=reward_length(cfg, completion_len),
        logits_len=logits_len,
    )
    return {**plan, "prompt_len": prompt_len, "completion_len": completion_len}
