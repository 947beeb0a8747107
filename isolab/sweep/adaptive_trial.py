"""One run of a live adaptive sweep as a Ray Tune trial (`live_trainable`), on the worker side.

It trains with `Checkpointing`: at each evaluation but the last it keeps a copy of its checkpoint
with the report it was taken at (`REPORT_FILE`) and reports to Tune, which may pause or stop it
there. A resumed run first reports its checkpoint's evaluation again (`REPLAY_KEY`, `_replay`),
so that the scheduler holds it at a rung not yet judged (`isolab.sweep.adaptive_scheduler`).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from isolab.config import RunConfig
from isolab.rl.trainer import STATE_FILE
from isolab.sweep.adaptive_records import _stopped_key
from isolab.table import RUN_KEY
from isolab.vocab import DEFAULT_X, ROLLOUTS

#: In a trial's last report: its run has ended (FINISHED), so the scheduler never pauses it.
DONE_KEY = "isolab/run_ended"
#: A resumed run's first report: the evaluation its checkpoint holds, reported again before it
#: trains (`live_trainable`), so the rung decides whether it waits, stops or goes on.
REPLAY_KEY = "isolab/replayed"
#: The report a checkpoint was taken at, kept beside it (`live_trainable`).
REPORT_FILE = "isolab_report.json"


def live_trainable(
    configs: dict[str, dict], uri: str, metric: str, checkpoints: Path, threads: int, env: dict
) -> Callable[[dict], None]:
    """The Tune function trainable of one run (``config["run_key"]``): trains it with
    `Checkpointing`, reporting each evaluation to Tune with its checkpoint; suspended by Tune
    (pause, stop: its report raises SystemExit) it ends as Tune asked and leaves the MLflow
    run to the scheduler."""

    def trainable(config: dict) -> None:
        from ray import tune

        from isolab.rl.train import train
        from isolab.rl.trainer import Checkpointing, Suspended
        from isolab.sweep.point import setup_process

        setup_process(threads, env, uri)
        key = config[RUN_KEY]
        cfg = RunConfig.from_dict(configs[key])
        keep = checkpoints / key
        # in this order: a stop writes its tags before it removes the checkpoint, so a trial
        # that finds no checkpoint because its arm just stopped finds the tags
        resume = keep if (keep / STATE_FILE).exists() else None
        if _stopped_key(key, cfg.experiment, uri):  # its arm's stop stands: the trial ends
            shutil.rmtree(keep, ignore_errors=True)  # without training
            return
        if resume is not None and not _replay(keep):  # stopped at its rung meanwhile
            return

        def at_eval(step: int, path: Path, metrics: dict) -> None:
            fresh = keep.with_name(key + ".new")
            shutil.rmtree(fresh, ignore_errors=True)
            shutil.copytree(path, fresh)
            report = {DEFAULT_X: float(metrics[ROLLOUTS]), metric: float(metrics[metric])}
            (fresh / REPORT_FILE).write_text(json.dumps(report))
            shutil.rmtree(keep, ignore_errors=True)
            fresh.rename(keep)  # the copy is whole or absent
            try:
                tune.report(report, checkpoint=tune.Checkpoint.from_directory(keep))
            except SystemExit:  # Tune paused or stopped the trial at this report
                raise Suspended from None

        try:
            result = train(cfg, uri, checkpointing=Checkpointing(at_eval, resume))
        except Suspended:  # the run's MLflow record is the scheduler's now; Tune ends the
            raise SystemExit(0) from None  # thread the way its report asked (no final report)
        shutil.rmtree(keep, ignore_errors=True)
        rollouts = float(result.final_metrics.get(ROLLOUTS, cfg.rollouts))
        last = {DEFAULT_X: rollouts, metric: float(result.final_eval[metric]), DONE_KEY: True}
        tune.report(last)

    return trainable


def _replay(keep: Path) -> bool:
    """Report the evaluation that checkpoint `keep` was taken at once more, before the run
    trains from it (`REPLAY_KEY`): Tune pauses or stops the trial there (its report raises
    SystemExit) or lets it go on (True). The report carries a checkpoint of its own, not `keep`:
    a judgement of the rung may remove `keep` meanwhile (its arm stopped: False)."""
    from ray import tune

    try:
        report = json.loads((keep / REPORT_FILE).read_text())
    except FileNotFoundError:  # taken before reports were kept (train on), or removed
        return (keep / STATE_FILE).exists()
    with tempfile.TemporaryDirectory(prefix="isolab-replay-") as held:
        (Path(held) / REPORT_FILE).write_text(json.dumps(report))
        tune.report({**report, REPLAY_KEY: True}, checkpoint=tune.Checkpoint.from_directory(held))
    return (keep / STATE_FILE).exists()
