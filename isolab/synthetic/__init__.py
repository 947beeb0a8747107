"""Synthetic run tables planted with known laws, to test and benchmark the frontier analysis.

The frames have the layout of `isolab.tracking.runs.load_runs` (one row per run × evaluation step), so
every analysis runs on them unchanged, and the planted parameters are known exactly:

- `IsoComputeLaw`: per-n ScaleRL sigmoids of reward against rollouts (arXiv 2510.13786) whose
  asymptote A(n) peaks at `n_sat` and whose midpoint C_mid(n) grows with n, so that the best n
  grows with compute and saturates at `n_sat`, the behaviour the IsoCompute Playbook reports
  (arXiv 2603.12151, Qwen2.5-7B: ≈512 Easy, ≈128 Hard).
- `RhoLaw`: reward at a fixed FLOP budget peaks at an update fraction ρ* per reward system
  (Wilhelm & Kao, arXiv 2607.13389: ρ ≈ 0.72 for rule-based rewards, ≈ 0.44–0.45 for PRMs).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from isolab.frontier import sigmoid
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
    TOKENS,
)

N_GRID = (8, 16, 32, 64, 128, 256, 512, 1024)
B_P_GRID = (8, 16, 32, 64, 128)
RHO_GRID = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


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
        "eval/avg@1": IsoComputeLaw(),
        EVAL_BEST: IsoComputeLaw(R0=0.45, A_max=0.95, n_sat=64),
        EVAL_WORST: IsoComputeLaw(R0=0.05, A_max=0.6, n_sat=512, C_mid_ref=1.5e4),
    }


def _run_key(parts: Sequence[object]) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:16]


def _eval_steps(M: int, eval_points: int) -> np.ndarray:
    """`eval_points` evaluation steps from 0 to M, log-spaced, as isolab sweeps place them."""
    if eval_points > M:
        return np.arange(M + 1)
    steps = np.unique(np.round(np.geomspace(1, M, eval_points * 3)).astype(int))
    pick = np.unique(np.round(np.linspace(0, len(steps) - 1, eval_points - 1)).astype(int))
    return np.concatenate([[0], steps[pick]])


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
            steps = _eval_steps(M, eval_points)
        else:
            at = {min(-(-int(c) // B), M) for c in checkpoints}
            steps = np.array(sorted({0, M} | at), dtype=int)
        k = len(steps)
        C = (B * steps).astype(float)
        offset = seed_sd * rng.standard_normal() * np.sqrt(steps / M) if seed_sd else 0.0
        lr = 3e-4 * math.sqrt(B / 64)
        key = _run_key((experiment, model, split, reward, n, bp, M, s))
        row = {
            "run_key": np.full(k, key),
            "run_id": np.full(k, key),
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
            "step": steps,
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


@dataclass(frozen=True)
class PlateauLaw:
    """A learning curve that rises and then stops: the saturation gate's planted world (issue
    45). avg@4 = ``start + gain·(min(log2 C, break_log2C) − first_log2C)`` for C at or beyond
    the first checkpoint (a broken stick in log2 C): `gain` per doubling up to the break, flat
    after it. `gain = 0` is a curve flat from the start, `break_log2C` beyond the last
    checkpoint one still rising at the end."""

    break_log2C: float = 13.0
    gain: float = 0.04
    start: float = 0.3
    first_log2C: float = 8.0

    def reward(self, C: np.ndarray | float) -> np.ndarray:
        lc = np.log2(np.maximum(np.asarray(C, dtype=float), 1.0))
        rise = np.minimum(lc, self.break_log2C) - self.first_log2C
        return self.start + self.gain * np.maximum(rise, 0.0)


def make_plateau_runs(
    law: PlateauLaw,
    *,
    last_log2C: float = 17.0,
    per_doubling: int = 1,
    seeds: int = 3,
    eval_sd: float = 0.005,
    seed_sd: float = 0.015,
    n_grid: Sequence[int] = (2, 4, 8, 16, 32, 64, 128),
    B_p: int = 16,
    metric: str = EVAL_AVG,
    seed: int = 0,
) -> pl.DataFrame:
    """Runs of every n of `n_grid` (B_p fixed) on the same `law`, evaluated at step 0 and at
    `per_doubling` checkpoints per doubling of C from 2^first_log2C to 2^last_log2C (1: as
    runs/nstar/cpu/long, 2: the half doublings of the planned scout). Each evaluation adds
    N(0, eval_sd²); each run a training offset ``seed_sd·z·sqrt(C / C_max)`` (the form of
    `isolab.verdicts.worlds.simulate_world`). The gate reads n = 4; the other n lend the
    seed variance of slopes, as `main` does."""
    rng = np.random.default_rng(seed)
    lcs = (
        law.first_log2C
        + np.arange(int(round((last_log2C - law.first_log2C) * per_doubling)) + 1) / per_doubling
    )
    C = np.concatenate([[0.0], 2.0**lcs])
    mean = np.concatenate([[law.start - law.gain], law.reward(C[1:])])
    frac = np.sqrt(C / C[-1])
    parts = []
    for n in n_grid:
        for s in range(seeds):
            key = _run_key(("plateau", n, B_p, s))
            value = (
                mean
                + seed_sd * rng.standard_normal() * frac
                + eval_sd * rng.standard_normal(len(C))
            )
            parts.append(pl.DataFrame({
                "run_key": key, "split": "easy", "n": n, "B_p": B_p, "seed": s,
                "step": np.arange(len(C)), ROLLOUTS: C, metric: np.clip(value, 0.0, 1.0),
                "eval_problems": 300, "eval_k_samples": 16,
            }))  # fmt: skip
    return pl.concat(parts)


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
                steps = _eval_steps(M, eval_points)
                k = len(steps)
                F = F_step * steps
                rho_obs = np.clip(rho + rng.normal(0.0, 0.002), 0.0, 1.0)
                sh_search, sh_learn, sh_reward = law.shares(rho_obs)
                key = _run_key((experiment, model, reward_name, rho, s))
                row = {
                    "run_key": np.full(k, key),
                    "run_id": np.full(k, key),
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
                    "step": steps,
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
