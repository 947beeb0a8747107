"""The regression with robust standard errors that the verdicts' slope and curve tests fit
(statsmodels OLS), and why its error is the one it is.

- `hc3_ols`: one row per run, errors robust to unequal variance (HC3). The runs of a sweep do
  not share one noise level: a reward near 0 or 1 has less room to vary than one near ½, and the
  spread changes with n, ρ or the model. Classical OLS errors assume one variance and are wrong
  when it differs; White's HC0 and HC1 corrections fix that but are liberal on a few dozen runs;
  HC3 (MacKinnon & White 1985, recommended below ~250 observations by Long & Ervin 2000,
  https://doi.org/10.1080/00031305.2000.10474549) is the small-sample choice.
"""

from __future__ import annotations

import warnings

import numpy as np


def hc3_ols(formula: str, data):
    """OLS with HC3 standard errors and t references (statsmodels). A design with a point of
    leverage 1 (a configuration seen once) has no HC3 error there: its SEs come out NaN, and
    the tests refuse to call, rather than warn."""
    import statsmodels.formula.api as smf

    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return smf.ols(formula, data).fit(cov_type="HC3", use_t=True)


def hc3_arrays(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """OLS coefficients, HC3 covariance and residual df (statsmodels' `cov_type="HC3"`, a test
    checks it): the same small-sample robust errors as `hc3_ols`, without a formula, so that a
    calibration's thousands of fits take a millisecond each. A point of leverage 1 has no HC3
    error: the covariance comes out NaN."""
    XtX_inv = np.linalg.pinv(X.T @ X)
    beta = XtX_inv @ X.T @ y
    e = y - X @ beta
    h = np.einsum("ij,jk,ik->i", X, XtX_inv, X)
    with np.errstate(divide="ignore", invalid="ignore"):
        omega = np.where(h < 1 - 1e-10, e**2 / (1 - h) ** 2, np.nan)
    cov = XtX_inv @ (X.T * omega) @ X @ XtX_inv
    return beta, cov, len(y) - int(np.linalg.matrix_rank(X))


def cluster_ols(formula: str, data, groups):
    """OLS with standard errors clustered on `groups` (statsmodels' CR1, t on clusters − 1
    df): for rows that are not independent, such as the checkpoints of one run, whose luck
    (its seed's data order, its early updates) persists from one evaluation to the next. HC3
    on such rows counts every checkpoint as new evidence and is too narrow. A rank-deficient
    design is fitted (pseudo-inverse) without a warning: the caller checks the rank."""
    import pandas as pd
    import statsmodels.formula.api as smf

    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", UserWarning)  # a rank-deficient design: callers check
        return smf.ols(formula, pd.DataFrame(data)).fit(
            cov_type="cluster", cov_kwds={"groups": np.asarray(groups)}, use_t=True
        )
