"""Difficulty splits by the base model's avg@16 (IsoCompute Playbook, arXiv 2603.12151 §3).

Each problem of a pool is sampled 16 times by the base model; its avg@16 places it in a band.
The paper's bands are Easy = avg@16 ∈ [0.3, 0.6] and Hard = avg@16 ∈ (0, 0.0625] (solved, but
at most once in 16). Each split is cut into training problems and held-out validation problems.
"""

from __future__ import annotations

import json
import logging
import random
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from isolab import models
from isolab.evaluate import sample_and_grade
from isolab.tasks import Task, get_task
from isolab.tasks.base import Problem

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Bands:
    """Closed/open intervals of avg@k that define the splits.

    Attributes:
        easy: [low, high] of the Easy band (both ends included).
        hard: (low, high] of the Hard band (low excluded, so never-solved problems are out).
    """

    easy: tuple[float, float] = (0.3, 0.6)
    hard: tuple[float, float] = (0.0, 0.0625)

    def split_of(self, avg: float) -> str | None:
        if self.easy[0] <= avg <= self.easy[1]:
            return "easy"
        if self.hard[0] < avg <= self.hard[1]:
            return "hard"
        return None


@dataclass
class Splits:
    """Labelled pool and its splits, as saved on disk."""

    model: str
    task: str
    k: int
    bands: Bands
    problems: list[Problem]
    avg: list[float]
    splits: dict[str, dict[str, list[int]]]  # split -> {"train": indices, "val": indices}

    def train(self, split: str) -> list[Problem]:
        return [self.problems[i] for i in self._part(split, "train")]

    def val(self, split: str) -> list[Problem]:
        return [self.problems[i] for i in self._part(split, "val")]

    def _part(self, split: str, part: str) -> list[int]:
        if split not in self.splits:
            raise ValueError(f"split {split!r} not in {sorted(self.splits)}")
        return self.splits[split][part]

    def histogram(self) -> tuple[np.ndarray, np.ndarray]:
        """Problems per avg@k value: counts for 0/k, 1/k, …, k/k and those values."""
        solved = np.rint(np.asarray(self.avg) * self.k).astype(int)
        return np.bincount(solved, minlength=self.k + 1), np.arange(self.k + 1) / self.k

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "model": self.model,
            "task": self.task,
            "k": self.k,
            "bands": asdict(self.bands),
            "problems": [asdict(p) for p in self.problems],
            "avg": self.avg,
            "splits": self.splits,
        }
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)  # atomic: a crash never leaves a half-written label file

    @classmethod
    def load(cls, path: Path) -> Splits:
        data = json.loads(path.read_text())
        return cls(
            model=data["model"],
            task=data["task"],
            k=data["k"],
            bands=Bands(**{k: tuple(v) for k, v in data["bands"].items()}),
            problems=[Problem(**p) for p in data["problems"]],
            avg=data["avg"],
            splits=data["splits"],
        )


def splits_path(model: str, task: str, pool_size: int, seed: int) -> Path:
    safe = model.replace("/", "--")
    return models.cache_root() / "difficulty" / f"{safe}__{task}__pool{pool_size}__seed{seed}.json"


def task_for(model: str, task: str) -> Task:
    return get_task(task, "raw" if models.is_tiny(model) else "chat")


def label(
    model_name: str,
    task_name: str = "arithmetic",
    pool_size: int = 2000,
    k: int = 16,
    bands: Bands = Bands(),
    val_fraction: float = 0.25,
    seed: int = 0,
    temperature: float = 1.0,
    data_dir: str | None = None,
) -> Splits:
    """Sample `k` completions per pool problem with the base model and cut the splits."""
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction = {val_fraction}: must lie in (0, 1)")
    task = task_for(model_name, task_name)
    problems = task.problems(split="train", data_dir=data_dir, limit=pool_size, seed=seed)
    model, tok = models.load(model_name)
    result = sample_and_grade(
        model,
        tok,
        [_as_text(task.prompt(p), tok) for p in problems],
        [p.answer for p in problems],
        task.verify,
        n_samples=k,
        temperature=temperature,
        max_new_tokens=task.max_completion_tokens,
        seed=seed,
    )
    avg = (result.counts / k).tolist()
    groups: dict[str, list[int]] = {"easy": [], "hard": [], "all": list(range(len(problems)))}
    for i, a in enumerate(avg):
        name = bands.split_of(a)
        if name:
            groups[name].append(i)
    rng = random.Random(seed)
    splits = {}
    for name, idx in groups.items():
        idx = idx[:]
        rng.shuffle(idx)
        n_val = max(1, round(len(idx) * val_fraction)) if len(idx) > 1 else 0
        splits[name] = {"train": sorted(idx[n_val:]), "val": sorted(idx[:n_val])}
    return Splits(model_name, task_name, k, bands, problems, avg, splits)


def _as_text(prompt, tokenizer) -> str:
    """Chat prompts are rendered with the model's chat template for HF generate."""
    if isinstance(prompt, str):
        return prompt
    return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)


def load_or_label(
    model_name: str,
    task_name: str = "arithmetic",
    pool_size: int = 2000,
    seed: int = 0,
    data_dir: str | None = None,
    force: bool = False,
    **kwargs,
) -> Splits:
    """Cached splits for (model, task, pool, seed), labelled on first use."""
    path = splits_path(model_name, task_name, pool_size, seed)
    if path.exists() and not force:
        return Splits.load(path)
    log.info("labelling difficulty of %d %s problems with %s", pool_size, task_name, model_name)
    splits = label(
        model_name, task_name, pool_size=pool_size, seed=seed, data_dir=data_dir, **kwargs
    )
    splits.save(path)
    return splits


def unlabelled(
    task_name: str, pool_size: int, val_size: int, data_dir: str | None = None, seed: int = 0
) -> tuple[list[Problem], list[Problem]]:
    """(train, validation) problems of split `all`: no base-model sampling needed.

    Arithmetic draws a pool from `seed`; GSM8K trains on its train split and validates on its
    test split; MATH-500 (a test set only) holds out `val_size` problems of its 500.
    """
    task = get_task(task_name, "raw" if task_name == "arithmetic" else "chat")
    if task_name == "gsm8k":
        train = task.problems(split="train", data_dir=data_dir, limit=pool_size)
        return train, task.problems(split="test", data_dir=data_dir, limit=val_size)
    problems = task.problems(split="test", data_dir=data_dir, limit=pool_size, seed=seed)
    problems = problems[:]
    random.Random(seed).shuffle(problems)
    n_val = min(val_size, len(problems) // 4) or 1
    return problems[n_val:], problems[:n_val]
