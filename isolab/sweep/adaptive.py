"""Adaptive sweeps: stop the arms that are worse than the best by more than their noise, at
the checkpoints every run already evaluates at (issues 32 and 47).

A sweep's runs evaluate at common checkpoints geometric in compute C (rollouts), which is the
resource schedule of successive halving (Jamieson & Talwalkar 2016; ASHA, Li et al. 2020). An
*arm* is one configuration (n, B_p, M) with its seeds; a *rung* is one checkpoint. At each rung,
`judge_rung` stops an arm when its seed-mean reward is below the best arm's by more than
``z · √(se_best² + se_arm²)``, each ``se = SD / √seeds`` with SD one run's noise at that rung:
the spread between seeds pooled over the arms with two or more, never below the evaluation's
binomial noise √(R(1−R)/(P·K)) that the spread contains (`isolab.frontier.evidence.budget_noise`
and `with_standard_errors`, the noise by which `recommend` calls options within noise). Nothing
is stopped before rung `grace`, nor before `judge_from` of the budget (the last checkpoint), nor
at the budget itself (every arm has spent it by then); `eta` adds ASHA's rank cut (keep the top
⌈arms/η⌉), which ignores the noise and is here to be compared, not recommended.

The default waits for half the budget. Calibrated on planted worlds where an arm behind the
leader crosses it between 1/8 and 1/2 of the budget (`isolab.sweep.adaptive_worlds`,
`isolab.sweep.adaptive_calibration`, docs/statistics.md), the issue-32 rule (z = 2.5 from the
third checkpoint) kept that late bloomer in only 10–57% of the worlds; no rule that judges
earlier kept it in 95% at a real saving, so the default trades compute (a stopped arm saves at
most half its runs) for keeping it.

`replay` plays the rule on a sweep's saved curves (one row per run × evaluation): an arm
stopped at rung C has spent C rollouts per seed; the compute fraction is what the arms spent
over what the full grid spent. `leader_path` reads, from the rungs judged, whether the best arm
changed within the sweep: where it did, an early stop was made on a standing that later moved.

The live sweep runs the rule through a library scheduler, not a hand-rolled one: Ray Tune's
`TrialScheduler` interface (`ray.tune.schedulers`). A trial is one run (arm × seed) that calls
``tune.report({x: C, y: avg@4})`` at each checkpoint; a `FIFOScheduler` subclass records each
result in `on_trial_result`, returns ``PAUSE`` for a trial that reached rung C while other
trials of the rung are still on their way (as `HyperBandScheduler` does for its brackets), and
once the rung is complete calls `judge_rung` on the rung's rows and returns ``STOP`` for the
trials of the stopped arms (``CONTINUE`` / unpause for the rest) — `judge_rung`'s `reason` is the
stop reason to log on the arm's MLflow child run. Tune's own `AsyncHyperBandScheduler` (ASHA)
is the rank rule alone (`eta`, no noise); the calibration shows what that costs in dropped bests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import polars as pl

from isolab.frontier.evidence import (
    ALLOCATION,
    WITHIN_SE,
    Noise,
    budget_noise,
    runs_at_budget,
    with_standard_errors,
)
from isolab.table import as_float, require, run_column, to_polars
from isolab.vocab import DEFAULT_X, DEFAULT_Y


@dataclass(frozen=True)
class StoppingRule:
    """When an arm stops (module docstring).

    Attributes:
        z: an arm stops when it is below the best by more than z standard errors of the
            difference (None: no noise test, the rank cut `eta` alone, as successive halving).
        grace: rungs judged before any stop (0: stop from the first checkpoint on); the early
            checkpoints of an RL curve are barely above the untrained model, so the order of
            the arms there says little about their order at the end.
        eta: ASHA's reduction factor: also stop every arm ranked below the top ⌈arms/η⌉ of the
            rung, whatever the noise (None: the noise rule alone).
        judge_from: no arm is stopped before this fraction of the budget (the sweep's last
            checkpoint). At 1/2, an arm that is behind the leader until up to half the budget
            and ahead at the budget is level with it by then, so only noise can stop it: the
            default kept such late bloomers in ≥ 99% of the planted worlds (docs/statistics.md).
    """

    z: float | None = 3.0
    grace: int = 2
    eta: float | None = None
    judge_from: float = 0.5

    def __post_init__(self) -> None:
        # finite bounds too: z = inf never stops an arm, eta = inf stops every arm but the best
        if self.z is not None and not 0 < self.z < math.inf:
            raise ValueError(
                f"z = {self.z}: the stopping threshold must be a finite number above 0 (e.g. 3)."
            )
        if self.grace < 0:
            raise ValueError(f"grace = {self.grace}: the rungs without stops must be ≥ 0.")
        if self.eta is not None and not 1 < self.eta < math.inf:
            raise ValueError(
                f"eta = {self.eta}: ASHA's reduction factor must be a finite number above 1 (3)."
            )
        if self.z is None and self.eta is None:
            raise ValueError(
                "z = None and eta = None: give a noise threshold z, a rank cut eta, or both."
            )
        if not 0 <= self.judge_from <= 1:
            raise ValueError(
                f"judge_from = {self.judge_from}: the share of the budget before which no arm "
                "stops must be in [0, 1] (0.5: from half the budget)."
            )

    @property
    def text(self) -> str:
        noise = f"z = {self.z:g}" if self.z is not None else "no noise test"
        start = f", from {share_text(self.judge_from)} of the budget" if self.judge_from else ""
        rank = f", top 1/{self.eta:g} per rung" if self.eta else ""
        return f"{noise}, grace = {self.grace} rungs{start}{rank}"

    def opens(self, rung: int, C: float, budget: float | None) -> bool:
        """Whether the rule may stop arms at rung index `rung`, compute C, of a sweep whose last
        checkpoint is `budget`: never before `grace` and `judge_from` of the budget, nor at the
        budget (every arm has spent it). None: a rung judged on its own, no budget to wait for."""
        if rung < self.grace:
            return False
        if budget is None:
            return True
        share = C / budget  # checkpoints are whole rollouts: the tolerance is for the division
        return self.judge_from - 1e-9 <= share < 1 - 1e-9


def share_text(share: float) -> str:
    """A share of the budget for a sentence: 0.5 → "1/2", 0.125 → "1/8"."""
    return str(Fraction(share).limit_denominator(64))


@dataclass(frozen=True)
class RungDecision:
    """`judge_rung`'s verdict on the arms seen at one rung.

    Attributes:
        C: the rung's compute.
        arms: per arm: the config columns, `mean` (seed mean of y), `seeds`, `se`, `gap` (best
            mean − mean), `threshold` (z · se of the difference), `stop` and `reason`; best
            first.
        noise: one run's noise at the rung and where it comes from.
    """

    C: float
    arms: pl.DataFrame
    noise: Noise


def judge_rung(
    rows: pl.DataFrame,
    rule: StoppingRule,
    *,
    rung: int = 0,
    budget: float | None = None,
    y: str = DEFAULT_Y,
    x: str = DEFAULT_X,
    config: Sequence[str] = ALLOCATION,
) -> RungDecision:
    """The rule on one rung: `rows` holds one row per run of the live arms that evaluated at
    the rung's compute (all at the same `x`), `rung` its index (0: the first checkpoint),
    `budget` the sweep's last checkpoint (`StoppingRule.opens`)."""
    require(rows, x, y)
    cfg = [c for c in config if c in rows.columns]
    C = as_float(rows[x].max())
    evidence = runs_at_budget(rows, C, x, y, cfg)
    noise = _floored(budget_noise(rows, evidence, y), rows, evidence, y)
    arms = with_standard_errors(evidence, noise, y).rename({f"{y}_at_budget": "mean"})
    best = arms.row(0, named=True)
    z = rule.z if rule.z is not None else math.inf
    arms = arms.with_columns(
        gap=best["mean"] - pl.col("mean"),
        threshold=z * (pl.col("se") ** 2 + best["se"] ** 2).sqrt(),
        rank=pl.int_range(1, pl.len() + 1),
    )
    keep = math.ceil(arms.height / rule.eta) if rule.eta else arms.height
    opens = rule.opens(rung, C, budget)
    beyond = pl.lit(opens and noise.source != "none") & (pl.col("gap") > pl.col("threshold"))
    ranked = pl.lit(opens) & (pl.col("rank") > keep)
    reason = (
        pl.when(beyond)
        .then(
            pl.format(
                "below the best by {} > {} × {} (noise: {})",
                pl.col("gap").round(4),
                pl.lit(z),
                (pl.col("threshold") / z).round(4),
                pl.lit(noise.source),
            )
        )
        .when(ranked)
        .then(pl.format("ranked {} of {}: below the top {}", "rank", pl.len(), pl.lit(keep)))
        .otherwise(pl.lit(""))
    )
    arms = arms.with_columns(stop=beyond | ranked, reason=reason).drop("rank", "C_max")
    return RungDecision(C, arms, noise)


def _floored(noise: Noise, rows: pl.DataFrame, evidence: pl.DataFrame, y: str) -> Noise:
    """The seed spread, not below the evaluation's binomial noise it contains: with few arms
    alive the pooled spread has few degrees of freedom and can come out below it by chance."""
    if noise.source != "seeds":
        return noise
    floor = budget_noise(rows, evidence.with_columns(seeds=pl.lit(1)), y)
    if floor.source != "evaluation" or floor.sd <= noise.sd:
        return noise
    return Noise(floor.sd, "seeds", noise.seeds, f"{noise.text}, floored at {floor.text}")


@dataclass(frozen=True)
class Replay:
    """The rule played on one sweep's saved curves (`replay`).

    Attributes:
        rule: the stopping rule.
        arms: per arm: config columns, `seeds`, `stopped_at` (null: ran to the end), `spent`
            (rollouts over its seeds), `reason`.
        path: per rung C: `grid_best` / `adaptive_best` (arm labels), `grid_n` / `adaptive_n`,
            `resolved` (every arm within noise of the grid's best is within one n step of it),
            `within_step` (adaptive's n* within one grid step of the grid's), `alive` (arms
            judged at C), `best_alive` (the grid's best at C was still running).
        fraction: compute spent over the full grid's.
        best_dropped: the grid's best arm at its last rung was stopped.
    """

    rule: StoppingRule
    arms: pl.DataFrame
    path: pl.DataFrame
    fraction: float
    best_dropped: bool

    @property
    def kept(self) -> list[str]:
        return self.arms.filter(pl.col("stopped_at").is_null())["arm"].to_list()

    @property
    def n_star_found(self) -> bool:
        """Adaptive's n* is within one grid step of the grid's at every C the grid resolves."""
        resolved = self.path.filter(pl.col("resolved"))
        return bool(resolved["within_step"].all()) if resolved.height else True


def arm_label(row: dict, cfg: Sequence[str]) -> str:
    """An arm's name, "n=4,B_p=16" (M follows from n, B_p and the sweep's budget)."""
    return ",".join(f"{c}={row[c]}" for c in cfg if c != "M")


def arm_label_expr(cfg: Sequence[str]) -> pl.Expr:
    """`arm_label` as a column expression."""
    return pl.concat_str(
        [pl.format("{}={}", pl.lit(c), pl.col(c)) for c in cfg if c != "M"], separator=","
    )


def replay(
    df: object,
    rule: StoppingRule,
    *,
    x: str = DEFAULT_X,
    y: str = DEFAULT_Y,
    config: Sequence[str] = ALLOCATION,
) -> Replay:
    """Successive halving by `rule` on one sweep's saved curves (one setting: split them first).

    Rungs are the checkpoints (x > 0) in order, the last one the budget. At each, the live arms
    with an evaluation there are judged (an arm whose first evaluation comes later, e.g. a large
    n·B_p, waits); a stopped arm has spent the rung's compute per seed, an arm never stopped its
    runs' last x."""
    df = to_polars(df)
    require(df, x, y, "n")
    cfg = [c for c in config if c in df.columns]
    key = run_column(df)
    trained = df.filter(pl.col(x) > 0).with_columns(arm=arm_label_expr(cfg))
    if trained.height == 0:
        raise ValueError(f"no evaluation with {x} > 0: nothing to replay.")
    stopped: dict[str, tuple[float, str]] = {}
    path = []
    rungs = sorted(trained[x].unique().to_list())
    for i, C in enumerate(rungs):
        at = trained.filter(pl.col(x) == C)
        grid = judge_rung(at, StoppingRule(z=WITHIN_SE, grace=0), y=y, x=x, config=cfg)
        live = at.filter(~pl.col("arm").is_in(list(stopped)))
        if live.height == 0:
            break
        decision = judge_rung(live, rule, rung=i, budget=rungs[-1], y=y, x=x, config=cfg)
        for row in decision.arms.filter("stop").iter_rows(named=True):
            stopped[arm_label(row, cfg)] = (C, row["reason"])
        path.append(_path_row(C, grid.arms, decision.arms, cfg))
    spent = trained.group_by(key, "arm", maintain_order=True).agg(pl.col(x).max().alias("_end"))
    stop_at = pl.DataFrame(
        {
            "arm": list(stopped),
            "stopped_at": [v[0] for v in stopped.values()],
            "reason": [v[1] for v in stopped.values()],
        },
        schema={"arm": pl.String, "stopped_at": pl.Float64, "reason": pl.String},
    )
    runs = spent.join(stop_at, on="arm", how="left").with_columns(
        spent=pl.min_horizontal("_end", pl.col("stopped_at").fill_null(float("inf")))
    )
    arms = (
        runs.group_by("arm", maintain_order=True)
        .agg(
            pl.len().alias("seeds"),
            pl.col("stopped_at").first(),
            pl.col("spent").sum(),
            pl.col("_end").sum().alias("full"),
            pl.col("reason").first().fill_null(""),
        )
        .sort("stopped_at", descending=True, nulls_last=False)
    )
    path_df = pl.DataFrame(path)
    last_best = path_df["grid_best"][-1]
    return Replay(
        rule,
        arms,
        path_df,
        as_float(arms["spent"].sum()) / as_float(arms["full"].sum()),
        last_best in stopped,
    )


@dataclass(frozen=True)
class LeaderPath:
    """The best arm of each judged rung, in order (`leader_path`).

    Attributes:
        leaders: (C, arm) per rung.
        behind: the rungs where the last leader trailed that rung's leader beyond noise, by
            more than `WITHIN_SE` standard errors of the difference: (C, gap, se of the gap).
    """

    leaders: list[tuple[float, str]]
    behind: list[tuple[float, float, float]]

    @property
    def moved(self) -> bool:
        """The best arm changed between rungs: the optimum moved within the sweep."""
        return len({arm for _, arm in self.leaders}) > 1

    @property
    def text(self) -> str:
        """The leader where it changed: "n=2,B_p=64 at C = 256 → n=4,B_p=16 at C = 1,024"."""
        changes = [
            (C, a) for i, (C, a) in enumerate(self.leaders) if i == 0 or a != self.leaders[i - 1][1]
        ]
        return " → ".join(f"{a} at C = {C:,.0f}" for C, a in changes)


def leader_path(
    decisions: Sequence[RungDecision], config: Sequence[str] = ALLOCATION
) -> LeaderPath:
    """Which arm led each of `decisions` (the rungs judged, in order; the budget's last), and
    where the last leader was beyond noise behind the leader of an earlier rung: a late bloomer
    in the sweep's own data."""
    leaders = [
        (d.C, arm_label(d.arms.row(0, named=True), config)) for d in decisions if d.arms.height
    ]
    if not leaders:
        return LeaderPath([], [])
    last = leaders[-1][1]
    behind = []
    for d in decisions:
        best = d.arms.row(0, named=True)
        for row in d.arms.iter_rows(named=True):
            se = math.hypot(row["se"], best["se"])
            if arm_label(row, config) == last and row["gap"] > WITHIN_SE * se:
                behind.append((d.C, row["gap"], se))
    return LeaderPath(leaders, behind)


def _path_row(C: float, grid: pl.DataFrame, live: pl.DataFrame, cfg: Sequence[str]) -> dict:
    g, a = grid.row(0, named=True), live.row(0, named=True)
    near = grid.filter(pl.col("gap") <= pl.col("threshold"))["n"].to_numpy().astype(float)
    resolved = bool(np.all(np.abs(np.log2(near / g["n"])) <= 1 + 1e-9))
    labels = {arm_label(r, cfg) for r in live.iter_rows(named=True)}
    return {
        "C": C,
        "grid_best": arm_label(g, cfg),
        "grid_n": g["n"],
        "adaptive_best": arm_label(a, cfg),
        "adaptive_n": a["n"],
        "resolved": resolved,
        "within_step": abs(math.log2(a["n"] / g["n"])) <= 1 + 1e-9,
        "alive": live.height,
        "best_alive": arm_label(g, cfg) in labels,
    }
