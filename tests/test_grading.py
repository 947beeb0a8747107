"""Answer extraction and checking (isolab.tasks.grading) and the GSM8K / MATH-500 tasks.

The gold-answer checks run over the full local copies of the data sets (``../shared/data``, or
``$ISOLAB_DATA_DIR``) and skip when neither is there.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from isolab.tasks import grading, gsm8k, math500
from isolab.tasks.base import Problem
from isolab.tasks.grading import (
    extract_boxed,
    extract_gsm8k_answer,
    gsm8k_equal,
    math_equal,
    normalize_number,
)


def _data_dir() -> Path | None:
    for candidate in (
        Path(__file__).resolve().parents[2] / "shared" / "data",
        Path(os.environ.get("ISOLAB_DATA_DIR", "")),
    ):
        if str(candidate) != "." and (candidate / "gsm8k" / "test.jsonl").is_file():
            return candidate
    return None


DATA_DIR = _data_dir()
needs_data = pytest.mark.skipif(
    DATA_DIR is None,
    reason="local GSM8K/MATH-500 copies not found at ../shared/data nor $ISOLAB_DATA_DIR",
)


def _rows(relative: str) -> list[dict]:
    assert DATA_DIR is not None
    with (DATA_DIR / relative).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


# ---- gold answers -------------------------------------------------------------------------
@needs_data
def test_gsm8k_gold_solutions_all_graded_correct():
    rows = _rows("gsm8k/test.jsonl")
    problems = gsm8k.load_problems("test", data_dir=DATA_DIR)
    assert len(problems) == len(rows) == 1319
    correct = sum(
        gsm8k.verify(row["answer"], p.answer) for row, p in zip(rows, problems, strict=True)
    )
    assert correct == 1319


#: How real completions end: a marked answer followed by checks, units, markdown, LaTeX.
STYLES = [
    "The answer is {gold}. Let me double-check: 2+2=4.",
    "**Answer:** {gold}\n\nCheck: 3 * 4 = 12, 12 + 1 = 13.",
    "Final answer: ${gold} in total (paid over 12 months).",
    "So she has {gold} apples.\n\n### Final Answer\nThe answer is {gold} apples. Verified in 2 steps.",
    "Putting it together, the answer is $\\boxed{{{gold}}}$. Sanity check: 10 - 3 = 7.",
    "#### {gold}\n\nNote: step 3 used 7 * 6 = 42.",
]


@needs_data
@pytest.mark.parametrize("style", STYLES, ids=range(len(STYLES)))
def test_gsm8k_marked_answers_win_over_trailing_numbers(style):
    """Every gold answer of the GSM8K test set, written in each completion style, grades
    correct; with the gold answer off by one it grades wrong."""
    problems = gsm8k.load_problems("test", data_dir=DATA_DIR)
    right = sum(gsm8k.verify(style.format(gold=p.answer), p.answer) for p in problems)
    wrong = sum(gsm8k.verify(style.format(gold=int(p.answer) + 1), p.answer) for p in problems)
    assert (right, wrong) == (len(problems), 0)


@needs_data
def test_math500_gold_answers_match_their_solutions_boxed_answer():
    rows = _rows("math500/test.jsonl")
    problems = math500.load_problems(data_dir=DATA_DIR)
    assert len(problems) == 500
    boxed = [extract_boxed(row["solution"]) for row in rows]
    assert (
        sum(
            math500.verify(row["solution"], p.answer) for row, p in zip(rows, problems, strict=True)
        )
        >= 495
    )
    assert sum(math_equal(b, p.answer) for b, p in zip(boxed, problems, strict=True)) >= 495


@needs_data
def test_math500_gold_answers_match_through_math_verify_alone():
    """Without the string and number shortcuts of `math_equal`: sympy equivalence only."""
    rows = _rows("math500/test.jsonl")
    matched = sum(
        grading._math_verify(extract_boxed(row["solution"]) or "", row["answer"], 2) for row in rows
    )
    assert matched >= 495


# ---- wrong answers are rejected -------------------------------------------------------------
MATH_WRONG = [
    ("43", "42"),  # off by one
    ("41", "42"),
    ("-50", "50"),  # sign flips
    ("50", "-50"),
    ("\\frac{\\pi}{6}", "-\\frac{\\pi}{6}"),
    ("\\frac{3}{65}", "\\frac{3}{56}"),  # wrong fractions
    ("\\frac{14}{5}", "\\frac{14}{3}"),
    ("\\frac{4}{5}", "\\frac43"),
    ("1/3", "\\frac{1}{2}"),
    ("0.333", "\\frac{1}{3}"),  # rounded too early
    ("[3,4)", "(3,4]"),  # swapped interval ends
    ("(3,4)", "(3,4]"),
    ("[-2,7)", "x \\in [-2,7]"),
    ("6 + 5i", "6 - 5i"),
    ("6 - 5i", "6+9i"),
    ("x=6", "x=5"),
    ("y = 2x", "y = -2x"),
    ("100^\\circ", "90^\\circ"),
    ("\\text{Bob}", "\\text{Evelyn}"),
    ("\\text{west}", "\\text{east}"),
    ("2k+1", "2k+2"),
    ("3x", "3"),
    ("1 \\pm \\sqrt{17}", "1 \\pm \\sqrt{19}"),
    ("\\sqrt{52}", "\\sqrt{51}"),
    ("3\\sqrt{12}", "3\\sqrt{13}"),
    ("2\\pi", "\\pi"),
    ("\\tan x", "\\cot x"),
    ("p + q", "p - q"),
    ("3, 5", "3, 5, 7"),  # missing solution
    ("1,2", "1,-2"),
    ("\\left( 3, \\frac{\\pi}{3} \\right)", "\\left( 3, \\frac{\\pi}{2} \\right)"),
    ("(\\frac{\\pi}{2}, 3)", "\\left( 3, \\frac{\\pi}{2} \\right)"),  # swapped coordinates
    ("(6,31,1)", "(6,31,-1)"),
    ("x^5 - x^4 + x^3 - x^2 + x + 1", "x^5 - x^4 + x^3 - x^2 + x - 1"),
    ("(a+2)(b+5)", "(a+5)(b+2)"),
    (
        "\\begin{pmatrix} 1/3 \\\\ 2/3 \\\\ 5/3 \\end{pmatrix}",
        "\\begin{pmatrix} -1/3 \\\\ 2/3 \\\\ 5/3 \\end{pmatrix}",
    ),
    ("\\{1\\pm\\sqrt{5},2\\}", "\\{1\\pm\\sqrt{5},-2\\}"),
    ("0.16", "0.15"),
    ("53_8", "52_8"),
]

MATH_EQUIVALENT = [
    ("14/3", "\\frac{14}{3}"),
    ("\\dfrac{14}{3}", "\\frac{14}{3}"),
    ("\\frac{4}{3}", "\\frac43"),
    ("0.5", "\\frac12"),
    ("x = 5", "5"),
    ("90", "90^\\circ"),
    ("(3, \\pi/2)", "\\left( 3, \\frac{\\pi}{2} \\right)"),
    ("-q + p", "p - q"),
    ("-2, 1", "1,-2"),
    ("6-5i", "6 - 5i"),
    ("\\sqrt{2}\\cdot 11", "11\\sqrt2"),
    ("\\frac{3\\sqrt3}{4}", "\\frac{3\\sqrt{3}}{4}"),
    ("ab+2a+5b+10", "(a+5)(b+2)"),
    ("[-2,7]", "x \\in [-2,7]"),
    ("Evelyn", "\\text{Evelyn}"),
    ("1,000", "1000"),
]


@pytest.mark.parametrize(("pred", "gold"), MATH_WRONG)
def test_math_equal_rejects_wrong_answers(pred, gold):
    assert not math_equal(pred, gold)


@pytest.mark.parametrize(("pred", "gold"), MATH_EQUIVALENT)
def test_math_equal_accepts_equivalent_forms(pred, gold):
    assert math_equal(pred, gold)


@pytest.mark.parametrize(
    ("completion", "gold", "expected"),
    [
        ("5 + 3 = 8.\n#### 8", "8", True),
        ("So she pays $1,450,000 in total.\n#### 1,450,000", "1450000", True),
        ("The answer is \\boxed{18}.", "18", True),
        ("The answer is \\boxed{\\$18.00}.", "18", True),
        ("#### 18 dollars", "18", True),
        ("#### The total is 18.", "18", True),
        ("12 apples and 7 pears: 19 fruits.", "19", True),
        ("She went from 25 to 15, so 25-15 = 10", "10", True),
        ("It dropped by 3 degrees to -4", "-4", True),
        ("#### 19", "18", False),  # off by one
        ("#### 1,450,001", "1450000", False),
        ("#### 17", "18", False),
        ("#### -18", "18", False),  # sign flip
        ("#### 1.8", "18", False),
        ("#### 18\n\nWait, it is #### 20", "18", False),  # the last answer counts
        ("\\boxed{18} ... actually \\boxed{19", "18", False),  # truncated last box
        ("I do not know.", "18", False),
        ("The answer is 18. Let me double-check: 2+2=4.", "18", True),  # marked beats trailing
        ("**Answer:** 18 dollars\n\nCheck: 3 × 4 = 12 ✓", "18", True),
        ("Final answer: $1,450,000. (That is 1450 thousands.)", "1450000", True),
        ("The answer is 17. Let me double-check: 2+2=4.", "18", False),
        ("So the answer is -3 degrees; earlier it was 5.", "-3", True),
    ],
)
def test_gsm8k_verify(completion, gold, expected):
    assert gsm8k.verify(completion, gold) is expected


# ---- garbage never raises ----------------------------------------------------------------------
GARBAGE = [None, 5, 3.5, b"5", [], "", " ", "}}}{{{", "\\boxed{", "\\frac{", "####", "x" * 100_000]


@pytest.mark.parametrize("junk", GARBAGE, ids=range(len(GARBAGE)))
def test_garbage_input_returns_false_or_none(junk):
    assert extract_boxed(junk) is None or isinstance(extract_boxed(junk), str)
    assert extract_gsm8k_answer(junk) is None or isinstance(extract_gsm8k_answer(junk), str)
    assert normalize_number(junk) is None
    assert gsm8k_equal(junk, "5") is False
    assert math_equal(junk, "\\frac{1}{2}") is False
    assert math_equal("5", junk) is False
    assert math500.verify(junk, "5") is False
    assert gsm8k.verify(junk, "5") is False


def test_math_equal_works_outside_the_main_thread():
    """math-verify's timer is a signal, main thread only: other threads run without it."""
    results: list[bool] = []

    def grade() -> None:
        results.extend([math_equal("\\pi/2", "\\frac{\\pi}{2}"), math_equal("(3,4)", "[3,4]")])

    thread = threading.Thread(target=grade)
    thread.start()
    thread.join(timeout=30)
    assert results == [True, False]


# ---- extraction and numbers --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("so \\boxed{5}.", "5"),
        ("\\boxed{1} then \\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("\\boxed{\\{1,2\\}}", "\\{1,2\\}"),
        ("\\fbox{7}", "7"),
        ("\\boxed 5$.", "5"),
        ("\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}", "\\left( 3, \\frac{\\pi}{2} \\right)"),
        ("\\boxed{5} then \\boxed{6", None),
        ("no box", None),
    ],
)
def test_extract_boxed(text, expected):
    assert extract_boxed(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$1,234.50", 1234.5),
        ("\\$18.00", 18.0),
        ("25\\%", 25.0),
        ("18 dollars", 18.0),
        ("x = -3", -3.0),
        ("\\text{18}", 18.0),
        ("\\frac{3}{4}", 0.75),
        ("3/4", 0.75),
        ("10{,}000", 10000.0),
        ("5.", 5.0),
        ("1, 2", None),
        ("1,23", None),
        ("five", None),
    ],
)
def test_normalize_number(text, expected):
    assert normalize_number(text) == expected


# ---- tasks -------------------------------------------------------------------------------------
@needs_data
def test_load_problems_fields_and_limit():
    problems = gsm8k.load_problems("train", data_dir=DATA_DIR, limit=5)
    assert len(problems) == 5 and len({p.id for p in problems}) == 5
    assert all(p.answer.lstrip("-").isdigit() and p.difficulty is None for p in problems)
    maths = math500.load_problems(data_dir=str(DATA_DIR))
    assert len({p.id for p in maths}) == 500
    assert {p.difficulty for p in maths} == {1, 2, 3, 4, 5}


def test_load_problems_errors(tmp_path):
    with pytest.raises(ValueError, match="split"):
        gsm8k.load_problems("validation", data_dir=tmp_path)
    with pytest.raises(ValueError, match="only"):
        math500.load_problems("train", data_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="gsm8k"):
        gsm8k.load_problems("test", data_dir=tmp_path)


@pytest.mark.parametrize("task", [gsm8k, math500])
def test_chat_prompt_asks_for_a_boxed_answer(task):
    messages = task.chat_prompt(Problem(id="p", question="What is 2+2?", answer="4"))
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "What is 2+2?" in messages[1]["content"]
    assert "\\boxed{}" in messages[1]["content"]
