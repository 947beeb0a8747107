"""Verdicts: each claim of the papers tested on a study's runs, called only when the data
resolve it.

A newcomer's map, from the claim down to the numbers:

- `claims`: which claim each study tests, and how (`CLAIMS`, `evaluate`, `verdict`), with the
  gate that leaves a claim untested on data that cannot test it (`testbed`: runs of the old CPU
  testbed) and the caveats a kept call carries;
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
  compared between groups), `curves` (regressions over the learning curves), `race` (the RACE
  pilot against the full grid), `vertex` (the optimum in log2 n per checkpoint and its shift
  with compute), `saturation` (the pre-registered plateau gate of nstar's long runs),
  `fixed_batch` (n against B_p within fixed-B pairs; B_p's equivalence test), `mechanism`
  (best@k / worst@k per doubling of n at equal avg@4, and κ beyond the compute mapping),
  `rho_optimum` (ρ* per class as a located optimum in logit ρ), `lr_exponent` (the exponent of
  the best learning rate in the batch, against constant, sqrt and linear scaling); `matched`
  (each n-claim's secondary readings: n's effect at equal compute, at equal summed learning
  rate Σlr and at equal avg@4);
- what they are built on: `cells` (seed variance within configurations, OLS fits on one mean per
  configuration), `ols` (the robust regression, HC3), `noise` (evaluation
  and training noise per metric);
- `calibration` and `worlds`: the same tests on simulated sweeps with no effect, with
  structured nulls (`STRUCTURED_NULLS`: the wrong question, not only noise) and with a planted
  effect (`benchmarks/verdict_calibration.py`); `planned` builds those sweeps from a planned
  design before its runs exist, `effects` the planted effects and structured nulls added to them;
  `family`: Holm over every claim of the table, the call (the per-claim call kept beside it).
"""

from isolab.verdicts.claims import CLAIMS, Claim, evaluate
from isolab.verdicts.result import StatResult
from isolab.verdicts.verdict import Verdict, decide

__all__ = ["CLAIMS", "Claim", "StatResult", "Verdict", "decide", "evaluate"]
