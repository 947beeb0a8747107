"""Adaptive sweeps: stop the arms that are worse than the best by more than their noise, at
each of the checkpoints every run already evaluates at (issue 32).

A sweep's runs evaluate at common checkpoints geometric in compute C (rollouts), which is the
resource schedule of successive halving (Jamieson & Talwalkar 2016; ASHA, Li et al. 2020). An
*arm* is one configuration (n, B_p, M) with its seeds; a *rung* is one checkpoint. At each rung,
`judge_rung` stops an arm when its seed-mean reward is below the best arm's by more than
``z · √(se_best² + se_arm²)``, each ``se = SD / √seeds`` with SD one run's noise at that rung:
the spread between seeds pooled over the arms with two or more, never below the evaluation's
binomial noise √(R(1−R)/(P·K)) that the spread contains (`isolab.frontier.validate.budget_noise`
and `with_standard_errors`, the noise by which `recommend` calls options within noise). Before
rung `grace` nothing is stopped; `eta` adds ASHA's rank cut (keep the top ⌈arms/η⌉), which
ignores the noise and is here to be compared, not recommended.

`replay` plays the rule on a sweep's saved curves (one row per run × evaluation): an arm
stopped at rung C has spent C rollouts per seed; the compute fraction is what the arms spent
over what the full grid spent. `planted_world` draws a sweep whose truth is known (a measured
sweep's seed-mean curves, one arm planted as the best, noise like the measured one) for
`calibrate`: how often the rule drops the true best, with its Clopper–Pearson bound.

The live sweep runs the rule through a library scheduler, not a hand-rolled one: Ray Tune's
`TrialScheduler` interface (`ray.tune.schedulers`). A trial is one run (arm × seed) that calls
``tune.report({x: C, y: avg@4})`` at each checkpoint; a `FIFOScheduler` subclass records each
result in `on_trial_result`, returns ``PAUSE`` for a trial that reached rung C while other
trials of the rung are still on their way (as `HyperBandScheduler` does for its brackets), and
once the rung is complete calls `judge_rung` on the rung's rows and returns ``STOP`` for the
trials of the stopped arms (``CONTINUE`` / unpause for the rest) — `judge_rung`'s `reason` is the
stop reason to log on the arm's MLflow child run. Tune's own `AsyncHyperBandScheduler` (ASHA)
is the rank rule alone (`eta`, no noise); `calibrate` shows what that costs in dropped bests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from isolab import metrics
from isolab.frontier.validate import (
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
            difference (`calibrate` chooses it: 2.5 keeps the true best in ≥ 95% of the
            planted worlds drawn like the committed nstar sweep).
        grace: rungs judged before any stop (0: stop from the first checkpoint on); the early
            checkpoints of an RL curve are barely above the untrained model, so the order of
            the arms there says little about their order at the end.
        eta: ASHA's reduction factor: also stop every arm ranked below the top ⌈arms/η⌉ of the
            rung, whatever the noise (None: the noise rule alone).
    """

    z: float = 2.5
    grace: int = 2
    eta: float | None = None

    def __post_init__(self) -> None:
        # finite bounds too: z = inf never stops an arm, eta = inf stops every arm but the best
        if not 0 < self.z < math.inf:
            raise ValueError(
                f"z = {self.z}: the stopping threshold must be a finite number above 0 (e.g. 2.5)."
            )
        if self.grace < 0:
            raise ValueError(f"grace = {self.grace}: the rungs without stops must be ≥ 0.")
        if self.eta is not None and not 1 < self.eta < math.inf:
            raise ValueError(
                f"eta = {self.eta}: ASHA's reduction factor must be a finite number above 1 (3)."
            )

    @property
    def text(self) -> str:
        rank = f", top 1/{self.eta:g} per rung" if self.eta else ""
        return f"z = {self.z:g}, grace = {self.grace} rungs{rank}"


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
    y: str = DEFAULT_Y,
    x: str = DEFAULT_X,
    config: Sequence[str] = ALLOCATION,
) -> RungDecision:
    """The rule on one rung: `rows` holds one row per run of the live arms that evaluated at
    the rung's compute (all at the same `x`), `rung` its index (0: the first checkpoint)."""
    require(rows, x, y)
    cfg = [c for c in config if c in rows.columns]
    C = as_float(rows[x].max())
    evidence = runs_at_budget(rows, C, x, y, cfg)
    noise = _floored(budget_noise(rows, evidence, y), rows, evidence, y)
    arms = with_standard_errors(evidence, noise, y).rename({f"{y}_at_budget": "mean"})
    best = arms.row(0, named=True)
    arms = arms.with_columns(
        gap=best["mean"] - pl.col("mean"),
        threshold=rule.z * (pl.col("se") ** 2 + best["se"] ** 2).sqrt(),
        rank=pl.int_range(1, pl.len() + 1),
    )
    keep = math.ceil(arms.height / rule.eta) if rule.eta else arms.height
    judged = rung >= rule.grace and noise.source != "none"
    beyond = pl.lit(judged) & (pl.col("gap") > pl.col("threshold"))
    ranked = pl.lit(rung >= rule.grace) & (pl.col("rank") > keep)
    reason = (
        pl.when(beyond)
        .then(
            pl.format(
                "below the best by {} > {} × {} (noise: {})",
                pl.col("gap").round(4),
                pl.lit(rule.z),
                (pl.col("threshold") / rule.z).round(4),
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

    Rungs are the checkpoints (x > 0) in order. At each, the live arms with an evaluation there
    are judged (an arm whose first evaluation comes later, e.g. a large n·B_p, waits); a stopped
    arm has spent the rung's compute per seed, an arm never stopped its runs' last x."""
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
        decision = judge_rung(live, rule, rung=i, y=y, x=x, config=cfg)
        for row in decision.arms.filter("stop").iter_rows(named=True):
            stopped[arm_label(row, cfg)] = (C, row["reason"])
        path.append(_path_row(C, grid.arms, decision.arms, cfg))
    spent = trained.group_by(key, "arm", maintain_order=True).agg(pl.col(x).max().alias("_end"))
    stop_at = pl.DataFrame(
        {"arm": list(stopped), "stopped_at": [v[0] for v in stopped.values()],
         "reason": [v[1] for v in stopped.values()]},
        schema={"arm": pl.String, "stopped_at": pl.Float64, "reason": pl.String},
    )  # fmt: skip
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


# Planted worlds -----------------------------------------------------------------------------


@dataclass(frozen=True)
class WorldNoise:
    """Noise of one run's y around its arm's truth, as measured on a sweep (`measured_noise`):
    `sd` per rung (the seed spread, evaluation noise included) and `rho`, the correlation of a
    run's deviations at consecutive rungs (a run that is lucky at one checkpoint tends to stay
    so: an AR(1) in rung order)."""

    sd: dict[float, float]
    rho: float


def measured_noise(df: pl.DataFrame, *, x: str = DEFAULT_X, y: str = DEFAULT_Y,
                   config: Sequence[str] = ALLOCATION) -> WorldNoise:  # fmt: skip
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


def planted_world(
    df: pl.DataFrame,
    noise: WorldNoise,
    rng: np.random.Generator,
    *,
    best: str | None = None,
    margin: float = 0.0,
    x: str = DEFAULT_X,
    y: str = DEFAULT_Y,
    config: Sequence[str] = ALLOCATION,
) -> tuple[pl.DataFrame, str]:
    """A sweep with `df`'s runs and checkpoints whose truth is known: each arm's seed-mean
    curve in `df`, the arm `best` (None: the best at the last rung) raised by a constant so that
    it beats every other arm at the last rung by `margin`; each run's y is its arm's truth plus
    an AR(1) deviation with `noise`'s SD per rung. Returns the sweep and the true best's label
    (as `Replay.arms["arm"]` names it)."""
    cfg = [c for c in config if c in df.columns]
    key = run_column(df)
    d = df.filter(pl.col(x) > 0).sort(key, x)
    truth = d.with_columns(pl.col(y).mean().over(*cfg, x).alias("_truth"))
    truth = truth.with_columns(_arm=arm_label_expr(cfg))
    end = truth.filter(pl.col(x) == pl.col(x).max()).group_by("_arm").agg(pl.col("_truth").first())
    end = end.sort("_truth", descending=True)
    best = best or end["_arm"][0]
    others = end.filter(pl.col("_arm") != best)["_truth"].max()
    mine = end.filter(pl.col("_arm") == best)["_truth"][0]
    lift = max(as_float(others) + margin - as_float(mine), 0.0) if margin > 0 else 0.0
    sd = truth[x].replace_strict(noise.sd, default=max(noise.sd.values())).to_numpy()
    e = rng.standard_normal(truth.height)
    runs = truth[key].to_numpy()
    dev = np.empty_like(e)
    for i in range(len(e)):  # AR(1) in rung order within each run
        if i and runs[i] == runs[i - 1]:
            dev[i] = noise.rho * dev[i - 1] + math.sqrt(1 - noise.rho**2) * e[i]
        else:
            dev[i] = e[i]
    value = truth["_truth"].to_numpy() + np.where(truth["_arm"] == best, lift, 0.0) + sd * dev
    world = truth.with_columns(pl.Series(y, np.clip(value, 0.0, 1.0))).drop("_truth", "_arm")
    return world, best


@dataclass(frozen=True)
class Calibration:
    """`calibrate`'s figures: the true best dropped in `dropped` of `worlds` planted worlds, the
    rate's two-sided 95% Clopper–Pearson upper bound, and the mean compute fraction."""

    rule: StoppingRule
    worlds: int
    dropped: int
    upper: float
    fraction: float

    @property
    def rate(self) -> float:
        return self.dropped / self.worlds


def clopper_pearson_upper(k: int, n: int, level: float = 0.95) -> float:
    """Upper end of the two-sided `level` Clopper–Pearson interval of k successes in n."""
    return metrics.clopper_pearson_upper(k, n, level, two_sided=True)


def calibrate(
    df: pl.DataFrame,
    rule: StoppingRule,
    *,
    worlds: int = 200,
    margin: float = 0.0,
    random_best: bool = False,
    seed: int = 0,
    x: str = DEFAULT_X,
    y: str = DEFAULT_Y,
    config: Sequence[str] = ALLOCATION,
) -> Calibration:
    """How often `rule` drops the true best of planted worlds drawn like `df` (`planted_world`;
    `random_best`: the planted best is a random arm each world, else `df`'s own best at the
    last rung, with its real, within-noise lead)."""
    rng = np.random.default_rng(seed)
    noise = measured_noise(df, x=x, y=y, config=config)
    cfg = [c for c in config if c in df.columns]
    arms = df.select(arm_label_expr(cfg)).unique().to_series().sort()
    dropped, fractions = 0, []
    for _ in range(worlds):
        best = str(rng.choice(arms.to_list())) if random_best else None
        world, truth = planted_world(
            df, noise, rng, best=best, margin=margin, x=x, y=y, config=config
        )
        r = replay(world, rule, x=x, y=y, config=config)
        dropped += truth not in r.kept
        fractions.append(r.fraction)
    return Calibration(
        rule, worlds, dropped, clopper_pearson_upper(dropped, worlds), float(np.mean(fractions))
    )
