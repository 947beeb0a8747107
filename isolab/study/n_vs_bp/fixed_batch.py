"""n against B_p at a fixed batch B = B_p·n, from the nstar grid's fixed-B pairs (B = 128 … 2,048:
(8, 16) and (2, 64), …, (128, 16) and (32, 64)): two configurations of one B spend the same
rollouts per step, so at equal compute they have taken the same number of steps M, and how their
difference moves with C is how it moves with M.

- `advantage_trend`: within each B stratum and seed, the advantage of a larger n (avg@4 per
  doubling of n across the stratum's members) at each checkpoint, and its trend in log2 C: the
  Playbook's "few steps favour more problems, many steps more rollouts" (Easy).
- `sign_changes` (`isolab.study.n_vs_bp.sign_changes`): where that advantage, averaged over strata, changes sign across C, each change
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

import numpy as np
import polars as pl
from scipy import stats

from isolab.table import as_float
from isolab.verdicts.result import StatResult, min_detectable, t_quantile
from isolab.vocab import ROLLOUTS, RUN_KEY, STEP

#: The margin of "B_p matters little": avg@4 per doubling of B_p (0.02 for B_p 16 → 64), a
#: third of the 0.03 the testbed's comparisons must resolve and a sixth of the spread n's grid
#: made at the committed nstar budget (0.12 on Easy). The Playbook's own sensitivity (B_p moves
#: Easy reward 1.9% where n moves it 9.2%) sits well inside it.
BP_MARGIN = 0.01


def _rows(df: pl.DataFrame, metric: str) -> pl.DataFrame:
    rows = df.filter((pl.col(STEP) > 0) & (pl.col(ROLLOUTS) > 0) & pl.col(metric).is_finite())
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
        out.append(
            {
                stratum: s,
                "seed": seed,
                "lc": lc,
                "slope": float(np.polyfit(lx, g[metric].to_numpy().astype(float), 1)[0]),
            }
        )
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
        est,
        se,
        dof,
        n_runs=runs,
        test=f"{test} ({U} units, {dof:.1f} df)",
        note=note,
        extra=extra,
    )


def fixed_b_slopes(df: pl.DataFrame, metric: str) -> tuple[pl.DataFrame, int, list[int]]:
    """Per unit (B stratum × seed) and checkpoint, the slope of `metric` in log2 n across the
    stratum's members (`_slopes_within`), on the batches B run with two or more n; the runs
    used and those batches."""
    rows = _rows(df, metric)
    runs = rows[RUN_KEY].n_unique() if RUN_KEY in rows.columns else 0
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
    slopes, runs, batches = fixed_b_slopes(df, metric)
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
    runs = rows[RUN_KEY].n_unique() if RUN_KEY in rows.columns else 0
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
        estimate=est,
        se=se,
        df=dof,
        p_value=p_tost,
        interval=(est - q * se, est + q * se),
        mde=min_detectable(se, dof),
        n_runs=runs,
        test=f"{test}, checkpoints C ≥ {2**start:,.0f} ({U} units, {dof:.1f} df)",
        note=f"for scale: n moves seed-mean {metric} by {n_range:.3f} across its grid "
        f"(largest − smallest at one B_p, mean over those checkpoints)",
        extra={"p_beyond": p_beyond, "margin": margin, "n_spread": n_range},
    )


def _n_spread(rows: pl.DataFrame, metric: str) -> float:
    keys = ["split"] if "split" in rows.columns else []
    cells = rows.group_by(*keys, "n", "B_p", "lc", maintain_order=True).agg(pl.col(metric).mean())
    spread = cells.group_by(*keys, "B_p", "lc", maintain_order=True).agg(
        pl.col(metric).max() - pl.col(metric).min()
    )
    return as_float(spread[metric].mean()) if spread.height else math.nan
