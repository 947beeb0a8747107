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
# # 10 · Per-prompt allocation: uniform n against adaptive allocators at equal FLOPs
#
# **Question.** GRPO gives every problem of a step the same n rollouts. A step could instead
# spend them unevenly: skip problems whose group will be all right or all wrong (no advantage,
# no gradient) and give the budget to the others. Does that reach the avg@4 of the best uniform
# n with fewer FLOPs, once *every* generated rollout is charged, the discarded ones included?
#
# **Papers.** Knapsack RL (arXiv 2509.25849) allocates rollouts as a knapsack problem (+2–4
# points at about 2× compute-equivalent); VIP (arXiv 2602.01601) predicts each prompt's success
# rate and solves for rollout counts under a budget; SARA (arXiv 2607.26253) stops sampling a
# prompt once its group is clearly flat (22% fewer rollouts than dynamic sampling);
# Pilot-Commit (arXiv 2605.26606) pilots each prompt and commits the rest to high-variance ones
# (1.9× faster in cumulative rollouts); DAPO's dynamic sampling filters flat groups. Each
# reports savings in rollouts or steps, none at equal FLOPs with the discarded rollouts and the
# change in learning FLOPs charged.
#
# **Here** (`RunConfig.allocation`, `isolab.rl.allocation`): uniform n ∈ {4, 8, 16} at B = 128
# against three allocators at n = 8, B_p = 16 — `dynamic` (DAPO's filter: 2·B_p groups, the B_p
# most varied kept), `early_stop` (SARA-like: a pilot of 2 rollouts for each of 2·B_p
# candidates, the B_p least likely to give a flat group completed to 8) and `variance`
# (knapsack-like: B = 128 split in proportion to p(1 − p) of each problem's Beta estimate, at
# least 2 each) — on Easy, Hard and their 1:1 mix, 3 seeds, every run at 9.6e11 FLOPs
# (IsoFLOP). The claims (one per allocator, pre-registered in
# `studies/allocation/preregistered.yaml` before the first run): final avg@4 of the allocator
# minus the best uniform n of its split, within seeds, pooled over the splits, > 0. The
# analysis adds, without a call, the FLOPs each arm takes to reach a stated avg@4.
#
# **What this testbed cannot show.** On Easy every problem sits near p = 1/2 (avg@16 ∈ [0.3,
# 0.6]), so p(1 − p) is nearly flat across them and the variance split gives nearly every
# problem its n: there
# `variance` ≈ uniform n = 8 by construction. The pool holds 96,000 problems, so a run rarely
# meets a problem twice: the per-problem estimates the allocators use are the base model's
# avg@16 labels (the Beta prior), hardly updated by the run's own rollouts, unlike the papers'
# multi-epoch runs over a few thousand prompts. And tiny models gain little per doubling of
# compute here (≈ 0.015–0.03 avg@4 on Hard and the mix), so a FLOPs saving of 0.7× is a final
# avg@4 difference of about 0.01, near the noise of one run (calibration below).

# %% tags=["parameters"]
scale = "cpu"  # smoke | cpu | gpu
workers = 2  # runs at once, when a sweep has to run
rerun = False  # True: run the sweep even when runs/allocation/<scale>/ holds a snapshot
runs = None  # your own sweep over `allocation` instead: an MLflow experiment or a snapshot folder

# %%
# %matplotlib inline
from isolab import study

allocation = study.get("allocation")
study.describe(allocation, scale) if runs is None else None  # the curated sweep's plan

# %% [markdown]
# The runs: read from the snapshot when it exists, otherwise the sweep runs now (resumable:
# points already finished in the MLflow store are skipped), or your own sweep read as `main`.
# What they hold, and what each claim's test lacks in them, written from the runs:

# %%
data = study.collect(allocation, scale, workers=workers, rerun=rerun, runs=runs)
data["main"].select("split", "allocation", "n", "B_p", "seed", "step", "flops/total", "eval/avg@4")

# %%
from IPython.display import Markdown

from isolab.study.describe import describe_runs

Markdown(describe_runs(allocation, data))

# %%
report = study.analyse(allocation, data, scale)

# %% [markdown]
# ## The frontier per allocator
# avg@4 (seed mean, ±1 SD band) against the FLOPs spent, every generated rollout charged, one
# panel per split; the dotted line is the stated avg@4 of the next section. At equal FLOPs an
# allocator that discards rollouts (`dynamic`, `early_stop`) takes fewer optimizer steps.

# %%
report.figure("frontier")

# %% [markdown]
# ## FLOPs to reach a stated avg@4
# The target is the best uniform n's seed-mean avg@4 at half its budget; each arm's FLOPs to
# first reach it are interpolated in log FLOPs between checkpoints (`ratio` < 1: fewer FLOPs
# than the best uniform n; `by the first checkpoint`: an upper bound; `not reached` within the
# budget). A reading of the curves, not a test: the claims below make the calls.

# %%
report.tables["flops_to_target"]

# %% [markdown]
# ## The discarded share
# The share of all FLOPs spent on rollouts no update used (`compute/discarded_share` at the end
# of each run, seed mean): the price dynamic sampling pays for whole groups and early stopping
# for its pilots. Uniform n and the variance split discard nothing.

# %%
report.figure("discarded")

# %%
report.tables["discarded"]

# %% [markdown]
# ## Each split's estimate
# Final avg@4 of each allocator minus the best uniform n of that split, within seeds, with its
# 96% interval: the claims' test on one split at a time, shown without a call.

# %%
report.tables["split_estimates"]

# %% [markdown]
# ## What these runs say
# Computed from the runs (nothing here is pre-written). Each claim is a stated test
# (`isolab.verdicts`): it agrees or disagrees only when the data reject "no effect" at 4% after
# Holm's correction over every claim of the README's findings table ("per-claim only" where it
# holds on its own test alone), else it is inconclusive and says what effect the design could
# have detected.
#
# **Calibration** (`benchmarks/verdict_calibration.py --claims allocation.dynamic
# allocation.early_stop allocation.variance`, `isolab/study/allocation/worlds.py`; rates and
# their bounds in docs/statistics.md): on the pre-registered design with each split's curve and
# noise taken from nstar's committed n = 8 runs, worlds where every arm is equal, and worlds
# where one allocator reaches every avg@4 with 0.7× or 0.5× the FLOPs of uniform n. Every arm
# equal: no false `agrees` in 400 worlds per claim, but `disagrees` in 5.5–9.2% of them
# (picking the best uniform n on the same runs favours uniform). 0.7× the FLOPs (+0.015 final
# avg@4) is found in 6.5–10% of 200 worlds, 0.5× (+0.033) in 86.5–90%: the stated detectable
# effect, 0.025, ignores the pick's bias, and about half the FLOPs is what this design detects.

# %%
print(report.summary_text())

# %%
if runs is None:  # your own sweep's report stays in this notebook
    saved = study.save(allocation, scale, report)  # an absolute path: not displayed
