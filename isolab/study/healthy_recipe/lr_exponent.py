"""How the best learning rate grows with the batch: the exponent e of lr*(B) ∝ B^e, estimated
from a grid of (B, lr) runs and compared with the three rules the IsoCompute Playbook weighed —
constant (e = 0), sqrt (e = ½, its pick) and linear (e = 1) (issue 46).

Why the exponent, not a contest of rules. The old test ran each rule at one lr_base and compared
final avg@4 between rules at each B: a rule loses wherever it pushes the lr past the stability
edge, so the contest says which rule sat nearer that edge at that lr_base, not how the optimum
moves with B. The exponent is what the rules disagree about.

The test (`best_lr_exponent`), one row per run (its last evaluation): per batch B a quadratic in
log2 lr (centred on that B's lrs), with a level per B and one per seed (a seed fixes the data
order at every B), fitted as one OLS with HC3 errors. B's best lr is the quadratic's vertex,
with the delta method's error; it counts only where the curvature is negative at p < α and the
vertex and its interval lie inside that B's lrs (an optimum at the grid's edge is an
extrapolation, as in `isolab.verdicts.vertex`). The exponent is the least-squares slope of the
located vertices on log2 B, its variance the delta method's on the fit's joint covariance; at
least two B must locate their optimum. A design without seed replicates (the lr pilot) has no
residual to estimate the noise from: give `noise_sd` (one run's SD of the final metric, as
`isolab.verdicts.noise` measured it on the same testbed) and the covariance is σ²(XᵀX)⁻¹.

The call. If lr*(B) ∝ B^e, a rule lr ∝ B^r misses the optimum by |e − r|·log2(B / B_base)
doublings, so, for a response symmetric in log2 lr, sqrt beats constant and linear at every B
exactly when |e − ½| < ¼. The claim is therefore an equivalence (the shape of
`isolab.study.n_vs_bp.fixed_batch.bp_equivalence`): the two one-sided tests put e inside
(½ − `MARGIN`, ½ + `MARGIN`) (agrees), or a one-sided test puts it beyond (disagrees). The note
gives the p-values of e = 0, ½ and 1.

`isolab.study.healthy_recipe.worlds.study_world` draws the pre-registered grid's runs with a
planted exponent, for the calibration.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import polars as pl
from scipy import stats

from isolab.table import as_int, final_rows
from isolab.verdicts.ols import hc3_arrays
from isolab.verdicts.result import ALPHA, StatResult, min_detectable, t_quantile
from isolab.vocab import EVAL_AVG

#: The exponent of the Playbook's rule (η ∝ sqrt(B)), and how far from it sqrt still beats both
#: rivals: halfway to constant (0) and to linear (1).
SQRT, MARGIN = 0.5, 0.25
#: The rules the exponent is compared with.
RULES = {"constant": 0.0, "sqrt": 0.5, "linear": 1.0}
#: The pre-registered re-run on the new testbed (issue 46), relative to the bundle.
SPEC = "studies/healthy-recipe/cpu/lr-grid.yaml"


@dataclass(frozen=True)
class BatchOptimum:
    """One batch's best lr: the vertex (log2 lr) and its SE, the curvature (per doubling² of
    lr) with its p-value, the lrs run (log2), and why it does not count (empty: it does)."""

    B: int
    vertex: float
    se: float
    curvature: float
    curvature_se: float
    p_curvature: float
    lo: float
    hi: float
    why: str


def _batch(df: pl.DataFrame) -> pl.DataFrame:
    return df if "B" in df.columns else df.with_columns(B=pl.col("n") * pl.col("B_p"))


def _design(rows: pl.DataFrame) -> tuple[np.ndarray, list[int], dict[int, float]]:
    """Columns: per B a level, a centred log2 lr and its square; then a level per seed but the
    first. Returns X, the batches in order and each batch's centre."""
    batch = rows["B"].to_numpy()
    u = np.log2(rows["lr"].to_numpy().astype(float))
    batches = sorted(set(batch.tolist()))
    centre = {b: float(u[batch == b].mean()) for b in batches}
    cols = []
    for b in batches:
        on = (batch == b).astype(float)
        uc = (u - centre[b]) * on
        cols += [on, uc, uc**2]
    if "seed" in rows.columns and rows["seed"].n_unique() > 1:
        seeds = rows["seed"].cast(pl.String).to_numpy()
        cols += [(seeds == s).astype(float) for s in np.unique(seeds)[1:]]
    return np.column_stack(cols), batches, centre


def _fit(
    rows: pl.DataFrame, metric: str, noise_sd: float | None
) -> tuple[np.ndarray, np.ndarray, float, list[int], dict[int, float]]:
    """Coefficients, covariance (HC3, or σ²(XᵀX)⁻¹ with `noise_sd`) and the t reference's df
    (inf with a known σ)."""
    X, batches, centre = _design(rows)
    y = rows[metric].to_numpy().astype(float)
    if noise_sd is None:
        beta, cov, dof = hc3_arrays(X, y)
        return beta, cov, float(dof), batches, centre
    XtX_inv = np.linalg.pinv(X.T @ X)
    return XtX_inv @ X.T @ y, noise_sd**2 * XtX_inv, math.inf, batches, centre


def _optima(
    beta: np.ndarray,
    cov: np.ndarray,
    dof: float,
    batches: list[int],
    centre: dict[int, float],
    rows: pl.DataFrame,
) -> tuple[list[BatchOptimum], list[np.ndarray]]:
    """Each batch's vertex with its gradient in the coefficients, and whether it counts."""
    out, grads = [], []
    u = np.log2(rows["lr"].to_numpy().astype(float))
    batch = rows["B"].to_numpy()
    for i, b in enumerate(batches):
        j = 3 * i
        b1, b2 = float(beta[j + 1]), float(beta[j + 2])
        se2 = math.sqrt(max(cov[j + 2, j + 2], 0.0)) if np.isfinite(cov[j + 2, j + 2]) else math.nan
        p2 = float(2 * stats.t.sf(abs(b2 / se2), dof)) if se2 > 0 else math.nan
        grad = np.zeros(len(beta))
        if b2 != 0:  # v = centre − b1 / (2 b2): ∇ = (−1/(2 b2), b1/(2 b2²))
            grad[j + 1], grad[j + 2] = -1 / (2 * b2), b1 / (2 * b2**2)
        v = centre[b] - b1 / (2 * b2) if b2 != 0 else math.nan
        se = math.sqrt(max(float(grad @ cov @ grad), 0.0)) if np.all(np.isfinite(cov)) else math.nan
        lo, hi = float(u[batch == b].min()), float(u[batch == b].max())
        q = t_quantile(dof) if math.isfinite(dof) else float(stats.norm.ppf(1 - ALPHA / 2))
        if not (b2 < 0 and p2 < ALPHA):
            why = f"curvature {b2:+.3g} ± {se2:.2g} per doubling² of lr, not a located maximum"
        elif not (lo < v - q * se and v + q * se < hi):
            why = (
                f"best lr ≈ {2**v:.3g} at or beyond the edge of its lrs [{2**lo:.3g}, {2**hi:.3g}]"
            )
        else:
            why = ""
        out.append(BatchOptimum(int(b), v, se, b2, se2, p2, lo, hi, why))
        grads.append(grad)
    return out, grads


def _argmax_exponent(rows: pl.DataFrame, metric: str) -> float:
    """The slope on log2 B of log2 of each batch's best lr on the grid (seed means): the reading
    a design too noisy or too narrow to locate an optimum still gives, without an interval."""
    best = (
        rows.group_by("B", "lr")
        .agg(pl.col(metric).mean())
        .sort(metric, descending=True)
        .group_by("B", maintain_order=True)
        .head(1)
    )
    if best.height < 2:
        return math.nan
    x = np.log2(best["B"].to_numpy().astype(float))
    return float(np.polyfit(x, np.log2(best["lr"].to_numpy().astype(float)), 1)[0])


def best_lr_exponent(
    df: pl.DataFrame, metric: str = EVAL_AVG, noise_sd: float | None = None
) -> StatResult:
    """The exponent e of lr*(B) ∝ B^e on a (B, lr) grid, tested for equivalence with sqrt
    (|e − ½| < `MARGIN`; see the module's docstring). `noise_sd`: one run's SD of the final
    `metric`, for a design without seed replicates. `extra`: `p_beyond`, the p-values of each
    rule's exponent (`p_constant`, `p_sqrt`, `p_linear`), the grid-argmax exponent and each
    batch's optimum."""
    test = (
        f"per batch B, a quadratic in log2 lr of each run's final {metric} (a level per B and "
        f"per seed; {'HC3' if noise_sd is None else f'known noise SD {noise_sd:.3g}'}); the "
        "best lr per B its vertex (delta method), the exponent the slope of log2 lr* on log2 B; "
        f"two one-sided tests of |e − {SQRT}| < {MARGIN}"
    )
    if any(c not in df.columns for c in ("lr", metric)):
        return StatResult.refused(f"needs columns lr and {metric}", test=test)
    rows = final_rows(_batch(df), metric)
    runs = rows.height
    lrs = rows.group_by("B").agg(pl.col("lr").n_unique().alias("k"))
    if lrs.height < 2 or as_int(lrs["k"].min()) < 3:
        return StatResult.refused(
            "needs ≥ 2 batches with ≥ 3 learning rates each (a grid of (B, lr) runs): "
            + ", ".join(f"B = {b}: {k} lr" for b, k in sorted(lrs.rows())),
            runs,
            test,
        )
    beta, cov, dof, batches, centre = _fit(rows, metric, noise_sd)
    if not dof > 0:
        return StatResult.refused(
            f"{runs} runs for {len(beta)} parameters and no seed replicates: give the noise SD",
            runs,
            test,
        )
    optima, grads = _optima(beta, cov, dof, batches, centre, rows)
    argmax = _argmax_exponent(rows, metric)
    extra = {"argmax_exponent": argmax, "optima": [asdict(o) for o in optima]}
    located = [i for i, o in enumerate(optima) if not o.why]
    where = "; ".join(
        f"B = {o.B}: " + (o.why or f"best lr {2**o.vertex:.3g} (log2 {o.vertex:.2f} ± {o.se:.2f})")
        for o in optima
    )
    if len(located) < 2:
        return StatResult(
            estimate=math.nan,
            se=math.nan,
            df=dof,
            p_value=None,
            interval=None,
            mde=math.nan,
            n_runs=runs,
            test=test,
            note=f"untested: the best lr is located at {len(located)} of {len(optima)} batches "
            f"({where}); the grid's own best lr per B gives e ≈ {argmax:.2f}, with no interval",
            extra=extra,
        )
    x = np.log2(np.array([optima[i].B for i in located], float))
    a = (x - x.mean()) / np.sum((x - x.mean()) ** 2)  # the slope as a combination of vertices
    e = float(sum(w * optima[i].vertex for w, i in zip(a, located, strict=True)))
    g = sum(w * grads[i] for w, i in zip(a, located, strict=True))
    se = math.sqrt(max(float(g @ cov @ g), 0.0))
    return _equivalence(e, se, dof, runs, test, where, extra)


def _equivalence(
    e: float, se: float, dof: float, runs: int, test: str, where: str, extra: dict
) -> StatResult:
    """The exponent's result: TOST p-value of |e − ½| < `MARGIN`, `p_beyond`, each rule's
    two-sided p-value, the interval at 1 − α."""
    ref = stats.t(dof) if math.isfinite(dof) else stats.norm()
    d = e - SQRT
    p_tost = float(max(ref.sf((d + MARGIN) / se), ref.sf((MARGIN - d) / se)))
    p_beyond = float(ref.sf((abs(d) - MARGIN) / se))
    q = float(ref.ppf(1 - ALPHA / 2))
    rules = {f"p_{name}": float(2 * ref.sf(abs(e - r) / se)) for name, r in RULES.items()}
    versus = ", ".join(
        f"e = {r:g} ({name}) p = {rules[f'p_{name}']:.2g}" for name, r in RULES.items()
    )
    return StatResult(
        estimate=e,
        se=se,
        df=dof,
        p_value=p_tost,
        interval=(e - q * se, e + q * se),
        mde=min_detectable(se, dof),
        n_runs=runs,
        test=test,
        note=f"exponent of the best lr in B: {e:.2f} ({1 - ALPHA:.0%} CI [{e - q * se:.2f}, "
        f"{e + q * se:.2f}]); {versus}; {where}",
        extra=extra | rules | {"p_beyond": p_beyond, "margin": MARGIN},
    )
