"""Dynamic sampling: which of the groups generated in a step the policy trains on.

DAPO (Yu et al. 2025, arXiv 2503.14476, §3.2) oversamples prompts and drops the groups whose
rollouts all earn the same reward: their group-relative advantage is zero, so they carry no
gradient. isolab's variant keeps a fixed share (`RunConfig.search_oversample` = k): of the k·B_p
groups a step generates, the B_p whose rewards vary most, so that every step trains on the same
batch B = B_p·n and only search (and reward) compute grows with k. TRL 1.16 has no such option
(huggingface/trl#3708); `isolab.rl.trainer` builds it on TRL's hooks and uses these functions.
"""

from __future__ import annotations

import torch


def group_reward_std(rewards: torch.Tensor) -> torch.Tensor:
    """Sample standard deviation (Bessel-corrected, as TRL's ``nanstd``) of each group's rewards.

    Args:
        rewards: shape (groups, n), one row per group; NaN marks an unscorable rollout (TRL's
            convention), left out of its group's statistic.

    Returns:
        shape (groups,): exactly 0 for a group whose scored rewards are all equal (rounding
        cannot make it look informative) or that has fewer than 2 scored rewards.
    """
    if rewards.ndim != 2:
        raise ValueError(f"rewards of shape {tuple(rewards.shape)}: give (groups, n).")
    x = rewards.double()
    scored = ~torch.isnan(x)
    count = scored.sum(dim=1)
    mean = torch.where(scored, x, 0.0).sum(dim=1) / count.clamp(min=1)
    deviation = torch.where(scored, x - mean[:, None], 0.0)
    std = ((deviation**2).sum(dim=1) / (count - 1).clamp(min=1)).sqrt()
    highest = torch.where(scored, x, -torch.inf).amax(dim=1)
    lowest = torch.where(scored, x, torch.inf).amin(dim=1)
    flat = (count < 2) | (highest == lowest)
    return torch.where(flat, 0.0, std)


def select_groups(rewards: torch.Tensor, keep: int) -> torch.Tensor:
    """The `keep` groups with the largest reward standard deviation, as ascending indices.

    Ties go to the lower index: TRL's sampler has already shuffled the problems with the run's
    seed, so the index is a random tie-break, and a fixed one.

    Args:
        rewards: shape (groups, n), NaN for an unscorable rollout (see `group_reward_std`).
        keep: groups to keep, 1 ≤ keep ≤ groups.
    """
    groups = rewards.shape[0]
    if not 1 <= keep <= groups:
        raise ValueError(f"keep = {keep}: choose between 1 and the {groups} groups generated.")
    std = group_reward_std(rewards)
    order = torch.sort(std, descending=True, stable=True).indices
    return order[:keep].sort().values


def selection_metrics(rewards: torch.Tensor, kept: torch.Tensor) -> dict[str, float]:
    """What a step's selection did, under ``search/``: TRL's own ``reward``, ``reward_std`` and
    ``frac_reward_zero_std`` then describe the kept groups only, these the whole search.

    - ``search/kept_frac``: groups kept / groups generated (1/k);
    - ``search/reward_mean``: mean reward of every generated rollout (the policy's own);
    - ``search/group_reward_std``: mean within-group reward std of the generated groups;
    - ``search/kept_reward_std``: the same over the kept groups;
    - ``search/frac_reward_zero_std``: share of generated groups whose rewards are all equal.
    """
    std = group_reward_std(rewards)
    return {
        "search/kept_frac": len(kept) / rewards.shape[0],
        "search/reward_mean": torch.nanmean(rewards.double()).item(),
        "search/group_reward_std": std.mean().item(),
        "search/kept_reward_std": std[kept].mean().item(),
        "search/frac_reward_zero_std": (std == 0).double().mean().item(),
    }
