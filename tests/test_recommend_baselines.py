"""`recommend` scored beside its baselines (issue 47): in a planted world whose n* moves, the
scoring recovers the planted answer (no noise: the oracle's regret is 0, holding the optimum
fixed costs the law's own gap); a check that a random arm passes too is printed as one that
cannot fail; the printed self-check names its baseline and the kind of world it covered; and
where the fitted optimum moved within the data the advice refuses to go beyond the data."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from isolab import frontier as fr
from isolab.frontier import planted
from isolab.frontier.recommend import CALIBRATION
from isolab.synthetic import IsoComputeLaw, make_isocompute_runs
from isolab.vocab import EVAL_AVG

C_END = planted.CHECKPOINTS[-1]
#: n* = 4 up to 8,192 rollouts, 8 at C/4 and C/2, 16 at C (`planted.N_GRID`, B_p = 16): two
#: doublings over the range, one of them in the last 2×. At C, n = 16 leads n = 8 by 0.0285.
MOVING = IsoComputeLaw(
    R0=0.2, A_max=0.7, n_sat=128, curvature=0.01, C_mid_ref=1e4, n_ref=2, gamma=0.5, B_p_opt=16
)
#: Every n rises alike and plateaus alike: the arms differ by noise alone.
ALIKE = IsoComputeLaw(R0=0.2, A_max=0.6, n_sat=8, curvature=0.0, C_mid_ref=2e3, gamma=0.0)


def test_the_planted_law_moves_as_stated() -> None:
    assert list(MOVING.n_star(np.array(planted.CHECKPOINTS), planted.N_GRID)) == [4] * 6 + [
        8,
        8,
        16,
    ]
    assert planted.world_kind(MOVING) == "moving 2"
    assert planted.true_regrets(MOVING, C_END)[16] == 0.0
    assert planted.true_regrets(MOVING, C_END)[8] == pytest.approx(0.0285, abs=5e-5)
    # every n rises alike with n_sat = 8 the highest plateau: static; an optimum that stopped
    # moving before C/4: settled
    assert planted.world_kind(IsoComputeLaw(n_sat=8, curvature=0.02, gamma=0.0)) == "static"
    settled = IsoComputeLaw(R0=0.2, A_max=0.7, n_sat=8, curvature=0.02, C_mid_ref=300, gamma=0.7)
    path = settled.n_star(np.array(planted.CHECKPOINTS), planted.N_GRID)
    assert path[0] < path[-3] == path[-1] == 8 and planted.world_kind(settled) == "settled"


def test_without_noise_the_oracle_has_no_regret_and_the_fixed_optimum_the_laws_gap() -> None:
    world = planted.PlantedWorld(MOVING, "moving 2", eval_sd=0.0, seed_sd=0.0)
    df = planted.simulate(world, seed=0)
    for factor in (2.0, 4.0):
        oracle = fr.validate(df, lambda seen, C: fr.Prediction({"n": 16, "B_p": 16}), factor=factor)
        assert oracle.regret == 0.0 and dict(oracle.best) == {"n": 16}
        assert oracle.verdict == "within noise" and oracle.optimum_moved
        # the best seed mean at ≤ C/f is n = 8, whose regret at C is the law's own gap
        assert oracle.baseline is not None and dict(oracle.baseline.allocation) == {"n": 8}
        assert oracle.baseline.regret == pytest.approx(planted.true_regrets(MOVING, C_END)[8])
        # a random arm: the mean gap over the seven arms
        mean_gap = np.mean(list(planted.true_regrets(MOVING, C_END).values()))
        assert oracle.random is not None and oracle.random.regret == pytest.approx(mean_gap)
        assert "the measured best moved from n = 8 at ≤ C/" in oracle.text
    # the scoring: each rule's pick and its true regret, the advice's whatever it is
    rows = planted.score_world(world, df, n_boot=0)
    assert [(r["factor"], r["rule"]) for r in rows] == [
        (f, rule) for f in (2.0, 4.0) for rule in planted.RULES
    ]
    truth = planted.true_regrets(MOVING, C_END)
    for r in rows:
        assert r["moved_after_fit"] == 1 and r["kind"] == "moving 2"
        if r["rule"] == "best seed mean":
            assert r["n"] == 8 and r["regret"] == pytest.approx(0.0285, abs=5e-5)
        if r["rule"] == "recommend":
            # what it is: the n*(C) fitted on ≤ C/f does not see the move, and the advice is
            # the fixed optimum's n = 8, with its regret
            assert r["n"] == 8 and r["regret"] == truth[8] and r["source"] == "n*(C) fit"
        assert math.isnan(r["regret_se"])  # no noise: no standard error to count in


def test_a_noisy_moving_world_scores_the_advice_beside_its_baselines() -> None:
    world = planted.PlantedWorld(MOVING, "moving 2", eval_sd=0.0077, seed_sd=0.0186)
    assert world.se_diff == pytest.approx(math.sqrt(2 * (0.0077**2 + 0.0186**2) / 3))
    scores = planted.calibrate([world, world], seed=5, n_boot=0)
    assert scores.height == 2 * 2 * len(planted.RULES)
    truth = planted.true_regrets(MOVING, C_END)
    for r in scores.iter_rows(named=True):
        if r["rule"] != "random arm":
            assert r["regret"] == truth[r["n"]]
        assert r["regret_se"] == pytest.approx(r["regret"] / world.se_diff)
    random = scores.filter(pl.col("rule") == "random arm")["regret_se"]
    assert random.to_list() == pytest.approx([np.mean(list(truth.values())) / world.se_diff] * 4)
    summary = planted.summarize(scores)
    rec = summary.filter(pl.col("rule") == "recommend")
    assert rec["worlds"].to_list() == [2, 2] and rec["moved"].to_list() == [2, 2]
    assert (rec["wins"] + rec["ties"] + rec["losses"]).to_list() == [2, 2]
    assert rec["cannot_fail"].to_list() == [0, 0]  # a random arm is 4.1 SE behind
    others = summary.filter(pl.col("rule") != "recommend")
    assert others["wins"].null_count() == others.height  # wins are the advice's alone


def test_a_check_that_a_random_arm_passes_cannot_fail() -> None:
    df = make_isocompute_runs(
        {EVAL_AVG: ALIKE},
        n_grid=(2, 4, 8, 16),
        B_p_grid=(16,),
        budget_rollouts=int(C_END),
        seeds=3,
        checkpoints=planted.CHECKPOINTS,
        noise=0.01,
        seed=2,
    )
    for v in fr.validate_recommend(df, n_boot=0):
        assert v.random is not None and v.random.regret <= 2 * v.random.se
        assert v.regret == 0.0 and v.verdict == "cannot fail" and not v.within  # not a pass
        assert v.text.startswith("not validated") and "the check cannot fail" in v.text
    rec = fr.recommend(df, 1.5 * C_END, n_boot=0)
    assert rec.limit == C_END and "cannot fail" in rec.refusal
    assert "it speaks for C ≤ 65,536, the data's range (256 to 65,536)" in rec.refusal


def test_the_advice_refuses_to_extrapolate_an_optimum_that_moved_within_the_data() -> None:
    world = planted.PlantedWorld(MOVING, "moving 2", eval_sd=0.005, seed_sd=0.005)
    df = planted.simulate(world, seed=3)
    rec = fr.recommend(df, 1.5 * C_END, n_boot=0)
    assert rec.limit == C_END and rec.advised_at == C_END
    assert rec.headline.startswith("no point recommendation at C = 98,304")
    assert "the fitted optimum moved within the data: n* ≈ 8 at C = 16," in rec.refusal
    assert "≈ 16 at C = 65,536" in rec.refusal
    assert "did not beat holding the best seed mean fixed" in rec.refusal
    assert "it speaks for C ≤ 65,536, the data's range (256 to 65,536)" in rec.refusal
    # the self-check names its baseline and regret, and what the planted worlds found
    checks = [h for h in rec.hedges if "by fitting on ≤ C/" in h]
    assert len(checks) == 2
    for line, v in zip(checks, rec.validation, strict=True):
        assert v.baseline is not None and line == v.text
        assert f"baseline best seed mean at ≤ C/{v.factor:g} (n = " in line
        assert f"regret {v.baseline.regret:.3f}" in line and "a random arm: expected regret" in line
    assert rec.hedges[-1] == CALIBRATION and "did not beat that baseline" in CALIBRATION
    # within the data there is nothing to refuse
    inside = fr.recommend(df, C_END, n_boot=0)
    assert not inside.refusal and any("no point allocation beyond" in h for h in inside.hedges)


def test_worlds_are_drawn_by_kind_and_the_noise_measured() -> None:
    worlds = planted.draw_worlds(2, [(0.01, 0.02)], seed=4)
    assert [w.kind for w in worlds] == [k for k in planted.KINDS for _ in range(2)]
    assert all(planted.world_kind(w.law) == w.kind for w in worlds)
    with pytest.raises(ValueError, match="not kinds of world"):
        planted.draw_worlds(1, [(0.01, 0.02)], kinds=("moving 5",))
    # the noise of a sweep: the seed spread at its first checkpoint and what the last adds
    df = make_isocompute_runs(
        {EVAL_AVG: ALIKE},
        n_grid=planted.N_GRID,
        B_p_grid=(16,),
        budget_rollouts=int(C_END),
        seeds=10,
        checkpoints=planted.CHECKPOINTS,
        noise=0.01,
        seed_sd=0.02,
        seed=6,
    )
    eval_sd, seed_sd = planted.sweep_noise(df)
    assert eval_sd == pytest.approx(0.01, rel=0.25) and seed_sd == pytest.approx(0.02, rel=0.25)
