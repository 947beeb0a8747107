"""Per-prompt allocation (`RunConfig.allocation`, issue 51): the allocators' arithmetic, their
config errors, and the ledger charging every generated rollout, the discarded ones included.

Real components: the shipped tiny-m, TRL's GRPOTrainer (HF generate), the ledger."""

from __future__ import annotations

import math
import tempfile

import pytest
import torch

from isolab.compute.flops import generation_flops
from isolab.config import RunConfig, pilot_size
from isolab.rl.allocation import (
    Beliefs,
    early_stop_keep,
    flat_group_probability,
    group_advantages,
    variance_split,
)

# ---- the allocators' arithmetic --------------------------------------------------------------


def test_variance_split_follows_p_times_1_minus_p_with_a_floor_of_two():
    sizes = variance_split([0.5, 0.0, 1.0, 0.1], 32)
    assert sum(sizes) == 32 and min(sizes) >= 2
    assert sizes[1] == sizes[2] == 2  # p(1 − p) = 0: only the floor
    # the spare 24 split 0.25 : 0.09 → 17.6 and 6.4, rounded by largest remainder
    assert sizes[0] == 2 + 18 and sizes[3] == 2 + 6
    assert variance_split([0.0, 1.0], 8) == [4, 4]  # nothing to prefer: even
    with pytest.raises(ValueError, match="at least 2"):
        variance_split([0.5] * 5, 8)


def test_a_mixed_pilot_is_never_flat_and_a_confident_one_is_stopped_first():
    assert flat_group_probability([1.0, 0.0], 1, 1, 8) == 0.0
    assert flat_group_probability([0.5, 0.5], 1, 1, 8) == 0.0  # partial credit: not all-or-none
    # uniform prior, two successes: P(6 more) = E[p^6 | Beta(3, 1)] = 3/9
    assert flat_group_probability([1.0, 1.0], 1, 1, 8) == pytest.approx(3 / 9)
    # a problem the base model never solved (avg@16 = 0) and failed twice more: near certain
    never = Beliefs({"q": 0.0}).ab("q")
    assert flat_group_probability([0.0, 0.0], *never, 8) > 0.6
    # an Easy problem (avg@16 = 0.45) failed twice is far from certain to stay all-wrong
    easy = Beliefs({"q": 0.45}).ab("q")
    assert flat_group_probability([0.0, 0.0], *easy, 8) < 0.1
    assert early_stop_keep([0.9, 0.0, 0.5, 0.0, 0.1], 3) == [1, 3, 4]
    with pytest.raises(ValueError, match="between 1 and the 5"):
        early_stop_keep([0.0] * 5, 6)


def test_beliefs_start_from_the_labels_and_learn_from_every_visit():
    b = Beliefs({"easy": 0.5})
    assert b.ab("easy") == (9.0, 9.0) and b.ab("unlabelled") == (1.0, 1.0)
    b.update("unlabelled", [1.0, 1.0, 1.0, float("nan"), 2.0])  # NaN skipped, 2 clipped to 1
    assert b.ab("unlabelled") == (5.0, 1.0)
    again = Beliefs({"easy": 0.5})
    again.load_state_dict(b.state_dict())
    assert again.mean("unlabelled") == pytest.approx(5 / 6)


def test_group_advantages_are_trls_on_equal_groups_and_per_group_on_unequal_ones():
    torch.manual_seed(0)
    rewards = torch.randint(0, 2, (12,)).float()
    grouped = rewards.view(-1, 4)
    trl = (grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)
    assert torch.allclose(group_advantages(rewards, [4, 4, 4], "group"), trl.flatten(), atol=1e-6)
    unequal = group_advantages(torch.tensor([1.0, 0.0, 1.0, 1.0, 1.0, 0.0]), [2, 4], "none")
    assert unequal.tolist() == pytest.approx([0.5, -0.5, 0.25, 0.25, 0.25, -0.75])
    assert group_advantages(torch.tensor([1.0, math.nan, 0.0]), [3], "none").tolist() == [
        0.5,
        0.0,
        -0.5,
    ]


# ---- the config --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"allocation": "greedy"}, "choose one of uniform, dynamic, early_stop, variance"),
        ({"allocation": "early_stop"}, "set search_oversample: 2 or more"),
        ({"allocation": "dynamic"}, "set search_oversample: 2 or more"),
        ({"allocation": "variance", "search_oversample": 2}, "set search_oversample: 1"),
        ({"allocation": "early_stop", "search_oversample": 2, "n": 2}, "set n ≥ 3"),
        ({"allocation": "variance", "processes": 2}, "set processes: 1"),
    ],
)
def test_an_allocation_it_cannot_run_names_the_field_to_change(fields, says):
    with pytest.raises(ValueError, match=says.replace("·", ".")):
        RunConfig(**fields)


def test_old_dynamic_runs_keep_their_keys_and_allocators_plan_what_they_generate():
    old = RunConfig(search_oversample=2)  # how dynamic sampling was asked for before
    assert old.allocator == "dynamic" and old.run_name.endswith("·dynamic")
    assert RunConfig(search_oversample=2, allocation="dynamic").run_key == old.run_key
    assert RunConfig(allocation="uniform").run_key == RunConfig().run_key
    early = RunConfig(n=8, B_p=4, search_oversample=3, allocation="early_stop")
    assert early.rollouts_per_step == 3 * 4 * pilot_size(8) + 4 * (8 - pilot_size(8)) == 48
    assert RunConfig(allocation="variance").rollouts_per_step == RunConfig().B
    assert early.run_name.endswith("·early_stop")


# ---- the ledger charges every generated rollout ----------------------------------------------


def _train_counting(cfg: RunConfig):
    """Train `cfg` with isolab's trainer, counting, outside the allocators, every sequence TRL's
    `_generate` returned and every sequence an update trained on: the ledger's totals, those
    lengths, and the policy's config."""
    from datasets import Dataset
    from transformers import PrinterCallback

    from isolab.compute.ledger import FlopLedger
    from isolab.rl.prepare import base_priors, grpo_args, max_prompt_tokens, prepare
    from isolab.rl.rewards import get_reward
    from isolab.rl.trainer import make_trainer_class, timed_reward

    seen: dict[str, list[int]] = {"prompt": [], "completion": [], "trained_p": [], "trained_c": []}

    class Counting(make_trainer_class()):
        def _generate(self, prompts):
            out = super()._generate(prompts)
            if self._replay is None and self.model.training:  # a real generation, not a replay
                seen["prompt"] += [len(ids) for ids in out[0]]
                seen["completion"] += [len(ids) for ids in out[1]]
            return out

        def _prepare_inputs(self, generation_batch):
            inputs = super()._prepare_inputs(generation_batch)
            if self.model.training:
                seen["trained_p"] += inputs["prompt_mask"].sum(1).tolist()
                seen["trained_c"] += inputs["completion_mask"].sum(1).tolist()
            return inputs

    torch.manual_seed(cfg.seed)
    model, tok, task, problems, _ = prepare(cfg)
    ledger = FlopLedger(model.config)
    with tempfile.TemporaryDirectory() as out:
        args = grpo_args(
            cfg, out, cfg.max_completion_tokens, max_prompt_tokens(task, problems, tok)
        )
        data = {
            "prompt": [task.prompt(p) for p in problems],
            "answer": [p.answer for p in problems],
        }
        trainer = Counting(
            model=model,
            reward_funcs=[timed_reward(get_reward(cfg.reward, task, None, False), ledger)],
            args=args,
            train_dataset=Dataset.from_dict(data),
            processing_class=tok,
        )
        trainer.remove_callback(PrinterCallback)
        trainer.ledger = ledger
        trainer.search_oversample = cfg.search_oversample
        trainer.allocation = cfg.allocator
        if cfg.allocator in ("early_stop", "variance"):
            trainer.beliefs = Beliefs(base_priors(cfg, task, problems))
        trainer.train()
    _train_counting.last_history = trainer.state.log_history
    return ledger.end_step(trainer.rollouts_since_step), seen, model.config


@pytest.mark.parametrize(
    "fields",
    [
        {"allocation": "uniform"},
        {"allocation": "dynamic", "search_oversample": 2},
        {"allocation": "early_stop", "search_oversample": 2},
        {"allocation": "variance"},
    ],
    ids=lambda f: f["allocation"],
)
def test_generated_tokens_are_search_tokens_whatever_the_allocator(isolab_cache, fields):
    cfg = RunConfig(n=4, B_p=4, M=3, eval_problems=8, split="all", **fields)
    m, seen, config = _train_counting(cfg)
    generated = len(seen["completion"])
    trained = len(seen["trained_c"])
    assert generated == cfg.rollouts == m["compute/rollouts"]  # the plan's C, every rollout
    assert trained == cfg.B * cfg.M  # every allocator trains on B = B_p·n a step
    assert m["compute/tokens"] == sum(seen["prompt"]) + sum(seen["completion"])
    search = generation_flops(config, seen["prompt"], seen["completion"])
    assert m["flops/search"] == search  # exactly: every generated rollout, once
    assert m["compute/rollouts_discarded"] == generated - trained
    kept = generation_flops(config, seen["trained_p"], seen["trained_c"])
    assert m["flops/search"] - m["flops/search_discarded"] == kept  # what was trained on
    assert m["compute/discarded_share"] == pytest.approx(
        m["flops/search_discarded"] / m["flops/total"]
    )
    if cfg.allocation in ("uniform", "variance"):
        assert m["flops/search_discarded"] == 0
    else:
        assert m["flops/search_discarded"] > 0


def test_variance_gives_hard_problems_the_floor_and_uncertain_ones_the_rest(isolab_cache):
    """On the Easy+Hard mix, the base model's labels start the estimates: never-solved problems
    get 2 rollouts, Easy ones more than n; TRL trains on B = B_p·n all the same."""
    cfg = RunConfig(n=4, B_p=8, M=2, eval_problems=8, split="mix", allocation="variance")
    m, seen, _ = _train_counting(cfg)
    assert len(seen["trained_c"]) == cfg.B * cfg.M and m["flops/search_discarded"] == 0
    logs = [log for log in _train_counting.last_history if "search/group_size_max" in log]
    assert len(logs) == cfg.M
    print([(log["search/group_size_min"], log["search/group_size_max"]) for log in logs])
    assert all(log["search/group_size_min"] < cfg.n for log in logs)
    assert all(log["search/group_size_max"] > cfg.n for log in logs)
