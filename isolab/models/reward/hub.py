"""Loading a reward model by name, and scoring with hub reward models (GPU).

`load` takes a preset (built on first use), a hub id or a local folder. `score_hub_outcome`
runs a sequence-classification RM on the chat transcript, `score_hub_steps` a PRM in the
Qwen2.5-Math-PRM convention (steps split on blank lines, each closed by ``<extra_0>``).
Presets are scored with `isolab.models.reward.scoring.score_steps`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import torch

from isolab.models.reward.configs import refuse_reward_model_code
from isolab.models.reward.data import KINDS
from isolab.models.reward.presets import build
from isolab.models.tiny import REWARD_MODEL_PRESETS, is_reward_preset

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

#: The Qwen2.5-Math PRM's step separator and system prompt (its model card's usage example).
HUB_STEP_TOKEN = "<extra_0>"
HUB_PRM_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."


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
    from isolab.models import loading

    message = loading.REMOTE_CODE.format(what="reward model", name=name)
    loading.refuse_unless_trusted(name, message, trust_remote_code)
    cuda = torch.cuda.is_available()
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    if cuda:
        kwargs["dtype"] = torch.bfloat16
    try:
        tok = cast(  # transformers types it `TokenizersBackend | None | ...`; it is never None
            "PreTrainedTokenizerBase",
            AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code),
        )
        cls = AutoModelForSequenceClassification if kind == "orm" else AutoModel
        model = cls.from_pretrained(name, **kwargs).eval()
    except ValueError as err:
        refuse_reward_model_code(err, name)
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
    texts = hub_orm_texts(tok, prompts, completions)
    scores: list[float] = []
    seq_lens: list[int] = []
    for enc, out in _hub_batches(model, tok, texts, batch_size):
        scores += out.logits[:, 0].float().tolist()
        seq_lens += enc["attention_mask"].sum(dim=1).tolist()
    return scores, seq_lens


def hub_orm_texts(tok, prompts: Sequence[Any], completions: Sequence[str]) -> list[str]:
    """Transcripts a hub ORM scores: the prompt's user text and the completion, in its chat
    template (the policy's system prompt and worked answers are not shown to it)."""
    texts = []
    for prompt, completion in zip(prompts, completions, strict=True):
        messages = [
            {"role": "user", "content": _user_text(prompt)},
            {"role": "assistant", "content": completion},
        ]
        texts.append(tok.apply_chat_template(messages, tokenize=False))
    return texts


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
