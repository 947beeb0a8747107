"""Evaluation targets that disagree (issue 31, part 2; Wilhelm & Kao): does the n that is best on
the training reward's own validation set also win on another target — here pass rates on a
shifted distribution the policy never trains on (`eval_sets: {shifted: "arithmetic:max_terms=3"}`),
and a judge of process quality (`eval_judge: tiny-prm`: `eval/judge`, its mean score)?

`optimum_difference` is the claim's test. Each run's last evaluation under both targets, the
same runs: per target, OLS of the value on a quadratic in log2 n (centred) plus a level per seed
(seeds cross the arms, so a seed's data order drops out), the two fits' errors correlated as the
runs' residuals are (the same regressors, so the joint covariance is Σ ⊗ (XᵀX)⁻¹). Each target's
optimum is the quadratic's vertex; the difference of the two, by the delta method with that
joint covariance, is the effect (doublings of n). Tested only where both curvatures are resolved
(the upper end of their interval below 0) and both vertices lie inside the grid: an optimum at
an edge has no position to compare, and a flat curve has none at all.

`isolab.study.targets.worlds` draws runs on a sweep's design with each target's measured level,
curvature, seed spread and their correlation, and vertices as stated: what the calibration runs
the claim's test on.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from isolab.verdicts.quadratic import final_rows, quadratic_design, quadratic_vertex, unlocated
from isolab.verdicts.result import StatResult, t_quantile
from isolab.vocab import EVAL_AVG, EVAL_SHIFTED_AVG

#: The second target: avg@4 on the shifted evaluation set.
SHIFTED = EVAL_SHIFTED_AVG


def optimum_difference(
    df: pl.DataFrame, first: str = EVAL_AVG, second: str = SHIFTED
) -> StatResult:
    """log2 n* under `first` − log2 n* under `second`, from the same runs (module docstring)."""
    test = (
        f"vertex of a quadratic in log2 n (+ a level per seed) of each run's last {first} and "
        f"{second}, the two fits' errors correlated as their residuals (delta method): "
        "log2 n* difference"
    )
    missing = [m for m in (first, second) if m not in df.columns]
    if missing:
        return StatResult.refused(f"no {', '.join(missing)} in these runs", test=test)
    if "n" not in df.columns:
        return StatResult.refused("no n column in these runs", test=test)
    rows = final_rows(df, (first, second))
    if rows.height == 0 or rows["n"].n_unique() < 4:
        return StatResult.refused(
            f"{rows.height} runs over {rows['n'].n_unique() if rows.height else 0} values of n: "
            "a vertex needs 4 values of n or more",
            rows.height,
            test,
        )
    X, centre, x = quadratic_design(rows)
    dof = rows.height - int(np.linalg.matrix_rank(X))
    if dof < 3:
        return StatResult.refused(
            f"{rows.height} runs: too few to fit two vertices", rows.height, test
        )
    XtX_inv = np.linalg.pinv(X.T @ X)
    Y = np.column_stack([rows[first].to_numpy(), rows[second].to_numpy()]).astype(float)
    B = XtX_inv @ X.T @ Y
    E = Y - X @ B
    S = E.T @ E / dof
    lo, hi = float(x.min()), float(x.max())
    q = t_quantile(dof)
    vertices, grads, why = [], [], []
    for m, name in enumerate((first, second)):
        b, c = float(B[1, m]), float(B[2, m])
        v, grad = quadratic_vertex(b, c, centre)
        vertices.append(v)
        grads.append(grad)
        why.append(unlocated(name, c, q * math.sqrt(S[m, m] * XtX_inv[2, 2]), v, lo, hi))
    why = [w for w in why if w]
    note = ", ".join(
        f"n* ≈ {2**v:.3g} under {name}"
        for v, name in zip(vertices, (first, second), strict=True)
        if math.isfinite(v) and abs(v) < 60
    )
    if why:
        return StatResult.refused(
            "both optima must be interior: "
            + "; ".join(why)
            + (f" ({note}); " if note else "; ")
            + _slopes(rows, Y),
            rows.height,
            test,
        )
    V = XtX_inv[1:3, 1:3]
    var = (
        S[0, 0] * grads[0] @ V @ grads[0]
        + S[1, 1] * grads[1] @ V @ grads[1]
        - 2 * S[0, 1] * grads[0] @ V @ grads[1]
    )
    corr = S[0, 1] / math.sqrt(S[0, 0] * S[1, 1]) if S[0, 0] > 0 and S[1, 1] > 0 else math.nan
    return StatResult.from_t(
        vertices[0] - vertices[1],
        math.sqrt(max(var, 0.0)),
        float(dof),
        n_runs=rows.height,
        test=f"{test} ({dof} df)",
        note=f"{note}; residual correlation of the targets {corr:.2f}",
        extra={"log2_n_star": dict(zip((first, second), vertices, strict=True)), "corr": corr},
    )


def _slopes(rows: pl.DataFrame, Y: np.ndarray) -> str:
    """The boundary-proof reading: each target's linear slope in log2 n (+ a level per seed)
    with its interval, defined whether or not an optimum is interior."""
    X, _, _ = quadratic_design(rows)
    X = np.delete(X, 2, axis=1)  # no x²
    dof = len(Y) - int(np.linalg.matrix_rank(X))
    XtX_inv = np.linalg.pinv(X.T @ X)
    B = XtX_inv @ X.T @ Y
    E = Y - X @ B
    q = t_quantile(dof) if dof > 0 else math.nan
    parts = []
    for m in range(Y.shape[1]):
        se = math.sqrt(float(E[:, m] @ E[:, m]) / dof * XtX_inv[1, 1]) if dof > 0 else math.nan
        parts.append(f"{B[1, m]:+.3f} ± {q * se:.3f}")
    return "secondary reading, slope per doubling of n (first, second target): " + ", ".join(parts)
