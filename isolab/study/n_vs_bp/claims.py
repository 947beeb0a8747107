"""n-vs-bp's claims at a fixed batch B = B_p·n (`isolab.study.n_vs_bp.fixed_batch`): few steps
favour more problems and many steps more rollouts (Easy), the best n is non-monotone in the steps
(Hard), and B_p matters little in a moderate range (an equivalence test)."""

from __future__ import annotations

import math

from isolab.study.n_vs_bp import fixed_batch, sign_changes
from isolab.verdicts import matched
from isolab.verdicts.claim import Claim, Data, Y, matched_per_split, matched_readings, on_split
from isolab.verdicts.result import StatResult
from isolab.vocab import LR_SUM


def _more_n_with_steps(data: Data) -> StatResult:
    return fixed_batch.advantage_trend(on_split(data["main"], "easy"), Y)


def _nonmonotone(data: Data) -> StatResult:
    return sign_changes.sign_changes(on_split(data["main"], "hard"), Y)


def _bp_little(data: Data) -> StatResult:
    return fixed_batch.bp_equivalence(data["main"], Y)


def _bp_caveat(data: Data) -> str:
    """What "B_p matters little" rests on: the B_p levels, the margin over their range against
    n's spread on each split (`fixed_batch.bp_equivalence` on the split alone), and B_p's effect
    at equal Σlr (`matched.factor_effect`), which the equal-compute call nets against the Σlr a
    larger B_p costs."""
    df = data["main"]
    levels = sorted(df["B_p"].unique().to_list())
    span = math.log2(levels[-1] / levels[0]) if len(levels) > 1 and levels[0] > 0 else math.nan
    room = fixed_batch.BP_MARGIN * span
    spreads, at_lr = [], []
    for split in ("easy", "hard"):
        part = on_split(df, split)
        spread = fixed_batch.bp_equivalence(part, Y).extra.get("n_spread", math.nan)
        spreads.append(
            f"{split.capitalize()} {spread:.3f} (the range's margin is {room / spread:.0%} of it)"
        )
        lr = matched.factor_effect(part, Y, LR_SUM, "B_p")
        if lr.ran:
            at_lr.append(f"{lr.estimate:+.4f} ± {lr.se:.4f} (SE) on {split.capitalize()}")
    return (
        f"caveat: only {len(levels)} B_p levels ({', '.join(map(str, levels))}: a "
        f"{2**span:g}× range); the margin ±{fixed_batch.BP_MARGIN} per doubling of B_p allows "
        f"±{room:.3f} over that range, against n's spread of avg@4 across its grid: "
        f"{', '.join(spreads)}: loose where n itself moves avg@4 little; at equal Σlr a "
        f"doubling of B_p is worth {', '.join(at_lr)} (avg@4), offset at equal C by the Σlr it "
        "costs (a larger B_p takes fewer steps)"
    )


PER_DOUBLING_SQ = "avg@4 per doubling of n per doubling of C"
CLAIMS = (
    Claim(
        id="nvsbp.more_n_with_steps",
        study="n-vs-bp",
        text="at fixed B, few steps favour more problems, many steps more rollouts (Easy)",
        split="easy",
        expected="> 0",
        unit=PER_DOUBLING_SQ,
        run=_more_n_with_steps,
        readings=matched_readings("main", "easy", term="slope"),
    ),
    Claim(
        id="nvsbp.nonmonotone_hard",
        study="n-vs-bp",
        text="at fixed B on Hard the best n is non-monotone in the number of steps",
        split="hard",
        expected="≠ 0",
        unit="the larger n's advantage at fixed B (avg@4 per doubling of n, mean over the B "
        "strata) between two located sign changes (> 0: the larger n best in the middle of "
        "the range)",
        run=_nonmonotone,
        readings=matched_readings("main", "hard", term="curvature"),
    ),
    Claim(
        id="nvsbp.bp_matters_little",
        study="n-vs-bp",
        text="B_p matters little in a moderate range (Playbook: varying n moves Easy reward "
        "9.2%, varying B_p 1.9%)",
        split=None,
        expected="≈ 0",
        unit=f"avg@4 per doubling of B_p at fixed n and C (equivalence margin "
        f"±{fixed_batch.BP_MARGIN})",
        run=_bp_little,
        caveat=_bp_caveat,
        readings=matched_per_split("B_p"),
    ),
)
