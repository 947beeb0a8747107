"""Check that isolab writes metric and column names once, in `isolab/vocab.py`, and uses them.

    python scripts/check_vocab.py        # exit 1 and one line per violation

A name written as a literal in two modules drifts (`cli/train.py` once checked `EVAL_AVG` but
read `metrics['eval/avg@4']`): every string constant of an isolab module other than vocab.py
that equals a name vocab.py defines (`"run_key"`, `"compute/rho"`), or that starts with one of
its metric prefixes (`eval/`, `flops_step/`, `time/` …), is a violation. Docstrings are prose
and are not checked, nor are the literal fragments of an f-string (`f"{EVAL_PREFIX}{stat}@{k}"`
builds a name from the vocabulary; its fragments are not names). Statuses (`RUNNING` …) are
vocab.py's too but are words of MLflow's, not metric names: they are left out.
"""

from __future__ import annotations

import ast
import sys
import typing
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "isolab"
VOCAB = PACKAGE / "vocab.py"


def vocabulary(vocab: Path = VOCAB) -> tuple[set[str], tuple[str, ...]]:
    """The names and the metric prefixes that `vocab` defines: every upper-case module-level
    string but the run statuses (tuples such as the reward systems' names are choices, not
    names); the prefixes are those that end in `/` or `-` (`eval/`, `eval-`)."""
    namespace: dict[str, typing.Any] = {"__name__": "vocab"}
    exec(compile(vocab.read_text(), str(vocab), "exec"), namespace)  # bottom layer: no imports
    statuses = set(typing.get_args(namespace.get("PointStatus", typing.Literal[""])))
    names: set[str] = set()
    for key, value in namespace.items():
        if not key.isupper():
            continue
        if isinstance(value, str) and value not in statuses:
            names.add(value)
    prefixes = tuple(sorted(n for n in names if n.endswith(("/", "-"))))
    return names, prefixes


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (module, class, function)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def violations_in(path: Path, names: set[str], prefixes: tuple[str, ...]) -> list[str]:
    """One line per metric-name literal in `path`: `file:line: "name": use isolab.vocab`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            skip |= {id(part) for part in node.values}
        # a bare string statement (a comment-like attribute docstring `#:` after a name)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skip.add(id(node.value))
    found = sorted(
        (node.lineno, node.col_offset, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and (node.value in names or (prefixes and node.value.startswith(prefixes)))
    )
    return [
        f"{path}:{line}: {text!r}: use the name isolab.vocab defines" for line, _, text in found
    ]


def check(package: Path = PACKAGE, vocab: Path = VOCAB) -> list[str]:
    """Every violation under `package`, one line each (empty when all names come from vocab)."""
    names, prefixes = vocabulary(vocab)
    out = []
    for path in sorted(package.rglob("*.py")):
        if path.resolve() != vocab.resolve():
            out += violations_in(path, names, prefixes)
    return out


if __name__ == "__main__":
    found = check()
    root = PACKAGE.parent
    for line in found:
        print(line.removeprefix(f"{root}/"))
    print(
        f"{len(found)} metric-name literal(s) outside isolab/vocab.py"
        if found
        else "vocabulary: ok, every metric name comes from isolab/vocab.py"
    )
    sys.exit(1 if found else 0)
