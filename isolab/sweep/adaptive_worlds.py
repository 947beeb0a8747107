"""Planted worlds for calibrating a stopping rule (`isolab.sweep.adaptive`): sweeps whose truth is
known, drawn like a measured one (issues 32 and 47).

A world is the truth of every arm at every checkpoint, an array (worlds, arms, rungs) with NaN
where an arm does not evaluate (a large n·B_p's first checkpoint comes later), and the arm best
at the budget. `Design` is what a world copies from a measured sweep: its arms, seeds,
checkpoints, evaluation size, seed-mean curves and noise (`measured_noise`). Four kinds:

- *constant lead* (`constant_lead`): the measured curves, one random arm raised by a constant so
  that it beats every other arm at the budget by `margin`: the best is (nearly) the best at
  every checkpoint, the only kind issue 32 calibrated on.
- *late bloomer, IsoComputeLaw* (`law_late_bloomers`): every arm an `isolab.synthetic.
  IsoComputeLaw` sigmoid with random parameters (`LAW_RANGES`), kept where the arm best at the
  budget was behind the best of the others at every compute up to `CROSSING`[0] = 1/8 of the
  budget and last overtook them by `CROSSING`[1] = 1/2, and scaled so that it leads at the
  budget by `margin`.
- *late bloomer, spliced* (`spliced_late_bloomers`): the measured curves, one arm's gap to the
  best of the others made linear in log C, through 0 at a crossing drawn log-uniformly between
  1/8 and 1/2 of the budget and `margin` at the budget (its own measured curve where that is
  higher); the arm is drawn among those behind the others' best at every checkpoint before it.
- *null* (`null_worlds`): every arm on the measured arms' mean curve; the best at the budget is
  whichever the noise makes it.

`draw_runs` adds each run's noise: an AR(1) deviation in checkpoint order with the measured seed
spread per checkpoint and its lag-1 correlation (`WorldNoise`), clipped to [0, 1]. `world_frame`
writes one world as a runs table, which `replay` reads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from isolab.frontier.validate import ALLOCATION
from isolab.sweep.adaptive import arm_label
from isolab.synthetic import IsoComputeLaw
from isolab.table import as_float, require, run_column
from isolab.vocab import DEFAULT_X, DEFAULT_Y

#: The share of the budget between which a late bloomer last crosses the leader.
CROSSING = (1 / 8, 1 / 2)
#: `law_late_bloomers`' draws (uniform; n_sat and B_p_opt from the grid): where n saturates,
#: how fast the plateau falls away from it (at a rise of 1, before the scaling to the margin:
#: ≤ 0.04 keeps every plateau of n ∈ 2…128 above the start), how much later a larger n rises
#: (C_mid ∝ n^gamma), the steepness B in log C, the midpoint of n_sat as a share of the budget
#: (log-uniform), and B_p's cost away from its best.
LAW_RANGES = {
    "n_sat": (4, 64),
    "curvature": (0.005, 0.04),
    "gamma": (0.2, 1.2),
    "B": (0.8, 2.5),
    "C_mid_share": (1 / 16, 4.0),
    "bp_penalty": (0.005, 0.05),
}
#: Truths above this are refused (a world scaled to its margin must stay a reward in [0, 1]).
CEILING = 0.98


@dataclass(frozen=True)
class WorldNoise:
    """Noise of one run's y around its arm's truth, as measured on a sweep (`measured_noise`):
    `sd` per rung (the seed spread, evaluation noise included) and `rho`, the correlation of a
    run's deviations at consecutive rungs (a run that is lucky at one checkpoint tends to stay
    so: an AR(1) in rung order)."""

    sd: dict[float, float]
    rho: float


def measured_noise(
    df: pl.DataFrame, *, x: str = DEFAULT_X, y: str = DEFAULT_Y, config: Sequence[str] = ALLOCATION
) -> WorldNoise:
    """The seed spread per rung and the lag-1 correlation of runs' deviations from their arm's
    seed mean, pooled over arms."""
    cfg = [c for c in config if c in df.columns]
    key = run_column(df)
    d = df.filter(pl.col(x) > 0).with_columns(
        res=pl.col(y) - pl.col(y).mean().over(*cfg, x), k=pl.len().over(*cfg, x)
    )
    # pooled variance: Σ res² / Σ (k − 1) over arms; per row (k − 1)/k of a dof
    sd = (
        d.filter(pl.col("k") >= 2)
        .group_by(x)
        .agg(((pl.col("res") ** 2).sum() / ((pl.col("k") - 1) / pl.col("k")).sum()).sqrt())
        .sort(x)
    )
    w = d.sort(x).with_columns(prev=pl.col("res").shift().over(key)).drop_nulls("prev")
    rho = float(np.corrcoef(w["res"].to_numpy(), w["prev"].to_numpy())[0, 1])
    return WorldNoise(dict(zip(sd[x].to_list(), sd["res"].to_list(), strict=True)), rho)


@dataclass(frozen=True)
class Design:
    """A measured sweep's layout, which planted worlds copy (`design`).

    Attributes:
        arms: one row per arm (its config columns), in array order.
        labels: each arm's name, as `replay` names it ("n=4,B_p=16").
        rungs: the checkpoints (x > 0), increasing; the last is the budget.
        truth: (arms, rungs) seed-mean curves, NaN where an arm does not evaluate.
        seeds: runs per arm.
        noise: the seed spread per rung and its lag-1 correlation.
        draws: problems × samples of each evaluation (0: unknown), for the binomial floor.
    """

    arms: pl.DataFrame
    labels: list[str]
    rungs: np.ndarray
    truth: np.ndarray
    seeds: int
    noise: WorldNoise
    draws: int

    @property
    def budget(self) -> float:
        return float(self.rungs[-1])

    @property
    def has(self) -> np.ndarray:
        """(arms, rungs): the arm evaluates at the rung."""
        return ~np.isnan(self.truth)

    @property
    def end(self) -> np.ndarray:
        """(arms,): each arm's last checkpoint, the compute one of its runs spends in full."""
        last = self.has.shape[1] - 1 - np.argmax(self.has[:, ::-1], axis=1)
        return self.rungs[last]

    @property
    def margin(self) -> float:
        """One run's seed SD at the budget: the lead planted at the budget by default."""
        return self.noise.sd[self.budget]

    @property
    def sd(self) -> np.ndarray:
        """(rungs,): one run's noise SD at each rung."""
        return np.array([self.noise.sd[float(c)] for c in self.rungs])


def design(
    df: pl.DataFrame, *, x: str = DEFAULT_X, y: str = DEFAULT_Y, config: Sequence[str] = ALLOCATION
) -> Design:
    """The layout of one measured sweep (one setting: split it first). Every arm must have the
    same number of seeds, two or more, each run evaluated at its arm's checkpoints."""
    require(df, x, y)
    cfg = [c for c in config if c in df.columns]
    trained = df.filter(pl.col(x) > 0)
    cells = trained.group_by(*cfg, x).agg(pl.col(y).mean().alias("_mean"), pl.len().alias("_k"))
    seeds = cells["_k"].unique().to_list()
    if len(seeds) != 1 or seeds[0] < 2:
        raise ValueError(
            f"runs per arm and checkpoint {sorted(seeds)}: planted worlds need the same number of "
            "seeds, two or more, in every arm at every checkpoint (give a sweep's finished runs "
            "of one setting)."
        )
    arms = trained.select(cfg).unique().sort(cfg)
    rungs = np.array(sorted(trained[x].unique().to_list()), dtype=float)
    index = {row: i for i, row in enumerate(arms.iter_rows())}
    truth = np.full((arms.height, len(rungs)), np.nan)
    for row in cells.iter_rows(named=True):
        truth[index[tuple(row[c] for c in cfg)], np.searchsorted(rungs, row[x])] = row["_mean"]
    labels = [arm_label(row, cfg) for row in arms.iter_rows(named=True)]
    noise = measured_noise(df, x=x, y=y, config=cfg)
    return Design(arms, labels, rungs, truth, int(seeds[0]), noise, _draws(df))


def _draws(df: pl.DataFrame) -> int:
    """Problems × samples of the smallest evaluation, as `budget_noise` floors the spread."""
    cols = ("eval_problems", "eval_k_samples")
    if not all(c in df.columns for c in cols):
        return 0
    sizes = [df[c].cast(pl.Float64, strict=False).drop_nulls() for c in cols]
    sizes = [s.filter(s >= 1) for s in sizes]
    if not all(s.len() for s in sizes):
        return 0
    return int(as_float(sizes[0].min()) * as_float(sizes[1].min()))


@dataclass(frozen=True)
class Worlds:
    """Planted worlds of one kind: `truth` (worlds, arms, rungs) and `best`, the arm best at the
    budget in each (None: the noise decides, as in null worlds)."""

    kind: str
    truth: np.ndarray
    best: np.ndarray | None


def _others_best(truth: np.ndarray, arm: int) -> np.ndarray:
    """(rungs,): the best truth of the arms other than `arm` at each rung."""
    return np.nanmax(np.delete(truth, arm, axis=0), axis=0)


def constant_lead(d: Design, rng: np.random.Generator, worlds: int, margin: float) -> Worlds:
    """The measured curves, a random arm raised by a constant so that it beats every other arm
    at the budget by `margin` (not lowered where it already does)."""
    truth = np.repeat(d.truth[None], worlds, axis=0)
    best = rng.integers(0, len(d.labels), worlds)
    for w, b in enumerate(best):
        lead = truth[w, b, -1] - _others_best(d.truth, b)[-1]
        truth[w, b] += max(margin - lead, 0.0)
    return Worlds("constant lead", truth, best)


def null_worlds(d: Design, worlds: int) -> Worlds:
    """Every arm on the measured arms' mean curve, at its own checkpoints."""
    mean = np.nanmean(d.truth, axis=0)
    truth = np.where(d.has, mean[None, :], np.nan)
    return Worlds("null", np.repeat(truth[None], worlds, axis=0), None)


def spliced_late_bloomers(
    d: Design, rng: np.random.Generator, worlds: int, margin: float
) -> Worlds:
    """The measured curves with a late bloomer spliced in (module docstring): its gap to the
    others' best is ``margin · log(C / C_x) / log(budget / C_x)``, or its own curve's if higher."""
    truth = np.repeat(d.truth[None], worlds, axis=0)
    best = np.empty(worlds, dtype=int)
    log_c = np.log(d.rungs)
    for w in range(worlds):
        crossing = math.log(d.budget) + rng.uniform(*np.log(CROSSING))
        behind = [b for b in range(len(d.labels)) if _behind_until(d, b, crossing)]
        if not behind:
            raise ValueError(
                f"no arm is behind the others' best at every checkpoint before C = "
                f"{math.exp(crossing):,.0f}: the sweep has no arm to splice a late bloomer into "
                "(give a sweep whose arms differ before 1/8 of the budget)."
            )
        b = int(rng.choice(behind))
        ramp = margin * (log_c - crossing) / (math.log(d.budget) - crossing)
        truth[w, b] = np.fmax(d.truth[b], _others_best(d.truth, b) + ramp)
        truth[w, b][~d.has[b]] = np.nan
        best[w] = b
    return Worlds("late bloomer, spliced", truth, best)


def _behind_until(d: Design, arm: int, log_crossing: float) -> bool:
    """Whether `arm`'s measured curve is below the others' best at every checkpoint of it
    before the crossing."""
    before = (np.log(d.rungs) < log_crossing) & d.has[arm]
    return bool(np.all(d.truth[arm, before] < _others_best(d.truth, arm)[before]))


def law_late_bloomers(
    d: Design, rng: np.random.Generator, worlds: int, margin: float, *, tries: int = 100
) -> Worlds:
    """`IsoComputeLaw` worlds with a late bloomer (module docstring): laws are drawn from
    `LAW_RANGES` until `worlds` are kept, at most `tries` draws per world kept."""
    n = d.arms["n"].to_numpy().astype(float)
    B_p = d.arms["B_p"].to_numpy().astype(float) if "B_p" in d.arms.columns else None
    fine = np.geomspace(d.rungs[0], d.budget, 64 * int(math.log2(d.budget / d.rungs[0]) + 1))
    start = float(np.nanmin(d.truth[:, 0]))
    kept: list[np.ndarray] = []
    best: list[int] = []
    for _ in range(tries * worlds):
        law = _random_law(rng, d.budget)
        rise = law.reward(fine[None, :], n[:, None], None if B_p is None else B_p[:, None])
        b = int(np.argmax(rise[:, -1]))
        lead = rise[b, -1] - _others_best(rise, b)[-1]
        if lead <= 0 or not _crosses_in_window(rise, b, fine, d.budget):
            continue
        at = law.reward(d.rungs[None, :], n[:, None], None if B_p is None else B_p[:, None])
        truth = start + at * margin / lead  # the rise scaled so that the lead is the margin
        if truth.max() > CEILING:
            continue
        kept.append(np.where(d.has, truth, np.nan))
        best.append(b)
        if len(kept) == worlds:
            return Worlds("late bloomer, IsoComputeLaw", np.array(kept), np.array(best))
    raise RuntimeError(
        f"{len(kept)} of {worlds} IsoComputeLaw late-bloomer worlds in {tries * worlds} draws: "
        "widen LAW_RANGES or lower the margin."
    )


def _random_law(rng: np.random.Generator, budget: float) -> IsoComputeLaw:
    """One law from `LAW_RANGES`, rising from 0 to a plateau of 1 at n_sat."""
    r = LAW_RANGES
    lo, hi = (int(math.log2(n)) for n in r["n_sat"])
    n_sat = 2 ** int(rng.integers(lo, hi + 1))
    share = math.exp(rng.uniform(*np.log(r["C_mid_share"])))
    return IsoComputeLaw(
        R0=0.0,
        A_max=1.0,
        n_sat=n_sat,
        curvature=rng.uniform(*r["curvature"]),
        C_mid_ref=budget * share,
        n_ref=n_sat,
        gamma=rng.uniform(*r["gamma"]),
        B=rng.uniform(*r["B"]),
        B_p_opt=int(rng.choice([16, 64])),
        bp_penalty=rng.uniform(*r["bp_penalty"]),
    )


def _crosses_in_window(rise: np.ndarray, arm: int, C: np.ndarray, budget: float) -> bool:
    """Whether `arm`, best at the end of `C`, is a late bloomer: behind or level with the
    others' best at every C before `CROSSING`, and last so within it (ahead after)."""
    behind = rise[arm] <= _others_best(rise, arm)
    share = C / budget
    if not behind.any() or not behind[share < CROSSING[0]].all():
        return False
    last = share[np.flatnonzero(behind)[-1]]
    return CROSSING[0] <= last <= CROSSING[1]


def draw_runs(d: Design, truth: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(worlds, arms, seeds, rungs): each run's y, its arm's truth plus an AR(1) deviation in
    rung order with the measured SD per rung, clipped to [0, 1] (NaN where the arm does not
    evaluate)."""
    e = rng.standard_normal((*truth.shape[:2], d.seeds, truth.shape[2]))
    dev = np.empty_like(e)
    dev[..., 0] = e[..., 0]
    rho = d.noise.rho
    for r in range(1, e.shape[-1]):
        dev[..., r] = rho * dev[..., r - 1] + math.sqrt(1 - rho**2) * e[..., r]
    return np.clip(truth[:, :, None, :] + d.sd * dev, 0.0, 1.0)


def world_frame(
    d: Design, values: np.ndarray, *, x: str = DEFAULT_X, y: str = DEFAULT_Y
) -> pl.DataFrame:
    """One world's runs (`values`: arms, seeds, rungs) as a runs table, one row per run ×
    evaluation, with the measured sweep's config columns and evaluation size."""
    arm, seed, rung = np.nonzero(~np.isnan(values))
    frame = d.arms[arm.tolist()].with_columns(
        run_key=pl.Series([f"{a}-{s}" for a, s in zip(arm, seed, strict=True)]),
        seed=pl.Series(seed),
        **{x: pl.Series(d.rungs[rung]), y: pl.Series(values[arm, seed, rung])},
    )
    if d.draws:  # one evaluation size whose product is the floor's: problems × 1 sample
        frame = frame.with_columns(eval_problems=pl.lit(d.draws), eval_k_samples=pl.lit(1))
    return frame
