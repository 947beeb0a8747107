"""Interference measures (issue 31, part 1) on simulated runs whose truth is known: worlds where
every problem learns on its own (no solve rate falls) must call forgetting in at most alpha of
the problems; a planted fall must be found; gains that differ between problems must show as
excess dispersion, equal gains must not."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from isolab.study.interference.forgetting import (
    common_start,
    conditional_size,
    excess_gain_variance,
    forgetting_events,
    forgetting_trend,
    intervals,
    measure,
)

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
    equal = [
        excess_gain_variance(rng.binomial(K, a), rng.binomial(K, a + 0.2), K) for _ in range(200)
    ]
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


def test_the_no_change_expectation_is_exact():
    """`conditional_size`: with a rate that does not change, the share of problems called
    falling matches the exact expectation from each problem's total, at any level (a problem
    near 0 or 1 is rarely callable), and never exceeds the test's level."""
    rng = np.random.default_rng(3)
    for p in (0.05, 0.3, 0.5, 0.9):
        a, b = rng.binomial(K, p, 200_000), rng.binomial(K, p, 200_000)
        called = forgetting_events(a, b, K).mean()
        expected = conditional_size(K)[a + b].mean()
        assert called == pytest.approx(expected, abs=0.002), p
        assert expected <= 0.05
    assert conditional_size(K)[:5].sum() == 0  # 4 correct in 32 samples cannot call a fall


def _table(rates: dict[int, np.ndarray], rng: np.random.Generator, seeds: int = 3):
    """A runs table with per-problem counts drawn from `rates` (n → checkpoints × problems),
    checkpoints C = 0, 256, 512, … and `seeds` runs per n."""
    rows = []
    for n, p in rates.items():
        for seed in range(seeds):
            for t, row in enumerate(p):
                C = 0 if t == 0 else 256 * 2 ** (t - 1)
                rows.append(
                    {
                        "run_key": f"n{n}s{seed}",
                        "split": "easy",
                        "n": n,
                        "B_p": 16,
                        "seed": seed,
                        "step": t,
                        "compute/rollouts": float(C),
                        "eval_k_samples": K,
                        "eval_counts": rng.binomial(K, row).tolist(),
                    }
                )
    return pl.DataFrame(rows)


def test_a_runs_table_gives_its_intervals_and_the_trend():
    """`intervals` on a runs table: one row per run and interval, at the runs' own compute;
    `forgetting_trend` finds falls that thin with n, and calls nothing where every n learns
    alike without falling."""
    rng = np.random.default_rng(5)
    base = _independent_learning(rng)
    falls = {}
    for n, share in ((2, 0.3), (8, 0.15), (32, 0.0)):
        p = base.copy()
        for t in range(2, CHECKPOINTS):  # a transient fall of `share` of the problems
            hit = rng.random(PROBLEMS) < share
            p[t, hit] = np.clip(p[t, hit] - 0.4, 0.0, 1.0)
        falls[n] = p
    iv = intervals(_table(falls, rng))
    assert iv.height == 9 * (CHECKPOINTS - 1)
    assert iv.filter(pl.col("run_key") == "n2s0")["C_to"].to_list()[:3] == [256.0, 512.0, 1024.0]
    assert common_start(iv) == 256.0
    found = forgetting_trend(_table(falls, rng))
    assert found.estimate < 0 and found.p_value < 0.04, found
    alike = forgetting_trend(_table({n: base for n in (2, 8, 32)}, rng))
    assert alike.p_value > 0.04 and alike.n_runs == 9, alike
    refused = forgetting_trend(_table({2: base}, rng, seeds=2))
    assert not refused.ran and "needs 2 values of n" in refused.note


def test_the_interference_claim_is_calibrated_on_nstars_design():
    """The claim's own test on simulated per-problem counts of nstar's cpu runs (a small run of
    benchmarks/verdict_calibration.py, which holds each world at ≤ 5% with 400 of them): the
    flat null and the three structured nulls — each arm on its own measured levels with nothing
    falling, an n-free wobble, falls that track progress — are rarely called; transient falls
    that thin with n are found on Easy."""
    from isolab.study.calibration import calibrate, nulls_for

    claim = "interference.less_forgetting_easy"
    null = calibrate(claim, {}, 16, planted=False, seed=21)
    assert null["agrees"] + null["disagrees"] <= 3, dict(null)
    assert nulls_for(claim) == ["no-falls-levels", "equal-wobble", "falls-track-progress"]
    for name in nulls_for(claim):
        calls = calibrate(claim, {}, 8, planted=False, seed=21, null=name)
        assert calls["agrees"] + calls["disagrees"] <= 2, (name, dict(calls))
    found = calibrate(claim, {}, 8, planted=True, seed=21)
    assert found["agrees"] >= 7 and found["disagrees"] == 0, dict(found)
