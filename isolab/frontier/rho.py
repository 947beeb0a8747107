"""The update fraction ρ = C_learning / C_total per reward system at equal FLOPs, and the
RACE pilot's regime calls (Wilhelm & Kao, arXiv 2607.13389)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from isolab.frontier.blas import single_threaded
from isolab.table import as_float, finite_rows, require, run_column, to_polars
from isolab.vocab import DEFAULT_Y, FLOPS_TOTAL, RHO


@dataclass(frozen=True)
class RhoFrontier:
    """Reward against the update fraction ρ inside an IsoFLOP band, per reward system.

    Attributes:
        band: (lo, hi) of `flops/total`.
        points: one row per run with points in the band: group columns, `run_key`, `rho`, the
            metric, `flops_total`, FLOP shares `share_search` / `share_learning` / `share_reward`.
        fits: one row per group: `rho_star` (vertex of a concave quadratic fit), `rho_lo` /
            `rho_hi` (bootstrap), `reward_star`, `rho_best_observed`, shares at ρ*, `n_runs`,
            `n_rho`, quadratic coefficients `q0`, `q1`, `q2`, status, reason.
    """

    band: tuple[float, float]
    metric: str
    by: tuple[str, ...]
    points: pl.DataFrame
    fits: pl.DataFrame


def isoflop_band(df: Any, width: float = 1.5, flops: str = FLOPS_TOTAL) -> tuple[float, float]:
    """The IsoFLOP band of a grid of runs.

    When every run ends within a factor `width` of the others (an IsoFLOP study: each run ends
    within one step of the common budget), the band is ``[min, max]`` of the final FLOP counts,
    so that each run contributes its final point. Otherwise it is the largest band every run
    reaches, ``(F / width, F)`` with F the smallest final count, so that each run contributes
    its points just below F.
    """
    if width <= 1:
        raise ValueError(f"width = {width}: the band is (F / width, F), so width must be > 1.")
    df = to_polars(df)
    require(df, flops)
    df = finite_rows(df, flops)
    if df.height == 0:
        raise ValueError(f"no finite {flops}: the runs carry no FLOP ledger (old runs?).")
    key = run_column(df)
    finals = df.group_by(key).agg(pl.col(flops).max())[flops]
    lo, hi = as_float(finals.min()), as_float(finals.max())
    if hi <= lo * width:
        return (lo * (1 - 1e-9), hi * (1 + 1e-9))
    return (lo / width, lo)


def _quadratic_fits(rho: np.ndarray, R: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Weighted least squares of R ≈ q0 + q1·ρ + q2·ρ² for K weight rows → (K, 3)."""
    X = np.stack([np.ones_like(rho), rho, rho * rho], axis=1)  # N×3
    XtW = X.T[None, :, :] * W[:, None, :]  # K×3×N
    H = XtW @ X
    g = XtW @ R
    H = H + 1e-12 * np.eye(3)
    return np.linalg.solve(H, g[:, :, None])[:, :, 0]


@single_threaded
def rho_frontier(
    df: Any,
    flops_band: tuple[float, float] | None = None,
    *,
    y: str = DEFAULT_Y,
    by: str | Sequence[str] = "reward",
    n_boot: int = 200,
    ci: float = 0.95,
    seed: int = 0,
) -> RhoFrontier:
    """Reward against ρ = C_learning / C_total inside an IsoFLOP band, per reward system, with ρ*.

    Each run contributes the mean of its points whose `flops/total` lies in the band (its ρ is
    the cumulative `compute/rho` there). Per group a concave quadratic in ρ is fitted; ρ* is its
    vertex when the curvature is negative and the vertex lies inside the observed ρ range,
    otherwise ρ* is not identifiable (`rho_best_observed` still says where the best run sits).
    Seeds resampled within configurations give the interval. Wilhelm & Kao find ρ* ≈ 0.72 for rule-based rewards
    and ≈ 0.44–0.45 for PRM-style ones (arXiv 2607.13389).
    """
    df = to_polars(df)
    by = (by,) if isinstance(by, str) else tuple(by)
    require(df, y, FLOPS_TOTAL, RHO, *by)
    if flops_band is None:
        flops_band = isoflop_band(df)
    lo, hi = float(flops_band[0]), float(flops_band[1])
    if not hi > lo:
        raise ValueError(f"flops_band = {flops_band}: give (lo, hi) with lo < hi.")
    key = run_column(df)
    shares = [
        (pl.col(f"flops/{c}") / pl.col(FLOPS_TOTAL)).alias(f"share_{c}")
        for c in ("search", "learning", "reward")
        if f"flops/{c}" in df.columns
    ]
    clean = finite_rows(df, y, FLOPS_TOTAL, RHO, context="rho_frontier")
    inband = clean.filter(pl.col(FLOPS_TOTAL).is_between(lo, hi)).with_columns(shares)
    share_cols = [
        c for c in ("share_search", "share_learning", "share_reward") if c in inband.columns
    ]
    points = (
        inband.group_by([*by, key])
        .agg(
            pl.col(RHO).mean().alias("rho"),
            pl.col(y).mean(),
            pl.col(FLOPS_TOTAL).mean().alias("flops_total"),
            *[pl.col(c).mean() for c in share_cols],
            pl.len().alias("n_points"),
        )
        .sort([*by, "rho", key])  # the run breaks ties: the bootstrap draws stay put
    )
    groups = df.select(by).unique().sort(list(by)).rows()
    fits = []
    rng = np.random.default_rng(seed)
    F_range = (
        f"[{clean[FLOPS_TOTAL].min():.3g}, {clean[FLOPS_TOTAL].max():.3g}]"
        if clean.height
        else "(none)"
    )
    for g in groups:
        cond = pl.lit(True)
        for c, v in zip(by, g, strict=True):
            cond = cond & (pl.col(c) == v)
        pts = points.filter(cond)
        row: dict[str, Any] = dict(zip(by, g, strict=True))
        row.update(
            rho_star=float("nan"),
            rho_lo=float("nan"),
            rho_hi=float("nan"),
            reward_star=float("nan"),
            rho_best_observed=float("nan"),
            share_search_star=float("nan"),
            share_reward_star=float("nan"),
            n_runs=pts.height,
            n_rho=0,
            q0=float("nan"),
            q1=float("nan"),
            q2=float("nan"),
            status="not identifiable",
            reason="",
        )
        fits.append(row)
        if pts.height == 0:
            row["reason"] = (
                f"no evaluation point with flops/total in [{lo:.3g}, {hi:.3g}]; "
                f"the runs span {F_range}"
                if clean.height
                else f"no point with finite {y}, flops/total and compute/rho (no FLOP ledger?)"
            )
            continue
        rho = pts["rho"].to_numpy().astype(float)
        R = pts[y].to_numpy().astype(float)
        row["rho_best_observed"] = float(rho[np.argmax(R)])
        n_rho = len(np.unique(np.round(rho, 3)))
        row["n_rho"] = n_rho
        if n_rho < 3:
            row["reason"] = f"{n_rho} distinct ρ value(s) in the band: a peak needs at least 3"
            continue
        if np.ptp(R) <= 1e-9:
            row["reason"] = f"{y} is the same ({R[0]:.4g}) at every ρ: no optimum"
            continue
        q = _quadratic_fits(rho, R, np.ones((1, len(rho))))[0]
        row.update(q0=float(q[0]), q1=float(q[1]), q2=float(q[2]))
        if q[2] >= 0:
            row["reason"] = (
                f"{y} is not concave in ρ inside the band (no interior optimum); the best run "
                f"has ρ = {row['rho_best_observed']:.2f}"
            )
            continue
        star = -q[1] / (2 * q[2])
        if not rho.min() <= star <= rho.max():
            row["reason"] = (
                f"the fitted optimum ρ = {star:.2f} lies outside the observed range "
                f"[{rho.min():.2f}, {rho.max():.2f}]: extend the ρ grid"
            )
            continue
        row.update(
            rho_star=float(star),
            reward_star=float(q[0] + q[1] * star + q[2] * star * star),
            status="ok",
        )
        for c in ("search", "reward"):
            if f"share_{c}" in pts.columns:
                # shares are linear in ρ for a fixed reward system (reward FLOPs ∝ search FLOPs)
                sh = pts[f"share_{c}"].to_numpy().astype(float)
                coef = np.polyfit(rho, sh, 1)
                row[f"share_{c}_star"] = float(np.clip(np.polyval(coef, star), 0.0, 1.0))
        if n_boot > 0:
            # resample what varies: the seeds of each configuration (runs at one ρ), keeping
            # every replicate; one without an interior peak has its optimum at an end of the
            # observed range, so the interval widens instead of silently dropping it
            cells = np.unique(np.round(rho, 2), return_inverse=True)[1]
            Wb = np.zeros((n_boot, len(rho)))
            for c in np.unique(cells):
                members = np.flatnonzero(cells == c)
                picks = rng.integers(0, len(members), size=(n_boot, len(members)))
                for j in range(len(members)):
                    np.add.at(Wb, (np.arange(n_boot), members[picks[:, j]]), 1.0)
            qb = _quadratic_fits(rho, R, Wb)
            sb = _best_rho(qb, rho.min(), rho.max())
            qq = (1 - ci) / 2
            row["rho_lo"], row["rho_hi"] = (float(v) for v in np.quantile(sb, [qq, 1 - qq]))
            interior = float(
                np.mean((qb[:, 2] < 0) & (sb > rho.min() + 1e-9) & (sb < rho.max() - 1e-9))
            )
            if interior < 0.9:
                row["status"] = "extrapolated"
                row["reason"] = (
                    f"only {interior:.0%} of replicates (seeds resampled within "
                    "configurations) peak inside the observed ρ range"
                )
    return RhoFrontier((lo, hi), y, by, points, pl.DataFrame(fits))


def _best_rho(q: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Where each quadratic q0 + q1·ρ + q2·ρ² (rows of `q`) peaks within [lo, hi]: its
    vertex when concave and inside, else the better end."""
    with np.errstate(divide="ignore", invalid="ignore"):
        vertex = np.where(q[:, 2] < 0, -q[:, 1] / (2 * q[:, 2]), np.nan)
    inside = np.isfinite(vertex) & (vertex >= lo) & (vertex <= hi)
    at_lo = q[:, 0] + q[:, 1] * lo + q[:, 2] * lo * lo
    at_hi = q[:, 0] + q[:, 1] * hi + q[:, 2] * hi * hi
    return np.where(inside, vertex, np.where(at_hi >= at_lo, hi, lo))


def regime(rho: float, share_reward: float, share_search: float, rho_threshold: float = 0.5) -> str:
    """RACE regime of an allocation (Wilhelm & Kao, arXiv 2607.13389).

    ``update-heavy`` when the optimum spends at least `rho_threshold` of its FLOPs on learning;
    otherwise ``reward-heavy`` when the reward model takes more than search, else
    ``search-heavy``. (The paper's calls separate high- from low-update regimes; the threshold is
    isolab's, stated here so that a call can be checked.)
    """
    if not np.isfinite(rho):
        return "unknown"
    if rho >= rho_threshold:
        return "update-heavy"
    if np.isfinite(share_reward) and np.isfinite(share_search) and share_reward > share_search:
        return "reward-heavy"
    return "search-heavy"


@dataclass(frozen=True)
class RaceResult:
    """RACE: regime calls from a pilot grid, checked against the full grid.

    Attributes:
        table: per group: `pilot_rho`, `full_rho` (ρ* or, when not identifiable, the best
            observed ρ, see `*_rho_source`), `pilot_regime`, `full_regime`, `same`.
        same_regime_rate: fraction of groups where the pilot's call matches the full grid's.
        pilot_flops_fraction: FLOPs of the pilot runs over FLOPs of the full grid.
        pilot, full: the two `RhoFrontier`s.
    """

    table: pl.DataFrame
    same_regime_rate: float
    pilot_flops_fraction: float
    pilot: RhoFrontier
    full: RhoFrontier


def _calls(front: RhoFrontier, rho_threshold: float) -> pl.DataFrame:
    rows = []
    for r in front.fits.iter_rows(named=True):
        ok = r["status"] == "ok"
        rho = r["rho_star"] if ok else r["rho_best_observed"]
        share_r, share_s = r["share_reward_star"], r["share_search_star"]
        if not ok and np.isfinite(rho):
            pts = front.points
            for c, v in zip(front.by, [r[c] for c in front.by], strict=True):
                pts = pts.filter(pl.col(c) == v)
            best = pts.sort(front.metric, descending=True).head(1)
            share_r = best["share_reward"][0] if "share_reward" in best.columns else float("nan")
            share_s = best["share_search"][0] if "share_search" in best.columns else float("nan")
        rows.append(
            {
                **{c: r[c] for c in front.by},
                "rho": rho,
                "rho_source": "rho_star" if ok else "best observed",
                "regime": regime(rho, share_r, share_s, rho_threshold),
            }
        )
    return pl.DataFrame(rows)


@single_threaded
def race(
    pilot_df: Any,
    full_df: Any,
    *,
    y: str = DEFAULT_Y,
    by: str | Sequence[str] = "reward",
    pilot_band: tuple[float, float] | None = None,
    full_band: tuple[float, float] | None = None,
    rho_threshold: float = 0.5,
    n_boot: int = 0,
) -> RaceResult:
    """The RACE protocol (Reward-Aware Compute Allocation, Wilhelm & Kao, arXiv 2607.13389).

    A small pilot IsoFLOP grid (few ρ values, a small budget) calls the regime of each setting
    (search-heavy / update-heavy / reward-heavy, see `regime`); the same call on the full grid
    is the reference; the same-regime rate is the fraction of settings where they agree. The
    paper reports 1.0 and stresses that RACE is a diagnostic of the regime, not a guarantee of
    better held-out reward. Bands default to `isoflop_band` of each grid.
    """
    pilot_df, full_df = to_polars(pilot_df), to_polars(full_df)
    pilot = rho_frontier(pilot_df, pilot_band, y=y, by=by, n_boot=n_boot)
    full = rho_frontier(full_df, full_band, y=y, by=by, n_boot=n_boot)
    p = _calls(pilot, rho_threshold).rename(
        {"rho": "pilot_rho", "rho_source": "pilot_rho_source", "regime": "pilot_regime"}
    )
    f = _calls(full, rho_threshold).rename(
        {"rho": "full_rho", "rho_source": "full_rho_source", "regime": "full_regime"}
    )
    table = p.join(f, on=list(pilot.by), how="inner").with_columns(
        same=(pl.col("pilot_regime") == pl.col("full_regime"))
        & (pl.col("full_regime") != "unknown")
    )
    if table.height == 0:
        raise ValueError(
            f"the pilot and full grids share no {pilot.by} value: pilot has "
            f"{p.select(pilot.by).rows()}, full has {f.select(full.by).rows()}"
        )
    rate = as_float(table["same"].mean())
    key = run_column(full_df)

    def spent(d: pl.DataFrame) -> float:
        return float(d.group_by(key).agg(pl.col(FLOPS_TOTAL).max())[FLOPS_TOTAL].sum())

    return RaceResult(table, rate, spent(pilot_df) / spent(full_df), pilot, full)
