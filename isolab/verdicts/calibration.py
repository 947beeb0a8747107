"""The building blocks of the verdicts' calibration: the same claim tests on simulated sweeps with
no effect (a call is a false call), with structured nulls (effects a claim must not be mistaken
for), and with a planted effect of the paper's sign (an `agrees` is a detection).

A world keeps a design — a study's runs tables (configurations, seeds, compute checkpoints:
`setting_of`), or a planned design before its runs exist (`isolab.verdicts.planned`) — and
replaces the metrics by a mean plus noise at the design's levels (`isolab.verdicts.noise` per
split, or the planned ones), drawn by `isolab.verdicts.worlds.simulate_world`. The pure-noise
null gives every configuration its group's mean learning curve (split, reward system or model
size). Each study states its claims' `Plant`s and `StructuredNull`s in its folder
(`isolab/study/<study>/worlds.py`); `isolab.study.calibration` gathers them and runs them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from isolab.verdicts import effects as fx
from isolab.verdicts.noise import noise_model, seed_share
from isolab.verdicts.worlds import null_means, simulate_world
from isolab.vocab import DEFAULT_METRICS

Data = dict[str, pl.DataFrame]
#: Groups whose curves differ in the null world (never an effect of the claims).
GROUPS = ("split", "reward", "model")


@dataclass(frozen=True)
class Plant:
    """A planted effect: its size in words and the function that adds it.

    Attributes:
        size: the effect in the claim's unit (what the power refers to).
        describe: the planted world in words.
        add: (sweep name, null means) → {metric: added values per row} (`isolab.verdicts.
            effects`).
        null_add: the same for the claim's own null world (default: nothing added; for an
            equivalence claim, the effect at its margin).
        world: (seed) → one simulated study with the effect, for a claim whose test needs a
            design its committed runs do not have (the rho claims: `isolab.study.reward_rho.
            worlds.study_world`); `add` and `null_add` are then unused.
        null_world: the same for the claim's own null.
    """

    size: float
    describe: str
    add: fx.Effect = fx.nothing
    null_add: fx.Effect | None = None
    world: Callable[[int], Data] | None = None
    null_world: Callable[[int], Data] | None = None


@dataclass(frozen=True)
class StructuredNull:
    """A world with an effect that a claim must not be called on.

    Attributes:
        describe: the world in words.
        claims: the claim ids it applies to.
        add: its effect on a design's null means (`isolab.verdicts.effects`), or None when
            `world` draws whole worlds.
        world: (seed) → one simulated study (sweep name → runs table), for a null that brings
            its own design (e.g. `isolab.study.reward_rho.worlds`'); None when `add` is given.
    """

    describe: str
    claims: tuple[str, ...]
    add: fx.Effect | None = None
    world: Callable[[int], Data] | None = None


@dataclass(frozen=True)
class Setting:
    """A world's fixed parts, per sweep: the null means, the noise (metric → (evaluation SD,
    training SD) per row) and the share of training noise a seed's runs have in common."""

    means: dict[str, pl.DataFrame]
    noise: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]
    shares: dict[str, np.ndarray]


def noise_levels(df: pl.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per metric, (evaluation SD, training SD) for every row, measured per split (or on the
    whole table) from the design; a training SD the seeds do not resolve is taken as the
    evaluation SD (a conservative guess)."""
    groups = ["split"] if "split" in df.columns else []
    ev = {m: np.zeros(df.height) for m in DEFAULT_METRICS}
    tr = {m: np.zeros(df.height) for m in DEFAULT_METRICS}
    parts = df.partition_by(groups, as_dict=True) if groups else {("all",): df}
    for key, part in parts.items():
        mask = np.ones(df.height, bool)
        if groups:
            mask = (df["split"] == key[0]).to_numpy()
        for m, n in noise_model(part).items():
            ev[m][mask] = n.eval_sd
            tr[m][mask] = n.train_sd if math.isfinite(n.train_sd) else n.eval_sd
    return {m: (ev[m], tr[m]) for m in DEFAULT_METRICS if m in df.columns}


def seed_shares(df: pl.DataFrame) -> np.ndarray:
    """Per row, the share of the training variance common to one seed's runs, measured per split
    (`isolab.verdicts.noise.seed_share`)."""
    if "split" not in df.columns:
        return np.full(df.height, seed_share(df))
    out = np.zeros(df.height)
    for split in df["split"].unique().to_list():
        mask = (df["split"] == split).to_numpy()
        out[mask] = seed_share(df.filter(pl.col("split") == split))
    return out


def setting_of(data: Data, shared_seeds: bool = True) -> Setting:
    """The setting of a study's runs tables: their design, the noise they measured, their null
    means (each group's mean learning curve); seed shares as measured (0 with
    `shared_seeds=False`)."""
    return Setting(
        means={
            name: null_means(df, [m for m in DEFAULT_METRICS if m in df.columns], GROUPS)
            for name, df in data.items()
        },
        noise={name: noise_levels(df) for name, df in data.items()},
        shares={
            name: seed_shares(df) if shared_seeds else np.zeros(df.height)
            for name, df in data.items()
        },
    )


def world(setting: Setting, effect: fx.Effect | None, seed: int) -> Data:
    """One simulated study on `setting`, with `effect` added to its means (None: the null)."""
    out = {}
    for i, (name, means) in enumerate(setting.means.items()):
        added = effect(name, means) if effect is not None else None
        out[name] = simulate_world(
            means, setting.noise[name], seed * 101 + i, added, setting.shares[name]
        )
    return out
