"""Simulated sweeps of reward-rho's (k, μ) design (`isolab.study.reward_rho.optimum`), for its
tests' false-call rate and power, and the rho claims' calibration worlds.

- `simulate_rho_design`, `rho_world`, `calibrate_rho`, `calibration_table`: the design, one
  simulated sweep on it, the tests over many (tests/test_rho_optimum.py; the larger run,
  `calibration_table`, is for `benchmarks/verdict_calibration.py`);
- `study_world`, `PLANTS`, `STRUCTURED_NULLS`: what `isolab.study.calibration` runs the rho
  claims' own tests on (their committed runs, μ alone, do not have the design the tests need);
  the RACE claim's plant adds its effect to the committed design (`isolab.verdicts.effects`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import numpy as np
import polars as pl

from isolab.metrics import clopper_pearson_upper
from isolab.study.reward_rho.optimum import (
    CURVATURE,
    EVAL_SD,
    LABELS,
    LEARNING_PER_SEARCH,
    OVERSAMPLING,
    PAPER_RHO_MODEL,
    PAPER_RHO_RULE,
    REWARD_PER_SEARCH,
    RHO_GRID,
    SEED_SD,
    SEED_SHARE,
    Axis,
    axis_values,
    learning_to_search,
    logit,
    rho_optimum_difference,
)
from isolab.verdicts import effects as fx
from isolab.verdicts.calibration import Plant, StructuredNull
from isolab.verdicts.result import StatResult, t_quantile
from isolab.verdicts.verdict import decide
from isolab.vocab import (
    EVAL_AVG,
    FLOPS_LEARNING,
    FLOPS_REWARD,
    FLOPS_SEARCH,
    FLOPS_TOTAL,
    REWARDS,
    RHO,
    RULE_BASED,
    RUN_KEY,
    STEP,
)


def simulate_rho_design(
    grid: Iterable[tuple[int, int]] = RHO_GRID,
    systems: Sequence[str] = REWARDS,
    seeds: Iterable[int] = range(4),
    *,
    learning_per_search: float = LEARNING_PER_SEARCH,
    reward_per_search: Mapping[str, float] = REWARD_PER_SEARCH,
    budget_flops: float = 2.4e11,
) -> pl.DataFrame:
    """The runs of the (k, μ) × systems × seeds design, one final row each, with the FLOP split
    of a simple accounting model per unit of search at k = 1: search k, learning
    `learning_per_search`·μ, reward `reward_per_search[system]`·k (0 for a system not listed:
    rule-based). ρ = learning / total; every run spends `budget_flops` (iso-FLOP). With the
    defaults, rule-based ρ spans 0.36–0.95 and model-based 0.11–0.89 (proxy-prm 0.11–0.79).
    No metric column: `rho_world` draws one."""
    rows = []
    for system in systems:
        r = float(reward_per_search.get(system, 0.0))
        for k, mu in grid:
            s, ell, rew = float(k), learning_per_search * mu, r * k
            total = s + ell + rew
            for seed in seeds:
                rows.append(
                    {
                        RUN_KEY: f"{system}|k{k}|mu{mu}|seed{seed}",
                        "reward": system,
                        OVERSAMPLING: k,
                        "num_iterations": mu,
                        "seed": seed,
                        STEP: 1,
                        RHO: ell / total,
                        FLOPS_SEARCH: budget_flops * s / total,
                        FLOPS_LEARNING: budget_flops * ell / total,
                        FLOPS_REWARD: budget_flops * rew / total,
                        FLOPS_TOTAL: budget_flops,
                    }
                )
    return pl.DataFrame(rows)


def rho_world(
    design: pl.DataFrame,
    rng: np.random.Generator,
    *,
    vertex_rule: float,
    vertex_model: float,
    curvature: float = CURVATURE,
    seed_sd: float = SEED_SD,
    eval_sd: float = EVAL_SD,
    seed_share: float = SEED_SHARE,
    axis: Axis = "logit_rho",
    level: float = 0.4,
    metric: str = EVAL_AVG,
) -> pl.DataFrame:
    """One simulated sweep on `design` (`simulate_rho_design`, or a runs table's final rows):
    each run's final `metric` = `level` − `curvature`·(x − vertex of its class)² + training
    noise (SD `seed_sd`, a share `seed_share` of its variance common to the runs of one seed)
    + evaluation noise (SD `eval_sd`), clipped to [0, 1]. Classes: `RULE_BASED` get
    `vertex_rule`, every other system `vertex_model`.

    x is logit ρ (`axis="logit_rho"`) or ln(C_learning / C_search) (`"learning_to_search"`).
    The two structured nulls of `rho_optimum_difference`'s calibration:
    - ρ-null, `vertex_rule == vertex_model` on logit ρ: every system has the same response
      to ρ (so the same ρ*);
    - knob null, `vertex_rule == vertex_model` on ln(C_learning / C_search): every system has
      the same response to the knobs k and μ, which its reward model's FLOPs translate into a
      ρ-response shifted by ln(1 + R / S) — the null of `learning_to_search`, not of the ρ*
      claim (where it is the paper's "the reward model eats budget")."""
    x = design.select(axis_values(axis)).to_series().to_numpy()
    rule = design["reward"].is_in(list(RULE_BASED)).to_numpy()
    mean = level - curvature * (x - np.where(rule, vertex_rule, vertex_model)) ** 2
    seeds = design["seed"].cast(pl.String).to_numpy()
    _, seed_idx = np.unique(seeds, return_inverse=True)
    common = rng.standard_normal(seed_idx.max() + 1)[seed_idx]
    z = math.sqrt(seed_share) * common + math.sqrt(1 - seed_share) * rng.standard_normal(len(x))
    value = mean + seed_sd * z + eval_sd * rng.standard_normal(len(x))
    return design.with_columns(pl.Series(metric, np.clip(value, 0.0, 1.0)))


def upper_bound(calls: int, worlds: int, level: float = 0.95) -> float:
    """One-sided Clopper–Pearson upper bound at `level` of a rate seen `calls` times in
    `worlds` (`isolab.metrics.clopper_pearson_upper`)."""
    return clopper_pearson_upper(calls, worlds, level)


@dataclass(frozen=True)
class Calibration:
    """Calls of a test over simulated worlds.

    Attributes:
        calls: Counter of `agrees` / `disagrees` / `inconclusive` (the paper's sign: `> 0`).
        refused: worlds a gate refused (counted as `inconclusive`).
        tested: worlds that passed the gates.
        covered: of those, worlds whose interval held the planted Δ.
        vertex_covered: per class, worlds whose vertex ± t·SE (at 1 − α) held the planted
            vertex (of those tested).
        worlds: worlds drawn.
    """

    calls: Counter
    refused: int
    tested: int
    covered: int
    vertex_covered: dict[str, int]
    worlds: int

    @property
    def called(self) -> int:
        return self.calls["agrees"] + self.calls["disagrees"]

    @property
    def rate(self) -> float:
        """Share of worlds called (either sign): the false-call rate in a null world."""
        return self.called / self.worlds

    @property
    def bound(self) -> float:
        """One-sided 95% Clopper–Pearson upper bound of `rate`."""
        return upper_bound(self.called, self.worlds)

    @property
    def power(self) -> float:
        """Share of worlds called with the paper's sign (`agrees`)."""
        return self.calls["agrees"] / self.worlds

    def coverage(self, label: str | None = None) -> float:
        """Share of tested worlds whose interval held the planted Δ (`label`: that class's
        vertex)."""
        hits = self.covered if label is None else self.vertex_covered[label]
        return hits / self.tested if self.tested else math.nan


#: The calibration's worlds: name → `RhoWorld`.
#: - `paper`: ρ* = 0.72 rule-based, 0.44 model-based (Δ = 1.19 on logit ρ);
#: - `rho-null`: the same ρ-response for every system, ρ* = 0.59 (the paper's two, averaged
#:   on logit ρ): the structured null of `rho_optimum_difference`;
#: - `knob-null`: the same response to the knobs for every system, C_learning / C_search* =
#:   2.57 (ρ* = 0.72 for a rule-based system): the null of `learning_to_search`. Its ρ* are
#:   0.72 and, by the reward model's FLOPs alone, ≈ 0.48 for model-based systems.
#: - `preference`: the paper's logit gap (1.19) on ln(C_learning / C_search) instead, so that
#:   model-based systems want less learning per search FLOP beyond their reward model's bill:
#:   the planted world of `learning_to_search`;
#: - `low-edge`: every system best below the grid (ρ* = 0.018, logit −4), a monotone response
#:   on every run (curvature 0.01, level 0.7): no optimum to locate, the regime in which the
#:   earlier test of slopes in raw ρ called a difference (runs/reward-rho/cpu/full peaks at
#:   μ = 1, its lowest ρ, for every system). Both tests must refuse it.
class RhoWorld(NamedTuple):
    """Where a planted world puts each reward system's optimum."""

    axis: Axis  #: the axis the response is quadratic in
    v_rule: float  #: the vertex of rule-based systems on `axis`
    v_model: float  #: the vertex of model-based systems on `axis`


_MID = (logit(PAPER_RHO_RULE) + logit(PAPER_RHO_MODEL)) / 2
PAPER_GAP = logit(PAPER_RHO_RULE) - logit(PAPER_RHO_MODEL)
WORLDS: dict[str, RhoWorld] = {
    "paper": RhoWorld("logit_rho", logit(PAPER_RHO_RULE), logit(PAPER_RHO_MODEL)),
    "rho-null": RhoWorld("logit_rho", _MID, _MID),
    "knob-null": RhoWorld("learning_to_search", logit(PAPER_RHO_RULE), logit(PAPER_RHO_RULE)),
    "preference": RhoWorld(
        "learning_to_search",
        logit(PAPER_RHO_RULE),
        logit(PAPER_RHO_RULE) - PAPER_GAP,
    ),
    "low-edge": RhoWorld("logit_rho", -4.0, -4.0),
}
#: A world's own response, where it is not the default: (curvature, level) of `rho_world`.
RESPONSE: dict[str, tuple[float, float]] = {"low-edge": (0.01, 0.7)}


def _response(world: str, curvature: float | None = None) -> tuple[float, float]:
    """(curvature, level) of `world`'s response; `curvature` overrides the world's."""
    own, level = RESPONSE.get(world, (CURVATURE, 0.4))
    return (own if curvature is None else curvature), level


#: Worlds with an effect (the rest are nulls): drawn `planted_worlds` times by
#: `calibration_table`.
PLANTED = ("paper", "preference")
TESTS: dict[Axis, Callable[[pl.DataFrame], StatResult]] = {
    "logit_rho": rho_optimum_difference,
    "learning_to_search": learning_to_search,
}


def calibrate_rho(
    worlds: int,
    *,
    world: str = "paper",
    test: Axis = "logit_rho",
    design: pl.DataFrame | None = None,
    seed: int = 0,
    curvature: float | None = None,
) -> Calibration:
    """The test on axis `test` (`TESTS`) over `worlds` draws of the world `world` (`WORLDS`,
    drawn by `rho_world` with the world's `RESPONSE`, or `curvature`) on `design`
    (default: `simulate_rho_design()`, the pre-registered 6 systems × 6 (k, μ) × 4 seeds).
    Interval coverage is counted where the world's axis is the test's own (the planted Δ is
    then vertex_rule − vertex_model). For the tests (hundreds of worlds) and the benchmark
    (`calibration_table`, thousands)."""
    axis, v_rule, v_model = WORLDS[world]
    curvature, level = _response(world, curvature)
    design = simulate_rho_design() if design is None else design
    fn = TESTS[test]
    own = axis == test
    rng = np.random.default_rng(seed)
    calls: Counter = Counter()
    refused = tested = covered = 0
    vertex_covered = dict.fromkeys(LABELS, 0)
    for _ in range(worlds):
        df = rho_world(
            design,
            rng,
            vertex_rule=v_rule,
            vertex_model=v_model,
            axis=axis,
            curvature=curvature,
            level=level,
        )
        result = fn(df)
        calls[decide(result.estimate, result.p_value, "> 0")] += 1
        if not result.ran:
            refused += 1
            continue
        tested += 1
        if not own or result.interval is None:
            continue
        covered += result.interval[0] <= v_rule - v_model <= result.interval[1]
        q = t_quantile(result.df)
        for label, planted in zip(LABELS, (v_rule, v_model), strict=True):
            fit = result.extra[label]
            vertex_covered[label] += abs(fit["vertex"] - planted) <= q * fit["vertex_se"]
    return Calibration(calls, refused, tested, covered, vertex_covered, worlds)


def calibration_table(
    null_worlds: int = 2000,
    planted_worlds: int = 1000,
    seed: int = 0,
    curvature: float | None = None,
) -> pl.DataFrame:
    """Both tests in every world of `WORLDS` (`null_worlds` draws of a null, `planted_worlds`
    of `paper`): calls, the called share with its one-sided 95% Clopper–Pearson bound, the
    share called with the paper's sign, gate refusals and interval coverage (`PLANTED` worlds
    get `planted_worlds` draws, the nulls `null_worlds`). What
    `benchmarks/verdict_calibration.py` prints for the (k, μ) design; ≈ 6 ms a world."""
    rows = []
    for i, world in enumerate(WORLDS):
        for test in TESTS:
            n = planted_worlds if world in PLANTED else null_worlds
            c = calibrate_rho(n, world=world, test=test, seed=seed + 1000 * i, curvature=curvature)
            rows.append(
                {
                    "world": world,
                    "test": test,
                    "worlds": n,
                    "called": c.called,
                    "rate": c.rate,
                    "bound_95": c.bound,
                    "agrees": c.power,
                    "refused": c.refused / n,
                    "coverage": c.coverage() if WORLDS[world].axis == test else math.nan,
                }
            )
    return pl.DataFrame(rows)


def study_world(
    world: str, seed: int, design: pl.DataFrame | None = None
) -> dict[str, pl.DataFrame]:
    """One simulated reward-rho study in `world` (`WORLDS`, with its `RESPONSE`): the `full`
    sweep on `design` (default: the pre-registered (k, μ) design), drawn with `seed`. What
    `isolab.study.calibration` runs a claim's own test on for the rho claims, whose
    committed runs (μ alone) do not have the design the test needs."""
    axis, v_rule, v_model = WORLDS[world]
    curvature, level = _response(world)
    design = simulate_rho_design() if design is None else design
    df = rho_world(
        design,
        np.random.default_rng(seed),
        vertex_rule=v_rule,
        vertex_model=v_model,
        axis=axis,
        curvature=curvature,
        level=level,
    )
    return {"full": df}


PLANTS: dict[str, Plant] = {
    "rho.rule_above_model": Plant(
        size=PAPER_GAP,
        describe="ρ* = 0.72 rule-based, 0.44 model-based (Δ logit 1.19), avg@4 concave in "
        "logit ρ, on the (k, μ) design (null: ρ* = 0.59 for every system)",
        world=partial(study_world, "paper"),
        null_world=partial(study_world, "rho-null"),
    ),
    "rho.learning_to_search": Plant(
        size=PAPER_GAP,
        describe="the paper's 1.19 gap on ln(C_learning / C_search) (null: every system "
        "responds alike to k and μ, the knob null)",
        world=partial(study_world, "preference"),
        null_world=partial(study_world, "knob-null"),
    ),
    "rho.race_same_regime": Plant(
        size=1.0,
        describe="reward concave in ρ (−2 per unit²), peak at 0.9 for rule-based and 0.1 for "
        "model-based systems",
        add=fx.race(2.0),
    ),
}

STRUCTURED_NULLS: dict[str, StructuredNull] = {
    "rho-low-edge": StructuredNull(
        "every reward system best below the grid's lowest ρ (ρ* = 0.018): a monotone response, "
        "no optimum to locate (what the committed μ-only runs show)",
        ("rho.rule_above_model", "rho.learning_to_search"),
        world=partial(study_world, "low-edge"),
    ),
}
