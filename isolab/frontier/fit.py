"""The sigmoid law of reward against compute and its fit (ScaleRL, arXiv 2510.13786):
``R(C) = R0 + (A − R0) / (1 + (C_mid / C)^B)``, multi-start, with bootstrap intervals."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from scipy.special import expit

from isolab.frontier.frames import Status, single_threaded

logger = logging.getLogger(__name__)

# Search grid of the sigmoid fit: log C_mid spans the data range widened by these many e-folds
# on each side, B spans [B_MIN, B_MAX] log-uniformly.
U_PAD_LO = math.log(10.0)


U_PAD_HI = 2 * math.log(10.0)


_B_MIN, _B_MAX = 0.05, 20.0


_GRID_U, _GRID_B = 72, 36


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
        curves = predict_params(self.boot, C)
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


def predict_params(params: np.ndarray, C: np.ndarray) -> np.ndarray:
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


def fit_batch(
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


@single_threaded
def _rise_p_value(R: np.ndarray, w: np.ndarray, sse: float, R0: float | None) -> float | None:
    """p-value of the sigmoid against a constant (the mean, or R0 when fixed): F-test of the
    2–3 extra parameters; None when too few points to test."""
    from scipy import stats

    n_params = 3 if R0 is not None else 4
    if len(R) <= n_params or sse <= 0:
        return None
    level = R0 if R0 is not None else float(np.average(R, weights=w))
    sse0 = float(np.sum(w * (R - level) ** 2)) * len(R) / float(np.sum(w))
    sse1 = sse * len(R) / float(np.sum(w))
    extra = n_params - (0 if R0 is not None else 1)
    F = ((sse0 - sse1) / extra) / (sse1 / (len(R) - n_params))
    return float(stats.f.sf(F, extra, len(R) - n_params)) if math.isfinite(F) else None


def fit_sigmoid(
    C: Any,
    R: Any,
    *,
    R0: float | None = None,
    c_min: float | None = None,
    weights: Any = None,
    bounds_A: tuple[float, float] = (0.0, 1.0),
    n_boot: int = 200,
    bootstrap: Literal["cases", "residual", "replicates"] = "cases",
    replicates: Any = None,
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
        bootstrap: ``cases`` (resample points), ``residual`` (resample residuals) or
            ``replicates``: refit each row of `replicates`, values of R at the same C drawn by
            the caller from what varies (seeds within configurations, see
            `isolab.frontier.nstar.seed_replicates`); the honest choice when points are
            seed means, since fit residuals of a 4-parameter law on a few points understate it.
        replicates: (K, len(R)) replicate values for ``bootstrap="replicates"``.
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
    u_range = (math.log(c_lo) - U_PAD_LO, math.log(c_hi) + U_PAD_HI)
    params, sse = fit_batch(x, R[None, :], w[None, :], R0, bounds_A, u_range, starts=starts)
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
    edge = 1e-3 * (bounds_A[1] - bounds_A[0])
    at_bound = [
        name
        for name, value in (("A", p[1]), ("R0", p[0] if R0 is None else math.nan))
        if math.isfinite(value) and min(value - bounds_A[0], bounds_A[1] - value) < edge
    ]
    if at_bound:
        status = "boundary"
        reasons.append(
            f"{' and '.join(at_bound)} at the bound of {list(bounds_A)}: the fit is pinned by "
            "the box, not by the data"
        )
    p_rise = _rise_p_value(R, w, float(sse[0]), R0)
    if p_rise is not None and p_rise >= 0.05:
        status = "flat"
        reasons.append(
            f"no significant rise (F-test against a constant, p = {p_rise:.2g}): A, C_mid and "
            "B describe noise"
        )

    boot = None
    cis: dict[str, tuple[float, float]] = {}
    if n_boot > 0:
        rng = np.random.default_rng(seed)
        n = len(R)
        if bootstrap == "cases":
            counts = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(float)
            Yb = np.broadcast_to(R, (n_boot, n))
            Wb = counts * w[None, :]
        elif bootstrap == "replicates":
            if replicates is None:
                raise ValueError("bootstrap = 'replicates' needs the replicates array.")
            Yb = np.asarray(replicates, dtype=float)[:, keep]
            Wb = np.broadcast_to(w, Yb.shape) * np.isfinite(Yb)
            Yb = np.where(np.isfinite(Yb), Yb, 0.0)
        elif bootstrap == "residual":
            fitted = predict_params(params, C)[0]
            resid = R - fitted
            idx = rng.integers(0, n, size=(n_boot, n))
            Yb = fitted[None, :] + resid[idx]
            Wb = np.broadcast_to(w, (n_boot, n))
        else:
            raise ValueError(
                f"bootstrap = {bootstrap!r}: choose 'cases', 'residual' or 'replicates'."
            )
        boot, _ = fit_batch(
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
