"""Simulated per-problem counts on a real design, for the calibration of the interference claims
(`isolab.study.interference.forgetting.forgetting_trend`, `isolab.study.calibration`): the runs,
checkpoints, problems and samples of a study's runs table, with every count redrawn from a
solve rate whose path is known.

Each problem starts at its base rate (the step-0 counts of all runs of its split pooled: one
base model) and learns on its own: its logit rises by its own speed (log-normal, drawn per run
and problem) times a shift that takes the run's mean solve rate along a target curve. The
worlds (`KINDS`):

- ``flat``: every run follows its split's mean curve (no arm effect at all); nothing falls.
- ``levels``: every arm follows its own measured curve (made monotone), so levels and gains
  differ by n as in the runs — the structured null of a test whose expected share of false
  calls moves with the level; nothing falls.
- ``wobble``: ``levels`` plus an independent wobble of every problem's logit at every
  checkpoint (SD `WOBBLE`), equal for every n: real falls, without interference and without an
  effect of n.
- ``movement``: ``levels`` plus a wobble whose SD grows with the arm's mean gain per interval:
  falls that track how far the policy moves, so an arm that learns more forgets more — no
  effect of n beyond its effect on progress.
- ``planted``: ``levels`` plus transient falls: in each interval a share of problems drops by
  `DROP` on the logit scale at the later checkpoint, a share that falls with n (`planted_share`).
"""

from __future__ import annotations

from functools import cache, partial

import numpy as np
import polars as pl
from scipy.special import expit, logit

from isolab.study.interference.claims import SEEN_COUNTS
from isolab.study.registry import shipped_runs
from isolab.tracking.columns import COUNTS
from isolab.verdicts.calibration import Plant, StructuredNull
from isolab.vocab import ROLLOUTS, RUN_KEY, STEP

KINDS = ("flat", "levels", "wobble", "movement", "planted")
#: SD of the n-free wobble on the logit scale (`wobble`): about the called share the runs show.
WOBBLE = 0.6
#: `movement`: wobble SD per unit of the arm's mean gain per interval.
WOBBLE_PER_GAIN = 12.0
#: `planted`: the logit drop of a transient fall, and the share of problems falling per interval
#: at n = 2, lowered by `PLANTED_SLOPE` of itself per doubling of n.
DROP = 2.5
PLANTED_SHARE = 0.08
PLANTED_SLOPE = 0.15
#: Spread of the problems' learning speeds (SD of their log).
SPEED_SD = 0.5


def planted_share(n: np.ndarray) -> np.ndarray:
    """Share of problems that fall in an interval of the planted world, by n."""
    return PLANTED_SHARE * np.clip(1 - PLANTED_SLOPE * np.log2(np.asarray(n) / 2), 0, None)


def design(df: pl.DataFrame, counts: str = COUNTS) -> pl.DataFrame:
    """The evaluations of `df` that logged counts (column `counts`, held as `eval_counts` in
    the result), with the targets of the worlds: `arm_target`
    (the seed-mean solve rate of the run's arm at the checkpoint, made non-decreasing in C),
    `flat_target` (the same for the split as a whole) and `arm_gain` (the arm's mean gain per
    interval)."""
    df = df.drop(COUNTS) if counts != COUNTS and COUNTS in df.columns else df
    df = df.rename({counts: COUNTS})
    rows = df.filter(pl.col(COUNTS).is_not_null()).with_columns(
        (pl.col(COUNTS).list.mean() / pl.col("eval_k_samples")).alias("_rate"),
        pl.col(ROLLOUTS).cast(pl.Float64).alias("_C"),
    )
    split = ["split"] if "split" in rows.columns else []
    arm = [*split, *[c for c in ("n", "B_p") if c in rows.columns]]
    by_arm = rows.group_by(*arm, "_C").agg(pl.col("_rate").mean().alias("arm_target"))
    by_split = rows.group_by(*split, "_C").agg(pl.col("_rate").mean().alias("flat_target"))
    by_arm = by_arm.sort(*arm, "_C").with_columns(pl.col("arm_target").cum_max().over(arm))
    by_split = by_split.sort(*split, "_C").with_columns(
        pl.col("flat_target").cum_max().over(split) if split else pl.col("flat_target").cum_max()
    )
    gain = by_arm.group_by(arm).agg(
        ((pl.col("arm_target").max() - pl.col("arm_target").min()) / (pl.len() - 1).clip(1)).alias(
            "arm_gain"
        )
    )
    out = rows.join(by_arm, on=[*arm, "_C"]).join(by_split, on=[*split, "_C"] if split else "_C")
    return out.join(gain, on=arm).sort(RUN_KEY, STEP)


def _base_rates(rows: pl.DataFrame) -> dict[str | None, np.ndarray]:
    """Per split, each problem's rate at step 0 (all runs pooled), kept off 0 and 1."""
    out: dict[str | None, np.ndarray] = {}
    splits = rows["split"].unique().to_list() if "split" in rows.columns else [None]
    for s in splits:
        part = rows if s is None else rows.filter(pl.col("split") == s)
        start = part.filter(pl.col(STEP) == part[STEP].min())
        counts = np.asarray(start[COUNTS].to_list(), dtype=float)
        k = float(start["eval_k_samples"][0])
        out[s] = (counts.sum(0) + 0.5) / (counts.shape[0] * k + 1.0)
    return out


def _shift(base_logit: np.ndarray, speed: np.ndarray, target: float) -> float:
    """The shift s ≥ 0 with mean(expit(base + speed·s)) = target (bisection)."""
    if expit(base_logit).mean() >= target:
        return 0.0
    lo, hi = 0.0, 1.0
    while expit(base_logit + speed * hi).mean() < target and hi < 1e3:
        hi *= 2
    for _ in range(40):
        mid = (lo + hi) / 2
        if expit(base_logit + speed * mid).mean() < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def simulate(design_rows: pl.DataFrame, kind: str, seed: int, counts: str = COUNTS) -> pl.DataFrame:
    """One world of `kind` (`KINDS`) on `design_rows` (`design`): the rows with their counts
    redrawn, as column `counts`."""
    if kind not in KINDS:
        raise ValueError(f"kind = {kind!r}: choose one of {', '.join(KINDS)}.")
    rng = np.random.default_rng(seed)
    base = _base_rates(design_rows)
    target_col = "flat_target" if kind == "flat" else "arm_target"
    drawn_counts: list[list[int]] = []
    for (_,), run in design_rows.group_by(RUN_KEY, maintain_order=True):
        b = base[run["split"][0] if "split" in run.columns else None]
        k = int(run["eval_k_samples"][0])
        logit_b = logit(b)
        speed = rng.lognormal(0.0, SPEED_SD, len(b))
        n = float(run["n"][0]) if "n" in run.columns else 1.0
        sd = {"wobble": WOBBLE, "movement": WOBBLE_PER_GAIN * float(run["arm_gain"][0])}
        for t, target in enumerate(run[target_col].to_list()):
            x = logit_b + speed * _shift(logit_b, speed, target)
            if t > 0 and kind in sd:
                x = x + sd[kind] * rng.standard_normal(len(b))
            if t > 0 and kind == "planted":
                x = x - DROP * (rng.random(len(b)) < planted_share(np.array(n)))
            drawn_counts.append(rng.binomial(k, expit(x)).tolist())
    drawn = design_rows.with_columns(pl.Series(COUNTS, drawn_counts, dtype=pl.List(pl.Int64)))
    return drawn.rename({COUNTS: counts}) if counts != COUNTS else drawn


@cache
def shipped_design(sweep: str = "main", counts: str = COUNTS) -> pl.DataFrame:
    """`design` of the study's committed cpu snapshot `sweep` (nstar's runs)."""
    return design(shipped_runs("interference", sweep), counts)


def study_world(
    kind: str, seed: int, sweep: str = "main", counts: str = COUNTS
) -> dict[str, pl.DataFrame]:
    """One simulated interference study: `sweep` of nstar's committed cpu runs with its counts
    `counts` redrawn as a world of `kind`. What the calibration runs the interference claims
    on."""
    return {sweep: simulate(shipped_design(sweep, counts), kind, seed, counts)}


_FORGETTING = ("interference.less_forgetting_easy", "interference.less_forgetting_hard")
PLANTS: dict[str, Plant] = {
    **{
        f"interference.less_forgetting_{split}": Plant(
            size=-0.005 if split == "easy" else -0.0008,
            describe=f"transient falls (logit −{DROP}) of {PLANTED_SHARE:.0%} of the "
            f"problems per interval at n = 2, {PLANTED_SLOPE:.0%} fewer per doubling of n, "
            "on each arm's own measured curve (null: every arm on the split's mean curve, "
            "nothing falls)",
            world=partial(study_world, "planted"),
            null_world=partial(study_world, "flat"),
        )
        for split in ("easy", "hard")
    },
    "interference.less_forgetting_seen": Plant(
        size=-0.005,
        describe="the same on the seen training problems of `seen` (n = 2, 8, 32 on Easy)",
        world=partial(study_world, "planted", sweep="seen", counts=SEEN_COUNTS),
        null_world=partial(study_world, "flat", sweep="seen", counts=SEEN_COUNTS),
    ),
}

STRUCTURED_NULLS: dict[str, StructuredNull] = {
    **{
        f"{name}{suffix}": StructuredNull(describe, ids, world=partial(study_world, kind, **kw))
        for suffix, ids, kw in (
            ("", _FORGETTING, {}),
            (
                "-seen",
                ("interference.less_forgetting_seen",),
                {"sweep": "seen", "counts": SEEN_COUNTS},
            ),
        )
        for name, kind, describe in (
            (
                "no-falls-levels",
                "levels",
                "every arm on its own measured curve (levels and gains differ by n as in "
                "nstar's runs), every problem rising on its own: nothing falls",
            ),
            (
                "equal-wobble",
                "wobble",
                f"the same plus an independent wobble of every problem (logit SD {WOBBLE}) "
                "at every checkpoint, equal for every n: real falls, no interference, no "
                "effect of n",
            ),
            (
                "falls-track-progress",
                "movement",
                f"the same with a wobble SD of {WOBBLE_PER_GAIN:g} × the arm's mean gain "
                "per interval: an arm that learns more forgets more, no effect of n beyond "
                "progress",
            ),
        )
    },
}
