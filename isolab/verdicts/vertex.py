"""The best n at each compute checkpoint, and how it moves: the IsoCompute Playbook's "n* grows
with compute" tested as it states it, as a shift of the optimum.

At each checkpoint C the seed means of avg@4 per configuration (n, B_p) are fitted by a
quadratic in log2 n (plus log2 B_p, a level, where B_p varies); the vertex −b₁ / (2b₂) is the
best n at C (`fit_checkpoints`, `vertex_table`). A checkpoint's vertex counts only where it is a
measured optimum: the curvature b₂ significantly negative (a maximum, not a flat or convex
curve) and the vertex inside the n grid by at least half a doubling (an optimum at the grid's
edge, or beyond it, is an extrapolation). Across the qualifying checkpoints the estimand is the
least-squares slope of log2 n* on log2 C (`vertex_shift`): doublings of n* per doubling of C.

Why seed means (cells), not runs. Every configuration ran every seed, so the part of the
training noise one seed shares across configurations (its data order) is common to all cells
and falls into the intercept; what is left — training, evaluation and any lack of fit of the
quadratic — is the cells' scatter about the fit, with cells − parameters degrees of freedom.

Why a joint covariance. The vertices of different checkpoints come from the same runs: a run
that is lucky at 16k rollouts is lucky at 32k. The fits share one design per checkpoint, so the
covariance of the coefficients of checkpoints i and j is σᵢⱼ·AᵢSᵢⱼAⱼᵀ (Aᵢ = (XᵢᵀXᵢ)⁻¹Xᵢᵀ,
Sᵢⱼ matching the cells both hold), σᵢⱼ estimated from the residuals' cross-products; the
slope's variance is the delta method's ∇ᵀ Σ ∇ over every pair of checkpoints.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy import stats

from isolab.table import as_float
from isolab.verdicts.quadratic import quadratic_vertex
from isolab.verdicts.result import ALPHA, StatResult, t_quantile
from isolab.vocab import ROLLOUTS, RUN_KEY, STEP

#: A vertex within this many doublings of the grid's smallest or largest n is at its edge.
EDGE_MARGIN = 0.5
#: Qualifying checkpoints needed to call a shift of the optimum.
MIN_CHECKPOINTS = 3
#: Checkpoints are compute values binned to a quarter of a doubling.
_BIN = 4


def checkpoint_means(
    df: pl.DataFrame, metrics: Sequence[str], by: Sequence[str] = ("n", "B_p")
) -> pl.DataFrame:
    """Seed means of `metrics` per configuration (`by`) and checkpoint, evaluations after
    step 0: columns `by`, `lc` (log2 C, binned to a quarter doubling), `C`, the metrics and
    `seeds` (runs averaged)."""
    keys = [c for c in by if c in df.columns]
    rows = df.filter((pl.col(STEP) > 0) & (pl.col(ROLLOUTS) > 0))
    for m in metrics:
        rows = rows.filter(pl.col(m).is_finite())
    rows = rows.with_columns(lc=((pl.col(ROLLOUTS).cast(pl.Float64).log(2) * _BIN).round() / _BIN))
    return (
        rows.group_by([*keys, "lc"])
        .agg(*(pl.col(m).mean() for m in metrics), pl.len().alias("seeds"))
        .with_columns(C=(2.0 ** pl.col("lc")))
        .sort("lc", *keys)
    )


@dataclass(frozen=True)
class CheckpointFits:
    """One OLS fit per checkpoint of a metric's cell means on the same terms, with what their
    joint covariance needs.

    Attributes:
        lc: log2 C of each checkpoint.
        keys: per checkpoint, the cells fitted (their configuration as a string).
        x: per checkpoint, log2 n of each cell (uncentred).
        coef: per checkpoint, the coefficients (intercept, x − centre, (x − centre)², covariates).
        A: per checkpoint, (XᵀX)⁻¹Xᵀ.
        resid: per checkpoint, the residuals.
        dof: per checkpoint, cells − parameters.
        centre: the log2 n every fit is centred on.
        terms: the model in words.
    """

    lc: list[float]
    keys: list[list[str]]
    x: list[np.ndarray]
    coef: list[np.ndarray]
    A: list[np.ndarray]
    resid: list[np.ndarray]
    dof: list[int]
    centre: float
    terms: str

    def cov(self, i: int, j: int) -> np.ndarray:
        """Covariance of the coefficients of checkpoints i and j: σᵢⱼ·AᵢSᵢⱼAⱼᵀ, σᵢⱼ the
        residuals' cross-product over the cells both hold, divided by their count less the
        parameters (the unbiased variance when i = j)."""
        p = len(self.coef[i])
        pos = {k: a for a, k in enumerate(self.keys[j])}
        common = [(a, pos[k]) for a, k in enumerate(self.keys[i]) if k in pos]
        if len(common) <= p:
            return np.zeros((p, p))
        ia = np.array([a for a, _ in common])
        ja = np.array([b for _, b in common])
        sigma = float(self.resid[i][ia] @ self.resid[j][ja]) / (len(common) - p)
        return sigma * self.A[i][:, ia] @ self.A[j][:, ja].T


def fit_checkpoints(
    means: pl.DataFrame, metric: str, power: int = 2, covariates: Sequence[str] = ("B_p",)
) -> CheckpointFits:
    """Per checkpoint of `means` (`checkpoint_means`), OLS of `metric` on 1, x, …, x^power
    (x = log2 n − centre) and log2 of each covariate that varies in `means`. Checkpoints with
    fewer than parameters + 2 cells are left out."""
    cov = [c for c in covariates if c in means.columns and means[c].n_unique() > 1]
    centre = float(np.log2(means["n"].to_numpy().astype(float)).mean()) if means.height else 0.0
    keys_cols = ["n", *[c for c in ("B_p",) if c in means.columns]]
    fits: dict[str, list] = {k: [] for k in ("lc", "keys", "x", "coef", "A", "resid", "dof")}
    for (lc,), g in means.group_by(["lc"], maintain_order=True):
        x = np.log2(g["n"].to_numpy().astype(float))
        cols = [(x - centre) ** k for k in range(power + 1)]
        cols += [np.log2(g[c].to_numpy().astype(float)) for c in cov]
        X = np.column_stack(cols)
        p = X.shape[1]
        if g.height < p + 2 or np.linalg.matrix_rank(X) < p or len(set(x)) < power + 1:
            continue
        A = np.linalg.solve(X.T @ X, X.T)
        y = g[metric].to_numpy().astype(float)
        b = A @ y
        fits["lc"].append(float(lc))
        fits["keys"].append(
            g.select(pl.concat_str([pl.col(c).cast(pl.String) for c in keys_cols], separator="|"))
            .to_series()
            .to_list()
        )
        fits["x"].append(x)
        fits["coef"].append(b)
        fits["A"].append(A)
        fits["resid"].append(y - X @ b)
        fits["dof"].append(g.height - p)
    terms = " + ".join(
        ["1", "log2 n", *(f"(log2 n)^{k}" for k in range(2, power + 1))]
        + [f"log2 {c}" for c in cov]
    )
    return CheckpointFits(**fits, centre=centre, terms=terms)


def _vertex(fits: CheckpointFits, i: int) -> tuple[float, np.ndarray]:
    """The vertex of checkpoint i's quadratic (log2 n, uncentred) and its gradient in the
    coefficients: v = centre − b₁ / (2b₂), ∇v = (0, −1/(2b₂), b₁/(2b₂²), 0…)."""
    b = fits.coef[i]
    v, (g1, g2) = quadratic_vertex(float(b[1]), float(b[2]), fits.centre)
    grad = np.zeros(len(b))
    grad[1], grad[2] = g1, g2
    return v, grad


def _fmt_c(c: float) -> str:
    return f"{c:,.0f}"


def pure_error(
    df: pl.DataFrame, metric: str, by: Sequence[str] = ("n", "B_p")
) -> dict[float, tuple[float, int, float]]:
    """Per checkpoint (log2 C): the variance of one run about its configuration's mean net of
    its seed's effect (residual of configuration + seed, where every configuration ran the same
    seeds; else the variance within configurations), its df, and the harmonic mean of the
    seeds per configuration. The noise of a seed mean is this over the seeds: the yardstick of
    the quadratic's lack of fit."""
    keys = [c for c in by if c in df.columns]
    rows = df.filter((pl.col(STEP) > 0) & (pl.col(ROLLOUTS) > 0) & pl.col(metric).is_finite())
    rows = rows.with_columns(
        lc=((pl.col(ROLLOUTS).cast(pl.Float64).log(2) * _BIN).round() / _BIN),
        cell=pl.concat_str([pl.col(c).cast(pl.String) for c in keys], separator="|"),
    )
    out = {}
    for (lc,), g in rows.group_by(["lc"]):
        cells = g["cell"].to_numpy()
        counts = g.group_by("cell").len()["len"].to_numpy()
        if not (counts > 1).any():
            continue
        cols = [(cells == c)[:, None] for c in np.unique(cells)]
        seeds = g["seed"].cast(pl.String).to_numpy() if "seed" in g.columns else None
        crossed = (
            seeds is not None
            and g.group_by("cell")
            .agg(pl.col("seed").sort().cast(pl.String).str.join(","))["seed"]
            .n_unique()
            == 1
        )
        if crossed and seeds is not None:
            cols += [(seeds == v)[:, None] for v in np.unique(seeds)[1:]]
        X = np.hstack(cols).astype(float)
        y = g[metric].to_numpy().astype(float)
        dof = len(y) - int(np.linalg.matrix_rank(X))
        if dof < 1:
            continue
        r = y - X @ np.linalg.lstsq(X, y, rcond=None)[0]
        out[float(lc)] = (float(r @ r) / dof, dof, float(len(counts) / np.sum(1.0 / counts)))
    return out


def vertex_table(
    fits: CheckpointFits, pure: dict[float, tuple[float, int, float]] | None = None
) -> pl.DataFrame:
    """Per checkpoint: the curvature (avg@4 per doubling of n, squared) with its t-test, the
    vertex log2 n* with a delta-method interval at 1 − α, n* = 2^vertex, and whether it
    qualifies or why not. It qualifies when the quadratic fits (with `pure`, `pure_error`: the
    cells' residual variance is not significantly above a seed mean's noise, F-test of lack of
    fit at α: a vertex of a curve the quadratic misses, e.g. a flat top and a cliff, is not a
    measured optimum), its curvature is negative at p < α, and its vertex lies at least
    `EDGE_MARGIN` doublings inside that checkpoint's n grid with its interval inside the grid.
    The interval's part matters for the slope across checkpoints: a noisy vertex near an edge
    that counted only when it fell inside would be truncated, biased inwards exactly where it
    is noisiest (the early checkpoints), and bend the slope."""
    rows = []
    for i, lc in enumerate(fits.lc):
        b, V, dof = fits.coef[i], fits.cov(i, i), fits.dof[i]
        se_d = math.sqrt(max(V[2, 2], 0.0))
        p_d = float(2 * stats.t.sf(abs(b[2] / se_d), dof)) if se_d > 0 else math.nan
        lo_x, hi_x = float(fits.x[i].min()), float(fits.x[i].max())
        v, grad = _vertex(fits, i)
        se_v = math.sqrt(max(float(grad @ V @ grad), 0.0))
        q = t_quantile(dof)
        C = 2.0**lc
        p_lof = math.nan
        if pure is not None and lc in pure:
            s2, df_pe, seeds = pure[lc]
            misfit = float(fits.resid[i] @ fits.resid[i]) / dof
            if s2 > 0:
                p_lof = float(stats.f.sf(misfit / (s2 / seeds), dof, df_pe))
        if p_lof < ALPHA:
            reason = (
                f"the quadratic in log2 n misfits at C = {_fmt_c(C)} (lack of fit p = {p_lof:.2g})"
            )
            ok = False
        elif not (b[2] < 0 and p_d < ALPHA):
            reason = (
                f"curvature not significantly negative at C = {_fmt_c(C)} ({b[2]:+.3g}, "
                f"p = {p_d:.2g})"
            )
            ok = False
        elif v < lo_x + EDGE_MARGIN or v - q * se_v < lo_x:
            reason = f"optimum at the grid's lower edge at C = {_fmt_c(C)} (n* ≈ 2^{v:.1f})"
            ok = False
        elif v > hi_x - EDGE_MARGIN or v + q * se_v > hi_x:
            reason = f"optimum at the grid's upper edge at C = {_fmt_c(C)} (n* ≈ 2^{v:.1f})"
            ok = False
        else:
            reason, ok = "", True
        rows.append({
            "C": C, "log2_C": lc, "cells": len(fits.keys[i]), "curvature": float(b[2]),
            "curvature_se": se_d, "curvature_p": p_d, "log2_n_star": float(v), "se": se_v,
            "lo": float(v - q * se_v), "hi": float(v + q * se_v),
            "n_star": float(2.0**v) if abs(v) < 60 else math.nan, "n_min": float(2.0**lo_x),
            "n_max": float(2.0**hi_x), "lack_of_fit_p": p_lof, "qualifies": ok,
            "reason": reason,
        })  # fmt: skip
    return pl.DataFrame(rows)


def _window(means: pl.DataFrame, from_C: float | None) -> tuple[pl.DataFrame, str]:
    """The checkpoints from `from_C` on, or the top half of log2 C when None."""
    lcs = means["lc"].unique().sort()
    if from_C is not None:
        start = math.log2(from_C)
        where = f"C ≥ {_fmt_c(from_C)} (a quarter of the saturation point)"
    else:
        start = (as_float(lcs.min()) + as_float(lcs.max())) / 2
        where = f"C ≥ {_fmt_c(2.0**start)} (the top half of log2 C)"
    return means.filter(pl.col("lc") >= start - 1e-9), where


def vertex_shift(
    df: pl.DataFrame,
    metric: str,
    from_C: float | None = None,
    min_checkpoints: int = MIN_CHECKPOINTS,
) -> tuple[StatResult, pl.DataFrame]:
    """Does the best n move with compute? Per checkpoint from `from_C` (None: the top half of
    log2 C) the vertex of a quadratic in log2 n (`vertex_table`); across the qualifying ones
    the least-squares slope of log2 n* on log2 C, its SE the larger of the delta method's
    (from the joint covariance of the checkpoints' fits) and a bootstrap of the runs within
    configurations (`_bootstrap_se`: the delta method linearises a ratio, and understates its
    spread where a curvature is only a few SEs from zero), with a t reference on the smallest
    residual df.
    Refused (with the checkpoints' reasons) when fewer than `min_checkpoints` qualify.
    Returns the result and the per-checkpoint table."""
    means = checkpoint_means(df, [metric])
    runs = df[RUN_KEY].n_unique() if RUN_KEY in df.columns else 0
    if not means.height or means["n"].n_unique() < 3:
        return StatResult.refused("needs ≥ 3 values of n after step 0", runs), pl.DataFrame()
    window, where = _window(means, from_C)
    fits = fit_checkpoints(window, metric)
    table = vertex_table(fits, pure_error(df, metric)) if fits.lc else pl.DataFrame()
    test = (
        f"per checkpoint ({where}), OLS of seed-mean {metric} per configuration on "
        f"{fits.terms}; vertex by the delta method; slope of log2 n* on log2 C over the "
        "checkpoints where the quadratic fits and has a significantly concave, interior "
        "optimum, covariance across checkpoints from the cells' residuals"
    )
    ok = [i for i, r in enumerate(table.iter_rows(named=True)) if r["qualifies"]] if fits.lc else []
    if len(ok) < min_checkpoints:
        reasons = [r["reason"] for r in table.iter_rows(named=True) if not r["qualifies"]]
        head = f"{len(ok)} of {len(fits.lc)} checkpoints ({where}) locate an interior optimum"
        return StatResult.refused(
            f"{head}, {min_checkpoints} needed: " + "; ".join(reasons), runs, test
        ), table
    lc = np.array([fits.lc[i] for i in ok])
    w = (lc - lc.mean()) / np.sum((lc - lc.mean()) ** 2)
    grads = [_vertex(fits, i)[1] for i in ok]
    verts = np.array([_vertex(fits, i)[0] for i in ok])
    var = 0.0
    for a, i in enumerate(ok):
        for b, j in enumerate(ok):
            var += w[a] * w[b] * float(grads[a] @ fits.cov(i, j) @ grads[b])
    dof = min(fits.dof[i] for i in ok)
    slope = float(w @ verts)
    se_delta = math.sqrt(max(var, 0.0))
    se_boot = _bootstrap_se(df, metric, fits, ok, w)
    se = max(se_delta, se_boot) if math.isfinite(se_boot) else se_delta
    return StatResult.from_t(
        slope,
        se,
        dof,
        n_runs=runs,
        test=f"{test}; SE the larger of the delta method's and a bootstrap of runs within "
        f"configurations ({len(ok)} checkpoints, {dof} df)",
        extra={
            "checkpoints": len(ok),
            "first_log2_n_star": float(verts[0]),
            "last_log2_n_star": float(verts[-1]),
            "se_delta": se_delta,
            "se_bootstrap": se_boot,
        },
    ), table


#: Resamples of the runs for the slope's bootstrap SE.
N_BOOT = 200


def _bootstrap_se(
    df: pl.DataFrame,
    metric: str,
    fits: CheckpointFits,
    ok: list[int],
    w: np.ndarray,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> float:
    """SE of the slope Σ wᵢ·vertexᵢ over the checkpoints `ok`, resampling each configuration's
    runs (whole trajectories, so that the checkpoints keep their correlation) and refitting
    every checkpoint on the resampled seed means; vertices clipped to their checkpoint's n grid
    (a resample whose curvature vanishes puts its vertex at an edge, not at infinity). The SD
    is scaled by √(S/(S − 1)): resampling S runs gives a mean (S − 1)/S of its variance. NaN
    when a configuration has a single run."""
    rows = df.filter((pl.col(STEP) > 0) & (pl.col(ROLLOUTS) > 0) & pl.col(metric).is_finite())
    keys = ["n", *[c for c in ("B_p",) if c in rows.columns]]
    rows = rows.with_columns(
        lc=((pl.col(ROLLOUTS).cast(pl.Float64).log(2) * _BIN).round() / _BIN),
        cell=pl.concat_str([pl.col(c).cast(pl.String) for c in keys], separator="|"),
    )
    lcs = [fits.lc[i] for i in ok]
    wide = (
        rows.filter(pl.col("lc").is_in(lcs))
        .pivot(on="lc", index=["cell", RUN_KEY], values=metric, aggregate_function="mean")
        .sort("cell", RUN_KEY)
    )
    cols = [c for c in wide.columns if c not in ("cell", RUN_KEY)]
    order = {float(c): c for c in cols}
    rng = np.random.default_rng(seed)
    means: dict[str, np.ndarray] = {}  # cell → n_boot × len(lcs)
    sizes = []
    for (cell,), g in wide.group_by(["cell"], maintain_order=True):
        values = g.select([order[lc] for lc in lcs]).to_numpy().astype(float)
        if values.shape[0] < 2:
            return math.nan
        sizes.append(values.shape[0])
        pick = rng.integers(0, values.shape[0], (n_boot, values.shape[0]))
        means[str(cell)] = values[pick].mean(axis=1)  # a cell absent at a checkpoint: NaN there
    slopes = np.zeros(n_boot)
    for a, i in enumerate(ok):
        Y = np.column_stack([means[k][:, a] for k in fits.keys[i]])
        B = Y @ fits.A[i].T
        with np.errstate(divide="ignore", invalid="ignore"):
            v = fits.centre - B[:, 1] / (2 * B[:, 2])
        v = np.where(B[:, 2] < 0, v, np.where(B[:, 1] > 0, np.inf, -np.inf))
        slopes += w[a] * np.clip(v, fits.x[i].min(), fits.x[i].max())
    S = float(np.mean(sizes))
    return float(np.std(slopes, ddof=1) * math.sqrt(S / (S - 1)))
