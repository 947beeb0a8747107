"""Regressions over the learning curves: how the value of a larger n changes as compute grows,
from every evaluation of every run, not only the last.

`curve_interaction` reads the layout of `isolab.tracking.runs.load_runs` (one row per run ×
evaluation), keeps the evaluations after step 0, and works on log2 scales centred on the data
(`_curve_frame`). A run's evaluations share its seed, so they are not independent: the test
reduces each run to one number and compares runs (two stages).

It was the test of "n* grows" and of the fixed-batch trade-off; since issue 27 those are the
shift of the optimum itself (`isolab.verdicts.vertex`) and the fixed-B pairs
(`isolab.study.n_vs_bp.fixed_batch`), and the interaction is the secondary reading of "n* grows"
(an interaction of a concave curve moves its vertex by the cross-partial over the curvature,
but a compute shift of saturating curves makes one too: see `isolab.verdicts.calibration`'s
structured nulls).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from isolab.table import as_float, run_column
from isolab.verdicts.ols import hc3_ols
from isolab.verdicts.result import StatResult
from isolab.vocab import ROLLOUTS, STEP


def _curve_frame(
    df: pl.DataFrame, y: pl.Expr, x: str, compute: str, covariates: Sequence[str]
) -> tuple[pl.DataFrame, dict[str, float]]:
    """Rows after step 0 with `y`, centred log2 of `x`, of `compute` and of the covariates,
    a checkpoint id (log2 compute rounded) and the run as cluster."""
    key = run_column(df)
    rows = df.filter((pl.col(STEP) > 0) & pl.col(compute).is_finite() & (pl.col(compute) > 0))
    rows = rows.with_columns(y=y).filter(pl.col("y").is_finite())
    logs = {c: rows[c].cast(pl.Float64).log(2) for c in (x, compute, *covariates)}
    centres = {c: as_float(v.mean()) if len(v) else 0.0 for c, v in logs.items()}
    frame = pl.DataFrame(
        {
            "y": rows["y"],
            "xn": logs[x] - centres[x],
            "xc": logs[compute] - centres[compute],
            **{f"z{i}": logs[c] - centres[c] for i, c in enumerate(covariates)},
            "cp": (logs[compute] * 20).round().cast(pl.Int64).cast(pl.String),
            "run": rows[key].cast(pl.String),
        }
    )
    return frame, centres


def _run_level(frame: pl.DataFrame, powers: Sequence[int]) -> tuple[pl.DataFrame, list[str]]:
    """Per run: the coefficients of its own evaluations (minus every run's mean at the same
    checkpoint) on (log2 C)^k for k in `powers` (0: its mean gap to the average curve), with
    its `xn` and covariates. One row per run: runs are independent, checkpoints of one run
    are not, so the second stage compares runs."""
    centred = frame.with_columns(y=pl.col("y") - pl.col("y").mean().over("cp"))
    cov = [c for c in frame.columns if c.startswith("z")]
    rows = []
    for (run,), g in centred.group_by(["run"], maintain_order=True):
        xc = g["xc"].to_numpy()
        X = np.column_stack([xc**k for k in sorted({0, *powers})])
        if len(g) < X.shape[1] or np.linalg.matrix_rank(X) < X.shape[1]:
            continue
        coef = np.linalg.lstsq(X, g["y"].to_numpy(), rcond=None)[0]
        order = sorted({0, *powers})
        rows.append(
            {
                "run": run,
                "xn": g["xn"][0],
                **{c: g[c][0] for c in cov},
                **{f"b{k}": coef[order.index(k)] for k in powers},
            }
        )
    return pl.DataFrame(rows), cov


def _two_stage(
    frame: pl.DataFrame, powers: tuple[int, ...], target: str, x: str, what: str
) -> StatResult:
    """Second stage: the run-level coefficient `target` regressed on log2 x and the
    covariates across runs (OLS, HC3); the result is the slope in log2 x.

    Why two stages rather than one regression on every evaluation: a run's evaluations share
    its seed, so its whole curve sits above or below the average together; a one-stage fit
    would count each of its checkpoints as fresh evidence. Reducing each run to one summary
    (its trend, bend or mean gap against the average curve; the "summary measures" of Matthews
    et al. 1990, https://doi.org/10.1136/bmj.300.6719.230) leaves one independent row per run,
    and the second stage's degrees of freedom count runs, which is what the design replicates.
    Subtracting the checkpoint means first removes the shared learning curve without assuming
    its shape."""

    runs, cov = _run_level(frame, powers)
    if runs.height < len(cov) + 4:
        return StatResult.refused(
            f"needs ≥ {len(cov) + 4} runs with enough evaluations", runs.height
        )
    formula = f"{target} ~ xn" + "".join(f" + {c}" for c in cov)
    fit = hc3_ols(formula, runs.to_pandas())
    est, se = float(fit.params["xn"]), float(fit.bse["xn"])
    return StatResult.from_t(
        est,
        se,
        float(fit.df_resid),
        n_runs=runs.height,
        test=f"{what}, regressed on log2 {x} across {runs.height} runs (OLS, HC3, "
        f"{fit.df_resid:.0f} df)",
    )


def curve_interaction(
    df: pl.DataFrame,
    metric: str,
    x: str = "n",
    compute: str = ROLLOUTS,
    covariates: Sequence[str] = (),
    term: str = "linear",
) -> StatResult:
    """How the value of doubling `x` changes as compute doubles.

    Two stages: each run's evaluations, minus the mean of every run at the same checkpoint, are
    regressed on log2 C (`term = "linear"`: the run's trend against the average curve) or on
    log2 C and (log2 C)² (`"quadratic"`: its bend); across runs, that coefficient is regressed
    on log2 x and the covariates (OLS, HC3 errors, one row per run). The slope in log2 x is
    the interaction log2 x × log2 C (or × (log2 C)²): positive when larger x gains relative to
    smaller x as compute grows, i.e. the best x grows with compute (for a concave curve in
    log2 x the optimum moves by the cross-partial over the curvature)."""
    frame, _ = _curve_frame(df, pl.col(metric), x, compute, covariates)
    if frame.height == 0 or frame["xn"].n_unique() < 3 or frame["cp"].n_unique() < 3:
        return StatResult.refused(f"needs ≥ 3 values of {x} and ≥ 3 checkpoints after step 0")
    k = 1 if term == "linear" else 2
    what = "log2 C" if k == 1 else "(log2 C)²"
    return _two_stage(
        frame,
        (1, 2) if k == 2 else (1,),
        f"b{k}",
        x,
        f"two-stage: each run's {what} coefficient against the average curve",
    )
