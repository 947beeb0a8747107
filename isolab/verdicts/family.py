"""The claims as one family: Holm-adjusted p-values next to the per-claim calls.

Each claim is called at α on its own test (`isolab.verdicts.verdict.decide`), the level every
claim's calibration holds. Read together, a report of many claims makes many looks: the chance
that at least one of m true-null claims is called is up to m·α. `holm_table` states, next to
each call, the p-value Holm's step-down procedure (Holm 1979) gives it within the family, and
whether the call survives at family-wise α. The calls themselves stay per claim.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import polars as pl

from isolab.verdicts.result import ALPHA, holm
from isolab.verdicts.verdict import Verdict


def holm_table(verdicts: Sequence[Verdict], alpha: float = ALPHA) -> pl.DataFrame:
    """One row per verdict: claim, split, call, p-value, Holm-adjusted p-value over the
    verdicts that have one, and `familywise`: the call where the adjusted p-value is below
    `alpha`, `inconclusive` where it is not (a claim without a p-value keeps its call: an
    `inconclusive`, or a share such as RACE's, which is not a test)."""
    p = [v.p_value if v.p_value is not None else math.nan for v in verdicts]
    adjusted = holm(p)
    rows = []
    for v, raw, adj in zip(verdicts, p, adjusted, strict=True):
        fw = (v.call if adj < alpha else "inconclusive") if math.isfinite(adj) else v.call
        rows.append({
            "claim": v.claim, "split": v.split, "call": v.call,
            "p_value": raw if math.isfinite(raw) else None,
            "p_holm": adj if math.isfinite(adj) else None, "familywise": fw,
        })  # fmt: skip
    schema = {"claim": pl.String, "split": pl.String, "call": pl.String, "p_value": pl.Float64,
              "p_holm": pl.Float64, "familywise": pl.String}  # fmt: skip
    return pl.DataFrame(rows, schema=schema)
