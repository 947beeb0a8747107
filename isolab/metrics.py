"""Evaluation metrics and difficulty bands: avg@k, best@k (coverage), worst@k (sharpening).

best@k is the unbiased pass@k estimator of Chen et al. 2021 (arXiv 2107.03374):
``1 − C(n−c, k) / C(n, k)``; worst@k is pass^k (τ-bench, arXiv 2406.12045): ``C(c, k) / C(n, k)``,
the chance that all k of k samples drawn without replacement are correct. Pure functions of
correct counts; no model is needed here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from isolab.vocab import eval_metric


@dataclass(frozen=True)
class Bands:
    """Bands of a base model's avg@k that define difficulty splits (IsoCompute Playbook,
    arXiv 2603.12151 §3): Easy = avg@16 ∈ [0.3, 0.6], Hard = avg@16 ∈ [0, 0.0625] (solved at
    most once in 16), both ends included as the paper writes them.

    Never-solved problems are Hard, not dead weight: resampled 256 times, 400 of tiny-m's 0/16
    problems of the 96,000-problem pool solve at a mean rate of 5.1% (91% at least once), those
    at 1/16 at 8.3% (99.5%) — one population, sixteen samples too few to tell apart (issue 27;
    until then isolab excluded them, `(0, 0.0625]`).

    Attributes:
        easy: [low, high] of the Easy band.
        hard: [low, high] of the Hard band.
    """

    easy: tuple[float, float] = (0.3, 0.6)
    hard: tuple[float, float] = (0.0, 0.0625)

    def split_of(self, avg: float) -> str | None:
        if self.easy[0] <= avg <= self.easy[1]:
            return "easy"
        if self.hard[0] <= avg <= self.hard[1]:
            return "hard"
        return None

    def shares(self, counts: Sequence[int], k: int) -> dict[str, float]:
        """Shares of problems never solved, Hard (never-solved ones included), between the
        bands, Easy and above Easy, from correct counts out of k samples each."""
        avg = np.asarray(counts) / k
        masks = {
            "never": avg == 0,
            "hard": (avg >= self.hard[0]) & (avg <= self.hard[1]),
            "between": (avg > self.hard[1]) & (avg < self.easy[0]),
            "easy": (avg >= self.easy[0]) & (avg <= self.easy[1]),
            "above": avg > self.easy[1],
        }
        return {name: round(float(mask.mean()), 4) for name, mask in masks.items()}


DEFAULT_BANDS = Bands()


def _log_comb(n: np.ndarray, k: np.ndarray) -> np.ndarray:
    return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)


def _check(n, c, k) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n, c, k = (np.asarray(x, dtype=float) for x in (n, c, k))
    n, c, k = np.broadcast_arrays(n, c, k)
    if np.any(k < 1) or np.any(k > n):
        raise ValueError("need 1 ≤ k ≤ n samples per problem; sample more completions")
    if np.any(c < 0) or np.any(c > n):
        raise ValueError("correct counts c must lie in [0, n]")
    return n, c, k


def best_at_k(n, c, k) -> np.ndarray:
    """Unbiased pass@k: P(at least one of k samples is correct), elementwise over arrays.

    >>> float(best_at_k(4, 1, 2))
    0.5
    """
    n, c, k = _check(n, c, k)
    out = np.ones_like(n)
    has_fail = n - c >= k  # otherwise every k-subset holds a correct sample
    out[has_fail] = 1.0 - np.exp(_log_comb(n - c, k)[has_fail] - _log_comb(n, k)[has_fail])
    return out


def worst_at_k(n, c, k) -> np.ndarray:
    """pass^k: P(all k samples are correct) = C(c, k) / C(n, k), elementwise over arrays.

    >>> float(worst_at_k(4, 3, 2))
    0.5
    """
    n, c, k = _check(n, c, k)
    out = np.zeros_like(n)
    enough = c >= k
    out[enough] = np.exp(_log_comb(c, k)[enough] - _log_comb(n, k)[enough])
    return out


def metrics_from_counts(
    counts: Sequence[int], n_samples: int, ks: Sequence[int]
) -> dict[str, float]:
    """`eval/avg@K`, `eval/best@k`, `eval/worst@k` averaged over problems.

    avg@k, the expected accuracy of one sample, is the same number for every k (the mean of
    c/n_samples), so it is logged once, under the largest k (`eval/avg@4` for ks = (1, 4)):
    logging avg@1 beside it invited reading two numbers where there is one. best@1 and worst@1
    equal it too, so they are logged only when 1 is the only k.
    """
    arr = np.asarray(counts)
    out: dict[str, float] = {eval_metric("avg", max(ks)): float(np.mean(arr / n_samples))}
    for k in ks:
        if k == 1 and len(ks) > 1:
            continue
        out[eval_metric("best", k)] = float(np.mean(best_at_k(n_samples, arr, k)))
        out[eval_metric("worst", k)] = float(np.mean(worst_at_k(n_samples, arr, k)))
    return out


def clopper_pearson_upper(k: int, n: int, level: float = 0.95, *, two_sided: bool = False) -> float:
    """Clopper–Pearson upper bound of a rate seen k times in n trials: one-sided at `level`
    (how often a calibrated test calls a false effect, at most), or the upper end of the
    two-sided `level` interval."""
    from scipy import stats  # scipy is slow to import: only where a bound is asked for

    if not 0 <= k <= n or n < 1:
        raise ValueError(f"k = {k}, n = {n}: need 0 ≤ k ≤ n and n ≥ 1.")
    q = 1 - (1 - level) / 2 if two_sided else level
    return 1.0 if k >= n else float(stats.beta.ppf(q, k + 1, n - k))
