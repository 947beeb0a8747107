"""Final-answer extraction and checking for GSM8K and MATH.

Rule-based rewards call these once per rollout, so they must be fast and must never raise:
every public function returns ``None``/``False`` on garbage input.

- GSM8K golds are numbers (``#### 1,450,000``): answers are compared as numbers after
  stripping commas, currency, percent signs and unit words (:func:`normalize_number`).
- MATH golds are LaTeX (``\\frac{3}{56}``, ``(3,4]``, ``\\begin{pmatrix}…``): answers are
  compared by math-verify (https://github.com/huggingface/Math-Verify), which parses both
  sides to sympy and checks equivalence, after two cheap checks that settle most calls
  without sympy: equal strings up to cosmetic LaTeX, and equal plain numbers.

math-verify guards each parse and comparison with ``signal.alarm``, which only works in the
main thread; elsewhere :func:`math_equal` runs it without a timer and refuses answers longer
than :data:`MAX_SYMPY_CHARS`, so that a pathological expression cannot stall a worker.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from functools import lru_cache
from typing import cast

log = logging.getLogger(__name__)

#: Answers longer than this are not handed to sympy outside the main thread (no timer there).
MAX_SYMPY_CHARS = 300
#: Seconds math-verify may take per parse and comparison before an answer counts as wrong. At 2 s
#: an equivalent pair (`(3, \pi/2)` against `\left( 3, \frac{\pi}{2} \right)`) timed out on
#: a 2-core machine running a sweep beside the tests: a wrong grade, not a slow one.
MATH_TIMEOUT_S = 5
#: Answers longer than this are never handed to sympy: no real MATH answer comes close.
MAX_ANSWER_CHARS = 2000

_BOX_COMMANDS = ("\\boxed", "\\fbox")
# A minus sign counts only where it cannot be a subtraction (`5-3` gives `5`, `3`).
_NUMBER = re.compile(r"(?:(?<![\w).])-)?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)")
#: An answer the completion marks as such: "the answer is 18", "Final answer: $18",
#: "**Answer:** 18 dollars", "answer = 18" (the number right after the marker).
_MARKED_ANSWER = re.compile(
    r"\b(?:final\s+answer|answer)\b\s*(?:is|was|would\s+be|will\s+be|=|:)?[\s*:=$(\\]*"
    r"(?P<number>-?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+))",
    re.IGNORECASE,
)


# ---- extraction ------------------------------------------------------------------------------
def extract_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{…}`` (or ``\\fbox{…}``) in `text`, braces balanced.

    Escaped braces (``\\{``, ``\\}``) do not count. ``\\boxed 5`` (no braces) gives ``"5"``.
    An unclosed last box (a truncated completion) gives None rather than an earlier box, so
    that an answer the model went on to revise is not graded.
    """
    if not isinstance(text, str):
        return None
    start = max(text.rfind(cmd) for cmd in _BOX_COMMANDS)
    if start < 0:
        return None
    i = start + (len("\\boxed") if text.startswith("\\boxed", start) else len("\\fbox"))
    if i < len(text) and text[i] == " ":
        # `\boxed 5`: TeX takes the next token as the argument.
        token = text[i:].split(maxsplit=1)
        content = token[0].rstrip("$.") if token else ""
        return content or None
    if i >= len(text) or text[i] != "{":
        return None
    depth, j = 0, i
    while j < len(text):
        char = text[j]
        if char == "\\":
            j += 2  # skip the escaped character: `\{` and `\}` are literal braces
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                content = text[i + 1 : j].strip()
                return content or None
        j += 1
    return None


def extract_gsm8k_answer(text: str) -> str | None:
    """The final answer of a GSM8K-style completion: after the last ``####``, else the last
    ``\\boxed{}``, else the number after the last marker ("the answer is", "Final answer:",
    "**Answer:**"), else the last number in the text. A marked answer wins over numbers that
    follow it ("The answer is 18. Let me double-check: 2+2=4." is 18)."""
    if not isinstance(text, str):
        return None
    if "####" in text:
        tail = text.rsplit("####", 1)[1].strip().split("\n", 1)[0].strip()
        if tail and normalize_number(tail) is None:
            # `#### The total is 18.`: keep the number, not the sentence.
            numbers = _NUMBER.findall(tail)
            tail = numbers[0] if numbers else tail
        if tail:
            return tail
    boxed = extract_boxed(text)
    if boxed is not None:
        return boxed
    marked = list(_MARKED_ANSWER.finditer(text))
    if marked:
        return marked[-1]["number"]
    numbers = _NUMBER.findall(text)
    return numbers[-1] if numbers else None


# ---- numbers ---------------------------------------------------------------------------------
_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mathbf|mbox|textrm)\s*\{([^{}]*)\}")
_FRAC = re.compile(r"\\[dt]?frac\s*\{([^{}]+)\}\s*\{([^{}]+)\}")
_LATEX_NOISE = re.compile(r"\\[,;:! ]|\\left|\\right|~|\\\$|\$|\\%|%|\^\s*\{?\\circ\}?")
_LEADING_VARIABLE = re.compile(r"^[A-Za-z]\w*\s*=\s*")
_NUMBER_WITH_UNITS = re.compile(
    r"^(?P<sign>[-+]?)\s*(?P<num>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)"
    r"(?:\s*/\s*(?P<den>\d+(?:\.\d+)?))?"
    r"\s*(?P<unit>[A-Za-z][A-Za-z .'/-]*)?$"
)


def normalize_number(s: str | None, allow_units: bool = True) -> float | None:
    """`s` as a float, or None when it is not a single number.

    Accepts thousands separators (``1,450,000``), currency and percent signs (``$18``,
    ``\\$18.00``, ``25\\%``: the number, not a fraction), LaTeX wrappers (``\\text{18}``,
    ``\\frac{3}{4}``, ``{,}``), a trailing period, a leading ``x =``, a simple fraction
    ``3/4`` and, when `allow_units`, trailing unit words (``18 dollars``, ``5 cm``; off for
    MATH, where ``3x`` is not ``3``). Lists (``1, 2``) are not numbers.
    """
    if not isinstance(s, str) or len(s) > 200:
        return None
    t = s.strip()
    t = _TEXT_WRAPPER.sub(r"\1", t)
    t = _FRAC.sub(r"\1/\2", t)
    t = t.replace("{,}", ",").replace("\\cdot", "*")
    t = _LATEX_NOISE.sub("", t)
    t = t.replace("{", "").replace("}", "").replace("−", "-").strip().rstrip(".").strip()
    t = _LEADING_VARIABLE.sub("", t)
    match = _NUMBER_WITH_UNITS.match(t)
    if match is None or (match["unit"] and not allow_units):
        return None
    try:
        value = float(match["num"].replace(",", ""))
        if match["den"] is not None:
            value /= float(match["den"])
    except (ValueError, ZeroDivisionError):
        return None
    value = -value if match["sign"] == "-" else value
    return value if math.isfinite(value) else None


def numbers_equal(a: float, b: float) -> bool:
    """Equal up to float noise; tight enough that 1,450,001 is not 1,450,000."""
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)


def gsm8k_equal(pred: str | None, gold: str) -> bool:
    """Whether the predicted final answer equals the gold GSM8K number."""
    p, g = normalize_number(pred), normalize_number(gold)
    return p is not None and g is not None and numbers_equal(p, g)


# ---- LaTeX (MATH) ----------------------------------------------------------------------------
_COSMETIC = re.compile(r"\s+|\\left|\\right|\\[,;:! ]|\\displaystyle|\^\s*\{?\\circ\}?|\$")


def _cosmetic(s: str) -> str:
    """`s` with the LaTeX that does not change its meaning removed (spacing, sizing)."""
    t = _TEXT_WRAPPER.sub(r"\1", s)
    t = t.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    return _COSMETIC.sub("", t).rstrip(".")


@lru_cache(maxsize=4096)
def _parse(latex: str, timeout_s: int | None) -> tuple:
    """math-verify's parse of one answer, wrapped in a box so its LaTeX extractor finds it."""
    from math_verify import parse

    # math-verify annotates `parsing_timeout: int` but takes None (no alarm: off the main thread)
    return tuple(parse(f"\\boxed{{{latex}}}", parsing_timeout=cast(int, timeout_s)))


def math_equal(pred: str | None, gold: str, timeout_s: int = MATH_TIMEOUT_S) -> bool:
    """Whether `pred` and `gold` are the same MATH answer (LaTeX equivalence).

    Order of checks: equal up to cosmetic LaTeX → True; both plain numbers → compare them;
    otherwise math-verify with a `timeout_s` limit per parse and comparison (main thread
    only, see the module docstring). Errors and timeouts count as not equal.
    """
    if not isinstance(pred, str) or not isinstance(gold, str):
        return False
    pred, gold = pred.strip(), gold.strip()
    if not pred or not gold:
        return False
    if _cosmetic(pred) == _cosmetic(gold):
        return True
    p, g = normalize_number(pred, allow_units=False), normalize_number(gold, allow_units=False)
    if p is not None and g is not None and numbers_equal(p, g):
        return True
    longest = max(len(pred), len(gold))
    in_main = threading.current_thread() is threading.main_thread()
    if longest > MAX_ANSWER_CHARS or (not in_main and longest > MAX_SYMPY_CHARS):
        return False
    return _math_verify(pred, gold, timeout_s if in_main else None)


def _math_verify(pred: str, gold: str, timeout_s: int | None) -> bool:
    from math_verify import verify
    from math_verify.errors import TimeoutException

    try:
        gold_parsed = _parse(gold, timeout_s)
        pred_parsed = _parse(pred, timeout_s)
        if not gold_parsed or not pred_parsed:
            return False
        return bool(verify(list(gold_parsed), list(pred_parsed), timeout_seconds=timeout_s))
    except (Exception, TimeoutException):
        log.debug("math-verify failed on %r vs %r", pred[:80], gold[:80], exc_info=True)
        return False
