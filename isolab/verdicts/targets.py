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

`world` draws runs on a sweep's design with each target's measured level, curvature, seed
spread and their correlation, and vertices as stated: what `isolab.verdicts.calibration` runs
the claim's test on.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import polars as pl

from isolab.paths import bundle_dir
from isolab.verdicts.result import StatResult, t_quantile
from isolab.vocab import EVAL_AVG, ROLLOUTS

#: The second target: avg@4 on the shifted evaluation set.
SHIFTED = "eval-shifted/avg@4"


def final_rows(df: pl.DataFrame, metrics: tuple[str, ...]) -> pl.DataFrame:
    """Each run's last evaluation with every one of `metrics` finite."""
    ok = df.filter(pl.all_horizontal(pl.col(m).is_finite() for m in metrics) & (pl.col("step") > 0))
    return ok.filter(pl.col(ROLLOUTS) == pl.col(ROLLOUTS).max().over("run_key")).unique(
        "run_key", keep="last", maintain_order=True
    )


def quadratic_design(rows: pl.DataFrame) -> tuple[np.ndarray, float, np.ndarray]:
    """(X: 1, x, x², a level per seed; the centre of x = log2 n; x)."""
    x = np.log2(rows["n"].to_numpy().astype(float))
    centre = float(np.mean(np.unique(x)))
    xc = x - centre
    cols = [np.ones(len(x)), xc, xc**2]
    if "seed" in rows.columns and rows["seed"].n_unique() > 1:
        seeds = rows["seed"].to_numpy()
        cols += [(seeds == s).astype(float) for s in np.unique(seeds)[1:]]
    return np.column_stack(cols), centre, x


def vertex(b: float, c: float, centre: float) -> tuple[float, np.ndarray]:
    """The vertex (log2 n) of `centre`-centred `a + b·x + c·x²`, and its gradient in (b, c) for
    the delta method (NaN where c = 0)."""
    if c == 0:
        return math.nan, np.full(2, np.nan)
    return centre - b / (2 * c), np.array([-1 / (2 * c), b / (2 * c**2)])


def unlocated(name: str, c: float, c_half: float, v: float, lo: float, hi: float) -> str:
    """Why the vertex `v` of curvature `c` (± `c_half`, its interval's half-width) has no
    position on the grid log2 n ∈ (`lo`, `hi`) — or "" where it has one."""
    if not c + c_half < 0:
        return f"{name}: curvature not resolved ({c:+.3g} ± {c_half:.2g})"
    if not lo < v < hi:
        return f"{name}: optimum n ≈ {2**v:.3g} outside the grid (n {2**lo:g} … {2**hi:g})"
    return ""


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
        v, grad = vertex(b, c, centre)
        vertices.append(v)
        grads.append(grad)
        why.append(unlocated(name, c, q * math.sqrt(S[m, m] * XtX_inv[2, 2]), v, lo, hi))
    why = [w for w in why if w]
    note = ", ".join(f"n* ≈ {2**v:.3g} under {name}" for v, name in zip(vertices, (first, second),
                                                                       strict=True)
                     if math.isfinite(v) and abs(v) < 60)  # fmt: skip
    if why:
        return StatResult.refused("both optima must be interior: " + "; ".join(why)
                                  + (f" ({note}); " if note else "; ") + _slopes(rows, Y),
                                  rows.height, test)  # fmt: skip
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


@cache
def shipped_rows(sweep: str = "targets", second: str = SHIFTED) -> pl.DataFrame:
    """The last evaluations of nstar's committed cpu sweep `sweep` (the same bytes everywhere)."""
    df = pl.read_parquet(bundle_dir() / "runs" / "nstar" / "cpu" / sweep / "runs.parquet")
    return final_rows(df, (EVAL_AVG, second))


@cache
def measured(sweep: str = "targets", second: str = SHIFTED) -> dict[str, float]:
    """Per target, the quadratic's level and curvature and the residual SD, and the targets'
    residual correlation, on `sweep`'s runs (what `world` draws with)."""
    rows = shipped_rows(sweep, second)
    X, centre, _ = quadratic_design(rows)
    Y = np.column_stack([rows[EVAL_AVG].to_numpy(), rows[second].to_numpy()]).astype(float)
    B = np.linalg.lstsq(X, Y, rcond=None)[0]
    E = Y - X @ B
    S = E.T @ E / (len(Y) - X.shape[1])
    out = {"centre": centre, "corr": float(S[0, 1] / math.sqrt(S[0, 0] * S[1, 1]))}
    for m, name in enumerate(("first", "second")):
        c = min(float(B[2, m]), -1e-4)
        v = centre - float(B[1, m]) / (2 * c)
        level = float(np.mean(Y[:, m]))
        out |= {f"{name}_c": c, f"{name}_sd": float(math.sqrt(S[m, m])), f"{name}_v": v,
                f"{name}_level": level}  # fmt: skip
    return out


#: Worlds: the second target's vertex relative to the first's (doublings of n), how its
#: curvature compares to the first's, and the first's curvature (None: as measured; the
#: second's then as measured too, times the factor).
WORLDS: dict[str, tuple[float, float, float | None]] = {
    "same": (0.0, 1.0, None),  # one optimum for both targets: the null
    "same-flatter": (0.0, 0.5, None),  # one optimum, the second target half as curved
    "apart": (1.5, 1.0, None),  # the planted effect: the second's optimum 1.5 doublings higher
    # what a more curved response would show: both at −0.006 per doubling² (nstar main's Hard
    # validation over n = 2 … 128 at B_p = 16 is about −0.004)
    "same-curved": (0.0, 1.0, -0.006),
    "apart-curved": (1.5, 1.0, -0.006),
}


def world(
    kind: str, seed: int, sweep: str = "targets", second: str = SHIFTED
) -> dict[str, pl.DataFrame]:
    """One simulated `sweep`: its runs' last evaluations redrawn under both targets (validation
    and `second`) as quadratics in log2 n with the measured levels, curvatures, residual SDs
    and correlation, the first target's vertex at its measured place (kept inside the grid) and
    the second's as `WORLDS` says, plus a level per seed shared by both targets."""
    shift, flatten, curvature = WORLDS[kind]
    rows = shipped_rows(sweep, second)
    p = measured(sweep, second)
    rng = np.random.default_rng(seed)
    x = np.log2(rows["n"].to_numpy().astype(float))
    lo, hi = float(x.min()), float(x.max())
    v1 = float(np.clip(p["first_v"], lo + 0.75, hi - 2.25))
    v2 = v1 + shift
    cov = np.array([[p["first_sd"] ** 2, p["corr"] * p["first_sd"] * p["second_sd"]],
                    [p["corr"] * p["first_sd"] * p["second_sd"], p["second_sd"] ** 2]])  # fmt: skip
    noise = rng.multivariate_normal(np.zeros(2), cov, size=len(x))
    seeds = rows["seed"].to_numpy()
    offset = {s: rng.normal(0, 0.5 * p["first_sd"]) for s in np.unique(seeds)}
    common = np.array([offset[s] for s in seeds])
    c1 = p["first_c"] if curvature is None else curvature
    c2 = flatten * (p["second_c"] if curvature is None else curvature)
    y1 = p["first_level"] + c1 * (x - v1) ** 2 + noise[:, 0] + common
    y2 = p["second_level"] + c2 * (x - v2) ** 2 + noise[:, 1] + common
    return {sweep: rows.with_columns(pl.Series(EVAL_AVG, y1), pl.Series(second, y2))}
