"""n*(C): per-n fits → upper envelope → running average → a sigmoid of log n* against log C
(IsoCompute Playbook, arXiv 2603.12151), with the saturation level and its interval.

The points each n is fitted to are chosen in `isolab.frontier.per_n`; the envelope, its running
average and the saturation's interval are `isolab.frontier.saturation`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import polars as pl

from isolab.frontier.blas import single_threaded
from isolab.frontier.fit import SigmoidFit, fit_sigmoid
from isolab.frontier.law import predict_params
from isolab.frontier.per_n import per_n_curves, per_n_points, seed_replicates
from isolab.frontier.saturation import (
    compute_grid,
    envelope,
    flat_level,
    running_mean,
    with_interval,
)
from isolab.frontier.status import Status
from isolab.table import (
    as_float,
    check_single_setting,
    finite_rows,
    require,
    seed_average,
    to_polars,
)
from isolab.vocab import DEFAULT_X, DEFAULT_Y


@dataclass(frozen=True)
class NStarResult:
    """The compute-optimal number of rollouts per problem, n*(C), and its saturation.

    Attributes:
        metric: the reward column analysed.
        x: the compute column.
        table: per compute grid point `C`: `n_star_raw` (best n of the per-n fits' envelope),
            `n_star` (running geometric mean over `window` grid points), `fit` (the sigmoid of
            log2 n* evaluated, as n), `fit_lo` / `fit_hi` (bootstrap band).
        per_n: one row per n: its sigmoid parameters, intervals, status and compute range.
        curves: long table (`n`, `C`, `reward_fit`, `reward_lo`, `reward_hi`, `status`) of each
            per-n fit over its data range; a ``flat`` fit as its observed level ± SD
            (`isolab.frontier.per_n.per_n_curves`).
        fits: per-n `SigmoidFit`, keyed by n.
        fit: the sigmoid of log2 n* against C (`A` = log2 of the saturation), or None.
        n_saturation: 2**A, the n at which n*(C) saturates (NaN when not identifiable).
        n_saturation_ci: bootstrap percentile interval of `n_saturation`.
        status, reason: ``ok`` / ``extrapolated`` / ``not identifiable`` and why.
        ci: the level of every bootstrap interval here (`n_saturation_ci`, the band in
            `table`, the per-n fits' intervals).
    """

    metric: str
    x: str
    table: pl.DataFrame
    per_n: pl.DataFrame
    curves: pl.DataFrame
    fits: dict[int, SigmoidFit]
    fit: SigmoidFit | None
    n_saturation: float
    n_saturation_ci: tuple[float, float]
    status: Status
    reason: str = ""
    ci: float = 0.95

    @classmethod
    def not_identifiable(
        cls,
        metric: str,
        x: str,
        reason: str,
        *,
        table: pl.DataFrame | None = None,
        per_n: pl.DataFrame | None = None,
        curves: pl.DataFrame | None = None,
        fits: dict[int, SigmoidFit] | None = None,
        fit: SigmoidFit | None = None,
        ci: float = 0.95,
    ) -> NStarResult:
        """A result that names why n*(C) could not be had (the parts that could, kept)."""
        empty = pl.DataFrame()
        return cls(
            metric=metric,
            x=x,
            table=empty if table is None else table,
            per_n=empty if per_n is None else per_n,
            curves=empty if curves is None else curves,
            fits=fits or {},
            fit=fit,
            n_saturation=float("nan"),
            n_saturation_ci=(float("nan"), float("nan")),
            status="not identifiable",
            reason=reason,
            ci=ci,
        )

    def n_star_at(self, C: Any) -> np.ndarray:
        """n*(C) from the fitted sigmoid of log2 n* (NaN when not identifiable)."""
        if self.fit is None or not self.fit.identifiable:
            return np.full(np.shape(C), np.nan)
        return 2.0 ** self.fit.predict(C)

    def n_star_band(self, C: Any) -> tuple[np.ndarray, np.ndarray]:
        """Bootstrap band of n*(C)."""
        if self.fit is None:
            nan = np.full(np.shape(C), np.nan)
            return nan, nan
        lo, hi = self.fit.predict_band(C)
        return 2.0**lo, 2.0**hi


@single_threaded
def optimal_n(
    df: Any,
    *,
    x: str = DEFAULT_X,
    y: str = DEFAULT_Y,
    per_n: Literal["best_config", "records", "all"] = "best_config",
    bin_width: float = 0.0,
    grid_points: int = 120,
    window: int = 9,
    min_progress: float = 0.05,
    n_boot: int = 200,
    ci: float = 0.95,
    seed: int = 0,
) -> NStarResult:
    """n*(C) and its saturation, the IsoCompute Playbook's method (arXiv 2603.12151, §4).

    1. Seeds are averaged per (configuration, step).
    2. Per n, a ScaleRL sigmoid of reward against compute is fitted (`fit_sigmoid`) to the
       points of that n's best configuration (``per_n="best_config"``: the B_p with the highest
       reward over the upper half of its compute), to that n's record-breaking points plus the
       frontier's end (``"records"``, the paper's literal recipe) or to all its points
       (``"all"``, averaging over B_p). Records are maxima of noisy points, biased upwards and
       more so for an n with more configurations; on synthetic runs at 2% noise
       ``best_config`` recovers the planted saturation most closely, hence the default.
       A ``flat`` fit (no rise beyond noise) takes no part in what follows: its curve says
       nothing about the compute at which its n overtakes another, and the argmax of curves
       that are all flat is the argmax of noise, so with fewer than two rising curves n*(C)
       is not identifiable.
    3. The upper envelope of the per-n curves on a log-spaced compute grid gives the raw n*(C)
       (each curve only within the compute its runs cover), starting where the earliest curve
       has made `min_progress` of its rise (before that every n is at R0 and the argmax is
       noise); a running average of log2 n* over `window` grid points smooths the steps
       between grid values of n.
    4. A sigmoid of log2 n* against log C (the same law, with A bounded by the n grid) gives the
       saturation ``n_sat = 2^A``. Bootstrap: replicate b of every per-n fit (its seeds
       resampled within configurations; the residuals, when no configuration has two seeds)
       gives envelope b, whose sigmoid gives ``n_sat_b``; percentiles give the CI.
    """
    df = to_polars(df)
    require(df, x, y, "n")
    check_single_setting(df, "optimal_n")
    df = finite_rows(df, x, y, context=f"optimal_n({y})")
    empty = pl.DataFrame()

    def fail(
        reason: str,
        per: pl.DataFrame = empty,
        fits: dict | None = None,
        curves: pl.DataFrame | None = None,
    ) -> NStarResult:
        return NStarResult.not_identifiable(
            y, x, reason, per_n=per, fits=fits, curves=curves, ci=ci
        )

    if df.height == 0:
        return fail(f"no finite values of {y}")
    ns = sorted(int(v) for v in df["n"].unique().to_list())
    if len(ns) < 2:
        return fail(f"only one n ({ns[0]}) in the data: n*(C) needs runs at several n")

    # 1–2: seed means, and per n a sigmoid of reward against compute
    avg = seed_average(df, x, y).with_row_index("_row")
    base = avg.filter(pl.col(x) == 0)[y]
    R0 = as_float(base.mean()) if len(base) else None  # every run starts from the same base
    reps = seed_replicates(df, avg, x, y, n_boot, np.random.default_rng(seed)) if n_boot else None
    points = per_n_points(avg, x, y, per_n, bin_width)
    fits: dict[int, SigmoidFit] = {}
    rows = []
    for i, (n, pts) in enumerate(points.items()):
        paired = reps is not None and pts.rows is not None
        f = fit_sigmoid(
            pts.C,
            pts.R,
            R0=R0,
            n_boot=n_boot,
            bootstrap="replicates" if paired else "residual",
            replicates=reps[:, pts.rows] if paired else None,
            ci=ci,
            seed=seed + i,
            what=y,
        )
        fits[n] = f
        rows.append({"n": n, **f.to_dict(), "C_lo": pts.C_lo, "C_hi": pts.C_hi})
    per = pl.DataFrame(rows)
    curves_tbl = per_n_curves(fits, points, grid_points)
    usable = [
        n
        for n, f in fits.items()
        if f.identifiable and f.status != "flat" and np.isfinite(points[n].C_lo)
    ]
    if len(usable) < 2:
        bad = "; ".join(
            f"n={n}: {'flat (no rise beyond noise)' if f.status == 'flat' else f.reason}"
            for n, f in fits.items()
            if n not in usable
        )
        return fail(
            f"fewer than two n have a reward curve that rises beyond noise ({bad})",
            per,
            fits,
            curves_tbl,
        )

    # 3: the envelope of the per-n curves, and its running average
    grid = compute_grid(
        fits, {n: (points[n].C_lo, points[n].C_hi) for n in usable}, min_progress, grid_points
    )
    n_arr = np.array(usable, dtype=float)
    valid = np.array(
        [
            (grid >= points[n].C_lo * (1 - 1e-9)) & (grid <= points[n].C_hi * (1 + 1e-9))
            for n in usable
        ]
    )
    point_curves = np.stack([fits[n].predict(grid) for n in usable])  # n×G
    raw = envelope(point_curves, valid, n_arr)
    smooth = running_mean(raw, window)

    # 4: a sigmoid of log2 n* against compute, whose asymptote is the saturation
    table = pl.DataFrame({"C": grid, "n_star_raw": 2.0**raw, "n_star": 2.0**smooth})
    lo_b, hi_b = math.log2(min(ns)), math.log2(max(ns))
    keep = np.isfinite(smooth)
    fit = fit_sigmoid(grid[keep], smooth[keep], bounds_A=(lo_b, hi_b), n_boot=0, what="log2 n*")
    level = float(2.0 ** smooth[keep][0]) if keep.any() else math.nan
    # flat at an interior n: saturated below the smallest C. Flat at the grid's largest or
    # smallest n: the grid's edge binds, which says nothing about a saturation.
    flat_interior = (
        keep.any()
        and np.ptp(smooth[keep]) < 1e-9
        and not np.isclose(level, [min(ns), max(ns)]).any()
    )
    if not fit.identifiable and not flat_interior:
        const = float(2 ** np.nanmedian(smooth))
        where = (
            "the largest n of the grid: saturation lies beyond it"
            if np.isclose(const, max(ns))
            else "the smallest n of the grid"
            if np.isclose(const, min(ns))
            else "an interior n"
        )
        return NStarResult.not_identifiable(
            y,
            x,
            f"n*(C) cannot be fitted: {fit.reason} (n* ≈ {const:.0f}, {where})",
            table=table,
            per_n=per,
            curves=curves_tbl,
            fits=fits,
            fit=fit,
            ci=ci,
        )

    # bootstrap: envelope b of replicate b of every per-n fit (K×G), None without replicates
    smooth_b = None
    boots = [b for n in usable if (b := fits[n].boot) is not None]
    if n_boot > 0 and len(boots) == len(usable):  # every usable fit has its replicates
        reps = np.stack([predict_params(b, grid) for b in boots], axis=1)  # K×n×G
        smooth_b = running_mean(envelope(reps, valid, n_arr), window)[:, keep]
    if not fit.identifiable:  # flat at an interior n: the level is the saturation
        table, sat_ci, reason = flat_level(table, level, grid[keep], smooth_b, ci)
        status, reasons = "extrapolated", [reason]
    else:
        # … and the sigmoid of each replicate envelope b gives n_sat_b
        fit, sat_ci = with_interval(fit, grid[keep], smooth_b, (lo_b, hi_b), ci)
        band_lo, band_hi = fit.predict_band(grid)
        table = table.with_columns(
            fit=2.0 ** fit.predict(grid), fit_lo=2.0**band_lo, fit_hi=2.0**band_hi
        )
        status = fit.status
        reasons = [fit.reason] if fit.reason else []
        if hi_b - fit.A <= 0.5:
            status = "extrapolated"
            reasons.append(
                f"n* reaches the largest n of the grid ({max(ns)}): saturation may lie beyond it"
            )
        if fit.A < fit.R0:  # a fall is not a saturation: report the path, not a level
            return NStarResult.not_identifiable(
                y,
                x,
                f"n*(C) falls with compute ({2.0**fit.R0:.3g} → {2.0**fit.A:.3g}): no "
                "saturation to report (the Playbook finds n* grows, then saturates)",
                table=table,
                per_n=per,
                curves=curves_tbl,
                fits=fits,
                fit=fit,
                ci=ci,
            )
    dropped = [n for n in ns if n not in usable]
    if dropped:
        reasons.append(f"n = {dropped} left out: no reward curve that rises beyond noise")
    return NStarResult(
        metric=y,
        x=x,
        table=table,
        per_n=per,
        curves=curves_tbl,
        fits=fits,
        fit=fit,
        n_saturation=float(2.0**fit.A) if fit.identifiable else level,
        n_saturation_ci=sat_ci,
        status=status,
        reason="; ".join(reasons),
        ci=ci,
    )
