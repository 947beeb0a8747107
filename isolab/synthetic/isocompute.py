"""Planted IsoCompute worlds: per-n ScaleRL sigmoids of reward against rollouts whose best n grows
with compute and saturates (`IsoComputeLaw`), or stays put (`FixedOptimumLaw`), and the runs
tables they make (`make_isocompute_runs`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from isolab.synthetic.frames import eval_steps, planted_key
from isolab.vocab import (
    EVAL_AVG,
    EVAL_BEST,
    EVAL_WORST,
    FLOPS_LEARNING,
    FLOPS_REWARD,
    FLOPS_SEARCH,
    FLOPS_TOTAL,
    RHO,
    ROLLOUTS,
    RUN_ID,
    RUN_KEY,
    STEP,
    TOKENS,
    eval_metric,
)

N_GRID = (8, 16, 32, 64, 128, 256, 512, 1024)
B_P_GRID = (8, 16, 32, 64, 128)


@dataclass(frozen=True)
class IsoComputeLaw:
    """Reward of a GRPO run with n rollouts per problem and B_p problems per step at compute C.

    ``R(C; n, B_p) = R0 + (A(n, B_p) − R0) / (1 + (C_mid(n) / C)^B)`` with
    ``A(n, B_p) = R0 + (A_max − curvature·(log2 n − log2 n_sat)² − R0)·(1 − bp_penalty·(log2 B_p −
    log2 B_p_opt)²)`` and ``C_mid(n) = C_mid_ref·(n / n_ref)^gamma``.

    Small n rise early (small C_mid) but plateau low; n_sat has the highest plateau; so the best n
    grows with compute and saturates at n_sat. B_p only scales the gain a little, as the paper
    finds "B_p matters little in a moderate range".
    """

    R0: float = 0.2
    A_max: float = 0.8
    n_sat: int = 256
    curvature: float = 0.015
    C_mid_ref: float = 4e4
    n_ref: int = 8
    gamma: float = 0.5
    B: float = 1.5
    B_p_opt: int = 32
    bp_penalty: float = 0.01

    def A(self, n: np.ndarray | float, B_p: np.ndarray | float | None = None) -> np.ndarray:
        """Asymptotic reward of (n, B_p); B_p = None means the best B_p."""
        n = np.asarray(n, dtype=float)
        a = self.A_max - self.curvature * (np.log2(n) - math.log2(self.n_sat)) ** 2
        if B_p is None:
            return a
        bp = np.asarray(B_p, dtype=float)
        scale = 1 - self.bp_penalty * (np.log2(bp) - math.log2(self.B_p_opt)) ** 2
        return self.R0 + (a - self.R0) * scale

    def C_mid(self, n: np.ndarray | float) -> np.ndarray:
        """Compute at which the run of n rollouts per problem is halfway to its plateau."""
        return self.C_mid_ref * (np.asarray(n, dtype=float) / self.n_ref) ** self.gamma

    def reward(
        self, C: np.ndarray | float, n: np.ndarray | float, B_p: np.ndarray | float | None = None
    ) -> np.ndarray:
        """Noise-free reward (broadcasts over C, n, B_p)."""
        C, n = np.asarray(C, dtype=float), np.asarray(n, dtype=float)
        A = self.A(n, B_p)
        with np.errstate(divide="ignore"):
            s = 1.0 / (1.0 + np.exp(self.B * (np.log(self.C_mid(n)) - np.log(C))))
        return self.R0 + (A - self.R0) * s

    def n_star(self, C: np.ndarray | float, n_grid: Sequence[int] = N_GRID) -> np.ndarray:
        """True best n of `n_grid` at each compute (at the best B_p)."""
        C = np.atleast_1d(np.asarray(C, dtype=float))
        grid = np.asarray(n_grid, dtype=float)
        R = self.reward(C[:, None], grid[None, :])
        return grid[np.argmax(R, axis=1)]

    def n_saturation(self, n_grid: Sequence[int] = N_GRID) -> float:
        """The n of the grid with the highest plateau: where n*(C) saturates."""
        grid = np.asarray(n_grid, dtype=float)
        return float(grid[np.argmax(self.A(grid))])


@dataclass(frozen=True)
class FixedOptimumLaw:
    """A structured null of "n* grows" (issue 45): the best n is `n_o` at every compute, and
    only how fast and how high each other n rises differs.

    ``R(C; n) = R0 + (A(n) − R0) / (1 + (C_mid(n) / C)^B)`` with x = log2 n − log2 n_o,
    ``A(n) = A_max − c_lo·min(x, 0)² − c_hi·max(x, 0)²`` and ``C_mid(n) = C_mid_ref·
    2^(g_lo·max(−x, 0) + g_hi·max(x, 0))``: n_o has the highest plateau and rises fastest, so it
    is the argmax at every C. With `c_hi` small and `g_hi` large, an n above n_o is slow but
    nearly as high, and overtakes an n below it that is fast but low: two non-optimal arms
    cross while n* stays put. `c_lo = c_hi = 0` and `n_o` the grid's smallest n: every n
    reaches one plateau and a larger n is only slower (late ties). B_p does not matter.
    """

    n_o: float = 8.0
    R0: float = 0.2
    A_max: float = 0.7
    c_lo: float = 0.02
    c_hi: float = 0.02
    C_mid_ref: float = 2e3
    g_lo: float = 0.5
    g_hi: float = 0.5
    B: float = 1.5

    def _x(self, n: np.ndarray | float) -> np.ndarray:
        return np.log2(np.asarray(n, dtype=float)) - math.log2(self.n_o)

    def A(self, n: np.ndarray | float) -> np.ndarray:
        x = self._x(n)
        return self.A_max - self.c_lo * np.minimum(x, 0) ** 2 - self.c_hi * np.maximum(x, 0) ** 2

    def C_mid(self, n: np.ndarray | float) -> np.ndarray:
        x = self._x(n)
        return self.C_mid_ref * 2.0 ** (
            self.g_lo * np.maximum(-x, 0) + self.g_hi * np.maximum(x, 0)
        )

    def reward(
        self, C: np.ndarray | float, n: np.ndarray | float, B_p: np.ndarray | float | None = None
    ) -> np.ndarray:
        C = np.asarray(C, dtype=float)
        with np.errstate(divide="ignore"):
            s = 1.0 / (1.0 + np.exp(self.B * (np.log(self.C_mid(n)) - np.log(C))))
        return self.R0 + (self.A(n) - self.R0) * s

    def n_star(self, C: np.ndarray | float, n_grid: Sequence[int] = N_GRID) -> np.ndarray:
        C = np.atleast_1d(np.asarray(C, dtype=float))
        grid = np.asarray(n_grid, dtype=float)
        return grid[np.argmax(self.reward(C[:, None], grid[None, :]), axis=1)]


def isocompute_laws() -> dict[str, IsoComputeLaw]:
    """An Easy-set-like family: larger n lifts worst@4 most and best@4 least (IsoCompute §5)."""
    return {
        EVAL_AVG: IsoComputeLaw(),
        eval_metric("avg", 1): IsoComputeLaw(),
        EVAL_BEST: IsoComputeLaw(R0=0.45, A_max=0.95, n_sat=64),
        EVAL_WORST: IsoComputeLaw(R0=0.05, A_max=0.6, n_sat=512, C_mid_ref=1.5e4),
    }


def make_isocompute_runs(
    laws: Mapping[str, IsoComputeLaw | FixedOptimumLaw] | None = None,
    *,
    n_grid: Sequence[int] = N_GRID,
    B_p_grid: Sequence[int] = B_P_GRID,
    B_max: int = 8192,
    budget_rollouts: int = 2**25,
    seeds: int = 2,
    eval_points: int = 50,
    noise: float = 0.02,
    max_runs: int | None = None,
    checkpoints: Sequence[float] | None = None,
    seed_sd: float = 0.0,
    experiment: str = "synthetic-isocompute",
    model: str = "tiny-m",
    split: str = "easy",
    reward: str = "sparse",
    seed: int = 0,
) -> pl.DataFrame:
    """A runs table of an iso-compute (n, B_p) grid, rewards drawn from planted laws plus noise.

    Every (n, B_p) with ``B_p·n ≤ B_max`` runs ``M = budget_rollouts / (B_p·n)`` steps and is
    evaluated at `eval_points` log-spaced steps (step 0 included). Each metric of `laws` is
    ``law.reward(C, n, B_p) + N(0, noise²)`` clipped to [0, 1]; FLOP columns follow a fixed cost
    per rollout. `max_runs` truncates the grid (configs first, then seeds).

    `checkpoints` (rollouts): evaluate every run at step 0 and at the first step at which it
    reaches each of them, as isolab sweeps place `eval_at_rollouts`, instead of `eval_points`
    log-spaced steps (then the runs of every configuration share their checkpoints).
    `seed_sd`: each run also draws a training offset, ``seed_sd·z·sqrt(step / M)``, shared by
    its checkpoints (as `isolab.verdicts.worlds.simulate_world` draws one): a run that is lucky
    early is lucky later.
    """
    laws = dict(laws or isocompute_laws())
    rng = np.random.default_rng(seed)
    configs = [(n, bp) for n in n_grid for bp in B_p_grid if n * bp <= B_max]
    if not configs:
        raise ValueError(f"no (n, B_p) with B_p·n ≤ B_max = {B_max}: raise B_max.")
    runs = [(n, bp, s) for s in range(seeds) for (n, bp) in configs]
    if max_runs is not None:
        runs = runs[:max_runs]
    cols: dict[str, list[np.ndarray]] = {}
    for n, bp, s in runs:
        B = n * bp
        M = max(budget_rollouts // B, 1)
        if checkpoints is None:
            steps = eval_steps(M, eval_points)
        else:
            at = {min(-(-int(c) // B), M) for c in checkpoints}
            steps = np.array(sorted({0, M} | at), dtype=int)
        k = len(steps)
        C = (B * steps).astype(float)
        offset = seed_sd * rng.standard_normal() * np.sqrt(steps / M) if seed_sd else 0.0
        lr = 3e-4 * math.sqrt(B / 64)
        key = planted_key((experiment, model, split, reward, n, bp, M, s))
        row = {
            RUN_KEY: np.full(k, key),
            RUN_ID: np.full(k, key),
            "experiment": np.full(k, experiment),
            "model": np.full(k, model),
            "task": np.full(k, "arithmetic"),
            "split": np.full(k, split),
            "reward": np.full(k, reward),
            "recipe": np.full(k, "auto"),
            "n": np.full(k, n),
            "B_p": np.full(k, bp),
            "B": np.full(k, B),
            "M": np.full(k, M),
            "seed": np.full(k, s),
            "lr": np.full(k, lr),
            "num_iterations": np.full(k, 1),
            STEP: steps,
            ROLLOUTS: C,
            TOKENS: C * 6.0,
            # a tiny model's cost per rollout: search 2·N·T, learning 6·N·T (N = 0.66M, T = 6)
            FLOPS_SEARCH: C * 7.9e6,
            FLOPS_LEARNING: C * 2.4e7,
            FLOPS_REWARD: np.zeros(k),
            FLOPS_TOTAL: C * (7.9e6 + 2.4e7),
            RHO: np.full(k, 2.4e7 / (7.9e6 + 2.4e7)),
        }
        for metric, law in laws.items():
            r = law.reward(C, n, bp) + offset + rng.normal(0.0, noise, k)
            row[metric] = np.clip(r, 0.0, 1.0)
        for name, value in row.items():
            cols.setdefault(name, []).append(value)
    return pl.DataFrame({name: np.concatenate(parts) for name, parts in cols.items()})
