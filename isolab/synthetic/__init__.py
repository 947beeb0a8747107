"""Synthetic run tables planted with known laws, to test and benchmark the frontier analysis.

The frames have the layout of `isolab.tracking.runs.load_runs` (one row per run × evaluation step), so
every analysis runs on them unchanged, and the planted parameters are known exactly:

- `IsoComputeLaw`: per-n ScaleRL sigmoids of reward against rollouts (arXiv 2510.13786) whose
  asymptote A(n) peaks at `n_sat` and whose midpoint C_mid(n) grows with n, so that the best n
  grows with compute and saturates at `n_sat`, the behaviour the IsoCompute Playbook reports
  (arXiv 2603.12151, Qwen2.5-7B: ≈512 Easy, ≈128 Hard).
- `RhoLaw`: reward at a fixed FLOP budget peaks at an update fraction ρ* per reward system
  (Wilhelm & Kao, arXiv 2607.13389: ρ ≈ 0.72 for rule-based rewards, ≈ 0.44–0.45 for PRMs).
"""

from isolab.synthetic.isocompute import (
    B_P_GRID,
    N_GRID,
    FixedOptimumLaw,
    IsoComputeLaw,
    isocompute_laws,
    make_isocompute_runs,
)
from isolab.synthetic.plateau import PlateauLaw, make_plateau_runs
from isolab.synthetic.rho import RHO_GRID, RhoLaw, make_rho_runs, rho_laws

__all__ = [
    "B_P_GRID",
    "N_GRID",
    "RHO_GRID",
    "FixedOptimumLaw",
    "IsoComputeLaw",
    "PlateauLaw",
    "RhoLaw",
    "isocompute_laws",
    "make_isocompute_runs",
    "make_plateau_runs",
    "make_rho_runs",
    "rho_laws",
]
