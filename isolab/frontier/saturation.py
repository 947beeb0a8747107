"""From per-n reward curves to n*(C) and the n at which it saturates (IsoCompute Playbook,
arXiv 2603.12151, §4): the compute grid, the upper envelope, its running average, and the
saturation's bootstrap interval, or the level of an n* that was flat all along."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl

from isolab.frontier.fit import SigmoidFit, percentile_intervals
from isolab.frontier.solver import U_PAD_HI, U_PAD_LO, fit_batch


def compute_grid(
    fits: dict[int, SigmoidFit],
    ranges: dict[int, tuple[float, float]],
    min_progress: float,
    grid_points: int,
) -> np.ndarray:
    """A log-spaced compute grid over the union of the n's compute `ranges` (smallest positive,
    largest), starting where the earliest fitted curve has made `min_progress` of its rise."""
    c_lo = min(lo for lo, _ in ranges.values())
    c_hi = max(hi for _, hi in ranges.values())
    # Before any curve has risen, "the best n" is decided by noise in the fitted R0s: start the
    # grid where the first curve reaches `min_progress` of its rise, s = 1/(1 + (C_mid/C)^B) = p
    # ⇔ C = C_mid·(p / (1 − p))^(1/B).
    starts = [
        fits[n].C_mid * (min_progress / (1 - min_progress)) ** (1 / fits[n].B)
        for n in ranges
        if fits[n].A > fits[n].R0
    ]
    if starts and 0 < min_progress < 1:
        c_lo = min(max(c_lo, min(starts)), c_hi / 10)
    return np.geomspace(c_lo, c_hi, grid_points)


def envelope(curves: np.ndarray, valid: np.ndarray, ns: np.ndarray) -> np.ndarray:
    """log2 of the n whose curve is highest, over the n axis (axis −2) of `curves` (…×n×G),
    counting each n only where `valid` (n×G, its runs cover that compute); NaN where none is."""
    masked = np.where(valid, curves, -np.inf)
    idx = np.argmax(masked, axis=-2)
    out = np.log2(ns[idx])
    return np.where(valid.any(axis=0), out, np.nan)


def running_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Centered moving average along the last axis, NaN-aware (edges use what exists).

    Why n* is averaged: the envelope's n* is a staircase over the n grid (powers of two) whose
    steps sit where two fitted curves cross, and near a crossing the curves are within noise of
    each other, so the argmax flips between neighbouring n from one grid point to the next. The
    Playbook's running average of log2 n* (a geometric mean of n) turns the staircase into a
    path between grid values that a sigmoid can follow. At the edges (and across NaNs) the
    window averages only the values that exist: counting the padding as zeros would drag the
    ends of log2 n* towards 0.
    """
    if window <= 1:
        return values
    mask = np.isfinite(values).astype(float)
    v = np.where(mask > 0, values, 0.0)
    pad = window // 2

    def conv(a: np.ndarray) -> np.ndarray:
        a = np.pad(a, [(0, 0)] * (a.ndim - 1) + [(pad, window - 1 - pad)])
        csum = np.cumsum(a, axis=-1)
        csum = np.concatenate([np.zeros(csum.shape[:-1] + (1,)), csum], axis=-1)
        return csum[..., window:] - csum[..., :-window]

    num, den = conv(v), conv(mask)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.maximum(den, 1e-300), np.nan)


def with_interval(
    fit: SigmoidFit,
    grid: np.ndarray,
    smooth_b: np.ndarray | None,
    bounds: tuple[float, float],
    ci: float,
) -> tuple[SigmoidFit, tuple[float, float]]:
    """The sigmoid of log2 n* refitted to every replicate envelope (`smooth_b`, K×G): the fit
    with its bootstrap intervals, and the interval of the saturation 2^A."""
    if smooth_b is None:
        return fit, (float("nan"), float("nan"))
    xg = np.log(grid)
    u_range = (xg[0] - U_PAD_LO, xg[-1] + U_PAD_HI)
    Yb = np.where(np.isfinite(smooth_b), smooth_b, 0.0)
    Wb = np.isfinite(smooth_b).astype(float)
    start = np.array([fit.R0, fit.A, fit.C_mid, fit.B])
    boot, _ = fit_batch(xg, Yb, Wb, None, bounds, u_range, start=start)
    q = (1 - ci) / 2
    sat = 2.0 ** boot[:, 1]
    fit = dataclasses.replace(fit, ci_level=ci, boot=boot, **percentile_intervals(boot, ci))
    return fit, (float(np.quantile(sat, q)), float(np.quantile(sat, 1 - q)))


def flat_level(
    table: pl.DataFrame, level: float, grid: np.ndarray, smooth_b: np.ndarray | None, ci: float
) -> tuple[pl.DataFrame, tuple[float, float], str]:
    """n*(C) flat at one interior n over the whole compute `grid`: it saturated before the
    smallest compute measured. The level is the saturation (its rise, C_mid, is not
    identifiable); the interval is the spread of the level over the bootstrap replicate
    envelopes `smooth_b` (log2 n*, K×G). Returns the table with the level as its fit, the
    interval and the reason."""
    lo = hi = float("nan")
    if smooth_b is not None:
        per_rep = 2.0 ** np.nanmedian(smooth_b, axis=1)
        q = (1 - ci) / 2
        lo, hi = (float(v) for v in np.nanquantile(per_rep, [q, 1 - q]))
        lo, hi = min(lo, level), max(hi, level)
    table = table.with_columns(
        fit=pl.lit(level),
        fit_lo=pl.lit(lo if np.isfinite(lo) else None, pl.Float64),
        fit_hi=pl.lit(hi if np.isfinite(hi) else None, pl.Float64),
    )
    reason = (
        f"n* is flat at {level:.0f} over the whole compute range ({grid[0]:.3g} to "
        f"{grid[-1]:.3g}): it saturated below the smallest compute measured; the "
        "level is the saturation, the compute of its rise (C_mid) is not identifiable"
    )
    return table, (lo, hi), reason
