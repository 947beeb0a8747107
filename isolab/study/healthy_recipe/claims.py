"""healthy-recipe's claims: KL + entropy help on Easy and not on Hard, and η ∝ sqrt(B).

The regularisers are an end-of-training contrast within seeds (`isolab.verdicts.contrasts`);
the learning-rate rule is the exponent of the best learning rate in the batch
(`isolab.study.healthy_recipe.lr_exponent`), read on the pre-registered (B, lr) grid where it
has run and on the old testbed's contest of rules until then.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from isolab.study.healthy_recipe import lr_exponent
from isolab.verdicts import contrasts, testbed
from isolab.verdicts.claim import Claim, Data, Y, old_testbed, on_split
from isolab.verdicts.result import StatResult


def _regularisers(split: str) -> Callable[[Data], StatResult]:
    def run(data: Data) -> StatResult:
        df = on_split(data["regularisers"], split)
        return contrasts.compare_arms(df, Y, "recipe", "kl_entropy", "none")

    return run


#: The (B, lr) grid pre-registered for η ∝ sqrt(B) on the new testbed (`lr_exponent.SPEC`), and
#: the old testbed's contest of rules that stands in for it until it is run.
LR_GRID, LR_RULES = "lr-grid", "lr-scaling"


def _lr_runs(data: Data) -> pl.DataFrame:
    return data[LR_GRID] if LR_GRID in data else data[LR_RULES]


def _lr_gate(data: Data) -> str | None:
    return testbed.old_testbed(_lr_runs(data))


def _lr_exponent(data: Data) -> StatResult:
    return lr_exponent.best_lr_exponent(_lr_runs(data), Y)


CLAIMS = (
    Claim(
        id="healthy.kl_entropy_easy",
        study="healthy-recipe",
        text="KL + entropy losses help on Easy sets (IsoCompute Playbook keeps them on)",
        split="easy",
        expected="> 0",
        unit="final avg@4, on − off",
        run=_regularisers("easy"),
        gate=old_testbed("regularisers"),
    ),
    Claim(
        id="healthy.kl_entropy_hard",
        study="healthy-recipe",
        text="KL + entropy losses do not help on Hard sets (the Playbook drops them)",
        split="hard",
        expected="< 0",
        unit="final avg@4, on − off",
        run=_regularisers("hard"),
        gate=old_testbed("regularisers"),
    ),
    Claim(
        id="healthy.lr_sqrt",
        study="healthy-recipe",
        text="η ∝ sqrt(B) beats constant and linear scaling of the learning rate (Playbook)",
        split=None,
        expected=f"≈ {lr_exponent.SQRT}",
        unit=f"exponent e of the best learning rate in the batch (lr* ∝ B^e); equivalence "
        f"margin ±{lr_exponent.MARGIN} around {lr_exponent.SQRT} (sqrt nearer than constant "
        "or linear)",
        run=_lr_exponent,
        gate=_lr_gate,
    ),
)
