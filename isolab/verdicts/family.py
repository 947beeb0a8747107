"""The claims as one family: Holm is the call (issue 46).

Each claim's own test reads it at α (`isolab.verdicts.verdict.decide`), the level every claim's
calibration holds. Read together, a table of many claims makes many looks: the chance that at
least one of m true-null claims is called is up to m·α. So the call a report makes is the
family-wise one: `familywise` adjusts every p-value of the family by Holm's step-down procedure
(Holm 1979) and keeps a per-claim `agrees` or `disagrees` only where the adjusted p-value is
below α too. A claim significant on its own and not after Holm is *per-claim only*: its call is
`inconclusive`, its per-claim call kept beside it (`Verdict.per_claim_call`).

The family is every claim of the findings table: all studies together, at one scale (the
study layer gathers it from each study's saved findings, `isolab.study.pipeline`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import polars as pl

from isolab.verdicts.result import ALPHA, holm
from isolab.verdicts.verdict import Call, Verdict


def familywise(verdicts: Sequence[Verdict], alpha: float = ALPHA) -> list[Verdict]:
    """The verdicts read as one family: each gets `holm_p` (Holm over the verdicts that have a
    p-value), `per_claim_call` (its call on its own test) and, as `call`, that call where
    `holm_p` < `alpha`, else `inconclusive`. A verdict without a p-value keeps its call (an
    `inconclusive`, or a share such as RACE's, which is not a test). Reading a family twice
    gives the same verdicts: the per-claim call, once set, is what is adjusted."""
    own = [v.per_claim_call or v.call for v in verdicts]
    adjusted = holm([math.nan if v.p_value is None else v.p_value for v in verdicts])
    out = []
    for v, call, adj in zip(verdicts, own, adjusted, strict=True):
        tested = math.isfinite(adj)
        kept: Call = call if not tested or adj < alpha else "inconclusive"
        out.append(replace(v, call=kept, per_claim_call=call, holm_p=adj if tested else None))
    return out


def holm_table(verdicts: Sequence[Verdict], alpha: float = ALPHA) -> pl.DataFrame:
    """One row per verdict of the family (`familywise`): claim, split, the per-claim `call`,
    p-value, Holm-adjusted `p_holm`, and `familywise`: the call the report makes."""
    rows = [
        {
            "claim": v.claim,
            "split": v.split,
            "call": v.per_claim_call,
            "p_value": v.p_value,
            "p_holm": v.holm_p,
            "familywise": v.call,
        }
        for v in familywise(verdicts, alpha)
    ]
    schema = {
        "claim": pl.String,
        "split": pl.String,
        "call": pl.String,
        "p_value": pl.Float64,
        "p_holm": pl.Float64,
        "familywise": pl.String,
    }
    return pl.DataFrame(rows, schema=schema)
