"""n against B_p at a fixed batch B = B_p·n, from the nstar grid's fixed-B pairs (B = 128 … 2,048:
(8, 16) and (2, 64), …, (128, 16) and (32, 64)): two configurations of one B spend the same
rollouts per step, so at equal compute they have taken the same number of steps M, and how their
difference moves with C is how it moves with M.

- `advantage_trend`: within each B stratum and seed, the advantage of a larger n (avg@4 per
  doubling of n across the stratum's members) at each checkpoint, and its trend in log2 C: the
  Playbook's "few steps favour more problems, many steps more rollouts" (Easy).
- `sign_changes`: where that advantage, averaged over strata, changes sign across C, each change
  located with its interval (issue 46): the Playbook's "the best n is non-monotone in M"
  (Hard). A curvature of the advantage is not enough: a concave decline that never crosses
  zero leaves the same member best at every M (ties, then the smaller n).
- `bp_equivalence`: at fixed n, the effect of B_p on avg@4 per doubling of B_p, tested for
  equivalence with zero within a stated margin (two one-sided tests): "B_p matters little".

All three compare configurations run under the same seed (one unit per stratum × seed; where the
seeds are not crossed, one per stratum on seed means), reduce each unit's checkpoints to one
number, and test the mean over units with their spread within strata (`stratified_mean`: the
strata as fixed effects, Welch–Satterthwaite df — strata differ in how many checkpoints their
units hold, so in their noise): a unit's checkpoints come from the same runs, so they are not
independent, while units are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import combinations

import numpy as np
import polars as pl
from scipy import stats

from isolab.table import as_float
from isolab.verdicts.result import ALPHA, StatResult, min_detectable, t_quantile
from isolab.vocab import ROLLOUTS

#: The margin of "B_p matters little": avg@4 per doubling of B_p (0.02 for B_p 16 → 64), a
#: third of the 0.03 the testbed's comparisons must resolve and a sixth of the spread n's grid
#: made at the committed nstar budget (0.12 on Easy). The Playbook's own sensitivity (B_p moves
#: Easy reward 1.9% where n moves it 9.2%) sits well inside it.
BP_MARGIN = 0.01
#: Draws of the max-|t| reference distribution of `advantage_band`.
N_DRAWS = 4000


def _rows(df: pl.DataFrame, metric: str) -> pl.DataFrame:
    rows = df.filter((pl.col("step") > 0) & (pl.col(ROLLOUTS) > 0) & pl.col(metric).is_finite())
    if "B" not in rows.columns:
        rows = rows.with_columns(B=pl.col("n") * pl.col("B_p"))
    return rows.with_columns(
        lc=(pl.col(ROLLOUTS).cast(pl.Float64).log(2) * 4).round() / 4,
        seed=pl.col("seed").cast(pl.String) if "seed" in rows.columns else pl.lit("all"),
    )


def _crossed(rows: pl.DataFrame, stratum: str, member: str) -> bool:
    """Every member of every stratum ran the same seeds."""
    if rows["seed"].n_unique() < 2:
        return False
    seeds = rows.group_by(stratum, member, maintain_order=True).agg(
        pl.col("seed").unique().sort().alias("s")
    )
    return (
        seeds.group_by(stratum, maintain_order=True)
        .agg(pl.col("s").n_unique().alias("k"))["k"]
        .max()
        == 1
    )


def _slopes_within(rows: pl.DataFrame, metric: str, stratum: str, x: str) -> pl.DataFrame:
    """Per unit (stratum and seed, or stratum on seed means) and checkpoint: the OLS slope of
    `metric` on log2 `x` across the stratum's members (with two: their difference over the
    doublings between them)."""
    crossed = _crossed(rows, stratum, x)
    if not crossed:
        rows = (
            rows.group_by(stratum, x, "lc", maintain_order=True)
            .agg(pl.col(metric).mean())
            .with_columns(seed=pl.lit("mean"))
        )
    out = []
    for (s, seed, lc), g in rows.group_by([stratum, "seed", "lc"], maintain_order=True):
        lx = np.log2(g[x].to_numpy().astype(float))
        if len(np.unique(lx)) < 2:
            continue
        out.append({stratum: s, "seed": seed, "lc": lc,
                    "slope": float(np.polyfit(lx, g[metric].to_numpy().astype(float), 1)[0])})  # fmt: skip
    frame = pl.DataFrame(out)
    return frame.sort(stratum, "seed", "lc") if frame.height else frame


def stratified_mean(values: np.ndarray, strata: np.ndarray) -> tuple[float, float, float]:
    """Mean of the units, its SE with the variance estimated within strata (the strata as fixed
    effects: a stratum whose true value differs from another's adds no noise), and
    Welch–Satterthwaite df; Var(mean) = Σ_h n_h·s_h² / U². Where no stratum holds two units
    (seeds not crossed) the spread of all units is used, on U − 1 df."""
    U = len(values)
    groups = [values[strata == h] for h in np.unique(strata)]
    parts = [(len(g), float(g.var(ddof=1))) for g in groups if len(g) > 1]
    if not parts:
        return float(values.mean()), float(values.std(ddof=1) / math.sqrt(U)), float(U - 1)
    terms = [n * v / U**2 for n, v in parts]
    var = sum(terms)
    dof = var**2 / sum(t**2 / (n - 1) for t, (n, _) in zip(terms, parts, strict=True))
    return float(values.mean()), math.sqrt(var), float(dof)


def _unit_test(
    values: np.ndarray, strata: np.ndarray, runs: int, test: str, extra: dict, note: str = ""
) -> StatResult:
    U = len(values)
    if U < 3:
        return StatResult.refused(f"{U} units (B strata × seeds): too few to test", runs, test)
    est, se, dof = stratified_mean(values, strata)
    return StatResult.from_t(
        est, se, dof, n_runs=runs, test=f"{test} ({U} units, {dof:.1f} df)", note=note,
        extra=extra,
    )  # fmt: skip


def _fixed_b_slopes(df: pl.DataFrame, metric: str) -> tuple[pl.DataFrame, int, list[int]]:
    """Per unit (B stratum × seed) and checkpoint, the slope of `metric` in log2 n across the
    stratum's members (`_slopes_within`), on the batches B run with two or more n; the runs
    used and those batches."""
    rows = _rows(df, metric)
    runs = rows["run_key"].n_unique() if "run_key" in rows.columns else 0
    strata = (
        rows.group_by("B", maintain_order=True)
        .agg(pl.col("n").n_unique().alias("k"))
        .filter(pl.col("k") > 1)
    )
    batches = sorted(strata["B"].to_list())
    rows = rows.filter(pl.col("B").is_in(batches))
    slopes = _slopes_within(rows, metric, "B", "n") if rows.height else pl.DataFrame()
    return slopes, runs, batches


def advantage_trend(df: pl.DataFrame, metric: str) -> StatResult:
    """How the advantage of a larger n at a fixed batch changes with compute (equivalently with
    the steps M, equal within a B stratum at equal C). Per unit (B stratum × seed): at each
    checkpoint both members reached, the slope of `metric` in log2 n across the stratum's
    members; that slope regressed on log2 C (avg@4 per doubling of n per doubling of C).
    Estimate: the mean over units, SE their spread."""
    slopes, runs, batches = _fixed_b_slopes(df, metric)
    test = (
        f"fixed-B strata ({', '.join(str(b) for b in batches)}): per stratum × seed, the slope "
        f"of {metric} in log2 n between its members at each checkpoint, regressed on log2 C; "
        "mean coefficient over units, t on their spread within strata"
    )
    if not batches:
        return StatResult.refused("no batch B with two values of n", runs, test)
    if not slopes.height:
        return StatResult.refused("no checkpoint where two members of a B met", runs, test)
    coefs, strata = [], []
    for (b, _), g in slopes.group_by("B", "seed", maintain_order=True):
        if g.height < 3:
            continue
        coefs.append(np.polyfit(g["lc"].to_numpy(), g["slope"].to_numpy(), 1)[0])
        strata.append(b)
    if not coefs:
        return StatResult.refused("no unit with 3 checkpoints", runs, test)
    first = as_float(slopes.filter(pl.col("lc") == pl.col("lc").min())["slope"].mean())
    last = as_float(slopes.filter(pl.col("lc") == pl.col("lc").max())["slope"].mean())
    span = (as_float(slopes["lc"].min()), as_float(slopes["lc"].max()))
    note = (
        f"advantage of a doubling of n at fixed B: {first:+.3f} avg@4 at C = {2 ** span[0]:,.0f}"
        f", {last:+.3f} at C = {2 ** span[1]:,.0f} (mean over units)"
    )
    extra = {"first_advantage": first, "last_advantage": last}
    return _unit_test(np.array(coefs), np.array(strata), runs, test, extra, note)


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
    slopes, _, _ = _fixed_b_slopes(df, metric)
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
    p_adj = _step_down(np.abs(a / se), abs_z)
    return AdvantageBand(lc, a, se, np.maximum(p_adj, 1 / (n_draws + 1)), t_crit, dof)


def _step_down(abs_t: np.ndarray, abs_z: np.ndarray) -> np.ndarray:
    """Westfall & Young's step-down max-|t| adjusted p-values: the i-th largest |t| referred to
    the max of |Z| over the checkpoints not larger than it, made monotone."""
    order = np.argsort(-abs_t)
    tail_max = np.maximum.accumulate(abs_z[:, order][:, ::-1], axis=1)[:, ::-1]
    raw = (tail_max >= abs_t[order][None, :]).mean(axis=0)
    out = np.empty(len(abs_t))
    out[order] = np.maximum.accumulate(raw)
    return out


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
    left = max((k for k in range(i, j + 1) if sig[k] and a[k] * side > 0 and lc[k] <= point),
               default=i)  # fmt: skip
    right = min((k for k in range(i, j + 1) if sig[k] and a[k] * side < 0 and lc[k] >= point),
                default=j)  # fmt: skip
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
    slopes, runs, batches = _fixed_b_slopes(df, metric)
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
    extra = {"advantage": band.a.tolist(), "log2_C": band.lc.tolist(),
             "p_adj": band.p_adj.tolist(), "t_crit": band.t_crit}  # fmt: skip
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
        estimate=float(band.a[j]), se=float(band.se[j]), df=float(band.dof), p_value=p2,
        interval=None, mde=math.nan, n_runs=runs, test=test,
        note=f"two sign changes located: {_locate(band, i, j)}, then {_locate(band, j, k)} "
        f"(p = {p2:.2g}); {where}",
        extra=extra,
    )  # fmt: skip


def bp_equivalence(
    df: pl.DataFrame, metric: str, margin: float = BP_MARGIN, from_C: float | None = None
) -> StatResult:
    """Does B_p matter little? At every n run with two or more B_p, per unit (split × n ×
    seed): the
    slope of `metric` in log2 B_p at each checkpoint from `from_C` (None: the top half of log2 C),
    averaged over those checkpoints. Estimate: the mean over units (avg@4 per doubling of B_p at
    matched n and C), SE their spread. p-value: the two one-sided tests of equivalence within
    ±`margin` (Schuirmann 1987: the larger of the two one-sided p-values; below α exactly when
    the 1 − 2α interval lies inside the margin). `extra["p_beyond"]`: the one-sided p-value
    that the effect lies beyond the margin on the side of the estimate (B_p matters)."""
    rows = _rows(df, metric)
    runs = rows["run_key"].n_unique() if "run_key" in rows.columns else 0
    test = (
        f"per split × n × seed, the slope of {metric} in log2 B_p averaged over the checkpoints "
        f"(matched n and C); two one-sided tests of equivalence within ±{margin}"
    )
    both = (
        rows.group_by("n", maintain_order=True)
        .agg(pl.col("B_p").n_unique().alias("k"))
        .filter(pl.col("k") > 1)
    )
    rows = rows.filter(pl.col("n").is_in(both["n"].to_list()))
    if not rows.height:
        return StatResult.refused("no n run with two values of B_p", runs, test)
    lcs = rows["lc"].unique().sort()
    start = (
        math.log2(from_C) if from_C is not None else (as_float(lcs.min()) + as_float(lcs.max())) / 2
    )
    rows = rows.filter(pl.col("lc") >= start - 1e-9)
    split = pl.col("split").cast(pl.String) if "split" in rows.columns else pl.lit("")
    rows = rows.with_columns(
        unit=pl.concat_str([split, pl.col("n").cast(pl.String)], separator="|")
    )
    slopes = _slopes_within(rows, metric, "unit", "B_p")
    if not slopes.height:
        return StatResult.refused("no checkpoint where two B_p of one n met", runs, test)
    per_unit = slopes.group_by("unit", "seed", maintain_order=True).agg(pl.col("slope").mean())
    units = per_unit["slope"].to_numpy()
    U = len(units)
    if U < 3:
        return StatResult.refused(f"{U} units (split × n × seeds): too few to test", runs, test)
    est, se, dof = stratified_mean(units, per_unit["unit"].to_numpy())
    p_tost = float(max(stats.t.sf((est + margin) / se, dof), stats.t.sf((margin - est) / se, dof)))
    p_beyond = float(stats.t.sf((abs(est) - margin) / se, dof))
    q = t_quantile(dof)
    n_range = _n_spread(rows, metric)
    return StatResult(
        estimate=est, se=se, df=dof, p_value=p_tost, interval=(est - q * se, est + q * se),
        mde=min_detectable(se, dof), n_runs=runs,
        test=f"{test}, checkpoints C ≥ {2**start:,.0f} ({U} units, {dof:.1f} df)",
        note=f"for scale: n moves seed-mean {metric} by {n_range:.3f} across its grid "
        f"(largest − smallest at one B_p, mean over those checkpoints)",
        extra={"p_beyond": p_beyond, "margin": margin, "n_spread": n_range},
    )  # fmt: skip


def _n_spread(rows: pl.DataFrame, metric: str) -> float:
    keys = ["split"] if "split" in rows.columns else []
    cells = rows.group_by(*keys, "n", "B_p", "lc", maintain_order=True).agg(pl.col(metric).mean())
    spread = cells.group_by(*keys, "B_p", "lc", maintain_order=True).agg(
        pl.col(metric).max() - pl.col(metric).min()
    )
    return as_float(spread[metric].mean()) if spread.height else math.nan
