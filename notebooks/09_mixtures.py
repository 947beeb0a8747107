# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: -papermill,-execution,-ExecuteTime
#     formats: ipynb,py:percent
#     notebook_metadata_filter: -papermill,-widgets,-language_info
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 09 · Mixed and extremely hard sets
#
# **Question.** On a mixture of Easy and Hard problems, where does n* lie against the n* of
# each part? And on problems the base model never solves, what does a larger n buy at equal
# compute?
#
# **Paper.** The IsoCompute Playbook (arXiv 2603.12151) trains on Easy, Hard and heterogeneous
# mixtures, and finds that on hard problems a larger n is what expands coverage (best@k): it
# finds the rare successes a small n never samples.
#
# **Data.** Three sweeps of study `nstar`, one design:
# - `main`: notebook 02's Easy and Hard runs, read at the mix's B_p;
# - `mix`: every Easy problem with as many Hard ones (1:1, each keeping its parent's
#   train/validation cut), the same B_p and n;
# - `never`: the Hard problems the base solved in none of its labelling samples, at a few n,
#   evaluated with best@16.
#
# Their planned points and budgets are in the table below (`studies/nstar/<scale>/`); the runs
# analysed are described from their own tables once read, with what each claim's test lacks.
#
# **The tests.**
# - *Mix between.* Each split's n* is the vertex of a quadratic in log2 n (+ a level per
#   seed) of its runs' last avg@4. "Between" is an intersection-union test: the mix's vertex
#   must lie above the lower component's *and* below the upper one's, each side one-sided.
#   It is tested only where all three curvatures are resolved and the optima lie inside the
#   grid. It can agree only when Easy's and Hard's optima are apart by more than their errors.
# - *Coverage on never.* The slope of each run's last best@16 on log2 n, with a level per
#   seed (HC3 errors). avg@16's slope is read beside it.
#
# Both are calibrated on worlds drawn on these runs' design and noise (`isolab.study.mixtures.worlds`).

# %% tags=["parameters"]
scale = "cpu"  # smoke | cpu | gpu
workers = 2  # runs at once, when a sweep has to run
rerun = False  # True: run the sweeps even when runs/nstar/<scale>/ holds their snapshots
runs = None  # your own sweep instead: an MLflow experiment or a snapshot folder

# %%
# %matplotlib inline
from isolab import study

mixtures = study.get("mixtures")
study.describe(mixtures, scale) if runs is None else None  # the curated sweeps' plan

# %%
data = study.collect(mixtures, scale, workers=workers, rerun=rerun, runs=runs)
report = study.analyse(mixtures, data, scale)

# %%
from IPython.display import Markdown

from isolab.study.describe import describe_runs

Markdown(describe_runs(mixtures, data))

# %% [markdown]
# ## Easy, Hard and their mix at the budget against n, and the mix against compute
# Left: each split's runs (faint), seed means (dots), a quadratic in log2 n and its vertex
# (dashed) where it is a maximum inside the grid. Right: the mix's learning curves per n.

# %%
report.figure("mix")

# %%
report.tables.get("mix_by_n")

# %% [markdown]
# ## Problems the base never solved: best@16 and avg@16 by n
# Left: at the budget (dotted: the base at step 0). Right: best@16 against compute per n.
# The labels come from a few samples of the base, so "never" is noisy: the base can solve some
# of these problems in new samples.

# %%
report.figure("never")

# %%
report.tables.get("never_by_n")

# %% [markdown]
# ## What these runs say
# Computed from the runs (nothing here is pre-written). Each claim of the papers is a stated
# test (`isolab.verdicts`): it agrees or disagrees only when the data reject "no effect" at 4%
# after Holm's correction over every claim of the README's findings table ("per-claim only"
# where it holds on its own test alone; levels calibrated to keep false calls under 5%), else it
# is inconclusive and says what
# effect the design could have detected:

# %%
print(report.summary_text())

# %%
if runs is None:  # your own sweep's report stays in this notebook
    saved = study.save(mixtures, scale, report)  # an absolute path: not displayed
