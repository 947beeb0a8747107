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

# %% [markdown] papermill={"duration": 0.003745, "end_time": "2026-12-01T00:17:32.137001+00:00", "exception": false, "start_time": "2026-12-01T00:17:32.133256+00:00", "status": "completed"}
# # 04 · best@k and worst@k: how the metric moves n\*
#
# **Question.** More rollouts per problem can buy *coverage* (some sample right: best@4) or
# *sharpening* (every sample right: worst@4). Which does n buy, and does the answer differ
# between easy and hard problems?
#
# **Paper.** IsoCompute Playbook (arXiv 2603.12151, §5): on Easy sets a larger n mainly lifts
# worst@k; on Hard sets it mainly lifts best@k — so the metric you validate on moves n\*.
#
# **Data.** The runs of study `nstar` (notebook 02), re-analysed under three metrics; nothing
# new is trained when its snapshot exists.

# %% papermill={"duration": 0.014238, "end_time": "2026-12-01T00:17:32.154244+00:00", "exception": false, "start_time": "2026-12-01T00:17:32.140006+00:00", "status": "completed"} tags=["parameters"]
scale = "cpu"  # smoke | cpu | gpu
workers = 2  # runs at once, when the nstar sweep has to run
rerun = False  # True: run the sweep even when runs/nstar/<scale>/ holds a snapshot

# %% papermill={"duration": 6.404768, "end_time": "2026-12-01T00:17:38.563764+00:00", "exception": false, "start_time": "2026-12-01T00:17:32.158996+00:00", "status": "completed"}
# %matplotlib inline
from isolab import study

effect = study.get("bestk-worstk")
study.describe(effect, scale)

# %% papermill={"duration": 2.014865, "end_time": "2026-12-01T00:17:40.581478+00:00", "exception": false, "start_time": "2026-12-01T00:17:38.566613+00:00", "status": "completed"}
data = study.collect(effect, scale, workers=workers, rerun=rerun)
report = study.analyse(effect, data, scale)

# %% [markdown] papermill={"duration": 0.002545, "end_time": "2026-12-01T00:17:40.586897+00:00", "exception": false, "start_time": "2026-12-01T00:17:40.584352+00:00", "status": "completed"}
# ## n\*(C) under each metric
# The fitted n\*(C) per metric; where a metric's curve sits higher, a larger n pays under it.

# %% papermill={"duration": 0.681429, "end_time": "2026-12-01T00:17:41.270606+00:00", "exception": false, "start_time": "2026-12-01T00:17:40.589177+00:00", "status": "completed"}
report.figure("metric_effect")

# %% [markdown] papermill={"duration": 0.003506, "end_time": "2026-12-01T00:17:41.279881+00:00", "exception": false, "start_time": "2026-12-01T00:17:41.276375+00:00", "status": "completed"}
# ## Each metric against n at the full budget
# For each n its best B_p (by avg@4); the slope against log2 n is what n buys per doubling.

# %% papermill={"duration": 0.481989, "end_time": "2026-12-01T00:17:41.766093+00:00", "exception": false, "start_time": "2026-12-01T00:17:41.284104+00:00", "status": "completed"}
report.figure("by_n")

# %% papermill={"duration": 0.022251, "end_time": "2026-12-01T00:17:41.792886+00:00", "exception": false, "start_time": "2026-12-01T00:17:41.770635+00:00", "status": "completed"}
report.tables["saturation_easy"]

# %% [markdown] papermill={"duration": 0.004621, "end_time": "2026-12-01T00:17:41.802567+00:00", "exception": false, "start_time": "2026-12-01T00:17:41.797946+00:00", "status": "completed"}
# ## What these runs say

# %% papermill={"duration": 0.013438, "end_time": "2026-12-01T00:17:41.821478+00:00", "exception": false, "start_time": "2026-12-01T00:17:41.808040+00:00", "status": "completed"}
print(report.summary_text())

# %% papermill={"duration": 2.495288, "end_time": "2026-12-01T00:17:44.320910+00:00", "exception": false, "start_time": "2026-12-01T00:17:41.825622+00:00", "status": "completed"}
study.save(effect, scale, report)
