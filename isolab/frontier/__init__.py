"""Frontier analysis: from a table of runs to the papers' allocation prescriptions.

Pure functions, DataFrames in and DataFrames (or small frozen dataclasses) out; no I/O, no plots.
Inputs may be polars or pandas frames in the layout of `isolab.tracking.runs.load_runs`; outputs
are polars. One module per subject:

- `law`: ScaleRL's sigmoid ``R(C) = R0 + (A − R0) / (1 + (C_mid / C)^B)`` (Khatri et al., arXiv
  2510.13786), written once; `fit`: its fit to points, multi-start, bootstrap intervals (after
  Epoch AI's `analyzing-chinchilla`) and a status; `solver`: the grid search over
  (C_mid, B) with (R0, A) solved exactly, and the Levenberg–Marquardt refinement behind it;
- `envelope`: the frontier ``f(C) = max_{j: C_j ≤ C} R_j`` and its record-breaking points;
- `nstar`: per-n fits → upper envelope → running-average ``n*(C)`` → a sigmoid of ``log n*``
  against ``log C`` (IsoCompute Playbook, Cheng et al., arXiv 2603.12151); `per_n`: the points
  each n is fitted to and their seed replicates; `saturation`: the envelope, its running
  average and the saturation's interval;
- `effects`: n*(C) under avg@k, best@k and worst@k; `tradeoff`: n vs B_p at a fixed batch;
- `allocation`: runs that vary `allocation` (uniform, dynamic, early_stop, variance) read per
  allocator, and the allocators compared at equal FLOPs with their discarded share;
- `rho`: ρ = C_learning / C_total per reward system at equal FLOPs and the RACE pilot
  (Wilhelm & Kao, arXiv 2607.13389); `recommend`: the allocation at a budget, checked by
  `validate`: ScaleRL's held-out protocol (the advice made from the runs up to C/2 and C/4,
  scored by its regret at C against the noise);
- `status`: the `Status` every fit ends with; `blas`: one BLAS thread for the fits' small
  matrix products.

The runs table's column names are in `isolab.vocab`, its schema and frame helpers in
`isolab.table`.
"""

from isolab.frontier.allocation import settings
from isolab.frontier.answer import answers, stated
from isolab.frontier.effects import MetricEffect, metric_effect
from isolab.frontier.envelope import frontier, record_points
from isolab.frontier.fit import SigmoidFit, fit_sigmoid
from isolab.frontier.law import sigmoid
from isolab.frontier.nstar import NStarResult, optimal_n
from isolab.frontier.recommend import Recommendation, recommend, validate_recommend
from isolab.frontier.rho import RaceResult, RhoFrontier, isoflop_band, race, regime, rho_frontier
from isolab.frontier.status import Status
from isolab.frontier.tradeoff import TradeoffResult, tradeoff_fixed_batch
from isolab.frontier.validate import Prediction, Validation, rho_allocation, validate
from isolab.table import CONFIG_COLUMNS, SETTING_COLUMNS
from isolab.vocab import DEFAULT_METRICS, DEFAULT_X, DEFAULT_Y

__all__ = [
    "CONFIG_COLUMNS",
    "DEFAULT_METRICS",
    "DEFAULT_X",
    "DEFAULT_Y",
    "SETTING_COLUMNS",
    "MetricEffect",
    "NStarResult",
    "Prediction",
    "RaceResult",
    "Recommendation",
    "RhoFrontier",
    "SigmoidFit",
    "Status",
    "TradeoffResult",
    "Validation",
    "fit_sigmoid",
    "frontier",
    "isoflop_band",
    "metric_effect",
    "optimal_n",
    "race",
    "record_points",
    "recommend",
    "regime",
    "rho_allocation",
    "rho_frontier",
    "sigmoid",
    "tradeoff_fixed_batch",
    "validate",
    "validate_recommend",
    "answers",
    "settings",
    "stated",
]
