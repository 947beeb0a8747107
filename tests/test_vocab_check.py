"""The vocabulary check (`scripts/check_vocab.py`) catches a metric name written as a literal
outside `isolab/vocab.py`, and passes vocab.py itself, docstrings and f-string fragments."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _checker():
    path = REPO / "scripts" / "check_vocab.py"
    spec = importlib.util.spec_from_file_location("check_vocab", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _package(tmp_path: Path, body: str) -> Path:
    package = tmp_path / "isolab"
    package.mkdir()
    (package / "vocab.py").write_text((REPO / "isolab" / "vocab.py").read_text())
    (package / "planted.py").write_text(body)
    return package


def test_a_planted_metric_literal_is_caught_with_its_line(tmp_path):
    package = _package(
        tmp_path,
        'from isolab.vocab import EVAL_AVG\n\nx = {"eval/avg@4": 1, EVAL_AVG: 2}\n'
        'y = metrics["flops_step/total"]\nz = df.sort("run_key")\n',
    )
    found = _checker().check(package, package / "vocab.py")
    assert [line.split(": ", 1)[0].rsplit("/", 1)[-1] for line in found] == [
        "planted.py:3",
        "planted.py:4",
        "planted.py:5",
    ]
    assert "'eval/avg@4'" in found[0] and "isolab.vocab" in found[0]


def test_docstrings_f_string_fragments_statuses_and_reward_names_pass(tmp_path):
    package = _package(
        tmp_path,
        '"""Logs `eval/avg@4` and `run_key`."""\n\n'
        "def f(stat, k):\n"
        '    """`flops_step/total`, per step."""\n'
        '    return f"eval/{stat}@{k}", "FINISHED", "sparse", "rollouts"\n',
    )
    assert _checker().check(package, package / "vocab.py") == []


def test_vocab_defines_the_names_and_prefixes_it_checks():
    names, prefixes = _checker().vocabulary()
    assert {"run_key", "flops_step/search", "time/reward_s", "eval/avg@4"} <= names
    assert {"eval/", "flops/", "flops_step/", "time/", "compute/", "eval-"} <= set(prefixes)
    assert "RUNNING" not in names and "prm" not in names
    # vocab.py itself, the one place names are written, is never a violation
    assert not [line for line in _checker().check() if "isolab/vocab.py" in line]
