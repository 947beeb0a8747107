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

# %% [markdown] papermill={"duration": 0.002154, "end_time": "2026-12-01T00:17:20.378605+00:00", "exception": false, "start_time": "2026-12-01T00:17:20.376451+00:00", "status": "completed"}
# # 03 · More rollouts or more problems, at a fixed batch
#
# **Question.** With the batch fixed at B = B_p·n completions per step, every split costs the
# same per step, so reward at equal M is an iso-compute comparison. Should the batch hold many
# problems with few rollouts each, or few problems with many rollouts?
#
# **Paper.** IsoCompute Playbook (arXiv 2603.12151, §4.2): on Easy sets, few steps favour a
# large B_p and many steps a large n (n\*(M) is a sigmoid); on Hard sets the best n is
# non-monotone in M.
#
# **Scales.** `smoke`: CI, B = 16. `cpu`: tiny-m, B = 64 split six ways on Easy and Hard,
# 128 steps each (about 5 minutes with 2 workers, or seconds from `runs/n-vs-bp/cpu/`).

# %% papermill={"duration": 0.012486, "end_time": "2026-12-01T00:17:20.393188+00:00", "exception": false, "start_time": "2026-12-01T00:17:20.380702+00:00", "status": "completed"} tags=["parameters"]
scale = "cpu"  # smoke | cpu | gpu
workers = 2  # runs at once, when a sweep has to run
rerun = False  # True: run the sweep even when runs/n-vs-bp/<scale>/ holds a snapshot

# %% papermill={"duration": 5.311461, "end_time": "2026-12-01T00:17:25.706663+00:00", "exception": false, "start_time": "2026-12-01T00:17:20.395202+00:00", "status": "completed"}
# %matplotlib inline
from isolab import study

tradeoff = study.get("n-vs-bp")
study.describe(tradeoff, scale)

# %% papermill={"duration": 0.176901, "end_time": "2026-12-01T00:17:25.886244+00:00", "exception": false, "start_time": "2026-12-01T00:17:25.709343+00:00", "status": "completed"}
data = study.collect(tradeoff, scale, workers=workers, rerun=rerun)
report = study.analyse(tradeoff, data, scale)

# %% [markdown] papermill={"duration": 0.00175, "end_time": "2026-12-01T00:17:25.889810+00:00", "exception": false, "start_time": "2026-12-01T00:17:25.888060+00:00", "status": "completed"}
# ## Reward against M for every split of the batch
# The shaded bands mark the few-steps and many-steps thirds of the common step range; the
# winner of each is reported below.

# %% papermill={"duration": 0.43025, "end_time": "2026-12-01T00:17:26.321796+00:00", "exception": false, "start_time": "2026-12-01T00:17:25.891546+00:00", "status": "completed"}
report.figure("tradeoff")

# %% papermill={"duration": 0.01059, "end_time": "2026-12-01T00:17:26.335675+00:00", "exception": false, "start_time": "2026-12-01T00:17:26.325085+00:00", "status": "completed"}
report.tables["winners_easy"]

# %% [markdown] papermill={"duration": 0.002959, "end_time": "2026-12-01T00:17:26.341679+00:00", "exception": false, "start_time": "2026-12-01T00:17:26.338720+00:00", "status": "completed"}
# ## What these runs say

# %% papermill={"duration": 0.009707, "end_time": "2026-12-01T00:17:26.354477+00:00", "exception": false, "start_time": "2026-12-01T00:17:26.344770+00:00", "status": "completed"}
print(report.summary_text())

# %% papermill={"duration": 1.546834, "end_time": "2026-12-01T00:17:27.904415+00:00", "exception": false, "start_time": "2026-12-01T00:17:26.357581+00:00", "status": "completed"}
study.save(tradeoff, scale, report)
