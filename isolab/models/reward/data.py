"""Synthetic training data of isolab's tiny reward models, and their step labels.

(prompt, completion) pairs of the raw arithmetic task, half correct, half perturbations of the
correct answer that mimic a policy's mistakes (a wrong digit, a missed or spurious carry, a
dropped, extra or swapped digit, garbage). A fixed tenth of the problem space (by hash) is never
trained on and holds the held-out evaluation. Deterministic by seed.

Labels per kind: an ORM's are the outcome on every step (`outcome_labels`), a PRM's whether
the answer is still right up to each step (`step_labels`); see `isolab.models.reward`.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass

from isolab.tasks.arithmetic import ArithmeticSpec, raw_prompt, raw_target, sample_problem
from isolab.tasks.base import Problem

#: Reward models by their supervision: outcome (final answer) or process (each step).
KINDS = ("orm", "prm")
#: One problem in `HELD_OUT_MOD` (by CRC32 of its id) is reserved for evaluation.
HELD_OUT_MOD = 10
#: Label of a step that is not trained on (after the first mistake, for a PRM).
UNLABELLED = -1


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
