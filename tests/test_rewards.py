"""Reward systems: rule-based scores, isolab's own ORM/PRM, and their FLOPs in real GRPO runs."""

from __future__ import annotations

import doctest

import huggingface_hub.constants
import pytest
from mlflow.tracking import MlflowClient

from isolab.compute.flops import reward_model_flops
from isolab.compute.shapes import model_shape
from isolab.config import RunConfig
from isolab.models import reward as reward_models
from isolab.models.reward import configs, data, reward_model_config_for, scoring
from isolab.planning import model_config, plan_config
from isolab.rl import rewards
from isolab.rl.rewards import get_reward
from isolab.tasks import get_task
from isolab.vocab import MODEL_BASED, REWARDS

RAW = get_task("arithmetic", "raw")
CHAT = get_task("arithmetic", "chat")


@pytest.fixture(scope="module")
def reward_model_presets(isolab_cache):
    """tiny-orm and tiny-prm, installed from the shipped weights (a no-op when there)."""
    return {name: reward_models.build_info(name) for name in reward_models.REWARD_MODEL_PRESETS}


def _call(fn, completions, answer, prompt="12+345="):
    return fn(prompts=[prompt] * len(completions), completions=completions, answer=answer)


# ---- rule-based ----------------------------------------------------------------------------
def test_docstring_examples(reward_model_presets):
    for module in (rewards, data, scoring, configs):  # the reward package's doctests
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_sparse_is_exact_match_of_the_reversed_answer():
    fn = get_reward("sparse", RAW)
    assert _call(fn, ["753", " 753\n", "7530", "357", ""], ["357"] * 5) == [1, 1, 0, 0, 0]
    assert fn.__name__ == "sparse_reward" and not hasattr(fn, "reward_model_config")


def test_structured_raw_weighs_format_and_correctness():
    fn = get_reward("structured", RAW)
    completions = ["753", "754", "7531", "75312", "7+3", "", "753="]
    assert _call(fn, completions, ["357"] * 7) == [1.0, 0.2, 0.2, 0.0, 0.0, 0.0, 0.0]


def test_structured_chat_wants_a_boxed_answer():
    fn = get_reward("structured", CHAT)
    chats = [[{"role": "assistant", "content": c}] for c in ("\\boxed{357}", "\\boxed{356}")]
    assert fn(prompts=[[]] * 2, completions=chats, answer=["357"] * 2) == [1.0, 0.2]
    texts = ["The sum is 357.", "no answer"]
    assert fn(prompts=[[]] * 2, completions=texts, answer=["357"] * 2) == [0.8, 0.0]


def test_dense_gives_credit_per_digit_least_significant_first():
    fn = get_reward("dense", RAW)
    got = _call(fn, ["753", "750", "053", "75", "7531", "", "abc"], ["357"] * 7)
    assert got == pytest.approx([1, 2 / 3, 2 / 3, 2 / 3, 3 / 4, 0, 0])
    chat = get_reward("dense", CHAT)
    got = chat(
        prompts=[[]] * 4,
        completions=["\\boxed{357}", "\\boxed{457}", "\\boxed{-357}", "none"],
        answer=["357"] * 4,
    )
    assert got == pytest.approx([1, 2 / 3, 0, 0])


def test_unknown_reward_names_the_choices():
    with pytest.raises(ValueError, match="sparse, structured, dense, orm, prm, proxy-prm"):
        get_reward("judge", RAW)


# ---- reward models -------------------------------------------------------------------------
def test_step_labels_stop_at_the_first_mistake():
    assert reward_models.step_labels("753", "753") == [1, 1, 1, 1]
    assert reward_models.step_labels("7531", "753") == [1, 1, 1, 0, -1]
    assert reward_models.step_labels("", "753") == [0]
    assert reward_models.outcome_labels("75", "753") == [0, 0, 0]


def test_synthetic_data_is_deterministic_balanced_and_held_out():
    a = reward_models.synthetic_examples(400, seed=3)
    assert a == reward_models.synthetic_examples(400, seed=3)
    assert 0.4 < sum(e.correct for e in a) / len(a) < 0.6
    test = reward_models.synthetic_examples(400, seed=3, held_out_only=True)
    train_ids = {e.prompt for e in reward_models.synthetic_examples(4000, seed=1)}
    assert not train_ids & {e.prompt for e in test}


def test_orm_and_prm_beat_chance_on_held_out_completions(reward_model_presets):
    scores = {}
    for name, kind in (("tiny-orm", "orm"), ("tiny-prm", "prm")):
        model, tok = reward_models.load(name, kind)
        scores[kind] = reward_models.evaluate(model, tok, kind)
        build_s = reward_model_presets[name]["build_time_s"]
        print(f"\n{name}: held-out {scores[kind]} (built in {build_s} s)")
    # Chance is 0.5 on this balanced set (half the completions are wrong). The shipped weights
    # score ORM 0.60 accuracy / 0.89 AUC, PRM 0.86 / 0.99 (build records); the ORM's min over
    # steps makes its threshold-0.5 accuracy conservative, its ranking (AUC) is what rewards use.
    assert scores["orm"]["accuracy"] > 0.57 and scores["orm"]["auc"] > 0.85
    assert scores["prm"]["accuracy"] > 0.8 and scores["prm"]["auc"] > 0.95
    assert scores["prm"]["step_accuracy"] > 0.85
    assert scores["prm"]["auc"] > scores["orm"]["auc"]  # process supervision helps (Lightman)


def test_model_rewards_report_what_they_scored(reward_model_presets):
    for name in MODEL_BASED:
        fn = get_reward(name, RAW)
        out = _call(fn, ["753", "7"], ["357"] * 2)
        assert len(out) == 2 and all(0 <= r <= 1 for r in out)
        assert fn.last_seq_lens == [11, 9], name  # prompt + completion + end-of-answer token
        planned = model_shape(reward_model_config_for(RunConfig(reward=name)))
        assert model_shape(fn.reward_model_config) == planned, name
        assert reward_model_flops(fn.reward_model_config, fn.last_seq_lens) > 0


def test_the_charge_is_the_measured_forward_and_reaches_the_ledger(reward_model_presets):
    from torch.utils.flop_counter import FlopCounterMode

    from isolab.compute.ledger import FlopLedger
    from isolab.rl.trainer import timed_reward

    fn = get_reward("prm", RAW)
    completions = ["753", "7", "75312"]
    with FlopCounterMode(display=False) as counter:  # tiny-prm runs eager attention
        for c in completions:  # one unpadded sequence at a time: model FLOPs, no padding
            _call(fn, [c], ["357"])
    measured = counter.get_total_flops()
    assert reward_model_flops(fn.reward_model_config, [11, 9, 13]) == measured

    ledger = FlopLedger(model_config("tiny-m"), reward_model_config=fn.reward_model_config)
    timed_reward(fn, ledger)(prompts=["12+345="] * 3, completions=completions, answer=["357"] * 3)
    assert ledger.end_step(rollouts=3)["flops/reward"] == measured


def test_reward_model_configs_are_read_without_building():
    assert reward_model_config_for(RunConfig(reward="sparse")) is None
    proxy = reward_model_config_for(RunConfig(reward="proxy-prm"))
    assert (proxy.hidden_size, proxy.num_hidden_layers) == (192, 6)  # tiny-l: the default
    big = RunConfig(reward="proxy-prm", extra={"reward_model": {"hidden_size": 256}})
    assert model_shape(reward_model_config_for(big)).head_dim == 64
    assert reward_model_config_for(RunConfig(reward="prm")).num_labels == 15
    with pytest.raises(ValueError, match="not a LlamaConfig field"):
        reward_model_config_for(RunConfig(reward="proxy-prm", extra={"reward_model": {"x": 1}}))


def test_hub_reward_model_offline_says_what_to_do(monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(RuntimeError, match="hf download Qwen/Qwen2.5-Math-PRM-7B"):
        reward_models.load("Qwen/Qwen2.5-Math-PRM-7B", "prm")
    with pytest.raises(RuntimeError, match="offline"):
        reward_model_config_for(RunConfig(model="smollm2-135m", reward="prm"))
    with pytest.raises(ValueError, match="raw arithmetic alphabet"):
        get_reward("prm", CHAT, "tiny-prm")


# ---- training ------------------------------------------------------------------------------
def _train(cfg: RunConfig, uri: str) -> dict[str, float]:
    from isolab.rl.train import train

    result = train(cfg, tracking_uri=uri)
    assert result.status == "FINISHED"
    return MlflowClient(uri).get_run(result.run_id).data.metrics


def test_every_reward_system_trains_and_only_models_cost_flops(reward_model_presets, tracking_uri):
    for name in REWARDS:
        cfg = RunConfig(
            experiment="test-rewards",
            reward=name,
            n=4,
            B_p=4,
            M=3,
            eval_problems=8,
            eval_k_samples=4,
        )
        m = _train(cfg, tracking_uri)
        func = "proxy_prm" if name == "proxy-prm" else name
        assert f"rewards/{func}_reward/mean" in m, f"TRL did not log {name}'s reward"
        assert m["compute/rollouts"] == cfg.rollouts
        assert m["time/reward_s"] > 0
        assert m["flops/total"] == pytest.approx(
            m["flops/search"] + m["flops/learning"] + m["flops/reward"]
        )
        if name in MODEL_BASED:
            assert m["flops/reward"] > 0, name
        else:
            assert m["flops/reward"] == 0, name


def _planned(cfg: RunConfig) -> dict[str, float]:
    """`plan_config`, with the reward model charged even before planning.py passes
    `reward_model_config_for(cfg)` to `plan_run` (then this adds nothing)."""
    plan = dict(plan_config(cfg))
    config = reward_model_config_for(cfg)
    if config is not None and plan["flops/reward"] == 0:
        seq = round(plan["prompt_len"] + plan["completion_len"])
        reward = cfg.M * reward_model_flops(config, [seq] * cfg.B)
        plan["flops/reward"] = reward
        plan["compute/rho"] = plan["flops/learning"] / (plan["flops/total"] + reward)
        plan["flops/total"] += reward
    return plan


def test_prm_lowers_rho_at_equal_total_flops(reward_model_presets, tracking_uri):
    base = RunConfig(
        experiment="test-rewards-isoflop", n=4, B_p=4, eval_problems=8, eval_k_samples=4
    )
    per_step = {r: _planned(base.replace(reward=r, M=1))["flops/total"] for r in ("sparse", "prm")}

    def matched(M: int) -> tuple[float, int, int]:
        M_prm = round(M * per_step["sparse"] / per_step["prm"])
        return abs(M_prm * per_step["prm"] / (M * per_step["sparse"]) - 1), M, M_prm

    # The shortest sparse run whose planned FLOPs a whole number of prm steps matches within 2%.
    mismatch, M_sparse, M_prm = next(matched(M) for M in range(4, 40) if matched(M)[0] < 0.02)
    runs = {}
    for name, M in (("sparse", M_sparse), ("prm", M_prm)):
        cfg = base.replace(reward=name, M=M)
        runs[name] = (_planned(cfg), _train(cfg, tracking_uri))
    for name, (plan, m) in runs.items():
        print(
            f"\n{name}: M = {plan['steps']:.0f}, planned {plan['flops/total']:.3e} FLOPs "
            f"(ρ {plan['compute/rho']:.3f}); logged {m['flops/total']:.3e} FLOPs, "
            f"reward share {m['flops/reward'] / m['flops/total']:.3f}, ρ = {m['compute/rho']:.3f}"
        )
    sparse, prm = runs["sparse"][1], runs["prm"][1]
    assert prm["flops/reward"] > 0 and sparse["flops/reward"] == 0
    assert prm["flops/total"] == pytest.approx(sparse["flops/total"], rel=0.15)
    assert prm["compute/rho"] < sparse["compute/rho"] - 0.05
