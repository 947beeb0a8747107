"""Reward models: small ones isolab trains itself on the synthetic task, and hub ones by id.

Two kinds, told apart by their supervision as in the reward-model literature (Uesato et al.
2022, arXiv 2211.14275; Lightman et al. 2023, "Let's Verify Step by Step", arXiv 2305.20050):

- **ORM**, an outcome reward model: trained on final-answer correctness only. As the verifiers
  of Cobbe et al. (2021, arXiv 2110.14168, §4.2), it predicts at every token, each prediction
  trained on the outcome label, which worked better for them than a single end-of-sequence one.
- **PRM**, a process reward model: trained on step labels. A raw arithmetic answer is written
  least significant digit first, so each digit is one step of the column addition; its label
  is whether the answer is still correct up to and including that digit. A last step at the
  EOS asks whether the answer ends there (without it a correct but unfinished prefix would
  score as well as the full answer). Steps after the first mistake carry no label: their
  correctness is settled, and the ``min`` aggregation reads only the first mistake.

A completion's score aggregates its step scores: ``min`` (the convention of Qwen2.5-Math-PRM and
of Math-Shepherd, Wang et al. 2024, arXiv 2312.08935) or ``prod`` (Lightman et al.: the
probability that every step is correct).

Architecture, shared by both: a ``LlamaForTokenClassification`` whose label set is the
vocabulary — a "next-step" head. P(step j is correct) is read at the position *before* step j,
in the row of the token actually written there (a Q-value over the possible next tokens).
Initialised from the ``tiny-m`` warm start, LM head included, as reward models are initialised
from the supervised policy (Ouyang et al. 2022, arXiv 2203.02155, §3.5), the head starts from
the policy's own next-digit beliefs: a pooled end-of-sequence classifier must relearn the whole
column addition at one position and stayed near 0.62 held-out accuracy in the same budget.

Training data: synthetic (prompt, completion) pairs, half correct, half perturbations of the
correct answer that mimic a policy's mistakes (a wrong digit, a missed or spurious carry, a
dropped, extra or swapped digit, garbage). A fixed tenth of the problem space (by hash) is never
trained on and holds the held-out evaluation. Deterministic by seed; cached under
``cache_root()/reward_models/<name>``.

Hub reward models (GPU): ``load`` takes a hub id or a local folder; ``score_hub_outcome`` runs a
sequence-classification RM on the chat transcript, ``score_hub_steps`` a PRM in the
Qwen2.5-Math-PRM convention (steps split on blank lines, each closed by ``<extra_0>``).
"""

from __future__ import annotations

import json
import logging
import random
import time
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from isolab.models import weights
from isolab.models.tiny import (
    REWARD_MODEL_PRESETS,
    TINY_PRESETS,
    RewardModelSpec,
    build_char_tokenizer,
    is_reward_preset,
    is_tiny,
    reward_preset_config,
    tiny_model_config,
)
from isolab.models.warm_start import one_thread
from isolab.models.weights import reward_model_dir
from isolab.tasks.arithmetic import ArithmeticSpec, raw_prompt, raw_target, sample_problem
from isolab.tasks.base import Problem
from isolab.vocab import MODEL_BASED, REWARDS

log = logging.getLogger(__name__)

KINDS = ("orm", "prm")
AGGREGATIONS = ("min", "prod")
#: The Qwen2.5-Math PRM's step separator and system prompt (its model card's usage example).
HUB_STEP_TOKEN = "<extra_0>"
HUB_PRM_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
#: One problem in `HELD_OUT_MOD` (by CRC32 of its id) is reserved for evaluation.
HELD_OUT_MOD = 10
#: Label of a step that is not trained on (after the first mistake, for a PRM).
UNLABELLED = -1


# ---- synthetic data ------------------------------------------------------------------------
def held_out(problem: Problem) -> bool:
    """Whether `problem` belongs to the evaluation tenth of the problem space (never trained on)."""
    return zlib.crc32(problem.id.encode()) % HELD_OUT_MOD == 0


def perturb(target: str, rng: random.Random) -> str:
    """A wrong completion near `target` (reversed answer digits), like a policy's mistakes.

    >>> perturb("753", random.Random(0)) != "753"
    True
    """
    for _ in range(100):
        wrong = _perturb_once(target, rng)
        if wrong != target:
            return wrong
    return target + "0"  # unreachable in practice; a spurious digit is always wrong


def _perturb_once(target: str, rng: random.Random) -> str:
    kind = rng.choices(
        ("digit", "carry", "drop", "extra", "swap", "garbage"), weights=(4, 3, 1, 1, 1, 1)
    )[0]
    digits = list(target)
    if kind == "digit":  # one wrong digit, most often off by one (a mis-added column)
        i = rng.randrange(len(digits))
        delta = rng.choice((1, -1)) if rng.random() < 0.6 else rng.randint(1, 9)
        digits[i] = str((int(digits[i]) + delta) % 10)
        return "".join(digits)
    if kind == "carry":  # a missed or spurious carry: the answer ± 10^k
        value = int(target[::-1]) + rng.choice((1, -1)) * 10 ** rng.randrange(len(target))
        return str(max(value, 0))[::-1]
    if kind == "drop":
        i = rng.randrange(len(digits)) if rng.random() < 0.3 else len(digits) - 1
        return "".join(digits[:i] + digits[i + 1 :])
    if kind == "extra":
        return target + str(rng.randint(0, 9))
    if kind == "swap" and len(digits) > 1:
        i = rng.randrange(len(digits) - 1)
        digits[i], digits[i + 1] = digits[i + 1], digits[i]
        return "".join(digits)
    return "".join(rng.choice("0123456789+=") for _ in range(rng.randint(0, 6)))


@dataclass(frozen=True)
class Example:
    """One (prompt, completion) pair of the raw arithmetic task and the correct completion."""

    prompt: str
    completion: str
    target: str

    @property
    def correct(self) -> bool:
        return self.completion == self.target


def synthetic_examples(
    count: int, seed: int, negative_fraction: float = 0.5, held_out_only: bool = False
) -> list[Example]:
    """`count` examples: correct targets and `negative_fraction` perturbations of them.

    Training draws from problems outside the held-out tenth, evaluation (`held_out_only`)
    from inside it.
    """
    rng = random.Random(seed)
    spec = ArithmeticSpec()
    out: list[Example] = []
    while len(out) < count:
        problem = sample_problem(rng, spec)
        if held_out(problem) != held_out_only:
            continue
        target = raw_target(problem)
        wrong = rng.random() < negative_fraction
        completion = perturb(target, rng) if wrong else target
        out.append(Example(raw_prompt(problem), completion, target))
    return out


def step_labels(completion: str, target: str) -> list[int]:
    """PRM labels: one per completion character (is the answer right so far?) and one for the
    end-of-answer step (is the whole completion right?); `UNLABELLED` after the first mistake.

    >>> step_labels("743", "753")
    [1, 0, -1, -1]
    >>> step_labels("75", "753")
    [1, 1, 0]
    """
    labels = []
    for j in range(len(completion) + 1):
        if labels and labels[-1] != 1:
            labels.append(UNLABELLED)
        elif j < len(completion):
            labels.append(int(completion[: j + 1] == target[: j + 1]))
        else:
            labels.append(int(completion == target))
    return labels


def outcome_labels(completion: str, target: str) -> list[int]:
    """ORM labels: the final-answer correctness on every step (Cobbe et al. 2021, §4.2).

    >>> outcome_labels("743", "753")
    [0, 0, 0, 0]
    """
    return [int(completion == target)] * (len(completion) + 1)


# ---- encoding and scoring (tiny, character-level reward models) ------------------------------
def encode(tok, prompts: Sequence[str], completions: Sequence[str]):
    """Right-padded ids of prompt + completion + EOS and the positions of each row's steps.

    The steps are the completion characters and the EOS. Returns ``(input_ids,
    attention_mask, step_spans, seq_lens)`` with ``step_spans[i] = (first step position,
    number of steps)`` and ``seq_lens`` the tokens each row feeds the model (what it costs).
    """
    rows, spans = [], []
    for prompt, completion in zip(prompts, completions, strict=True):
        if not prompt:
            raise ValueError("an empty prompt leaves no position to score the first step from")
        ids = tok.convert_tokens_to_ids(list(prompt + completion)) + [tok.eos_token_id]
        rows.append(ids)
        spans.append((len(prompt), len(completion) + 1))
    width = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), width), tok.pad_token_id)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        input_ids[i, : len(r)] = torch.tensor(r)
        attention_mask[i, : len(r)] = 1
    return input_ids, attention_mask, spans, [len(r) for r in rows]


def _step_log_probs(model, tok, prompts: Sequence[str], completions: Sequence[str]):
    """log P(step correct) of every step of every row, and the tokens each row fed the model.

    Step ``j`` at position ``t`` is read at position ``t − 1``, in the row of token ``x_t``:
    ``log_softmax(score(h_{t−1}))[x_t]``.
    """
    input_ids, mask, spans, seq_lens = encode(tok, prompts, completions)
    logp = torch.log_softmax(model(input_ids=input_ids, attention_mask=mask).logits.float(), -1)
    rows = []
    for i, (start, n) in enumerate(spans):
        pos = torch.arange(start, start + n)
        rows.append(logp[i, pos - 1, input_ids[i, pos]])
    return rows, seq_lens


def score_steps(model, tok, prompts: Sequence[str], completions: Sequence[str]):
    """P(correct) at each step of each completion, and the tokens each forward row scored."""
    with torch.inference_mode():
        rows, seq_lens = _step_log_probs(model, tok, prompts, completions)
    return [r.exp().tolist() for r in rows], seq_lens


def aggregate(step_scores: Sequence[float], how: str = "min") -> float:
    """Completion score from step scores: `min` (Qwen2.5-Math-PRM, Math-Shepherd) or `prod`
    (Lightman et al. 2023: the probability that every step is correct).

    >>> aggregate([0.9, 0.5, 0.8])
    0.5
    >>> round(aggregate([0.9, 0.5, 0.8], "prod"), 2)
    0.36
    """
    if how not in AGGREGATIONS:
        raise ValueError(f"aggregation {how!r}: choose one of {', '.join(AGGREGATIONS)}.")
    if not step_scores:
        return 0.0
    if how == "min":
        return float(min(step_scores))
    out = 1.0
    for s in step_scores:
        out *= s
    return float(out)


# ---- build ---------------------------------------------------------------------------------
def build(name: str, force: bool = False, from_scratch: bool = False) -> Path:
    """Install preset `name` into the cache (no-op when it is there) and return its folder:
    the weights shipped with isolab (digest-checked), or with `from_scratch` trained here from
    the installed `tiny-m` (CPU-dependent, as every warm start)."""
    if not is_reward_preset(name):
        raise ValueError(
            f"reward model {name!r} is not a preset ({', '.join(REWARD_MODEL_PRESETS)}); "
            "pass a hub id or a local folder to `load` instead."
        )
    out = reward_model_dir(name)
    if (out / weights.BUILD_INFO).exists() and not (force or from_scratch):
        return out
    if not from_scratch and weights.shipped_info(name) is not None:
        return weights.install_shipped(name, out)
    spec = REWARD_MODEL_PRESETS[name]
    t0 = time.perf_counter()
    with one_thread():
        model, tok, losses = _train(spec)
        metrics = evaluate(model, tok, spec.kind)
    info = {
        "preset": name,
        "source": "from-scratch",
        "spec": asdict(spec),
        "base_digest": weights.digest(spec.base),
        "params": sum(p.numel() for p in model.parameters()),
        "final_loss": losses[-1],
        "heldout": metrics,
        "build_time_s": round(time.perf_counter() - t0, 1),
    }
    weights.save_atomically(model, tok, info, out)
    log.info("built %s in %.1fs: held-out %s", name, info["build_time_s"], metrics)
    return out


def build_info(name: str) -> dict[str, Any]:
    """The build record of a preset: spec, parameters, held-out metrics, digests."""
    return json.loads((build(name) / weights.BUILD_INFO).read_text())


def _train(spec: RewardModelSpec):
    from transformers import LlamaForCausalLM, LlamaForTokenClassification

    if spec.kind not in KINDS:
        raise ValueError(f"kind = {spec.kind!r}: choose one of {', '.join(KINDS)}.")
    torch.manual_seed(spec.seed)
    base = weights.build(spec.base)
    tok = build_char_tokenizer()
    own = {"trust_remote_code": False}  # isolab's own tiny-m: no code of its own to run
    model = LlamaForTokenClassification.from_pretrained(
        base, num_labels=len(tok), attn_implementation="eager", **own
    )
    policy = LlamaForCausalLM.from_pretrained(base, **own)
    with torch.no_grad():  # start the head from the policy's next-token beliefs
        model.score.weight.copy_(policy.lm_head.weight)
    del policy
    opt = torch.optim.AdamW(model.parameters(), lr=spec.peak_lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=spec.peak_lr, total_steps=spec.steps)
    data = synthetic_examples(spec.steps * spec.batch, spec.seed + 1, spec.negative_fraction)
    losses: list[float] = []
    model.train()
    for step in range(spec.steps):
        loss = _loss(model, tok, data[step * spec.batch : (step + 1) * spec.batch], spec.kind)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    model.eval()
    return model, tok, losses


def _labels(kind: str, example: Example) -> list[int]:
    labels = step_labels if kind == "prm" else outcome_labels
    return labels(example.completion, example.target)


def _loss(model, tok, batch: Sequence[Example], kind: str) -> torch.Tensor:
    """Binary cross-entropy of the step probabilities against the labelled steps."""
    rows, _ = _step_log_probs(model, tok, [e.prompt for e in batch], [e.completion for e in batch])
    logp = torch.cat(rows).clamp(max=-1e-6)  # log(1 − p) must stay finite
    y = torch.tensor([y for e in batch for y in _labels(kind, e)], dtype=torch.float32)
    keep = y != UNLABELLED
    logp, y = logp[keep], y[keep]
    return -(y * logp + (1 - y) * torch.log1p(-logp.exp())).mean()


def evaluate(model, tok, kind: str, count: int = 2000, seed: int = 10_007) -> dict[str, float]:
    """Held-out metrics on `count` examples (half wrong) from problems never trained on.

    `accuracy`: the completion score (min over steps) above 0.5 against correctness; `auc`:
    P(a correct completion outscores a wrong one); `step_accuracy`: steps with a PRM label
    (up to the first mistake) called right at 0.5.
    """
    data = synthetic_examples(count, seed, negative_fraction=0.5, held_out_only=True)
    steps, _ = score_steps(model, tok, [e.prompt for e in data], [e.completion for e in data])
    scores = [aggregate(s) for s in steps]
    truth = [e.correct for e in data]
    hits = [
        (p > 0.5) == bool(y)
        for e, s in zip(data, steps, strict=True)
        for p, y in zip(s, step_labels(e.completion, e.target), strict=True)
        if y != UNLABELLED
    ]
    return {
        "examples": float(count),
        "accuracy": sum((s > 0.5) == t for s, t in zip(scores, truth, strict=True)) / count,
        "auc": _auc(
            [s for s, t in zip(scores, truth, strict=True) if t],
            [s for s, t in zip(scores, truth, strict=True) if not t],
        ),
        "step_accuracy": sum(hits) / len(hits),
    }


def _auc(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """Mann–Whitney estimate of P(positive > negative), ties counted half."""
    import numpy as np

    pos, neg = np.asarray(positives)[:, None], np.asarray(negatives)[None, :]
    return float(np.mean((pos > neg) + 0.5 * (pos == neg)))


# ---- load ----------------------------------------------------------------------------------
def load(name: str, kind: str, trust_remote_code: bool = False):
    """(model, tokenizer) of a reward model: a preset (built on first use), a hub id or a folder.

    Presets are scored with `score_steps`, hub models with `score_hub_outcome` (ORM) or
    `score_hub_steps` (PRM). Hub PRMs (Qwen2.5-Math-PRM-7B) ship their own modelling code,
    which runs only with `trust_remote_code` (the run config's `trust_remote_code: true`);
    hub ORMs are ``AutoModelForSequenceClassification``. On CUDA the weights load in bf16.
    """
    if kind not in KINDS:
        raise ValueError(f"kind = {kind!r}: choose one of {', '.join(KINDS)}.")
    from transformers import (
        AutoModel,
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
        AutoTokenizer,
    )

    if is_reward_preset(name):
        spec = REWARD_MODEL_PRESETS[name]
        if spec.kind != kind:
            raise ValueError(f"reward model {name!r} is an {spec.kind.upper()}, not an {kind}.")
        path = build(name)  # isolab's own: no code of its own to run
        model = AutoModelForTokenClassification.from_pretrained(
            path, attn_implementation="eager", trust_remote_code=False
        )
        return model.eval(), AutoTokenizer.from_pretrained(path, trust_remote_code=False)
    cuda = torch.cuda.is_available()
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    if cuda:
        kwargs["dtype"] = torch.bfloat16
    try:
        tok = AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code)
        cls = AutoModelForSequenceClassification if kind == "orm" else AutoModel
        model = cls.from_pretrained(name, **kwargs).eval()
    except ValueError as err:
        _refuse_remote_code(err, name)
        raise RuntimeError(f"cannot load the {kind.upper()} {name!r}: {err}") from err
    except OSError as err:
        raise RuntimeError(
            f"cannot load the {kind.upper()} {name!r}: {err}\nIt is neither a local folder nor "
            "reachable on the Hugging Face Hub (offline?). Download it where the hub is reachable "
            f"(`hf download {name}`) and point HF_HOME at that cache or pass the folder; on a "
            f"CPU machine use the isolab-trained `tiny-{kind}` (the default for tiny models)."
        ) from err
    if cuda:
        model = model.to("cuda")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return model, tok


def _hub_batches(model, tok, texts: Sequence[str], batch_size: int):
    """Forward passes of a hub model over `texts`, `batch_size` at a time (right padding)."""
    device = next(model.parameters()).device
    for i in range(0, len(texts), batch_size):
        enc = tok(
            list(texts[i : i + batch_size]),
            return_tensors="pt",
            padding=True,
            padding_side="right",
            add_special_tokens=False,
        ).to(device)
        with torch.inference_mode():
            out = model(**enc)
        yield enc, out


def _user_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    return "\n".join(m["content"] for m in prompt if m.get("role") == "user")


def score_hub_outcome(
    model, tok, prompts: Sequence[Any], completions: Sequence[str], batch_size: int = 16
):
    """A hub ORM's score (its first logit) of each chat transcript, and the tokens scored."""
    texts = []
    for prompt, completion in zip(prompts, completions, strict=True):
        messages = [{"role": "user", "content": _user_text(prompt)}]
        messages.append({"role": "assistant", "content": completion})
        texts.append(tok.apply_chat_template(messages, tokenize=False))
    scores: list[float] = []
    seq_lens: list[int] = []
    for enc, out in _hub_batches(model, tok, texts, batch_size):
        scores += out.logits[:, 0].float().tolist()
        seq_lens += enc["attention_mask"].sum(dim=1).tolist()
    return scores, seq_lens


def hub_prm_texts(tok, prompts: Sequence[Any], completions: Sequence[str]) -> list[str]:
    """Transcripts in the Qwen2.5-Math-PRM format: its system prompt, the question, and the
    answer's paragraphs (split on blank lines) each closed by ``<extra_0>``."""
    texts = []
    for prompt, completion in zip(prompts, completions, strict=True):
        steps = [s for s in completion.split("\n\n") if s.strip()] or [completion]
        messages = [
            {"role": "system", "content": HUB_PRM_SYSTEM},
            {"role": "user", "content": _user_text(prompt)},
            {"role": "assistant", "content": HUB_STEP_TOKEN.join(steps) + HUB_STEP_TOKEN},
        ]
        texts.append(tok.apply_chat_template(messages, tokenize=False))
    return texts


def score_hub_steps(
    model, tok, prompts: Sequence[Any], completions: Sequence[str], batch_size: int = 8
):
    """A hub PRM's P(step correct) at each step, in the Qwen2.5-Math-PRM convention.

    Transcripts as `hub_prm_texts` writes them; the softmax probability of the positive
    (second) class at each ``<extra_0>`` is that step's correctness (the model card's
    ``make_step_rewards``).
    """
    texts = hub_prm_texts(tok, prompts, completions)
    sep = tok.encode(HUB_STEP_TOKEN, add_special_tokens=False)[0]
    step_scores: list[list[float]] = []
    seq_lens: list[int] = []
    for enc, out in _hub_batches(model, tok, texts, batch_size):
        probs = torch.softmax(out[0].float(), dim=-1)[..., 1]  # logits, tuple or ModelOutput
        for row, ids in zip(probs, enc["input_ids"], strict=True):
            step_scores.append(row[ids == sep].tolist())
        seq_lens += enc["attention_mask"].sum(dim=1).tolist()
    return step_scores, seq_lens


# ---- configs of reward models (for the ledger and planning: no weights read) ----------------
#: Default reward models by (reward system, prompt style). CPU (raw, tiny models): isolab's own.
#: Proxy on CPU: the `tiny-l` shape, ≈ 3.4× the matmul FLOPs per token of `tiny-m`, so that
#: the reward model takes a large share of the budget, as the paper's 7B PRM does for 1.5B–7B
#: policies. GPU (chat, instruct LMs): hub models.
DEFAULT_REWARD_MODELS: dict[tuple[str, str], str] = {
    ("orm", "raw"): "tiny-orm",
    ("prm", "raw"): "tiny-prm",
    ("proxy-prm", "raw"): "tiny-l",
    ("orm", "chat"): "Skywork/Skywork-Reward-V2-Llama-3.1-8B",
    ("prm", "chat"): "Qwen/Qwen2.5-Math-PRM-7B",
    ("proxy-prm", "chat"): "Qwen/Qwen2.5-Math-PRM-7B",
}


def proxy_config(spec: str | dict):
    """The config a `proxy-prm` charges: a tiny preset, `LlamaConfig` fields over `tiny-m`'s,
    or a hub id / local folder.

    >>> proxy_config({"hidden_size": 256, "num_hidden_layers": 8}).num_hidden_layers
    8
    """
    if isinstance(spec, dict):
        config = _tiny_config("tiny-m")
        for key, value in spec.items():
            if not hasattr(config, key):
                raise ValueError(f"reward_model field {key!r} is not a LlamaConfig field.")
            setattr(config, key, value)
        if "num_attention_heads" in spec and "num_key_value_heads" not in spec:
            config.num_key_value_heads = config.num_attention_heads
        if "hidden_size" in spec and "head_dim" not in spec:
            config.head_dim = config.hidden_size // config.num_attention_heads
        return config
    if is_tiny(spec):
        return _tiny_config(spec)
    if is_reward_preset(spec):
        return reward_preset_config(spec)
    return _hub_config(spec)


def _tiny_config(preset: str):
    config = tiny_model_config(TINY_PRESETS[preset], len(build_char_tokenizer()))
    config.num_labels = 1
    return config


def _refuse_remote_code(err: ValueError, name: str) -> None:
    """transformers' "needs trust_remote_code" refusal, as isolab's message (nothing ran)."""
    weights.refuse_remote_code(err, weights.REMOTE_CODE.format(what="reward model", name=name))


def _from_hub(load, model_id: str, what: str):
    """`load(model_id)` without running the model's own code (configs and tokenizers need
    none; planning never runs any), or an error that says how to get the model."""
    try:
        return load(model_id, trust_remote_code=False)
    except ValueError as err:
        _refuse_remote_code(err, model_id)
        raise RuntimeError(f"cannot read the {what} of reward model {model_id!r}: {err}") from err
    except OSError as err:
        raise RuntimeError(
            f"cannot read the {what} of reward model {model_id!r}: {err}\nIt is neither a local "
            "folder nor reachable on the Hugging Face Hub (offline?). Download it where the hub "
            f"is reachable (`hf download {model_id}`) or, on CPU, use the defaults (tiny-orm, "
            "tiny-prm, tiny-l for proxy-prm)."
        ) from err


def _hub_config(model_id: str):
    from transformers import AutoConfig

    return _from_hub(AutoConfig.from_pretrained, model_id, "config")


def hub_tokenizer(model_id: str):
    """The tokenizer of a hub reward model (proxy-prm counts the tokens it would score)."""
    from transformers import AutoTokenizer

    return _from_hub(AutoTokenizer.from_pretrained, model_id, "tokenizer")


def reward_model_config(name: str, style: str, reward_model: str | dict | None = None):
    """The `PretrainedConfig` whose forward passes reward system `name` charges, or None for a
    rule-based one. Reads no weights, so planning never builds or downloads a model."""
    if name not in REWARDS:
        raise ValueError(f"reward = {name!r}: choose one of {', '.join(REWARDS)}.")
    if name not in MODEL_BASED:
        return None
    spec = reward_model or DEFAULT_REWARD_MODELS[(name, style)]
    if name == "proxy-prm":
        return proxy_config(spec)
    if is_reward_preset(spec):
        return reward_preset_config(spec)
    return _hub_config(spec)


def reward_model_config_for(cfg) -> Any | None:
    """The reward model config of a `RunConfig` (reward system, prompt style, and
    `extra["reward_model"]`), for `FlopLedger` and `plan_run`; None for rule-based rewards."""
    style = "raw" if is_tiny(cfg.model) else "chat"
    return reward_model_config(cfg.reward, style, cfg.extra.get("reward_model"))
