"""Verdicts: each claim of the papers tested on a study's runs, called only when the data
resolve it.

A newcomer's map, from the claim down to the numbers:

- `claims`: which claim each study tests, and how (`CLAIMS`, `evaluate`, `verdict`);
- `verdict`: the `Verdict` record a report saves, and the call (`decide`);
- `result`: what every test returns (`StatResult`), the level α and the t, power and Holm helpers;
- the tests, runs tables in, a `StatResult` out: `contrasts` (configurations compared at the end
  of training, within seeds where the design allows), `slopes` (slopes of the final metric
  compared between groups), `curves` (regressions over the learning curves), `race` (the RACE
  pilot against the full grid);
- what they are built on: `cells` (seed variance within configurations, OLS fits on one mean per
  configuration), `ols` (the robust regressions, HC3 and clustered by run), `noise` (evaluation
  and training noise per metric);
- `calibration` and `worlds`: the same tests on simulated sweeps with no effect and with a
  planted one (`benchmarks/verdict_calibration.py`).
"""

from isolab.verdicts.claims import CLAIMS, Claim, evaluate
from isolab.verdicts.result import StatResult
from isolab.verdicts.verdict import Verdict, decide

__all__ = ["CLAIMS", "Claim", "StatResult", "Verdict", "decide", "evaluate"]
