"""Frontier analysis: from a table of runs to the papers' allocation prescriptions.

Pure functions, DataFrames in and DataFrames (or small frozen dataclasses) out; no I/O, no plots.
Inputs may be polars or pandas frames in the layout of `isolab.runs.load_runs`; outputs are polars.

Sources:
- IsoCompute Playbook (Cheng et al., arXiv 2603.12151): compute in rollouts ``C = B_p·n·M``,
  frontier ``f(C) = max_{j: C_j ≤ C} R_j``, record-breaking points, per-n sigmoid fits, their
  upper envelope, the running-average ``n*(C)`` and a sigmoid of ``log n*`` against ``log C``.
- ScaleRL (Khatri et al., arXiv 2510.13786): ``R(C) = R0 + (A − R0) / (1 + (C_mid / C)^B)``.
- Where Should RL Post-Training Compute Go? (Wilhelm & Kao, arXiv 2607.13389): update fraction
  ``ρ = C_learning / C_total``, IsoFLOP comparisons per reward system, the RACE pilot protocol.
- Fitting practice after Epoch AI's `analyzing-chinchilla` (many starts, bootstrap CIs).
"""

from __future__ import annotations

import functools
import logging
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, ParamSpec, TypeVar

import numpy as np
import polars as pl
from scipy.special import expit

logger = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")

try:  # optional: BLAS threads only slow these small products down, badly on a busy machine
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn / scipy stacks
    threadpool_limits = None

_depth = threading.local()


def _single_threaded(fn: Callable[P, T]) -> Callable[P, T]:
    """Run `fn` with one BLAS thread (outermost call only). The fits multiply matrices of a few
    thousand entries, where OpenBLAS threads cost far more than they save (measured 30 ms vs
    0.03 ms per product on 2 busy cores)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        if threadpool_limits is None or getattr(_depth, "on", False):
            return fn(*args, **kwargs)
        _depth.on = True
        try:
            with threadpool_limits(1, user_api="blas"):
                return fn(*args, **kwargs)
        finally:
            _depth.on = False

    return wrapper


Status = Literal["ok", "extrapolated", "not identifiable"]

DEFAULT_X = "compute/rollouts"
DEFAULT_Y = "eval/avg@4"
DEFAULT_METRICS = ("eval/avg@4", "eval/best@4", "eval/worst@4")

# Columns that define a configuration (everything swept except the seed); the ones present in a
# frame are used to average seeds. Kept in sync with `RunConfig.resolved()` in isolab/config.py.
CONFIG_COLUMNS = (
    "model",
    "task",
    "split",
    "reward",
    "n",
    "B_p",
    "B",
    "M",
    "lr",
    "lr_base",
    "B_base",
    "lr_scaling",
    "recipe",
    "beta",
    "entropy_coef",
    "num_iterations",
    "lora_rank",
    "temperature",
    "max_completion_tokens",
)
# Columns that must hold one value for an n*(C) or trade-off analysis to mean anything.
SETTING_COLUMNS = ("model", "task", "split", "reward")

# Search grid of the sigmoid fit: log C_mid spans the data range widened by these many e-folds
# on each side, B spans [B_MIN, B_MAX] log-uniformly.
_U_PAD_LO = math.log(10.0)
_U_PAD_HI = 2 * math.log(10.0)
_B_MIN, _B_MAX = 0.05, 20.0
_GRID_U, _GRID_B = 72, 36


# ------------------------------------------------------------------------------------------
# The sigmoid law and its fit
# ------------------------------------------------------------------------------------------
def sigmoid(C: Any, R0: float, A: float, C_mid: float, B: float) -> np.ndarray:
    """ScaleRL's saturating law ``R(C) = R0 + (A − R0) / (1 + (C_mid / C)^B)`` (arXiv 2510.13786).

    ``R(0) = R0`` (the reward before training), ``R(∞) = A`` (the asymptote), ``R(C_mid)`` is
    halfway, ``B`` sets the steepness. Written as a logistic in ``log C``:
    ``(C_mid / C)^B = exp(B·(log C_mid − log C))``, which is how it is evaluated.
    """
    C = np.asarray(C, dtype=float)
    with np.errstate(divide="ignore"):
        x = np.log(C)
    return R0 + (A - R0) * expit(B * (x - math.log(C_mid)))


@dataclass(frozen=True)
class SigmoidFit:
    """A fitted ``R(C) = R0 + (A − R0) / (1 + (C_mid / C)^B)`` with bootstrap intervals.

    Attributes:
        R0, A, C_mid, B: point estimates (NaN when not identifiable).
        R0_ci, A_ci, C_mid_ci, B_ci: bootstrap percentile intervals at level `ci_level`.
        status: ``ok``; ``extrapolated`` (finite and describing the data, but a parameter lies
            outside what the data resolve, see `reason`); ``not identifiable`` (no fit).
        reason: why the status is not ``ok`` (empty when it is).
        n_points: points used after dropping NaNs and the early range.
        rmse: root-mean-square residual of the point estimate.
        C_range: smallest positive and largest compute of the points used.
        boot: bootstrap replicates, shape (n_boot, 4) in the order (R0, A, C_mid, B).
    """

    R0: float
    A: float
    C_mid: float
    B: float
    status: Status
    reason: str = ""
    n_points: int = 0
    rmse: float = float("nan")
    C_range: tuple[float, float] = (float("nan"), float("nan"))
    R0_ci: tuple[float, float] = (float("nan"), float("nan"))
    A_ci: tuple[float, float] = (float("nan"), float("nan"))
    C_mid_ci: tuple[float, float] = (float("nan"), float("nan"))
    B_ci: tuple[float, float] = (float("nan"), float("nan"))
    ci_level: float = 0.95
    boot: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def identifiable(self) -> bool:
        """True when a fit exists (status ``ok`` or ``extrapolated``)."""
        return self.status != "not identifiable"

    def predict(self, C: Any) -> np.ndarray:
        """The fitted curve at compute `C` (NaN when not identifiable)."""
        if not self.identifiable:
            return np.full(np.shape(C), np.nan)
        return sigmoid(C, self.R0, self.A, self.C_mid, self.B)

    def predict_band(self, C: Any) -> tuple[np.ndarray, np.ndarray]:
        """Pointwise bootstrap band of the curve at `C` (NaN without bootstrap replicates)."""
        C = np.asarray(C, dtype=float)
        if self.boot is None or not self.identifiable or len(self.boot) == 0:
            nan = np.full(C.shape, np.nan)
            return nan, nan
        curves = _predict_params(self.boot, C)
        q = (1 - self.ci_level) / 2
        return np.nanquantile(curves, q, axis=0), np.nanquantile(curves, 1 - q, axis=0)

    def to_dict(self) -> dict[str, Any]:
        """Flat record (one row of a DataFrame)."""
        out: dict[str, Any] = {}
        for name in ("R0", "A", "C_mid", "B"):
            out[name] = getattr(self, name)
            lo, hi = getattr(self, f"{name}_ci")
            out[f"{name}_lo"], out[f"{name}_hi"] = lo, hi
        out.update(status=self.status, reason=self.reason, n_points=self.n_points, rmse=self.rmse)
        return out


def _not_identifiable(reason: str, n_points: int = 0) -> SigmoidFit:
    nan = float("nan")
    return SigmoidFit(
        nan, nan, nan, nan, status="not identifiable", reason=reason, n_points=n_points
    )


def _predict_params(params: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Curves of many parameter rows (K, 4: R0, A, C_mid, B) at C → (K, len(C))."""
    with np.errstate(divide="ignore"):
        x = np.log(np.asarray(C, dtype=float))
    R0, A, C_mid, B = (params[:, i : i + 1] for i in range(4))
    return R0 + (A - R0) * expit(B * (x[None, :] - np.log(C_mid)))


def _solve_linear(
    S1: np.ndarray,
    S2: np.ndarray,
    Sy: np.ndarray,
    sw: np.ndarray,
    swy: np.ndarray,
    swyy: np.ndarray,
    r0: float | None,
    lo: float,
    hi: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Best (R0, A) in [lo, hi]² for fixed logistic values s, from weighted sums.

    The model ``y = R0·(1 − s) + A·s`` is linear in (R0, A) (variable projection), so each grid
    point of (C_mid, B) gets its exact constrained least-squares (R0, A) in closed form. Inputs are
    the sums Σws, Σws², Σwsy (shape G×K) and Σw, Σwy, Σwy² (shape K). A convex quadratic over a
    box is minimised either at its unconstrained minimum or on an edge: all candidates are
    evaluated and the best feasible one kept.
    """
    if r0 is not None:
        d = np.where(S2 > 1e-12, (Sy - r0 * S1) / np.maximum(S2, 1e-300), 0.0)
        A = np.clip(r0 + d, lo, hi)
        d = A - r0
        syy0 = swyy - 2 * r0 * swy + r0 * r0 * sw  # Σw(y−r0)²
        sse = syy0 - 2 * d * (Sy - r0 * S1) + d * d * S2
        return np.full_like(A, r0), A, sse

    # a = 1 − s, b = s
    Saa = sw - 2 * S1 + S2
    Sab = S1 - S2
    Sbb = S2
    Say = swy - Sy
    Sby = Sy

    def sse_of(R0: np.ndarray, A: np.ndarray) -> np.ndarray:
        return swyy - 2 * (R0 * Say + A * Sby) + R0 * R0 * Saa + 2 * R0 * A * Sab + A * A * Sbb

    det = Saa * Sbb - Sab * Sab
    ok = det > 1e-12 * np.maximum(Saa * Sbb, 1e-300)
    safe = np.where(ok, det, 1.0)
    R0_u = (Sbb * Say - Sab * Sby) / safe
    A_u = (Saa * Sby - Sab * Say) / safe
    feasible = ok & (R0_u >= lo) & (R0_u <= hi) & (A_u >= lo) & (A_u <= hi)
    best_R0 = np.where(feasible, R0_u, lo)
    best_A = np.where(feasible, A_u, lo)
    best = np.where(feasible, sse_of(R0_u, A_u), np.inf)
    for edge in (lo, hi):
        # R0 on an edge, A free in the box
        A_e = np.clip(
            np.where(Sbb > 1e-12, (Sby - edge * Sab) / np.maximum(Sbb, 1e-300), edge), lo, hi
        )
        s_e = sse_of(np.full_like(A_e, edge), A_e)
        take = s_e < best
        best, best_R0, best_A = (
            np.where(take, s_e, best),
            np.where(take, edge, best_R0),
            np.where(take, A_e, best_A),
        )
        # A on an edge, R0 free in the box
        R_e = np.clip(
            np.where(Saa > 1e-12, (Say - edge * Sab) / np.maximum(Saa, 1e-300), edge), lo, hi
        )
        s_e = sse_of(R_e, np.full_like(R_e, edge))
        take = s_e < best
        best, best_R0, best_A = (
            np.where(take, s_e, best),
            np.where(take, R_e, best_R0),
            np.where(take, edge, best_A),
        )
    return best_R0, best_A, best


def _grid_search(
    x: np.ndarray,
    Y: np.ndarray,
    W: np.ndarray,
    r0: float | None,
    bounds: tuple[float, float],
    u_range: tuple[float, float],
    top: int = 1,
    coarse: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Grid over (log C_mid, B) with (R0, A) profiled out; returns the `top` starts per replicate.

    x: log compute (−inf at C = 0), shape N; Y, W: values and weights, shape K×N.
    Returns params (K, top, 4) as (R0, A, u = log C_mid, B) and their SSE (K, top).
    """
    n_u, n_b = (_GRID_U // 6, _GRID_B // 6) if coarse else (_GRID_U, _GRID_B)
    u_grid = np.linspace(*u_range, n_u)
    b_grid = np.geomspace(_B_MIN, 12.0, n_b)
    U, Bg = np.meshgrid(u_grid, b_grid, indexing="ij")
    U, Bg = U.ravel(), Bg.ravel()
    s = expit(Bg[:, None] * (x[None, :] - U[:, None]))  # G×N, s = 0 at C = 0
    WT = np.ascontiguousarray(W.T)
    S1 = s @ WT
    S2 = (s * s) @ WT
    Sy = s @ np.ascontiguousarray((W * Y).T)
    sw = W.sum(axis=1)
    swy = (W * Y).sum(axis=1)
    swyy = (W * Y * Y).sum(axis=1)
    R0, A, sse = _solve_linear(S1, S2, Sy, sw, swy, swyy, r0, *bounds)  # G×K
    # K×top indices of the best grid points
    idx = np.argmin(sse, axis=0)[:, None] if top == 1 else np.argpartition(sse, top, axis=0)[:top].T
    k = np.arange(Y.shape[0])[:, None]
    params = np.stack([R0[idx, k], A[idx, k], U[idx], Bg[idx]], axis=-1)
    return params, sse[idx, k]


def _refine(
    x: np.ndarray,
    Y: np.ndarray,
    W: np.ndarray,
    p: np.ndarray,
    r0: float | None,
    bounds: tuple[float, float],
    u_range: tuple[float, float],
    iters: int = 40,
) -> tuple[np.ndarray, np.ndarray]:
    """Batched, box-projected Levenberg–Marquardt on (R0, A, u, B) for K replicates at once.

    Jacobian of ``f = R0 + (A − R0)·s`` with ``s = σ(B·(x − u))``:
    ∂f/∂R0 = 1 − s, ∂f/∂A = s, ∂f/∂u = −(A − R0)·B·s(1 − s), ∂f/∂B = (A − R0)·(x − u)·s(1 − s).
    At C = 0 (x = −inf) s = 0 and only ∂f/∂R0 survives.
    """
    free = [1, 2, 3] if r0 is not None else [0, 1, 2, 3]
    lo = np.array([bounds[0], bounds[0], u_range[0], _B_MIN])
    hi = np.array([bounds[1], bounds[1], u_range[1], _B_MAX])
    finite_x = np.isfinite(x)
    xf = np.where(finite_x, x, 0.0)

    def residual_and_jac(q: np.ndarray, jac: bool) -> tuple[np.ndarray, np.ndarray | None]:
        R0, A, u, B = (q[:, i : i + 1] for i in range(4))
        s = np.where(finite_x, expit(B * (xf - u)), 0.0)
        r = Y - (R0 + (A - R0) * s)
        if not jac:
            return r, None
        ds = s * (1 - s)
        cols = [1 - s, s, -(A - R0) * B * ds, (A - R0) * np.where(finite_x, xf - u, 0.0) * ds]
        return r, np.stack([cols[i] for i in free], axis=-1)

    q = p.copy()
    r, _ = residual_and_jac(q, False)
    sse = (W * r * r).sum(axis=1)
    lam = np.full(len(q), 1e-3)
    eye = np.eye(len(free))
    for _ in range(iters):
        r, J = residual_and_jac(q, True)
        JWt = (J * W[:, :, None]).transpose(0, 2, 1)
        H = JWt @ J
        g = (JWt @ r[:, :, None])[:, :, 0]
        diag = np.diagonal(H, axis1=1, axis2=2)
        A_mat = H + lam[:, None, None] * (diag[:, :, None] * eye + 1e-12 * eye)
        try:
            step = np.linalg.solve(A_mat, g[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:  # a singular replicate: solve it by pseudo-inverse
            step = (np.linalg.pinv(A_mat) @ g[:, :, None])[:, :, 0]
        cand = q.copy()
        cand[:, free] = np.clip(q[:, free] + step, lo[free], hi[free])
        r_c, _ = residual_and_jac(cand, False)
        sse_c = (W * r_c * r_c).sum(axis=1)
        better = sse_c < sse
        gain = np.where(better, sse - sse_c, 0.0)
        q = np.where(better[:, None], cand, q)
        sse = np.where(better, sse_c, sse)
        lam = np.where(better, lam / 3, lam * 4)
        lam = np.clip(lam, 1e-9, 1e9)
        # stop once no replicate improves by more than a relative 1e-10 (converged or stuck)
        if np.all(gain <= 1e-10 * np.maximum(sse, 1e-30)) and np.all(lam > 1e-3):
            break
    return q, sse


def _sse(x: np.ndarray, Y: np.ndarray, W: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Weighted SSE of K parameter rows (R0, A, u = log C_mid, B) against Y (K×N)."""
    R0, A, u, B = (q[:, i : i + 1] for i in range(4))
    r = Y - (R0 + (A - R0) * expit(B * (x[None, :] - u)))
    return (W * r * r).sum(axis=1)


def _fit_batch(
    x: np.ndarray,
    Y: np.ndarray,
    W: np.ndarray,
    r0: float | None,
    bounds: tuple[float, float],
    u_range: tuple[float, float],
    starts: int = 1,
    start: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Fit K replicates (rows of Y, W) sharing the abscissa x; returns params (K, 4) with C_mid.

    Without `start`, the best `starts` points of the fine grid are refined. With `start` (a
    previous fit as R0, A, C_mid, B; used for bootstrap replicates, which lie near it), the
    refinement starts from it and from the best point of a coarse grid, and keeps the better.
    """
    K = Y.shape[0]
    if start is None:
        p0, _ = _grid_search(x, Y, W, r0, bounds, u_range, top=starts)
    else:
        coarse, _ = _grid_search(x, Y, W, r0, bounds, u_range, top=1, coarse=True)
        prev = np.array([start[0], start[1], math.log(start[2]), start[3]], dtype=float)
        prev_sse = _sse(x, Y, W, np.broadcast_to(prev, (K, 4)))
        coarse_sse = _sse(x, Y, W, coarse[:, 0])
        p0 = np.where((prev_sse <= coarse_sse)[:, None], prev[None, :], coarse[:, 0])[:, None, :]
        starts = 1
    flat = p0.reshape(K * starts, 4)
    Yr = np.repeat(Y, starts, axis=0)
    Wr = np.repeat(W, starts, axis=0)
    q, sse = _refine(x, Yr, Wr, flat, r0, bounds, u_range)
    q, sse = q.reshape(K, starts, 4), sse.reshape(K, starts)
    best = np.argmin(sse, axis=1)
    out = q[np.arange(K), best].copy()
    out[:, 2] = np.exp(out[:, 2])
    return out, sse[np.arange(K), best]


def _check_curve(
    C: np.ndarray, R: np.ndarray, r0: float | None, what: str = "reward"
) -> str | None:
    """Why (C, R) cannot pin down a sigmoid, or None when it can."""
    if len(R) == 0:
        return f"no finite (compute, {what}) pairs"
    n_distinct = len(np.unique(C))
    need = 3 if r0 is not None else 4
    if n_distinct < need:
        return (
            f"{n_distinct} distinct compute value(s); a sigmoid with "
            f"{need} free parameters needs at least {need}"
        )
    if np.ptp(R) <= 1e-9:
        return f"{what} is constant ({R[0]:.4g}) over compute: there is no rise to fit"
    if not np.any(C > 0):
        return "no point with compute > 0"
    return None


@_single_threaded
def fit_sigmoid(
    C: Any,
    R: Any,
    *,
    R0: float | None = None,
    c_min: float | None = None,
    weights: Any = None,
    bounds_A: tuple[float, float] = (0.0, 1.0),
    n_boot: int = 200,
    bootstrap: Literal["cases", "residual"] = "cases",
    ci: float = 0.95,
    starts: int = 4,
    seed: int = 0,
    what: str = "reward",
) -> SigmoidFit:
    """Fit ScaleRL's ``R(C) = R0 + (A − R0) / (1 + (C_mid / C)^B)`` (arXiv 2510.13786).

    Robust to local minima: (R0, A) enter linearly, so they are solved exactly (with the box
    ``bounds_A`` on both, 0 ≤ A ≤ 1 for rewards) at every point of a grid over (log C_mid, B);
    the best `starts` grid points are refined by Levenberg–Marquardt and the best kept. Confidence
    intervals are bootstrap percentiles (``cases``: resample points; ``residual``: resample
    residuals around the fit), every replicate refitted, all vectorised.

    Args:
        C: compute per point (rollouts or FLOPs); C = 0 is the untrained model, where R = R0.
        R: reward per point. NaN pairs are dropped.
        R0: fix the starting reward (ScaleRL fixes it to the initial performance); None = fit it.
        c_min: drop the early compute range ``C < c_min`` (ScaleRL drops the near-linear start).
        weights: optional per-point weights (e.g. seeds averaged per point).
        bounds_A: box for A and R0.
        n_boot: bootstrap replicates (0 = no intervals).
        bootstrap: ``cases`` or ``residual``.
        ci: level of the percentile intervals.
        starts: grid points refined for the point estimate.
        seed: bootstrap RNG seed.
        what: name of the quantity, used in messages.
    """
    C = np.asarray(C, dtype=float).ravel()
    R = np.asarray(R, dtype=float).ravel()
    if C.shape != R.shape:
        raise ValueError(f"C has {C.size} values and R has {R.size}: pass one R per C.")
    w = np.ones_like(C) if weights is None else np.asarray(weights, dtype=float).ravel()
    keep = np.isfinite(C) & np.isfinite(R) & (C >= 0) & np.isfinite(w) & (w > 0)
    if c_min is not None:
        keep &= np.greater_equal(C, c_min)
    dropped_nan = int((~(np.isfinite(C) & np.isfinite(R))).sum())
    if dropped_nan:
        logger.warning("fit_sigmoid: dropped %d point(s) with NaN compute or %s", dropped_nan, what)
    C, R, w = C[keep], R[keep], w[keep]
    why = _check_curve(C, R, R0, what)
    if why is not None:
        return _not_identifiable(why, n_points=len(R))

    x = np.log(np.where(C > 0, C, np.nan))
    x = np.where(C > 0, x, -np.inf)
    pos = C[C > 0]
    c_lo, c_hi = float(pos.min()), float(pos.max())
    u_range = (math.log(c_lo) - _U_PAD_LO, math.log(c_hi) + _U_PAD_HI)
    params, sse = _fit_batch(x, R[None, :], w[None, :], R0, bounds_A, u_range, starts=starts)
    p = params[0]
    rmse = float(math.sqrt(sse[0] / w.sum()))
    status: Status = "ok"
    reasons = []
    if p[2] > c_hi:
        reasons.append(
            f"C_mid = {p[2]:.3g} is beyond the largest compute {c_hi:.3g}: the curve has not bent "
            "yet, so A is an extrapolation"
        )
    if p[2] < c_lo:
        reasons.append(
            f"C_mid = {p[2]:.3g} is below the smallest positive compute {c_lo:.3g}: the rise is "
            "not resolved, so B and C_mid are not pinned down"
        )
    if p[3] >= _B_MAX * 0.999:
        reasons.append(f"B hit its bound {_B_MAX}: the transition is sharper than the data resolve")
    if reasons:
        status = "extrapolated"

    boot = None
    cis: dict[str, tuple[float, float]] = {}
    if n_boot > 0:
        rng = np.random.default_rng(seed)
        n = len(R)
        if bootstrap == "cases":
            counts = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(float)
            Yb = np.broadcast_to(R, (n_boot, n))
            Wb = counts * w[None, :]
        elif bootstrap == "residual":
            fitted = _predict_params(params, C)[0]
            resid = R - fitted
            idx = rng.integers(0, n, size=(n_boot, n))
            Yb = fitted[None, :] + resid[idx]
            Wb = np.broadcast_to(w, (n_boot, n))
        else:
            raise ValueError(f"bootstrap = {bootstrap!r}: choose 'cases' or 'residual'.")
        boot, _ = _fit_batch(
            x, np.ascontiguousarray(Yb), np.ascontiguousarray(Wb), R0, bounds_A, u_range, start=p
        )
        q = (1 - ci) / 2
        for i, name in enumerate(("R0", "A", "C_mid", "B")):
            lo_, hi_ = np.quantile(boot[:, i], [q, 1 - q])
            cis[f"{name}_ci"] = (float(lo_), float(hi_))
    return SigmoidFit(
        R0=float(p[0]),
        A=float(p[1]),
        C_mid=float(p[2]),
        B=float(p[3]),
        status=status,
        reason="; ".join(reasons),
        n_points=len(R),
        rmse=rmse,
        C_range=(c_lo, c_hi),
        ci_level=ci,
        boot=boot,
        **cis,
    )


# ------------------------------------------------------------------------------------------
# Frame helpers
# ------------------------------------------------------------------------------------------
def _to_polars(df: Any) -> pl.DataFrame:
    """Accept polars (eager or lazy) or pandas; return an eager polars frame."""
    if isinstance(df, pl.LazyFrame):
        return df.collect()
    if isinstance(df, pl.DataFrame):
        return df
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        pd = None
    if pd is not None and isinstance(df, pd.DataFrame):
        return pl.from_pandas(df)
    raise TypeError(f"expected a polars or pandas DataFrame, got {type(df).__name__}")


def _require(df: pl.DataFrame, *columns: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(
            f"column(s) {missing} not in the runs table; it has: {sorted(df.columns)}. "
            "Load runs with isolab.runs.load_runs or pass x=/y= naming existing columns."
        )


def _finite(df: pl.DataFrame, *columns: str, context: str = "") -> pl.DataFrame:
    """Rows where every column is finite; logs how many were dropped."""
    cond = pl.lit(True)
    for c in columns:
        cond = cond & pl.col(c).is_not_null() & pl.col(c).cast(pl.Float64).is_finite()
    out = df.filter(cond)
    if out.height < df.height:
        logger.info(
            "%sdropped %d of %d rows with missing or NaN %s",
            f"{context}: " if context else "",
            df.height - out.height,
            df.height,
            ", ".join(columns),
        )
    return out


def _id_columns(df: pl.DataFrame) -> list[str]:
    return [c for c in ("run_key", "n", "B_p", "M", "step", "seed") if c in df.columns]


def _check_single_setting(df: pl.DataFrame, what: str) -> None:
    mixed = {
        c: sorted(map(str, df[c].unique().to_list()))
        for c in SETTING_COLUMNS
        if c in df.columns and df[c].n_unique() > 1
    }
    if mixed:
        parts = "; ".join(f"{c} ∈ {v}" for c, v in mixed.items())
        raise ValueError(
            f"{what} compares allocations within one setting, but the table mixes {parts}: "
            "filter it to one value of each first (e.g. df.filter(pl.col('split') == 'easy'))."
        )


def _seed_average(df: pl.DataFrame, x: str, y: str) -> pl.DataFrame:
    """Mean of `y` over seeds at each (configuration, step); `x` averaged alongside."""
    cfg = [c for c in CONFIG_COLUMNS if c in df.columns]
    key = [*cfg, "step"] if "step" in df.columns else [*cfg, x]
    aggs = [pl.col(y).mean(), pl.len().alias("n_seeds")]
    if x not in key:
        aggs.append(pl.col(x).mean())
    return df.group_by(key).agg(aggs).sort([*cfg, x])


# ------------------------------------------------------------------------------------------
# Frontier and record-breaking points (IsoCompute Playbook)
# ------------------------------------------------------------------------------------------
def frontier(df: Any, x: str = DEFAULT_X, y: str = DEFAULT_Y) -> pl.DataFrame:
    """The compute frontier ``f(C) = max_{j: C_j ≤ C} R_j`` (IsoCompute Playbook, arXiv 2603.12151).

    Returns one row per distinct `x` (ascending): `x`, `y` (the best point at that x),
    `frontier` (running maximum) and the identifying columns (`run_key`, `n`, `B_p`, `M`, `step`,
    `seed` where present) of the point that holds the frontier there.
    """
    df = _to_polars(df)
    _require(df, x, y)
    df = _finite(df, x, y, context="frontier")
    ids = _id_columns(df)
    if df.height == 0:
        return pl.DataFrame(schema={x: pl.Float64, y: pl.Float64, "frontier": pl.Float64})
    best = (
        df.select([x, y, *ids])
        .sort([x, y], descending=[False, True])
        .unique(subset=[x], keep="first", maintain_order=True)
    )
    best = best.with_columns(pl.col(y).cum_max().alias("frontier"))
    holder = pl.col(y) == pl.col("frontier")
    return best.select(
        x,
        y,
        "frontier",
        *[pl.when(holder).then(pl.col(c)).otherwise(None).forward_fill().alias(c) for c in ids],
    )


def record_points(
    df: Any, x: str = DEFAULT_X, y: str = DEFAULT_Y, bin_width: float = 0.0
) -> pl.DataFrame:
    """Record-breaking points ``R_i > max_{C_j < C_i} R_j`` with the reward bucketized.

    With ``bin_width > 0`` rewards are compared as ``floor(R / bin_width)``, so an improvement
    smaller than a bucket (evaluation noise) is not a record (IsoCompute Playbook §3). The first
    point is always a record. Returns the record rows (`x`, `y`, identifying columns), ascending.
    """
    if bin_width < 0:
        raise ValueError(f"bin_width = {bin_width}: use 0 (exact) or a positive reward width.")
    f = frontier(df, x, y)
    if f.height == 0:
        return f.drop("frontier")
    score = (pl.col(y) / bin_width).floor() if bin_width > 0 else pl.col(y)
    f = f.with_columns(score.alias("_score"))
    prev = pl.col("_score").cum_max().shift(1)
    rec = f.filter(prev.is_null() | (pl.col("_score") > prev))
    return rec.drop("_score", "frontier")


# ------------------------------------------------------------------------------------------
# n*(C): per-n fits → upper envelope → running average → sigmoid of log n* (IsoCompute)
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NStarResult:
    """The compute-optimal number of rollouts per problem, n*(C), and its saturation.

    Attributes:
        metric: the reward column analysed.
        x: the compute column.
        table: per compute grid point `C`: `n_star_raw` (best n of the per-n fits' envelope),
            `n_star` (running geometric mean over `window` grid points), `fit` (the sigmoid of
            log2 n* evaluated, as n), `fit_lo` / `fit_hi` (bootstrap band).
        per_n: one row per n: its sigmoid parameters, intervals, status and compute range.
        curves: long table (`n`, `C`, `reward_fit`) of each per-n fit over its data range.
        fits: per-n `SigmoidFit`, keyed by n.
        fit: the sigmoid of log2 n* against C (`A` = log2 of the saturation), or None.
        n_saturation: 2**A, the n at which n*(C) saturates (NaN when not identifiable).
        n_saturation_ci: bootstrap percentile interval of `n_saturation`.
        status, reason: ``ok`` / ``extrapolated`` / ``not identifiable`` and why.
    """

    metric: str
    x: str
    table: pl.DataFrame
    per_n: pl.DataFrame
    curves: pl.DataFrame
    fits: dict[int, SigmoidFit]
    fit: SigmoidFit | None
    n_saturation: float
    n_saturation_ci: tuple[float, float]
    status: Status
    reason: str = ""

    def n_star_at(self, C: Any) -> np.ndarray:
        """n*(C) from the fitted sigmoid of log2 n* (NaN when not identifiable)."""
        if self.fit is None or not self.fit.identifiable:
            return np.full(np.shape(C), np.nan)
        return 2.0 ** self.fit.predict(C)

    def n_star_band(self, C: Any) -> tuple[np.ndarray, np.ndarray]:
        """Bootstrap band of n*(C)."""
        if self.fit is None:
            nan = np.full(np.shape(C), np.nan)
            return nan, nan
        lo, hi = self.fit.predict_band(C)
        return 2.0**lo, 2.0**hi


def _running_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Centered moving average along the last axis, NaN-aware (edges use what exists)."""
    if window <= 1:
        return values
    mask = np.isfinite(values).astype(float)
    v = np.where(mask > 0, values, 0.0)
    pad = window // 2

    def conv(a: np.ndarray) -> np.ndarray:
        a = np.pad(a, [(0, 0)] * (a.ndim - 1) + [(pad, window - 1 - pad)])
        csum = np.cumsum(a, axis=-1)
        csum = np.concatenate([np.zeros(csum.shape[:-1] + (1,)), csum], axis=-1)
        return csum[..., window:] - csum[..., :-window]

    num, den = conv(v), conv(mask)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.maximum(den, 1e-300), np.nan)


def _best_config(grp: pl.DataFrame, x: str, y: str) -> pl.DataFrame:
    """Points of the configuration (e.g. B_p) of one n with the highest mean reward over the
    upper half of its compute range: a single choice among few configurations, so the
    chosen curve's points keep their noise unbiased (unlike a running maximum)."""
    cfg = [c for c in CONFIG_COLUMNS if c in grp.columns and c != "n" and grp[c].n_unique() > 1]
    if not cfg:
        return grp
    pos = grp.filter(pl.col(x) > 0).with_columns(
        pl.col(x).log().rank("ordinal").over(cfg).alias("_rank"), pl.len().over(cfg).alias("_len")
    )
    score = (
        pos.filter(pl.col("_rank") > pl.col("_len") / 2)
        .group_by(cfg)
        .agg(pl.col(y).mean().alias("_score"))
        .sort("_score", descending=True)
    )
    return grp.join(score.head(1).select(cfg), on=cfg, how="semi")


def _per_n_points(avg: pl.DataFrame, x: str, y: str, per_n: str, bin_width: float) -> dict:
    out = {}
    for (n,), grp in avg.group_by(["n"], maintain_order=True):
        if per_n == "records":
            pts = record_points(grp, x, y, bin_width=bin_width).select(x, y)
            # Anchor the plateau: after the last record the frontier stays flat up to the
            # largest compute of this n; without this point the fit is free to rise there.
            last = frontier(grp, x, y).tail(1)
            if last[x][0] > pts[x][-1]:
                pts = pl.concat([pts, last.select(x, pl.col("frontier").alias(y))])
        elif per_n == "all":
            pts = grp
        elif per_n == "best_config":
            pts = _best_config(grp, x, y)
        else:
            raise ValueError(f"per_n = {per_n!r}: choose 'records', 'best_config' or 'all'.")
        pos = grp.filter(pl.col(x) > 0)[x]
        out[int(n)] = (
            pts[x].to_numpy().astype(float),
            pts[y].to_numpy().astype(float),
            float(pos.min()) if len(pos) else float("nan"),
            float(grp[x].max()),
        )
    return dict(sorted(out.items()))


@_single_threaded
def optimal_n(
    df: Any,
    *,
    x: str = DEFAULT_X,
    y: str = DEFAULT_Y,
    per_n: Literal["best_config", "records", "all"] = "best_config",
    bin_width: float = 0.0,
    grid_points: int = 120,
    window: int = 9,
    min_progress: float = 0.05,
    n_boot: int = 200,
    ci: float = 0.95,
    seed: int = 0,
) -> NStarResult:
    """n*(C) and its saturation, the IsoCompute Playbook's method (arXiv 2603.12151, §4).

    1. Seeds are averaged per (configuration, step).
    2. Per n, a ScaleRL sigmoid of reward against compute is fitted (`fit_sigmoid`) to the
       points of that n's best configuration (``per_n="best_config"``: the B_p with the highest
       reward over the upper half of its compute), to that n's record-breaking points plus the
       frontier's end (``"records"``, the paper's literal recipe) or to all its points
       (``"all"``, averaging over B_p). Records are maxima of noisy points, biased upwards and
       more so for an n with more configurations; on synthetic runs at 2% noise
       ``best_config`` recovers the planted saturation most closely, hence the default.
    3. The upper envelope of the per-n curves on a log-spaced compute grid gives the raw n*(C)
       (each curve only within the compute its runs cover), starting where the earliest curve
       has made `min_progress` of its rise (before that every n is at R0 and the argmax is
       noise); a running average of log2 n* over `window` grid points smooths the steps
       between grid values of n.
    4. A sigmoid of log2 n* against log C (the same law, with A bounded by the n grid) gives the
       saturation ``n_sat = 2^A``. Bootstrap: replicate b of every per-n fit (residual
       bootstrap) gives envelope b, whose sigmoid gives ``n_sat_b``; percentiles give the CI.
    """
    df = _to_polars(df)
    _require(df, x, y, "n")
    _check_single_setting(df, "optimal_n")
    df = _finite(df, x, y, context=f"optimal_n({y})")
    nan2 = (float("nan"), float("nan"))
    empty = pl.DataFrame()

    def fail(reason: str, per: pl.DataFrame = empty, fits: dict | None = None) -> NStarResult:
        return NStarResult(
            y,
            x,
            empty,
            per,
            empty,
            fits or {},
            None,
            float("nan"),
            nan2,
            "not identifiable",
            reason,
        )

    if df.height == 0:
        return fail(f"no finite values of {y}")
    ns = sorted(int(v) for v in df["n"].unique().to_list())
    if len(ns) < 2:
        return fail(f"only one n ({ns[0]}) in the data: n*(C) needs runs at several n")

    avg = _seed_average(df, x, y)
    points = _per_n_points(avg, x, y, per_n, bin_width)
    fits: dict[int, SigmoidFit] = {}
    rows = []
    for i, (n, (C, R, c_lo, c_hi)) in enumerate(points.items()):
        f = fit_sigmoid(C, R, n_boot=n_boot, bootstrap="residual", ci=ci, seed=seed + i, what=y)
        fits[n] = f
        rows.append({"n": n, **f.to_dict(), "C_lo": c_lo, "C_hi": c_hi})
    per = pl.DataFrame(rows)
    usable = [n for n, f in fits.items() if f.identifiable and np.isfinite(points[n][2])]
    if len(usable) < 2:
        bad = "; ".join(f"n={n}: {f.reason}" for n, f in fits.items() if not f.identifiable)
        return fail(f"fewer than two n have an identifiable reward curve ({bad})", per, fits)

    c_lo = min(points[n][2] for n in usable)
    c_hi = max(points[n][3] for n in usable)
    # Before any curve has risen, "the best n" is decided by noise in the fitted R0s: start the
    # grid where the first curve reaches `min_progress` of its rise, s = 1/(1 + (C_mid/C)^B) = p
    # ⇔ C = C_mid·(p / (1 − p))^(1/B).
    starts = [
        fits[n].C_mid * (min_progress / (1 - min_progress)) ** (1 / fits[n].B)
        for n in usable
        if fits[n].A > fits[n].R0
    ]
    if starts and 0 < min_progress < 1:
        c_lo = min(max(c_lo, min(starts)), c_hi / 10)
    grid = np.geomspace(c_lo, c_hi, grid_points)
    n_arr = np.array(usable, dtype=float)
    valid = np.array(
        [(grid >= points[n][2] * (1 - 1e-9)) & (grid <= points[n][3] * (1 + 1e-9)) for n in usable]
    )
    point_curves = np.stack([fits[n].predict(grid) for n in usable])  # n×G

    def envelope(curves: np.ndarray) -> np.ndarray:
        """log2 of the argmax-n over the n axis (axis −2), NaN where no n is valid."""
        masked = np.where(valid, curves, -np.inf)
        idx = np.argmax(masked, axis=-2)
        out = np.log2(n_arr[idx])
        return np.where(valid.any(axis=0), out, np.nan)

    raw = envelope(point_curves)
    smooth = _running_mean(raw, window)
    curves_tbl = pl.DataFrame(
        {
            "n": np.repeat(n_arr.astype(int), grid_points),
            "C": np.tile(grid, len(usable)),
            "reward_fit": np.where(valid, point_curves, np.nan).ravel(),
        }
    ).filter(pl.col("reward_fit").is_not_nan())

    table = pl.DataFrame({"C": grid, "n_star_raw": 2.0**raw, "n_star": 2.0**smooth})
    lo_b, hi_b = math.log2(min(ns)), math.log2(max(ns))
    keep = np.isfinite(smooth)
    fit = fit_sigmoid(grid[keep], smooth[keep], bounds_A=(lo_b, hi_b), n_boot=0, what="log2 n*")
    level = float(2.0 ** smooth[keep][0]) if keep.any() else math.nan
    # flat at an interior n: saturated below the smallest C. Flat at the grid's largest or
    # smallest n: the grid's edge binds, which says nothing about a saturation.
    flat_interior = (
        keep.any()
        and np.ptp(smooth[keep]) < 1e-9
        and not np.isclose(level, [min(ns), max(ns)]).any()
    )
    if not fit.identifiable and not flat_interior:
        const = float(2 ** np.nanmedian(smooth))
        where = (
            "the largest n of the grid: saturation lies beyond it"
            if np.isclose(const, max(ns))
            else "the smallest n of the grid"
            if np.isclose(const, min(ns))
            else "an interior n"
        )
        return NStarResult(
            y,
            x,
            table,
            per,
            curves_tbl,
            fits,
            fit,
            float("nan"),
            nan2,
            "not identifiable",
            f"n*(C) cannot be fitted: {fit.reason} (n* ≈ {const:.0f}, {where})",
        )

    # bootstrap: envelope b of replicate b of every per-n fit (K×G), None without replicates
    smooth_b = None
    if n_boot > 0 and all(fits[n].boot is not None for n in usable):
        reps = np.stack([_predict_params(fits[n].boot, grid) for n in usable], axis=1)  # K×n×G
        smooth_b = _running_mean(envelope(reps), window)[:, keep]
    if not fit.identifiable:  # flat at an interior n
        return _flat_n_star(
            y, x, table, per, curves_tbl, fits, fit, level, grid[keep], smooth_b, ci
        )

    # … and the sigmoid of each replicate envelope b gives n_sat_b
    sat_ci = nan2
    boot_params = None
    if smooth_b is not None:
        xg = np.log(grid[keep])
        u_range = (xg[0] - _U_PAD_LO, xg[-1] + _U_PAD_HI)
        Yb = np.where(np.isfinite(smooth_b), smooth_b, 0.0)
        Wb = np.isfinite(smooth_b).astype(float)
        start = np.array([fit.R0, fit.A, fit.C_mid, fit.B])
        boot_params, _ = _fit_batch(xg, Yb, Wb, None, (lo_b, hi_b), u_range, start=start)
        q = (1 - ci) / 2
        sat = 2.0 ** boot_params[:, 1]
        sat_ci = (float(np.quantile(sat, q)), float(np.quantile(sat, 1 - q)))
        cis = {}
        for i, name in enumerate(("R0", "A", "C_mid", "B")):
            lo_, hi_ = np.quantile(boot_params[:, i], [q, 1 - q])
            cis[f"{name}_ci"] = (float(lo_), float(hi_))
        fit = SigmoidFit(
            **{k: getattr(fit, k) for k in ("R0", "A", "C_mid", "B", "status", "reason")},
            n_points=fit.n_points,
            rmse=fit.rmse,
            C_range=fit.C_range,
            ci_level=ci,
            boot=boot_params,
            **cis,
        )

    band_lo, band_hi = fit.predict_band(grid)
    table = table.with_columns(
        fit=2.0 ** fit.predict(grid), fit_lo=2.0**band_lo, fit_hi=2.0**band_hi
    )
    status: Status = fit.status
    reasons = [fit.reason] if fit.reason else []
    if hi_b - fit.A <= 0.5:
        status = "extrapolated"
        reasons.append(
            f"n* reaches the largest n of the grid ({max(ns)}): saturation may lie beyond it"
        )
    if fit.A < fit.R0:
        reasons.append("n*(C) decreases with compute (the Playbook finds it grows, then saturates)")
    dropped = [n for n in ns if n not in usable]
    if dropped:
        reasons.append(f"n = {dropped} left out: no identifiable reward curve")
    return NStarResult(
        y,
        x,
        table,
        per,
        curves_tbl,
        fits,
        fit,
        float(2.0**fit.A),
        sat_ci,
        status,
        "; ".join(reasons),
    )


def _flat_n_star(
    y: str,
    x: str,
    table: pl.DataFrame,
    per: pl.DataFrame,
    curves_tbl: pl.DataFrame,
    fits: dict[int, SigmoidFit],
    fit: SigmoidFit,
    level: float,
    grid: np.ndarray,
    smooth_b: np.ndarray | None,
    ci: float,
) -> NStarResult:
    """n*(C) flat at one interior n over the whole compute `grid`: it saturated before the
    smallest compute measured. The level is the saturation (its rise, C_mid, is not
    identifiable); the interval is the spread of the level over the bootstrap replicate
    envelopes `smooth_b` (log2 n*, K×G)."""
    lo = hi = float("nan")
    if smooth_b is not None:
        per_rep = 2.0 ** np.nanmedian(smooth_b, axis=1)
        q = (1 - ci) / 2
        lo, hi = (float(v) for v in np.nanquantile(per_rep, [q, 1 - q]))
        lo, hi = min(lo, level), max(hi, level)
    table = table.with_columns(
        fit=pl.lit(level),
        fit_lo=pl.lit(lo if np.isfinite(lo) else None, pl.Float64),
        fit_hi=pl.lit(hi if np.isfinite(hi) else None, pl.Float64),
    )
    reason = (
        f"n* is flat at {level:.0f} over the whole compute range ({grid[0]:.3g} to "
        f"{grid[-1]:.3g}): it saturated below the smallest compute measured; the "
        "level is the saturation, the compute of its rise (C_mid) is not identifiable"
    )
    return NStarResult(
        y, x, table, per, curves_tbl, fits, fit, level, (lo, hi), "extrapolated", reason
    )


# ------------------------------------------------------------------------------------------
# Metric effects: n*(C) under avg@k, best@k (coverage) and worst@k (sharpening)
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MetricEffect:
    """n*(C) under several validation metrics (IsoCompute Playbook §5).

    Attributes:
        summary: one row per metric: `n_saturation`, `n_saturation_lo` / `_hi`, status, reason.
        table: long table (`metric`, `C`, `n_star`, `fit`, `fit_lo`, `fit_hi`).
        results: the full `NStarResult` per metric.
    """

    summary: pl.DataFrame
    table: pl.DataFrame
    results: dict[str, NStarResult]


@_single_threaded
def metric_effect(
    df: Any, metrics: Sequence[str] = DEFAULT_METRICS, **optimal_n_kwargs: Any
) -> MetricEffect:
    """n*(C) and its saturation under each metric in `metrics` (arguments as `optimal_n`).

    The Playbook finds that on Easy sets a larger n mainly lifts worst@k (sharpening), on Hard
    sets best@k (coverage): the metric that saturates at the larger n is the one n serves.
    Metrics missing from the table are reported as not identifiable, not dropped.
    """
    df = _to_polars(df)
    results: dict[str, NStarResult] = {}
    rows, tables = [], []
    for m in metrics:
        if m not in df.columns:
            nan2 = (float("nan"), float("nan"))
            res = NStarResult(
                m,
                "",
                pl.DataFrame(),
                pl.DataFrame(),
                pl.DataFrame(),
                {},
                None,
                float("nan"),
                nan2,
                "not identifiable",
                f"metric {m} is not in the runs table",
            )
        else:
            res = optimal_n(df, y=m, **optimal_n_kwargs)
        results[m] = res
        lo, hi = res.n_saturation_ci
        rows.append(
            {
                "metric": m,
                "n_saturation": res.n_saturation,
                "n_saturation_lo": lo,
                "n_saturation_hi": hi,
                "status": res.status,
                "reason": res.reason,
            }
        )
        if res.table.height and "fit" in res.table.columns:
            tables.append(
                res.table.select(
                    pl.lit(m).alias("metric"), "C", "n_star", "fit", "fit_lo", "fit_hi"
                )
            )
    table = pl.concat(tables) if tables else pl.DataFrame()
    return MetricEffect(pl.DataFrame(rows), table, results)


# ------------------------------------------------------------------------------------------
# n vs B_p at fixed batch B = B_p·n (IsoCompute Playbook §4.2)
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TradeoffResult:
    """Reward against M for each split (B_p, n) of a fixed batch B = B_p·n.

    Attributes:
        B: the batch.
        curves: seed-averaged reward per split and step (`B_p`, `n`, `step`, metric, `n_seeds`).
        per_step: the winning split at each step of the common step grid.
        winners: the best split over the smallest and the largest third of the common steps
            (log-spaced): `regime` ∈ {``small M``, ``large M``}, `n`, `B_p`, mean reward, margin
            over the runner-up.
        crossover_M: first step from which the large-M winner leads at every later step.
        status, reason: as elsewhere.
    """

    B: int
    metric: str
    curves: pl.DataFrame
    per_step: pl.DataFrame
    winners: pl.DataFrame
    crossover_M: float
    status: Status
    reason: str = ""


def tradeoff_fixed_batch(
    df: Any, B: int, *, y: str = DEFAULT_Y, grid_points: int = 60
) -> TradeoffResult:
    """Who wins at fixed B = B_p·n: more problems or more rollouts per problem, by M.

    At fixed B every split spends the same compute per step (C = B·M), so comparing reward at
    equal M is an iso-compute comparison. The Playbook finds (Easy sets) that with few steps a
    larger B_p wins and with many steps a larger n does. Each split's seed-averaged curve is
    interpolated (in log M) on a common log-spaced step grid where all splits have data.
    """
    df = _to_polars(df)
    _require(df, y, "n", "B_p", "step")
    _check_single_setting(df, "tradeoff_fixed_batch")
    if "B" not in df.columns:
        df = df.with_columns((pl.col("B_p") * pl.col("n")).alias("B"))
    sel = _finite(df.filter(pl.col("B") == B), y, context="tradeoff_fixed_batch")
    empty = pl.DataFrame()

    def fail(reason: str, curves: pl.DataFrame = empty) -> TradeoffResult:
        return TradeoffResult(B, y, curves, empty, empty, float("nan"), "not identifiable", reason)

    if sel.height == 0:
        avail = sorted(df["B"].unique().to_list())
        return fail(f"no runs with B = B_p·n = {B}; batches in the table: {avail}")
    curves = (
        sel.group_by(["B_p", "n", "step"])
        .agg(pl.col(y).mean(), pl.len().alias("n_seeds"))
        .sort(["n", "step"])
    )
    splits = curves.select("B_p", "n").unique().sort("n")
    if splits.height < 2:
        return fail(
            f"only one split of B = {B} (B_p = {splits['B_p'][0]}, n = {splits['n'][0]})", curves
        )
    lo, hi = 0.0, math.inf
    series = []
    for b_p, n in splits.iter_rows():
        c = curves.filter((pl.col("B_p") == b_p) & (pl.col("n") == n) & (pl.col("step") > 0))
        if c.height == 0:
            return fail(f"split (B_p = {b_p}, n = {n}) has no evaluation after step 0", curves)
        st, val = c["step"].to_numpy().astype(float), c[y].to_numpy()
        lo, hi = max(lo, st.min()), min(hi, st.max())
        series.append((b_p, n, st, val))
    if not hi > lo:
        return fail(f"the splits of B = {B} share no range of steps", curves)
    grid = np.unique(np.round(np.geomspace(lo, hi, grid_points)))
    Rg = np.stack([np.interp(np.log(grid), np.log(st), val) for _, _, st, val in series])  # S×G
    names = [(b_p, n) for b_p, n, _, _ in series]
    best = np.argmax(Rg, axis=0)
    per_step = pl.DataFrame(
        {
            "step": grid,
            "B_p": [names[i][0] for i in best],
            "n": [names[i][1] for i in best],
            y: Rg[best, np.arange(len(grid))],
        }
    )
    third = max(len(grid) // 3, 1)
    rows = []
    for regime, cols in (("small M", slice(0, third)), ("large M", slice(-third, None))):
        means = Rg[:, cols].mean(axis=1)
        order = np.argsort(means)[::-1]
        rows.append(
            {
                "regime": regime,
                "M_lo": float(grid[cols][0]),
                "M_hi": float(grid[cols][-1]),
                "B_p": names[order[0]][0],
                "n": names[order[0]][1],
                y: float(means[order[0]]),
                "margin": float(means[order[0]] - means[order[1]]),
            }
        )
    winners = pl.DataFrame(rows)
    late = int(np.argmax(Rg[:, -1]))
    lead = best == late
    # first grid index from which `late` leads at every later step
    tail_ok = np.flip(np.cumprod(np.flip(lead))).astype(bool)
    crossover = float(grid[np.argmax(tail_ok)]) if tail_ok.any() else float("nan")
    return TradeoffResult(B, y, curves, per_step, winners, crossover, "ok")


# ------------------------------------------------------------------------------------------
# ρ frontiers and RACE (Wilhelm & Kao, arXiv 2607.13389)
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RhoFrontier:
    """Reward against the update fraction ρ inside an IsoFLOP band, per reward system.

    Attributes:
        band: (lo, hi) of `flops/total`.
        points: one row per run with points in the band: group columns, `run_key`, `rho`, the
            metric, `flops_total`, FLOP shares `share_search` / `share_learning` / `share_reward`.
        fits: one row per group: `rho_star` (vertex of a concave quadratic fit), `rho_lo` /
            `rho_hi` (bootstrap), `reward_star`, `rho_best_observed`, shares at ρ*, `n_runs`,
            `n_rho`, quadratic coefficients `q0`, `q1`, `q2`, status, reason.
    """

    band: tuple[float, float]
    metric: str
    by: tuple[str, ...]
    points: pl.DataFrame
    fits: pl.DataFrame


def isoflop_band(df: Any, width: float = 1.5, flops: str = "flops/total") -> tuple[float, float]:
    """The IsoFLOP band of a grid of runs.

    When every run ends within a factor `width` of the others (an IsoFLOP study: each run ends
    within one step of the common budget), the band is ``[min, max]`` of the final FLOP counts,
    so that each run contributes its final point. Otherwise it is the largest band every run
    reaches, ``(F / width, F)`` with F the smallest final count, so that each run contributes
    its points just below F.
    """
    if width <= 1:
        raise ValueError(f"width = {width}: the band is (F / width, F), so width must be > 1.")
    df = _to_polars(df)
    _require(df, flops)
    df = _finite(df, flops)
    if df.height == 0:
        raise ValueError(f"no finite {flops}: the runs carry no FLOP ledger (old runs?).")
    key = "run_key" if "run_key" in df.columns else "run_id"
    finals = df.group_by(key).agg(pl.col(flops).max())[flops]
    lo, hi = float(finals.min()), float(finals.max())
    if hi <= lo * width:
        return (lo * (1 - 1e-9), hi * (1 + 1e-9))
    return (lo / width, lo)


def _quadratic_fits(rho: np.ndarray, R: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Weighted least squares of R ≈ q0 + q1·ρ + q2·ρ² for K weight rows → (K, 3)."""
    X = np.stack([np.ones_like(rho), rho, rho * rho], axis=1)  # N×3
    XtW = X.T[None, :, :] * W[:, None, :]  # K×3×N
    H = XtW @ X
    g = XtW @ R
    H = H + 1e-12 * np.eye(3)
    return np.linalg.solve(H, g[:, :, None])[:, :, 0]


@_single_threaded
def rho_frontier(
    df: Any,
    flops_band: tuple[float, float] | None = None,
    *,
    y: str = DEFAULT_Y,
    by: str | Sequence[str] = "reward",
    n_boot: int = 200,
    ci: float = 0.95,
    seed: int = 0,
) -> RhoFrontier:
    """Reward against ρ = C_learning / C_total inside an IsoFLOP band, per reward system, with ρ*.

    Each run contributes the mean of its points whose `flops/total` lies in the band (its ρ is
    the cumulative `compute/rho` there). Per group a concave quadratic in ρ is fitted; ρ* is its
    vertex when the curvature is negative and the vertex lies inside the observed ρ range,
    otherwise ρ* is not identifiable (`rho_best_observed` still says where the best run sits).
    Bootstrap over runs gives the interval. Wilhelm & Kao find ρ* ≈ 0.72 for rule-based rewards
    and ≈ 0.44–0.45 for PRM-style ones (arXiv 2607.13389).
    """
    df = _to_polars(df)
    by = (by,) if isinstance(by, str) else tuple(by)
    _require(df, y, "flops/total", "compute/rho", *by)
    if flops_band is None:
        flops_band = isoflop_band(df)
    lo, hi = float(flops_band[0]), float(flops_band[1])
    if not hi > lo:
        raise ValueError(f"flops_band = {flops_band}: give (lo, hi) with lo < hi.")
    key = "run_key" if "run_key" in df.columns else "run_id"
    shares = [
        (pl.col(f"flops/{c}") / pl.col("flops/total")).alias(f"share_{c}")
        for c in ("search", "learning", "reward")
        if f"flops/{c}" in df.columns
    ]
    clean = _finite(df, y, "flops/total", "compute/rho", context="rho_frontier")
    inband = clean.filter(pl.col("flops/total").is_between(lo, hi)).with_columns(shares)
    share_cols = [
        c for c in ("share_search", "share_learning", "share_reward") if c in inband.columns
    ]
    points = (
        inband.group_by([*by, key])
        .agg(
            pl.col("compute/rho").mean().alias("rho"),
            pl.col(y).mean(),
            pl.col("flops/total").mean().alias("flops_total"),
            *[pl.col(c).mean() for c in share_cols],
            pl.len().alias("n_points"),
        )
        .sort([*by, "rho"])
    )
    groups = df.select(by).unique().sort(list(by)).rows()
    fits = []
    rng = np.random.default_rng(seed)
    F_range = (
        f"[{clean['flops/total'].min():.3g}, {clean['flops/total'].max():.3g}]"
        if clean.height
        else "(none)"
    )
    for g in groups:
        cond = pl.lit(True)
        for c, v in zip(by, g, strict=True):
            cond = cond & (pl.col(c) == v)
        pts = points.filter(cond)
        row: dict[str, Any] = dict(zip(by, g, strict=True))
        row.update(
            rho_star=float("nan"),
            rho_lo=float("nan"),
            rho_hi=float("nan"),
            reward_star=float("nan"),
            rho_best_observed=float("nan"),
            share_search_star=float("nan"),
            share_reward_star=float("nan"),
            n_runs=pts.height,
            n_rho=0,
            q0=float("nan"),
            q1=float("nan"),
            q2=float("nan"),
            status="not identifiable",
            reason="",
        )
        fits.append(row)
        if pts.height == 0:
            row["reason"] = (
                f"no evaluation point with flops/total in [{lo:.3g}, {hi:.3g}]; "
                f"the runs span {F_range}"
                if clean.height
                else f"no point with finite {y}, flops/total and compute/rho (no FLOP ledger?)"
            )
            continue
        rho = pts["rho"].to_numpy().astype(float)
        R = pts[y].to_numpy().astype(float)
        row["rho_best_observed"] = float(rho[np.argmax(R)])
        n_rho = len(np.unique(np.round(rho, 3)))
        row["n_rho"] = n_rho
        if n_rho < 3:
            row["reason"] = f"{n_rho} distinct ρ value(s) in the band: a peak needs at least 3"
            continue
        if np.ptp(R) <= 1e-9:
            row["reason"] = f"{y} is the same ({R[0]:.4g}) at every ρ: no optimum"
            continue
        q = _quadratic_fits(rho, R, np.ones((1, len(rho))))[0]
        row.update(q0=float(q[0]), q1=float(q[1]), q2=float(q[2]))
        if q[2] >= 0:
            row["reason"] = (
                f"{y} is not concave in ρ inside the band (no interior optimum); the best run "
                f"has ρ = {row['rho_best_observed']:.2f}"
            )
            continue
        star = -q[1] / (2 * q[2])
        if not rho.min() <= star <= rho.max():
            row["reason"] = (
                f"the fitted optimum ρ = {star:.2f} lies outside the observed range "
                f"[{rho.min():.2f}, {rho.max():.2f}]: extend the ρ grid"
            )
            continue
        row.update(
            rho_star=float(star),
            reward_star=float(q[0] + q[1] * star + q[2] * star * star),
            status="ok",
        )
        for c in ("search", "reward"):
            if f"share_{c}" in pts.columns:
                # shares are linear in ρ for a fixed reward system (reward FLOPs ∝ search FLOPs)
                sh = pts[f"share_{c}"].to_numpy().astype(float)
                coef = np.polyfit(rho, sh, 1)
                row[f"share_{c}_star"] = float(np.clip(np.polyval(coef, star), 0.0, 1.0))
        if n_boot > 0:
            m = len(rho)
            Wb = rng.multinomial(m, np.full(m, 1.0 / m), size=n_boot).astype(float)
            qb = _quadratic_fits(rho, R, Wb)
            with np.errstate(divide="ignore", invalid="ignore"):
                sb = np.where(qb[:, 2] < 0, -qb[:, 1] / (2 * qb[:, 2]), np.nan)
            sb = np.clip(sb, rho.min(), rho.max())
            qq = (1 - ci) / 2
            if np.isfinite(sb).sum() >= 2:
                row["rho_lo"], row["rho_hi"] = (float(v) for v in np.nanquantile(sb, [qq, 1 - qq]))
            frac = float(np.isfinite(sb).mean())
            if frac < 0.9:
                row["reason"] = f"only {frac:.0%} of bootstrap replicates have a concave peak"
    return RhoFrontier((lo, hi), y, by, points, pl.DataFrame(fits))


def regime(rho: float, share_reward: float, share_search: float, rho_threshold: float = 0.5) -> str:
    """RACE regime of an allocation (Wilhelm & Kao, arXiv 2607.13389).

    ``update-heavy`` when the optimum spends at least `rho_threshold` of its FLOPs on learning;
    otherwise ``reward-heavy`` when the reward model takes more than search, else
    ``search-heavy``. (The paper's calls separate high- from low-update regimes; the threshold is
    isolab's, stated here so that a call can be checked.)
    """
    if not np.isfinite(rho):
        return "unknown"
    if rho >= rho_threshold:
        return "update-heavy"
    if np.isfinite(share_reward) and np.isfinite(share_search) and share_reward > share_search:
        return "reward-heavy"
    return "search-heavy"


@dataclass(frozen=True)
class RaceResult:
    """RACE: regime calls from a pilot grid, checked against the full grid.

    Attributes:
        table: per group: `pilot_rho`, `full_rho` (ρ* or, when not identifiable, the best
            observed ρ, see `*_rho_source`), `pilot_regime`, `full_regime`, `same`.
        same_regime_rate: fraction of groups where the pilot's call matches the full grid's.
        pilot_flops_fraction: FLOPs of the pilot runs over FLOPs of the full grid.
        pilot, full: the two `RhoFrontier`s.
    """

    table: pl.DataFrame
    same_regime_rate: float
    pilot_flops_fraction: float
    pilot: RhoFrontier
    full: RhoFrontier


def _calls(front: RhoFrontier, rho_threshold: float) -> pl.DataFrame:
    rows = []
    for r in front.fits.iter_rows(named=True):
        ok = r["status"] == "ok"
        rho = r["rho_star"] if ok else r["rho_best_observed"]
        share_r, share_s = r["share_reward_star"], r["share_search_star"]
        if not ok and np.isfinite(rho):
            pts = front.points
            for c, v in zip(front.by, [r[c] for c in front.by], strict=True):
                pts = pts.filter(pl.col(c) == v)
            best = pts.sort(front.metric, descending=True).head(1)
            share_r = best["share_reward"][0] if "share_reward" in best.columns else float("nan")
            share_s = best["share_search"][0] if "share_search" in best.columns else float("nan")
        rows.append(
            {
                **{c: r[c] for c in front.by},
                "rho": rho,
                "rho_source": "rho_star" if ok else "best observed",
                "regime": regime(rho, share_r, share_s, rho_threshold),
            }
        )
    return pl.DataFrame(rows)


@_single_threaded
def race(
    pilot_df: Any,
    full_df: Any,
    *,
    y: str = DEFAULT_Y,
    by: str | Sequence[str] = "reward",
    pilot_band: tuple[float, float] | None = None,
    full_band: tuple[float, float] | None = None,
    rho_threshold: float = 0.5,
    n_boot: int = 0,
) -> RaceResult:
    """The RACE protocol (Reward-Aware Compute Allocation, Wilhelm & Kao, arXiv 2607.13389).

    A small pilot IsoFLOP grid (few ρ values, a small budget) calls the regime of each setting
    (search-heavy / update-heavy / reward-heavy, see `regime`); the same call on the full grid
    is the reference; the same-regime rate is the fraction of settings where they agree. The
    paper reports 1.0 and stresses that RACE is a diagnostic of the regime, not a guarantee of
    better held-out reward. Bands default to `isoflop_band` of each grid.
    """
    pilot_df, full_df = _to_polars(pilot_df), _to_polars(full_df)
    pilot = rho_frontier(pilot_df, pilot_band, y=y, by=by, n_boot=n_boot)
    full = rho_frontier(full_df, full_band, y=y, by=by, n_boot=n_boot)
    p = _calls(pilot, rho_threshold).rename(
        {"rho": "pilot_rho", "rho_source": "pilot_rho_source", "regime": "pilot_regime"}
    )
    f = _calls(full, rho_threshold).rename(
        {"rho": "full_rho", "rho_source": "full_rho_source", "regime": "full_regime"}
    )
    table = p.join(f, on=list(pilot.by), how="inner").with_columns(
        same=(pl.col("pilot_regime") == pl.col("full_regime"))
        & (pl.col("full_regime") != "unknown")
    )
    if table.height == 0:
        raise ValueError(
            f"the pilot and full grids share no {pilot.by} value: pilot has "
            f"{p.select(pilot.by).rows()}, full has {f.select(full.by).rows()}"
        )
    rate = float(table["same"].mean())
    key = "run_key" if "run_key" in full_df.columns else "run_id"

    def spent(d: pl.DataFrame) -> float:
        return float(d.group_by(key).agg(pl.col("flops/total").max())["flops/total"].sum())

    return RaceResult(table, rate, spent(pilot_df) / spent(full_df), pilot, full)


# ------------------------------------------------------------------------------------------
# Recommendation
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Recommendation:
    """ "At this budget use n ≈ …, B_p ≈ …, M ≈ …", with the evidence.

    Attributes:
        budget: compute budget in units of `x` (rollouts by default).
        n, B_p, M: the allocation (n and B_p from the grid that was run; M = budget / (B_p·n)).
        n_star, n_star_ci: the fitted n*(budget) and its bootstrap interval.
        expected: reward of the recommended n's fitted curve at the budget.
        frontier_reward: best reward observed at compute ≤ budget, and `frontier_config` its run.
        evidence: configurations ranked by their seed-averaged reward at the budget.
        notes: caveats (extrapolation beyond the data, fits that were not identifiable).
    """

    budget: float
    metric: str
    n: int
    B_p: int
    M: int
    n_star: float
    n_star_ci: tuple[float, float]
    expected: float
    frontier_reward: float
    frontier_config: dict[str, Any]
    evidence: pl.DataFrame
    notes: tuple[str, ...] = ()

    @property
    def summary(self) -> str:
        """One sentence for a person."""
        lo, hi = self.n_star_ci
        parts = []
        if np.isfinite(self.n_star):
            ci = f", 95% CI [{lo:.0f}, {hi:.0f}]" if np.isfinite(lo) else ""
            parts.append(f"fitted n* = {self.n_star:.0f}{ci}")
        if np.isfinite(self.expected):
            parts.append(f"expected {self.metric} ≈ {self.expected:.3f}")
        if np.isfinite(self.frontier_reward):
            parts.append(f"best observed at ≤ C: {self.frontier_reward:.3f}")
        evidence = f" ({'; '.join(parts)})" if parts else ""
        return (
            f"at C = {self.budget:.3g} use n ≈ {self.n}, B_p ≈ {self.B_p}, M ≈ {self.M}{evidence}"
        )


@_single_threaded
def recommend(
    df: Any,
    budget: float,
    *,
    x: str = DEFAULT_X,
    y: str = DEFAULT_Y,
    n_star: NStarResult | None = None,
    **optimal_n_kwargs: Any,
) -> Recommendation:
    """The allocation to use at compute `budget`, from the fitted n*(C) and the runs themselves.

    n: the grid value of n nearest (in log2) to the fitted n*(budget); past the data, the
    saturation n. B_p: among runs with that n, the B_p with the best seed-averaged reward at the
    budget (interpolated in log C; a run that stops earlier counts at its last point).
    M = budget / (B_p·n). Evidence: every configuration ranked by reward at the budget, and the
    frontier's best run at compute ≤ budget.
    """
    if not budget > 0:
        raise ValueError(f"budget = {budget}: give a positive compute budget in {x}.")
    df = _to_polars(df)
    _require(df, x, y, "n", "B_p")
    res = n_star if n_star is not None else optimal_n(df, x=x, y=y, **optimal_n_kwargs)
    notes: list[str] = []
    clean = _finite(df, x, y, context="recommend")
    c_max = float(clean[x].max()) if clean.height else float("nan")
    if budget > c_max:
        notes.append(
            f"budget {budget:.3g} is beyond the largest compute in the data ({c_max:.3g}): "
            "n comes from the fitted n*(C), B_p and the expected reward are extrapolated"
        )
    ns = np.array(sorted(int(v) for v in clean["n"].unique().to_list()), dtype=float)
    nstar, nci = float("nan"), (float("nan"), float("nan"))
    if res.fit is not None and res.fit.identifiable:
        nstar = float(res.n_star_at(np.array([budget]))[0])
        lo, hi = res.n_star_band(np.array([budget]))
        nci = (float(lo[0]), float(hi[0]))
    elif res.table.height:
        t = res.table.filter(pl.col("C") <= budget)
        if t.height:
            nstar = float(t["n_star_raw"][-1])
        notes.append(f"n*(C) is not identifiable ({res.reason}): n from the raw envelope")
    else:
        notes.append(f"n*(C) is not identifiable ({res.reason})")
    if res.status == "extrapolated":
        notes.append(f"n*(C) fit: {res.reason}")
    if res.table.height and budget < float(res.table["C"].min()):
        notes.append(
            f"budget {budget:.3g} is below {float(res.table['C'].min()):.3g}, where the first "
            "curve starts to rise: n* there is an extrapolation"
        )
    if np.isfinite(nstar):
        n = int(ns[np.argmin(np.abs(np.log2(ns) - math.log2(nstar)))])
    else:
        # no fit at all: fall back on the frontier's holder
        n = int(frontier(clean.filter(pl.col(x) <= budget), x, y)["n"][-1])

    avg = _seed_average(clean, x, y)
    cfg = [c for c in ("n", "B_p", "M") if c in avg.columns]
    ev = []
    for key, grp in avg.group_by(cfg, maintain_order=True):
        g = grp.filter(pl.col(x) > 0).sort(x)
        if g.height == 0:
            continue
        C, R = g[x].to_numpy().astype(float), g[y].to_numpy()
        at = float(np.interp(math.log(min(budget, C[-1])), np.log(C), R))
        ev.append({**dict(zip(cfg, key, strict=True)), "C_max": C[-1], f"{y}_at_budget": at})
    evidence = pl.DataFrame(ev).sort(f"{y}_at_budget", descending=True)
    mine = evidence.filter(pl.col("n") == n)
    if mine.height:
        B_p = int(mine["B_p"][0])
    else:
        B_p = int(clean["B_p"].mode()[0])
        notes.append(f"no run with n = {n}: B_p is the most common value")
    M = max(int(round(budget / (B_p * n))), 1)
    if budget < B_p * n:
        notes.append(f"budget {budget:.3g} buys less than one step of B_p·n = {B_p * n} rollouts")
    fit_n = res.fits.get(n)
    expected = float(fit_n.predict(np.array([budget]))[0]) if fit_n is not None else float("nan")
    fr = frontier(clean.filter(pl.col(x) <= budget), x, y)
    if fr.height:
        last = fr.tail(1).to_dicts()[0]
        frontier_reward = float(last.pop("frontier"))
        last.pop(y, None)
        last.pop(x, None)
    else:
        frontier_reward, last = float("nan"), {}
    return Recommendation(
        budget, y, n, B_p, M, nstar, nci, expected, frontier_reward, last, evidence, tuple(notes)
    )
