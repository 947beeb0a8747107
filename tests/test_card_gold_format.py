"""A card's golds are written one declared way (`gold_format`): the worked examples, the check of
the golds and a reward's pre-flight agree with it, and with a system message that asks for a
box (issue 48, item 3)."""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

import pytest
import yaml

from isolab.tasks import get_task
from isolab.tasks.card import CardError, default_gold_format, load_card, written

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "word-problems"
#: A verifier of the user's that reads a boxed answer, as the issue's researcher wrote one.
BOXED = (
    "import re\n\n\ndef verify(completion, gold):\n"
    "    found = re.findall(r'\\\\boxed\\{([^}]*)\\}', completion)\n"
    "    return bool(found) and found[-1].strip() == gold\n"
)
#: One that compares the whole completion with the gold.
BARE = "def verify(completion, gold):\n    return completion.strip() == gold\n"


@pytest.fixture
def card_dir(tmp_path: Path) -> Path:
    out = tmp_path / "wp"
    shutil.copytree(EXAMPLE, out)
    return out


def _card(card_dir: Path, code: str | None = None, **changes) -> Path:
    if code is not None:
        (card_dir / "mine.py").write_text(code)
        changes.setdefault("verifier", "mine.py:verify")
    path = card_dir / "task.yaml"
    data = yaml.safe_load(path.read_text())
    data.update({k: v for k, v in changes.items() if v is not None})
    for key in [k for k, v in changes.items() if v is None]:
        data.pop(key, None)
    path.write_text(yaml.safe_dump(data))
    return path


def _shots(path: Path) -> list[str]:
    """The assistant turns of a card's prompt: its worked examples' golds as written."""
    task = get_task(str(path), "chat")
    return [
        m["content"] for m in task.prompt(task.problems("train")[0]) if m["role"] == "assistant"
    ]


def test_a_boxed_verifier_of_your_own_passes_its_golds_where_the_system_asks_for_a_box(
    card_dir: Path,
):
    """The example's system message asks for \\boxed{}: a verifier of the user's is then given
    boxed golds, and the worked examples show the box (they were written bare, refused by a
    boxed verifier, and disagreed with the system message)."""
    path = _card(card_dir, BOXED)
    card = load_card(path, run_code=True)  # the golds' check runs the verifier
    assert card.gold_format == "boxed"
    assert _shots(path) == ["\\boxed{49}", "\\boxed{36}"]


def test_a_declared_gold_format_rules_the_examples_and_the_check(card_dir: Path, caplog):
    """`gold_format: bare` with a verifier that compares the whole text: bare examples, golds
    accepted; the system message's box then disagrees, which a warning says. A boxed verifier
    on bare golds is refused naming the format it accepts."""
    with caplog.at_level(logging.WARNING, logger="isolab.tasks.card"):
        path = _card(card_dir, BARE, gold_format="bare")
        load_card(path, run_code=True)
    assert _shots(path) == ["49", "36"]
    assert "asks for \\boxed" in caplog.text and "gold_format: boxed?" in caplog.text
    path = _card(card_dir, BOXED, gold_format="bare")
    with pytest.raises(CardError, match="gold_format") as info:
        load_card(path, run_code=True)
    assert re.search(r"gold answer '(\d+)' written as '\1' \(gold_format: bare\)", str(info.value))
    assert "set gold_format: boxed in the card" in str(info.value)


def test_a_template_writes_the_golds_and_a_bad_format_names_the_key(card_dir: Path):
    path = _card(card_dir, gold_format="The answer is {answer}.", verifier="numeric")
    assert _shots(path) == ["The answer is 49.", "The answer is 36."]
    assert load_card(path).written_answer("7") == "The answer is 7."
    for bad in ("boxxed", 3, "Answer: {gold}"):
        path = _card(card_dir, gold_format=bad)
        with pytest.raises(CardError, match="gold_format: .*template with \\{answer\\}"):
            load_card(path)


def test_each_verifier_kind_has_one_documented_default():
    assert default_gold_format("numeric", None, None) == "boxed"
    assert default_gold_format("math", None, None) == "boxed"
    assert default_gold_format("exact", None, None) == "bare"
    assert default_gold_format("choice", None, "Pick one.") == "bare"
    assert default_gold_format("choice", None, "Put the letter in \\boxed{}.") == "boxed"
    assert default_gold_format("mine.py:verify", None, None) == "bare"
    assert default_gold_format("regex", "Answer: (.*)", None) == "Answer: {answer}"
    assert default_gold_format("regex", r"(\d+)$|x", None) == "bare"  # not a simple literal
    assert written("boxed", "3") == "\\boxed{3}" and written("Answer: {answer}", "3") == "Answer: 3"
    assert written("\\boxed{{answer}}", "3") == "\\boxed{3}"  # a template's own braces stay


def test_a_rewards_preflight_gets_the_golds_as_the_card_writes_them(card_dir: Path):
    """The reward's pre-flight writes each gold in the card's format, then a deliberately wrong
    answer the same way."""
    from isolab.rl.user_rewards import preflight_batch

    path = _card(card_dir, gold_format="Answer: {answer}", verifier="numeric")
    task = get_task(str(path), "chat")
    batch = preflight_batch(task, task.problems("train")[:2])
    texts = [c[0]["content"] for c in batch["completions"]]
    golds = [p.answer for p in task.problems("train")[:2]]
    assert texts == [
        f"Answer: {golds[0]}",
        f"Answer: {int(golds[0]) + 1}",
        f"Answer: {golds[1]}",
        f"Answer: {int(golds[1]) + 1}",
    ]
