"""ScaleRL's sigmoid law of reward against compute (Khatri et al., arXiv 2510.13786), written once:

    R(C) = R0 + (A − R0) / (1 + (C_mid / C)^B) = R0 + (A − R0)·s,   s = σ(B·(log C − log C_mid))

`share` is s, the fraction of the rise made by compute C; `law` puts R0 and A on it. Every
evaluation of the curve (`sigmoid`, `predict_params`, the solver's grid, refinement and residuals)
goes through these two, in log compute ``x = log C`` and ``u = log C_mid``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import expit


def share(x: Any, u: Any, B: Any) -> np.ndarray:
    """The fraction of the rise made at log compute `x`: ``s = 1 / (1 + (C_mid / C)^B)``.

    ``(C_mid / C)^B = exp(B·(u − x))``, so s is the logistic ``σ(B·(x − u))``: 0 at C = 0
    (x = −inf, for B > 0), ½ at C = C_mid, → 1 as C → ∞. Arguments broadcast.
    """
    return expit(B * (x - u))


def law(R0: Any, A: Any, s: Any) -> np.ndarray:
    """The reward at share `s` of the rise: ``R0 + (A − R0)·s``. Linear in (R0, A) for fixed s,
    which is what lets the solver profile them out (`isolab.frontier.solver`)."""
    return R0 + (A - R0) * s


def sigmoid(C: Any, R0: float, A: float | np.ndarray, C_mid: float, B: float) -> np.ndarray:
    """ScaleRL's saturating law ``R(C) = R0 + (A − R0) / (1 + (C_mid / C)^B)`` (arXiv 2510.13786).

    ``R(0) = R0`` (the reward before training), ``R(∞) = A`` (the asymptote), ``R(C_mid)`` is
    halfway, ``B`` sets the steepness. Evaluated as a logistic in ``log C`` (`share`).
    """
    C = np.asarray(C, dtype=float)
    with np.errstate(divide="ignore"):
        x = np.log(C)
    return law(R0, A, share(x, math.log(C_mid), B))


def predict_params(params: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Curves of many parameter rows (K, 4: R0, A, C_mid, B) at C → (K, len(C))."""
    with np.errstate(divide="ignore"):
        x = np.log(np.asarray(C, dtype=float))
    R0, A, C_mid, B = (params[:, i : i + 1] for i in range(4))
    return law(R0, A, share(x[None, :], np.log(C_mid), B))
