"""Interference measures (issue 31, part 1) on simulated runs whose truth is known: worlds where
every problem learns on its own (no solve rate falls) must call forgetting in at most alpha of
the problems; a planted fall must be found; gains that differ between problems must show as
excess dispersion, equal gains must not."""

from __future__ import annotations

import numpy as np
import pytest

from isolab.verdicts.interference import excess_gain_variance, forgetting_events, measure

K, PROBLEMS, CHECKPOINTS = 16, 300, 9


def _record(p: np.ndarray, rng: np.random.Generator) -> dict:
    """Per-problem counts as a run logs them, drawn from true solve rates p (checkpoints ×
    problems)."""
    counts = rng.binomial(K, p)
    return {
        "problem_ids": [f"p{i}" for i in range(p.shape[1])],
        "n_samples": K,
        "correct_counts_by_step": {str(8 * t): c.tolist() for t, c in enumerate(counts)},
    }


def _independent_learning(rng: np.random.Generator) -> np.ndarray:
    """Each problem's solve rate rises on its own curve (a start, a ceiling and a rate drawn per
    problem): nothing ever falls."""
    start = rng.uniform(0.0, 0.6, PROBLEMS)
    ceiling = np.minimum(1.0, start + rng.uniform(0.0, 0.4, PROBLEMS))
    rate = rng.uniform(0.1, 1.0, PROBLEMS)
    t = np.arange(CHECKPOINTS)[:, None]
    return ceiling - (ceiling - start) * np.exp(-rate * t)


def test_worlds_without_forgetting_call_it_rarely():
    rng = np.random.default_rng(0)
    shares = [measure(_record(_independent_learning(rng), rng)).forgetting for _ in range(40)]
    calls = np.concatenate(shares)
    # Fisher's exact test is conservative: at most alpha = 5% of problems, on every interval
    assert calls.mean() <= 0.05 and calls.max() < 0.08, (calls.mean(), calls.max())
    # and a flat world (every rate constant, the test's boundary) stays at its level too
    flat = np.repeat(rng.uniform(0.05, 0.95, PROBLEMS)[None], CHECKPOINTS, axis=0)
    assert np.mean([measure(_record(flat, rng)).forgetting.mean() for _ in range(40)]) <= 0.05


def test_a_planted_fall_is_found():
    rng = np.random.default_rng(1)
    p = _independent_learning(rng)
    fallen = rng.choice(PROBLEMS, 60, replace=False)  # 20% of the problems lose 0.4 at t = 5
    p[5:, fallen] = np.clip(p[5:, fallen] - 0.4, 0.0, 1.0)
    m = measure(_record(p, rng))
    assert m.forgetting[4] > 0.10  # the interval 4 → 5: most of the 20% found
    assert np.delete(m.forgetting, 4).max() < 0.08  # the others stay near the level
    events = forgetting_events(np.array([12, 12]), np.array([3, 11]), K)
    assert events.tolist() == [True, False]  # 12/16 → 3/16 is a fall; 12 → 11 is noise


def test_excess_dispersion_sees_unequal_gains_only():
    rng = np.random.default_rng(2)
    a = np.full(PROBLEMS, 0.4)
    equal = [excess_gain_variance(rng.binomial(K, a), rng.binomial(K, a + 0.2), K)
             for _ in range(200)]  # fmt: skip
    assert abs(np.mean(equal)) < 0.002  # unbiased: the binomial part removed
    split = np.where(np.arange(PROBLEMS) % 2 == 0, 0.8, 0.2)  # half gain 0.4, half lose 0.2
    unequal = excess_gain_variance(rng.binomial(K, a), rng.binomial(K, split), K)
    assert unequal == pytest.approx(0.09, abs=0.03)  # the true variance of the gains: 0.3²


def test_bad_records_are_refused():
    with pytest.raises(ValueError, match="two checkpoints or more"):
        measure({"n_samples": K, "correct_counts_by_step": {"0": [1, 2]}})
    with pytest.raises(ValueError, match=r"counts in \[0, 16\]"):
        measure({"n_samples": K, "correct_counts_by_step": {"0": [1, 17], "8": [1, 2]}})
    with pytest.raises(ValueError, match="alpha = 2"):
        measure({"n_samples": K, "correct_counts_by_step": {"0": [1], "8": [1]}}, alpha=2)
