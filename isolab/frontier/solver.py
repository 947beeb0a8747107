"""The solver behind `fit_sigmoid`: a grid over (log C_mid, B) with (R0, A) solved exactly at
every grid point, then box-projected Levenberg–Marquardt from the best grid points, for K
replicates (the point estimate and its bootstrap) at once.

Why a grid and a linear solve rather than a local optimiser from one starting guess: for fixed
(C_mid, B) the law ``R0 + (A − R0)·s`` is linear in (R0, A) (`isolab.frontier.law`), so their best
values have a closed form (variable projection) and the search is only two-dimensional. Over
those two the squared error has long flat valleys and local minima (a curve that has not bent
yet trades A against C_mid; compute spans many decades, so a start a few decades off sees no
gradient at all). A grid over log C_mid, spanning the data's compute range and beyond, and over
B, log-uniform, finds the right valley from any scale of compute with no starting guess; the
refinement then moves off the grid. Every step is a batched matrix product over replicates,
which keeps the bootstrap's hundreds of refits cheap.
"""

from __future__ import annotations

import math

import numpy as np

from isolab.frontier.law import law, share

# The search box: log C_mid spans the data's log compute range widened by U_PAD_LO below and
# U_PAD_HI above (one decade below, two above, where a curve that has not bent yet within the
# data puts its C_mid); B lies in [B_MIN, B_MAX].
U_PAD_LO = math.log(10.0)
U_PAD_HI = 2 * math.log(10.0)
B_MIN, B_MAX = 0.05, 20.0
# Points of the grid over log C_mid (linear) and B (log-uniform over [B_MIN, 12]; refinement may
# go on to B_MAX); a coarse grid, for bootstrap replicates that also start from the point
# estimate, has a sixth of each.
_GRID_U, _GRID_B = 72, 36


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
    b_grid = np.geomspace(B_MIN, 12.0, n_b)
    U, Bg = np.meshgrid(u_grid, b_grid, indexing="ij")
    U, Bg = U.ravel(), Bg.ravel()
    s = share(x[None, :], U[:, None], Bg[:, None])  # G×N, s = 0 at C = 0
    # The weighted sums the closed-form (R0, A) needs, for all G grid points × K replicates at
    # once as three matrix products.
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
    lo = np.array([bounds[0], bounds[0], u_range[0], B_MIN])
    hi = np.array([bounds[1], bounds[1], u_range[1], B_MAX])
    finite_x = np.isfinite(x)
    xf = np.where(finite_x, x, 0.0)  # x − u at C = 0 would make ∂f/∂B = 0·inf = NaN

    def residual_and_jac(q: np.ndarray, jac: bool) -> tuple[np.ndarray, np.ndarray | None]:
        R0, A, u, B = (q[:, i : i + 1] for i in range(4))
        s = np.where(finite_x, share(xf, u, B), 0.0)
        r = Y - law(R0, A, s)
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
    r = Y - law(R0, A, share(x[None, :], u, B))
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
