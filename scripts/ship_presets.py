"""Maintainers: rebuild the shipped base models from scratch and write them into isolab/presets/.

    .venv/bin/python scripts/ship_presets.py tiny-s tiny-m tiny-l tiny-orm tiny-prm

Each tiny preset is warm-started to its target regime (`isolab.models.WarmStartTarget`) in a
private cache, its default pool (4,000 arithmetic problems, seed 0) is labelled by avg@16, and
the weights, tokenizer, build record (spec, steps, loss, probe history, histogram, split sizes,
sha256 of every file) and the pool's correct counts are copied to `isolab/presets/<name>/`.
tiny-m also ships the labels of the CPU testbed's 96,000-problem pool (`LARGE_POOLS`; ≈ 17 min
of sampling on 2 cores), each labels file with its sha256 in the build record.
Reward models are trained from the tiny-m in `isolab/presets/tiny-m/` (ship it first). The
result is CPU-dependent: commit it once, and every machine then installs the same bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from datetime import date
from pathlib import Path

POOL, SEED = 4000, 0
#: Larger pools whose labels a preset also ships (the CPU studies train on them).
LARGE_POOLS = {"tiny-m": (96000,)}


def ship(name: str, cache: Path) -> None:
    from isolab import difficulty, models
    from isolab.models import reward as reward_models

    if models.is_reward_preset(name):
        models.build("tiny-m")  # the shipped tiny-m, installed into the private cache
        folder = reward_models.build(name, from_scratch=True)
    else:
        folder = models.build(
            name, from_scratch=True, progress=lambda s, t, status: _tick(name, s, status)
        )
        splits = difficulty.load_or_label(name, "arithmetic", pool_size=POOL, seed=SEED, force=True)
        difficulty.record_in_build_info(splits, POOL, SEED)
    dest = models.shipped_dir(name)
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(folder, dest)
    info = json.loads((dest / models.BUILD_INFO).read_text())
    info.update(source="shipped", built_on=date.today().isoformat())
    (dest / models.BUILD_INFO).write_text(json.dumps(info, indent=2) + "\n")
    if not models.is_reward_preset(name):
        difficulty.record_label_digest(difficulty.write_shipped_labels(splits, POOL, SEED))
        for pool in LARGE_POOLS.get(name, ()):
            large = difficulty.load_or_label(
                name, "arithmetic", pool_size=pool, seed=SEED, force=True
            )
            difficulty.record_label_digest(difficulty.write_shipped_labels(large, pool, SEED))
    print(f"{name}: sha256 {info['digest']} → {dest}", flush=True)


def _tick(name: str, step: int, status: str) -> None:
    if step % 100 == 0 or "target" in status or "easy" in status:
        print(f"{name} step {step}: {status}", flush=True)


if __name__ == "__main__":
    names = sys.argv[1:] or ["tiny-s", "tiny-m", "tiny-l", "tiny-orm", "tiny-prm"]
    with tempfile.TemporaryDirectory(prefix="isolab-ship-") as tmp:
        os.environ["ISOLAB_CACHE"] = tmp
        for name in names:
            ship(name, Path(tmp))
