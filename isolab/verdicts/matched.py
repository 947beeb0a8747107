"""A claim about n read three ways: at matched compute, at matched updates, at matched progress
(issue 45).

Under the √B learning-rate rule the summed learning rate Σlr = Σ_steps lr ∝ C/√B (`LR_SUM`,
`isolab.table.with_lr_sum`): at a fixed compute C a larger n (or B_p) buys fewer optimizer
updates. An effect of n at equal C mixes "fewer updates" with "other updates"; these readings
separate them. They are secondary: the claims' calls stay on their own tests.

- `factor_effect` at `axis=ROLLOUTS` (equal compute) and at `axis=LR_SUM` (equal updates): OLS of
  the metric on log2 n plus a spline in log2 of the axis (`SHAPE`), with a level per value of the
  other design columns (B_p, or n when B_p is the factor) and per seed; the coefficient of log2
  n, or its interaction with log2 axis (`term="slope"`) or (log2 axis)² (`term="curvature"`).
  At one checkpoint log2 Σlr is linear in log2 n, so "equal Σlr" compares a larger n at a
  later checkpoint with a smaller n at an earlier one: the fit spans every checkpoint after
  step 0. The checkpoints of one run are not independent (its luck persists), so errors are
  clustered by run (`isolab.verdicts.ols.cluster_ols`), t on runs − 1 df.
- `at_equal_level`: each run's `metric` interpolated at common levels of avg@4 along its own
  curve (step 0 included, no extrapolation beyond the run's range), then OLS on log2 n with a
  level per avg@4 level (and the design levels above), clustered by run: what n changes at the
  same reward (best@4, worst@4).
- `readings`: the three as one sentence and a dict of numbers, for a claim's note.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from isolab.table import with_lr_sum
from isolab.verdicts.ols import cluster_ols
from isolab.verdicts.result import CI_LEVEL, StatResult
from isolab.vocab import (
    EVAL_AVG,
    EVAL_BEST,
    EVAL_PREFIX,
    EVAL_WORST,
    LR_SUM,
    ROLLOUTS,
    RUN_KEY,
    STEP,
)

#: Common avg@4 levels at which `at_equal_level` compares runs.
N_LEVELS = 6
#: The axes a factor's effect is read at, with their short names.
AXES = {ROLLOUTS: "C", LR_SUM: "Σlr"}
#: The design columns held at their levels beside the factor (where they vary).
DESIGN = ("n", "B_p", "seed")
TERMS = {"main": "x", "slope": "x:u", "curvature": "x:I(u ** 2)"}
#: The shape of the metric in log2 of the axis: a cubic B-spline with 4 df. A quadratic (the
#: review's) leaked a bias of ≈ −0.002 avg@4 per doubling of n into worlds where avg@4 is a
#: sigmoid of log2 Σlr and n does nothing (its interval held 0 in 60% of 20 such worlds, the
#: spline's in all 20); on the committed nstar runs the two give n's coefficient within 0.0001.
SHAPE = "bs(u, df=4)"


def _short(metric: str) -> str:
    return metric.removeprefix(EVAL_PREFIX)


def _design_terms(rows: pl.DataFrame, factor: str) -> list[str]:
    """`C(col)` for each design column other than `factor` that takes more than one value."""
    return [
        f"C({c})" for c in DESIGN if c != factor and c in rows.columns and rows[c].n_unique() > 1
    ]


def _result(fit, name: str, runs: int, test: str, note: str = "", **extra) -> StatResult:
    X = fit.model.exog
    if np.linalg.matrix_rank(X) < X.shape[1]:  # e.g. one checkpoint: Σlr is a function of n, B_p
        return StatResult.refused("not identified: the design's terms are collinear", runs, test)
    est, se = float(fit.params[name]), float(fit.bse[name])
    if not (math.isfinite(se) and se > 0):
        return StatResult.refused(f"no clustered error for {name}", runs, test)
    return StatResult.from_t(est, se, runs - 1, n_runs=runs, test=test, note=note, extra=extra)


def factor_effect(
    df: pl.DataFrame,
    metric: str = EVAL_AVG,
    axis: str = LR_SUM,
    factor: str = "n",
    term: str = "main",
    adjust: tuple[str, ...] = (),
) -> StatResult:
    """The effect of log2 `factor` on `metric` at equal `axis` (`ROLLOUTS`: compute; `LR_SUM`:
    Σlr): OLS of `metric` on log2 `factor` + a smooth function of log2 `axis` (`SHAPE`) + the
    design levels, over every checkpoint after step 0, errors clustered by run. `term`: `main`
    (per doubling of the factor), `slope` (its change per doubling of the axis, log2 axis
    centred) or `curvature` (per doubling², the fit then holding both interactions).
    `adjust`: further columns held equal (linear terms). `extra["r2_axis"]`: the R² of the
    smooth function of log2 axis alone."""
    test = (
        f"OLS of {_short(metric)} on log2 {factor} + a spline in log2 {AXES.get(axis, axis)}"
        " + design levels over the checkpoints after step 0, errors clustered by run"
    )
    frame = with_lr_sum(df)
    need = (metric, axis, factor, STEP, *adjust)
    if any(c not in frame.columns for c in need) or RUN_KEY not in frame.columns:
        return StatResult.refused(f"needs columns {', '.join(need)} and {RUN_KEY}", test=test)
    rows = frame.filter(
        (pl.col(STEP) > 0) & pl.col(metric).is_finite() & (pl.col(axis).cast(pl.Float64) > 0)
    )
    runs = rows[RUN_KEY].n_unique() if rows.height else 0
    if rows.height == 0 or rows[factor].n_unique() < 2 or runs < 6:
        return StatResult.refused(f"needs 2 values of {factor} and 6 runs after step 0", runs, test)
    u = np.log2(rows[axis].cast(pl.Float64).to_numpy())
    data = {
        "y": rows[metric].cast(pl.Float64).to_numpy(),
        "x": np.log2(rows[factor].cast(pl.Float64).to_numpy()),
        "u": u - u.mean(),
        **{c: rows[c].to_numpy() for c in DESIGN if c in rows.columns and c != factor},
        **{c: rows[c].cast(pl.Float64).to_numpy() for c in adjust},
    }
    design = [*_design_terms(rows, factor), *adjust]
    inter = {"main": [], "slope": ["x:u"], "curvature": ["x:u", "x:I(u ** 2)"]}[term]
    formula = " + ".join(["y ~ x", SHAPE, *inter, *design])
    alone = cluster_ols(f"y ~ {SHAPE}", data, rows[RUN_KEY].to_numpy())
    fit = cluster_ols(formula, data, rows[RUN_KEY].to_numpy())
    return _result(
        fit, TERMS[term], runs, test, r2_axis=float(alone.rsquared), r2=float(fit.rsquared)
    )


def _levels(runs: list[np.ndarray], n_levels: int) -> np.ndarray:
    """`n_levels` levels inside the range most runs span: between the median of their minima
    and the median of their maxima (end points left out)."""
    lo = float(np.median([r.min() for r in runs]))
    hi = float(np.median([r.max() for r in runs]))
    return np.linspace(lo, hi, n_levels + 2)[1:-1] if hi > lo else np.array([])


def at_equal_level(
    df: pl.DataFrame,
    metric: str,
    level: str = EVAL_AVG,
    factor: str = "n",
    n_levels: int = N_LEVELS,
) -> StatResult:
    """`metric` per doubling of `factor` at equal `level` (avg@4): each run's `metric`
    interpolated (linearly, its checkpoints ordered by `level`, step 0 included) at
    `n_levels` common levels inside its own range, then OLS on log2 `factor` + a level per
    avg@4 level + the design levels, errors clustered by run."""
    test = (
        f"each run's {_short(metric)} interpolated at {n_levels} common {_short(level)} levels "
        f"along its curve; OLS on log2 {factor} + level and design levels, clustered by run"
    )
    if metric == level:
        return StatResult.refused(f"{metric} is the level itself", test=test)
    need = (metric, level, factor, RUN_KEY)
    if any(c not in df.columns for c in need):
        return StatResult.refused(f"needs columns {', '.join(need)}", test=test)
    rows = df.filter(pl.col(metric).is_finite() & pl.col(level).is_finite())
    keep = [c for c in DESIGN if c in rows.columns]
    per_run = (
        rows.sort(STEP)
        .group_by(RUN_KEY, maintain_order=True)
        .agg(pl.col(level), pl.col(metric), *[pl.col(c).first() for c in keep if c != RUN_KEY])
    )
    curves = [np.asarray(v, float) for v in per_run[level].to_list()]
    grid = _levels(curves, n_levels) if curves else np.array([])
    out = []
    for rec, a in zip(per_run.iter_rows(named=True), curves, strict=True):
        order = np.argsort(a, kind="stable")
        a_s, w_s = a[order], np.asarray(rec[metric], float)[order]
        inside = grid[(grid >= a_s[0]) & (grid <= a_s[-1])]
        for i, lv in enumerate(inside):
            out.append(
                {
                    RUN_KEY: rec[RUN_KEY],
                    "lvl": f"{lv:.4f}",
                    "i": i,
                    "y": float(np.interp(lv, a_s, w_s)),
                    **{c: rec[c] for c in keep},
                }
            )
    table = pl.DataFrame(out) if out else pl.DataFrame()
    runs = table[RUN_KEY].n_unique() if table.height else 0
    if runs < 6 or table[factor].n_unique() < 2:
        return StatResult.refused(
            f"{runs} runs cross the common {_short(level)} levels: needs 6 over 2 values of "
            f"{factor}",
            runs,
            test,
        )
    data = {
        "y": table["y"].to_numpy(),
        "x": np.log2(table[factor].cast(pl.Float64).to_numpy()),
        "lvl": table["lvl"].to_numpy(),
        **{c: table[c].to_numpy() for c in DESIGN if c in table.columns and c != factor},
    }
    terms = _design_terms(table, factor)
    formula = " + ".join(["y ~ x", *(["C(lvl)"] if len(grid) > 1 else []), *terms])
    fit = cluster_ols(formula, data, table[RUN_KEY].to_numpy())
    span = f"{_short(level)} {grid[0]:.3f}–{grid[-1]:.3f}"
    return _result(fit, "x", runs, f"{test} ({span})", levels=grid.tolist())


def describe(result: StatResult, digits: int = 2) -> str:
    """`+0.012 (96% CI [+0.004, +0.020])`, or `not read (<why>)`."""
    if not result.ran or result.interval is None:
        return f"not read ({result.note})"
    lo, hi = result.interval
    return f"{result.estimate:+.{digits}g} ({CI_LEVEL} CI [{lo:+.{digits}g}, {hi:+.{digits}g}])"


def readings(
    df: pl.DataFrame,
    metric: str = EVAL_AVG,
    factor: str = "n",
    term: str = "main",
    companions: tuple[str, ...] = (EVAL_WORST, EVAL_BEST),
    level: str = EVAL_AVG,
    prefix: str = "secondary readings (issue 45): ",
) -> tuple[str, dict[str, float]]:
    """A claim's secondary readings as a sentence and numbers: `factor`'s effect on `metric`
    (`term`) at equal C and at equal Σlr (`factor_effect`), and at equal `level`
    (`at_equal_level`) of `metric` — or of each of `companions` where `metric` is the level."""

    def per(axis: str) -> str:
        return {
            "main": f"per doubling of {factor}",
            "slope": f"per doubling of {factor} per doubling of {axis}",
            "curvature": f"per doubling of {factor} per (doubling of {axis})²",
        }[term]

    at_c = factor_effect(df, metric, ROLLOUTS, factor, term)
    at_lr = factor_effect(df, metric, LR_SUM, factor, term)
    numbers = {f"{term}_at_equal_C": at_c.estimate, f"{term}_at_equal_lr_sum": at_lr.estimate}
    r2 = at_lr.extra.get("r2_axis")
    fit = f" (Σlr alone explains R² = {r2:.2f} of it)" if r2 is not None else ""
    parts = [
        f"at equal C: {describe(at_c)} {_short(metric)} {per('C')}",
        f"at equal Σlr: {describe(at_lr)} {per('Σlr')}{fit}",
    ]
    shown = [metric] if metric != level else [c for c in companions if c in df.columns]
    eq = []
    for m in shown:
        r = at_equal_level(df, m, level, factor)
        numbers[f"at_equal_avg_{_short(m)}"] = r.estimate
        eq.append(f"{_short(m)} {describe(r)}")
    if eq:
        parts.append(f"at equal {_short(level)}: {'; '.join(eq)} per doubling of {factor}")
    return prefix + "; ".join(parts), numbers
