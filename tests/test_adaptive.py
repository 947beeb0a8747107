"""Adaptive sweeps (issue 32, replay half): the stopping rule on a rung, a planted world, and the
replay on the committed nstar/cpu/main curves (the numbers scripts/adaptive_replay.py prints).
Late bloomers and the calibration of the default are tests/test_adaptive_late_bloomer.py's."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from helpers import rung

from isolab.sweep.adaptive import StoppingRule, judge_rung, replay
from isolab.sweep.adaptive_calibration import calibrate, draw_worlds
from isolab.sweep.adaptive_worlds import design, world_frame
from isolab.tracking.runs import load_runs
from isolab.vocab import ROLLOUTS

NSTAR = Path(__file__).resolve().parents[1] / "runs" / "nstar" / "cpu" / "main"


@pytest.fixture(scope="module")
def nstar() -> pl.DataFrame:
    return load_runs(NSTAR, statuses=["FINISHED"])


def test_rule_stops_a_dominated_arm_and_keeps_arms_within_noise():
    rows = rung({2: 0.50, 4: 0.495, 8: 0.40})
    decision = judge_rung(rows, StoppingRule(z=2.5, grace=0))
    stop = dict(zip(decision.arms["n"], decision.arms["stop"], strict=True))
    assert stop == {2: False, 4: False, 8: True}
    assert decision.noise.source == "seeds"
    reason = decision.arms.filter(pl.col("n") == 8)["reason"][0]
    assert reason.startswith("below the best by 0.1")
    # the same rung inside the grace period stops nothing
    assert not judge_rung(rows, StoppingRule(z=2.5, grace=2), rung=1).arms["stop"].any()
    # ASHA's rank cut stops the arm within noise too: the rule's noise test is what keeps it
    ranked = judge_rung(rows, StoppingRule(z=2.5, grace=0, eta=3))
    assert ranked.arms["stop"].to_list() == [False, True, True]


def test_bad_rule_names_the_field():
    with pytest.raises(ValueError, match="z = 0"):
        StoppingRule(z=0)
    with pytest.raises(ValueError, match="eta = 1"):
        StoppingRule(eta=1)
    with pytest.raises(ValueError, match="judge_from = 1.5"):
        StoppingRule(judge_from=1.5)
    with pytest.raises(ValueError, match="z = None and eta = None"):
        StoppingRule(z=None)
    with pytest.raises(ValueError, match=r"\['eval/avg@4'\]"):
        replay(pl.DataFrame({"n": [2], ROLLOUTS: [256.0]}), StoppingRule())


def test_planted_best_survives(nstar):
    easy = design(nstar.filter(pl.col("split") == "easy"))
    assert 0.015 < easy.margin < 0.025  # the seed spread the issue quotes, ≈ 0.02
    values, best = draw_worlds(easy, "constant lead", worlds=1, margin=3 * easy.margin, seed=0)
    world = world_frame(easy, values[0])
    assert easy.labels[best[0]] in replay(world, StoppingRule()).kept
    # with the rule off (z huge) every arm runs to the end: the rule did the stopping
    assert replay(world, StoppingRule(z=1e6)).fraction == pytest.approx(1.0)
    assert replay(world, StoppingRule()).fraction < 0.9
    # issue 32's rule on constant-lead worlds: the planted best kept, most compute saved
    c = calibrate(easy, StoppingRule(z=2.5, judge_from=0), "constant lead", worlds=200, seed=3)
    assert c.rate >= 0.95 and c.fraction < 0.3


ISSUE_32 = StoppingRule(z=2.5, judge_from=0)  # the default until issue 47


@pytest.mark.parametrize(
    ("split", "rule", "fraction"),
    [("easy", ISSUE_32, 0.366), ("hard", ISSUE_32, 0.641),
     ("easy", StoppingRule(), 0.833), ("hard", StoppingRule(), 0.792)],
)  # fmt: skip
def test_replay_on_committed_nstar(nstar, split, rule, fraction):
    r = replay(nstar.filter(pl.col("split") == split), rule)
    assert r.fraction == pytest.approx(fraction, abs=0.01)
    assert not r.best_dropped
    assert r.n_star_found
    assert r.path["C"].to_list()[-1] == 65536.0 and r.path["grid_n"][-1] == 4
    assert r.path["best_alive"].all()
    if rule == StoppingRule():  # nothing stopped before half the budget, 32,768 rollouts
        stops = r.arms["stopped_at"].drop_nulls().to_list()
        assert stops and set(stops) == {32768.0}
