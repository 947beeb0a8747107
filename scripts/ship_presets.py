"""Maintainers: rebuild the shipped base models from scratch and write them into isolab/presets/.

    .venv/bin/python scripts/ship_presets.py tiny-s tiny-m tiny-l tiny-chat tiny-orm tiny-prm
    .venv/bin/python scripts/ship_presets.py --check tiny-chat   # rebuild, compare, write nothing

Each tiny arithmetic preset is warm-started to its target regime (`isolab.models.WarmStartTarget`)
in a private cache, its default pool (4,000 arithmetic problems, seed 0) is labelled by avg@16,
and the weights, tokenizer, build record (spec, steps, loss, probe history, histogram, split
sizes, sha256 of every file) and the pool's correct counts are copied to
`isolab/presets/<name>/`. tiny-m also ships the labels of the CPU testbed's 96,000-problem pool
(`LARGE_POOLS`; ≈ 17 min of sampling on 2 cores), each labels file with its sha256 in the build
record. `tiny-chat` (the tiny model of task cards) is warm-started on its generic numeric-answer
format (`isolab.models.chat_warm_start`) and ships no labels: it runs on cards, which bring
their own data. Reward models are trained from the tiny-m in `isolab/presets/tiny-m/` (ship it
first). The result is CPU-dependent: commit it once, and every machine then installs the same
bytes. `--check` rebuilds into the private cache only and prints, file by file, whether the
rebuild matches the shipped sha256 (exit 1 when one differs): shipped weights are never
overwritten by a check.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from isolab.difficulty import Splits

POOL, SEED = 4000, 0
#: Larger pools whose labels a preset also ships (the CPU studies train on them).
LARGE_POOLS = {"tiny-m": (96000,)}
#: What a rebuild may change in a shipped build record without changing the model: the time
#: it took, the day and the source (the record's own sha256 is not compared).
VOLATILE = ("build_time_s", "built_on", "source")


def build(name: str) -> tuple[Path, Splits | None]:
    """Rebuild preset `name` from scratch in the private cache: its folder, and for a tiny
    arithmetic preset the labels of its default pool (recorded in its build record), else None."""
    from isolab import difficulty, models
    from isolab.models import reward as reward_models

    if models.is_reward_preset(name):
        models.build("tiny-m")  # the shipped tiny-m, installed into the private cache
        return reward_models.build(name, from_scratch=True), None
    folder = models.build(
        name, from_scratch=True, progress=lambda s, t, status: _tick(name, s, status)
    )
    if models.is_chat_preset(name):  # trains on task cards: no arithmetic pool to label
        _template_inline(folder)
        return folder, None
    splits = difficulty.load_or_label(name, "arithmetic", pool_size=POOL, seed=SEED, force=True)
    difficulty.record_in_build_info(splits, POOL, SEED)
    return folder, splits


def _template_inline(folder: Path) -> None:
    """Keep a chat preset's template inside its tokenizer_config.json, as the shipped tiny-chat
    has it (one file fewer, and the form every transformers version reads): transformers 5
    saves a fresh tokenizer's template apart, in chat_template.jinja. The tokenizer is read
    back from `folder` and saved again, and the build record's file digests follow."""
    from transformers import AutoTokenizer

    from isolab import models
    from isolab.models.weights import record_files

    tok = AutoTokenizer.from_pretrained(folder)
    if tok is None:
        raise RuntimeError(f"{folder}: no tokenizer to save again")
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    tok.save_pretrained(folder, save_jinja_files=False)
    info = json.loads((folder / models.BUILD_INFO).read_text())
    info["files"] = record_files(folder)
    (folder / models.BUILD_INFO).write_text(json.dumps(info, indent=2) + "\n")


def ship(name: str) -> None:
    """Rebuild `name` and copy it into isolab/presets/<name>/ (see the module docstring)."""
    from isolab import difficulty, models

    folder, splits = build(name)
    dest = models.shipped_dir(name)
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(folder, dest)
    info = json.loads((dest / models.BUILD_INFO).read_text())
    info.update(source="shipped", built_on=date.today().isoformat())
    (dest / models.BUILD_INFO).write_text(json.dumps(info, indent=2) + "\n")
    if splits is not None:
        difficulty.record_label_digest(difficulty.write_shipped_labels(splits, POOL, SEED))
        for pool in LARGE_POOLS.get(name, ()):
            large = difficulty.load_or_label(
                name, "arithmetic", pool_size=pool, seed=SEED, force=True
            )
            difficulty.record_label_digest(difficulty.write_shipped_labels(large, pool, SEED))
    print(f"{name}: sha256 {info['digest']} → {dest}", flush=True)


def check(name: str) -> bool:
    """Rebuild `name` in the private cache and compare it with the shipped copy, writing
    nothing under isolab/presets/: every file's sha256, then the build record's fields but
    `VOLATILE`. Prints one line per difference; True when there is none."""
    from isolab import models

    shipped = models.shipped_info(name)
    if shipped is None:
        print(f"{name}: nothing shipped to compare with", flush=True)
        return False
    folder, _ = build(name)
    rebuilt = json.loads((folder / models.BUILD_INFO).read_text())
    differs = [
        f"{file}: shipped {digest[:16]}…, rebuilt {str(rebuilt['files'].get(file))[:16]}…"
        for file, digest in shipped["files"].items()
        if rebuilt["files"].get(file) != digest
    ]
    differs += [
        f"{file}: rebuilt, not shipped" for file in rebuilt["files"] if file not in shipped["files"]
    ]
    differs += [
        f"build record {key}: shipped {shipped.get(key)!r}, rebuilt {rebuilt.get(key)!r}"
        for key in sorted(set(shipped) | set(rebuilt))
        if key not in (*VOLATILE, "files") and shipped.get(key) != rebuilt.get(key)
    ]
    for line in differs:
        print(f"{name}: {line}", flush=True)
    if not differs:
        print(f"{name}: the rebuild matches the shipped copy (sha256 {shipped['digest']})")
    return not differs


def _tick(name: str, step: int, status: str) -> None:
    if step % 100 == 0 or "target" in status or "easy" in status:
        print(f"{name} step {step}: {status}", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    checking = "--check" in args
    names = [a for a in args if a != "--check"] or [
        "tiny-s",
        "tiny-m",
        "tiny-l",
        "tiny-chat",
        "tiny-orm",
        "tiny-prm",
    ]
    with tempfile.TemporaryDirectory(prefix="isolab-ship-") as tmp:
        os.environ["ISOLAB_CACHE"] = tmp
        if checking:
            sys.exit(0 if all([check(name) for name in names]) else 1)
        for name in names:
            ship(name)
