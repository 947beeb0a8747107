"""One GRPO run: `RunConfig` → TRL `GRPOTrainer`, with the FLOP ledger, evaluation and MLflow.

TRL does the RL. isolab maps the config onto `GRPOConfig` (`num_generations = n`, a generation
batch of `B = B_p·n` completions per optimizer step, `max_steps = M·num_iterations`), applies the
healthy recipe, and adds one callback that evaluates at the chosen steps and writes every metric
to MLflow. A thin trainer subclass only *observes* what TRL computes (token counts of rollouts
and update batches) to feed the ledger; it changes no part of the algorithm but the opt-in
dynamic sampling (`search_oversample` k: k·B rollouts generated per step, B trained on). Those
hooks are `isolab.rl.trainer`'s and the callback `isolab.rl.callback`'s; `isolab.rl.prepare`
maps the config (`grpo_args`) and prepares the problems and the model (`prepare`); this module
runs and logs the whole (`train`), on one process or K (`launch`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch

from isolab import difficulty, models
from isolab.compute.ledger import FlopLedger
from isolab.compute.shapes import lora_spec
from isolab.config import RunConfig
from isolab.models.reward import reward_model_config_for
from isolab.rl import engines, ranks, vllm_cpu
from isolab.rl.allocation import Beliefs
from isolab.rl.evaluate import Evaluator
from isolab.rl.prepare import (
    base_priors,
    grpo_args,
    max_prompt_tokens,
    peft_config,
    preflight_problems,
    prepare,
)
from isolab.rl.rewards import get_rewards, prm
from isolab.rl.trainer import (
    Checkpointing,
    Suspended,
    check_checkpointable,
    make_trainer_class,
    read_state,
    timed_reward,
)
from isolab.rl.user_rewards import preflight, reward_dataset
from isolab.tasks import TRAIN_SAMPLE, eval_set_problems
from isolab.tracking import BASE_DIGEST_TAG, PARENT_ENV, RunLogger
from isolab.tracking.columns import counts_artifact
from isolab.tracking.describe import point_name
from isolab.vocab import RUN_ID

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    """What a finished run returns (everything is also in MLflow)."""

    run_id: str
    run_key: str
    status: str
    wall_time_s: float
    base_eval: dict[str, float] = field(default_factory=dict)
    final_eval: dict[str, float] = field(default_factory=dict)
    final_metrics: dict[str, float] = field(default_factory=dict)


def train(
    cfg: RunConfig,
    tracking_uri: str | None = None,
    on_step: Callable[[int, dict], None] | None = None,
    checkpointing: Checkpointing | None = None,
) -> RunResult:
    """Run one GRPO training run and log it to MLflow; returns its final metrics.

    The MLflow run is FINISHED on success, FAILED on an exception and KILLED on Ctrl-C —
    never left RUNNING by a Python-level failure. With `checkpointing` the run hands a
    checkpoint over after each evaluation but the last and carries on from one
    (`checkpointing.resume_from`); a `Suspended` raised by its hook leaves the MLflow run open
    (the caller resumes or ends it) and propagates.
    """
    if cfg.processes > 1 and ranks.world_size() == 1:  # this process launches the K processes
        return launch(cfg, tracking_uri)
    if ranks.world_size() != cfg.processes:
        raise ValueError(
            f"processes = {cfg.processes}, but this process is one of {ranks.world_size()} "
            f"(WORLD_SIZE): set processes: {ranks.world_size()}, or let isolab launch the run."
        )
    main = ranks.is_main()  # the first process logs and evaluates; each trains on its slice
    resume_from = checkpointing.resume_from if checkpointing else None
    if checkpointing is not None:
        check_checkpointable(cfg)
    resumed = read_state(resume_from) if resume_from is not None else None
    t0 = time.perf_counter()
    engine = engines.engine(cfg)
    torch.manual_seed(cfg.seed)
    # the rewards load before the policy, and each of the user's is called once on gold answers
    # (`preflight`): a column it reads and does not get fails in seconds, not minutes into the run
    task = difficulty.task_for(cfg.model, cfg.task, run_code=cfg.trust_remote_code)
    reward_fns = get_rewards(cfg.reward, task, cfg.extra.get("reward_model"), cfg.trust_remote_code)
    preflight(cfg.reward, reward_fns, task, preflight_problems(cfg, task))
    model, tok, task, train_problems, val_problems = prepare(cfg)
    eval_sets = {  # before the run exists: a set that cannot load leaves no run
        name: (task, train_problems[: cfg.eval_problems])
        if spec == TRAIN_SAMPLE
        else eval_set_problems(
            spec, task.style, cfg.eval_problems, cfg.data_dir, run_code=cfg.trust_remote_code
        )
        for name, spec in cfg.eval_sets.items()
    }
    max_new = cfg.max_completion_tokens
    ledger = FlopLedger(
        model.config,
        lora=lora_spec(cfg),
        reward_model_config=reward_model_config_for(cfg),
        gradient_checkpointing=cfg.gradient_checkpointing,
        lora_merged_for_generation=engine == "vllm",  # TRL merges adapters for vLLM
    )
    # the reward model loaded before the run exists: a model that cannot load (or whose own code
    # is not trusted) leaves no FAILED run behind
    rewards = [timed_reward(fn, ledger) for fn in reward_fns]
    judge = (  # the evaluation judge, loaded as the rewards are: before the run exists
        prm(task, cfg.eval_judge, trust_remote_code=cfg.trust_remote_code)
        if cfg.eval_judge
        else None
    )
    vllm_on_cpu = engine == "vllm" and not torch.cuda.is_available()
    if vllm_on_cpu:  # refused before the run exists; kernels that keep the weights (vllm_cpu)
        vllm_cpu.check_head_size(model.config, cfg.model)
        vllm_cpu.keep_weights()
    out_dir = tempfile.TemporaryDirectory(prefix="isolab-trl-")  # the trainer's files
    # TRL checks its settings (`extra.grpo`) as they are built: one it refuses leaves no run
    args = grpo_args(
        cfg,
        out_dir.name,
        max_new,
        max_prompt_tokens(task, train_problems, tok),
        getattr(model.config, "max_position_embeddings", None),
    )
    # a sweep's point (a child of its parent run) is named with its seed: a point's runs differ
    # only by it, and the UI shows names only (an import names them the same way)
    name = point_name(cfg.run_name, cfg.seed) if os.environ.get(PARENT_ENV) else cfg.run_name
    if not main:
        logger = cast(RunLogger, _Silent())
    elif resumed is not None:  # the same MLflow run, from the step it was suspended at
        logger = RunLogger.attach(resumed[RUN_ID], name, cfg.resolved(), tracking_uri)
    else:
        logger = RunLogger(cfg.experiment, name, cfg.run_key, tracking_uri)
    status: str | None = "FAILED"
    results: dict[str, Any] = {}  # the callback's, once it exists
    try:
        if resumed is not None:  # params, tags and splits were logged as the run began
            ledger.load_state_dict(resumed["ledger"])
        else:
            _log_run_start(cfg, logger, engine, train_problems, val_problems)
        dataset = reward_dataset(task, train_problems)  # every column reaches the rewards
        evaluator = Evaluator(cfg, task, val_problems, tok, ledger, judge)
        for name, (set_task, set_problems) in eval_sets.items():
            evaluator.add_set(name, set_task, set_problems)
        if resumed is not None:
            evaluator.load_state_dict(resumed["evaluator"])
        if checkpointing is not None:
            args.save_total_limit = 1  # the hook takes each checkpoint away (a copy) as it comes
        from isolab.rl.callback import IsolabCallback  # imports transformers: not at start-up

        callback = IsolabCallback(
            cfg,
            evaluator,
            logger,
            ledger,
            max_new,
            on_step=on_step if main else None,
            checkpointing=checkpointing,
            resumed=resumed,
        )
        results = callback.results
        starting = vllm_cpu.flask_proxies_bound() if vllm_on_cpu else contextlib.nullcontext()
        with warnings.catch_warnings(), starting:
            warnings.simplefilter("ignore", UserWarning)
            trainer = make_trainer_class(engine == "vllm")(
                model=model,
                reward_funcs=rewards,
                args=args,
                train_dataset=dataset,
                processing_class=tok,
                callbacks=[callback],
                peft_config=peft_config(cfg),
            )
            from transformers import PrinterCallback

            trainer.remove_callback(PrinterCallback)  # metrics go to MLflow, not stdout
            trainer.ledger = ledger
            # what accelerate made of the launch: its processes, and how they talk
            logger.set_tags(
                {
                    "isolab.processes": str(trainer.accelerator.num_processes),
                    "isolab.distributed": str(trainer.accelerator.distributed_type.value),
                }
            )
            trainer.search_oversample = cfg.search_oversample  # read when train() starts
            trainer.allocation = cfg.allocator
            if cfg.allocator in ("early_stop", "variance"):
                trainer.beliefs = Beliefs(base_priors(cfg, task, train_problems))
            callback.trainer = trainer
            if vllm_on_cpu:  # vLLM serves the weights of each sync, whatever its kernels
                gemm = vllm_cpu.follow_syncs(trainer.vllm_generation)
                logger.set_tags({"isolab.vllm_gemm": vllm_cpu.describe(gemm)})
            trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
        for eval_set, part in [(None, evaluator), *evaluator.sets.items()]:
            logger.log_dict(
                {
                    "problem_ids": part.ids,
                    "n_samples": cfg.eval_k_samples,
                    "correct_counts_by_step": part.history,
                },
                counts_artifact(eval_set),
            )
        status = "FINISHED"
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    except Suspended:
        status = None  # the caller resumes the run, or ends it
        raise
    finally:
        if status is None:
            logger.flush()
        else:
            logger.end(status)
        out_dir.cleanup()
    return RunResult(
        run_id=logger.run_id,
        run_key=cfg.run_key,
        status=status,
        wall_time_s=time.perf_counter() - t0,
        base_eval=results.get("base_eval", {}),
        final_eval=results.get("last_eval", {}),
        final_metrics=results.get("last_metrics", {}),
    )


def _log_run_start(cfg: RunConfig, logger: RunLogger, engine: str, train_problems, val_problems):
    """A new run's params, tags and problem splits."""
    logger.log_params(cfg.resolved())
    logger.set_tags(
        {
            "isolab.split_sizes": f"train={len(train_problems)},val={len(val_problems)}",
            BASE_DIGEST_TAG: models.digest(cfg.model) or "unrecorded",
            "isolab.engine": engine,
            **vllm_cpu.cpu_tags(),  # floats and vLLM's kernels depend on the CPU
        }
    )
    source = f"{cfg.task} pool of {cfg.pool_size}, {cfg.split} split of {cfg.model}"
    for context, problems in (("train", train_problems), ("eval", val_problems)):
        logger.log_split(
            f"{cfg.task}-{cfg.split}-{context}", context, [p.id for p in problems], source
        )


class _Silent:
    """The logger of a run's other processes (`RunConfig.processes`): the first one logs."""

    run_id = ""

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: None


# ---- one run on K processes (`RunConfig.processes`) ------------------------------------------
#: Environment of a launched process: where the first process writes its result.
RESULT_ENV = "ISOLAB_RESULT_PATH"


def launch(cfg: RunConfig, tracking_uri: str | None) -> RunResult:
    """Run `cfg` on `cfg.processes` processes (torchrun, each `python -m isolab.rl.train`) and
    return the first one's result. Bad input found by the processes (before the run exists) is
    raised here as the ValueError it was; any other failure is a RuntimeError with their last
    output, and the run is then FAILED in MLflow (KILLED on Ctrl-C), never left RUNNING."""
    with tempfile.TemporaryDirectory(prefix="isolab-ranks-") as tmp:
        config_path, result_path = Path(tmp) / "config.json", Path(tmp) / "result.json"
        config_path.write_text(json.dumps(dataclasses.asdict(cfg)))
        # this process's threads (a sweep worker's share, else every core), split among them
        threads = max(1, torch.get_num_threads() // cfg.processes)
        env = {
            **os.environ,
            RESULT_ENV: str(result_path),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(threads)),
        }
        argv = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={cfg.processes}",
            "-m",
            "isolab.rl.train",
            str(config_path),
            tracking_uri or "",
        ]
        proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        try:
            output, _ = proc.communicate()
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
            proc.wait()
            _close_orphan(cfg, tracking_uri, "KILLED")
            raise
        result = json.loads(result_path.read_text()) if result_path.exists() else {}
        if "refused" in result:
            raise ValueError(result["refused"])
        if proc.returncode != 0 or not result:
            _close_orphan(cfg, tracking_uri, "FAILED")
            tail = "\n".join(output.splitlines()[-40:])
            raise RuntimeError(
                f"the run's {cfg.processes} processes failed (exit {proc.returncode}); their "
                f"last output:\n{tail}"
            )
        return RunResult(**result)


def _close_orphan(cfg: RunConfig, tracking_uri: str | None, status: str) -> None:
    """End the run as `status` where its first process died before it could (a signal, or a
    crash of another process after which torchrun stopped them all)."""
    from isolab.tracking.store import client, find_runs

    for run in find_runs(cfg.experiment, tracking_uri, run_key=cfg.run_key):
        if run.info.status == "RUNNING":
            client(tracking_uri).set_terminated(run.info.run_id, status=status)


def _launched() -> None:
    """One of a run's processes: train the config on this process's slice of every batch."""
    from isolab.rl.train import train as train_here  # the module, not this __main__ copy

    config_path, uri = sys.argv[1], sys.argv[2] or None

    def stop(signum, frame):  # torchrun stops the others with SIGTERM when one fails
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    result_path = Path(os.environ[RESULT_ENV])
    cfg = RunConfig.from_dict(json.loads(Path(config_path).read_text()))
    try:
        result = train_here(cfg, tracking_uri=uri)
    except ValueError as exc:  # bad input, found before the run exists
        if ranks.is_main():
            result_path.write_text(json.dumps({"refused": str(exc)}))
        raise SystemExit(2) from exc
    if ranks.is_main():
        result_path.write_text(json.dumps(dataclasses.asdict(result)))


# HF tokenizers warns on every fork of a process whose tokenizer threads already ran (and turns
# them off then, against deadlocks): off from the start, so that no fork warns.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

if __name__ == "__main__":
    _launched()
