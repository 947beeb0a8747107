"""FlopLedger bookkeeping and the run planner (the formulas are checked in test_flops.py)."""

from __future__ import annotations

import math

import pytest
from helpers import tiny_llama

from isolab.compute.flops import (
    forward_flops,
    generation_flops,
    reward_model_flops,
    training_flops,
)
from isolab.compute.ledger import FlopLedger, plan_run
from isolab.compute.shapes import LoraSpec

POLICY = tiny_llama()
REWARD = tiny_llama(hidden_size=96, num_hidden_layers=3, num_labels=1)
METRICS = {
    "flops_step/search",
    "flops_step/learning",
    "flops_step/reward",
    "flops_step/total",
    "flops/search",
    "flops/search_discarded",
    "compute/rollouts_discarded",
    "compute/discarded_share",
    "flops/learning",
    "flops/reward",
    "flops/total",
    "flops/eval",
    "flops_hw/learning",
    "flops_hw/total",
    "compute/rollouts",
    "compute/tokens",
    "compute/rho",
    "compute/rho_step",
    "time/reward_s",
}
PROMPTS, COMPLETIONS = [6, 6, 9, 9], [3, 7, 2, 5]
SEQS = [p + c for p, c in zip(PROMPTS, COMPLETIONS, strict=True)]


def record_step(ledger: FlopLedger, *, beta: float = 0.0, passes: int = 1) -> dict[str, float]:
    ledger.record_generation(PROMPTS, COMPLETIONS)
    if ledger.reward_model_config is not None:
        ledger.record_reward_model(SEQS)
    ledger.record_reward_time(0.25)
    if passes > 1:
        ledger.record_old_policy_forward(SEQS, COMPLETIONS)
    if beta > 0:
        ledger.record_reference_forward(SEQS, COMPLETIONS)
    ledger.record_policy_update(SEQS, COMPLETIONS, passes=passes)
    return ledger.end_step(rollouts=len(PROMPTS))


def test_step_metrics_have_the_documented_names_and_split():
    m = record_step(FlopLedger(POLICY, reward_model_config=REWARD), beta=0.1, passes=2)
    assert set(m) == METRICS
    search = generation_flops(POLICY, PROMPTS, COMPLETIONS)
    learning = (
        2 * training_flops(POLICY, SEQS, COMPLETIONS)
        + forward_flops(POLICY, SEQS, COMPLETIONS)  # reference
        + forward_flops(POLICY, SEQS, COMPLETIONS)  # old policy
    )
    reward = reward_model_flops(REWARD, SEQS)
    assert m["flops_step/search"] == search
    assert m["flops_step/learning"] == learning
    assert m["flops_step/reward"] == reward
    assert m["flops_step/total"] == search + learning + reward
    assert m["compute/rho_step"] == pytest.approx(learning / (search + learning + reward))
    assert m["compute/tokens"] == sum(PROMPTS) + sum(COMPLETIONS)
    assert m["flops_hw/learning"] == m["flops/learning"]  # no checkpointing


def test_cumulative_totals_rho_and_reward_time():
    ledger = FlopLedger(POLICY, reward_model_config=REWARD)
    first = record_step(ledger)
    second = record_step(ledger, beta=0.1)
    assert second["flops/search"] == 2 * first["flops_step/search"]
    assert second["flops/learning"] == first["flops_step/learning"] + second["flops_step/learning"]
    assert second["flops/total"] == first["flops_step/total"] + second["flops_step/total"]
    assert second["compute/rho"] == pytest.approx(second["flops/learning"] / second["flops/total"])
    assert (
        first["compute/rho_step"] < second["compute/rho_step"]
    )  # the reference forward is learning
    assert second["compute/rollouts"] == 2 * len(PROMPTS)
    assert second["time/reward_s"] == pytest.approx(0.5)


def test_eval_is_kept_out_of_the_total():
    ledger = FlopLedger(POLICY)
    ledger.record_eval([5, 5], [4, 4])
    m = record_step(ledger)
    assert m["flops/eval"] == generation_flops(POLICY, [5, 5], [4, 4])
    assert m["flops/total"] == m["flops_step/search"] + m["flops_step/learning"]


def test_rule_based_reward_costs_no_flops_and_needs_no_model():
    ledger = FlopLedger(POLICY)
    m = record_step(ledger)
    assert m["flops/reward"] == 0 and m["time/reward_s"] > 0
    with pytest.raises(ValueError, match="reward_model_config"):
        ledger.record_reward_model(SEQS)


def test_gradient_checkpointing_shows_in_hardware_flops_only():
    plain = record_step(FlopLedger(POLICY))
    ckpt = record_step(FlopLedger(POLICY, gradient_checkpointing=True))
    assert ckpt["flops/learning"] == plain["flops/learning"]
    recompute = training_flops(
        POLICY, SEQS, COMPLETIONS, gradient_checkpointing=True
    ) - training_flops(POLICY, SEQS, COMPLETIONS)
    assert ckpt["flops_hw/learning"] == ckpt["flops/learning"] + recompute
    assert ckpt["flops_hw/total"] == ckpt["flops/total"] + recompute


def test_lora_reference_is_the_base_model_and_old_policy_has_adapters():
    lora = LoraSpec(r=4)
    ledger = FlopLedger(POLICY, lora=lora)
    ledger.record_reference_forward(SEQS, COMPLETIONS)
    ref = ledger.end_step(rollouts=0)["flops_step/learning"]
    ledger.record_old_policy_forward(SEQS, COMPLETIONS)
    old = ledger.end_step(rollouts=0)["flops_step/learning"]
    assert ref == forward_flops(POLICY, SEQS, COMPLETIONS)
    assert old == forward_flops(POLICY, SEQS, COMPLETIONS, lora)


def test_state_dict_round_trip_resumes_cumulative_totals():
    ledger = FlopLedger(POLICY)
    first = record_step(ledger)
    resumed = FlopLedger(POLICY)
    resumed.load_state_dict(ledger.state_dict())
    assert record_step(resumed)["flops/total"] == 2 * first["flops/total"]


def test_empty_step_reports_zero_rho_not_nan():
    m = FlopLedger(POLICY).end_step(rollouts=0)
    assert m["compute/rho"] == 0.0 and not math.isnan(m["compute/rho_step"])


@pytest.mark.parametrize("k", [1, 4])
def test_plan_run_equals_m_recorded_steps(k):
    """k = search_oversample: k·B rollouts generated and scored per step, B trained on."""
    kwargs = dict(n=4, B_p=2, M=3, prompt_len=7, completion_len=5, beta=0.1, num_iterations=2)
    plan = plan_run(
        POLICY,
        reward_model_config=REWARD,
        gradient_checkpointing=True,
        search_oversample=k,
        **kwargs,
    )
    B, seq = 8, [12] * 8
    ledger = FlopLedger(POLICY, reward_model_config=REWARD, gradient_checkpointing=True)
    for _ in range(3):
        ledger.record_generation([7] * (k * B), [5] * (k * B))
        ledger.record_reward_model(seq * k)
        ledger.record_old_policy_forward(seq, [5] * B)
        ledger.record_reference_forward(seq, [5] * B)
        ledger.record_policy_update(seq, [5] * B, passes=2)
        m = ledger.end_step(rollouts=k * B)
    for key in ("flops/search", "flops/learning", "flops/reward", "flops/total", "flops_hw/total"):
        assert plan[key] == m[key]
    assert plan["flops_step/total"] == m["flops_step/total"]
    assert plan["compute/rho"] == pytest.approx(m["compute/rho"])
    assert plan["compute/rollouts"] == 24 * k and plan["compute/tokens"] == m["compute/tokens"]
    assert plan["rollouts_per_step"] == k * B


def test_plan_run_rho_moves_with_beta_and_passes():
    base = dict(n=8, B_p=4, M=10, prompt_len=16, completion_len=32, lora=LoraSpec(r=8))
    rho = {
        (beta, it): plan_run(POLICY, beta=beta, num_iterations=it, **base)["compute/rho"]
        for beta in (0.0, 0.04)
        for it in (1, 2)
    }
    assert rho[(0.0, 1)] < rho[(0.04, 1)] < rho[(0.04, 2)]
    assert rho[(0.0, 1)] < rho[(0.0, 2)]
    with_rm = plan_run(POLICY, beta=0.0, num_iterations=1, reward_model_config=REWARD, **base)
    assert with_rm["compute/rho"] < rho[(0.0, 1)]


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ({"n": 0}, "n = 0"),
        ({"completion_len": 0}, "completion_len"),
        ({"beta": -1.0}, "beta"),
        ({"search_oversample": 0}, "search_oversample = 0"),
    ],
)
def test_plan_run_rejects_bad_settings(override, match):
    kwargs = (
        dict(n=4, B_p=2, M=3, prompt_len=7, completion_len=5, beta=0.0, num_iterations=1) | override
    )
    with pytest.raises(ValueError, match=match):
        plan_run(POLICY, **kwargs)


def test_merged_lora_generation_costs_the_base_model():
    lora = LoraSpec(r=4)
    unmerged = record_step(FlopLedger(POLICY, lora=lora))
    merged = record_step(FlopLedger(POLICY, lora=lora, lora_merged_for_generation=True))
    assert unmerged["flops/search"] == generation_flops(POLICY, PROMPTS, COMPLETIONS, lora)
    assert merged["flops/search"] == generation_flops(POLICY, PROMPTS, COMPLETIONS)
    assert merged["flops/learning"] == unmerged["flops/learning"]
