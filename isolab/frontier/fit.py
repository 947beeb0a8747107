"""The fit of ScaleRL's sigmoid law to (compute, reward) points (arXiv 2510.13786), multi-start,
with bootstrap intervals and a status that says when the data do not pin it down.

The law itself is `isolab.frontier.law`; the grid search and refinement that solve it,
`isolab.frontier.solver`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from isolab.frontier.blas import single_threaded
from isolab.frontier.law import predict_params, sigmoid
from isolab.frontier.solver import B_MAX, U_PAD_HI, U_PAD_LO, fit_batch
from isolab.frontier.status import Status

logger = logging.getLogger(__name__)

#: The law's parameters in the column order of parameter rows (`predict_params`, `boot`).
PARAMS = ("R0", "A", "C_mid", "B")
#: Most bootstrap replicates a fit takes: intervals settle by a few thousand, and the
#: (n_boot × points) resample arrays of 10¹² replicates ran out of memory.
MAX_N_BOOT = 100_000


@dataclass(frozen=True)
class SigmoidFit:
    """A fitted ``R(C) = R0 + (A − R0) / (1 + (C_mid / C)^B)`` with bootstrap intervals.

    Attributes:
        R0, A, C_mid, B: point estimates (NaN when not identifiable).
        R0_ci, A_ci, C_mid_ci, B_ci: bootstrap percentile intervals at level `ci_level`.
        status: ``ok``; ``extrapolated`` (finite and describing the data, but a parameter lies
            outside what the data resolve, see `reason`); ``boundary`` (A or R0 pinned by their
            box); ``flat`` (no significant rise); ``not identifiable`` (no fit).
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
        """True when a fit exists (status ``ok``, ``extrapolated``, ``boundary`` or ``flat``)."""
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
        for name in PARAMS:
            out[name] = getattr(self, name)
            lo, hi = getattr(self, f"{name}_ci")
            out[f"{name}_lo"], out[f"{name}_hi"] = lo, hi
        out.update(status=self.status, reason=self.reason, n_points=self.n_points, rmse=self.rmse)
        return out


def percentile_intervals(boot: np.ndarray, ci: float) -> dict[str, tuple[float, float]]:
    """Bootstrap percentile intervals at level `ci` of replicate rows (K, 4: R0, A, C_mid, B),
    as the `SigmoidFit` fields ``R0_ci`` … ``B_ci``."""
    q = (1 - ci) / 2
    out = {}
    for i, name in enumerate(PARAMS):
        lo, hi = np.quantile(boot[:, i], [q, 1 - q])
        out[f"{name}_ci"] = (float(lo), float(hi))
    return out


def _not_identifiable(reason: str, n_points: int = 0) -> SigmoidFit:
    nan = float("nan")
    return SigmoidFit(
        nan, nan, nan, nan, status="not identifiable", reason=reason, n_points=n_points
    )


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


def _judge(
    p: np.ndarray,
    sse: float,
    R: np.ndarray,
    w: np.ndarray,
    R0: float | None,
    C_range: tuple[float, float],
    bounds_A: tuple[float, float],
) -> tuple[Status, list[str]]:
    """The status of the point estimate `p` (R0, A, C_mid, B) and the reasons it is not ``ok``;
    a later check overrides an earlier one's status (extrapolated < boundary < flat)."""
    c_lo, c_hi = C_range
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
    if p[3] >= B_MAX * 0.999:
        reasons.append(f"B hit its bound {B_MAX}: the transition is sharper than the data resolve")
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
    p_rise = _rise_p_value(R, w, sse, R0)
    if p_rise is not None and p_rise >= 0.05:
        status = "flat"
        reasons.append(
            f"no significant rise (F-test against a constant, p = {p_rise:.2g}): A, C_mid and "
            "B describe noise"
        )
    return status, reasons


def _resamples(
    bootstrap: str,
    C: np.ndarray,
    R: np.ndarray,
    w: np.ndarray,
    params: np.ndarray,
    replicates: Any,
    keep: np.ndarray,
    n_boot: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap values and weights (n_boot × points) to refit; `keep` selects the points used
    from the columns of `replicates`."""
    n = len(R)
    if bootstrap == "cases":  # resampling points = multinomial weights on the same points
        counts = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(float)
        return np.broadcast_to(R, (n_boot, n)), counts * w[None, :]
    if bootstrap == "replicates":
        if replicates is None:
            raise ValueError("bootstrap = 'replicates' needs the replicates array.")
        Yb = np.asarray(replicates, dtype=float)[:, keep]
        Wb = np.broadcast_to(w, Yb.shape) * np.isfinite(Yb)  # a missing replicate weighs 0
        return np.where(np.isfinite(Yb), Yb, 0.0), Wb
    if bootstrap == "residual":
        fitted = predict_params(params, C)[0]
        resid = R - fitted
        idx = rng.integers(0, n, size=(n_boot, n))
        return fitted[None, :] + resid[idx], np.broadcast_to(w, (n_boot, n))
    raise ValueError(f"bootstrap = {bootstrap!r}: choose 'cases', 'residual' or 'replicates'.")


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
    the best `starts` grid points are refined by Levenberg–Marquardt and the best kept
    (`isolab.frontier.solver`). Confidence intervals are bootstrap percentiles (``cases``:
    resample points; ``residual``: resample residuals around the fit), every replicate refitted,
    all vectorised.

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
            `isolab.frontier.per_n.seed_replicates`); the honest choice when points are
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
    status, reasons = _judge(p, float(sse[0]), R, w, R0, (c_lo, c_hi), bounds_A)

    boot = None
    cis: dict[str, tuple[float, float]] = {}
    if n_boot > 0:
        rng = np.random.default_rng(seed)
        Yb, Wb = _resamples(bootstrap, C, R, w, params, replicates, keep, n_boot, rng)
        boot, _ = fit_batch(
            x, np.ascontiguousarray(Yb), np.ascontiguousarray(Wb), R0, bounds_A, u_range, start=p
        )
        cis = percentile_intervals(boot, ci)
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
