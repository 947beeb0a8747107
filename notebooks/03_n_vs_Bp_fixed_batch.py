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
# # 03 · More rollouts or more problems, at a fixed batch
#
# **Question.** With the batch fixed at B = B_p·n completions per step, every split costs the
# same per step, so reward at equal M is an iso-compute comparison. Should the batch hold many
# problems with few rollouts each, or few problems with many rollouts?
#
# **Paper.** IsoCompute Playbook (arXiv 2603.12151, §4.2): on Easy sets, few steps favour a
# large B_p and many steps a large n (n\*(M) is a sigmoid); on Hard sets the best n is
# non-monotone in M; B_p matters little in a moderate range at fixed n.
#
# **Runs.** This study re-analyses the runs of `nstar` (notebook 02), or your own sweep: two
# configurations with the same B = B_p·n and different n form a fixed-B pair. The runs
# analysed are described from their own tables once read; where they hold no fixed-B pair, the
# tests say so.

# %% tags=["parameters"]
scale = "cpu"  # smoke | cpu | gpu
workers = 2  # runs at once, when a sweep has to run
rerun = False  # True: run the sweep even when runs/nstar/<scale>/ holds a snapshot
runs = None  # your own sweep instead: an MLflow experiment or a snapshot folder

# %%
# %matplotlib inline
from isolab import study

tradeoff = study.get("n-vs-bp")
study.describe(tradeoff, scale) if runs is None else None  # the curated sweeps' plan

# %%
data = study.collect(tradeoff, scale, workers=workers, rerun=rerun, runs=runs)
report = study.analyse(tradeoff, data, scale)

# %%
from IPython.display import Markdown

from isolab.study.describe import describe_runs

Markdown(describe_runs(tradeoff, data))

# %% [markdown]
# ## Reward against M for every split of the batch
# The shaded bands mark the few-steps and many-steps thirds of the common step range; the
# winner of each is reported below.

# %%
report.figure("tradeoff")

# %%
report.tables.get("winners_easy", "no fixed-B pair with two values of n in these runs")

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
    saved = study.save(tradeoff, scale, report)  # an absolute path: not displayed
