"""The runs table's vocabulary: every column, tag and status name that more than one module
reads or writes, defined once. Bottom layer: imports nothing of isolab.

A runs table (`isolab.tracking.runs.load_runs`) has one row per (run, evaluation step):

- the run's configuration (`RunConfig`'s fields, as `isolab.table.config_columns()` lists them),
- bookkeeping (`RUN_KEY`, `RUN_ID`, `STEP`, status and times),
- cumulative compute (`ROLLOUTS`, `FLOPS_TOTAL` and the ledger's split, `RHO`),
- evaluations (`EVAL_AVG` …, written `eval/<stat>@<k>`: see `eval_metric`).
"""

from __future__ import annotations

from typing import Literal

# ---- evaluation metrics -------------------------------------------------------------------------
EVAL_PREFIX = "eval/"


def eval_metric(stat: str, k: int) -> str:
    """`eval/<stat>@<k>`, e.g. ``eval_metric("avg", 4) == "eval/avg@4"``: the name an
    evaluation logs for avg, best or worst over k samples (`isolab.metrics`)."""
    return f"{EVAL_PREFIX}{stat}@{k}"


EVAL_AVG = eval_metric("avg", 4)  # mean accuracy over 4 samples: the papers' main y-axis
EVAL_BEST = eval_metric("best", 4)  # best@4 (pass@4): a problem counts if any sample is right
EVAL_WORST = eval_metric("worst", 4)  # worst@4: a problem counts only if every sample is right
#: the evaluation judge's mean process score over every sample (`RunConfig.eval_judge`)
EVAL_JUDGE = f"{EVAL_PREFIX}judge"
#: The metrics the analyses read by default, in the order they report them.
DEFAULT_METRICS = (EVAL_AVG, EVAL_BEST, EVAL_WORST)

#: The per-problem correct counts an evaluation saves, a run artifact: `eval/<this>`, and
#: `eval-<set>/<this>` for an evaluation set (`isolab.tracking.columns.counts_artifact`).
COUNTS_FILE = "per_problem_counts.json"

# ---- compute ------------------------------------------------------------------------------------
COMPUTE_PREFIX = "compute/"
#: C = B_p · n · M rollouts so far: the IsoCompute Playbook's compute axis.
ROLLOUTS = f"{COMPUTE_PREFIX}rollouts"
TOKENS = f"{COMPUTE_PREFIX}tokens"
#: ρ = learning / (search + learning + reward) FLOPs, cumulative; RHO_STEP is the last step's.
RHO = f"{COMPUTE_PREFIX}rho"
RHO_STEP = f"{COMPUTE_PREFIX}rho_step"
#: Rollouts generated but not trained on (`RunConfig.allocation`: dynamic, early_stop),
#: cumulative, and their search FLOPs' share of all FLOPs so far (`flops/search_discarded` /
#: `flops/total`); 0 under uniform and variance allocation.
ROLLOUTS_DISCARDED = f"{COMPUTE_PREFIX}rollouts_discarded"
DISCARDED_SHARE = f"{COMPUTE_PREFIX}discarded_share"
#: Cumulative model FLOPs by component (isolab.compute.ledger); FLOPS_HW_* count recompute too.
FLOPS_PREFIX = "flops/"
FLOPS_TOTAL = f"{FLOPS_PREFIX}total"
FLOPS_SEARCH = f"{FLOPS_PREFIX}search"
#: The part of `flops/search` spent on rollouts no update used (discarded groups and pilots).
FLOPS_SEARCH_DISCARDED = f"{FLOPS_PREFIX}search_discarded"
FLOPS_LEARNING = f"{FLOPS_PREFIX}learning"
FLOPS_REWARD = f"{FLOPS_PREFIX}reward"
FLOPS_EVAL = f"{FLOPS_PREFIX}eval"
FLOPS_JUDGE = f"{FLOPS_PREFIX}judge"  # the evaluation judge's forward (`RunConfig.eval_judge`)
FLOPS_HW_PREFIX = "flops_hw/"
FLOPS_HW_TOTAL = f"{FLOPS_HW_PREFIX}total"
FLOPS_HW_LEARNING = f"{FLOPS_HW_PREFIX}learning"
#: The last optimizer step's model FLOPs by component (not cumulative; not in a runs table).
FLOPS_STEP_PREFIX = "flops_step/"
FLOPS_STEP_SEARCH = f"{FLOPS_STEP_PREFIX}search"
FLOPS_STEP_LEARNING = f"{FLOPS_STEP_PREFIX}learning"
FLOPS_STEP_REWARD = f"{FLOPS_STEP_PREFIX}reward"
FLOPS_STEP_TOTAL = f"{FLOPS_STEP_PREFIX}total"
#: The ledger's components, in the order `flops/*` and `flops_step/*` name them.
FLOPS_PARTS = ("search", "learning", "reward", "total")
#: Model FLOPs utilisation: model FLOPs per second over the devices' peak (isolab.compute.peak),
#: for the last step, its search and learning parts, and the run's training time so far.
MFU_PREFIX = "mfu/"
MFU_STEP = f"{MFU_PREFIX}step"
MFU_SEARCH = f"{MFU_PREFIX}search"
MFU_LEARNING = f"{MFU_PREFIX}learning"
MFU_RUN = f"{MFU_PREFIX}run"
#: Wall-clock seconds: the reward functions' time, cumulative (the ledger), and the last step's
#: generation and scoring (`isolab.rl.trainer`).
TIME_PREFIX = "time/"
TIME_REWARD_S = f"{TIME_PREFIX}reward_s"
TIME_SEARCH_S = f"{TIME_PREFIX}search_s"
#: Completion tokens generated per second of sampling, over the run so far.
THROUGHPUT_TOKENS_PER_S = "throughput/completion_tokens_per_s"
DEFAULT_X = ROLLOUTS
DEFAULT_Y = EVAL_AVG

# ---- optimizer progress -------------------------------------------------------------------------
#: Σlr = Σ_steps lr: the learning rate summed over the optimizer steps done (the schedule is
#: constant, so lr · step). Under the √B rule Σlr ∝ C/√B: at equal compute a larger n takes
#: fewer updates, and Σlr separates "fewer updates" from "other updates" (issue 45).
OPTIM_PREFIX = "optim/"
LR_SUM = f"{OPTIM_PREFIX}lr_sum"
#: Cumulative model FLOPs (flops/), hardware FLOPs with recompute (flops_hw/), compute/, eval/,
#: optim/: the metric families a runs table keeps (per-step flops_step/ and TRL's own are left out).
#: Metrics of the extra evaluation sets (`RunConfig.eval_sets`): `eval-<name>/avg@4` …
EVAL_SET_PREFIX = "eval-"
#: avg@4 on the evaluation set named `shifted`: study 08's second target (`isolab.study.targets`).
EVAL_SHIFTED_AVG = f"{EVAL_SET_PREFIX}shifted/avg@4"
METRIC_PREFIXES = (
    COMPUTE_PREFIX,
    FLOPS_PREFIX,
    FLOPS_HW_PREFIX,
    EVAL_PREFIX,
    EVAL_SET_PREFIX,
    OPTIM_PREFIX,
)

# ---- reward systems -----------------------------------------------------------------------------
#: Rule-based rewards: a verifier's check, no model in the loop, no reward FLOPs.
RULE_BASED = ("sparse", "structured", "dense")
#: Rewards that run (or charge) a reward model's forward passes (isolab.rl.rewards).
MODEL_BASED = ("orm", "prm", "proxy-prm")
REWARDS = (*RULE_BASED, *MODEL_BASED)

# ---- bookkeeping columns ------------------------------------------------------------------------
#: A run's identity across stores and re-runs: a digest of its resolved configuration.
RUN_KEY = "run_key"
RUN_ID = "run_id"  # MLflow's id of one execution of a run key
STEP = "step"  # optimizer steps done at an evaluation (0: before training)

# ---- statuses -----------------------------------------------------------------------------------
#: MLflow's run statuses as isolab uses them: RUNNING while a process works on the run.
RunStatus = Literal["RUNNING", "FINISHED", "FAILED", "KILLED"]
RUNNING: RunStatus = "RUNNING"
FINISHED: RunStatus = "FINISHED"
FAILED: RunStatus = "FAILED"
KILLED: RunStatus = "KILLED"
#: What a sweep reports for one point: a run status, or SKIPPED when this runner left the
#: point alone (another runner holds its lease or finished it meanwhile).
PointStatus = Literal["RUNNING", "FINISHED", "FAILED", "KILLED", "SKIPPED"]
SKIPPED: PointStatus = "SKIPPED"
