"""Does the best n move to a larger n as compute grows? A test whose shape does not matter: the
crossing of advantage curves (issue 45).

The Playbook's n* grows because a larger n starts behind (it takes fewer steps per rollout) and
ends ahead (it learns more per step). So the test reads exactly that: for a pair n_a < n_b the
advantage D_ab(C) = R(n_b, C) − R(n_a, C), the difference of seed means at a compute checkpoint
C, averaged over the B_p levels both n ran at (B_p a blocking factor: a level that moves every n
alike cancels). A checkpoint is the mean of two consecutive evaluation checkpoints (`POOL`; C
their geometric mean): it halves the evaluation noise's variance and the number of contrasts
in the family, and lifts the power on the calibration worlds (moves of ≥ 2 doublings) from 77%
to 83%. One-sided families ("behind" tested only in the early half of the checkpoints, "ahead"
only in the late half) added nothing on top of it, and would give each direction its own α.
No curve is fitted: the vertex test (`isolab.verdicts.vertex`) needs the reward at each C to be
a quadratic in log2 n, and where n* moves it is not (checkpoints are refused for lack of fit,
and a planted growth is found in fewer than half of the worlds).

The call. n* grows when, for some threshold m between two n of the grid and checkpoints
C₁ < C₂, (i) at C₁ some n_a ≤ m beats every n > m and (ii) at C₂ some n_b > m beats every
n ≤ m, each comparison significant: then n*(C₁) ≤ m < n*(C₂). n* falls in the mirror case (the
claim `disagrees`). Requiring the winner of each side to beat *every* n of the other side, not
one crossing pair, matters: two non-optimal arms can cross while the best n stays put (a slow
n far above the optimum overtakes a fast one far below it); a pair crossing says nothing about
the argmax, the threshold form does. An n that has not reached C (its first step is beyond it)
is not in the comparison at C: at that budget it is not a configuration one can run.

Significance: step-down max-|t|. Every D_ab(C) (all pairs × checkpoints) is a contrast of cell
means with its SE; the family's max |T| is referred to a multivariate t with the family's
correlation (Hothorn, Bretz & Westfall 2008): the contrasts of one checkpoint share cells, and
the checkpoints of one run share its training offset. The covariance of the cell means across
checkpoints is the within-cell covariance of the runs' trajectories (pooled over cells, its
median df the t's) over the seeds. Adjusted p-values step down (Westfall & Young 1993): the
largest |T| is referred to the max over the whole family, the next to the max over the family
without it, and so on, made monotone; early in training the fastest n beats the slowest by many
SEs, and those contrasts leave the family. Every rejected sign is then right at once with
probability ≥ 1 − α, so (i) and (ii) are right together: the false-call rate of "grows" is at
most α whatever the curves do. The p-value of the call is the smallest α at which some
threshold's two certificates both hold (each the largest adjusted p of its comparisons). The
single-step bands D̂ ± t*·SE (t* the max-|T| quantile) are reported beside them. Ties are not
wins: in a world where every n reaches the same plateau and a larger n is only slower, a larger
n is behind early and tied late, and a tie is no evidence of a larger n that is *better*, so it
is not called (the safe reading of "n* grows").

The estimate is the certified move log2(n_b / n_a) (signed: negative where n* falls), with the
crossing's compute located where that pair's advantage changes sign (linear in log2 C between
the checkpoints that bracket it) and bracketed by the last checkpoint where the pair's band lies
below 0 and the first where it lies above. Calibration (`benchmarks/nstar_calibration.py`,
docs/statistics.md): power on planted growth worlds of the `IsoComputeLaw` family and false
calls on pure-noise and structured nulls.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import polars as pl

from isolab.verdicts.bands import N_DRAWS, POOL, Bands, advantage_bands
from isolab.verdicts.result import StatResult
from isolab.vocab import RUN_KEY


def _certificates(bands: Bands) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per threshold m (between grid[j] and grid[j + 1]) and checkpoint k: the adjusted p-value
    at which the small side wins (min over n_a ≤ m of the max over n_b > m of the p of "n_a
    beats n_b") and the large side wins (min over n_b > m of the max over n_a ≤ m of the p of
    "n_b beats n_a"), with the winners (index into the grid; −1: none)."""
    grid, J, K = bands.n, len(bands.n) - 1, len(bands.lc)
    idx = {n: i for i, n in enumerate(grid)}
    kpos = {lc: k for k, lc in enumerate(bands.lc)}
    # p of "the larger n beats the smaller" (up) and of the reverse (down); NaN: not measured
    up = np.full((len(grid), len(grid), K), np.nan)
    down = np.full((len(grid), len(grid), K), np.nan)
    for r in bands.table.iter_rows(named=True):
        a, b, k = idx[r["n_a"]], idx[r["n_b"]], kpos[r["log2_C"]]
        up[a, b, k] = r["p_adj"] if r["t"] > 0 else 1.0
        down[a, b, k] = r["p_adj"] if r["t"] < 0 else 1.0
    small = np.ones((J, K))
    large = np.ones((J, K))
    small_who = np.full((J, K), -1)
    large_who = np.full((J, K), -1)
    for j in range(J):
        for k in range(K):
            for a in range(j + 1):
                row = down[a, j + 1 :, k]
                if np.isfinite(row).any() and np.nanmax(row) < small[j, k]:
                    small[j, k], small_who[j, k] = float(np.nanmax(row)), a
            for b in range(j + 1, len(grid)):
                col = up[: j + 1, b, k]
                if np.isfinite(col).any() and np.nanmax(col) < large[j, k]:
                    large[j, k], large_who[j, k] = float(np.nanmax(col)), b
    return small, large, small_who, large_who


def _best_crossing(first: np.ndarray, then: np.ndarray) -> tuple[float, int, int, int]:
    """min over thresholds j and checkpoints k1 < k2 of max(first[j, k1], then[j, k2]): the
    crossing's p-value and (j, k1, k2)."""
    best, at = 1.0, (-1, -1, -1)
    J, K = first.shape
    for j in range(J):
        for k1 in range(K - 1):
            for k2 in range(k1 + 1, K):
                v = max(first[j, k1], then[j, k2])
                if v < best or at[0] < 0:
                    best, at = v, (j, k1, k2)
    return float(best), *at


def _crossing_compute(bands: Bands, a: int, b: int, sign: int) -> tuple[float, float, float]:
    """Where D_ab changes sign (from −sign to +sign), linear in log2 C between the checkpoints
    that bracket its last change, and the bracket of its joint band: the last checkpoint where
    the band lies on the −sign side before the first where it lies on the +sign side."""
    t = bands.table.filter((pl.col("n_a") == a) & (pl.col("n_b") == b)).sort("log2_C")
    x, d = t["log2_C"].to_numpy(), sign * t["d"].to_numpy()
    lo, hi = sign * t["lo"].to_numpy(), sign * t["hi"].to_numpy()
    if sign < 0:
        lo, hi = hi, lo
    first_up = next((i for i in range(len(x)) if lo[i] > 0), None)
    last_down = max(
        (i for i in range(len(x)) if hi[i] < 0 and (first_up is None or i < first_up)), default=None
    )
    point = math.nan
    for i in range(len(x) - 1):
        if d[i] < 0 <= d[i + 1]:
            point = float(x[i] + (x[i + 1] - x[i]) * (-d[i]) / (d[i + 1] - d[i]))
    left = 2.0 ** x[last_down] if last_down is not None else math.nan
    right = 2.0 ** x[first_up] if first_up is not None else math.nan
    return (2.0**point if math.isfinite(point) else math.nan), left, right


def crossing_test(
    df: pl.DataFrame, metric: str, n_draws: int = N_DRAWS, seed: int = 0, pool: int = POOL
) -> tuple[StatResult, pl.DataFrame]:
    """Does n* grow with compute? The crossing test of the module's docstring on one split's
    runs: the estimate is the certified move of n* in doublings of n (log2 n_b − log2 n_a, > 0
    where it grows, < 0 where it falls), the p-value the smallest α at which the crossing is
    called (no interval: the move is certified as at least one step of the grid, not
    estimated). Returns the result and the bands table (every pair × checkpoint)."""
    runs = df[RUN_KEY].n_unique() if RUN_KEY in df.columns else 0
    test = (
        f"crossing of advantage curves: for pairs n_a < n_b, R(n_b) − R(n_a) of seed-mean {metric} "
        f"at each checkpoint (the mean of {pool} consecutive ones; averaged over the B_p both "
        "ran), signs by step-down max-|t| over "
        "every pair × checkpoint (multivariate t, the runs' within-cell covariance across "
        "checkpoints); n* grows when some n_a ≤ m beats every n > m at C₁ and some n_b > m "
        "beats every n ≤ m at a later C₂"
    )
    bands = advantage_bands(df, metric, n_draws, seed, pool)
    if bands is None:
        return StatResult.refused(
            "needs ≥ 2 values of n, ≥ 2 checkpoints and seed replicates", runs, test
        ), pl.DataFrame()
    small, large, small_who, large_who = _certificates(bands)
    grow = _best_crossing(small, large)
    fall = _best_crossing(large, small)
    p_of = {1: grow[0], -1: fall[0]}
    sign = 1 if grow[0] <= fall[0] else -1
    p, j, k1, k2 = grow if sign > 0 else fall
    if j < 0:
        return StatResult.refused(
            "no threshold with both sides measured at two checkpoints", runs, test
        ), bands.table
    early = small_who if sign > 0 else large_who
    late = large_who if sign > 0 else small_who
    if early[j, k1] < 0 or late[j, k2] < 0:  # no side leads the other anywhere: no candidate
        note = (
            "no candidate crossing: at no checkpoint does an n on one side of a threshold lead "
            "every n on the other with step-down p < 1"
        )
        return StatResult(
            estimate=0.0,
            se=math.nan,
            df=float(bands.dof),
            p_value=1.0,
            interval=None,
            mde=math.nan,
            n_runs=runs,
            test=test,
            note=note,
            extra={"t_crit": bands.t_crit, "p_grows": p_of[1], "p_falls": p_of[-1]},
        ), bands.table
    a, b = bands.n[early[j, k1]], bands.n[late[j, k2]]
    lo_n, hi_n = min(a, b), max(a, b)
    C1, C2 = 2.0 ** bands.lc[k1], 2.0 ** bands.lc[k2]
    cross, left, right = _crossing_compute(bands, lo_n, hi_n, sign)
    p = max(p, 1.0 / (len(bands.max_t) + 1))
    m = bands.n[j]
    side = (f"n ≤ {m}", f"n > {m}") if sign > 0 else (f"n > {m}", f"n ≤ {m}")
    bracket = (
        f" (joint bracket [{left:,.0f}, {right:,.0f}])"
        if math.isfinite(left) and math.isfinite(right)
        else ""
    )
    note = (
        f"strongest candidate crossing (n* {'grows' if sign > 0 else 'falls'}): at C = {C1:,.0f} n = {a} "
        f"({side[0]}) beats every {side[1]}; at C = {C2:,.0f} n = {b} ({side[1]}) beats every "
        f"{side[0]} (step-down max-|t| p = {p:.2g}; single-step joint critical t = "
        f"{bands.t_crit:.2f}); n = "
        f"{hi_n if sign > 0 else lo_n} overtakes n = {lo_n if sign > 0 else hi_n} near C ≈ "
        f"{cross:,.0f}{bracket}"
    )
    return StatResult(
        estimate=float(sign * math.log2(hi_n / lo_n)),
        se=math.nan,
        df=float(bands.dof),
        p_value=p,
        interval=None,
        mde=math.nan,
        n_runs=runs,
        test=f"{test} ({len(bands.n)} n, {len(bands.lc)} checkpoints, {bands.table.height} "
        f"contrasts, {bands.dof} df)",
        note=note,
        extra={
            "n_from": a,
            "n_to": b,
            "C_from": C1,
            "C_to": C2,
            "C_cross": cross,
            "C_cross_lo": left,
            "C_cross_hi": right,
            "t_crit": bands.t_crit,
            "p_grows": p_of[1],
            "p_falls": p_of[-1],
        },
    ), bands.table


def crossing_summary(result: StatResult) -> str:
    """The crossing test as a sentence (a secondary reading where the claim is untested)."""
    if not result.ran:
        return f"crossing test: {result.note}"
    return f"crossing test: p = {result.p_value:.2g}; {result.note}"


__all__: Sequence[str] = ("Bands", "advantage_bands", "crossing_summary", "crossing_test")
