"""Advantage curves with joint bands: for each pair n_a < n_b of a grid the advantage
D_ab(C) = R(n_b, C) − R(n_a, C) at each compute checkpoint, its SE from the runs' trajectories,
and step-down max-|t| adjusted p-values over the whole family (all pairs × checkpoints). The
crossing test of "n* grows" (`isolab.verdicts.crossing`, whose docstring gives the derivation)
certifies winners from them; the bestk-worstk mechanism reads them at equal avg@4.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from isolab.verdicts.result import ALPHA
from isolab.vocab import ROLLOUTS, RUN_KEY, STEP

#: Draws of the max-|t| reference distribution (its 1 − α quantile to about ±0.03).
N_DRAWS = 4000
#: Checkpoints are compute values binned to a quarter of a doubling (as `isolab.verdicts.vertex`).
_BIN = 4
#: Consecutive checkpoints averaged into one (from the first): halves the evaluation noise's
#: variance and the family's size (docs/statistics.md: power on moves of ≥ 2 doublings 77% → 83%).
POOL = 2


@dataclass(frozen=True)
class Bands:
    """Every pairwise advantage D_ab(C), with its joint band and step-down adjusted p-value.

    Attributes:
        table: per pair × (pooled) checkpoint: `n_a`, `n_b`, `log2_C`, `C` (the geometric mean
            of the pooled checkpoints), `d` (R(n_b) − R(n_a)), `se`,
            `t`, `lo`, `hi` (the single-step joint 1 − α band), `p_adj` (step-down max-|t|),
            `B_p` (levels averaged).
        t_crit: the band's half-width per SE (the max-|t| quantile).
        max_t: draws of max |T| under no effect (for p-values).
        dof: df of the pooled within-cell covariance.
        n: the grid of n, ascending.
        lc: the (pooled) checkpoints (log2 C), ascending.
    """

    table: pl.DataFrame
    t_crit: float
    max_t: np.ndarray
    dof: int
    n: list[int]
    lc: list[float]


def _trajectories(
    df: pl.DataFrame, metric: str, pool: int = POOL
) -> tuple[pl.DataFrame, np.ndarray, np.ndarray]:
    """Runs × checkpoints: the runs' (n, B_p) and the metric per checkpoint (NaN where a run has
    no evaluation), after step 0; each checkpoint the mean of `pool` consecutive ones (from the
    first; NaN where a run lacks one of them), at their mean log2 C."""
    rows = df.filter((pl.col(STEP) > 0) & (pl.col(ROLLOUTS) > 0) & pl.col(metric).is_finite())
    rows = rows.with_columns(lc=((pl.col(ROLLOUTS).cast(pl.Float64).log(2) * _BIN).round() / _BIN))
    if "B_p" not in rows.columns:
        rows = rows.with_columns(B_p=pl.lit(0))
    wide = rows.pivot(
        on="lc", index=[RUN_KEY, "n", "B_p"], values=metric, aggregate_function="mean"
    )
    cols = sorted((c for c in wide.columns if c not in (RUN_KEY, "n", "B_p")), key=float)
    y = wide.select(cols).to_numpy().astype(float) if cols else np.zeros((wide.height, 0))
    lc = np.array([float(c) for c in cols])
    groups = [np.arange(i, min(i + pool, len(lc))) for i in range(0, len(lc), max(pool, 1))]
    if pool > 1 and groups:
        lc = np.array([lc[g].mean() for g in groups])
        y = np.stack([y[:, g].mean(axis=1) for g in groups], axis=1)
    return wide.select("n", "B_p"), lc, y


def _cell_moments(
    cells: np.ndarray, y: np.ndarray
) -> tuple[np.ndarray, list[np.ndarray], np.ndarray, int]:
    """Per cell: the mean trajectory, and the covariance of that mean across checkpoints
    (Σ ⊙ N_both / (S Sᵀ), Σ the pooled within-cell covariance of one run); the pooled Σ, df."""
    K = y.shape[1]
    ok = np.isfinite(y)
    ids = np.unique(cells)
    means = np.full((len(ids), K), np.nan)
    num, den = np.zeros((K, K)), np.zeros((K, K))
    both_of = []
    for i, c in enumerate(ids):
        rows = cells == c
        o = ok[rows].astype(float)
        v = np.where(ok[rows], y[rows], 0.0)
        cnt = o.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            means[i] = np.where(cnt > 0, v.sum(axis=0) / cnt, np.nan)
        r = np.where(ok[rows], y[rows] - np.nan_to_num(means[i]), 0.0)
        both = o.T @ o
        num += r.T @ r
        den += np.maximum(both - 1.0, 0.0)
        both_of.append((both, cnt))
    with np.errstate(invalid="ignore", divide="ignore"):
        sigma = np.where(den > 0, num / den, 0.0)
    # a covariance estimated pairwise need not be positive semi-definite: clip its eigenvalues
    w, V = np.linalg.eigh((sigma + sigma.T) / 2)
    sigma = (V * np.maximum(w, 0.0)) @ V.T
    covs = []
    for both, cnt in both_of:
        with np.errstate(invalid="ignore", divide="ignore"):
            covs.append(np.where(both > 0, sigma * both / np.outer(cnt, cnt), 0.0))
    # one df for the family's max-|t| reference: the median over checkpoints of the pooled
    # variance's df (early checkpoints, which the largest batches have not reached, have fewer)
    diag = np.diag(den)
    dof = int(np.median(diag[diag > 0])) if (diag > 0).any() else 0
    return means, covs, ids, dof


def advantage_bands(
    df: pl.DataFrame, metric: str, n_draws: int = N_DRAWS, seed: int = 0, pool: int = POOL
) -> Bands | None:
    """Every pairwise advantage D_ab(C) with its SE and its joint 1 − α band (see the module's
    docstring), on checkpoints pooled `pool` at a time; None when fewer than 2 values of n, 2
    (pooled) checkpoints or 1 df."""
    configs, lc, y = _trajectories(df, metric, pool)
    if configs.height == 0 or configs["n"].n_unique() < 2 or len(lc) < 2:
        return None
    cells = (
        configs.select(
            pl.concat_str(
                [pl.col("n").cast(pl.String), pl.col("B_p").cast(pl.String)], separator="|"
            )
        )
        .to_series()
        .to_numpy()
    )
    means, covs, ids, dof = _cell_moments(cells, y)
    if dof < 1:
        return None
    cell_n = np.array([int(c.split("|")[0]) for c in ids])
    cell_bp = np.array([c.split("|")[1] for c in ids])
    grid = sorted(set(cell_n.tolist()))
    rows, weights, ks = [], [], []
    for ia, a in enumerate(grid):
        for b in grid[ia + 1 :]:
            for k in range(len(lc)):
                common = [
                    bp
                    for bp in np.unique(cell_bp)
                    if ((cell_n == a) & (cell_bp == bp)).any()
                    and ((cell_n == b) & (cell_bp == bp)).any()
                    and np.isfinite(means[(cell_n == a) & (cell_bp == bp), k]).all()
                    and np.isfinite(means[(cell_n == b) & (cell_bp == bp), k]).all()
                ]
                if not common:
                    continue
                w = np.zeros(len(ids))
                for bp in common:
                    w[(cell_n == b) & (cell_bp == bp)] += 1 / len(common)
                    w[(cell_n == a) & (cell_bp == bp)] -= 1 / len(common)
                rows.append(
                    {
                        "n_a": a,
                        "n_b": b,
                        "log2_C": float(lc[k]),
                        "d": float(w @ np.nan_to_num(means[:, k])),
                        "B_p": ",".join(common),
                    }
                )
                weights.append(w)
                ks.append(k)
    if not rows:
        return None
    W = np.array(weights)
    kk = np.array(ks)
    cov = np.zeros((len(rows), len(rows)))
    for c in range(len(ids)):
        wc = W[:, c]
        on = wc != 0
        if on.any():
            cov[np.ix_(on, on)] += np.outer(wc[on], wc[on]) * covs[c][np.ix_(kk[on], kk[on])]
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    good = se > 0
    corr = cov[np.ix_(good, good)] / np.outer(se[good], se[good])
    w_eig, V = np.linalg.eigh(corr)
    L = V * np.sqrt(np.maximum(w_eig, 0.0))
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n_draws, L.shape[1])) @ L.T
    z /= np.sqrt(rng.chisquare(dof, (n_draws, 1)) / dof)
    max_t = np.sort(np.abs(z).max(axis=1))
    t_crit = float(np.quantile(max_t, 1 - ALPHA))
    d = np.array([r["d"] for r in rows])
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(good, d / np.where(good, se, 1.0), 0.0)
    table = pl.DataFrame(rows).with_columns(
        C=2.0 ** pl.col("log2_C"),
        se=pl.Series(se),
        t=pl.Series(t),
        lo=pl.Series(d - t_crit * se),
        hi=pl.Series(d + t_crit * se),
        p_adj=pl.Series(_masked(step_down(np.abs(t[good]), np.abs(z)), good)),
    )
    return Bands(table, t_crit, max_t, dof, grid, [float(x) for x in lc])


def _masked(values: np.ndarray, good: np.ndarray) -> np.ndarray:
    """`values` at the rows of `good`, 1 (no evidence) elsewhere."""
    out = np.ones(len(good))
    out[good] = values
    return out


def step_down(abs_t: np.ndarray, abs_z: np.ndarray) -> np.ndarray:
    """Westfall & Young's step-down max-|t| adjusted p-values (1993): the i-th largest |t| is
    referred to the max of |Z| (`abs_z`: draws × contrasts) over the contrasts not larger than it
    (those already rejected leave the family), made monotone. Every rejected sign is right at
    once with probability ≥ 1 − α (the single-step bands' guarantee, with more power where large
    differences leave the family: early in training the fastest n beats the slowest by many
    SEs). Shared by the crossing test and the fixed-batch advantage bands
    (`isolab.study.n_vs_bp.fixed_batch`)."""
    order = np.argsort(-abs_t)
    tail_max = np.maximum.accumulate(abs_z[:, order][:, ::-1], axis=1)[:, ::-1]
    raw = (tail_max >= abs_t[order][None, :]).mean(axis=0)
    out = np.empty(len(abs_t))
    out[order] = np.maximum.accumulate(raw)
    return out
