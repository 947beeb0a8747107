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
# **Method.** The frontier and n\*(C) are drawn by `isolab.frontier.optimal_n`: a ScaleRL
# sigmoid of reward against C per n (its start fixed to the measured base), the upper envelope
# of those curves and the best n along it. The claim is tested as the Playbook states it, on
# the location of the optimum (`isolab.verdicts.vertex`): at each checkpoint, the vertex of a
# quadratic in log2 n (counted only where its curvature is significantly negative and it lies
# inside the grid), regressed on log2 C — doublings of n\* per doubling of compute. The
# Playbook's n\* grows as small n saturate, so the test runs only once a saturation gate
# passes (`isolab.verdicts.saturation`): n = 4's `long` runs must have plateaued (gain over the
# last two doublings below 0.01 avg@4 per doubling at its upper bound). Where nothing has
# plateaued, the claim is untested at this scale, not disagreed.
#
# **Sweeps.** `main`, an n × B_p grid at equal rollouts evaluated at common checkpoints, per
# split; `long`, n = 4 run further than `main` over more seeds (the saturation gate). Their
# specs, per scale, are under `studies/nstar/<scale>/` (`smoke`: CI; `cpu`: issue 27's testbed,
# tiny models in the Playbook's regime; `gpu`: SmolLM2-135M-Instruct on GSM8K): the table below
# gives their planned points and budgets, and the runs actually analysed — committed
# snapshots, the sweeps run now, or your own sweep (`runs`) — are described from their own
# tables once read, with what each claim's test lacks in them.

# %% tags=["parameters"]
scale = "cpu"  # smoke | cpu | gpu
workers = 2  # runs at once, when a sweep has to run
rerun = False  # True: run the sweep even when runs/nstar/<scale>/ holds a snapshot
runs = None  # your own sweep over n (and B_p) instead: an MLflow experiment or a snapshot folder

# %%
# %matplotlib inline
from isolab import study

nstar = study.get("nstar")
study.describe(nstar, scale) if runs is None else None  # the curated sweeps' plan

# %% [markdown]
# The runs: read from the snapshots when they exist, otherwise the sweeps run now (resumable:
# points already finished in the MLflow store are skipped), or your own sweep read as `main`.
# One row per run × evaluation; the analysis reads the sweeps as one table, every run at every
# compute it reached (runs trained on a cut pool, `train_limit`, apart: see the saturation
# section). What they hold, and what each claim's test lacks in them, written from the runs:

# %%
data = study.collect(nstar, scale, workers=workers, rerun=rerun, runs=runs)
data["main"].select("split", "n", "B_p", "M", "step", "compute/rollouts", "eval/avg@4")

# %%
from IPython.display import Markdown

from isolab.study.describe import describe_runs

Markdown(describe_runs(nstar, data))

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
# The per-n fits behind the envelope (the Easy split where the runs have one, else theirs):

# %%
report.tables.get("per_n_easy", report.tables.get("per_n_all"))

# %% [markdown]
# ## The saturation gate
# n = 4's `long` runs, where the runs hold them, with, per split, the gain per doubling of C
# over the last two doublings and its upper bound: where that bound is below 0.01 avg@4 the
# curve has plateaued and the n\* test runs from a quarter of that compute on. (Runs trained on
# a cut pool, `train_limit`, memorise it: such runs never enter the frontier or the tests.)

# %%
from IPython.display import display

if "saturation" in report.figures:  # drawn only where runs trained on a cut pool
    display(report.figure("saturation"), report.tables["plateaus"])

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

# %% [markdown]
# ## The answer: what to use at the largest compute
# The allocation `isolab.frontier.recommend` gives at the largest compute of the sweep, with
# the n that the runs' noise cannot tell apart from the best: the sentence that
# `isolab frontier`, `isolab report` and the sweep's MLflow description state, word for word
# (`isolab.frontier.answers`).

# %%
from isolab.frontier import answers

print("\n".join(answers(data["main"])))

# %% [markdown]
# ## The adaptive path: the same n\* for less compute?
# The grid trains every arm (an n × B_p with its seeds) to the end. An adaptive sweep
# (`isolab.sweep.adaptive`, successive halving on the common checkpoints) stops, from checkpoint
# `grace` on, every arm whose seed-mean avg@4 is more than z standard errors below the best's;
# one run's noise is the spread between seeds, never below the binomial evaluation noise (with
# one seed, as at smoke scale, that evaluation noise alone). Nothing is trained here: the rule
# is replayed on `main`'s saved curves, per split, against the grid's own best n per checkpoint.

# %%
from isolab.plots.adaptive import plot_adaptive
from isolab.sweep.adaptive import StoppingRule, replay

rule = StoppingRule()  # the default: z = 3, no stop before half the budget
splits = data["main"].partition_by("split", as_dict=True)
replays = {split: replay(d, rule) for (split,), d in sorted(splits.items())}
display(*(plot_adaptive(r, split) for split, r in replays.items()))

# %%
import polars as pl

rows = [(s, f"{r.fraction:.0%}", r.arms.height - len(r.kept), r.best_dropped, r.n_star_found,
         ", ".join(r.kept)) for s, r in replays.items()]  # fmt: skip
columns = ["split", "compute (of the grid's)", "arms stopped", "grid's best dropped",
           "n* within a grid step", "arms kept"]  # fmt: skip
pl.DataFrame(rows, schema=columns, orient="row")

# %%
stops = [f"on {s} it stops {r.arms.height - len(r.kept)} of {r.arms.height} arms and spends "
         f"{r.fraction:.0%} of the grid's compute" for s, r in replays.items()]  # fmt: skip
dropped = " and ".join(s for s, r in replays.items() if r.best_dropped)
missed = " and ".join(s for s, r in replays.items() if not r.n_star_found)
best = (f"drops the grid's final best arm on {dropped}" if dropped
        else "keeps the grid's final best arm on every split")  # fmt: skip
n_star = (f"its n* strays more than a grid step from the grid's on {missed}" if missed
          else "its n* stays within a grid step of the grid's")  # fmt: skip
print(f"Replayed with {rule.text}, " + "; ".join(stops) + f"; it {best}, and {n_star} "
      "wherever the grid resolves n*.")  # fmt: skip

# %% [markdown]
# ## The crossover scout (pre-registered, issue 45)
# Where the `long` runs have not plateaued, "n* grows" is untested on `main`. On the curated
# cpu testbed only (nothing runs here on your own sweep), a scout looks further: its design —
# n = 4 against larger n on Easy, one learning rate for every n, far past `main`'s compute — is
# fixed in `studies/nstar/cpu/scout.yaml`, committed before its runs. Its call is the crossing
# test's, with the larger n ahead at some C beyond `main`'s, read by `scripts/scout_call.py`
# (written before any larger-n run was read) only once all its runs have landed; D_b is the
# seed-paired advantage of n_b over n = 4, Σlr the summed learning rate.

# %%
import subprocess
import sys

if runs is None and scale == "cpu":
    scout = subprocess.run(
        [sys.executable, "../scripts/scout_call.py", "../runs/chunks/nstar-cpu-scout"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    print(scout.stdout or scout.stderr)

# %% [markdown]
# Save the figures, tables and findings under `runs/nstar/<scale>/` and log them to MLflow
# (experiment `nstar/<scale>`; browse with `isolab ui`). With `runs` (your own sweep, e.g.
# `papermill 02_nstar_vs_compute.ipynb out.ipynb -p runs my-sweep`) nothing is saved.

# %%
if runs is None:  # your own sweep's report stays in this notebook
    saved = study.save(nstar, scale, report)  # an absolute path: not displayed
