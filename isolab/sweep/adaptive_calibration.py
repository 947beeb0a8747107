"""How often a stopping rule keeps the arm that is best at the budget, on planted worlds of every
kind (`isolab.sweep.adaptive_worlds`), and what it spends (issue 47).

`simulate` plays a rule on thousands of worlds at once: `judge_rung` and `replay`
(`isolab.sweep.adaptive`) written over arrays (worlds × arms × seeds × rungs), the seed spread
pooled over the live arms and floored at the binomial noise of the best's mean, the rank cut
ranking the live arms. It stops the same arms at the same rungs as `replay` on the same runs
(`tests/test_adaptive_late_bloomer.py` checks it world by world); `replay` takes ≈ 0.1 s a
world, this 10–40 µs.

`PredictedStanding` is a rule that stops on predicted, not current, standing: each arm's recent
slope in log C (a line through its last seed means) carried to the budget with its interval.
It is calibrated beside the `StoppingRule`s for comparison and is not offered by the sweep: it
kept fewer late bloomers than waiting for half the budget (88–91% of the IsoComputeLaw ones)
and spent as much (docs/statistics.md).

`calibrate` draws worlds of one kind and counts the worlds whose best-at-the-budget arm the rule
kept (ran to the budget), with the two-sided 95% Clopper–Pearson interval, the worlds with any
stop (every stop is false in a null world), and the mean compute spent over the full grid's.
`validation` does it for every kind on the committed nstar sweep's two splits; its `text` is
what `isolab sweep adaptive` prints about the rule it runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from isolab import metrics, paths
from isolab.sweep.adaptive import StoppingRule, share_text
from isolab.sweep.adaptive_worlds import (
    CROSSING,
    Design,
    Worlds,
    constant_lead,
    design,
    draw_runs,
    law_late_bloomers,
    null_worlds,
    spliced_late_bloomers,
)

#: Where the rule keeps the best arm at least this often, a calibration passes (issue 47).
KEEP_TARGET = 0.95
#: The committed sweep the validation's worlds are drawn like, under the bundle's `runs/`.
VALIDATION_SWEEP = "nstar/cpu/main"


@dataclass(frozen=True)
class PredictedStanding:
    """Stop an arm when even the upper end of its extrapolation is below the leader's now.

    Each arm's seed means at its last `points` checkpoints get a least-squares line in log C,
    carried to the budget; the arm stops when that prediction plus z standard errors (the
    rung's seed-mean SE through the line's leverage) is below the leader's seed mean minus z
    of its SE. RL curves are concave in log C late, so the recent slope overstates an arm's
    future and the leader's present understates its own: a stop needs a gap that even the
    optimistic reading cannot close.

    Attributes:
        z: standard errors on each side.
        points: checkpoints in the line (two or more).
        grace: rungs judged before any stop.
    """

    z: float = 2.0
    points: int = 3
    grace: int = 2

    def __post_init__(self) -> None:
        if not 0 < self.z < math.inf:
            raise ValueError(f"z = {self.z}: the interval's width must be finite and above 0.")
        if self.points < 2:
            raise ValueError(f"points = {self.points}: a line needs two checkpoints or more.")

    def opens(self, rung: int, C: float, budget: float) -> bool:
        """Whether arms may stop at rung index `rung` (compute C): from `grace` on, before the
        budget."""
        return self.grace <= rung and C / budget < 1 - 1e-9

    @property
    def text(self) -> str:
        return (
            f"predicted standing: line through the last {self.points} checkpoints, "
            f"z = {self.z:g}, grace = {self.grace} rungs"
        )


Rule = StoppingRule | PredictedStanding


@dataclass(frozen=True)
class Simulation:
    """`simulate`'s outcome: `stopped` (worlds, arms), the rung index each arm was stopped at
    (the number of rungs: ran to the budget); `fraction` (worlds,), compute spent over the full
    grid's."""

    stopped: np.ndarray
    fraction: np.ndarray


def simulate(d: Design, values: np.ndarray, rule: Rule) -> Simulation:
    """`rule` played on `values` (worlds, arms, seeds, rungs) as `replay` plays it (module
    docstring): at each rung the live arms that evaluate there are judged."""
    W, A, _, R = values.shape
    means = _mean(values)
    alive = np.ones((W, A), dtype=bool)
    stopped = np.full((W, A), R)
    for r in range(R):
        live = alive & d.has[:, r]
        stop = _stops(d, values[..., r], means, r, live, rule)
        stopped[stop] = r
        alive &= ~stop
    spent = np.where(stopped < R, d.rungs[np.minimum(stopped, R - 1)], d.end)
    spent = np.minimum(spent, d.end)
    return Simulation(stopped, spent.sum(axis=1) / d.end.sum())


def _mean(values: np.ndarray) -> np.ndarray:
    """(worlds, arms, rungs) seed means, NaN where the arm does not evaluate."""
    with np.errstate(invalid="ignore"):
        return values.mean(axis=2)


def _stops(
    d: Design, at: np.ndarray, means: np.ndarray, r: int, live: np.ndarray, rule: Rule
) -> np.ndarray:
    """(worlds, arms): the live arms `rule` stops at rung r (`at`: worlds, arms, seeds)."""
    C = float(d.rungs[r])
    if not rule.opens(r, C, d.budget) or not live.any():
        return np.zeros_like(live)
    mean = np.where(live, means[..., r], -np.inf)
    best = np.argmax(mean, axis=1)  # the first of equal means, as judge_rung's stable sort
    top = np.take_along_axis(mean, best[:, None], axis=1)[:, 0]
    se = _seed_sd(d, at, live, top) / math.sqrt(d.seeds)  # every arm has d.seeds seeds
    if isinstance(rule, PredictedStanding):
        return live & (_upper_at_budget(d, means, r, se, rule) < (top - rule.z * se)[:, None])
    stop = np.zeros_like(live)
    if rule.z is not None:
        stop |= live & (top[:, None] - mean > (rule.z * math.sqrt(2) * se)[:, None])
    if rule.eta is not None:
        stop |= live & (_rank(mean) >= np.ceil(live.sum(axis=1) / rule.eta)[:, None])
    return stop


def _seed_sd(d: Design, at: np.ndarray, live: np.ndarray, top: np.ndarray) -> np.ndarray:
    """(worlds,): one run's SD, the seed spread pooled over the live arms, floored at the
    binomial noise of the best's mean (`judge_rung`'s `_floored`)."""
    with np.errstate(invalid="ignore"):
        var = np.where(live, at.var(axis=2, ddof=1), 0.0)
    pooled = np.sqrt(var.sum(axis=1) / live.sum(axis=1))
    if not d.draws:
        return pooled
    floor = np.sqrt(np.clip(top * (1 - top), 0.0, None) / d.draws)
    return np.maximum(pooled, floor)


def _rank(mean: np.ndarray) -> np.ndarray:
    """(worlds, arms): 0 for the best mean, ties in arm order; dead arms (−inf) last."""
    order = np.argsort(-mean, axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(mean.shape[1])[None, :].repeat(len(mean), 0), 1)
    return rank


def _upper_at_budget(
    d: Design, means: np.ndarray, r: int, se: np.ndarray, rule: PredictedStanding
) -> np.ndarray:
    """(worlds, arms): each arm's line through its last `rule.points` seed means up to rung r,
    at the budget, plus z standard errors; +inf for an arm with fewer than two there."""
    lo = max(0, r - rule.points + 1)
    x = np.log2(d.rungs[lo : r + 1])
    y = means[..., lo : r + 1]
    ok = ~np.isnan(y)
    k = ok.sum(axis=2)
    x_mean = np.where(ok, x, 0.0).sum(axis=2) / np.maximum(k, 1)
    y_mean = np.where(ok, y, 0.0).sum(axis=2) / np.maximum(k, 1)
    dx = np.where(ok, x - x_mean[..., None], 0.0)
    sxx = (dx**2).sum(axis=2)
    slope = (dx * np.where(ok, y - y_mean[..., None], 0.0)).sum(axis=2) / np.where(sxx > 0, sxx, 1)
    ahead = math.log2(d.budget) - x_mean
    var = se[:, None] ** 2 * (1 / np.maximum(k, 1) + ahead**2 / np.where(sxx > 0, sxx, 1))
    return np.where(k >= 2, y_mean + slope * ahead + rule.z * np.sqrt(var), np.inf)


@dataclass(frozen=True)
class Calibration:
    """A rule on `worlds` planted worlds of one `kind` drawn like `sweep`: the best-at-the-
    budget arm kept in `kept`, some arm stopped in `any_stop`, `fraction` the mean compute
    spent over the full grid's."""

    rule: str
    kind: str
    sweep: str
    worlds: int
    kept: int
    any_stop: int
    fraction: float

    @property
    def rate(self) -> float:
        return self.kept / self.worlds

    @property
    def interval(self) -> tuple[float, float]:
        """The two-sided 95% Clopper–Pearson interval of the rate kept."""
        upper = metrics.clopper_pearson_upper(self.kept, self.worlds, two_sided=True)
        lower = 1 - metrics.clopper_pearson_upper(
            self.worlds - self.kept, self.worlds, two_sided=True
        )
        return lower, upper

    @property
    def text(self) -> str:
        """E.g. "kept 398/400 = 99.5% [98.2%, 99.9%], compute 64%"."""
        lo, hi = self.interval
        return (
            f"kept {self.kept}/{self.worlds} = {self.rate:.1%} [{lo:.1%}, {hi:.1%}], "
            f"compute {self.fraction:.0%}"
        )


#: The kinds of world, by name: each draws (design, rng, worlds, margin) → `Worlds`.
KINDS: dict[str, Callable[[Design, np.random.Generator, int, float], Worlds]] = {
    "constant lead": constant_lead,
    "late bloomer, IsoComputeLaw": law_late_bloomers,
    "late bloomer, spliced": spliced_late_bloomers,
    "null": lambda d, rng, worlds, margin: null_worlds(d, worlds),
}


def draw_worlds(
    d: Design, kind: str, *, worlds: int, margin: float | None = None, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """`worlds` runs tables of `kind` (`KINDS`) as arrays: values (worlds, arms, seeds, rungs)
    and the arm best at the budget in each (null worlds: the full grid's best seed mean there).
    `margin`: the planted lead at the budget (None: one run's seed SD there)."""
    if kind not in KINDS:
        raise ValueError(f"kind = {kind!r}: pick one of {', '.join(KINDS)}.")
    rng = np.random.default_rng(seed)
    planted = KINDS[kind](d, rng, worlds, d.margin if margin is None else margin)
    values = draw_runs(d, planted.truth, rng)
    if planted.best is not None:
        return values, planted.best
    return values, np.argmax(np.nan_to_num(_mean(values)[..., -1], nan=-1.0), axis=1)


def calibrate(
    d: Design,
    rule: Rule,
    kind: str,
    *,
    worlds: int = 1000,
    margin: float | None = None,
    seed: int = 0,
    sweep: str = "",
) -> Calibration:
    """`rule` on `worlds` planted worlds of `kind` drawn like `d` (`draw_worlds`)."""
    values, best = draw_worlds(d, kind, worlds=worlds, margin=margin, seed=seed)
    sim = simulate(d, values, rule)
    kept = sim.stopped[np.arange(worlds), best] == len(d.rungs)
    any_stop = (sim.stopped < len(d.rungs)).any(axis=1)
    return Calibration(
        rule.text,
        kind,
        sweep,
        worlds,
        int(kept.sum()),
        int(any_stop.sum()),
        float(sim.fraction.mean()),
    )


def committed_designs(sweep: str = VALIDATION_SWEEP) -> dict[str, Design]:
    """The designs of a committed sweep's splits (bundled with isolab), by split name."""
    from isolab.tracking.runs import load_runs

    folder = paths.bundle_dir() / "runs" / sweep
    if not folder.is_dir():
        raise FileNotFoundError(
            f"{paths.shown(folder)}: the committed sweep is missing; reinstall isolab or run "
            "from a checkout (its runs/ holds it)."
        )
    df = load_runs(folder, statuses=["FINISHED"])
    return {s: design(df.filter(pl.col("split") == s)) for s in sorted(df["split"].unique())}


@dataclass(frozen=True)
class Validation:
    """`validation`'s calibrations of one rule: one per committed split × kind of world."""

    rule: Rule
    sweep: str
    calibrations: list[Calibration]

    def pooled(self, kinds: Sequence[str]) -> Calibration:
        """The calibrations of `kinds` over every split, as one."""
        cs = [c for c in self.calibrations if c.kind in kinds]
        worlds = sum(c.worlds for c in cs)
        spent = sum(c.fraction * c.worlds for c in cs) / worlds
        return Calibration(
            self.rule.text,
            " and ".join(kinds),
            self.sweep,
            worlds,
            sum(c.kept for c in cs),
            sum(c.any_stop for c in cs),
            spent,
        )

    @property
    def keeps_late_bloomers(self) -> bool:
        """Every split's late-bloomer worlds: the best kept in at least `KEEP_TARGET`."""
        late = [c for c in self.calibrations if c.kind.startswith("late bloomer")]
        return all(c.rate >= KEEP_TARGET for c in late)

    @property
    def text(self) -> str:
        """What the rule was validated on and how it did, for a person (four lines)."""
        late = self.pooled([k for k in KINDS if k.startswith("late bloomer")])
        splits = ", ".join(dict.fromkeys(c.sweep.split()[-1] for c in self.calibrations))
        crossing = f"{share_text(CROSSING[0])}–{share_text(CROSSING[1])}"
        null = self.pooled(["null"])
        return "\n".join(
            [
                f"rule validated on planted worlds drawn like {self.sweep} (splits {splits}: their "
                "arms, seeds, checkpoints and seed noise); the best arm at the budget:",
                f"  constant lead: {self.pooled(['constant lead']).text}",
                f"  late bloomer (behind the leader until {crossing} of the budget, ahead by one "
                f"run's SD at it; IsoComputeLaw and spliced into the measured curves): {late.text}",
                f"  null (all arms equal): some arm stopped, falsely, in {null.any_stop}/{null.worlds}",
            ]
        )


def validation(
    rule: Rule, *, worlds: int = 200, seed: int = 0, sweep: str = VALIDATION_SWEEP
) -> Validation:
    """`rule` calibrated on `worlds` worlds of every kind per split of the committed `sweep`."""
    cals = [
        calibrate(d, rule, kind, worlds=worlds, seed=seed, sweep=f"{sweep} {split}")
        for split, d in committed_designs(sweep).items()
        for kind in KINDS
    ]
    return Validation(rule, sweep, cals)
