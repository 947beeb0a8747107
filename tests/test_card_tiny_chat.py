"""`tiny-chat`: a tiny chat model for any task card, shipped, that trains in seconds on a CPU
and says that it measures plumbing, not the task (issue 48, item 1)."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest
import yaml

from isolab import models
from isolab.planning import model_config
from isolab.tasks import get_task


def _card(folder: Path, rows: int = 40) -> Path:
    """A card of the user's own: a JSONL of sums in words (not arithmetic's alphabet: letters,
    a euro sign, an accented name), one worked example, a system message asking for a box."""
    folder.mkdir()
    rng = random.Random(0)
    with (folder / "mine.jsonl").open("w", encoding="utf-8") as f:
        for i in range(rows):
            a, b = rng.randint(1, 9), rng.randint(1, 9)
            question = f"Zoë pays {a} € and then {b} € more. How many euros in all?"
            f.write(json.dumps({"id": f"q{i}", "question": question, "answer": str(a + b)}) + "\n")
    card = {
        "name": "euros",
        "data": "mine.jsonl",
        "id": "id",
        "prompt": "{question}",
        "answer": "answer",
        "system": "Answer with the number in \\boxed{}.",
        "few_shot": 1,
        "verifier": "numeric",
        "val_share": 0.25,
        "max_completion_tokens": 16,
    }
    (folder / "task.yaml").write_text(yaml.safe_dump(card, allow_unicode=True))
    return folder / "task.yaml"


def _run_config(path: Path, card: Path, model: str = "tiny-chat") -> Path:
    run = {
        "experiment": "tiny-chat-card",
        "model": model,
        "task": str(card),
        "reward": "sparse",
        "split": "all",
        "n": 4,
        "B_p": 2,
        "M": 3,
        "max_completion_tokens": 16,
        "eval_problems": 6,
        "eval_k_samples": 4,
        "eval_ks": [1, 4],
    }
    path.write_text(yaml.safe_dump(run))
    return path


def test_the_byte_tokenizer_covers_any_text_and_has_a_chat_template():
    """One token per UTF-8 byte, so a card's every character (accents, €, CJK) encodes and
    decodes back; ChatML renders the prompt and `<|im_end|>` ends the answer."""
    tok = models.build_byte_tokenizer()
    text = "Zoë pays 7 € — 日本 \\boxed{12}\n"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text.encode()) and tok.unk_token_id not in ids
    assert tok.decode(ids) == text
    rendered = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert rendered == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert tok.eos_token == "<|im_end|>" and tok.padding_side == "left"


def test_the_shipped_tiny_chat_is_the_model_that_is_planned():
    """Planning reads tiny-chat's shape from code, without installing it: the same config the
    shipped weights were saved with, so the ledger's FLOPs are the trained model's."""
    shipped = json.loads((models.shipped_dir("tiny-chat") / "config.json").read_text())
    planned = model_config("tiny-chat").to_dict()
    for key in (
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "max_position_embeddings",
    ):
        assert planned[key] == shipped[key], key
    info = models.shipped_info("tiny-chat")
    assert info["params"] == 115_392 and info["boxed"] >= 0.9  # its warm start: the format


def test_a_tiny_arithmetic_model_on_a_card_names_tiny_chat(cli, tmp_path: Path):
    """tiny-m knows 12 characters: on a card it is refused in seconds, naming the model to use
    instead, before anything loads (`isolab flops`) and before any run exists (`isolab
    train`)."""
    config = _run_config(tmp_path / "run.yaml", _card(tmp_path / "card"), model="tiny-m")
    for command in ("flops", "train"):
        args = [command, str(config)] + (
            ["--tracking-uri", f"sqlite:///{tmp_path / 's.db'}"] if command == "train" else []
        )
        started = time.perf_counter()
        result = cli(*args)
        text = " ".join(result.output.split())
        assert result.exit_code == 2, (command, result.output)
        assert "tiny-chat" in text and "tiny-m" in text, (command, text)
        assert time.perf_counter() - started < 30


def test_a_card_of_your_own_trains_on_tiny_chat_in_seconds(cli, tmp_path: Path, monkeypatch):
    """`model: tiny-chat` on a card with its own JSONL: `isolab flops` plans it, `isolab train`
    trains 3 steps and evaluates before and after, through the command line, from a fresh
    cache (the shipped weights installed on first use), each saying what tiny-chat measures.
    The ledger matches the plan, and the chat prompt the model saw holds the card's text."""
    from isolab.planning import plan_config
    from isolab.tracking.runs import load_runs

    monkeypatch.setenv("ISOLAB_CACHE", str(tmp_path / "cache"))
    card = _card(tmp_path / "card")
    config = _run_config(tmp_path / "run.yaml", card)
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    planned = cli("flops", str(config))
    assert planned.exit_code == 0, planned.output
    assert "plumbing" in planned.output and "nothing about the task" in planned.output
    started, cpu = time.perf_counter(), time.process_time()
    trained = cli("train", str(config), "--tracking-uri", uri)
    wall_s, cpu_s = time.perf_counter() - started, time.process_time() - cpu
    assert trained.exit_code == 0, trained.output
    assert "validation: base → final" in trained.output and "plumbing" in trained.output
    # CPU time, not wall: the suite shares its cores (issue 48 asks ≤ 60 s of CPU)
    assert cpu_s < 60, (cpu_s, wall_s)
    runs = load_runs("tiny-chat-card", tracking_uri=uri).sort("step")
    assert runs["step"].to_list() == [0, 3] and runs["eval/avg@4"].is_not_null().all()
    from isolab.config import RunConfig

    cfg = RunConfig.from_yaml(config)
    plan = plan_config(cfg)
    assert runs["flops/total"][-1] / plan["flops/total"] == pytest.approx(1.0, abs=0.10)
    tok = models.load("tiny-chat")[1]
    task = get_task(str(card), "chat")
    text = tok.apply_chat_template(
        task.prompt(task.problems("train")[0]), tokenize=False, add_generation_prompt=True
    )
    assert "Zoë pays" in tok.decode(tok(text, add_special_tokens=False)["input_ids"])
