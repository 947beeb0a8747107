"""Your own problems: a task card, a small YAML file that makes a task of a JSONL, CSV or parquet
file (or a `datasets` id), so that `task: path/to/task.yaml` trains, labels difficulty, sweeps
and plots as `task: gsm8k` does.

A card (every path relative to the card's folder)::

    name: word-problems              # letters, digits, - and _: names its caches
    data: problems.jsonl             # .jsonl, .csv or .parquet; or hub: {id, config, split,
                                     #   revision}: a hub id, or a local folder of data files
    validation: held_out.jsonl       # optional: else `val_share` of `data` is held out
    prompt: "{question}"             # a field, or a template over fields ({a} and {b})
    answer: answer                   # the field with the gold answer
    system: "Answer with a number."  # optional system message
    few_shot: 2                      # optional: the first k rows of `data` as worked examples
    verifier: numeric                # a grader of VERIFIERS, or module:function / file.py:function
    answer_regex: "Answer: (.*)"     # with verifier: regex, the group that holds the answer
    gold_format: boxed               # optional: boxed, bare, or a template "Answer: {answer}"
    max_completion_tokens: 256

A verifier given as `module:function` (or `path/to/file.py:function`, relative to the card) is
called as `function(completion_text, gold_answer) -> bool`: a plain Python function of yours
(`isolab.tasks.usercode`). It is code from a data folder, so isolab imports and runs it only
with `trust_remote_code: true` in the run config, and planning (`isolab flops`, `isolab sweep
plan`) never does.

A correct completion writes its answer one way, `gold_format` (`TaskCard.written_answer`): the
few-shot turns show the golds that way, every gold must pass the card's verifier written that
way (a card whose grader rejects its own golds is refused before any run; a verifier of its
own, once trusted, before any model loads), and a reward's pre-flight gets them that way.
`boxed` is `\\boxed{answer}`, `bare` the answer as it is, a template any text with `{answer}`
in it. Unset, it follows the verifier (`default_gold_format`): `boxed` for `numeric` and
`math`, and for any verifier where the system message asks for `\\boxed` (a prompt that asks
for a box and examples that show none disagree); else the pattern's own text for `regex`
("Answer: (.*)" → "Answer: {answer}"), and `bare` for `exact`, `choice` and a verifier of
your own.

Every column of the data reaches a reward function as a keyword argument under its own name, as
TRL passes a data set's columns (`TaskCard.columns`); the answer field also as `answer`, the gold
as text, which isolab's rule-based rewards read. A column named as one of TRL's own arguments
(`TRL_NAMES`), or `answer` where it is not the answer field, is refused when the card is read.
"""

from isolab.tasks.card.load import load_card
from isolab.tasks.card.taskcard import (
    ANSWER,
    CARD_KEYS,
    GOLD_FORMATS,
    GOLD_SLOT,
    TRL_NAMES,
    CardError,
    TaskCard,
    default_gold_format,
    is_card,
    written,
)
from isolab.tasks.card.verifiers import OPT_IN, VERIFIERS, code_refusal, verifier_of

__all__ = [
    "ANSWER",
    "CARD_KEYS",
    "GOLD_FORMATS",
    "GOLD_SLOT",
    "OPT_IN",
    "TRL_NAMES",
    "VERIFIERS",
    "CardError",
    "TaskCard",
    "code_refusal",
    "default_gold_format",
    "is_card",
    "load_card",
    "verifier_of",
    "written",
]
