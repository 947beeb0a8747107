"""A planted plateau: a learning curve that rises and then stops (`PlateauLaw`), the saturation
gate's world, and the runs it makes (`make_plateau_runs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from isolab.synthetic.frames import planted_key
from isolab.vocab import (
    EVAL_AVG,
    ROLLOUTS,
    RUN_KEY,
    STEP,
)


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
            key = planted_key(("plateau", n, B_p, s))
            value = (
                mean
                + seed_sd * rng.standard_normal() * frac
                + eval_sd * rng.standard_normal(len(C))
            )
            parts.append(
                pl.DataFrame(
                    {
                        RUN_KEY: key,
                        "split": "easy",
                        "n": n,
                        "B_p": B_p,
                        "seed": s,
                        STEP: np.arange(len(C)),
                        ROLLOUTS: C,
                        metric: np.clip(value, 0.0, 1.0),
                        "eval_problems": 300,
                        "eval_k_samples": 16,
                    }
                )
            )
    return pl.concat(parts)
