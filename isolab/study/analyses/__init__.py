"""The curated studies' analyses: runs tables in, a `Report` (figures, tables, findings) out.

One module per study of `isolab.study.STUDIES`, composing `isolab.frontier` (the fits),
`isolab.study.summaries` (small tables) and `isolab.plots` (one function per panel). Every
sentence of a report is built from the numbers it states; each study also says, computed from
the same numbers, whether its result agrees with the paper's: tiny models on a CPU need not
agree, and a report says so plainly when they do not.

Figures are `matplotlib.figure.Figure` objects made without pyplot, so a notebook shows each
one where it asks for it, and a script saves them without a display.
"""

from isolab.study.analyses.bestk_worstk import bestk_worstk
from isolab.study.analyses.healthy_recipe import healthy_recipe
from isolab.study.analyses.interference import interference
from isolab.study.analyses.mixtures import mixtures
from isolab.study.analyses.model_size import model_size
from isolab.study.analyses.n_vs_bp import n_vs_bp
from isolab.study.analyses.nstar import nstar
from isolab.study.analyses.report import Report
from isolab.study.analyses.reward_rho import reward_rho
from isolab.study.analyses.sensitivity import add_sensitivity
from isolab.study.analyses.targets import targets

__all__ = [
    "Report",
    "add_sensitivity",
    "bestk_worstk",
    "healthy_recipe",
    "interference",
    "mixtures",
    "model_size",
    "n_vs_bp",
    "nstar",
    "reward_rho",
    "targets",
]
