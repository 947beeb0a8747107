"""Evaluation targets that disagree (issue 31, part 2): the difference of two targets' optima in
log2 n, read from the same runs, on simulated runs whose optima are known."""

from __future__ import annotations

import numpy as np
import polars as pl

from isolab.study.targets.optimum import SHIFTED, optimum_difference
from isolab.vocab import EVAL_AVG

NS = (2, 4, 8, 16, 32)


def _runs(
    v_first: float, v_second: float, rng, seeds: int = 3, sd: float = 0.004, curvature: float = 0.01
) -> pl.DataFrame:
    """Each run's last evaluation (and its first) under both targets: quadratics in log2 n
    with vertices `v_first` / `v_second` (log2 n), correlated run noise and a level per seed."""
    rows = []
    for seed in range(seeds):
        level = rng.normal(0, sd)
        for n in NS:
            x = np.log2(n)
            shared = rng.normal(0, sd)
            a = 0.15 - curvature * (x - v_first) ** 2 + level + shared + rng.normal(0, sd / 2)
            b = 0.12 - curvature * (x - v_second) ** 2 + level + shared + rng.normal(0, sd / 2)
            key = f"n{n}s{seed}"
            for step, C, ya, yb in ((0, 0.0, 0.08, 0.1), (10, 65536.0, a, b)):
                rows.append(
                    {
                        "run_key": key,
                        "n": n,
                        "seed": seed,
                        "step": step,
                        "compute/rollouts": C,
                        EVAL_AVG: ya,
                        SHIFTED: yb,
                    }
                )
    return pl.DataFrame(rows)


def test_optima_apart_are_found_and_one_optimum_is_not_called():
    rng = np.random.default_rng(0)
    apart = optimum_difference(_runs(2.0, 3.5, rng))
    assert apart.p_value < 0.04 and apart.interval[0] < -1.5 < apart.interval[1], apart
    assert apart.n_runs == 15 and apart.df == 15 - 5  # 1, x, x², two seed levels
    calls = sum(optimum_difference(_runs(2.5, 2.5, rng)).p_value < 0.04 for _ in range(40))
    assert calls <= 4  # ≈ 4% of 40 expected; a binomial tail beyond 4 has p ≈ 0.2


def test_an_optimum_at_the_edge_or_a_flat_target_is_not_compared():
    rng = np.random.default_rng(1)
    edge = optimum_difference(_runs(2.5, 0.2, rng))
    assert not edge.ran and "outside the grid" in edge.note
    flat = optimum_difference(_runs(2.5, 2.5, rng, curvature=0.0))
    assert not flat.ran and "curvature not resolved" in flat.note
    missing = optimum_difference(_runs(2.5, 2.5, rng).drop(SHIFTED))
    assert not missing.ran and SHIFTED in missing.note


def test_the_claim_is_calibrated_on_the_targets_design():
    """The claim's own test on worlds drawn on `runs/nstar/cpu/targets` (its runs, seeds and
    measured noise): with one optimum for both targets it is rarely called, as measured and
    where both curves are curved enough to locate (−0.006 per doubling²); optima 1.5 doublings
    apart are found there. At the measured curvatures nothing is located, and nothing called."""
    from isolab.study.calibration import calibrate

    claim = "targets.different_nstar"
    for null in (None, "same-optimum-flatter", "same-optimum-curved"):
        calls = calibrate(claim, {}, 60, planted=False, seed=5, null=null)
        assert calls["agrees"] + calls["disagrees"] <= 5, (null, dict(calls))
    from isolab.study.claims import CLAIMS
    from isolab.study.targets import worlds as tg
    from isolab.verdicts.claim import verdict

    c = CLAIMS[claim]
    found = sum(verdict(c, c.run(tg.world("apart-curved", s))).call == "agrees" for s in range(30))
    assert found >= 22, found


def test_the_judge_claim_is_calibrated_on_the_judged_runs():
    """The same test with the judge (the tiny PRM's mean score, `eval/judge`) as the second
    target, on worlds drawn on `runs/nstar/cpu/judge`: one optimum for both is rarely called,
    optima 1.5 doublings apart are found where the curves are curved enough to locate them."""
    from isolab.study.calibration import calibrate
    from isolab.study.claims import CLAIMS
    from isolab.study.targets import worlds as tg
    from isolab.verdicts.claim import verdict
    from isolab.vocab import EVAL_JUDGE

    claim = "targets.judge_nstar"
    for null in (None, "judge-same-optimum-curved"):
        calls = calibrate(claim, {}, 60, planted=False, seed=7, null=null)
        assert calls["agrees"] + calls["disagrees"] <= 5, (null, dict(calls))
    c = CLAIMS[claim]
    apart = (tg.world("apart-curved", s, sweep="judge", second=EVAL_JUDGE) for s in range(30))
    found = sum(verdict(c, c.run(w)).call == "agrees" for w in apart)
    assert found >= 22, found
