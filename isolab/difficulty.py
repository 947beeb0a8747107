"""Problem pools and their difficulty splits by the base model's avg@16 (IsoCompute Playbook,
arXiv 2603.12151 §3): the problems a run trains and validates on.

Each problem of a pool is sampled 16 times by the base model; its avg@16 places it in a band.
The paper's bands are Easy = avg@16 ∈ [0.3, 0.6] and Hard = avg@16 ∈ [0, 0.0625] (solved at
most once in 16; `isolab.metrics.Bands` says why never-solved problems belong there). Each split is cut into training problems and held-out validation problems.
Split `all` needs no labelling (`unlabelled`). Split names are `isolab.config.SPLITS` (`easy`,
`hard`, `all`), not a data set's train/test split (the `split=` of `Task.problems`).

Labels are cached per (model, task, pool, seed) and checked against the weights' digest; the
tiny presets ship theirs (`shipped_counts`), so every machine cuts the same splits.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from isolab import models
from isolab.metrics import DEFAULT_BANDS, Bands
from isolab.paths import cache_root
from isolab.tasks import Task, get_task, task_id
from isolab.tasks.base import Problem, as_text
from isolab.tasks.card import is_card

log = logging.getLogger(__name__)


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
    model_digest: str | None = None  # sha256 of the labelling model's weights
    source: str = "sampled"  # "sampled" here, or "shipped" (labels shipped with the weights)

    def sizes(self) -> dict[str, dict[str, int]]:
        """Problems per split and part: {"easy": {"train": 301, "val": 100}, …}."""
        return {n: {k: len(v) for k, v in part.items()} for n, part in self.splits.items()}

    def train(self, split: str) -> list[Problem]:
        return [self.problems[i] for i in self._part(split, "train")]

    def val(self, split: str) -> list[Problem]:
        return [self.problems[i] for i in self._part(split, "val")]

    def _part(self, split: str, part: str) -> list[int]:
        if split in DERIVED and split not in self.splits and "hard" in self.splits:
            return _derived(self, split, part)
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
            "model_digest": self.model_digest,
            "source": self.source,
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
            model_digest=data.get("model_digest"),
            source=data.get("source", "sampled"),
        )


#: Most validation problems a split holds out: evaluation reads `eval_problems` of them (the
#: Playbook's validation sets hold 300), so a large pool's problems go to training instead.
#: The default 4,000-problem pool holds out fewer than this in every split.
MAX_VAL = 1000


#: Splits cut from the stored ones when asked for, never stored (so the shipped labels and sizes
#: stay as they are): `never`, the Hard problems the base solved in none of its k samples, and
#: `mix`, every Easy problem with as many Hard ones (`MIX_HARD_PER_EASY`), drawn by `MIX_SEED`.
#: Each keeps its parent's train/validation cut, so no problem crosses from one to the other.
DERIVED = ("never", "mix")
MIX_HARD_PER_EASY = 1
MIX_SEED = 31


def _derived(splits: Splits, split: str, part: str) -> list[int]:
    hard = splits.splits["hard"][part]
    if split == "never":
        return [i for i in hard if splits.avg[i] == 0]
    easy = splits.splits["easy"][part]
    take = min(len(hard), len(easy) * MIX_HARD_PER_EASY)
    return sorted(easy + random.Random(MIX_SEED).sample(hard, take))


def splits_path(model: str, task: str, pool_size: int, seed: int) -> Path:
    safe = model.replace("/", "--")
    name = task_id(task)
    return cache_root() / "difficulty" / f"{safe}__{name}__pool{pool_size}__seed{seed}.json"


def task_for(model: str, task: str, run_code: bool = False) -> Task:
    """The task in the prompt style of `model`; a card's own verifier runs with `run_code`."""
    return get_task(task, "raw" if models.is_tiny(model) else "chat", run_code)


def label(
    model_name: str,
    task_name: str = "arithmetic",
    pool_size: int = 2000,
    k: int = 16,
    bands: Bands = DEFAULT_BANDS,
    val_fraction: float = 0.25,
    seed: int = 0,
    temperature: float = 1.0,
    data_dir: str | None = None,
    trust_remote_code: bool = False,
) -> Splits:
    """Sample `k` completions per pool problem with the base model and cut the splits (a model
    that ships its own code runs only with `trust_remote_code`)."""
    _check_fraction(val_fraction)
    task = task_for(model_name, task_name, run_code=trust_remote_code)
    problems = task.problems(split="train", data_dir=data_dir, limit=pool_size, seed=seed)
    from isolab.models.sampling import sample_and_grade  # torch: only when labelling

    model, tok = models.load(model_name, trust_remote_code=trust_remote_code)
    result = sample_and_grade(
        model,
        tok,
        [as_text(task.prompt(p), tok) for p in problems],
        [p.answer for p in problems],
        task.verify,
        n_samples=k,
        temperature=temperature,
        max_new_tokens=task.max_completion_tokens,
        seed=seed,
    )
    return cut(
        model_name, task_name, problems, result.counts.tolist(), k, bands, val_fraction, seed
    )


def _check_fraction(val_fraction: float) -> None:
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction = {val_fraction}: must lie in (0, 1)")


def cut(
    model_name: str,
    task_name: str,
    problems: list[Problem],
    counts: list[int],
    k: int,
    bands: Bands = DEFAULT_BANDS,
    val_fraction: float = 0.25,
    seed: int = 0,
    source: str = "sampled",
) -> Splits:
    """Splits from correct counts out of `k`: each band's problems shuffled by `seed`, a
    `val_fraction` of them held out for validation, at most `MAX_VAL`."""
    _check_fraction(val_fraction)
    avg = [c / k for c in counts]
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
        n_val = min(max(1, round(len(idx) * val_fraction)), MAX_VAL) if len(idx) > 1 else 0
        splits[name] = {"train": sorted(idx[n_val:]), "val": sorted(idx[:n_val])}
    return Splits(
        model_name, task_name, k, bands, problems, avg, splits, models.digest(model_name), source
    )


# ---- labels shipped with the weights ------------------------------------------------------------
#: Shipped labels cover the default labelling: avg@16 at temperature 1 of a pool drawn by seed.
SHIPPED_K = 16


def shipped_labels_path(model: str, task: str, pool_size: int, seed: int) -> Path:
    return models.shipped_dir(model) / "difficulty" / f"{task}__pool{pool_size}__seed{seed}.json"


def problem_ids_digest(problems: list[Problem]) -> str:
    return hashlib.sha256("\n".join(p.id for p in problems).encode()).hexdigest()


def write_shipped_labels(splits: Splits, pool_size: int, seed: int) -> Path:
    """Save a labelled pool's correct counts beside the shipped weights (maintainers: see
    scripts/ship_presets.py), tied to the weights' digest and to the pool's problem ids."""
    path = shipped_labels_path(splits.model, splits.task, pool_size, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "model": splits.model,
        "model_digest": splits.model_digest,
        "task": splits.task,
        "pool_size": pool_size,
        "seed": seed,
        "k": splits.k,
        "temperature": 1.0,
        "problem_ids_sha256": problem_ids_digest(splits.problems),
        "counts": [round(a * splits.k) for a in splits.avg],
    }
    path.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    return path


#: The build record's entry of the sha256 of every shipped labels file, by file name.
LABEL_DIGESTS = "label_digests"


def record_label_digest(path: Path) -> str:
    """Write a shipped labels file's sha256 into its preset's shipped build record
    (maintainers), so that an edited or damaged file is refused rather than cut into splits."""
    info_path = path.parent.parent / models.BUILD_INFO
    info = json.loads(info_path.read_text())
    digest = models.sha256_file(path)
    info.setdefault(LABEL_DIGESTS, {})[path.name] = digest
    info_path.write_text(json.dumps(info, indent=2) + "\n")
    return digest


def _check_label_digest(model: str, path: Path) -> None:
    recorded = (models.shipped_info(model) or {}).get(LABEL_DIGESTS, {}).get(path.name)
    got = models.sha256_file(path)
    if recorded is not None and got != recorded:
        raise RuntimeError(
            f"shipped labels {path} have sha256 {got[:12]}…, the build record of {model} says "
            f"{recorded[:12]}…: the package is damaged; reinstall isolab, or label again with "
            "`isolab difficulty --force`."
        )


def shipped_counts(
    model: str, task_name: str, problems: list[Problem], pool_size: int, seed: int
) -> list[int] | None:
    """Correct counts shipped for this exact pool and for the weights now in use, else None
    (another pool, a model rebuilt from scratch, or nothing shipped). A shipped file whose
    sha256 differs from the one its build record holds is an error."""
    path = shipped_labels_path(model, task_name, pool_size, seed)
    if not path.exists():
        return None
    _check_label_digest(model, path)
    data = json.loads(path.read_text())
    current = models.digest(model)
    if data["model_digest"] != current:
        log.info(
            "shipped labels of %s are for weights %s, not %s", model, data["model_digest"], current
        )
        return None
    if data["problem_ids_sha256"] != problem_ids_digest(problems) or data["k"] != SHIPPED_K:
        return None
    return list(data["counts"])


def load_or_label(
    model_name: str,
    task_name: str = "arithmetic",
    pool_size: int = 2000,
    seed: int = 0,
    data_dir: str | None = None,
    force: bool = False,
    trust_remote_code: bool = False,
    **kwargs,
) -> Splits:
    """Splits for (model, task, pool, seed): cached, else shipped, else labelled by sampling.

    A cache file labelled by other weights than those now in use (a rebuilt base) is stale and
    is labelled again. Labels shipped with a preset's weights are used for the default
    labelling (avg@16, default bands and validation share) unless `force`, so every machine
    cuts the same splits; `force` samples again.
    """
    path = splits_path(model_name, task_name, pool_size, seed)
    if models.is_tiny(model_name):
        models.build(model_name)
    current = models.digest(model_name)
    if path.exists() and not force:
        cached = Splits.load(path)
        if cached.model_digest == current:
            return cached
        log.info("cached labels at %s are for other weights: labelling again", path)
    splits = None
    if not force and not kwargs and models.is_tiny(model_name):
        task = task_for(model_name, task_name)
        problems = task.problems(split="train", data_dir=data_dir, limit=pool_size, seed=seed)
        counts = shipped_counts(model_name, task_name, problems, pool_size, seed)
        if counts is not None:
            splits = cut(
                model_name, task_name, problems, counts, SHIPPED_K, seed=seed, source="shipped"
            )
    if splits is None:
        log.info("labelling difficulty of %d %s problems with %s", pool_size, task_name, model_name)
        splits = label(
            model_name,
            task_name,
            pool_size=pool_size,
            seed=seed,
            data_dir=data_dir,
            trust_remote_code=trust_remote_code,
            **kwargs,
        )
    splits.save(path)
    return splits


def record_in_build_info(splits: Splits, pool_size: int, seed: int) -> dict:
    """Write the labelled default pool's histogram, band shares and split sizes into the
    installed model's build record (what `isolab models list` shows); returns that entry."""
    counts, _ = splits.histogram()
    entry = {
        "task": splits.task,
        "pool_size": pool_size,
        "seed": seed,
        "k": splits.k,
        "histogram": counts.tolist(),
        "shares": splits.bands.shares(
            np.rint(np.asarray(splits.avg) * splits.k).astype(int).tolist(), splits.k
        ),
        "sizes": splits.sizes(),
    }
    info_path = models.model_dir(splits.model) / models.BUILD_INFO
    info = json.loads(info_path.read_text())
    info["difficulty"] = entry
    info_path.write_text(json.dumps(info, indent=2) + "\n")
    return entry


def unlabelled(
    task_name: str, pool_size: int, val_size: int, data_dir: str | None = None, seed: int = 0
) -> tuple[list[Problem], list[Problem]]:
    """(train, validation) problems of split `all`: no base-model sampling needed.

    Arithmetic draws a pool from `seed`; GSM8K trains on its train split and validates on its
    test split; MATH-500 (a test set only) holds out `val_size` problems of its 500.
    """
    task = get_task(task_name, "raw" if task_name == "arithmetic" else "chat")
    if is_card(task_name):  # its own validation set (a file, or its held-out share)
        train = task.problems(split="train", limit=pool_size, seed=seed)
        return train, task.problems(split="test", limit=val_size, seed=seed)
    if task_name == "gsm8k":
        train = task.problems(split="train", data_dir=data_dir, limit=pool_size)
        return train, task.problems(split="test", data_dir=data_dir, limit=val_size)
    problems = task.problems(split="test", data_dir=data_dir, limit=pool_size, seed=seed)
    problems = problems[:]
    random.Random(seed).shuffle(problems)
    n_val = min(val_size, len(problems) // 4) or 1
    return problems[n_val:], problems[:n_val]
