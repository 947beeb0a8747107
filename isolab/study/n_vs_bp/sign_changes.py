"""Where the larger n's advantage at a fixed batch changes sign across compute (issue 46): the
Playbook's "the best n is non-monotone in M" (Hard). The advantage per B stratum and seed comes
from `isolab.study.n_vs_bp.fixed_batch.fixed_b_slopes`; its mean over strata at each checkpoint
gets joint bands (step-down max-|t|, `isolab.verdicts.bands.step_down`), and each sign change is
located with its interval. A curvature of the advantage is not enough: a concave decline that
never crosses zero leaves the same member best at every M (ties, then the smaller n).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import combinations

import numpy as np
import polars as pl

from isolab.study.n_vs_bp.fixed_batch import fixed_b_slopes
from isolab.verdicts.bands import step_down
from isolab.verdicts.result import ALPHA, StatResult

#: Draws of the max-|t| reference distribution of `advantage_band`.
N_DRAWS = 4000


@dataclass(frozen=True)
class AdvantageBand:
    """The larger n's advantage at a fixed batch per checkpoint, averaged over the B strata
    there, with its joint band (`advantage_band`).

    Attributes:
        lc: the checkpoints (log2 C), ascending.
        a: the mean advantage (avg@4 per doubling of n).
        se: its SE.
        p_adj: step-down max-|t| adjusted p-value of "no advantage" per checkpoint.
        t_crit: the single-step joint band's half-width per SE.
        dof: df of the pooled within-stratum covariance.
    """

    lc: np.ndarray
    a: np.ndarray
    se: np.ndarray
    p_adj: np.ndarray
    t_crit: float
    dof: int


def _pooled_within(
    Y: np.ndarray, strata: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per stratum its mean trajectory (NaN where absent) and units per checkpoint pair; the
    covariance across checkpoints of one unit, pooled within strata over the units present at
    both checkpoints (eigenvalues clipped at 0), and its df per checkpoint pair."""
    ok = np.isfinite(Y)
    labels = np.unique(strata)
    K = Y.shape[1]
    means = np.full((len(labels), K), np.nan)
    both = np.zeros((len(labels), K, K))
    num, den = np.zeros((K, K)), np.zeros((K, K))
    for h, label in enumerate(labels):
        o = ok[strata == label].astype(float)
        v = np.where(ok[strata == label], Y[strata == label], 0.0)
        cnt = o.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            means[h] = np.where(cnt > 0, v.sum(axis=0) / cnt, np.nan)
        r = np.where(o > 0, v - np.nan_to_num(means[h]), 0.0)
        both[h] = o.T @ o
        num += r.T @ r
        den += np.maximum(both[h] - 1.0, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        sigma = np.where(den > 0, num / den, 0.0)
    w, V = np.linalg.eigh((sigma + sigma.T) / 2)
    return means, both, (V * np.maximum(w, 0.0)) @ V.T, den


def advantage_band(
    df: pl.DataFrame, metric: str, n_draws: int = N_DRAWS, seed: int = 0
) -> AdvantageBand | None:
    """The larger n's advantage per checkpoint (the mean over the B strata present there of
    each stratum's mean slope in log2 n over its units, `_fixed_b_slopes`), its covariance
    across checkpoints (the units' covariance pooled within strata), and step-down max-|t|
    adjusted p-values over the checkpoints (multivariate t with that correlation, Westfall &
    Young's step-down as in `isolab.verdicts.crossing`): every rejected sign is right at once
    with probability ≥ 1 − α. None without two checkpoints and one df."""
    slopes, _, _ = fixed_b_slopes(df, metric)
    if not slopes.height:
        return None
    wide = slopes.pivot(on="lc", index=["B", "seed"], values="slope")
    cols = sorted((c for c in wide.columns if c not in ("B", "seed")), key=float)
    Y = wide.select(cols).to_numpy().astype(float)
    lc = np.array([float(c) for c in cols])
    means, both, sigma, den = _pooled_within(Y, wide["B"].to_numpy())
    present = np.isfinite(means)
    H = present.sum(axis=0)
    dof = int(np.median(np.diag(den)[np.diag(den) > 0])) if (np.diag(den) > 0).any() else 0
    if len(lc) < 2 or dof < 1 or (H == 0).any():
        return None
    Wt = present / H  # each stratum's weight at each checkpoint
    cov = np.zeros((len(lc), len(lc)))
    for h in range(means.shape[0]):
        cnt = np.diag(both[h])
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(both[h] > 0, both[h] / np.outer(cnt, cnt), 0.0)
        cov += np.outer(Wt[h], Wt[h]) * sigma * share
    a = np.nansum(Wt * np.nan_to_num(means), axis=0)
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    if not (se > 0).all():
        return None
    corr = cov / np.outer(se, se)
    w, V = np.linalg.eigh(corr)
    L = V * np.sqrt(np.maximum(w, 0.0))
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n_draws, len(lc))) @ L.T
    z /= np.sqrt(rng.chisquare(dof, (n_draws, 1)) / dof)
    abs_z = np.abs(z)
    t_crit = float(np.quantile(abs_z.max(axis=1), 1 - ALPHA))
    p_adj = step_down(np.abs(a / se), abs_z)
    return AdvantageBand(lc, a, se, np.maximum(p_adj, 1 / (n_draws + 1)), t_crit, dof)


def _alternations(band: AdvantageBand, changes: int) -> tuple[float, tuple[int, ...]]:
    """The smallest α at which `changes` sign changes are established: the min over checkpoints
    i₀ < … < i_changes whose advantages alternate in sign of the largest adjusted p among them;
    and those checkpoints (empty where no such sequence exists)."""
    sign = np.sign(band.a)
    best: tuple[float, tuple[int, ...]] = (1.0, ())
    for seq in combinations(range(len(band.lc)), changes + 1):
        signs = sign[list(seq)]
        if (signs == 0).any() or (signs[1:] == signs[:-1]).any():
            continue
        p = float(band.p_adj[list(seq)].max())
        if not best[1] or p < best[0]:
            best = (p, seq)
    return best


def _locate(band: AdvantageBand, i: int, j: int) -> str:
    """Where the advantage changes sign between checkpoints i < j: linear in log2 C between the
    two checkpoints that bracket its last change of sign in [i, j], and the interval between the
    last checkpoint before it whose band lies on the first side and the first after it whose
    band lies on the other."""
    a, lc, side = band.a, band.lc, np.sign(band.a[i])
    point = math.nan
    for k in range(i, j):
        if a[k] * side > 0 >= a[k + 1] * side:
            point = float(lc[k] + (lc[k + 1] - lc[k]) * a[k] / (a[k] - a[k + 1]))
    sig = band.p_adj < ALPHA
    left = max(
        (k for k in range(i, j + 1) if sig[k] and a[k] * side > 0 and lc[k] <= point), default=i
    )
    right = min(
        (k for k in range(i, j + 1) if sig[k] and a[k] * side < 0 and lc[k] >= point), default=j
    )
    at = f"C ≈ {2**point:,.0f}" if math.isfinite(point) else "no crossing of the mean"
    return (
        f"{'+ → −' if side > 0 else '− → +'} near {at} (between C = {2 ** lc[left]:,.0f} and "
        f"{2 ** lc[right]:,.0f})"
    )


def sign_changes(
    df: pl.DataFrame, metric: str, n_draws: int = N_DRAWS, seed: int = 0
) -> StatResult:
    """Is the best n at a fixed batch non-monotone in M? With two members per B stratum, the
    best is the larger n where its advantage (`advantage_band`) is positive and the smaller
    where it is negative, so the best n is non-monotone in M exactly when the advantage changes
    sign twice, in opposite directions (− + − or + − +). Each change is established by the
    step-down signs of the checkpoints on either side (every sign right at once with
    probability ≥ 1 − α) and located between them. The p-value: the smallest α at which
    checkpoints i < j < k with alternating signs are all significant. Estimate: the advantage at
    the middle checkpoint j (> 0: the larger n best in the middle of the range). Refused
    (untested) where no sign change is located, and (one change: the best n switches once,
    monotone over these checkpoints) where a second is not."""
    slopes, runs, batches = fixed_b_slopes(df, metric)
    test = (
        f"fixed-B strata ({', '.join(str(b) for b in batches)}): the larger n's advantage "
        f"(slope of {metric} in log2 n between a stratum's members, mean over its seeds, then "
        "over the strata) per checkpoint; signs by step-down max-|t| over the checkpoints "
        "(multivariate t, the units' covariance pooled within strata); non-monotone: two "
        "sign changes, each located"
    )
    band = advantage_band(df, metric, n_draws, seed)
    if band is None:
        return StatResult.refused(
            "needs two B strata over ≥ 2 checkpoints with seed replicates", runs, test
        )
    test = f"{test} ({len(band.lc)} checkpoints, {band.dof} df)"
    path = ", ".join(f"{a:+.4f} at C = {2**x:,.0f}" for x, a in zip(band.lc, band.a, strict=True))
    extra = {
        "advantage": band.a.tolist(),
        "log2_C": band.lc.tolist(),
        "p_adj": band.p_adj.tolist(),
        "t_crit": band.t_crit,
    }
    p1, one = _alternations(band, 1)
    p2, two = _alternations(band, 2)
    extra |= {"p_one_change": p1, "p_two_changes": p2}
    where = f"the larger n's advantage per doubling of n at fixed B (mean over strata): {path}"
    if not one or p1 >= ALPHA:
        cand = f"; strongest candidate {_locate(band, *one)}, p = {p1:.2g}" if one else ""
        reason = (
            "untested: no sign change of the larger n's advantage is located at α (step-down "
            f"max-|t| over the checkpoints){cand}: the same member of each fixed-B pair is "
            f"best, or tied, at every M, so the best n is monotone in M here; {where}"
        )
        return replace(StatResult.refused(reason, runs, test), extra=extra)
    if not two or p2 >= ALPHA:
        cand = f" (candidate second change p = {p2:.2g})" if two else ""
        reason = (
            f"one sign change located: {_locate(band, *one)}, p = {p1:.2g}; the best n at "
            f"fixed B switches once, monotone in M over these checkpoints; a second, opposite "
            f"change is not located{cand}; {where}"
        )
        return replace(StatResult.refused(reason, runs, test), extra=extra)
    i, j, k = two
    return StatResult(
        estimate=float(band.a[j]),
        se=float(band.se[j]),
        df=float(band.dof),
        p_value=p2,
        interval=None,
        mde=math.nan,
        n_runs=runs,
        test=test,
        note=f"two sign changes located: {_locate(band, i, j)}, then {_locate(band, j, k)} "
        f"(p = {p2:.2g}); {where}",
        extra=extra,
    )
