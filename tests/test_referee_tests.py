"""The tests issue 46 put behind four calls, on worlds where the truth is known: the exponent of
the best learning rate in B, and the best@k / worst@k mechanisms at equal avg@4 behind their
gate (some n below the optimum)."""

from __future__ import annotations

import polars as pl
import pytest

from isolab.study.bestk_worstk.mechanism import LEVEL_BIAS, matched_mechanism
from isolab.study.bestk_worstk.worlds import sharpening
from isolab.study.calibration import planned_setting
from isolab.study.claims import CLAIMS
from isolab.study.healthy_recipe import lr_exponent
from isolab.study.healthy_recipe import worlds as hw
from isolab.verdicts.calibration import world
from isolab.verdicts.claim import verdict
from isolab.vocab import EVAL_WORST


@pytest.mark.parametrize(
    ("exponent", "call"), [(0.5, "agrees"), (0.0, "disagrees"), (1.0, "disagrees")]
)
def test_the_best_lr_exponent_is_recovered_and_read_against_the_three_rules(exponent, call):
    data = hw.study_world(exponent, seed=3)
    r = lr_exponent.best_lr_exponent(data["lr-grid"])
    assert r.interval[0] < exponent < r.interval[1], r.note
    rule = {0.0: "p_constant", 0.5: "p_sqrt", 1.0: "p_linear"}[exponent]
    assert (
        r.extra[rule] > 0.04
        and min(r.extra[k] for k in ("p_constant", "p_sqrt", "p_linear") if k != rule) < 0.04
    )
    claim = CLAIMS["healthy.lr_sqrt"]
    assert verdict(claim, claim.run(data)).call == call


def test_an_lr_grid_without_an_optimum_inside_is_untested():
    """Two lrs per batch cannot place a vertex; a grid whose lrs all lie below the optimum
    locates none (the response only rises)."""
    data = hw.study_world(0.5, seed=4)["lr-grid"]
    few = lr_exponent.best_lr_exponent(data.filter(pl.col("lr") < pl.col("lr").median().over("B")))
    assert not few.ran and ("≥ 3 learning rates" in few.note or "located at" in few.note)
    low = data.filter(pl.col("lr") <= pl.col("lr").min().over("B") * 4.01)
    r = lr_exponent.best_lr_exponent(low)
    assert not r.ran and r.note.startswith("untested: the best lr is located at")


def test_a_mechanism_is_read_at_equal_avg_only_where_some_n_is_below_the_optimum():
    """Sharpening of 0.006 worst@4 per doubling of n: found where n's optimum is n = 16 (the
    smaller n gain from a larger n), untested where every n of the grid is past it (n* = 1)."""
    setting = planned_setting("bestk-worstk")
    below = world(setting, sharpening("easy", EVAL_WORST, 0.006), 6)["main"]
    r = matched_mechanism(below.filter(pl.col("split") == "easy"), EVAL_WORST)
    assert r.ran and r.p_value < 0.04 and "some n lies below the optimum" in r.note
    assert r.estimate == pytest.approx(r.extra["raw"] - LEVEL_BIAS[EVAL_WORST])
    past = world(setting, sharpening("easy", EVAL_WORST, 0.006, vertex=0.0), 6)["main"]
    p = matched_mechanism(past.filter(pl.col("split") == "easy"), EVAL_WORST)
    assert not p.ran and p.note.startswith("untested: every n tested is past the optimum")
    assert "worst@4 at equal avg@4 +0.0" in p.note and p.extra["at_equal_level"] > 0
