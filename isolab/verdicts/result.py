"""What every statistical test of a claim returns (`StatResult`: an estimate and its uncertainty),
and the level it is read at.

A claim is called at α = `ALPHA`: `agrees` or `disagrees` when a test rejects "no effect" at α
(after Holm's correction where it takes several looks), `inconclusive` otherwise. Tests run at
α = 4% so that the false-call rate, measured on simulated worlds with no effect, stays at or below
5%. Each result also states the smallest effect its design detects with 80% power, so that an
`inconclusive` says how large an effect could have gone unseen.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from scipy import stats

#: Level of every test. The target is a false-call rate of at most 5% per claim; robust
#: standard errors on a few dozen runs are slightly liberal (5.5–5.9% of 1,000 null worlds at a
#: nominal 5%, `benchmarks/verdict_calibration.py`), so the tests run at 4%.
ALPHA = 0.04
#: The intervals match the calls: 1 − α.
CI_LEVEL = f"{1 - ALPHA:.0%}"
#: Power at which the smallest detectable effect is stated.
POWER = 0.80


@dataclass(frozen=True)
class StatResult:
    """An estimate and its uncertainty: what a test of `isolab.verdicts` returns, and what
    `claims.verdict` turns into a `Verdict` (the claim's call).

    Attributes:
        estimate: the effect, in the test's unit.
        se: its standard error.
        df: degrees of freedom of the t reference (inf: normal).
        p_value: two-sided p-value of "no effect" (Holm-adjusted where several looks).
        interval: the interval at 1 − α (96%: it excludes 0 exactly when p < α).
        mde: the effect detected with 80% power.
        n_runs: runs used.
        test: the test in words.
        note: a caveat, or why the test could not run (then estimate is NaN).
        extra: further numbers for the report (per-arm means, per-model slopes…).
    """

    estimate: float
    se: float
    df: float
    p_value: float | None
    interval: tuple[float, float] | None
    mde: float
    n_runs: int
    test: str
    note: str = ""
    extra: dict = field(default_factory=dict)

    @classmethod
    def refused(cls, reason: str, n_runs: int = 0, test: str = "not run") -> StatResult:
        """A test that could not run (too few runs, a missing arm…): NaN estimate, `reason`."""
        return cls(
            estimate=math.nan,
            se=math.nan,
            df=math.nan,
            p_value=None,
            interval=None,
            mde=math.nan,
            n_runs=n_runs,
            test=test,
            note=reason,
        )

    @classmethod
    def from_t(
        cls,
        estimate: float,
        se: float,
        df: float,
        *,
        n_runs: int,
        test: str,
        note: str = "",
        extra: dict | None = None,
    ) -> StatResult:
        """The result of a t-test of `estimate` with standard error `se` on `df` degrees of
        freedom: p-value, interval at 1 − α and detectable effect (None where not finite)."""
        p, ci = t_test(estimate, se, df)
        return cls(
            estimate=estimate,
            se=se,
            df=df,
            p_value=p if math.isfinite(p) else None,
            interval=ci if math.isfinite(ci[0]) else None,
            mde=min_detectable(se, df),
            n_runs=n_runs,
            test=test,
            note=note,
            extra=extra if extra is not None else {},
        )

    @property
    def ran(self) -> bool:
        return math.isfinite(self.estimate)


def t_quantile(df: float) -> float:
    """The t quantile at 1 − α/2 on `df` degrees of freedom: an interval's half-width per SE."""
    return float(stats.t.ppf(1 - ALPHA / 2, df))


def t_test(estimate: float, se: float, df: float) -> tuple[float, tuple[float, float]]:
    """Two-sided p-value and interval at 1 − α of an estimate with standard error `se` (t, `df`)."""
    if not (math.isfinite(estimate) and math.isfinite(se) and se > 0 and df > 0):
        return math.nan, (math.nan, math.nan)
    t = estimate / se
    p = float(2 * stats.t.sf(abs(t), df))
    q = t_quantile(df)
    return p, (estimate - q * se, estimate + q * se)


def min_detectable(
    se: float, df: float = math.inf, alpha: float = ALPHA, power: float = POWER
) -> float:
    """Smallest true effect a two-sided level-`alpha` t-test detects with probability `power`:
    ``(t_{1−α/2} + t_{power}) · SE``."""
    if not (math.isfinite(se) and se > 0 and df > 0):
        return math.nan
    return float((stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df)) * se)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values (Holm 1979: the i-th smallest of m is multiplied by m − i + 1,
    then made monotone), NaN kept as NaN. The same numbers as statsmodels' `multipletests(...,
    method="holm")` (a test checks it), which runs a full `gc.collect()` on every call: 0.3 s
    here, too slow for the calibration's thousands of calls."""
    finite = [i for i, p in enumerate(p_values) if p is not None and math.isfinite(p)]
    out = [math.nan] * len(p_values)
    order = sorted(finite, key=lambda i: p_values[i])
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * p_values[i]))
        out[i] = running
    return out
