"""Mixed and extremely hard sets (issue 31, part 3; IsoCompute Playbook): where n* lies on a
mixture of Easy and Hard problems, and what a larger n buys on problems the base never solves.

`between` is the mixture claim's test: "on a mix, n* lies between Easy's and Hard's". Each
split's n* is the vertex of a quadratic in log2 n (+ a level per seed) of its runs' last
evaluations (`isolab.verdicts.quadratic.quadratic_design`), with its delta-method error; the three splits are
separate runs, so their errors are independent. "Between" is an intersection-union test
(Berger 1982): the mix's vertex must lie above the lower of the two components' vertices *and*
below the upper one, each one-sided at α/2; the test is the weaker of the two sides, whose
margin (doublings of n inside the components' range, negative outside it) is the effect. It
agrees only when both sides are resolved, which needs the components' optima to be separated
by more than their errors; it disagrees when the mix's optimum lies resolved outside the range.
It is tested only where all three curvatures are resolved and the vertices lie inside the grid
(an optimum at the grid's edge has no position).

`coverage_expansion` is the extremely-hard claim's test (issue 46): does a larger n *expand*
coverage — reach best@k (the largest k evaluated: best@16 on `never`) that a smaller n never
reaches? Its estimand is the slope of each run's highest best@k over its checkpoints (its
peak) on log2 n, with a level per seed, HC3 errors. A larger n ahead at the budget is not
enough: where every n peaks at the same coverage and the smaller n lose it late, the larger n
ahead at the budget *keeps* coverage, it does not expand it. The peak is read only where it was
reached: where the largest n's seed-mean best@k is highest at its last checkpoint, its peak
lies at or beyond the budget, so a peak slope that is not positive cannot say the larger n
would not expand coverage further — the claim is untested there, with the peaks and the
coverage of every n at the largest summed learning rate Σlr they all reached (equal progress)
in the reason. The slope of the last best@k at equal compute (the claim the data can support:
a larger n keeps coverage at equal compute) and avg@k's slope are secondary readings
(`coverage_keeps`).

`isolab.study.mixtures.worlds` draws runs on the shipped designs (nstar's `main`, `mix`,
`never`) with the measured levels, seed spreads and noise, and the effects as stated: what the
calibration runs the claims' tests on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import polars as pl
from scipy import stats

from isolab.table import as_float, with_lr_sum
from isolab.verdicts.ols import hc3_arrays
from isolab.verdicts.quadratic import final_rows, quadratic_design, quadratic_vertex, unlocated
from isolab.verdicts.result import ALPHA, StatResult, t_quantile
from isolab.vocab import EVAL_AVG, EVAL_PREFIX, LR_SUM, RUN_KEY, STEP

#: The mixture's components, and the split they are mixed into.
COMPONENTS = ("easy", "hard")
MIX = "mix"


@dataclass(frozen=True)
class Vertex:
    """One split's optimum: the vertex (log2 n) of a quadratic fit, its SE, the curvature and
    its SE, the residual df, the grid's ends, and why it has no position (empty: it has)."""

    split: str
    log2_n: float
    se: float
    curvature: float
    curvature_se: float
    dof: int
    runs: int
    why: str


def split_vertex(rows: pl.DataFrame, split: str, metric: str = EVAL_AVG) -> Vertex:
    """The vertex of a quadratic in log2 n (+ a level per seed) of `rows` (one row per run, its
    last `metric`), by the delta method; `why` says when it is not located."""
    nan = math.nan
    if rows.height == 0 or rows["n"].n_unique() < 4:
        ns = rows["n"].n_unique() if rows.height else 0
        return Vertex(
            split,
            nan,
            nan,
            nan,
            nan,
            0,
            rows.height,
            f"{split}: {rows.height} runs over {ns} values of n (a vertex needs 4)",
        )
    X, centre, x = quadratic_design(rows)
    y = rows[metric].to_numpy().astype(float)
    dof = rows.height - int(np.linalg.matrix_rank(X))
    if dof < 2:
        return Vertex(
            split,
            nan,
            nan,
            nan,
            nan,
            dof,
            rows.height,
            f"{split}: {rows.height} runs, too few for a quadratic",
        )
    XtX_inv = np.linalg.pinv(X.T @ X)
    beta = XtX_inv @ X.T @ y
    e = y - X @ beta
    s2 = float(e @ e) / dof
    b, c = float(beta[1]), float(beta[2])
    c_se = math.sqrt(s2 * XtX_inv[2, 2])
    v, grad = quadratic_vertex(b, c, centre)
    se = math.sqrt(max(float(s2 * grad @ XtX_inv[1:3, 1:3] @ grad), 0.0))
    why = unlocated(split, c, t_quantile(dof) * c_se, v, float(x.min()), float(x.max()))
    return Vertex(split, v, se, c, c_se, dof, rows.height, why)


def component_rows(main: pl.DataFrame, mix: pl.DataFrame, metric: str = EVAL_AVG) -> dict:
    """Each split's last evaluations on one design: the components' runs from `main` at the
    mix's B_p and at the values of n the mix ran, and the mix's own."""
    mix_final = final_rows(mix, (metric,)) if metric in mix.columns else mix.clear()
    ns = mix_final["n"].unique().to_list() if mix_final.height else []
    bps = mix_final["B_p"].unique().to_list() if mix_final.height and "B_p" in mix.columns else []
    out = {}
    for split in COMPONENTS:
        part = main.filter(pl.col("split") == split) if "split" in main.columns else main.clear()
        if bps and "B_p" in part.columns:
            part = part.filter(pl.col("B_p").is_in(bps))
        part = part.filter(pl.col("n").is_in(ns))
        out[split] = final_rows(part, (metric,)) if metric in part.columns else part.clear()
    return out | {MIX: mix_final}


def between(main: pl.DataFrame, mix: pl.DataFrame, metric: str = EVAL_AVG) -> StatResult:
    """The mix's n* inside the components' range: the weaker side's margin in log2 n
    (module docstring)."""
    test = (
        f"vertex of a quadratic in log2 n (+ a level per seed) of each split's last {metric}, "
        "splits independent (delta method); intersection-union test of lower < mix < upper, "
        "the weaker side's margin"
    )
    if metric not in mix.columns or metric not in main.columns:
        return StatResult.refused(f"no {metric} in these runs", test=test)
    rows = component_rows(main, mix, metric)
    fits = {s: split_vertex(rows[s], s, metric) for s in (*COMPONENTS, MIX)}
    runs = sum(f.runs for f in fits.values())
    why = [f.why for f in fits.values() if f.why]
    located = ", ".join(
        f"{s} n* ≈ {2**f.log2_n:.3g}"
        for s, f in fits.items()
        if math.isfinite(f.log2_n) and abs(f.log2_n) < 60
    )
    if why:
        return StatResult.refused(
            "all three optima must be interior: "
            + "; ".join(why)
            + (f" ({located})" if located else "")
            + "; "
            + slopes_reading(rows, metric),
            runs,
            test,
        )
    easy, hard, m = fits["easy"], fits["hard"], fits[MIX]
    lower, upper = (easy, hard) if easy.log2_n <= hard.log2_n else (hard, easy)
    sides = [
        (m.log2_n - lower.log2_n, math.hypot(m.se, lower.se), min(m.dof, lower.dof)),
        (upper.log2_n - m.log2_n, math.hypot(m.se, upper.se), min(m.dof, upper.dof)),
    ]
    margin, se, dof = min(sides, key=lambda s: s[0] / s[1] if s[1] > 0 else math.inf)
    gap = upper.log2_n - lower.log2_n
    gap_se = math.hypot(easy.se, hard.se)
    gap_p = float(2 * stats.t.sf(abs(gap) / gap_se, min(easy.dof, hard.dof))) if gap_se > 0 else 1
    note = (
        f"{located}; the components' optima are {gap:.2f} ± {gap_se:.2f} doublings apart "
        f"(p = {gap_p:.2g}{'' if gap_p < ALPHA else ': not separated, so no mix can be shown between them'})"
    )
    return StatResult.from_t(
        margin,
        se,
        float(dof),
        n_runs=runs,
        test=f"{test} ({dof} df)",
        note=note,
        extra={"log2_n_star": {s: f.log2_n for s, f in fits.items()}, "gap": gap},
    )


def slopes_reading(rows: dict[str, pl.DataFrame], metric: str) -> str:
    """The boundary-proof reading: each split's slope of its last `metric` on log2 n (+ a level
    per seed), with its interval."""
    parts, fits = [], {}
    for split, part in rows.items():
        r = fits[split] = slope(part, metric)
        if r.ran:
            half = r.interval[1] - r.estimate if r.interval else math.nan
            parts.append(f"{split} {r.estimate:+.4f} ± {half:.4f}")
    out = "secondary reading, slope per doubling of n: " + (", ".join(parts) or "none")
    if len(fits) == 3 and all(f.ran for f in fits.values()):
        # a mix whose halves learn side by side, each as on its own, has their mean slope
        e, h, m = fits["easy"], fits["hard"], fits[MIX]
        gap = m.estimate - (e.estimate + h.estimate) / 2
        se = math.sqrt(m.se**2 + (e.se**2 + h.se**2) / 4)
        half = t_quantile(min(e.df, h.df, m.df)) * se
        out += f"; the mix's minus the mean of Easy's and Hard's {gap:+.4f} ± {half:.4f}"
    return out


def slope(rows: pl.DataFrame, metric: str) -> StatResult:
    """The slope of `metric` on log2 n with a level per seed (one row per run), HC3 errors."""
    test = f"OLS of each run's last {metric} on log2 n + a level per seed, HC3 errors"
    if rows.height == 0 or rows["n"].n_unique() < 2:
        return StatResult.refused(
            f"{rows.height} runs: a slope needs 2 values of n", rows.height, test
        )
    x = np.log2(rows["n"].to_numpy().astype(float))
    cols = [np.ones(len(x)), x - x.mean()]
    if "seed" in rows.columns and rows["seed"].n_unique() > 1:
        seeds = rows["seed"].to_numpy()
        cols += [(seeds == s).astype(float) for s in np.unique(seeds)[1:]]
    beta, cov, dof = hc3_arrays(np.column_stack(cols), rows[metric].to_numpy().astype(float))
    if dof < 1:
        return StatResult.refused(f"{rows.height} runs: no residual df", rows.height, test)
    return StatResult.from_t(
        float(beta[1]),
        math.sqrt(cov[1, 1]),
        float(dof),
        n_runs=rows.height,
        test=f"{test} ({dof} df)",
    )


def coverage_metric(df: pl.DataFrame, stat: str = "best") -> str | None:
    """The `eval/<stat>@k` column of the largest k in `df` (best@16 where it was evaluated)."""
    ks = [
        int(c.rsplit("@", 1)[1])
        for c in df.columns
        if c.startswith(f"{EVAL_PREFIX}{stat}@") and c.rsplit("@", 1)[1].isdigit()
    ]
    return f"{EVAL_PREFIX}{stat}@{max(ks)}" if ks else None


def coverage_keeps(df: pl.DataFrame) -> StatResult:
    """The claim the `never` runs support: the slope of each run's last best@k (largest k) on
    log2 n at equal compute (a larger n keeps coverage at equal compute); the note gives
    avg@k's slope beside it."""
    best, avg = coverage_metric(df, "best"), coverage_metric(df, "avg")
    if best is None:
        return StatResult.refused("no eval/best@k in these runs")
    r = slope(final_rows(df, (best,)), best)
    if not r.ran or avg is None:
        return r
    a = slope(final_rows(df, (best, avg)), avg)
    base = df.filter(pl.col(STEP) == 0)
    start = f"; at step 0 the base reads {best} = {base[best].mean():.3f}" if base.height else ""
    return replace(r, note=f"{avg} moves {_pm(a)} per doubling of n{start}")


def _peaks(df: pl.DataFrame, best: str) -> pl.DataFrame:
    """Each run's highest `best` after step 0, with its n and seed."""
    return (
        df.filter((pl.col(STEP) > 0) & pl.col(best).is_finite())
        .group_by(RUN_KEY, maintain_order=True)
        .agg(pl.col("n").first(), pl.col("seed").first(), pl.col(best).max())
    )


def seed_mean_curves(df: pl.DataFrame, metric: str) -> pl.DataFrame:
    """Per n and step (after step 0): the seed mean of `metric` and of the summed learning rate
    Σlr (`isolab.table.with_lr_sum`)."""
    rows = with_lr_sum(df).filter((pl.col(STEP) > 0) & pl.col(metric).is_finite())
    return (
        rows.group_by("n", STEP).agg(pl.col(metric).mean(), pl.col(LR_SUM).mean()).sort("n", STEP)
    )


def at_common_lr_sum(curves: pl.DataFrame, metric: str) -> tuple[float, dict[int, float]]:
    """The largest Σlr every n reached, and each n's seed-mean `metric` there (linear in log2
    Σlr between the checkpoints that bracket it): the n compared at equal optimizer progress."""
    ends = curves.group_by("n").agg(pl.col(LR_SUM).max())
    common = as_float(ends[LR_SUM].min())
    out = {}
    for (n,), g in curves.group_by(["n"], maintain_order=True):
        x, y = np.log2(g[LR_SUM].to_numpy()), g[metric].to_numpy()
        out[int(n)] = float(np.interp(math.log2(common), x, y))
    return common, out


def coverage_expansion(df: pl.DataFrame) -> StatResult:
    """Does a larger n expand coverage on an extremely hard set? The slope of each run's peak
    best@k on log2 n (the module's docstring): agrees where it is positive at α; untested where
    it is not and the largest n's peak lies at or beyond the budget (its seed-mean best@k
    highest at its last checkpoint), with the peaks and the coverage at equal Σlr in the
    reason; else the peak slope's own call."""
    best = coverage_metric(df, "best")
    test = (
        f"OLS of each run's highest {best} over its checkpoints on log2 n + a level per seed, HC3"
    )
    if best is None:
        return StatResult.refused("no eval/best@k in these runs", test=test)
    r = replace(slope(_peaks(df, best), best), test=test)
    if not r.ran or (r.p_value is not None and r.p_value < ALPHA and r.estimate > 0):
        return r
    curves = seed_mean_curves(df, best)
    peak = curves.group_by("n").agg(pl.col(best).max()).sort("n")
    top = curves.filter(pl.col("n") == pl.col("n").max())
    censored = float(top[best][-1]) >= as_float(top[best].max())
    if not censored:
        return r
    common, equal = at_common_lr_sum(curves, best)
    peaks = ", ".join(f"{v:.3f}" for v in peak[best])
    ns = "/".join(str(n) for n in peak["n"])
    last = curves.group_by("n").agg(pl.col(best).last()).sort("n")
    falls = [
        f"n = {n}: {p:.3f} → {v:.3f}"
        for n, p, v in zip(peak["n"], peak[best], last[best], strict=True)
        if n != top["n"][0] and v < p
    ]
    reason = (
        f"untested: every n peaks near {best} {as_float(peak[best].mean()):.2f} (seed-mean peaks "
        f"{peaks} for n = {ns}; each run's highest {best} moves {_pm(r)} per doubling of n), and "
        f"n = {int(top['n'][0])}'s highest is its last checkpoint, so its peak lies at or beyond "
        f"the budget; at the largest Σlr every n reached ({common:.4f}) the n read "
        f"{'/'.join(f'{v:.3f}' for v in equal.values())}"
        + (
            f"; the smaller n fall from their peaks by the budget ({', '.join(falls)}): a larger "
            "n ahead there keeps coverage that the smaller n lose late"
            if falls
            else ""
        )
    )
    extra = {
        "peaks": dict(zip(peak["n"].to_list(), peak[best].to_list(), strict=True)),
        "lr_sum_common": common,
        "at_common_lr_sum": equal,
        "peak_slope": r.estimate,
    }
    return replace(StatResult.refused(reason, r.n_runs, test), extra=extra)


def _pm(r: StatResult) -> str:
    """`+0.0123 ± 0.0045` (the 96% half-width), or `—` where the test did not run."""
    if not r.ran or r.interval is None:
        return "—"
    return f"{r.estimate:+.4f} ± {r.interval[1] - r.estimate:.4f}"
