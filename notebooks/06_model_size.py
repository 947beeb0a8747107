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
# # 06 · Model size at equal FLOPs
#
# **Question.** With a fixed FLOP budget, a bigger policy costs more per rollout and per
# update, so it buys fewer of both. Does its better start make up for that?
#
# **Paper.** Wilhelm & Kao (arXiv 2607.13389): the best allocation depends jointly on model
# size, reward design and target; there is no universal recipe.
#
# **Here.** tiny-s (0.08M), tiny-m (0.66M) and tiny-l (2.2M parameters) at a few values of n,
# on the whole problem pool so all three are scored on the same problems, at tiny-m's pilot
# learning rate. Their planned points and budgets are in the table below (`studies/model-size/<scale>/`); the runs
# analysed are described from their own tables once read, with what each claim's test lacks.

# %% tags=["parameters"]
scale = "cpu"  # smoke | cpu | gpu
workers = 2  # runs at once, when a sweep has to run
rerun = False  # True: run the sweep even when runs/model-size/<scale>/ holds a snapshot
runs = None  # your own sweep instead: an MLflow experiment or a snapshot folder

# %%
# %matplotlib inline
from isolab import study

size = study.get("model-size")
study.describe(size, scale) if runs is None else None  # the curated sweeps' plan

# %%
data = study.collect(size, scale, workers=workers, rerun=rerun, runs=runs)
report = study.analyse(size, data, scale)

# %%
from IPython.display import Markdown

from isolab.study.describe import describe_runs

Markdown(describe_runs(size, data))

# %% [markdown]
# ## Reward against FLOPs, and what the budget bought
# Left: avg@4 against cumulative FLOPs per model (line style: n). Right: rollouts and
# updates each model's best run bought with the same budget (log scale).

# %%
report.figure("model_size")

# %%
report.tables["best_per_model"]

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
    saved = study.save(size, scale, report)  # an absolute path: not displayed
