"""Verdicts you can trust: each claim's test rarely calls a world with no effect, finds a planted
one, and reports machine-readable records (a small run of benchmarks/verdict_calibration.py)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from isolab import study
from isolab.study.calibration import calibrate, planned_setting
from isolab.study.claims import CLAIMS
from isolab.verdicts import decide
from isolab.verdicts.contrasts import compare_arms
from isolab.verdicts.curves import curve_interaction
from isolab.verdicts.noise import seed_share
from isolab.verdicts.result import holm, min_detectable
from isolab.verdicts.worlds import null_means, simulate_world

REPO = Path(__file__).resolve().parents[1]


def _design(name: str) -> dict[str, pl.DataFrame]:
    s = study.get(name)
    return {w: pl.read_parquet(study.snapshot_dir(s, "cpu", w) / "runs.parquet") for w in s.sweeps}


def test_the_call_needs_significance_and_reads_the_sign():
    assert decide(0.1, 0.01, "> 0") == "agrees"
    assert decide(-0.1, 0.01, "> 0") == "disagrees"
    assert decide(0.1, 0.2, "> 0") == "inconclusive"
    assert decide(-0.1, 0.01, "≠ 0") == "agrees"
    assert decide(math.nan, 0.01, "> 0") == "inconclusive"
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    from statsmodels.stats.multitest import multipletests

    p = np.random.default_rng(0).uniform(0, 0.2, 12)
    assert holm(list(p)) == pytest.approx(list(multipletests(p, method="holm")[1]))
    # 80% power at α = 0.04 (the tests' level) with a known SE: (2.054 + 0.842) · SE
    assert min_detectable(1.0) == pytest.approx(2.8956, abs=1e-3)


@pytest.mark.parametrize(
    ("claim_id", "min_found", "design"),
    [
        # the planned design of issue 27 with `long` as committed (8 seeds), the paper-shaped
        # plant (issue 45): gate ≈ 80% × crossing test ≈ 65%, power ≈ 55% (8 of 15 here)
        ("nstar.grows_easy", 6, "planned"),
        # issue 46: sharpening at equal avg@4 behind its gate, on the committed nstar design
        # (its measured noise): power 85–100% at 0.005 worst@4 per doubling of n (34 of 40
        # worlds from seed 7, 139 of 140 from seed 100,000)
        ("bestk.worst_easy", 10, "committed"),
        # issue 46: two located sign changes on the committed design: power 99.5%
        ("nvsbp.nonmonotone_hard", 26, "committed"),
        ("nvsbp.more_n_with_steps", 24, "planned"),  # the fixed-B pairs of nstar's grid
        ("healthy.kl_entropy_easy", 24, "committed"),  # paired by seed, 24 seeds: power 100%
        # issue 46: the exponent of the best lr on the pre-registered (B, lr) grid: power 100%
        ("healthy.lr_sqrt", 27, "own"),
        ("rho.rule_above_model", 27, "own"),  # ρ* on the simulated (k, μ) design: power ≈ 100%
        ("rho.learning_to_search", 27, "own"),  # the same on ln(C_learning / C_search)
        ("size.best_n_depends", 20, "committed"),  # an IsoFLOP grid (k-th evaluations aligned)
    ],
)
def test_null_worlds_are_rarely_called_and_planted_ones_are_found(claim_id, min_found, design):
    """60 worlds without an effect on the study's design and noise (the committed runs, the
    planned nstar design of issue 27, or a claim's own simulated design): at most 7 calls (the
    benchmark, with 400 worlds, holds every claim at ≤ 5%); 30 with the planted effect: found as
    often as the design allows, and never called the other way. The two slowest (a vertex fit
    per checkpoint and per n, or a max-|t| band and a clustered regression, ≈ 0.4 s a world) run
    half as many worlds: at most 4 calls of 30, and `min_found` of 15."""
    name = CLAIMS[claim_id].study
    data = (
        planned_setting(name) if design == "planned" else {} if design == "own" else _design(name)
    )
    worlds = 30 if claim_id in ("nstar.grows_easy", "bestk.worst_easy") else 60
    null = calibrate(claim_id, data, worlds, planted=False, seed=7)
    assert null["agrees"] + null["disagrees"] <= (4 if worlds == 30 else 7), dict(null)
    found = calibrate(claim_id, data, worlds // 2, planted=True, seed=7)
    assert found["agrees"] >= min_found and found["disagrees"] == 0, dict(found)


def test_a_comparison_of_arms_finds_a_planted_gap_with_enough_seeds():
    """compare_arms on a design of 4 arms × 4 seeds: a gap of 4 seed SDs is found, none is not."""
    rng = np.random.default_rng(1)
    rows = []
    for arm, gap in (("on", 0.08), ("off", 0.0), ("x", 0.0), ("y", 0.0)):
        for seed in range(4):
            value = 0.5 + gap + 0.02 * rng.standard_normal()
            rows.append((f"{arm}{seed}", arm, seed, 1, 0.5, 64, 8))
            rows.append((f"{arm}{seed}", arm, seed, 10, value, 64, 8))
    cols = ["run_key", "recipe", "seed", "step", "eval/avg@4", "eval_problems", "eval_k_samples"]
    df = pl.DataFrame(rows, schema=cols, orient="row")
    found = compare_arms(df, "eval/avg@4", "recipe", "on", "off")
    assert found.p_value < 0.01 and found.interval[0] < 0.08 < found.interval[1]
    none = compare_arms(df, "eval/avg@4", "recipe", "x", "y")
    assert none.p_value > 0.04 and none.extra["runs_a"] == 4


def _seeded(rows: list[tuple], extra: list[str]) -> pl.DataFrame:
    cols = ["run_key", *extra, "seed", "step", "eval/avg@4", "eval_problems", "eval_k_samples"]
    return pl.DataFrame(rows, schema=cols, orient="row")


def test_runs_of_one_seed_are_compared_within_it():
    """A seed's data order moves every arm alike (sd 0.05 here, residual 0.002): a gap of 0.015
    is found within seeds, and the share of the noise common to a seed is measured; the same
    values with seeds that do not cross the arms cannot see it."""
    rng = np.random.default_rng(4)
    crossed, uncrossed = [], []
    seed_offset = 0.05 * rng.standard_normal(5)
    for arm, gap in (("on", 0.015), ("off", 0.0)):
        for seed in range(5):
            value = 0.4 + gap + seed_offset[seed] + 0.002 * rng.standard_normal()
            for rows, s in ((crossed, seed), (uncrossed, seed + (10 if arm == "on" else 0))):
                rows.append((f"{arm}{seed}", arm, s, 0, 0.3, 200, 16))
                rows.append((f"{arm}{seed}", arm, s, 10, value, 200, 16))
    paired = compare_arms(_seeded(crossed, ["recipe"]), "eval/avg@4", "recipe", "on", "off")
    assert "paired by seed" in paired.test and paired.df == 4
    assert paired.p_value < 0.01 and paired.interval[0] < 0.015 < paired.interval[1]
    assert paired.mde < 0.015
    assert seed_share(_seeded(crossed, ["recipe"])) > 0.9
    unpaired = compare_arms(_seeded(uncrossed, ["recipe"]), "eval/avg@4", "recipe", "on", "off")
    assert "two-sample" in unpaired.test and unpaired.p_value > 0.04 and unpaired.mde > 0.05
    assert seed_share(_seeded(uncrossed, ["recipe"])) == 0.0


def test_arms_of_a_column_outside_the_config_are_still_two_arms():
    """A factor that is not a RunConfig field (here `arm`) still splits the runs in two: no
    effect planted, none found."""
    rng = np.random.default_rng(3)
    rows = []
    for arm in ("on", "off"):
        for seed in range(5):
            value = 0.4 + 0.01 * rng.standard_normal()
            rows += [
                (f"{arm}{seed}", arm, seed, 0, 0.3, 200, 16),
                (f"{arm}{seed}", arm, seed, 10, value, 200, 16),
            ]
    result = compare_arms(_seeded(rows, ["arm"]), "eval/avg@4", "arm", "on", "off")
    assert abs(result.estimate) < 0.02 and result.p_value > 0.04
    assert result.estimate == pytest.approx(result.extra["mean_a"] - result.extra["mean_b"])


def test_a_comparison_without_seed_replicates_refuses_to_call():
    df = _design("healthy-recipe")["regularisers"].filter(pl.col("seed") == 0)
    result = compare_arms(df, "eval/avg@4", "recipe", "kl_entropy", "none")
    assert not result.ran and "training noise is unmeasured" in result.note


def test_the_interaction_test_recovers_a_planted_sign_on_a_clean_world():
    design = _design("nstar")["main"].filter(pl.col("split") == "easy")
    means = null_means(design, ["eval/avg@4"], ("split",))
    xn = np.log2(design["n"].to_numpy()) - 3
    xc = np.log2(design["compute/rollouts"].to_numpy().clip(1)) - 11
    effect = {"eval/avg@4": -0.004 * xn * xc * (design["step"] > 0).to_numpy()}
    world = simulate_world(means, {"eval/avg@4": (0.005, 0.005)}, seed=3, effect=effect)
    result = curve_interaction(world, "eval/avg@4", "n", covariates=("B_p",))
    # the sign, clearly; the size to within 15%: on issue 27's grid the estimate is attenuated
    # by ≈ 8% (−0.00365 over 20 worlds, s.d. 0.0001), because a run with B up to 2,048 reaches
    # the early checkpoints (256 … 1,024 rollouts) only at its first step, past the checkpoint
    # whose mean it is centred on. It is nstar's secondary reading, not the claim's test.
    assert result.p_value < 1e-3 and -0.004 * 1.15 < result.estimate < -0.004 * 0.85
