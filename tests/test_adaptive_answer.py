"""An adaptive sweep states its answer where a plain one does (issue 48): once it has run every
point, the experiment's MLflow description carries the sentence `isolab frontier` and `isolab
report` print (`isolab.frontier.answer.stated`), read from the arms run to the budget; a
stopped arm (KILLED) is not read, as those commands do not read it."""

from __future__ import annotations

import polars as pl
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from isolab.frontier.answer import ANSWER_LABEL, answers
from isolab.sweep.adaptive_live import FRACTION_TAG, finish_adaptive
from isolab.synthetic import make_isocompute_runs
from isolab.tracking import experiment_id, sweep_parent
from isolab.tracking.describe import NOTE_TAG
from isolab.tracking.parents import finish_parent
from isolab.tracking.runs import load_runs
from isolab.tracking.tags import PARENT_TAG, RUN_KEY_TAG, STOPPED_AT_TAG, mlflow_key
from isolab.vocab import DEFAULT_Y, FINISHED, KILLED, STEP

NAME = "adaptive-answer"
BUDGET = 2**16
PARAMS = ("model", "task", "split", "reward", "n", "B_p", "M", "seed")
METRICS = ("compute/rollouts", "flops/total", "eval/avg@4")


def _log_sweep(uri: str) -> str:
    """Three n at one B_p, two seeds, evaluated at common checkpoints (planted laws), written
    as a sweep's runs: children of its parent, FINISHED; the parent's id."""
    runs = make_isocompute_runs(
        n_grid=(8, 32, 128),
        B_p_grid=(8,),
        budget_rollouts=BUDGET,
        seeds=2,
        checkpoints=(BUDGET / 4, BUDGET / 2, BUDGET),
        experiment=NAME,
    )
    c = MlflowClient(uri)
    exp_id = experiment_id(NAME, uri)  # its artifacts beside the store, not in ./mlruns
    parent = sweep_parent(NAME, NAME, uri)
    for (key,), rows in runs.group_by("run_key", maintain_order=True):
        first = rows.row(0, named=True)
        run = c.create_run(exp_id, tags={PARENT_TAG: parent, RUN_KEY_TAG: str(key)})
        metrics = [
            Metric(mlflow_key(m), float(r[m]), 0, int(r[STEP]))
            for r in rows.iter_rows(named=True)
            for m in METRICS
        ]
        params = [Param(p, str(first[p])) for p in PARAMS]
        c.log_batch(run.info.run_id, metrics=metrics, params=params)
        c.set_terminated(run.info.run_id, status=FINISHED)
    return parent


def test_a_finished_adaptive_sweep_states_the_answer_in_its_description(tracking_uri):
    parent = _log_sweep(tracking_uri)
    c = MlflowClient(tracking_uri)
    exp_id = c.get_experiment_by_name(NAME).experiment_id
    finish_parent(NAME, parent, tracking_uri)  # what a sweep wrote before: no answer
    before = c.get_experiment(exp_id).tags[NOTE_TAG]
    assert f"{ANSWER_LABEL}:" not in before and "isolab report" in before

    # the adaptive runner stopped n = 128 at half the budget: its runs end KILLED, tagged
    children = c.search_runs([exp_id], f"tags.`{PARENT_TAG}` = '{parent}'")
    stopped = [r for r in children if r.data.params["n"] == "128"]
    assert len(children) == 6 and len(stopped) == 2
    for r in stopped:
        c.log_batch(r.info.run_id, tags=[RunTag(STOPPED_AT_TAG, str(BUDGET // 2))])
        c.set_terminated(r.info.run_id, status=KILLED)

    answer = finish_adaptive(NAME, parent, tracking_uri, DEFAULT_Y, 5 / 6)

    finished = load_runs(NAME, tracking_uri=tracking_uri)
    assert sorted(finished["n"].unique().to_list()) == [8, 32]  # the stopped arm is not read
    expected = tuple(answers(finished))  # what `isolab frontier` and `isolab report` state
    assert len(expected) == 1 and expected[0].startswith(f"{ANSWER_LABEL}:")
    assert answer == expected
    description = c.get_experiment(exp_id).tags[NOTE_TAG]
    assert expected[0] in description  # word for word, in place of the pointer
    assert "isolab report" not in description
    run = c.get_run(parent)
    assert run.data.tags[FRACTION_TAG] == f"{5 / 6:.4f}" and run.info.status == FINISHED
    statuses = pl.DataFrame(
        {
            "n": [r.data.params["n"] for r in children],
            "status": [c.get_run(r.info.run_id).info.status for r in children],
        }
    )
    assert statuses.filter(pl.col("n") == "128")["status"].unique().to_list() == [KILLED]
