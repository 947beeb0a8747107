"""Verdicts: the reusable statistics with which the curated studies test the papers' claims, and
the record of a call. No module here names a study or a path under `runs/`: each study states
its claims (`isolab/study/<study>/claims.py`), their study-specific tests and their calibration
worlds in its own folder, and `isolab.study.claims` / `isolab.study.calibration` gather them.

A newcomer's map, from the claim down to the numbers:

- `claim`: the `Claim` record (its test, gate, caveat and secondary readings), the call on a
  test's result (`verdict`), `evaluate_claims`, and the helpers the studies' claims share;
  `testbed`: the gate that leaves a claim untested on runs of the old CPU testbed;
- `verdict`: the `Verdict` record a report saves, and the call (`decide`). Holm is the call
  (issue 46): `family` corrects every claim of the findings table at once, and a claim
  significant on its own test but not after Holm reads "per-claim only", unbolded;
- `preregistration`: each claim's test, estimand, unit and gate as its study's
  `studies/<study>/preregistered.yaml` fixes them, read against the runs' own start and end
  times (pre-registered, revised after the data, or neither), and the caveats (registered,
  recipe confound, a bootstrap of few seeds);
- `result`: what every test returns (`StatResult`), the level α and the t, power and Holm helpers;
- the tests, runs tables in, a `StatResult` out: `contrasts` (configurations compared at the end
  of training, within seeds where the design allows), `slopes` (slopes of the final metric
  compared between groups), `curves` (regressions over the learning curves), `quadratic` (the
  one quadratic vertex in log2 n with its delta-method gradient), `vertex` (the optimum per
  checkpoint and its shift with compute), `crossing` (arms' advantages with joint bands, and the
  step-down max-|t| they share), `saturation` (the plateau gate), `matched` (a factor's effect
  at equal compute, at equal summed learning rate Σlr and at equal avg@4);
- what they are built on: `cells` (seed variance within configurations, OLS fits on one mean per
  configuration), `ols` (the robust regression, HC3), `noise` (evaluation and training noise per
  metric);
- the calibration's building blocks: `calibration` (`Plant`, `StructuredNull`, the `Setting` of
  a design and one simulated `world` on it), `worlds` (null means and one draw), `planned` (those
  sweeps from a planned design before its runs exist), `effects` (the planted effects and
  structured nulls added to them).
"""

from isolab.verdicts.claim import Claim
from isolab.verdicts.result import StatResult
from isolab.verdicts.verdict import Verdict, decide

__all__ = ["Claim", "StatResult", "Verdict", "decide"]
