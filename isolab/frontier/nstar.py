"""n*(C): per-n fits → upper envelope → running average → a sigmoid of log n* against log C
(IsoCompute Playbook, arXiv 2603.12151), with the saturation level and its interval."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import polars as pl

from isolab.frontier.envelope import frontier, record_points
from isolab.frontier.fit import (
    U_PAD_HI,
    U_PAD_LO,
    SigmoidFit,
    fit_batch,
    fit_sigmoid,
    predict_params,
)
from isolab.frontier.frames import Status, single_threaded
from isolab.table import (
    CONFIG_COLUMNS,
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
        curves: long table (`n`, `C`, `reward_fit`) of each per-n fit over its data range.
        fits: per-n `SigmoidFit`, keyed by n.
        fit: the sigmoid of log2 n* against C (`A` = log2 of the saturation), or None.
        n_saturation: 2**A, the n at which n*(C) saturates (NaN when not identifiable).
        n_saturation_ci: bootstrap percentile interval of `n_saturation`.
        status, reason: ``ok`` / ``extrapolated`` / ``not identifiable`` and why.
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


def _running_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Centered moving average along the last axis, NaN-aware (edges use what exists)."""
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


def _best_config(grp: pl.DataFrame, x: str, y: str) -> pl.DataFrame:
    """Points of the configuration (e.g. B_p) of one n with the highest mean reward over the
    upper half (in log compute) of the compute range all its configurations share: a single
    choice among few configurations, so the chosen curve's points keep their noise unbiased
    (unlike a running maximum), made at equal compute."""
    cfg = [c for c in CONFIG_COLUMNS if c in grp.columns and c != "n" and grp[c].n_unique() > 1]
    if not cfg:
        return grp
    pos = grp.filter(pl.col(x) > 0)
    ends = pos.group_by(cfg).agg(pl.col(x).min().alias("lo"), pl.col(x).max().alias("hi"))
    lo, hi = float(ends["lo"].max()), float(ends["hi"].min())
    window = pos.filter(pl.col(x).is_between(math.sqrt(lo * hi), hi)) if hi >= lo else pos
    score = (
        (window if window.height else pos)
        .group_by(cfg)
        .agg(pl.col(y).mean().alias("_score"))
        .sort("_score", descending=True)
    )
    return grp.join(score.head(1).select(cfg), on=cfg, how="semi")


def seed_replicates(
    df: pl.DataFrame, avg: pl.DataFrame, x: str, y: str, n_boot: int, rng
) -> np.ndarray:
    """Cluster-bootstrap replicates of the seed means in `avg` (rows of `seed_average`, in its
    order): each replicate draws each configuration's seeds with replacement. A configuration
    with one seed gets Gaussian noise of the seed SD pooled over configurations with several
    (what a second seed would have shown). Shape (n_boot, rows of `avg`)."""
    cfg = [c for c in CONFIG_COLUMNS if c in df.columns]
    key = "run_key" if "run_key" in df.columns else "run_id"
    wide = df.pivot(on="step", index=[*cfg, key], values=y, aggregate_function="mean")
    steps = [c for c in wide.columns if c not in (*cfg, key)]
    out = np.full((n_boot, avg.height), np.nan)
    row_of = {(*(r[c] for c in cfg), r["step"]): r["_row"] for r in avg.iter_rows(named=True)}
    cells = wide.partition_by(cfg, as_dict=True) if cfg else {(): wide}
    with warnings.catch_warnings():  # a step only one seed reached has no variance: NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        spread = [
            np.nanvar(part.select(steps).to_numpy().astype(float), axis=0, ddof=1)
            for part in cells.values()
            if part.height > 1
        ]
    sd = np.sqrt(np.nanmean(spread, axis=0)) if spread else np.zeros(len(steps))
    for values, part in cells.items():
        V = part.select(steps).to_numpy().astype(float)  # seeds × steps
        S = V.shape[0]
        if S > 1:
            draws = V[rng.integers(0, S, size=(n_boot, S))].mean(axis=1)
        else:
            draws = V[0] + rng.standard_normal((n_boot, len(steps))) * np.nan_to_num(sd)
        for j, step in enumerate(steps):
            row = row_of.get((*values, int(step)))
            if row is not None:
                out[:, row] = draws[:, j]
    return out


def _per_n_points(avg: pl.DataFrame, x: str, y: str, per_n: str, bin_width: float) -> dict:
    out = {}
    for (n,), grp in avg.group_by(["n"], maintain_order=True):
        if per_n == "records":
            pts = record_points(grp, x, y, bin_width=bin_width).select(x, y)
            # Anchor the plateau: after the last record the frontier stays flat up to the
            # largest compute of this n; without this point the fit is free to rise there.
            last = frontier(grp, x, y).tail(1)
            if last[x][0] > pts[x][-1]:
                pts = pl.concat([pts, last.select(x, pl.col("frontier").alias(y))])
            pts = pts.drop("_row", strict=False)
        elif per_n == "all":
            pts = grp
        elif per_n == "best_config":
            pts = _best_config(grp, x, y)
        else:
            raise ValueError(f"per_n = {per_n!r}: choose 'records', 'best_config' or 'all'.")
        pos = grp.filter(pl.col(x) > 0)[x]
        out[int(n)] = (
            pts[x].to_numpy().astype(float),
            pts[y].to_numpy().astype(float),
            float(pos.min()) if len(pos) else float("nan"),
            float(grp[x].max()),
            pts["_row"].to_numpy() if "_row" in pts.columns else None,
        )
    return dict(sorted(out.items()))


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
    3. The upper envelope of the per-n curves on a log-spaced compute grid gives the raw n*(C)
       (each curve only within the compute its runs cover), starting where the earliest curve
       has made `min_progress` of its rise (before that every n is at R0 and the argmax is
       noise); a running average of log2 n* over `window` grid points smooths the steps
       between grid values of n.
    4. A sigmoid of log2 n* against log C (the same law, with A bounded by the n grid) gives the
       saturation ``n_sat = 2^A``. Bootstrap: replicate b of every per-n fit (residual
       bootstrap) gives envelope b, whose sigmoid gives ``n_sat_b``; percentiles give the CI.
    """
    df = to_polars(df)
    require(df, x, y, "n")
    check_single_setting(df, "optimal_n")
    df = finite_rows(df, x, y, context=f"optimal_n({y})")
    empty = pl.DataFrame()

    def fail(reason: str, per: pl.DataFrame = empty, fits: dict | None = None) -> NStarResult:
        return NStarResult.not_identifiable(y, x, reason, per_n=per, fits=fits)

    if df.height == 0:
        return fail(f"no finite values of {y}")
    ns = sorted(int(v) for v in df["n"].unique().to_list())
    if len(ns) < 2:
        return fail(f"only one n ({ns[0]}) in the data: n*(C) needs runs at several n")

    avg = seed_average(df, x, y).with_row_index("_row")
    base = avg.filter(pl.col(x) == 0)[y]
    R0 = float(base.mean()) if len(base) else None  # every run starts from the same base
    reps = seed_replicates(df, avg, x, y, n_boot, np.random.default_rng(seed)) if n_boot else None
    points = _per_n_points(avg, x, y, per_n, bin_width)
    fits: dict[int, SigmoidFit] = {}
    rows = []
    for i, (n, (C, R, c_lo, c_hi, idx)) in enumerate(points.items()):
        paired = reps is not None and idx is not None
        f = fit_sigmoid(
            C, R, R0=R0, n_boot=n_boot, bootstrap="replicates" if paired else "residual",
            replicates=reps[:, idx] if paired else None, ci=ci, seed=seed + i, what=y,
        )  # fmt: skip
        fits[n] = f
        rows.append({"n": n, **f.to_dict(), "C_lo": c_lo, "C_hi": c_hi})
    per = pl.DataFrame(rows)
    usable = [n for n, f in fits.items() if f.identifiable and np.isfinite(points[n][2])]
    if len(usable) < 2:
        bad = "; ".join(f"n={n}: {f.reason}" for n, f in fits.items() if not f.identifiable)
        return fail(f"fewer than two n have an identifiable reward curve ({bad})", per, fits)

    c_lo = min(points[n][2] for n in usable)
    c_hi = max(points[n][3] for n in usable)
    # Before any curve has risen, "the best n" is decided by noise in the fitted R0s: start the
    # grid where the first curve reaches `min_progress` of its rise, s = 1/(1 + (C_mid/C)^B) = p
    # ⇔ C = C_mid·(p / (1 − p))^(1/B).
    starts = [
        fits[n].C_mid * (min_progress / (1 - min_progress)) ** (1 / fits[n].B)
        for n in usable
        if fits[n].A > fits[n].R0
    ]
    if starts and 0 < min_progress < 1:
        c_lo = min(max(c_lo, min(starts)), c_hi / 10)
    grid = np.geomspace(c_lo, c_hi, grid_points)
    n_arr = np.array(usable, dtype=float)
    valid = np.array(
        [(grid >= points[n][2] * (1 - 1e-9)) & (grid <= points[n][3] * (1 + 1e-9)) for n in usable]
    )
    point_curves = np.stack([fits[n].predict(grid) for n in usable])  # n×G

    def envelope(curves: np.ndarray) -> np.ndarray:
        """log2 of the argmax-n over the n axis (axis −2), NaN where no n is valid."""
        masked = np.where(valid, curves, -np.inf)
        idx = np.argmax(masked, axis=-2)
        out = np.log2(n_arr[idx])
        return np.where(valid.any(axis=0), out, np.nan)

    raw = envelope(point_curves)
    smooth = _running_mean(raw, window)
    curves_tbl = pl.DataFrame(
        {
            "n": np.repeat(n_arr.astype(int), grid_points),
            "C": np.tile(grid, len(usable)),
            "reward_fit": np.where(valid, point_curves, np.nan).ravel(),
        }
    ).filter(pl.col("reward_fit").is_not_nan())

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
        )

    # bootstrap: envelope b of replicate b of every per-n fit (K×G), None without replicates
    smooth_b = None
    if n_boot > 0 and all(fits[n].boot is not None for n in usable):
        reps = np.stack([predict_params(fits[n].boot, grid) for n in usable], axis=1)  # K×n×G
        smooth_b = _running_mean(envelope(reps), window)[:, keep]
    if not fit.identifiable:  # flat at an interior n: the level is the saturation
        table, sat_ci, reason = _flat_level(table, level, grid[keep], smooth_b, ci)
        status, reasons = "extrapolated", [reason]
    else:
        # … and the sigmoid of each replicate envelope b gives n_sat_b
        fit, sat_ci = _with_interval(fit, grid[keep], smooth_b, (lo_b, hi_b), ci)
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
                y, x,
                f"n*(C) falls with compute ({2.0**fit.R0:.3g} → {2.0**fit.A:.3g}): no "
                "saturation to report (the Playbook finds n* grows, then saturates)",
                table=table, per_n=per, curves=curves_tbl, fits=fits, fit=fit,
            )  # fmt: skip
    dropped = [n for n in ns if n not in usable]
    if dropped:
        reasons.append(f"n = {dropped} left out: no identifiable reward curve")
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
    )


def _with_interval(
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
    cis = {
        f"{name}_ci": tuple(float(v) for v in np.quantile(boot[:, i], [q, 1 - q]))
        for i, name in enumerate(("R0", "A", "C_mid", "B"))
    }
    fit = SigmoidFit(
        **{k: getattr(fit, k) for k in ("R0", "A", "C_mid", "B", "status", "reason")},
        n_points=fit.n_points,
        rmse=fit.rmse,
        C_range=fit.C_range,
        ci_level=ci,
        boot=boot,
        **cis,
    )
    return fit, (float(np.quantile(sat, q)), float(np.quantile(sat, 1 - q)))


def _flat_level(
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
