"""The n-vs-B_p tests on nstar's fixed-B pairs, best@k/worst@k as mechanisms (ratios against the
compute mapping), the structured nulls' registry, and the family-wise view (issue 27) — on
planned worlds with little noise, where the truth is known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from isolab.study.bestk_worstk.mechanism import mechanism_ratio
from isolab.study.calibration import STRUCTURED_NULLS, calibrate, nulls_for, planned_setting
from isolab.study.claims import CLAIMS
from isolab.study.n_vs_bp.fixed_batch import BP_MARGIN, advantage_trend, bp_equivalence
from isolab.study.n_vs_bp.sign_changes import advantage_band, sign_changes
from isolab.study.n_vs_bp.worlds import fixed_b_advantage, rise_and_fall
from isolab.verdicts import Verdict
from isolab.verdicts import effects as fx
from isolab.verdicts.calibration import StructuredNull, world
from isolab.verdicts.claim import verdict
from isolab.verdicts.family import holm_table
from isolab.vocab import EVAL_AVG, EVAL_BEST, EVAL_WORST


def _quiet(study: str, scale: float = 0.3):
    s = planned_setting(study)
    noise = {
        k: {m: (ev * scale, tr * scale) for m, (ev, tr) in v.items()} for k, v in s.noise.items()
    }
    return type(s)(means=s.means, noise=noise, shares=s.shares)


def _easy(data):
    return data["main"].filter(data["main"]["split"] == "easy")


def test_the_advantage_of_more_rollouts_at_fixed_b_grows_with_steps():
    """A log2 n × log2 C interaction of 0.005: within each of the five fixed-B pairs the
    larger-n member gains on the larger-B_p one, 0.005 per doubling of n per doubling of C."""
    data = world(_quiet("n-vs-bp"), fx.interaction("easy", 0.005), seed=1)
    r = advantage_trend(_easy(data), EVAL_AVG)
    assert r.interval[0] < 0.005 < r.interval[1] and r.p_value < 1e-3
    assert "strata (128, 256, 512, 1024, 2048)" in r.test and "(15 units," in r.test
    none = advantage_trend(_easy(world(_quiet("n-vs-bp"), None, seed=1)), EVAL_AVG)
    assert none.p_value > 0.04


def _hard(data):
    return data["main"].filter(data["main"]["split"] == "hard")


def test_non_monotone_needs_two_located_sign_changes_not_a_curvature():
    """A rise and fall of the larger n's advantage across zero (best n small, large, small) is
    called with both changes located; a concave decline that never crosses zero (the committed
    Hard runs' shape) is untested; one crossing (the best n switches once) is not called."""
    quiet = _quiet("n-vs-bp")
    found = sign_changes(
        _hard(world(quiet, fixed_b_advantage("hard", rise_and_fall(0.006)), 2)), EVAL_AVG
    )
    assert found.p_value < 0.04 and found.estimate > 0
    assert found.note.startswith("two sign changes located: − → + near C ≈")
    assert "then + → − near C ≈" in found.note
    decline = fixed_b_advantage("hard", lambda lc: -0.0003 * np.maximum(lc - 12.0, 0.0) ** 2)
    flat = sign_changes(_hard(world(quiet, decline, 2)), EVAL_AVG)
    assert not flat.ran and flat.note.startswith("untested: no sign change")
    assert flat.extra["p_two_changes"] >= 0.04 and flat.extra["advantage"][-1] < -0.003
    switch = sign_changes(
        _hard(world(quiet, fixed_b_advantage("hard", lambda lc: -0.0025 * (lc - 12.0)), 2)),
        EVAL_AVG,
    )
    assert not switch.ran and switch.note.startswith("one sign change located: + → − near C ≈")
    claim = CLAIMS["nvsbp.nonmonotone_hard"]
    assert verdict(claim, claim.run(world(quiet, decline, 3))).call == "inconclusive"


def test_the_advantage_band_recovers_a_planted_advantage_per_checkpoint():
    band = advantage_band(
        _hard(
            world(
                _quiet("n-vs-bp"), fixed_b_advantage("hard", lambda lc: np.full_like(lc, 0.004)), 5
            )
        ),
        EVAL_AVG,
    )
    assert band is not None and band.dof >= 6 and band.t_crit > 2.0
    inside = np.abs(band.a - 0.004) <= band.t_crit * band.se
    assert inside.mean() >= 0.8 and (band.p_adj[-4:] < 0.04).all()


def test_b_p_matters_little_is_an_equivalence_within_its_margin():
    claim = CLAIMS["nvsbp.bp_matters_little"]
    none = world(_quiet("n-vs-bp"), None, seed=3)
    v = verdict(claim, claim.run(none))
    assert v.call == "agrees" and v.interval is not None
    assert v.interval[0] > -BP_MARGIN and v.interval[1] < BP_MARGIN
    big = world(_quiet("n-vs-bp"), fx.bp_effect(0.03), seed=3)
    v = verdict(claim, claim.run(big))
    assert v.call == "disagrees" and v.statistic == pytest.approx(0.03, abs=0.005)
    assert v.p_value < 0.04  # the p-value of the call: the effect lies beyond the margin
    r = bp_equivalence(big["main"], EVAL_AVG)
    assert r.extra["n_spread"] >= 0 and "for scale: n moves" in r.note


def test_a_mechanism_of_n_is_measured_against_the_compute_mapping():
    """n moves avg@4 alone (one mapping): κ ≈ 0 although worst@4 rises ≈ 2.2 per unit of avg@4
    along n; with worst@4 moving 1.0 more per unit along n: κ ≈ 1."""
    setting = _quiet("bestk-worstk")
    null = mechanism_ratio(_easy(world(setting, fx.mechanism(None, None, 0.0), 4)), EVAL_WORST)
    assert null.interval[0] < 0 < null.interval[1] and null.extra["along_n"] > 1.5
    plant = fx.mechanism("easy", EVAL_WORST, 1.0)
    found = mechanism_ratio(_easy(world(setting, plant, 4)), EVAL_WORST)
    assert found.interval[0] < 1.0 < found.interval[1] and found.p_value < 0.01
    flat = mechanism_ratio(_easy(world(setting, None, 4)), EVAL_BEST)
    assert not flat.ran and "n does not move avg@4 enough" in flat.note


def test_structured_nulls_map_claims_and_accept_worlds_of_their_own():
    assert nulls_for("nstar.grows_easy") == [
        "fixed-optimum",
        "fixed-optimum-edge",
        "compute-shift-rising",
        "compute-shift-peaked",
        "compute-shift-slower",
        "fixed-optimum-arms-cross",
    ]
    assert nulls_for("bestk.best_hard") == ["one-mapping"]
    assert nulls_for("nvsbp.nonmonotone_hard") == [
        "advantage-concave-decline",
        "advantage-one-switch",
    ]
    assert nulls_for("rho.rule_above_model") == ["rho-low-edge"]
    assert all(set(n.claims) <= set(CLAIMS) for n in STRUCTURED_NULLS.values())
    # a null that brings its own design (as isolab.study.reward_rho.worlds' do)
    own = planned_setting("n-vs-bp")
    STRUCTURED_NULLS["test-own-world"] = StructuredNull(
        "B_p at the margin, drawn by its own function",
        ("nvsbp.bp_matters_little",),
        world=lambda seed: world(own, fx.bp_effect(BP_MARGIN), seed),
    )
    try:
        assert "test-own-world" in nulls_for("nvsbp.bp_matters_little")
        calls = calibrate("nvsbp.bp_matters_little", {}, 3, False, null="test-own-world")
        assert sum(calls.values()) == 3
    finally:
        del STRUCTURED_NULLS["test-own-world"]


def test_effects_follow_the_mapping():
    """An effect on avg@4 moves best@4 and worst@4 as the split's mapping does."""
    means = planned_setting("nstar").means["main"]
    out = fx.through_mapping(means, np.full(means.height, 0.05))
    easy = (means["split"] == "easy").to_numpy() & (means["step"] > 0).to_numpy()
    assert np.all(out[EVAL_AVG] == 0.05) and np.all(out[EVAL_WORST][easy] > 0)


def _v(claim: str, call: str, p: float | None) -> Verdict:
    return Verdict(claim, "", None, call, "", 0.1, p, None, math.nan, "", "> 0", 10)  # type: ignore[arg-type]


def test_the_family_view_adjusts_p_values_and_keeps_calls():
    calls = [("a", "agrees", 0.01), ("b", "agrees", 0.03), ("c", "inconclusive", None)]
    table = holm_table([_v(*c) for c in [*calls, ("d", "inconclusive", 0.5)]])
    assert table["p_holm"].to_list() == pytest.approx([0.03, 0.06, None, 0.5], nan_ok=True)
    assert table["familywise"].to_list() == [
        "agrees",
        "inconclusive",
        "inconclusive",
        "inconclusive",
    ]
    assert table["call"].to_list()[1] == "agrees"  # the per-claim call stays
