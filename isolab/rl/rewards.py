"""Reward systems: plain functions TRL's `GRPOTrainer` accepts as `reward_funcs`.

TRL calls each with the prompts, the completions, their token ids, every dataset column
(`isolab.rl.user_rewards.reward_dataset`: `answer`, and a task card's columns under their own
names), `trainer_state`, `log_extra` and `log_metric` as keyword arguments, and expects one
float per completion. The
systems are those of Wilhelm & Kao ("Where Should RL Post-Training Compute Go?", arXiv
2607.13389), whose main result is that the reward system moves the best update fraction ρ
(rule-based ≈ 0.72, PRM ≈ 0.44):

- rule-based, 0 FLOPs: `sparse` (final answer correct), `structured` (format + correctness),
  `dense` (partial credit per answer digit);
- model-based, charged to ``flops/reward``: `orm` and `prm` (outcome / process reward models,
  see `isolab.models.reward`) and `proxy-prm` (the `dense` score, charged as if a reward model of
  a configurable size had computed it).

A model-based reward function carries two attributes for the FLOP ledger:
``reward_model_config`` (the ``PretrainedConfig`` whose forward passes it runs, or charges) and
``last_seq_lens`` (the tokens of each sequence it scored in its latest call); the training loop
passes the latter to ``FlopLedger.record_reward_model`` after every call.

A function of the user's (`module:function`) is `isolab.rl.user_rewards`'s, with the
pre-flight call that tries it before a run.

`RunConfig.extra["reward_model"]` picks the model of a model-based system: an isolab preset
(`tiny-orm`, `tiny-prm`), a hub id or local folder (`Qwen/Qwen2.5-Math-PRM-7B`), and for
`proxy-prm` also a tiny policy preset (`tiny-l`) or a dict of `LlamaConfig` fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, cast

from isolab import models
from isolab.config import is_user_reward, reward_parts
from isolab.models import reward as reward_models
from isolab.models.reward import DEFAULT_REWARD_MODELS, proxy_config, reward_model_name
from isolab.rl.user_rewards import user_reward
from isolab.tasks import Task
from isolab.tasks.base import completion_text
from isolab.tasks.grading import extract_boxed, extract_gsm8k_answer, normalize_number
from isolab.vocab import REWARDS

#: `structured` = FORMAT_WEIGHT · format + (1 − FORMAT_WEIGHT) · correct: a well-formed wrong
#: answer earns less than a right one, a right one in the wrong form still most of the credit.
FORMAT_WEIGHT = 0.2


# ---- rule-based ----------------------------------------------------------------------------
def digit_credit(pred: str, gold: str) -> float:
    """Share of digit positions right, aligned from the first character (pass reversed answers:
    least significant digit first), over the longer of the two, so extra digits cost credit.

    >>> digit_credit("743", "753")
    0.6666666666666666
    >>> digit_credit("7531", "753")
    0.75
    """
    width = max(len(pred), len(gold))
    if width == 0:
        return 0.0
    return sum(p == g for p, g in zip(pred, gold, strict=False)) / width


def raw_well_formed(completion: str, answer: str) -> bool:
    """Raw style format: only digits, and stopped in time (at most one digit more than the
    answer has). TRL strips the EOS from the text, so termination is read from the length.

    >>> raw_well_formed("7531", "357"), raw_well_formed("75+", "357"), raw_well_formed("", "357")
    (True, False, False)
    """
    text = completion.strip()
    return text.isdigit() and len(text) <= len(answer) + 1


def chat_well_formed(completion: str) -> bool:
    r"""Chat style format: a final answer in ``\boxed{}`` (or GSM8K's ``####`` line).

    >>> chat_well_formed("so \\boxed{357}"), chat_well_formed("357")
    (True, False)
    """
    return extract_boxed(completion) is not None or "####" in completion


def _chat_integer(text: str | None) -> int | None:
    value = normalize_number(text) if text is not None else None
    return int(value) if value is not None and float(value).is_integer() else None


def sparse(task: Task) -> Callable[..., list[float]]:
    """Rule-based sparse reward: 1.0 when the final answer is correct, else 0.0.

    >>> from isolab.tasks import get_task
    >>> reward = sparse(get_task("arithmetic", "raw"))
    >>> reward(prompts=["12+345="], completions=["753"], answer=["357"])
    [1.0]
    """

    def sparse_reward(prompts, completions, answer, **kwargs) -> list[float]:
        return [
            float(task.verify(completion_text(c), a))
            for c, a in zip(completions, answer, strict=True)
        ]

    return sparse_reward


def structured(task: Task) -> Callable[..., list[float]]:
    r"""Rule-based format + correctness: ``0.2 · well_formed + 0.8 · correct``.

    Well formed: raw style, only digits and at most one more than the answer has
    (`raw_well_formed`); chat style, a ``\boxed{}`` answer (`chat_well_formed`).

    >>> from isolab.tasks import get_task
    >>> reward = structured(get_task("arithmetic", "raw"))
    >>> reward(prompts=["12+345="] * 3, completions=["753", "743", "7+"], answer=["357"] * 3)
    [1.0, 0.2, 0.0]
    >>> reward = structured(get_task("arithmetic", "chat"))
    >>> reward(prompts=[[]] * 2, completions=["\\boxed{357}", "it is 357"], answer=["357"] * 2)
    [1.0, 0.8]
    """

    def structured_reward(prompts, completions, answer, **kwargs) -> list[float]:
        out = []
        for c, a in zip(completions, answer, strict=True):
            text = completion_text(c)
            formed = raw_well_formed(text, a) if task.style == "raw" else chat_well_formed(text)
            correct = task.verify(text, a)
            out.append(round(FORMAT_WEIGHT * formed + (1 - FORMAT_WEIGHT) * correct, 10))
        return out

    return structured_reward


def dense(task: Task) -> Callable[..., list[float]]:
    r"""Rule-based partial credit: the share of answer digits right in place (`digit_credit`).

    Raw style: the completion against the reversed answer, position by position from the least
    significant digit. Chat style: 1.0 when correct; else the final integer (boxed, else last
    number) against the gold integer, least significant digit first; 0 for non-integers.

    >>> from isolab.tasks import get_task
    >>> reward = dense(get_task("arithmetic", "raw"))
    >>> reward(prompts=["12+345="] * 3, completions=["753", "743", "7531"], answer=["357"] * 3)
    [1.0, 0.6666666666666666, 0.75]
    >>> dense(get_task("arithmetic", "chat"))([[]], ["\\boxed{358}"], ["357"])
    [0.6666666666666666]
    """

    def dense_reward(prompts, completions, answer, **kwargs) -> list[float]:
        out = []
        for c, a in zip(completions, answer, strict=True):
            text = completion_text(c)
            if task.style == "raw":
                out.append(digit_credit(text.strip(), a[::-1]))
            elif task.verify(text, a):
                out.append(1.0)
            else:
                pred, gold = _chat_integer(extract_gsm8k_answer(text)), _chat_integer(a)
                if pred is None or gold is None or (pred < 0) != (gold < 0):
                    out.append(0.0)
                else:
                    out.append(digit_credit(str(abs(pred))[::-1], str(abs(gold))[::-1]))
        return out

    return dense_reward


# ---- model-based ---------------------------------------------------------------------------
class PricedReward(Protocol):
    """A model-based reward function: a plain function carrying the attributes the FLOP ledger
    reads (see the module docstring)."""

    reward_model_config: Any
    last_seq_lens: list[int]

    def __call__(self, *args: Any, **kwargs: Any) -> list[float]: ...


def _priced(fn: Callable[..., list[float]], config: Any) -> PricedReward:
    """Give a model-based reward function the attributes the FLOP ledger reads."""
    priced = cast(PricedReward, fn)  # a function object takes any attribute
    priced.reward_model_config = config
    priced.last_seq_lens = []
    return priced


def _resolve(name: str, task: Task, reward_model: str | dict | None):
    return reward_model or DEFAULT_REWARD_MODELS[(name, task.style)]


def _check_raw_preset(model_name: str, task: Task) -> None:
    if task.style != "raw":
        raise ValueError(
            f"reward model {model_name!r} reads the raw arithmetic alphabet of the tiny models; "
            "for chat prompts set extra.reward_model to a hub reward model id (e.g. "
            f"{DEFAULT_REWARD_MODELS[('prm', 'chat')]})."
        )


def orm(
    task: Task, reward_model: str | None = None, trust_remote_code: bool = False
) -> PricedReward:
    """Outcome reward model: P(correct) from a model trained on final-answer labels.

    Tiny models: isolab's `tiny-orm` (see `isolab.models.reward`; its completion score is the
    lowest of its per-step predictions). Chat: a hub sequence-classification RM, whose first
    logit is the reward (`extra.reward_model`, default Skywork-Reward-V2-Llama-3.1-8B).

    >>> from isolab.tasks import get_task
    >>> reward = orm(get_task("arithmetic", "raw"))
    >>> right, wrong = reward(prompts=["5+7="] * 2, completions=["21", "22"], answer=["12"] * 2)
    >>> right > 0.5 > wrong, reward.last_seq_lens
    (True, [7, 7])
    """
    name = _resolve("orm", task, reward_model)
    preset = models.is_reward_preset(name)
    if preset:
        _check_raw_preset(name, task)
    model, tok = reward_models.load(name, "orm", trust_remote_code)

    def orm_reward(prompts, completions, **kwargs) -> list[float]:
        texts = [completion_text(c) for c in completions]
        if preset:
            steps, seq_lens = reward_models.score_steps(model, tok, prompts, texts)
            scores = [reward_models.aggregate(s, "min") for s in steps]
        else:
            scores, seq_lens = reward_models.score_hub_outcome(model, tok, prompts, texts)
        priced.last_seq_lens = seq_lens
        return scores

    priced = _priced(orm_reward, model.config)
    return priced


def prm(
    task: Task,
    reward_model: str | None = None,
    aggregation: str = "min",
    trust_remote_code: bool = False,
) -> PricedReward:
    """Process reward model: step scores of each completion, aggregated by `min` (Qwen2.5-Math
    practice) or `prod` (Lightman et al. 2023, "Let's Verify Step by Step").

    Tiny models: isolab's `tiny-prm` (one step per answer digit, plus the end of the answer).
    Chat: a hub PRM in the Qwen2.5-Math-PRM convention (`extra.reward_model`, default
    Qwen/Qwen2.5-Math-PRM-7B).

    >>> from isolab.tasks import get_task
    >>> reward = prm(get_task("arithmetic", "raw"))
    >>> right, wrong = reward(prompts=["5+7="] * 2, completions=["21", "22"], answer=["12"] * 2)
    >>> right > 0.5 > wrong, reward.last_seq_lens
    (True, [7, 7])
    """
    if aggregation not in reward_models.AGGREGATIONS:
        raise ValueError(
            f"aggregation = {aggregation!r}: choose one of {', '.join(reward_models.AGGREGATIONS)}."
        )
    name = _resolve("prm", task, reward_model)
    preset = models.is_reward_preset(name)
    if preset:
        _check_raw_preset(name, task)
    model, tok = reward_models.load(name, "prm", trust_remote_code)
    score = reward_models.score_steps if preset else reward_models.score_hub_steps

    def prm_reward(prompts, completions, **kwargs) -> list[float]:
        steps, seq_lens = score(model, tok, prompts, [completion_text(c) for c in completions])
        priced.last_seq_lens = seq_lens
        return [reward_models.aggregate(s, aggregation) for s in steps]

    priced = _priced(prm_reward, model.config)
    return priced


def proxy_prm(task: Task, reward_model: str | dict | None = None) -> PricedReward:
    """The `dense` score, charged as a PRM of a configurable size would cost: its forward over
    prompt + completion + end-of-answer token, as `tiny-prm` scores them.

    `reward_model`: a tiny policy or reward-model preset name (`tiny-l`, the CPU default), a
    dict of `LlamaConfig` fields over `tiny-m`'s (``{"hidden_size": 256, "num_hidden_layers":
    8}``), or a hub id / local folder (its config and tokenizer; the chat default is
    Qwen/Qwen2.5-Math-PRM-7B).

    >>> from isolab.tasks import get_task
    >>> reward = proxy_prm(get_task("arithmetic", "raw"))
    >>> reward(prompts=["12+345="], completions=["743"], answer=["357"]), reward.last_seq_lens
    ([0.6666666666666666], [11])
    >>> reward.reward_model_config.hidden_size
    192
    """
    spec = _resolve("proxy-prm", task, reward_model)
    config = proxy_config(spec)
    score = dense(task)
    tok = None
    if task.style != "raw":
        if not isinstance(spec, str) or models.is_tiny(spec) or models.is_reward_preset(spec):
            raise ValueError(
                f"proxy-prm on chat prompts charges a hub reward model and needs its tokenizer: "
                f"set extra.reward_model to a hub id or local folder, not {spec!r}."
            )
        tok = reward_models.hub_tokenizer(spec)

    def proxy_prm_reward(prompts, completions, answer, **kwargs) -> list[float]:
        texts = [completion_text(c) for c in completions]
        if tok is None:  # character tokens, as tiny-prm reads them: prompt + completion + EOS
            seq_lens = [len(p) + len(t) + 1 for p, t in zip(prompts, texts, strict=True)]
        else:
            seq_lens = [
                len(tok(x, add_special_tokens=False)["input_ids"])
                for x in reward_models.hub_prm_texts(tok, prompts, texts)
            ]
        priced.last_seq_lens = seq_lens
        return score(prompts, completions, answer)

    priced = _priced(proxy_prm_reward, config)
    return priced


# ---- selection -----------------------------------------------------------------------------
def get_rewards(
    name: str,
    task: Task,
    reward_model: str | dict | None = None,
    trust_remote_code: bool = False,
) -> list[Callable[..., list[float]]]:
    """The reward functions of `name`: one, or one per part of a sum (`sparse +
    my_reward.py:fn`), each as `get_reward` builds it."""
    return [get_reward(part, task, reward_model, trust_remote_code) for part in reward_parts(name)]


def get_reward(
    name: str,
    task: Task,
    reward_model: str | dict | None = None,
    trust_remote_code: bool = False,
) -> Callable[..., list[float]]:
    """The reward function `name` for `task`; `reward_model` picks a model-based system's model
    (`RunConfig.extra["reward_model"]`; `None`: `DEFAULT_REWARD_MODELS`). A hub model's own code
    runs only with `trust_remote_code` (`RunConfig.trust_remote_code`)."""
    if is_user_reward(name):
        return user_reward(name)
    if name == "sparse":
        return sparse(task)
    if name == "structured":
        return structured(task)
    if name == "dense":
        return dense(task)
    if name == "orm":
        return orm(task, reward_model_name(name, reward_model), trust_remote_code=trust_remote_code)
    if name == "prm":
        return prm(task, reward_model_name(name, reward_model), trust_remote_code=trust_remote_code)
    if name == "proxy-prm":
        return proxy_prm(task, reward_model)
    raise ValueError(f"reward = {name!r}: choose one of {', '.join(REWARDS)}.")
