"""Interference between problems (issue 31, part 1; IsoCompute Playbook): when one policy trains
on a mixture of problems, an update that helps some problems can cost others. Measured here from
a run's per-problem correct counts at each checkpoint (`eval/per_problem_counts.json`, or
`eval-<name>/…` for an evaluation set such as `train`, the run's own training problems), each
measure with its sampling noise:

- *forgetting events*: the share of problems whose solve rate falls between consecutive
  checkpoints beyond binomial noise, by a one-sided Fisher exact test per problem (k samples at
  each checkpoint) at level `alpha`. Fisher's test is exact and conservative, so a run where no
  problem's true solve rate falls calls at most `alpha` of them (`expected_false`);
- *excess dispersion of gains*: the variance across problems of their gains between two
  checkpoints, less the variance that binomial sampling alone gives them (unbiased per
  problem): zero in expectation when every problem gains alike, above zero when gains differ
  (some problems gain, others stall or lose).

Not yet built: the correlation of one problem's gain with the others' losses, and the study at
equal compute across n and M whose claim ("a larger n lowers forgetting events per unit of
compute") these measures feed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats


def per_problem_counts(record: Mapping[str, Any]) -> tuple[list[int], np.ndarray, int]:
    """A run's ``per_problem_counts.json`` → (checkpoint steps in order, counts as a
    checkpoints × problems array, samples per problem k)."""
    by_step = record["correct_counts_by_step"]
    steps = sorted(int(s) for s in by_step)
    counts = np.asarray([by_step[str(s)] for s in steps], dtype=int)
    k = int(record["n_samples"])
    if counts.ndim != 2 or (counts < 0).any() or (counts > k).any():
        raise ValueError(
            f"correct_counts_by_step: need one list of counts in [0, {k}] per checkpoint, each "
            "over the same problems."
        )
    return steps, counts, k


def forgetting_events(before: np.ndarray, after: np.ndarray, k: int, alpha: float = 0.05):
    """Per problem, whether its solve rate fell from `before` to `after` (correct counts out of
    `k` at two checkpoints) beyond binomial noise: one-sided Fisher exact test at `alpha`."""
    before, after = np.asarray(before), np.asarray(after)
    # Under "no fall" the count at the first checkpoint, given both checkpoints' total, is
    # hypergeometric: P(X ≥ before) for X ~ Hypergeom(2k, before + after, k)
    p = stats.hypergeom.sf(before - 1, 2 * k, before + after, k)
    return p <= alpha


def excess_gain_variance(before: np.ndarray, after: np.ndarray, k: int) -> float:
    """Variance across problems of their gain in solve rate, less its binomial part (each
    problem's p(1 − p)/k at both checkpoints, estimated without bias)."""
    a, b = np.asarray(before) / k, np.asarray(after) / k
    gain = b - a
    noise = (a * (1 - a) + b * (1 - b)) / (k - 1)  # unbiased: p̂(1 − p̂)·k/(k − 1), over k
    return float(np.var(gain, ddof=1) - noise.mean())


@dataclass(frozen=True)
class Interference:
    """A run's interference measures between consecutive checkpoints (`measure`).

    Attributes:
        steps: the checkpoints, in order.
        forgetting: per interval, the share of problems with a forgetting event.
        expected_false: the share a run without any fall calls at most (the test's level).
        excess_dispersion: per interval, `excess_gain_variance`.
        problems: problems per checkpoint.
    """

    steps: list[int]
    forgetting: np.ndarray
    expected_false: float
    excess_dispersion: np.ndarray
    problems: int


def measure(record: Mapping[str, Any], alpha: float = 0.05) -> Interference:
    """Forgetting events and excess gain dispersion of one run (module docstring)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha = {alpha}: the test's level must lie in (0, 1), e.g. 0.05.")
    steps, counts, k = per_problem_counts(record)
    if len(steps) < 2 or k < 2:
        raise ValueError(
            f"{len(steps)} checkpoint(s), k = {k}: interference needs two checkpoints or more "
            "and two samples per problem or more (eval_k_samples)."
        )
    pairs: Sequence[tuple[np.ndarray, np.ndarray]] = list(zip(counts[:-1], counts[1:], strict=True))
    forgetting = np.array([forgetting_events(a, b, k, alpha).mean() for a, b in pairs])
    dispersion = np.array([excess_gain_variance(a, b, k) for a, b in pairs])
    return Interference(steps, forgetting, alpha, dispersion, counts.shape[1])
