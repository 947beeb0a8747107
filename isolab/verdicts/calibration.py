"""Calibration of the verdicts: the same claim tests on simulated sweeps with no effect (a call
is a false call) and with a planted effect of the paper's sign (an `agrees` is a detection).

A world keeps the real design of a study (its runs table: configurations, seeds, compute
checkpoints) and replaces the metrics by a mean plus noise at the levels the design measured
(`isolab.verdicts.noise.noise_model`, per split), drawn by `isolab.verdicts.worlds`: the null
mean is the design's own mean learning curve of each group (split, reward system or model
size), identical for every configuration; the planted world adds one effect per claim, stated
in `PLANTS`.
`benchmarks/verdict_calibration.py` prints the false-call rate and the power of every claim.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from isolab.verdicts.claims import CLAIMS, verdict
from isolab.verdicts.noise import noise_model, seed_share
from isolab.verdicts.worlds import null_means, simulate_world
from isolab.vocab import (
    DEFAULT_METRICS,
    EVAL_AVG,
    EVAL_BEST,
    EVAL_WORST,
    MODEL_BASED,
    RHO,
    ROLLOUTS,
    RULE_BASED,
)

Data = dict[str, pl.DataFrame]
#: Groups whose curves differ in the null world (never an effect of the claims).
GROUPS = ("split", "reward", "model")


@dataclass(frozen=True)
class Plant:
    """A planted effect: its size in words and the function that adds it.

    Attributes:
        size: the effect in the claim's unit (what the power refers to).
        describe: the planted world in words.
        add: (sweep name, design frame) → {metric: added values per row}.
        null_add: the same for a world that must not be called (default: nothing added).
    """

    size: float
    describe: str
    add: Callable[[str, pl.DataFrame], dict[str, np.ndarray]]
    null_add: Callable[[str, pl.DataFrame], dict[str, np.ndarray]] | None = None


def _frac(df: pl.DataFrame) -> np.ndarray:
    last = df.select(pl.col("step").max().over("run_key")).to_series().to_numpy().astype(float)
    return np.sqrt(df["step"].to_numpy().astype(float) / np.maximum(last, 1.0))


def _centred_log2(df: pl.DataFrame, column: str) -> np.ndarray:
    v = np.log2(np.maximum(df[column].to_numpy().astype(float), 1e-12))
    return v - v[np.isfinite(v)].mean()


def _is(df: pl.DataFrame, column: str, value) -> np.ndarray:
    return (df[column] == value).to_numpy() if column in df.columns else np.zeros(df.height, bool)


def _arm(split: str, factor: str, value, size: float):
    def add(_: str, df: pl.DataFrame) -> dict[str, np.ndarray]:
        on = _is(df, "split", split) & _is(df, factor, value)
        return {EVAL_AVG: size * on * _frac(df)}

    return add


def _lr(size: float):
    def add(_: str, df: pl.DataFrame) -> dict[str, np.ndarray]:
        base = df["B_base"][0] if "B_base" in df.columns else 64
        on = _is(df, "lr_scaling", "sqrt") & (df["B"] != base).to_numpy()
        return {EVAL_AVG: size * on * _frac(df)}

    return add


def _interaction(split: str, size: float, power_c: int = 1):
    def add(_: str, df: pl.DataFrame) -> dict[str, np.ndarray]:
        on = _is(df, "split", split)
        xn, xc = _centred_log2(df, "n"), _centred_log2(df, ROLLOUTS)
        return {EVAL_AVG: size * on * xn * xc**power_c * (df["step"] > 0).to_numpy()}

    return add


def _optimum(v_easy: float, v_hard: float, curvature: float = 0.012):
    def add(_: str, df: pl.DataFrame) -> dict[str, np.ndarray]:
        log_n = np.log2(df["n"].to_numpy().astype(float))
        vertex = np.where(_is(df, "split", "easy"), v_easy, v_hard)
        return {EVAL_AVG: -curvature * (log_n - vertex) ** 2 * _frac(df)}

    return add


def _gap(split: str, size: float):
    def add(_: str, df: pl.DataFrame) -> dict[str, np.ndarray]:
        g = size / 2 * _is(df, "split", split) * _centred_log2(df, "n") * _frac(df)
        return {EVAL_WORST: g, EVAL_BEST: -g}

    return add


def _rho(size: float):
    def add(_: str, df: pl.DataFrame) -> dict[str, np.ndarray]:
        rho = df[RHO].fill_null(0.0).to_numpy().astype(float)
        rule = df["reward"].is_in(list(RULE_BASED)).to_numpy()
        model = df["reward"].is_in(list(MODEL_BASED)).to_numpy()
        centred = rho - np.array([rho[df["reward"].to_numpy() == r].mean() for r in df["reward"]])
        slope = np.where(rule, size / 2, np.where(model, -size / 2, 0.0))
        return {EVAL_AVG: slope * centred * 10 * _frac(df)}

    return add


def _race(curvature: float):
    """Concave reward in ρ, peaking far from the regime threshold 0.5: at 0.9 for rule-based
    systems, at 0.1 for model-based ones."""

    def add(_: str, df: pl.DataFrame) -> dict[str, np.ndarray]:
        rho = df[RHO].fill_null(0.5).to_numpy().astype(float)
        peak = np.where(df["reward"].is_in(list(RULE_BASED)).to_numpy(), 0.9, 0.1)
        return {EVAL_AVG: -curvature * (rho - peak) ** 2 * _frac(df)}

    return add


def _size(size: float):
    def add(_: str, df: pl.DataFrame) -> dict[str, np.ndarray]:
        models = sorted(df["model"].unique().to_list())
        slope = {m: size * (i / max(len(models) - 1, 1) - 0.5) for i, m in enumerate(models)}
        s = np.array([slope[m] for m in df["model"].to_list()])
        return {EVAL_AVG: s * _centred_log2(df, "n") * _frac(df)}

    return add


PLANTS: dict[str, Plant] = {
    "healthy.kl_entropy_easy": Plant(
        size=0.06,
        describe="KL + entropy on lifts Easy avg@4 by 0.06 by the end",
        add=_arm("easy", "recipe", "kl_entropy", 0.06),
    ),
    "healthy.kl_entropy_hard": Plant(
        size=-0.03,
        describe="KL + entropy on lowers Hard avg@4 by 0.03",
        add=_arm("hard", "recipe", "kl_entropy", -0.03),
    ),
    "healthy.lr_sqrt": Plant(
        size=0.05,
        describe="sqrt scaling lifts final avg@4 by 0.05 where B ≠ B_base",
        add=_lr(0.05),
    ),
    "nstar.grows_easy": Plant(
        size=0.004,
        describe="log2 n × log2 C interaction of 0.004 on Easy",
        add=_interaction("easy", 0.004),
    ),
    "nstar.grows_hard": Plant(
        size=0.002,
        describe="log2 n × log2 C interaction of 0.002 on Hard",
        add=_interaction("hard", 0.002),
    ),
    "nstar.easy_above_hard": Plant(
        size=3.0,
        describe="reward concave in log2 n (−0.012 per doubling²), best n 32 on Easy, 4 on Hard",
        add=_optimum(5.0, 2.0),
        null_add=_optimum(3.5, 3.5),
    ),
    "nvsbp.more_n_with_steps": Plant(
        size=0.005,
        describe="log2 n × log2 C interaction of 0.005 on Easy",
        add=_interaction("easy", 0.005),
    ),
    "nvsbp.nonmonotone_hard": Plant(
        size=0.003,
        describe="log2 n × (log2 C)² term of 0.003 on Hard",
        add=_interaction("hard", 0.003, power_c=2),
    ),
    "bestk.worst_easy": Plant(
        size=0.01,
        describe="per doubling of n, worst@4 − best@4 rises 0.01 on Easy",
        add=_gap("easy", 0.01),
    ),
    "bestk.best_hard": Plant(
        size=-0.01,
        describe="per doubling of n, worst@4 − best@4 falls 0.01 on Hard",
        add=_gap("hard", -0.01),
    ),
    "rho.rule_above_model": Plant(
        size=0.03,
        describe="per +0.1 of ρ, rule-based avg@4 gains 0.03 more than model-based",
        add=_rho(0.03),
    ),
    "rho.race_same_regime": Plant(
        size=1.0,
        describe="reward concave in ρ (−2 per unit²), peak at 0.9 for rule-based and 0.1 for "
        "model-based systems",
        add=_race(2.0),
    ),
    "size.best_n_depends": Plant(
        size=0.03,
        describe="slopes in log2 n that differ by 0.03 from the smallest to the largest model",
        add=_size(0.03),
    ),
}


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


def _world(
    data: Data, plant: Callable | None, seed: int, noise: dict, means: dict, shares: dict
) -> Data:
    out = {}
    for i, (name, df) in enumerate(data.items()):
        effect = plant(name, df) if plant is not None else None
        out[name] = simulate_world(means[name], noise[name], seed * 101 + i, effect, shares[name])
    return out


def calibrate(
    claim_id: str,
    data: Data,
    sims: int,
    planted: bool,
    seed: int = 0,
    shared_seeds: bool = True,
) -> Counter:
    """Calls of `claim_id` over `sims` simulated worlds on the design of `data` (the study's runs
    tables): with no effect (`planted=False`; the plant's `null_add` when it has one) or with
    the planted effect. A world's runs of one seed share the part of their training noise the
    design measured as common to a seed (`seed_shares`; none with `shared_seeds=False`).
    Returns a Counter of calls."""
    claim = CLAIMS[claim_id]
    plant = PLANTS[claim_id]
    noise = {name: noise_levels(df) for name, df in data.items()}
    shares = {
        name: seed_shares(df) if shared_seeds else np.zeros(df.height) for name, df in data.items()
    }
    means = {
        name: null_means(df, [m for m in DEFAULT_METRICS if m in df.columns], GROUPS)
        for name, df in data.items()
    }
    add = plant.add if planted else plant.null_add
    calls: Counter = Counter()
    for s in range(sims):
        world = _world(data, add, seed + s, noise, means, shares)
        calls[verdict(claim, claim.run(world)).call] += 1
    return calls
