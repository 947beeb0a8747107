"""Study 10 (allocation): its analysis recovers a FLOPs ratio planted in simulated runs, says what
an incomplete sweep lacks instead of failing, and its calibration worlds behave (the null
rarely agrees; a planted saving of half the FLOPs is found more often than the null's calls)."""

from __future__ import annotations

from functools import partial

import numpy as np
import polars as pl
import pytest

from isolab.study.allocation import analysis, worlds
from isolab.study.allocation.claims import ALLOCATORS
from isolab.study.calibration import PLANTS
from isolab.vocab import DISCARDED_SHARE, FLOPS_TOTAL, ROLLOUTS, RUN_KEY, STEP

BUDGET = 9.6e11
ARMS = [("uniform", 4), ("uniform", 8), ("uniform", 16)] + [(a, 8) for a in ALLOCATORS]


def design(splits=("easy", "mix"), seeds=(0, 1, 2)) -> pl.DataFrame:
    """The cpu spec's design without planning it: every arm × split × seed evaluated at step 0
    and at 1/16 … 1 of the budget (steps 8 … 128 of 128)."""
    rows = []
    for split in splits:
        for allocation, n in ARMS:
            for seed in seeds:
                for step in (0, 8, 16, 32, 64, 128):
                    rows.append(
                        {
                            RUN_KEY: f"{split}-{allocation}-{n}-{seed}",
                            "split": split,
                            "allocation": allocation,
                            "n": n,
                            "B_p": 128 // n,
                            "seed": seed,
                            STEP: step,
                            FLOPS_TOTAL: BUDGET * step / 128,
                            ROLLOUTS: 128.0 * step,
                            DISCARDED_SHARE: 0.2 if allocation == "dynamic" else 0.0,
                        }
                    )
    return pl.DataFrame(rows)


def test_flops_to_target_recovers_a_planted_flops_ratio():
    runs = worlds.means({"early_stop": 0.7, "variance": 0.5}, design())
    reach = analysis.flops_to_target(analysis.frontier(runs))
    ratio = {(r["split"], r["arm"]): r["ratio"] for r in reach.iter_rows(named=True)}
    for split in ("easy", "mix"):
        assert ratio[(split, "early_stop")] == pytest.approx(0.7, abs=0.04)
        assert ratio[(split, "variance")] == pytest.approx(0.5, abs=0.04)
        assert ratio[(split, "dynamic")] == pytest.approx(1.0, abs=0.04)
    assert set(reach["reached"]) == {"interpolated"}
    # the target is the best uniform n's curve at half the budget
    best = runs.filter((pl.col("allocation") == "uniform") & (pl.col(STEP) == 64))
    assert reach["target"].to_list()[0] == pytest.approx(float(best[worlds.Y].to_numpy()[0]))


def test_a_curve_below_the_target_is_not_reached_and_one_above_it_is_an_upper_bound():
    log_x = np.log2([1e10, 2e10, 4e10])
    assert analysis._first_reach(log_x, np.array([0.1, 0.2, 0.3]), 0.5)[1] == "not reached"
    lx, how = analysis._first_reach(log_x, np.array([0.6, 0.7, 0.8]), 0.5)
    assert (lx, how) == (log_x[0], "by the first checkpoint")
    lx, how = analysis._first_reach(log_x, np.array([0.1, 0.3, 0.5]), 0.4)
    assert how == "interpolated" and lx == pytest.approx(log_x[1] + 0.5)


def test_the_report_says_what_an_incomplete_sweep_lacks():
    full = worlds.study_world({}, seed=3, design=design())["main"]
    landing = full.filter(
        ~((pl.col("split") == "mix") & (pl.col("allocation") == "variance"))
        & ~((pl.col("split") == "easy") & (pl.col("n") == 16) & (pl.col("seed") == 2))
        # a run still training: its last two checkpoints not yet evaluated
        & ~(pl.col(RUN_KEY).eq("easy-dynamic-8-1") & (pl.col(STEP) > 32))
    )
    report = analysis.allocation({"main": landing}, scale="smoke")
    gaps = report.findings["missing"]
    assert "mix: no runs of variance." in gaps
    assert "easy, uniform n=16: seed(s) 2 missing." in gaps
    assert any(g.startswith("easy, dynamic, seed 1: last evaluated at") for g in gaps)
    assert any(s.startswith("Runs missing") for s in report.summary)
    est = report.tables["split_estimates"]
    assert est.filter(pl.col("split") == "mix", pl.col("allocator") == "variance")["note"][0]
    assert est.filter(pl.col("split") == "easy")["estimate"].is_finite().all()
    share = report.tables["discarded"].filter(pl.col("arm") == "dynamic")["discarded_share"]
    assert share.to_list() == pytest.approx([0.2, 0.2])
    assert set(report.figures) == {"frontier", "discarded"}
    assert len(report.verdicts) == len(ALLOCATORS)
    assert not analysis.missing(full)


def test_the_planted_effect_is_the_one_the_plants_state():
    three = design(splits=("easy", "hard", "mix"))
    at_07 = worlds.planted_effect("dynamic", 0.7, three)
    assert at_07 == pytest.approx(worlds.SIZE_07, abs=0.002)
    assert worlds.planted_effect("dynamic", 0.5, three) > at_07 > 0


def test_the_null_world_rarely_agrees_and_a_halving_is_found_more_often():
    """Every arm equal on the cpu spec's design (3 splits × 6 arms × 3 seeds): the claim of the
    papers' sign is rarely called (the best-uniform pick favours uniform); an allocator at 0.5×
    the FLOPs is called more often. The registered null is this world on the planned design."""
    three = design(splits=("easy", "hard", "mix"))
    null, _ = worlds.power("allocation.dynamic", 1.0, 30, seed=1, design=three)
    assert null["agrees"] <= 2, null
    found, mde = worlds.power("allocation.dynamic", 0.5, 30, seed=100_000, design=three)
    assert found["agrees"] >= null["agrees"] + 5, (found, null)
    assert 0 < mde < 0.05
    plant = PLANTS["allocation.dynamic"]
    assert isinstance(plant.world, partial) and plant.world.args == ({"dynamic": 0.7},)
    assert isinstance(plant.null_world, partial) and plant.null_world.args == ({},)
