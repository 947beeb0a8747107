"""The crossing test of "n* grows" (issue 45): it finds a planted growth of the `IsoComputeLaw`
family, and calls neither a world whose best n never moves while two other arms cross, nor one
where every n reaches one plateau and larger n are only slower; pooling pairs of checkpoints
finds a two-doubling move the unpooled test misses. A handful of worlds; the full
calibration is `benchmarks/nstar_calibration.py` (tables in docs/statistics.md)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from isolab.synthetic import FixedOptimumLaw, IsoComputeLaw, make_isocompute_runs
from isolab.verdicts.crossing import crossing_test
from isolab.verdicts.result import ALPHA
from isolab.vocab import EVAL_AVG

GRID = (2, 4, 8, 16, 32, 64)
CHECKPOINTS = 2.0 ** np.arange(8, 17)


def _runs(law, seed: int) -> pl.DataFrame:
    return make_isocompute_runs(
        {EVAL_AVG: law},
        n_grid=GRID,
        B_p_grid=(16, 64),
        B_max=2048,
        budget_rollouts=2**16,
        seeds=3,
        noise=0.015,
        checkpoints=list(CHECKPOINTS),
        seed_sd=0.01,
        seed=seed,
    )


GROWTH = IsoComputeLaw(n_sat=64, curvature=0.01, C_mid_ref=1e3, n_ref=2, gamma=0.75)


def test_the_planted_law_moves_its_optimum_by_four_doublings():
    assert list(GROWTH.n_star(CHECKPOINTS[[0, -1]], GRID)) == [2.0, 32.0]


@pytest.mark.parametrize("seed", [0, 1])
def test_a_planted_growth_is_found_and_its_crossing_located(seed):
    result, bands = crossing_test(_runs(GROWTH, seed), EVAL_AVG, n_draws=2000)
    assert result.p_value is not None and result.p_value < ALPHA, result.note
    assert result.estimate > 0
    x = result.extra
    assert x["n_from"] < x["n_to"] and x["C_from"] < x["C_to"]
    assert x["C_from"] < x["C_cross"] < x["C_to"] and "n* grows" in result.note
    assert bands["hi"].ge(bands["lo"]).all() and x["t_crit"] > 2.5


def test_checkpoints_are_pooled_in_consecutive_pairs():
    """Nine checkpoints 2^8 … 2^16 become five: the means of (2^8, 2^9), …, (2^14, 2^15) at
    their geometric mean, and 2^16 alone."""
    _, bands = crossing_test(_runs(GROWTH, 0), EVAL_AVG, n_draws=200)
    assert sorted(bands["log2_C"].unique()) == [8.5, 10.5, 12.5, 14.5, 16.0]
    _, single = crossing_test(_runs(GROWTH, 0), EVAL_AVG, n_draws=200, pool=1)
    assert single["log2_C"].n_unique() == 9


@pytest.mark.parametrize("seed", [0, 3])
def test_a_two_doubling_move_is_found_with_pooled_checkpoints(seed):
    """n* moves 2 → 8, two doublings: every threshold's certificate compares n near the optimum,
    where advantages are small; averaging two checkpoints halves their evaluation noise
    (unpooled p: 0.097, a miss, and 0.028)."""
    law = IsoComputeLaw(n_sat=8, curvature=0.01, C_mid_ref=1e3, n_ref=2, gamma=0.5)
    assert list(law.n_star(CHECKPOINTS[[0, -1]], GRID)) == [2.0, 8.0]
    pooled, _ = crossing_test(_runs(law, seed), EVAL_AVG, n_draws=2000)
    single, _ = crossing_test(_runs(law, seed), EVAL_AVG, n_draws=2000, pool=1)
    assert pooled.p_value is not None and pooled.p_value < ALPHA, pooled.note
    assert pooled.estimate == 2.0 and pooled.p_value < single.p_value


def test_two_arms_crossing_while_the_best_n_stays_put_is_not_growth():
    """n_o = 8 fastest and highest; n = 32 slow but nearly as high overtakes n = 2, fast but
    low: that pair's band is below 0 early and above it late, and yet nothing is called,
    because n = 8 beats both at every checkpoint."""
    law = FixedOptimumLaw(n_o=8, c_lo=0.03, c_hi=0.002, g_lo=0.0, g_hi=1.2, C_mid_ref=1e3)
    assert set(law.n_star(CHECKPOINTS, GRID)) == {8.0}
    result, bands = crossing_test(_runs(law, 3), EVAL_AVG, n_draws=2000)
    pair = bands.filter((pl.col("n_a") == 2) & (pl.col("n_b") == 32)).sort("log2_C")
    assert (pair["hi"] < 0).any() and (pair["lo"] > 0).any()  # a naive pair test would call
    first_up = int(np.argmax(pair["lo"].to_numpy() > 0))
    assert (pair["hi"].to_numpy()[:first_up] < 0).any()
    assert result.p_value is not None and result.p_value >= ALPHA, result.note


@pytest.mark.parametrize("seed", [4, 5])
def test_late_ties_of_slower_larger_n_are_not_growth(seed):
    """Every n reaches one plateau, each doubling of n 0.75 doublings of C later: larger n are
    behind early and tied late; a tie is not a better n."""
    law = FixedOptimumLaw(n_o=2, c_lo=0.0, c_hi=0.0, g_hi=0.75, C_mid_ref=1e3)
    result, _ = crossing_test(_runs(law, seed), EVAL_AVG, n_draws=2000)
    assert result.p_value is not None and result.p_value >= ALPHA, result.note


def test_pure_noise_is_not_called_either_way():
    flat = IsoComputeLaw(curvature=0.0, gamma=0.0, C_mid_ref=2e3)
    result, _ = crossing_test(_runs(flat, 6), EVAL_AVG, n_draws=2000)
    assert result.ran and result.p_value is not None and result.p_value > ALPHA
