"""reward-rho's claims: rule-based rewards want a larger update fraction ρ than model-based ones,
the gap is more than the reward model's FLOPs (`isolab.study.reward_rho.optimum`), and a small
pilot grid calls the same regime as the full grid (RACE, `isolab.study.reward_rho.race`)."""

from __future__ import annotations

from isolab.study.reward_rho import optimum, race
from isolab.verdicts.claim import Claim, Data, Y
from isolab.verdicts.result import StatResult


def _rho_rule_vs_model(data: Data) -> StatResult:
    return optimum.rho_optimum_difference(data["full"], Y)


def _learning_to_search(data: Data) -> StatResult:
    return optimum.learning_to_search(data["full"], Y)


def _race(data: Data) -> StatResult:
    return race.regime_agreement(data["pilot"], data["full"], Y)


def _rho_caveat(data: Data) -> str:
    return optimum.knob_caveat(data["full"], Y)


CLAIMS = (
    Claim(
        id="rho.rule_above_model",
        study="reward-rho",
        text="rule-based rewards favour a larger update fraction ρ than reward-model ones "
        "(ρ* ≈ 0.72 vs ≈ 0.44)",
        split=None,
        expected="> 0",
        unit="logit ρ*, rule-based − model-based (the paper's: 1.19)",
        run=_rho_rule_vs_model,
        caveat=_rho_caveat,
    ),
    Claim(
        id="rho.learning_to_search",
        study="reward-rho",
        text="the ρ* gap is more than the reward model's FLOPs: rule-based systems want more "
        "learning per search FLOP (isolab's split of the paper's gap; the paper does not "
        "state it)",
        split=None,
        expected="> 0",
        unit="ln(C_learning / C_search)*, rule-based − model-based",
        run=_learning_to_search,
    ),
    Claim(
        id="rho.race_same_regime",
        study="reward-rho",
        text="a small pilot grid calls the same regime as the full grid (RACE, rate 1.0)",
        split=None,
        expected="= 1",
        unit="share of systems called alike",
        run=_race,
    ),
)
