"""Synthetic arithmetic: sums of integers with a difficulty knob, generated from a seed.

Two prompt styles:

- ``raw`` (tiny character-level models): the prompt is ``"12+345="`` and the model answers
  with the digits of the sum **least significant first** (``"753"``), then EOS. Reversed
  output lets a small transformer compute carries left to right, the trick that makes
  addition learnable for tiny models (Lee et al. 2023, "Teaching Arithmetic to Small
  Transformers", arXiv 2307.03381).
- ``chat`` (instruct LMs): a message asking for the sum with the final answer in ``\\boxed{}``.

The knobs: operand digits (``min_digits``..``max_digits``) and the number of terms.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from isolab.tasks.base import Problem

#: Characters of the raw style; the tiny tokenizer covers exactly these (plus specials).
RAW_ALPHABET = "0123456789+="


#: Most digits of an operand and most operands of a sum: far past what any model is tested on,
#: and below the sizes whose drawing never ends (`max_digits=100000000` hung an evaluation set).
MAX_DIGITS = 100
MAX_TERMS = 100
#: The knobs of `ArithmeticSpec` and the values each may take.
KNOB_RANGES = {
    "min_digits": (1, MAX_DIGITS),
    "max_digits": (1, MAX_DIGITS),
    "min_terms": (2, MAX_TERMS),
    "max_terms": (2, MAX_TERMS),
}


@dataclass(frozen=True)
class ArithmeticSpec:
    """The difficulty knobs of the problem family.

    Attributes:
        min_digits: fewest digits of an operand.
        max_digits: most digits of an operand.
        min_terms: fewest operands of a sum.
        max_terms: most operands of a sum.
    """

    min_digits: int = 1
    max_digits: int = 3
    min_terms: int = 2
    max_terms: int = 2

    def __post_init__(self) -> None:
        for knob, (low, high) in KNOB_RANGES.items():
            if not low <= getattr(self, knob) <= high:
                raise ValueError(f"{knob} = {getattr(self, knob)}: give {low} to {high}")
        if not 1 <= self.min_digits <= self.max_digits:
            raise ValueError(
                f"digits range [{self.min_digits}, {self.max_digits}]: need 1 ≤ min_digits ≤ max_digits"
            )
        if not 2 <= self.min_terms <= self.max_terms:
            raise ValueError(
                f"terms range [{self.min_terms}, {self.max_terms}]: need 2 ≤ min_terms ≤ max_terms"
            )


def sample_problem(rng: random.Random, spec: ArithmeticSpec = ArithmeticSpec()) -> Problem:
    """Draw one sum; the number of digits of each operand is uniform, then the value."""
    terms = rng.randint(spec.min_terms, spec.max_terms)
    operands = []
    for _ in range(terms):
        digits = rng.randint(spec.min_digits, spec.max_digits)
        low = 0 if digits == 1 else 10 ** (digits - 1)
        operands.append(rng.randint(low, 10**digits - 1))
    question = "+".join(str(x) for x in operands)
    return Problem(
        id=question, question=question, answer=str(sum(operands)), difficulty=_carries(operands)
    )


def generate_problems(
    count: int, seed: int = 0, spec: ArithmeticSpec = ArithmeticSpec(), unique: bool = True
) -> list[Problem]:
    """`count` problems, deterministic in `seed`; duplicates dropped when `unique`."""
    rng = random.Random(seed)
    seen: set[str] = set()
    problems: list[Problem] = []
    attempts = 0
    while len(problems) < count:
        attempts += 1
        if attempts > 50 * count + 1000:
            raise ValueError(
                f"cannot draw {count} distinct problems from {spec}; widen the digit range"
            )
        problem = sample_problem(rng, spec)
        if unique and problem.id in seen:
            continue
        seen.add(problem.id)
        problems.append(problem)
    return problems


def _carries(operands: list[int]) -> int:
    """Number of carry operations in the column sum: a natural difficulty label."""
    carries, carry, position = 0, 0, 0
    width = max(len(str(x)) for x in operands)
    while position < width:
        column = sum((x // 10**position) % 10 for x in operands) + carry
        carry = column // 10
        carries += carry > 0
        position += 1
    return carries


# ---- prompts -----------------------------------------------------------------------------
def raw_prompt(problem: Problem) -> str:
    """``"12+345="``: the tiny models' prompt."""
    return f"{problem.question}="


def raw_target(problem: Problem) -> str:
    """The completion a raw-style model must produce: the answer's digits reversed."""
    return problem.answer[::-1]


def chat_prompt(problem: Problem) -> list[dict[str, str]]:
    """Chat messages for instruct LMs, asking for a boxed final answer."""
    expression = problem.question.replace("+", " + ")
    return [
        {
            "role": "user",
            "content": f"What is {expression}? Give the final answer as \\boxed{{number}}.",
        }
    ]


# ---- verification -----------------------------------------------------------------------
_BOXED = re.compile(r"\\boxed\{\s*(-?\d+)\s*\}")
_NUMBER = re.compile(r"-?\d+")


def verify_raw(completion: str, answer: str) -> bool:
    """Raw style: the completion (up to EOS, which the decoder strips) must be exactly the
    reversed answer; trailing characters make it wrong, as they would for a grader."""
    return completion.strip() == answer[::-1]


def verify_chat(completion: str, answer: str) -> bool:
    """Chat style: the last ``\\boxed{n}``, else the last integer, must equal the answer."""
    boxed = _BOXED.findall(completion)
    found = boxed[-1] if boxed else (_NUMBER.findall(completion.replace(",", "")) or [None])[-1]
    return found is not None and found.lstrip("0") == answer.lstrip("0")
