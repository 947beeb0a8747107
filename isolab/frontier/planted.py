"""Planted worlds where n* moves with compute, and the regret of `recommend` in them beside its
two baselines (issue 47).

`recommend`'s held-out check (`isolab.frontier.validate`) only means something where the answer
at C differs from the answer at C / factor. On the committed testbed the best n hardly moves,
and there a rule that holds the optimum fixed (the best seed mean at the compute seen) is right
by construction. The worlds here are drawn from the `IsoComputeLaw` family (small n rise first
and plateau low, so n* grows with compute and saturates) on the grid of runs/nstar/cpu/main:
n ∈ {2 … 128}, B_p = 16, 3 seeds, checkpoints 256 … 65,536 rollouts. A world's *kind* is what
its true n* does over those checkpoints (`world_kind`):

- ``static``: the same n at every checkpoint;
- ``settled``: n* moves, but is the same at C/4 and C (it stopped moving before the check);
- ``moving k``: n* moves k doublings over the range (k = 1, 2, 3) and is still moving in the
  last 4× (its value at C/4 is not its value at C): the worlds where the optimum held fixed is
  wrong.

Each world is simulated as a sweep (`isolab.synthetic.make_isocompute_runs`: each evaluation
with noise `eval_sd`, each run with a training offset that grows to `seed_sd` at C; the
script sets both from the committed runs), the ScaleRL check runs on it at C/2 and C/4
(`validate_recommend`), and every pick is scored by its *true* regret at C, the law's reward of
the true best minus that of the pick, in units of the standard error of a difference of two
arm means at C (``√2 · SD / √seeds``, SD one run's noise at C). A random arm's true regret is
the mean over arms; where it is within `WITHIN_SE` of those units, the world cannot tell a
rule from chance (`cannot_fail`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from isolab.frontier.recommend import CHECK_FACTORS, validate_recommend
from isolab.frontier.validate import WITHIN_SE, budget_noise, runs_at_budget
from isolab.synthetic import IsoComputeLaw, make_isocompute_runs
from isolab.vocab import EVAL_AVG, ROLLOUTS

#: The grid of runs/nstar/cpu/main at one B_p: n, its B_p, seeds and checkpoints (rollouts).
N_GRID = (2, 4, 8, 16, 32, 64, 128)
B_P = 16
SEEDS = 3
CHECKPOINTS = tuple(2.0 ** np.arange(8, 17))
#: The kinds of world, in the order tables list them (module docstring).
KINDS = ("static", "settled", "moving 1", "moving 2", "moving 3")
#: The rules scored in every world: `recommend`'s advice and its two baselines.
RULES = ("recommend", "best seed mean", "random arm")


@dataclass(frozen=True)
class PlantedWorld:
    """A law and the noise of its runs.

    Attributes:
        law: the true reward of every n at every compute.
        kind: what its n* does over the checkpoints (`world_kind`).
        eval_sd: SD of one evaluation's noise (the binomial sampling of the eval set).
        seed_sd: SD of a run's training offset at the last checkpoint (it grows as √(C / C_max),
            shared by the run's checkpoints: a lucky run stays lucky).
    """

    law: IsoComputeLaw
    kind: str
    eval_sd: float
    seed_sd: float

    @property
    def se_diff(self) -> float:
        """The standard error of a difference of two arm means (`SEEDS` seeds each) at C."""
        return math.sqrt(2 * (self.eval_sd**2 + self.seed_sd**2) / SEEDS)


def sweep_noise(df: pl.DataFrame, *, x: str = ROLLOUTS, y: str = EVAL_AVG) -> tuple[float, float]:
    """(eval_sd, seed_sd) of a measured sweep of one setting, for `PlantedWorld`: the spread of
    one run between seeds (`budget_noise`) at its first checkpoint, where training has not yet
    spread the seeds apart, and what the spread at its last checkpoint adds to it."""
    C = sorted(v for v in df[x].unique().to_list() if v > 0)
    if not C:
        raise ValueError(f"no run has {x} > 0: no checkpoint to measure the noise at.")
    first, last = (budget_noise(df, runs_at_budget(df, c, x, y), y).sd for c in (C[0], C[-1]))
    if not (math.isfinite(first) and math.isfinite(last)):
        raise ValueError("no configuration has two seeds: the sweep shows no seed spread.")
    return first, math.sqrt(max(last**2 - first**2, 0.0))


def world_kind(law: IsoComputeLaw, factor: float = max(CHECK_FACTORS)) -> str | None:
    """The kind of world `law` makes on `N_GRID` over `CHECKPOINTS` (module docstring); None
    for a move of more than three doublings, or one that goes down."""
    path = np.log2(law.n_star(np.array(CHECKPOINTS), N_GRID))
    at_fit = np.log2(law.n_star(CHECKPOINTS[-1] / factor, N_GRID)[0])
    span = int(round(path.max() - path.min()))
    if span == 0:
        return "static"
    if np.any(np.diff(path) < 0) or span > 3:
        return None
    return "settled" if at_fit == path[-1] else f"moving {span}"


def draw_law(rng: np.random.Generator) -> IsoComputeLaw:
    """A law of the `IsoComputeLaw` family with its parameters drawn over ranges that make
    every kind of world: base reward 0.05–0.4, a rise of 0.1–0.5, saturation at any n of the
    grid, a plateau that falls away from n_sat (quadratic in log2 n) by 2–80% of the rise at
    the grid's furthest n, C_mid of n = 2 at 10²–10^4.5 rollouts, growing as n^0–n^1.5,
    steepness B 0.7–2."""
    R0, rise = rng.uniform(0.05, 0.4), rng.uniform(0.1, 0.5)
    n_sat = int(rng.choice(N_GRID))
    # the n furthest from n_sat keeps at least a fifth of the rise: rewards stay in [R0, 0.9]
    far = max(abs(math.log2(n / n_sat)) for n in N_GRID)
    return IsoComputeLaw(
        R0=R0,
        A_max=R0 + rise,
        n_sat=n_sat,
        curvature=rng.uniform(0.02, 0.8) * rise / far**2,
        C_mid_ref=10 ** rng.uniform(2, 4.5),
        n_ref=2,
        gamma=rng.uniform(0.0, 1.5),
        B=rng.uniform(0.7, 2.0),
        B_p_opt=B_P,
    )


def draw_worlds(
    per_kind: int,
    noises: Sequence[tuple[float, float]],
    *,
    kinds: Sequence[str] = KINDS,
    seed: int = 0,
    max_draws: int = 100_000,
) -> list[PlantedWorld]:
    """`per_kind` worlds of each of `kinds`: laws drawn by `draw_law` until every kind has its
    count, each given a noise (eval_sd, seed_sd) drawn from `noises` (e.g. the committed Easy
    and Hard runs')."""
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise ValueError(f"kinds {unknown} are not kinds of world: choose among {KINDS}.")
    if not noises:
        raise ValueError("noises is empty: give at least one (eval_sd, seed_sd) pair.")
    rng = np.random.default_rng(seed)
    worlds: dict[str, list[PlantedWorld]] = {k: [] for k in kinds}
    for _ in range(max_draws):
        if all(len(w) >= per_kind for w in worlds.values()):
            break
        law = draw_law(rng)
        kind = world_kind(law)
        if kind in worlds and len(worlds[kind]) < per_kind:
            eval_sd, seed_sd = noises[int(rng.integers(len(noises)))]
            worlds[kind].append(PlantedWorld(law, kind, eval_sd, seed_sd))
    short = {k: len(w) for k, w in worlds.items() if len(w) < per_kind}
    if short:
        raise ValueError(
            f"after {max_draws:,} draws some kinds are short of {per_kind}: {short}; raise "
            "max_draws or ask for fewer worlds"
        )
    return [w for k in kinds for w in worlds[k]]


def simulate(world: PlantedWorld, *, seed: int) -> pl.DataFrame:
    """The sweep of `world`: every n of `N_GRID` at `B_P`, `SEEDS` seeds, evaluated at step 0 and
    at each of `CHECKPOINTS`."""
    return make_isocompute_runs(
        {EVAL_AVG: world.law},
        n_grid=N_GRID,
        B_p_grid=(B_P,),
        budget_rollouts=int(CHECKPOINTS[-1]),
        seeds=SEEDS,
        checkpoints=CHECKPOINTS,
        noise=world.eval_sd,
        seed_sd=world.seed_sd,
        seed=seed,
    )


def true_regrets(law: IsoComputeLaw, C: float) -> dict[int, float]:
    """Per n of `N_GRID`: the law's reward at C of the true best n minus that of n."""
    R = law.reward(C, np.array(N_GRID, dtype=float), B_P)
    return {n: float(R.max() - r) for n, r in zip(N_GRID, R, strict=True)}


def score_world(world: PlantedWorld, df: pl.DataFrame, **optimal_n_kwargs) -> list[dict]:
    """One row per check factor × rule (`RULES`): the rule's pick and its true regret at C,
    raw and in units of `PlantedWorld.se_diff` (NaN without noise), with what the check printed
    (its verdict) and how many doublings the true n* moved from C / factor to C."""
    se = world.se_diff
    rows = []
    for v in validate_recommend(df, **optimal_n_kwargs):
        truth = true_regrets(world.law, v.C)
        n_fit, n_C = (world.law.n_star(c, N_GRID)[0] for c in (v.C / v.factor, v.C))
        common = {
            "kind": world.kind,
            "factor": v.factor,
            "moved_after_fit": round(math.log2(n_C / n_fit)),
            "verdict": v.verdict,
            "source": v.source,
            "se_diff": se,
        }
        picks = {
            "recommend": v.predicted.get("n") if v.verdict != "not checked" else None,
            "best seed mean": v.baseline.allocation.get("n") if v.baseline else None,
            "random arm": None,
        }
        for rule, n in picks.items():
            if rule == "random arm":  # every arm with equal weight
                regret = float(np.mean(list(truth.values())))
            else:
                regret = truth[int(n)] if n is not None else math.nan
            rows.append(
                {
                    **common,
                    "rule": rule,
                    "n": n,
                    "regret": regret,
                    "regret_se": regret / se if se > 0 else math.nan,
                }
            )
    return rows


def calibrate(worlds: Sequence[PlantedWorld], *, seed: int = 0, **optimal_n_kwargs) -> pl.DataFrame:
    """`score_world` over `worlds`, each simulated once (seed `seed` + its index), with a
    `world` column (the index)."""
    rows = []
    for i, world in enumerate(worlds):
        for r in score_world(world, simulate(world, seed=seed + i), **optimal_n_kwargs):
            rows.append({"world": i, **r})
    return pl.DataFrame(rows, infer_schema_length=None)


def summarize(scores: pl.DataFrame) -> pl.DataFrame:
    """Per kind × factor × rule (from `calibrate`): `worlds`, the mean and median true regret in
    standard errors of a difference, the share within `WITHIN_SE` of them among the worlds
    that can fail (a random arm beyond `WITHIN_SE`: the rest pass whatever the pick); for
    `recommend`, its wins, ties and losses against the best seed mean (true regret lower, equal,
    higher; null for the other rules); `cannot_fail`: the worlds where a random arm is within
    `WITHIN_SE` too; and `moved`: the worlds whose true n* moved between C / factor and C."""
    order = {k: i for i, k in enumerate(KINDS)} | {r: i for i, r in enumerate(RULES)}
    base = scores.filter(pl.col("rule") == "best seed mean").select(
        "world", "factor", pl.col("regret").alias("_base")
    )
    rand = scores.filter(pl.col("rule") == "random arm").select(
        "world", "factor", (pl.col("regret_se") <= WITHIN_SE).alias("_cannot")
    )
    s = scores.join(base, on=["world", "factor"]).join(rand, on=["world", "factor"])
    vs = pl.col("regret") - pl.col("_base")
    return (
        s.group_by("kind", "factor", "rule")
        .agg(
            pl.len().alias("worlds"),
            pl.col("regret_se").mean().alias("mean_se"),
            pl.col("regret_se").median().alias("median_se"),
            (pl.col("regret_se") <= WITHIN_SE).filter(~pl.col("_cannot")).mean().alias("within"),
            (vs < -1e-12).sum().alias("wins"),
            (vs.abs() <= 1e-12).sum().alias("ties"),
            (vs > 1e-12).sum().alias("losses"),
            pl.col("_cannot").sum().alias("cannot_fail"),
            (pl.col("moved_after_fit") != 0).sum().alias("moved"),
        )
        .with_columns(
            *(
                pl.when(pl.col("rule") == "recommend").then(pl.col(c))
                for c in ("wins", "ties", "losses")
            ),
            _k=pl.col("kind").replace_strict(order),
            _r=pl.col("rule").replace_strict(order),
        )
        .sort("_k", "factor", "_r")
        .drop("_k", "_r")
    )
