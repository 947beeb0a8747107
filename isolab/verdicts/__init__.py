"""Verdicts: each claim of the papers tested on a study's runs, called only when the data
resolve it (`model`: the `Verdict` record and the call; `tests`: the statistical tests;
`claims`: which claim each study tests, and how)."""

from isolab.verdicts.claims import CLAIMS, Claim, evaluate
from isolab.verdicts.model import Verdict, decide

__all__ = ["CLAIMS", "Claim", "Verdict", "decide", "evaluate"]
