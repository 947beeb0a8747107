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
# # 07 · Interference between problems: forgetting events by n
#
# **Question.** One policy trains on a mixture of problems, so an update that helps some can
# cost others. At equal compute, does a larger n (more rollouts per problem, fewer sequential
# steps M) make problems forget less?
#
# **Paper.** IsoCompute Playbook (arXiv 2603.12151): updates on a mixture interfere; a larger
# n spreads them more evenly across problems and mitigates this better than more steps M.
#
# **Data.** The per-problem counts every evaluation saves (each validation problem's correct
# samples at each checkpoint) of study `nstar`'s runs (notebook 02), and `seen`: some of its
# Easy arms run again with their own first training problems evaluated too. Nothing new is
# trained when the snapshots exist; the runs analysed are described from their own tables once
# read, with what each claim's test lacks.
#
# **The measure.** A *forgetting event* is a problem whose solve rate falls from one
# checkpoint to the next beyond binomial noise (one-sided Fisher exact test, 5%). Even with no
# change at all the test calls some problems; that share is exact given each problem's counts
# and is subtracted (the *excess*). Intervals are C → 2C, the same for every run.
#
# **The test.** The slope of each run's excess share on log2 n, adjusted for the run's mean
# gain and level (`isolab.study.interference.forgetting`): at equal compute an arm that learns more, or
# sits at another level, calls falls at another rate without any interference. Calibrated on
# worlds where every problem learns on its own (flat; each arm's own levels; an n-free
# wobble; falls that track progress: 2–6% false calls) and with planted falls that thin with n.

# %% tags=["parameters"]
scale = "cpu"  # smoke | cpu | gpu
workers = 2  # runs at once, when a sweep has to run
rerun = False  # True: run the sweeps even when runs/nstar/<scale>/ holds their snapshots
runs = None  # your own sweep instead: an MLflow experiment or a snapshot folder

# %%
# %matplotlib inline
from isolab import study

forgetting = study.get("interference")
study.describe(forgetting, scale) if runs is None else None  # the curated sweeps' plan

# %%
data = study.collect(forgetting, scale, workers=workers, rerun=rerun, runs=runs)
report = study.analyse(forgetting, data, scale)

# %%
from IPython.display import Markdown

from isolab.study.describe import describe_runs

Markdown(describe_runs(forgetting, data))

# %% [markdown]
# ## Forgetting events against compute, per n
# Solid: the share of problems called falling in each interval C → 2C (seed mean, at the B_p
# with the most values of n); dashed: the share the test calls when nothing changes. Later
# intervals hold more updates, so more falls.

# %%
report.figure("forgetting")

# %% [markdown]
# ## Excess forgetting against progress
# Each run's excess share (mean over the intervals every run has) against its mean gain per
# interval: the test compares n at equal gain and level, not along this cloud.

# %%
report.figure("excess_vs_gain")

# %% [markdown]
# ## Per-problem curves
# The validation problems that move most: their solve rate against compute, one line per n.

# %%
report.figure("problems")

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
    saved = study.save(forgetting, scale, report)  # an absolute path: not displayed
