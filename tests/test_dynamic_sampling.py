"""Dynamic sampling (`RunConfig.search_oversample` k): k·B_p groups generated and scored per
step, the B_p whose rewards vary most trained on; search and reward compute ×k, learning ×1.

Real components throughout: the shipped tiny-m, TRL's GRPOTrainer, a temporary MLflow store."""

from __future__ import annotations

import math

import pytest
import torch
import yaml
from mlflow.tracking import MlflowClient

from isolab.config import RunConfig
from isolab.models import reward as reward_models
from isolab.planning import plan_config
from isolab.rl.dynamic_sampling import group_reward_std, select_groups, selection_metrics
from isolab.sweep import SweepSpec, plan_sweep

# ---- the selection ---------------------------------------------------------------------------


def test_the_kept_groups_are_those_whose_rewards_vary_most():
    rewards = torch.tensor(
        [
            [1.0, 1.0, 1.0, 1.0],  # 0: all correct, std 0
            [0.0, 1.0, 0.0, 0.0],  # 1: one in four
            [0.0, 1.0, 1.0, 0.0],  # 2: two in four, the largest spread
            [0.0, 0.0, 0.0, 0.0],  # 3: all wrong, std 0
            [0.5, 0.0, 1.0, 0.5],  # 4: dense rewards, std 0.408
            [1.0, 1.0, 0.0, 1.0],  # 5: three in four, same std as group 1
        ]
    )
    std = group_reward_std(rewards)
    assert std.tolist() == pytest.approx([0.0, 0.5, 0.57735, 0.0, 0.40825, 0.5], abs=1e-5)
    assert select_groups(rewards, 1).tolist() == [2]
    assert select_groups(rewards, 2).tolist() == [1, 2]  # 1 and 5 tie: the lower index wins
    assert select_groups(rewards, 3).tolist() == [1, 2, 5]
    assert select_groups(rewards, 4).tolist() == [1, 2, 4, 5]
    assert select_groups(rewards, 5).tolist() == [0, 1, 2, 4, 5]  # zero-std tie: 0 before 3
    # ranking by std is ranking by variance: the same order as torch's own (unbiased) var
    by_var = torch.sort(rewards.var(dim=1), descending=True, stable=True).indices[:4]
    assert select_groups(rewards, 4).tolist() == sorted(by_var.tolist())
    m = selection_metrics(rewards, select_groups(rewards, 3))
    assert m["search/kept_frac"] == 0.5
    assert m["search/kept_reward_std"] == pytest.approx((0.5 + 0.57735 + 0.5) / 3, abs=1e-5)
    assert m["search/frac_reward_zero_std"] == pytest.approx(2 / 6)
    assert m["search/reward_mean"] == pytest.approx(rewards.mean().item())


def test_equal_rewards_count_as_flat_and_unscorable_rollouts_are_left_out():
    tenth = torch.full((1, 6), 0.1)  # its float32 mean is not exactly 0.1: still std 0
    nan = torch.tensor([[math.nan, 1.0, 0.0, math.nan, 1.0, 1.0]])
    lone = torch.tensor([[math.nan, math.nan, 0.7, math.nan, math.nan, math.nan]])
    rewards = torch.cat([tenth, nan, lone, torch.full((1, 6), math.nan)])
    std = group_reward_std(rewards)
    assert std[0] == 0 and std[2] == 0 and std[3] == 0  # flat, one scored, none scored
    assert std[1].item() == pytest.approx(torch.tensor([1.0, 0.0, 1.0, 1.0]).std().item())
    assert select_groups(rewards, 2).tolist() == [0, 1]


@pytest.mark.parametrize("keep", [0, 7])
def test_select_groups_refuses_an_impossible_share(keep):
    with pytest.raises(ValueError, match=f"keep = {keep}: choose between 1 and the 6 groups"):
        select_groups(torch.zeros(6, 4), keep)


# ---- the config ------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [0, -2])
def test_search_oversample_below_one_says_what_to_set(k):
    with pytest.raises(ValueError, match=rf"search_oversample = {k}: must be ≥ 1 \(1 trains"):
        RunConfig(search_oversample=k)
    with pytest.raises(ValueError, match="search_oversample"):
        RunConfig.from_dict({"search_oversample": 2.5})  # not a whole number of batches


def test_a_step_must_find_k_times_b_p_problems():
    with pytest.raises(ValueError, match="train_limit = 16: must be ≥ search_oversample·B_p = 32"):
        RunConfig(B_p=8, search_oversample=4, train_limit=16)
    assert RunConfig(B_p=8, search_oversample=4, train_limit=32).problems_per_step == 32


def test_k_1_keeps_every_run_key_and_k_counts_every_generated_rollout():
    # keys of the code before `search_oversample` existed: sweeps keep skipping finished runs
    assert RunConfig().run_key == "ce43fa5186ce557a"
    assert RunConfig(experiment="x", n=4, B_p=4, M=3).run_key == "6a42a66459e95453"
    # Hard runs changed keys on purpose when Hard took in never-solved problems (issue 27): the
    # key before was b330a54b60270280, whose run trained on other problems
    assert RunConfig(split="hard", num_iterations=2, n=16, B_p=2, M=7).run_key == (
        "bf6c8125766c6fd7"
    )
    assert RunConfig(search_oversample=1).run_key == RunConfig().run_key
    k4 = RunConfig(n=4, B_p=8, M=10, search_oversample=4)
    assert k4.run_key != k4.replace(search_oversample=1).run_key
    assert (k4.B, k4.rollouts_per_step, k4.rollouts) == (32, 128, 1280)
    assert k4.lr == k4.replace(search_oversample=1).lr  # the trained batch sets the lr


# ---- training --------------------------------------------------------------------------------


def _trl_log(cfg: RunConfig, isolab_trainer: bool) -> tuple[list[dict], dict[str, float]]:
    """Train `cfg` with isolab's trainer class or TRL's own GRPOTrainer, without MLflow: TRL's
    log history, and (isolab's) the ledger's totals."""
    import tempfile

    from datasets import Dataset
    from transformers import PrinterCallback

    from isolab.compute.ledger import FlopLedger
    from isolab.rl import engines
    from isolab.rl.prepare import grpo_args, max_prompt_tokens, prepare
    from isolab.rl.rewards import get_reward
    from isolab.rl.trainer import make_trainer_class, timed_reward

    torch.manual_seed(cfg.seed)
    model, tok, task, problems, _ = prepare(cfg)
    ledger = FlopLedger(model.config)
    reward = get_reward(cfg.reward, task, None, False)
    with tempfile.TemporaryDirectory() as out:
        args = grpo_args(
            cfg, out, cfg.max_completion_tokens, max_prompt_tokens(task, problems, tok)
        )
        data = {
            "prompt": [task.prompt(p) for p in problems],
            "answer": [p.answer for p in problems],
        }
        cls = make_trainer_class() if isolab_trainer else engines.grpo_trainer_class(False)
        trainer = cls(
            model=model,
            reward_funcs=[timed_reward(reward, ledger) if isolab_trainer else reward],
            args=args,
            train_dataset=Dataset.from_dict(data),
            processing_class=tok,
        )
        trainer.remove_callback(PrinterCallback)  # TRL's own logs to stdout
        if isolab_trainer:
            trainer.ledger = ledger
            trainer.search_oversample = cfg.search_oversample
        trainer.train()
    totals = ledger.end_step(getattr(trainer, "rollouts_since_step", 0))
    return trainer.state.log_history, totals


def test_k_1_trains_exactly_as_trl_does(isolab_cache):
    """isolab's trainer at k = 1 is TRL's: the same rollouts, rewards and losses, step by step,
    for a fixed seed (and so the same ledger, a function of the rollouts' token counts)."""
    cfg = RunConfig(n=4, B_p=4, M=2, num_iterations=2, eval_problems=8)  # 2 passes a batch
    ours, ledger = _trl_log(cfg, isolab_trainer=True)
    theirs, _ = _trl_log(cfg, isolab_trainer=False)
    keys = ("reward", "reward_std", "num_tokens", "completions/mean_length", "loss", "kl")
    steps = [{k: log.get(k) for k in keys} for log in ours if "loss" in log]
    assert len(steps) == cfg.M * cfg.num_iterations
    assert steps == [{k: log.get(k) for k in keys} for log in theirs if "loss" in log]
    assert not any(k.startswith("search/") for log in ours for k in log)
    assert ledger["compute/rollouts"] == cfg.rollouts
    tokens = [s["num_tokens"] for s in steps if s["num_tokens"] is not None]
    assert ledger["compute/tokens"] == tokens[-1]  # TRL's own count of the rollouts


@pytest.fixture(scope="module")
def runs(isolab_cache, tmp_path_factory):
    """The same short run at k = 1 and k = 4, with a reward model (tiny-orm), to MLflow."""
    from isolab.rl.train import train

    for name in reward_models.REWARD_MODEL_PRESETS:
        reward_models.build_info(name)
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"
    out = {}
    for k in (1, 4):
        cfg = RunConfig(
            experiment="test-dynamic-sampling",
            reward="orm",
            n=4,
            B_p=4,
            M=4,
            eval_problems=8,
            eval_k_samples=4,
            search_oversample=k,
        )
        result = train(cfg, tracking_uri=uri)
        assert result.status == "FINISHED"
        out[k] = (cfg, result.run_id, MlflowClient(uri).get_run(result.run_id).data.metrics)
    return uri, out


def test_k_4_charges_four_times_the_search_and_the_same_learning(runs):
    _, out = runs
    (_, _, m1), (cfg4, _, m4) = out[1], out[4]
    ratio = {
        key: m4[f"flops/{key}"] / m1[f"flops/{key}"] for key in ("search", "learning", "reward")
    }
    print(f"\nk = 4 over k = 1: {ratio}; ρ {m1['compute/rho']:.3f} → {m4['compute/rho']:.3f}")
    assert m4["compute/rollouts"] == cfg4.rollouts == 4 * m1["compute/rollouts"] == 4 * 64
    # every rollout generated is searched and scored; the same B = 16 per step are trained on
    # (the lengths of other rollouts differ a little: not exactly 4 and 1)
    assert ratio["search"] == pytest.approx(4, rel=0.15)
    assert ratio["reward"] == pytest.approx(4, rel=0.15)
    assert ratio["learning"] == pytest.approx(1, rel=0.1)
    assert m4["compute/rho"] < m1["compute/rho"] - 0.2
    assert m4["flops/total"] == pytest.approx(
        m4["flops/search"] + m4["flops/learning"] + m4["flops/reward"]
    )


def test_the_planner_counts_what_the_ledger_measures(runs):
    _, out = runs
    for k, (cfg, _, m) in out.items():
        plan = plan_config(cfg)  # expected lengths, not the sampled ones: within 10%
        assert plan["compute/rollouts"] == m["compute/rollouts"] == cfg.rollouts
        assert plan["rollouts_per_step"] == 16 * k
        for key in ("search", "learning", "reward", "total"):
            assert m[f"flops/{key}"] == pytest.approx(plan[f"flops/{key}"], rel=0.1), (k, key)
        assert m["compute/rho"] == pytest.approx(plan["compute/rho"], abs=0.03), k


def test_the_selection_is_logged_every_step(runs):
    uri, out = runs
    client = MlflowClient(uri)
    _, run_id, m = out[4]
    kept = client.get_metric_history(run_id, "search/kept_reward_std")
    every = client.get_metric_history(run_id, "search/group_reward_std")
    assert len(kept) == len(every) == 4
    by_step = {x.step: x.value for x in every}
    assert all(x.value >= by_step[x.step] for x in kept)  # the top B_p of the k·B_p groups
    assert m["search/kept_frac"] == 0.25
    assert "search/kept_frac" not in out[1][2]  # k = 1 logs nothing new


# ---- sweeps --------------------------------------------------------------------------------


def _spec(tmp_path, **changes) -> SweepSpec:
    data = {
        "name": "ds",
        "base": {"model": "tiny-m", "n": 4, "B_p": 4, "eval_problems": 8, "eval_k_samples": 4},
        "axes": {"search_oversample": [1, 2, 4], "num_iterations": [1, 2]},
        "budget_rollouts": 1024,
        "eval_points": 3,
        **changes,
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return SweepSpec.from_yaml(path)


def test_a_rollout_budget_pays_for_every_generated_rollout(tmp_path):
    plan = plan_sweep(_spec(tmp_path))
    for p in plan.points:
        k = p.config.search_oversample
        assert (p.config.M, p.config.rollouts) == (1024 // (16 * k), 1024)
        assert p.config.eval_at_rollouts == (256, 512, 1024)
    rho = {(p.config.search_oversample, p.config.num_iterations): p.rho for p in plan.points}
    assert rho[(4, 1)] < rho[(2, 1)] < rho[(1, 1)] and rho[(4, 2)] < rho[(1, 2)]


def test_a_flop_budget_plans_k_b_generated_and_b_trained(tmp_path):
    plan = plan_sweep(_spec(tmp_path, budget_rollouts=None, budget_flops=2.0e10))
    steps = {}
    for p in plan.points:
        cfg = p.config
        step = plan_config(cfg.replace(M=1))
        assert p.planned_flops == cfg.M * step["flops/total"] <= 2.0e10
        assert (cfg.M + 1) * step["flops/total"] > 2.0e10  # the most steps that fit
        # checkpoints: the budget's fractions, in this point's generated rollouts
        assert cfg.eval_at_rollouts[-1] == round(
            2.0e10 / step["flops/total"] * 16 * cfg.search_oversample
        )
        steps[(cfg.search_oversample, cfg.num_iterations)] = step
    one, four = steps[(1, 1)], steps[(4, 1)]
    assert four["flops_step/search"] == 4 * one["flops_step/search"]
    assert four["flops_step/learning"] == one["flops_step/learning"]
