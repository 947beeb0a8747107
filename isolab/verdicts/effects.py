"""Effects added to a simulated world's null means (`isolab.verdicts.calibration`): the planted
effects a claim's test must find, and the structured nulls it must not call.

An effect is a function (sweep name, null means) → {metric: values added per row}; the null
means are a runs table whose metric columns hold the world's mean values
(`isolab.verdicts.worlds.null_means`, `isolab.verdicts.planned.planned_means`). Effects that
move avg@4 along n or compute move best@4 and worst@4 with it through the split's mapping
(`through_mapping`), as a change of compute would; the mechanisms the bestk claims test add to
one of them on top.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

from isolab.table import as_float
from isolab.verdicts.noise import _beta_concentration
from isolab.verdicts.planned import Mapping
from isolab.vocab import EVAL_AVG, EVAL_BEST, EVAL_WORST, RHO, ROLLOUTS, RULE_BASED, RUN_KEY, STEP

Effect = Callable[[str, pl.DataFrame], dict[str, np.ndarray]]


# ---- what effects are made of ------------------------------------------------------------------
def frac(df: pl.DataFrame) -> np.ndarray:
    """sqrt(step / the run's last step): the share of training done, on the scale the worlds'
    training noise grows on; at equal compute, equal for every run of one sweep."""
    last = df.select(pl.col(STEP).max().over(RUN_KEY)).to_series().to_numpy().astype(float)
    return np.sqrt(df[STEP].to_numpy().astype(float) / np.maximum(last, 1.0))


def centred_log2(df: pl.DataFrame, column: str) -> np.ndarray:
    v = np.log2(np.maximum(df[column].to_numpy().astype(float), 1e-12))
    return v - v[np.isfinite(v)].mean()


def log2_of(df: pl.DataFrame, column: str) -> np.ndarray:
    return np.log2(np.maximum(df[column].to_numpy().astype(float), 1e-12))


def is_(df: pl.DataFrame, column: str, value) -> np.ndarray:
    return (df[column] == value).to_numpy() if column in df.columns else np.zeros(df.height, bool)


def _splits(df: pl.DataFrame) -> list:
    return df["split"].unique().to_list() if "split" in df.columns else [None]


def _mask(df: pl.DataFrame, split) -> np.ndarray:
    return np.ones(df.height, bool) if split is None else is_(df, "split", split)


def mapping_of(means: pl.DataFrame) -> Mapping:
    """The best/worst mapping of one split's null means: the Beta concentrations that match its
    mean avg@4 and worst@4 at its first and its last evaluation (`isolab.verdicts.planned.
    Mapping`)."""
    first = means.filter(pl.col(STEP) == 0)
    if not first.height:
        first = means.filter(pl.col(STEP) == pl.col(STEP).min())
    last = means.filter(pl.col(STEP) == pl.col(STEP).max().over(RUN_KEY))
    pts = []
    for rows in (first, last):
        avg, worst = as_float(rows[EVAL_AVG].mean()), as_float(rows[EVAL_WORST].mean())
        pts.append((avg, _beta_concentration(avg, worst)))
    (a0, k0), (a1, k1) = pts
    if abs(a1 - a0) < 1e-6:
        a1 = a0 + 1e-3
    return Mapping(a0, k0, a1, k1)


def through_mapping(
    means: pl.DataFrame, d_avg: np.ndarray, extra: dict[str, np.ndarray] | None = None
) -> dict[str, np.ndarray]:
    """avg@4 moved by `d_avg`, best@4 and worst@4 moved as the split's mapping carries them
    (F(avg + d) − F(avg)), plus `extra` per metric."""
    out = {EVAL_AVG: d_avg.copy()}
    for m in (EVAL_BEST, EVAL_WORST):
        out[m] = np.zeros(means.height)
    for split in _splits(means):
        on = _mask(means, split)
        if not on.any():
            continue
        F = mapping_of(means.filter(pl.Series(on)))
        avg = means[EVAL_AVG].to_numpy().astype(float)[on]
        before, after = F(avg), F(avg + d_avg[on])
        for m in (EVAL_BEST, EVAL_WORST):
            out[m][on] = after[m] - before[m]
    for m, v in (extra or {}).items():
        out[m] = out[m] + v
    return out


def base_curve(means: pl.DataFrame) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """(split mask, log2 C) → the split's null mean avg@4 there, interpolated linearly in
    log2 C between its checkpoints (flat beyond the last, down to the step-0 value one
    doubling before the first): R(C) for compute-shift worlds."""
    curves = {}
    for split in _splits(means):
        part = means.filter(pl.Series(_mask(means, split)))
        trained = part.filter(pl.col(ROLLOUTS) > 0).with_columns(
            lc=(pl.col(ROLLOUTS).cast(pl.Float64).log(2) * 4).round() / 4
        )
        pts = trained.group_by("lc").agg(pl.col(EVAL_AVG).mean()).sort("lc")
        step0 = part.filter(pl.col(STEP) == 0)
        start = as_float(step0[EVAL_AVG].mean()) if step0.height else float(pts[EVAL_AVG][0])
        xs = np.concatenate([[pts["lc"][0] - 1.0], pts["lc"].to_numpy()])
        ys = np.concatenate([[start], pts[EVAL_AVG].to_numpy()])
        curves[split] = (xs, ys)

    splits = means["split"].to_numpy() if "split" in means.columns else None

    def R(on: np.ndarray, lc: np.ndarray) -> np.ndarray:
        out = np.zeros(len(lc))
        for split, (xs, ys) in curves.items():
            m = on if splits is None else on & (splits == split)
            out[m] = np.interp(lc[m], xs, ys)
        return out

    return R


# ---- n* and the fixed-batch trade-off ----------------------------------------------------------
def optimum(
    vertex: Callable[[np.ndarray], np.ndarray],
    curvature: float,
    split: str | None = None,
    curvature_hard: float | None = None,
) -> Effect:
    """avg@4 concave in log2 n, −`curvature`·frac·(log2 n − vertex(log2 C))², on `split` (None:
    every split; `curvature_hard` on Hard when given, whose avg@4 is a third of Easy's: the same
    curvature would push its worst n to 0); best@4 and worst@4 through the mapping. `vertex`
    constant: n* fixed (a structured null of "n* grows"); rising in log2 C: n* grows (its
    planted world)."""

    def add(_: str, means: pl.DataFrame) -> dict[str, np.ndarray]:
        on = _mask(means, split)
        k = np.full(means.height, curvature)
        if curvature_hard is not None:
            k = np.where(is_(means, "split", "hard"), curvature_hard, curvature)
        lc = np.log2(np.maximum(means[ROLLOUTS].to_numpy().astype(float), 1.0))
        x = log2_of(means, "n")
        return through_mapping(means, -k * frac(means) * (x - vertex(lc)) ** 2 * on)

    return add


def compute_shift(h: Callable[[np.ndarray], np.ndarray]) -> Effect:
    """The structured null of "n* grows": curves that differ by a compute shift only, avg@4 =
    R(C·2^h(log2 n)) with R the split's null mean curve (`base_curve`); best@4 and worst@4
    through the mapping. A larger n is worth h doublings of compute at every C, so the best n
    is argmax h at every C: it never moves."""

    def add(_: str, means: pl.DataFrame) -> dict[str, np.ndarray]:
        R = base_curve(means)
        lc = np.log2(np.maximum(means[ROLLOUTS].to_numpy().astype(float), 1.0))
        on = (means[STEP] > 0).to_numpy()
        shifted = R(on, lc + h(log2_of(means, "n")))
        d = np.where(on, shifted - means[EVAL_AVG].to_numpy().astype(float), 0.0)
        return through_mapping(means, d)

    return add


def interaction(split: str, size: float) -> Effect:
    """avg@4 + `size`·log2 n·log2 C on `split`, after step 0, both centred on the
    trained evaluations (log2 C of step 0 is −∞: it must not pull the centre)."""

    def add(_: str, df: pl.DataFrame) -> dict[str, np.ndarray]:
        on = is_(df, "split", split)
        trained = (df[STEP] > 0).to_numpy() & (df[ROLLOUTS] > 0).to_numpy()
        lc = log2_of(df, ROLLOUTS)
        xc = np.where(trained, lc - lc[trained].mean(), 0.0)
        return {EVAL_AVG: size * on * centred_log2(df, "n") * xc * trained}

    return add


def bp_effect(size: float) -> Effect:
    """avg@4 + `size` per doubling of B_p (centred) at every evaluation after step 0, every
    split: at the margin, the null world of "B_p matters little"."""

    def add(_: str, means: pl.DataFrame) -> dict[str, np.ndarray]:
        trained = (means[STEP] > 0).to_numpy()
        return through_mapping(means, size * centred_log2(means, "B_p") * trained)

    return add


def nothing(_: str, means: pl.DataFrame) -> dict[str, np.ndarray]:
    """No effect."""
    return {}


# ---- best@k and worst@k ------------------------------------------------------------------------
def mechanism(
    split: str | None,
    metric: str | None,
    kappa: float,
    vertex: float = 4.0,
    curvature: float = 0.012,
    curvature_hard: float = 0.004,
) -> Effect:
    """n moves avg@4 (concave in log2 n, vertex `vertex`, −`curvature` per doubling² at the
    end; `curvature_hard` on Hard, whose avg@4 is a third of Easy's) on `split` (None: every
    split), best@4 and worst@4 following through the mapping, and `metric` moving `kappa` more
    per unit of avg@4 than the mapping carries it. `kappa = 0` (or `metric` None): the
    structured null of the bestk claims (n acts on avg@4 alone)."""

    def add(_: str, means: pl.DataFrame) -> dict[str, np.ndarray]:
        on = _mask(means, split)
        k = np.where(is_(means, "split", "hard"), curvature_hard, curvature)
        x = log2_of(means, "n")
        d = -k * frac(means) * (x - vertex) ** 2 * on
        # the n effect relative to the checkpoint's mean n effect: n moves avg@4 up for some n
        # and down for others, and the mechanism follows avg@4 either way
        d = d - _checkpoint_mean(means, d)
        extra = {metric: kappa * d} if metric is not None else {}
        return through_mapping(means, d, extra)

    return add


def _checkpoint_mean(means: pl.DataFrame, v: np.ndarray) -> np.ndarray:
    keys = [c for c in ("split",) if c in means.columns]
    lc = (np.log2(np.maximum(means[ROLLOUTS].to_numpy().astype(float), 1.0)) * 4).round()
    frame = means.select(keys).with_columns(pl.Series("_lc", lc), pl.Series("_v", v))
    return frame.select(pl.col("_v").mean().over([*keys, "_lc"])).to_series().to_numpy()


def arm(split: str, factor: str, value, size: float) -> Effect:
    """avg@4 + `size` × the share of training done, on the runs of `split` whose `factor` is
    `value` (e.g. the healthy recipe's KL + entropy arm)."""

    def add(_: str, df: pl.DataFrame) -> dict[str, np.ndarray]:
        on = is_(df, "split", split) & is_(df, factor, value)
        return {EVAL_AVG: size * on * frac(df)}

    return add


def optimum_by_split(
    v_easy: float, v_hard: float, curvature: float = 0.012, curvature_hard: float = 0.004
) -> Effect:
    """avg@4 concave in log2 n with its best n at 2^v_easy on Easy and 2^v_hard on Hard (a
    third of Easy's curvature on Hard, whose avg@4 is a third of Easy's)."""

    def add(_: str, df: pl.DataFrame) -> dict[str, np.ndarray]:
        easy = is_(df, "split", "easy")
        vertex = np.where(easy, v_easy, v_hard)
        k = np.where(easy, curvature, curvature_hard)
        d = -k * (log2_of(df, "n") - vertex) ** 2 * frac(df)
        return through_mapping(df, d)

    return add


def race(curvature: float) -> Effect:
    """Concave reward in ρ, peaking far from the regime threshold 0.5: at 0.9 for rule-based
    systems, at 0.1 for model-based ones."""

    def add(_: str, df: pl.DataFrame) -> dict[str, np.ndarray]:
        r = df[RHO].fill_null(0.5).to_numpy().astype(float)
        peak = np.where(df["reward"].is_in(list(RULE_BASED)).to_numpy(), 0.9, 0.1)
        return {EVAL_AVG: -curvature * (r - peak) ** 2 * frac(df)}

    return add


def size_slopes(size: float) -> Effect:
    def add(_: str, df: pl.DataFrame) -> dict[str, np.ndarray]:
        models = sorted(df["model"].unique().to_list())
        slope = {m: size * (i / max(len(models) - 1, 1) - 0.5) for i, m in enumerate(models)}
        s = np.array([slope[m] for m in df["model"].to_list()])
        return {EVAL_AVG: s * centred_log2(df, "n") * frac(df)}

    return add
