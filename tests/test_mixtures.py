"""Mixed and extremely hard sets (issue 31, part 3): the mix's n* inside its components' range,
and best@k's slope in n on `never`, on simulated runs whose answers are known, and the claims'
calibration on worlds drawn on the committed runs' design."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from isolab.study.mixtures.optimum import between, coverage_expansion, coverage_keeps
from isolab.study.mixtures.worlds import coverage_world
from isolab.vocab import EVAL_AVG, ROLLOUTS

NS = (2, 4, 8, 16, 32, 64, 128)


def _runs(
    split: str, vertex: float, rng, curvature: float = 0.006, sd: float = 0.004, seeds: int = 3
) -> pl.DataFrame:
    """Each run's first and last evaluation: avg@4 at the budget a quadratic in log2 n with
    its vertex at `vertex` (log2 n), a level per seed and run noise."""
    rows = []
    for seed in range(seeds):
        level = rng.normal(0, sd)
        for n in NS:
            y = 0.3 - curvature * (np.log2(n) - vertex) ** 2 + level + rng.normal(0, sd)
            for step, c, v in ((0, 0.0, 0.1), (10, 65536.0, y)):
                rows.append(
                    {
                        "run_key": f"{split}-n{n}s{seed}",
                        "split": split,
                        "n": n,
                        "B_p": 16,
                        "seed": seed,
                        "step": step,
                        ROLLOUTS: c,
                        EVAL_AVG: v,
                    }
                )
    return pl.DataFrame(rows)


def _study(v_easy: float, v_hard: float, v_mix: float, seed: int, **kw) -> tuple:
    rng = np.random.default_rng(seed)
    main = pl.concat([_runs("easy", v_easy, rng, **kw), _runs("hard", v_hard, rng, **kw)])
    return main, _runs("mix", v_mix, rng, **kw)


def test_a_mix_between_its_components_agrees_and_one_outside_disagrees():
    inside = between(*_study(2.5, 5.5, 4.0, 0))
    assert inside.p_value < 0.04 and inside.estimate > 0, inside
    assert inside.interval[0] < 1.5 < inside.interval[1], inside  # the planted margin
    assert inside.n_runs == 3 * 21
    outside = between(*_study(2.5, 5.5, 6.8, 1))
    assert outside.p_value < 0.04 and outside.estimate < 0, outside
    assert outside.interval[0] < -1.3 < outside.interval[1], outside


def test_a_mix_at_one_end_is_rarely_called_between():
    """The intersection-union test's null is the range's end: there, "between" must stay rare
    (each side one-sided at 2%, the binding side rejecting about half of that)."""
    calls = 0
    for s in range(60):
        r = between(*_study(2.5, 5.5, 2.5, 100 + s))
        calls += r.ran and r.p_value < 0.04 and r.estimate > 0
    assert calls <= 4, calls  # ≈ 2% of 60 expected; beyond 4 a binomial tail of p < 0.04


def test_optima_the_design_cannot_locate_are_not_compared():
    edge = between(*_study(0.2, 5.5, 4.0, 2))
    assert not edge.ran and "easy: optimum n ≈" in edge.note and "outside the grid" in edge.note
    assert "secondary reading, slope per doubling of n: easy" in edge.note
    flat = between(*_study(2.5, 5.5, 4.0, 3, curvature=0.0))
    assert not flat.ran and "curvature not resolved" in flat.note
    main, mix = _study(2.5, 5.5, 4.0, 4)
    assert "no eval/avg@4" in between(main, mix.drop(EVAL_AVG)).note
    few = between(main, mix.filter(pl.col("n") <= 4))
    assert not few.ran and "a vertex needs 4" in few.note


def _never(slope: float, rng, sd: float = 0.03) -> pl.DataFrame:
    rows = []
    for seed in range(3):
        level = rng.normal(0, sd)
        for n in (2, 8, 32):
            best = 0.6 + slope * (np.log2(n) - 3) + level + rng.normal(0, sd)
            for step, c, b, a in ((0, 0.0, 0.5, 0.1), (10, 65536.0, best, 0.12)):
                rows.append(
                    {
                        "run_key": f"n{n}s{seed}",
                        "split": "never",
                        "n": n,
                        "seed": seed,
                        "step": step,
                        ROLLOUTS: c,
                        "eval/best@16": b,
                        "eval/best@4": b / 2,
                        "eval/avg@16": a,
                        "eval/avg@4": a,
                    }
                )
    return pl.DataFrame(rows)


def test_coverage_kept_at_equal_compute_reads_the_largest_k_and_finds_a_planted_rise():
    rng = np.random.default_rng(5)
    r = coverage_keeps(_never(0.05, rng))
    assert "eval/best@16" in r.test and r.p_value < 0.04
    assert r.interval[0] < 0.05 < r.interval[1], r
    assert (
        "eval/avg@16 moves" in r.note and "at step 0 the base reads eval/best@16 = 0.500" in r.note
    )
    nulls = sum(coverage_keeps(_never(0.0, rng)).p_value < 0.04 for _ in range(50))
    assert nulls <= 5, nulls


def test_coverage_expansion_reads_peaks_not_a_lead_at_the_budget():
    """Every n peaking at the same coverage while the smaller n lose it late: a larger n leads
    at the budget (the old test's call) but has expanded nothing, and the claim stays untested;
    a planted rise of the peaks is found."""
    kept = [coverage_expansion(coverage_world("kept", 0.0, s)["never"]) for s in range(20)]
    called = sum(r.ran and r.p_value < 0.04 and r.estimate > 0 for r in kept)
    lead = sum(
        coverage_keeps(coverage_world("kept", 0.0, s)["never"]).p_value < 0.04 for s in range(20)
    )
    assert called <= 2 and lead >= 10, (called, lead)
    assert any(r.note.startswith("untested: every n peaks near") for r in kept)
    grown = coverage_expansion(coverage_world("flat", 0.08, 3)["never"])
    assert grown.p_value < 0.04 and grown.estimate > 0 and "highest" in grown.test


@pytest.mark.parametrize("claim", ["mixtures.nstar_between", "mixtures.never_coverage"])
def test_the_claims_are_calibrated_on_the_committed_design(claim):
    """Each claim's own test on worlds drawn on `runs/nstar/cpu/{main,mix,never}` (their runs,
    seeds and measured noise): its nulls (for the mix, its optimum at either end of the range,
    and one optimum for all three) are rarely called; the planted effect is found."""
    from isolab.study.calibration import PLANTS, calibrate, nulls_for
    from isolab.study.claims import CLAIMS
    from isolab.verdicts.claim import verdict

    for null in (None, *nulls_for(claim)):
        calls = calibrate(claim, {}, 50, planted=False, seed=11, null=null)
        assert calls["agrees"] <= 4, (null, dict(calls))
    c, plant = CLAIMS[claim], PLANTS[claim]
    found = sum(verdict(c, c.run(plant.world(s))).call == "agrees" for s in range(30))
    assert found >= 20, found
