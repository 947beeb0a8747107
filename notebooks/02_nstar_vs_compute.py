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
# # 02 · n\*(C): the compute-optimal number of rollouts per problem
#
# **Question.** At a compute budget of C rollouts (C = B_p·n·M), how many rollouts per problem
# n should GRPO sample, and does that number stop growing?
#
# **Paper.** IsoCompute Playbook (Cheng et al., arXiv 2603.12151, §5): over n × B_p grids at
# equal compute, the frontier's optimal n grows with C and then saturates — at ≈512 on an Easy
# set and ≈128 on a Hard one for Qwen2.5-7B.
#
# **Method** (`isolab.frontier.optimal_n`): a ScaleRL sigmoid of reward against C per n (its
# start fixed to the measured base), the upper envelope of those curves, a running average of
# the best n, and a sigmoid of log n* against log C whose ceiling is the saturation, with
# intervals from resampling seeds within configurations. Whether n* grows is a test on every
# run (`isolab.verdicts`): does the advantage of a larger n grow as compute doubles? A
# saturation is reported only where n* grows.
#
# **Scales.** `smoke`: CI, about a minute. `cpu`: tiny-m at lr_base 1.5e-4 (the learning-rate
# pilot's, `studies/pilot/lr-cpu.yaml`), every validation problem × 16 samples, two sweeps —
# `main`, n ∈ {2…32} at B_p = 8 on Easy and Hard at 16,384 rollouts (30 runs, 3 seeds, about
# 28 minutes with 2 workers), and `long`, Easy runs for n = 2, 8, 32 at 65,536 rollouts on the
# first 64 training problems (3 runs, about 10 minutes) — or a few seconds when
# `runs/nstar/cpu/` holds the committed snapshots. `gpu`: SmolLM2-135M-Instruct on GSM8K.

# %% tags=["parameters"]
scale = "cpu"  # smoke | cpu | gpu
workers = 2  # runs at once, when a sweep has to run
rerun = False  # True: run the sweep even when runs/nstar/<scale>/ holds a snapshot

# %%
# %matplotlib inline
from isolab import study

nstar = study.get("nstar")
study.describe(nstar, scale)

# %% [markdown]
# The runs: read from the snapshots when they exist, otherwise the sweeps run now (resumable:
# points already finished in the MLflow store are skipped). One row per run × evaluation; the
# analysis reads both sweeps as one table, every run at every compute it reached (runs trained
# on a cut pool, `train_limit`, apart: see the saturation section).

# %%
data = study.collect(nstar, scale, workers=workers, rerun=rerun)
data["main"].select("split", "n", "B_p", "M", "step", "compute/rollouts", "eval/avg@4")

# %%
report = study.analyse(nstar, data, scale)

# %% [markdown]
# ## The frontier
# Every evaluation point coloured by n, the frontier f(C) = max over runs that spent at most C,
# its record-breaking points (red rings) and the per-n sigmoid fits.

# %%
report.figure("frontier")

# %% [markdown]
# ## n\*(C) and its saturation
# The envelope's best n at each C (grey), its running average, and the fitted sigmoid of
# log n\* with its bootstrap band; the dashed line is the fitted saturation.

# %%
report.figure("n_star")

# %% [markdown]
# The per-n fits behind the envelope (Easy split):

# %%
report.tables["per_n_easy"]

# %% [markdown]
# ## Saturation on a smaller training pool
# The `long` runs train on the first problems of the Easy pool only (`train_limit`; validation
# unchanged), so that the small-n curves stop rising within a CPU budget. Dotted lines: where each
# curve has plateaued — a two-piece linear fit on log2 C (rising, then a second slope from its
# break) whose second slope is ≤ 0.01 avg@4 per doubling, over at least one doubling. One seed
# per n: read the plateaus against the noise printed below. Runs on another pool than `main`'s
# never enter the frontier or the tests above.

# %%
from IPython.display import display

if "saturation" in report.figures:  # the smoke scale trains on the whole pool
    display(report.figure("saturation"), report.tables["plateaus"])

# %% [markdown]
# ## What these runs say
# Computed from the runs (nothing here is pre-written). Each claim of the papers is a stated
# test (`isolab.verdicts`): it agrees or disagrees only when the data reject "no effect" at 4%
# (a level calibrated to keep false calls under 5%), else it is inconclusive and says what
# effect the design could have detected:

# %%
print(report.summary_text())

# %% [markdown]
# Save the figures, tables and findings under `runs/nstar/<scale>/` and log them to MLflow
# (experiment `nstar/<scale>`; browse with `isolab ui`).

# %%
study.save(nstar, scale, report)
