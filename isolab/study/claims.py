"""Every curated study's claims, gathered from the study folders (`isolab/study/<study>/claims.py`,
each a tuple `CLAIMS` of `isolab.verdicts.claim.Claim`).

This module only iterates over the registry (`isolab.study.registry.STUDIES`): a claim is
stated, tested and calibrated in its own study's folder. `evaluate(study, data)` runs a study's
tests and returns its `Verdict`s; the same tests run on simulated worlds with no effect and with
a planted one in `isolab.study.calibration` (`benchmarks/verdict_calibration.py` measures each
claim's false-call rate and power).
"""

from __future__ import annotations

from isolab.study.registry import STUDIES, get, study_module
from isolab.verdicts.claim import Claim, Data, evaluate_claims
from isolab.verdicts.verdict import Verdict


def claims_of(study: str) -> tuple[Claim, ...]:
    """The claims of `study` (its folder's `claims.CLAIMS`)."""
    return study_module(get(study), "claims").CLAIMS


#: Every claim by id, study by study in the registry's order.
CLAIMS: dict[str, Claim] = {c.id: c for name in STUDIES for c in claims_of(name)}


def evaluate(study: str, data: Data) -> list[Verdict]:
    """Every claim of `study` tested on its runs tables (`isolab.verdicts.claim.evaluate_claims`:
    a missing sweep or a refusing gate leaves a claim inconclusive with the reason; each note is
    followed by the claim's caveat and its readings at equal C, Σlr and avg@4)."""
    return evaluate_claims(claims_of(study), data)
