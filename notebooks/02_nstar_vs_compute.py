# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
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

# %% [markdown] papermill={"duration": 0.004358, "end_time": "2026-12-01T00:17:06.576156+00:00", "exception": false, "start_time": "2026-12-01T00:17:06.571798+00:00", "status": "completed"}
# # 02 · n\*(C): the compute-optimal number of rollouts per problem
#
# **Question.** At a compute budget of C rollouts (C = B_p·n·M), how many rollouts per problem
# n should GRPO sample, and does that number stop growing?
#
# **Paper.** IsoCompute Playbook (Cheng et al., arXiv 2603.12151, §5): over n × B_p grids at
# equal compute, the frontier's optimal n grows with C and then saturates — at ≈512 on an Easy
# set and ≈128 on a Hard one for Qwen2.5-7B.
#
# **Method** (`isolab.frontier.optimal_n`): a ScaleRL sigmoid of reward against C per n, the
# upper envelope of those curves, a running average of the best n, and a sigmoid of log n*
# against log C whose ceiling is the saturation, with bootstrap intervals.
#
# **Scales.** `smoke`: CI, about a minute. `cpu`: tiny-m, two sweeps — `main`, the n × B_p grid
# on Easy and Hard at 8,192 rollouts (72 runs, 2 seeds, about 25 minutes with 2 workers), and
# `long`, Easy runs at 32,768 rollouts (4 runs, about 8 minutes) — or a few seconds when
# `runs/nstar/cpu/` holds the committed snapshots. `gpu`: SmolLM2-135M-Instruct on GSM8K.

# %% papermill={"duration": 0.009662, "end_time": "2026-12-01T00:17:06.587574+00:00", "exception": false, "start_time": "2026-12-01T00:17:06.577912+00:00", "status": "completed"} tags=["parameters"]
scale = "cpu"  # smoke | cpu | gpu
workers = 2  # runs at once, when a sweep has to run
rerun = False  # True: run the sweep even when runs/nstar/<scale>/ holds a snapshot

# %% papermill={"duration": 5.534009, "end_time": "2026-12-01T00:17:12.123325+00:00", "exception": false, "start_time": "2026-12-01T00:17:06.589316+00:00", "status": "completed"}
# %matplotlib inline
from isolab import study

nstar = study.get("nstar")
study.describe(nstar, scale)

# %% [markdown] papermill={"duration": 0.001976, "end_time": "2026-12-01T00:17:12.128414+00:00", "exception": false, "start_time": "2026-12-01T00:17:12.126438+00:00", "status": "completed"}
# The runs: read from the snapshots when they exist, otherwise the sweeps run now (resumable:
# points already finished in the MLflow store are skipped). One row per run × evaluation; the
# analysis reads both sweeps as one table, every run at every compute it reached.

# %% papermill={"duration": 0.163588, "end_time": "2026-12-01T00:17:12.293921+00:00", "exception": false, "start_time": "2026-12-01T00:17:12.130333+00:00", "status": "completed"}
data = study.collect(nstar, scale, workers=workers, rerun=rerun)
data["main"].select("split", "n", "B_p", "M", "step", "compute/rollouts", "eval/avg@4")

# %% papermill={"duration": 0.508989, "end_time": "2026-12-01T00:17:12.805305+00:00", "exception": false, "start_time": "2026-12-01T00:17:12.296316+00:00", "status": "completed"}
report = study.analyse(nstar, data, scale)

# %% [markdown] papermill={"duration": 0.002119, "end_time": "2026-12-01T00:17:12.809665+00:00", "exception": false, "start_time": "2026-12-01T00:17:12.807546+00:00", "status": "completed"}
# ## The frontier
# Every evaluation point coloured by n, the frontier f(C) = max over runs that spent at most C,
# its record-breaking points (red rings) and the per-n sigmoid fits.

# %% papermill={"duration": 0.670715, "end_time": "2026-12-01T00:17:13.482300+00:00", "exception": false, "start_time": "2026-12-01T00:17:12.811585+00:00", "status": "completed"}
report.figure("frontier")

# %% [markdown] papermill={"duration": 0.003079, "end_time": "2026-12-01T00:17:13.490017+00:00", "exception": false, "start_time": "2026-12-01T00:17:13.486938+00:00", "status": "completed"}
# ## n\*(C) and its saturation
# The envelope's best n at each C (grey), its running average, and the fitted sigmoid of
# log n\* with its bootstrap band; the dashed line is the fitted saturation.

# %% papermill={"duration": 0.51895, "end_time": "2026-12-01T00:17:14.011780+00:00", "exception": false, "start_time": "2026-12-01T00:17:13.492830+00:00", "status": "completed"}
report.figure("n_star")

# %% [markdown] papermill={"duration": 0.004358, "end_time": "2026-12-01T00:17:14.021866+00:00", "exception": false, "start_time": "2026-12-01T00:17:14.017508+00:00", "status": "completed"}
# The per-n fits behind the envelope (Easy split):

# %% papermill={"duration": 0.017999, "end_time": "2026-12-01T00:17:14.043889+00:00", "exception": false, "start_time": "2026-12-01T00:17:14.025890+00:00", "status": "completed"}
report.tables["per_n_easy"]

# %% [markdown] papermill={"duration": 0.005023, "end_time": "2026-12-01T00:17:14.055107+00:00", "exception": false, "start_time": "2026-12-01T00:17:14.050084+00:00", "status": "completed"}
# ## What these runs say
# Computed from the fits above (nothing here is pre-written), and set against the paper:

# %% papermill={"duration": 0.017839, "end_time": "2026-12-01T00:17:14.078502+00:00", "exception": false, "start_time": "2026-12-01T00:17:14.060663+00:00", "status": "completed"}
print(report.summary_text())

# %% [markdown] papermill={"duration": 0.006178, "end_time": "2026-12-01T00:17:14.090955+00:00", "exception": false, "start_time": "2026-12-01T00:17:14.084777+00:00", "status": "completed"}
# Save the figures, tables and findings under `runs/nstar/<scale>/` and log them to MLflow
# (experiment `nstar/<scale>`; browse with `isolab ui`).

# %% papermill={"duration": 2.222579, "end_time": "2026-12-01T00:17:16.318488+00:00", "exception": false, "start_time": "2026-12-01T00:17:14.095909+00:00", "status": "completed"}
study.save(nstar, scale, report)
