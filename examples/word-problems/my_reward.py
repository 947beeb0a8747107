"""A reward function written for TRL, used unchanged by isolab (`reward: <this file>:my_reward`).

TRL calls it with the prompts, the completions (chat messages for chat prompts) and every other
dataset column as keyword arguments: isolab passes each column of the card's data under its own
name (here `id`, `question`), and the gold answer as text as `answer`.
"""

import re

_NUMBER = re.compile(r"-?\d+")


def my_reward(prompts, completions, answer, **kwargs):
    """1.0 for the right final number, 0.1 for any number at all, else 0."""
    out = []
    for completion, gold in zip(completions, answer, strict=True):
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        numbers = _NUMBER.findall(text)
        out.append(1.0 if numbers and numbers[-1] == gold else 0.1 if numbers else 0.0)
    return out
