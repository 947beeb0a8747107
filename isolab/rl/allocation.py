"""Per-prompt allocation: how a step's rollouts go to its problems (`RunConfig.allocation`).

GRPO gives every problem of a step the same n rollouts (`uniform`). The allocators here spend
them unevenly, after the per-prompt literature, on the idea that a group whose rewards are all
equal has zero group-relative advantage and teaches nothing:

- `dynamic` — DAPO's dynamic sampling (Yu et al. 2025, arXiv 2503.14476 §3.2), in
  `isolab.rl.dynamic_sampling`: k·B_p groups generated, the B_p most varied kept.
- `early_stop` — after SARA (arXiv 2607.26253) and Pilot-Commit (arXiv 2605.26606): a pilot
  chunk of `pilot_size(n)` rollouts for each of k·B_p candidates; a candidate whose pilot and
  Beta posterior say its group would likely show no variance is stopped, and the B_p least
  likely to are completed to n. The stopped pilots are discarded (charged, not trained on).
- `variance` — knapsack-like, after Knapsack RL (arXiv 2509.25849) and VIP (arXiv 2602.01601):
  the step's B = B_p·n rollouts split among its B_p problems in proportion to p(1 − p), the
  variance of a success, from each problem's Beta estimate; at least 2 each.

Every allocator keeps the batch trained on at B = B_p·n rollouts, so learning FLOPs per step
are those of uniform GRPO; what moves is search (and reward) compute, charged in full by the
ledger, discarded rollouts included (`flops/search_discarded`).

A problem's success estimate (`Beliefs`) starts from the base model's avg@16 where the split was
labelled (`isolab.difficulty`: 16 samples, so Beta(1 + 16·avg, 1 + 16·(1 − avg))), else from
Beta(1, 1), and is updated with every scored rollout of every visit, its reward clipped to
[0, 1] (a fractional success for partial-credit rewards). The labelling's compute is outside
every run's ledger, as for the difficulty splits that all arms share.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence

import torch

#: Pseudo-observations of a labelled problem's prior: the labelling's samples per problem.
LABEL_SAMPLES = 16
#: Rollouts a problem gets at least under `variance` allocation (a group needs two to compare).
MIN_GROUP = 2


def prompt_key(prompt) -> str:
    """One string per prompt, text or chat messages: how `Beliefs` knows a problem again."""
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True)


class Beliefs:
    """Per-problem Beta(α, β) estimates of the policy's success rate.

    Args:
        priors: prompt key → the base model's avg@16 where known (`LABEL_SAMPLES` samples);
            others start at Beta(1, 1).
    """

    def __init__(self, priors: dict[str, float] | None = None) -> None:
        self._priors = dict(priors or {})
        self._seen: dict[str, list[float]] = {}  # key → [successes, failures] observed in runs

    def ab(self, key: str) -> tuple[float, float]:
        """(α, β) of the problem's posterior."""
        avg = self._priors.get(key)
        a, b = (
            (1.0, 1.0) if avg is None else (1 + LABEL_SAMPLES * avg, 1 + LABEL_SAMPLES * (1 - avg))
        )
        s, f = self._seen.get(key, (0.0, 0.0))
        return a + s, b + f

    def mean(self, key: str) -> float:
        a, b = self.ab(key)
        return a / (a + b)

    def update(self, key: str, rewards: Iterable[float]) -> None:
        """Add a visit's scored rewards (NaN, unscorable, left out), each clipped to [0, 1]."""
        seen = self._seen.setdefault(key, [0.0, 0.0])
        for r in rewards:
            if not math.isnan(r):
                x = min(1.0, max(0.0, float(r)))
                seen[0] += x
                seen[1] += 1 - x

    def state_dict(self) -> dict[str, list[float]]:
        """What the runs observed (the priors come back from the labels)."""
        return {k: list(v) for k, v in self._seen.items()}

    def load_state_dict(self, state: dict[str, list[float]]) -> None:
        self._seen = {k: [float(v[0]), float(v[1])] for k, v in state.items()}


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def flat_group_probability(pilot: Sequence[float], a: float, b: float, n: int) -> float:
    """P(a group of n shows one reward only | its pilot), under success p ~ Beta(a, b) before
    the pilot. A pilot with two different rewards (or a partial credit) gives 0; an all-success
    pilot of c gives E[p^(n − c)] under the posterior Beta(a + c, b), an all-failure one
    E[(1 − p)^(n − c)] under Beta(a, b + c)."""
    scored = [min(1.0, max(0.0, r)) for r in pilot if not math.isnan(r)]
    if not scored:
        return 1.0  # nothing scorable: no evidence of variance
    c, rest = len(scored), n - len(pilot)
    if all(r == 1.0 for r in scored):
        return math.exp(_log_beta(a + c + rest, b) - _log_beta(a + c, b))
    if all(r == 0.0 for r in scored):
        return math.exp(_log_beta(a, b + c + rest) - _log_beta(a, b + c))
    return 0.0


def early_stop_keep(flat: Sequence[float], keep: int) -> list[int]:
    """The `keep` candidates least likely to give a flat group (`flat_group_probability`), as
    ascending indices; ties go to the lower index (TRL's sampler shuffled them with the seed)."""
    if not 1 <= keep <= len(flat):
        raise ValueError(f"keep = {keep}: choose between 1 and the {len(flat)} candidates.")
    order = sorted(range(len(flat)), key=lambda i: (flat[i], i))
    return sorted(order[:keep])


def variance_split(p: Sequence[float], budget: int, minimum: int = MIN_GROUP) -> list[int]:
    """Rollouts per problem: `budget` split in proportion to p(1 − p), each at least `minimum`.

    The share above the minimum goes by largest remainder (ties to the lower index), so the
    sizes sum to `budget` exactly; all-zero weights split it evenly.
    """
    groups = len(p)
    if groups == 0 or budget < minimum * groups:
        raise ValueError(
            f"budget = {budget}: need at least {minimum} rollouts for each of {groups}."
        )
    weights = [q * (1 - q) for q in p]
    if sum(weights) <= 0:
        weights = [1.0] * groups
    spare = budget - minimum * groups
    exact = [spare * w / sum(weights) for w in weights]
    sizes = [minimum + math.floor(x) for x in exact]
    by_remainder = sorted(range(groups), key=lambda i: (-(exact[i] - math.floor(exact[i])), i))
    for i in by_remainder[: budget - sum(sizes)]:
        sizes[i] += 1
    return sizes


def group_advantages(rewards: torch.Tensor, sizes: Sequence[int], scale: str) -> torch.Tensor:
    """GRPO's advantages over groups of unequal size, as TRL computes them for equal ones
    (`sum_then_normalize`): reward − its group's mean, over the group's sample std + 1e-4
    (`scale` "group"), the batch's (`"batch"`), or not scaled (`"none"`); NaN rewards
    (unscorable) are left out of their group's statistics and get advantage 0."""
    if sum(sizes) != rewards.numel():
        raise ValueError(f"groups of {sum(sizes)} rollouts for {rewards.numel()} rewards.")
    x = rewards.double()
    out = torch.zeros_like(x)
    start = 0
    for size in sizes:
        g = x[start : start + size]
        ok = ~torch.isnan(g)
        mean = g[ok].mean() if ok.any() else torch.tensor(0.0, dtype=x.dtype)
        std = g[ok].std() if ok.sum() > 1 else torch.tensor(0.0, dtype=x.dtype)
        adv = g - mean
        if scale == "group":
            adv = adv / (std + 1e-4)
        out[start : start + size] = adv
        start += size
    if scale == "batch":
        ok = ~torch.isnan(x)
        out = out / ((x[ok].std() if ok.sum() > 1 else 0.0) + 1e-4)
    elif scale not in ("group", "none"):
        raise ValueError(f"scale_rewards = {scale!r}: isolab's allocators know group, batch, none.")
    return torch.nan_to_num(out, nan=0.0).to(rewards.dtype)
