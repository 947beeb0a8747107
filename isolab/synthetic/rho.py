"""Planted update-fraction worlds: reward at a fixed FLOP budget peaks at ρ* per reward system
(`RhoLaw`, after Wilhelm & Kao, arXiv 2607.13389), and the runs they make (`make_rho_runs`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from isolab.frontier import sigmoid
from isolab.synthetic.frames import eval_steps, planted_key
from isolab.vocab import (
    EVAL_AVG,
    FLOPS_LEARNING,
    FLOPS_REWARD,
    FLOPS_SEARCH,
    FLOPS_TOTAL,
    RHO,
    ROLLOUTS,
    RUN_ID,
    RUN_KEY,
    STEP,
)

RHO_GRID = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


@dataclass(frozen=True)
class RhoLaw:
    """Reward at FLOP budget F of a run spending a fraction ρ of its FLOPs on learning.

    ``R(F, ρ) = R0 + (A_max − curvature·(ρ − ρ*)² − R0) / (1 + (F_mid / F)^B)``: at a fixed
    budget the reward is a concave parabola in ρ with its peak at ρ*. `reward_share` is the
    reward model's FLOPs per search FLOP (0 for rule-based rewards; a PRM scoring every rollout
    costs a large fraction of generation).
    """

    rho_star: float = 0.72
    reward_share: float = 0.0
    R0: float = 0.2
    A_max: float = 0.7
    curvature: float = 0.8
    F_mid: float = 1e15
    B: float = 1.2

    def reward(self, F: np.ndarray | float, rho: np.ndarray | float) -> np.ndarray:
        """Noise-free reward at total FLOPs F and update fraction ρ."""
        rho = np.asarray(rho, dtype=float)
        A = self.A_max - self.curvature * (rho - self.rho_star) ** 2
        return sigmoid(F, self.R0, A, self.F_mid, self.B)

    def shares(self, rho: float) -> tuple[float, float, float]:
        """(search, learning, reward) FLOP shares of a run at update fraction ρ."""
        rest = 1.0 - rho
        return (
            rest / (1 + self.reward_share),
            rho,
            rest * self.reward_share / (1 + self.reward_share),
        )


def rho_laws() -> dict[str, RhoLaw]:
    """Reward systems after Wilhelm & Kao (arXiv 2607.13389): rule-based favour ρ ≈ 0.72,
    PRM-style ρ ≈ 0.44–0.45. The PRM's reward model costs more than generation (reward-heavy),
    the proxy-PRM's less (search-heavy)."""
    return {
        "sparse": RhoLaw(rho_star=0.72),
        "structured": RhoLaw(rho_star=0.72, A_max=0.72),
        "dense": RhoLaw(rho_star=0.70, A_max=0.74),
        "proxy-prm": RhoLaw(rho_star=0.45, reward_share=0.5, A_max=0.66),
        "prm": RhoLaw(rho_star=0.44, reward_share=1.5, A_max=0.75),
    }


def make_rho_runs(
    laws: Mapping[str, RhoLaw] | None = None,
    *,
    rho_grid: Sequence[float] = RHO_GRID,
    budget_flops: float = 1e16,
    seeds: int = 3,
    eval_points: int = 50,
    noise: float = 0.02,
    metric: str = EVAL_AVG,
    experiment: str = "synthetic-rho",
    model: str = "qwen2.5-1.5b-lora",
    seed: int = 0,
) -> pl.DataFrame:
    """A runs table of an IsoFLOP allocation sweep per reward system, rewards from `RhoLaw`.

    Run i of a reward system spends a fraction ρ_i of its FLOPs on learning (`num_iterations`
    indexes the allocation; the synthetic ρ is planted, not derived from a model's cost). FLOPs
    per step differ between runs (``1e13·(0.5 + ρ)``), so evaluation points do not line up and an
    IsoFLOP band collects each run's nearby points, as with real runs.
    """
    laws = dict(laws or rho_laws())
    rng = np.random.default_rng(seed)
    cols: dict[str, list[np.ndarray]] = {}
    for reward_name, law in laws.items():
        for i, rho in enumerate(rho_grid):
            for s in range(seeds):
                F_step = 1e13 * (0.5 + rho) * (1 + 0.05 * rng.random())
                M = max(int(budget_flops // F_step), 1)
                steps = eval_steps(M, eval_points)
                k = len(steps)
                F = F_step * steps
                rho_obs = np.clip(rho + rng.normal(0.0, 0.002), 0.0, 1.0)
                sh_search, sh_learn, sh_reward = law.shares(rho_obs)
                key = planted_key((experiment, model, reward_name, rho, s))
                row = {
                    RUN_KEY: np.full(k, key),
                    RUN_ID: np.full(k, key),
                    "experiment": np.full(k, experiment),
                    "model": np.full(k, model),
                    "task": np.full(k, "math"),
                    "split": np.full(k, "all"),
                    "reward": np.full(k, reward_name),
                    "recipe": np.full(k, "none"),
                    "n": np.full(k, 8),
                    "B_p": np.full(k, 64),
                    "B": np.full(k, 512),
                    "M": np.full(k, M),
                    "seed": np.full(k, s),
                    "lr": np.full(k, 1e-5),
                    "num_iterations": np.full(k, i + 1),
                    STEP: steps,
                    ROLLOUTS: 512.0 * steps,
                    FLOPS_SEARCH: F * sh_search,
                    FLOPS_LEARNING: F * sh_learn,
                    FLOPS_REWARD: F * sh_reward,
                    FLOPS_TOTAL: F,
                    RHO: np.full(k, sh_learn),
                    metric: np.clip(law.reward(F, rho) + rng.normal(0.0, noise, k), 0.0, 1.0),
                }
                for name, value in row.items():
                    cols.setdefault(name, []).append(value)
    return pl.DataFrame({name: np.concatenate(parts) for name, parts in cols.items()})
