"""The `never` and `mix` splits (issue 31, part 3) are cut from the shipped Easy and Hard ones:
never-solved Hard problems, and Easy with as many Hard problems, each keeping its parent's
train/validation cut; the shipped sizes stay as they were."""

from __future__ import annotations

import pytest

from isolab import models
from isolab.config import RunConfig
from isolab.difficulty import load_or_label


@pytest.fixture(scope="module")
def splits(isolab_cache):
    return load_or_label("tiny-m", "arithmetic", pool_size=4000)


def test_never_and_mix_are_cut_from_easy_and_hard(splits):
    for part in ("train", "val"):
        hard, easy = set(splits._part("hard", part)), set(splits._part("easy", part))
        never = splits._part("never", part)
        assert never and set(never) <= hard
        assert all(splits.avg[i] == 0 for i in never)
        assert len(never) == sum(splits.avg[i] == 0 for i in hard)  # every never-solved one
        mix = splits._part("mix", part)
        assert mix == sorted(mix) and easy <= set(mix) and set(mix) <= easy | hard
        assert len(set(mix) & hard) == min(len(hard), len(easy))  # one Hard per Easy
        assert splits._part("mix", part) == mix  # the same draw every time
    # no problem crosses from training to validation
    assert not set(splits._part("mix", "train")) & set(splits._part("mix", "val"))
    assert "never" not in splits.sizes() and "mix" not in splits.sizes()
    assert splits.sizes() == models.shipped_info("tiny-m")["difficulty"]["sizes"]
    # a mix's first validation problems (what eval_problems reads) hold both kinds
    first = splits._part("mix", "val")[:100]
    share = sum(splits.avg[i] > 0.1 for i in first) / len(first)
    assert 0.3 < share < 0.7, share


def test_the_healthy_recipe_treats_never_as_hard():
    assert RunConfig(split="never", recipe="auto").resolved_beta == 0.0
    assert RunConfig(split="mix", recipe="auto").resolved_beta > 0.0
    with pytest.raises(ValueError, match="split"):
        RunConfig(split="sometimes")
