"""best@k and worst@k as mechanisms of n: does a larger n sharpen (Easy: worst@4 up) or cover
(Hard: best@4 up)?

The test (`matched_mechanism`, issue 46): the metric per doubling of n at equal avg@4 — OLS of
every checkpoint's best@4 or worst@4 after step 0 on log2 n, a spline in log2 avg@4 and the
design levels, errors clustered by run (`isolab.verdicts.matched.factor_effect` with avg@4 as
the axis). Comparing at equal reward takes out what n does to the reward itself, whose sign
depends on which side of the optimum n* the grid lies. The regression, not each run's metric
interpolated at common avg@4 levels (`matched.at_equal_level`, issue 45's reading): worst@4 is
convex in avg@4, and a chord between checkpoints overstates it the more, the farther apart
in avg@4 they lie, which differs by n (+0.001 worst@4 per doubling of n in noiseless
one-mapping worlds on the planned design; the spline: 0). A run's luck is not on the mapping
either (on the committed runs the seed SD of worst@4 is half of what the mapping carries from
avg@4's), so runs compared at equal avg@4 differ by how much luck each n needed to get there:
the regression still reads +0.0011 worst@4 per doubling of n where n acts on avg@4 alone
(planned design), +0.0003 on the committed one. The estimate is therefore shrunk towards 0 by
that bias (`LEVEL_BIAS`) before it is tested: a call must clear it. It is tested only where some
n of the grid lies below the optimum: where, at some checkpoint, a larger n beats a smaller one
at α (`isolab.verdicts.crossing.advantage_bands`: step-down max-|t| over every pair ×
checkpoint). Where none does, every n tested is past the optimum (a larger n never lifts avg@4),
and "a larger n lifts worst@k (best@k)" is untested: the Playbook's larger n is one that still
gains. κ (`mechanism_ratio`, below) is a secondary reading.

κ, the test before issue 46, measures the metric's movement per unit of avg@4 that n causes:
where a larger n lowers avg@4 (past the optimum) its sign flips, which is why it is no longer
the call. Why ratios, and why against a mapping. The test before κ (worst@4 − best@4 per
doubling of n) re-tests the direction of n's effect on avg@4: past n* every metric falls with n. A ratio
Δworst/Δavg along n does not depend on that sign. But it is not zero where n has no mechanism of
its own: best@4 and worst@4 are functions of the per-problem success rates, and any change that
raises avg@4 — more compute, a luckier seed — moves them along some mapping (on the committed
Easy runs, 1.4 units of worst@4 per unit of avg@4 along compute, while best@4 falls). The
structured null is "n acts on avg@4 alone, best@4 and worst@4 follow it through the same
mapping as compute"; the estimand is the departure from that mapping along n:

    κ = ⟨r, P A⟩ / ⟨A, P A⟩,   r = W − F̂(A)

with A, W the seed means of avg@4 and of the metric per configuration × checkpoint, F̂ the
mapping along compute (a cubic through the checkpoint means of every checkpoint after step 0 —
the average configuration's path, which spans a far wider range of avg@4 than n does at one
checkpoint — each mean corrected for Jensen's term F''·var/2 of the spread across
configurations), and P the projection on n's pattern at each checkpoint of the window (log2 n
and (log2 n)² per checkpoint, net of the checkpoint's mean and of log2 B_p). κ is how much more
W moves per unit of avg@4 along n than the mapping predicts at the same avg@4 — the mapping's
own curvature taken out, which a comparison of two slopes would leave in (they span different
ranges of avg@4). The n pattern of seed means also holds some of the runs' noise, which moves W
and A in its own ratio (a lucky seed's best@4 against its avg@4); its expected part is taken
out of numerator and denominator (`_kappa`). κ is defined only where n moves avg@4 clearly (the
F-test of log2 n and (log2 n)² on each configuration's avg@4 over the window: p < α and
F ≥ `MIN_F`); otherwise the test refuses. A mechanism shared by every n in the grid is, by this
definition, compute's: the mapping is the average configuration's path.

Inference: the runs of each configuration are resampled (its seeds, whole trajectories) and
everything refitted; the bootstrap SE is scaled by √(S/(S − 1)) (the bootstrap's variance of a
mean of S draws is (S − 1)/S of the unbiased one), with a t reference on the configurations in
the window less one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
import polars as pl
from scipy import stats

from isolab.table import as_float
from isolab.verdicts.bands import advantage_bands
from isolab.verdicts.matched import factor_effect
from isolab.verdicts.result import ALPHA, StatResult
from isolab.vocab import EVAL_AVG, EVAL_BEST, EVAL_PREFIX, EVAL_WORST, ROLLOUTS, RUN_KEY, STEP

#: The test's own bias per metric where n acts on avg@4 alone (the one-mapping null,
#: `isolab.verdicts.calibration`): the largest |mean estimate| over 100 worlds on the planned and
#: the committed nstar designs (worst@4 on Easy +0.0011 planned, +0.0003 committed; best@4 on
#: Hard +0.0002, −0.0004), in the metric per doubling of n at equal avg@4.
LEVEL_BIAS = {EVAL_WORST: 0.0011, EVAL_BEST: 0.0004}
#: Bootstrap resamples of the runs.
N_BOOT = 200
#: Degree of the mapping F̂ (metric against avg@4).
DEGREE = 3
#: The smallest F of n's terms on avg@4 for a ratio along n: below it the ratio is pulled
#: towards the ratio of the runs' own noise (a weak instrument; F ≥ 10 is Staiger & Stock's
#: 1997 rule of thumb for a first stage).
MIN_F = 10.0


def _dummies(codes: np.ndarray) -> np.ndarray:
    levels = np.unique(codes)
    return (codes[:, None] == levels[None, :]).astype(float)


def _n_projection(lc: np.ndarray, x: np.ndarray, z: np.ndarray | None) -> np.ndarray:
    """P: the projection onto log2 n and (log2 n)² per checkpoint, net of the checkpoint means
    and log2 B_p."""
    D_c = _dummies(lc)
    xc = x - x.mean()
    nuisance = D_c if z is None else np.column_stack([D_c, z])
    terms = np.column_stack([D_c * xc[:, None], D_c * (xc**2)[:, None]])
    T = (np.eye(len(x)) - nuisance @ np.linalg.pinv(nuisance)) @ terms
    return T @ np.linalg.pinv(T)


@dataclass(frozen=True)
class _Layout:
    """Where the window's cells sit: P over them (configuration by configuration), the
    configurations in the window with the positions of the window's checkpoints in each, the
    checkpoint of every cell of every configuration, and the window's cells among them."""

    P: np.ndarray
    groups: list[int]
    pos: list[np.ndarray]
    lc: np.ndarray
    idx: np.ndarray
    noise_weights: np.ndarray  # Σ_j P_jj / S_j over the window's configurations


class _Config(NamedTuple):
    """One configuration's runs, each sharing the same checkpoints."""

    A: np.ndarray  #: avg@4, runs × checkpoints
    W: np.ndarray  #: the metric under test, runs × checkpoints
    lc: np.ndarray  #: the checkpoints, log2 C rounded to a quarter
    row: dict  #: the configuration's first row (its `n`, `B_p`)


def _mapping(A: np.ndarray, W: np.ndarray, lc: np.ndarray) -> np.ndarray:
    """The mapping W = F̂(A) (polynomial coefficients, highest first) through the checkpoint
    means, each corrected for the spread of avg@4 across configurations at its checkpoint: the
    mean of F over a spread is F(mean) + F''·var/2 (Jensen), which would otherwise bend F̂ as
    that spread grows with compute (two passes)."""
    levels = np.unique(lc)
    ka = np.array([A[lc == v].mean() for v in levels])
    kw = np.array([W[lc == v].mean() for v in levels])
    var = np.array([A[lc == v].var() for v in levels])
    degree = min(DEGREE, len(levels) - 2)
    beta = np.polyfit(ka, kw, degree)
    for _ in range(2):
        beta = np.polyfit(ka, kw - 0.5 * np.polyval(np.polyder(beta, 2), ka) * var, degree)
    return beta


def _kappa(
    lay: _Layout, runs_A: list[np.ndarray], runs_W: list[np.ndarray]
) -> tuple[float, float, float]:
    """(κ, the mapping's slope at the window's mean avg@4, W's ratio along n) from each
    configuration's runs × checkpoints. The n pattern of the seed means holds some of the runs'
    noise, and that noise moves W and A in its own ratio (a lucky seed's best@4 against its
    avg@4), which would pull κ towards it; numerator and denominator are corrected by their
    expected noise parts, Σ_j tr(P_jj Σ)/S_j with Σ the within-configuration covariance of the
    runs (of r and A, of A and A) across the window's checkpoints, pooled over configurations."""
    A = np.concatenate([a.mean(axis=0) for a in runs_A])
    W = np.concatenate([w.mean(axis=0) for w in runs_W])
    beta = _mapping(A, W, lay.lc)
    Aw, Ww = A[lay.idx], W[lay.idx]
    r = Ww - np.polyval(beta, Aw)
    PA = lay.P @ Aw
    L = len(lay.pos[0])
    c_ra, c_aa, dof = np.zeros((L, L)), np.zeros((L, L)), 0
    for g, pos in zip(lay.groups, lay.pos, strict=True):
        a, w = runs_A[g][:, pos], runs_W[g][:, pos]
        da = a - a.mean(axis=0)
        rr = w - np.polyval(beta, a)
        c_ra += (rr - rr.mean(axis=0)).T @ da
        c_aa += da.T @ da
        dof += a.shape[0] - 1
    bias_num = float(np.sum(lay.noise_weights * c_ra)) / max(dof, 1)
    bias_den = float(np.sum(lay.noise_weights * c_aa)) / max(dof, 1)
    denom = float(Aw @ PA) - bias_den
    slope = float(np.polyval(np.polyder(beta), Aw.mean()))
    return (float(r @ PA) - bias_num) / denom, slope, float(Ww @ PA) / float(Aw @ PA)


def _n_moves_avg(
    groups: list[_Config], in_window: list[bool], window: list[float], has_bp: bool
) -> tuple[float, float]:
    """F-test of log2 n and (log2 n)² on each configuration's seed-mean avg@4 averaged over the
    window (net of log2 B_p): one number per configuration, so that a run's noise, which
    persists from checkpoint to checkpoint, is counted once."""
    y, x, z = [], [], []
    for g, ok in zip(groups, in_window, strict=True):
        if ok:
            y.append(float(g.A.mean(axis=0)[np.isin(g.lc, window)].mean()))
            x.append(math.log2(g.row["n"]))
            z.append(math.log2(g.row["B_p"]) if has_bp else 0.0)
    y_, x_ = np.array(y), np.array(x) - np.mean(x)
    base = np.column_stack([np.ones_like(y_), np.array(z)]) if has_bp else np.ones((len(y), 1))
    full = np.column_stack([base, x_, x_**2])
    rss0 = float(np.sum((y_ - base @ np.linalg.lstsq(base, y_, rcond=None)[0]) ** 2))
    rss1 = float(np.sum((y_ - full @ np.linalg.lstsq(full, y_, rcond=None)[0]) ** 2))
    df1, df2 = 2, len(y) - np.linalg.matrix_rank(full)
    if df2 < 1 or rss1 <= 0:
        return math.nan, math.nan
    F = ((rss0 - rss1) / df1) / (rss1 / df2)
    return float(F), float(stats.f.sf(F, df1, df2))


def mechanism_ratio(
    df: pl.DataFrame,
    metric: str,
    from_C: float | None = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> StatResult:
    """κ for `metric` (see the module's docstring) on one split's runs: the mapping from every
    checkpoint after step 0, n's pattern at the checkpoints from `from_C` on (None: the top
    half of log2 C) of the configurations present at all of them."""
    rows = df.filter((pl.col(STEP) > 0) & (pl.col(ROLLOUTS) > 0))
    rows = rows.filter(pl.col(EVAL_AVG).is_finite() & pl.col(metric).is_finite())
    rows = rows.with_columns(lc=(pl.col(ROLLOUTS).cast(pl.Float64).log(2) * 4).round() / 4)
    runs_total = rows[RUN_KEY].n_unique() if rows.height else 0
    short = metric.removeprefix(EVAL_PREFIX)
    test = (
        f"{short} per unit of avg@4 along n (its pattern per checkpoint, net of B_p) beyond "
        f"the mapping {short} = cubic(avg@4) fitted over every learning curve; runs resampled "
        "within configurations"
    )
    if not rows.height or rows["n"].n_unique() < 3:
        return StatResult.refused("needs ≥ 3 values of n after step 0", runs_total, test)
    lcs = rows["lc"].unique().sort()
    start = (
        math.log2(from_C) if from_C is not None else (as_float(lcs.min()) + as_float(lcs.max())) / 2
    )
    window = sorted(set(rows.filter(pl.col("lc") >= start - 1e-9)["lc"].to_list()))
    has_bp = "B_p" in rows.columns and rows["B_p"].n_unique() > 1
    cfg_cols = ["n", "B_p"] if "B_p" in rows.columns else ["n"]
    rows = rows.with_columns(
        cfg=pl.concat_str([pl.col(c).cast(pl.String) for c in cfg_cols], separator="|")
    )
    # one array (runs × checkpoints) per configuration; configurations in the window only
    # where present at all its checkpoints, and only with runs that share their checkpoints
    groups: list[_Config] = []
    for _, part in rows.sort(RUN_KEY, "lc").group_by("cfg", maintain_order=True):
        per_run = part.group_by(RUN_KEY, maintain_order=True).agg("lc", EVAL_AVG, metric)
        shapes = {tuple(v) for v in per_run["lc"].to_list()}
        if len(shapes) != 1:
            continue
        lc_j = np.array(next(iter(shapes)))
        A = np.array(per_run[EVAL_AVG].to_list(), float)
        W = np.array(per_run[metric].to_list(), float)
        groups.append(_Config(A, W, lc_j, part.row(0, named=True)))
    in_window = [set(window) <= set(g.lc.tolist()) for g in groups]
    if len(window) < 3 or sum(in_window) < 4:
        return StatResult.refused(
            "fewer than 3 checkpoints, or 4 configurations, in the window", runs_total, test
        )
    win_rows, win_lc, win_x, win_z, offset = [], [], [], [], 0
    for g, ok in zip(groups, in_window, strict=True):
        if ok:
            win_rows += [offset + int(np.where(g.lc == w)[0][0]) for w in window]
            win_lc += window
            win_x += [math.log2(g.row["n"])] * len(window)
            win_z += [math.log2(g.row["B_p"])] * len(window) if has_bp else []
        offset += len(g.lc)
    P = _n_projection(np.array(win_lc), np.array(win_x), np.array(win_z) if has_bp else None)
    ids = [i for i, ok in enumerate(in_window) if ok]
    L = len(window)
    weights = sum(
        P[k * L : (k + 1) * L, k * L : (k + 1) * L] / groups[g].A.shape[0]
        for k, g in enumerate(ids)
    )
    lay = _Layout(
        P=P,
        groups=ids,
        pos=[np.array([int(np.where(groups[g].lc == w)[0][0]) for w in window]) for g in ids],
        lc=np.concatenate([g.lc for g in groups]),
        idx=np.array(win_rows),
        noise_weights=np.asarray(weights),
    )
    runs = sum(g.A.shape[0] for g in groups)
    F, p_F = _n_moves_avg(groups, in_window, window, has_bp)
    if not (p_F < ALPHA and F >= MIN_F):
        return StatResult.refused(
            f"n does not move avg@4 enough at C ≥ {2**start:,.0f} (F = {F:.2g}, p = "
            f"{p_F:.2g}; F ≥ {MIN_F:.0f} needed): no ratio along n to compare",
            runs,
            test,
        )
    kappa, along_c, along_n = _kappa(lay, [g.A for g in groups], [g.W for g in groups])
    rng = np.random.default_rng(seed)
    picks = [rng.integers(0, g.A.shape[0], (n_boot, g.A.shape[0])) for g in groups]
    boot = [
        _kappa(
            lay,
            [g.A[pk[b]] for g, pk in zip(groups, picks, strict=True)],
            [g.W[pk[b]] for g, pk in zip(groups, picks, strict=True)],
        )[0]
        for b in range(n_boot)
    ]
    seeds = [g.A.shape[0] for g in groups]
    # κ contrasts the configurations in the window; its t reference takes their number less
    # one, not Σ(seeds − 1): a weighted contrast of few configurations has fewer effective df
    # than the seeds that resolve it (on the planned design, Σ(seeds − 1) = 24 gave 5.0% false
    # calls at α = 4% in the one-mapping null, configurations − 1 = 11 gave 3.7%)
    S, dof = float(np.mean(seeds)), len(lay.groups) - 1
    if S < 2 or dof < 1:
        return StatResult.refused("too few seeds per configuration to resample", runs, test)
    se = float(np.std(boot, ddof=1) * math.sqrt(S / (S - 1)))
    return StatResult.from_t(
        kappa,
        se,
        dof,
        n_runs=runs,
        test=f"{test} ({n_boot} resamples, n's pattern at C ≥ {2**start:,.0f}, {dof} df)",
        note=f"per unit of avg@4 along n: {along_n:+.2f}; the mapping's slope there "
        f"{along_c:+.2f} (n moves avg@4: F = {F:.3g})",
        extra={"along_n": along_n, "mapping_slope": along_c, "F_n": F},
    )


def below_optimum(df: pl.DataFrame, level: str = EVAL_AVG) -> tuple[bool, str]:
    """Does some n of the grid lie below the optimum? True where, at some checkpoint, a larger n
    beats a smaller one on `level` at α (the crossing test's bands: every pair × checkpoint,
    step-down max-|t|); with the strongest such comparison, or why none, in words."""
    bands = advantage_bands(df, level)
    if bands is None:
        return False, "no bands: needs ≥ 2 values of n, ≥ 2 checkpoints and seed replicates"
    t = bands.table.sort("t", descending=True)
    top = t.row(0, named=True)
    said = (
        f"n = {top['n_b']} against n = {top['n_a']} at C ≈ {top['C']:,.0f}: "
        f"{top['d']:+.4f} (step-down p = {top['p_adj']:.2g})"
    )
    lifted = top["t"] > 0 and top["p_adj"] < ALPHA
    losses = t.filter((pl.col("t") < 0) & (pl.col("p_adj") < ALPHA)).height
    if lifted:
        return True, f"some n lies below the optimum: {said}"
    return False, (
        f"every n tested is past the optimum: at no checkpoint does a larger n beat a smaller "
        f"one on {level.removeprefix(EVAL_PREFIX)} (step-down max-|t| over {t.height} pair × "
        f"checkpoint comparisons; the strongest: {said}; {losses} where the smaller n wins)"
    )


def matched_mechanism(df: pl.DataFrame, metric: str, level: str = EVAL_AVG) -> StatResult:
    """`metric` (worst@4 or best@4) per doubling of n at equal `level` (`factor_effect` with
    `level` as the axis), tested where some n lies below the optimum (`below_optimum`); refused
    (untested) where every n tested is past it, with the reading at equal avg@4 in the
    reason."""
    raw = factor_effect(df, metric, level, "n")
    below, why = below_optimum(df, level)
    if below and raw.ran:
        bias = LEVEL_BIAS.get(metric, 0.0)
        shrunk = math.copysign(max(abs(raw.estimate) - bias, 0.0), raw.estimate)
        lo, hi = raw.interval if raw.interval is not None else (math.nan, math.nan)
        said = (
            f"raw {raw.estimate:+.4f} ({1 - ALPHA:.0%} CI [{lo:+.4f}, {hi:+.4f}]) shrunk by "
            f"the test's bias bound ±{bias}"
        )
        return StatResult.from_t(
            shrunk,
            raw.se,
            raw.df,
            n_runs=raw.n_runs,
            test=f"{raw.test}; the estimate shrunk towards 0 by ±{bias} (`LEVEL_BIAS`)",
            note=f"{said}; {why}",
            extra={"raw": raw.estimate, "bias_bound": bias},
        )
    result = raw
    if not result.ran:
        return replace(result, note="; ".join(x for x in (result.note, why) if x))
    lo, hi = result.interval if result.interval is not None else (math.nan, math.nan)
    reading = (
        f"{metric.removeprefix(EVAL_PREFIX)} at equal {level.removeprefix(EVAL_PREFIX)} "
        f"{result.estimate:+.2g} per doubling of n ({1 - ALPHA:.0%} CI [{lo:+.2g}, {hi:+.2g}]), "
        "not a call"
    )
    return replace(
        StatResult.refused(
            f"untested: {why}; secondary reading: {reading}", result.n_runs, result.test
        ),
        extra={"at_equal_level": result.estimate, "interval": result.interval},
    )
