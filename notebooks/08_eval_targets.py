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
# # 08 · Evaluation targets that disagree
#
# **Question.** The n that is best on the training distribution's own validation set: is it
# also best on problems the policy never trains on, and under a judge of process quality?
#
# **Paper.** Wilhelm & Kao (arXiv 2607.13389): the native training reward, downstream pass@1
# on other benchmarks and a common judge of process quality pick different allocations.
#
# **Data.** Two sweeps of study `nstar`, Hard arms of notebook 02's grid at one B_p, with the
# same configs and seeds:
# - `targets`: a second evaluation set beside validation — problems of a shifted distribution
#   (sums of up to three operands; training draws two), at every checkpoint;
# - `judge`: the same runs again with a third target, a judge of process quality — the shipped
#   tiny PRM scores every evaluation completion (`eval_judge: tiny-prm`), and its mean score is
#   logged as `eval/judge`. The judge's FLOPs are logged apart (`flops/judge`), never in the
#   run's compute.
#
# A difference of optima can be read only where both lie inside the grid (notebook 02 shows
# where each split's lies). Their planned points and budgets are in the table below (`studies/nstar/<scale>/`); the runs
# analysed are described from their own tables once read, with what each claim's test lacks.
#
# **The test.** Each target's n* is the vertex of a quadratic in log2 n (+ a level per seed)
# of the runs' last evaluations; the two fits share the runs, so their errors are correlated
# as the residuals are, and the difference of the vertices is tested with that joint
# covariance (`isolab.study.targets.optimum`). It is tested only where both curvatures are resolved
# and both optima lie inside the grid. Each pair (validation against the shifted set, and
# against the judge) is one claim. Calibrated on worlds with one optimum for both targets (also
# with the second target half as curved) and with optima 1.5 doublings apart.

# %% tags=["parameters"]
scale = "cpu"  # smoke | cpu | gpu
workers = 2  # runs at once, when the sweep has to run
rerun = False  # True: run the sweep even when runs/nstar/<scale>/targets holds a snapshot
runs = None  # your own sweep instead: an MLflow experiment or a snapshot folder

# %%
# %matplotlib inline
from isolab import study

targets = study.get("targets")
study.describe(targets, scale) if runs is None else None  # the curated sweeps' plan

# %%
data = study.collect(targets, scale, workers=workers, rerun=rerun, runs=runs)
report = study.analyse(targets, data, scale)

# %%
from IPython.display import Markdown

from isolab.study.describe import describe_runs

Markdown(describe_runs(targets, data))

# %% [markdown]
# ## Each target at the budget against n, and the shifted target against compute
# Grey: each run's last evaluation; black: seed means; red: a quadratic in log2 n with its
# vertex where it has one inside the grid. Validation, the shifted set, the judge; right: the
# shifted target's learning curves per n.

# %%
report.figure("targets")

# %%
report.tables.get("by_n")

# %%
report.tables.get("judge_by_n")

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
    saved = study.save(targets, scale, report)  # an absolute path: not displayed
