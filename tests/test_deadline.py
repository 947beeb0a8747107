"""Every call into a user's code has a deadline (issue 52, "nothing hangs"): a reward function or
a task card's verifier that never returns ends the run FAILED with a message naming it, within
the bound, instead of holding `isolab train` RUNNING for good."""

from __future__ import annotations

import shutil
import signal
import threading
import time
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from isolab.deadline import TIMEOUT_ENV, CallTimeout, call_with_deadline, user_call_timeout_s

REPO = Path(__file__).resolve().parents[1]
STUCK = "def stuck(prompts=None, completions=None, **kwargs):\n    while True:\n        pass\n"
#: A reward that answers its first call (the pre-flight before any model loads) and then hangs.
STUCK_LATER = (
    "calls = []\n"
    "def stuck(prompts=None, completions=None, **kwargs):\n"
    "    calls.append(1)\n"
    "    while len(calls) > 1:\n"
    "        pass\n"
    "    return [1.0 - i % 2 for i in range(len(completions))]  # gold 1, wrong answer 0\n"
)


def test_a_call_that_never_returns_is_cut_at_its_deadline(monkeypatch):
    monkeypatch.setenv(TIMEOUT_ENV, "0.5")
    t0 = time.monotonic()
    with pytest.raises(
        CallTimeout, match=f"reward spin did not return within 0.5 s.*{TIMEOUT_ENV}"
    ):
        call_with_deadline("reward spin", lambda: [0 for _ in iter(int, 1)])
    assert time.monotonic() - t0 < 5
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # no timer left behind
    assert call_with_deadline("quick", lambda x: x + 1, 1) == 2


def test_an_enclosing_deadline_survives_an_inner_call(monkeypatch):
    """A verifier's deadline inside a reward's: the reward's timer is put back, less the time
    the verifier took, so that the outer bound still holds."""
    outer_fired = []

    def outer():
        call_with_deadline("inner", time.sleep, 0.05)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        outer_fired.append(left)
        time.sleep(5)  # the enclosing deadline ends this

    monkeypatch.setenv(TIMEOUT_ENV, "1.0")
    with pytest.raises(CallTimeout, match="outer"):
        call_with_deadline("outer", outer)
    assert 0 < outer_fired[0] < 1.0


def test_off_the_main_thread_the_call_is_abandoned_at_its_deadline(monkeypatch):
    monkeypatch.setenv(TIMEOUT_ENV, "0.3")
    caught: list[BaseException] = []

    def in_a_thread():
        try:
            call_with_deadline("verifier v", time.sleep, 30)
        except CallTimeout as exc:
            caught.append(exc)

    worker = threading.Thread(target=in_a_thread)
    t0 = time.monotonic()
    worker.start()
    worker.join(10)
    assert time.monotonic() - t0 < 5 and caught and "verifier v" in str(caught[0])
    box: list[BaseException] = []

    def failing():
        try:
            call_with_deadline("x", lambda: 1 / 0)
        except ZeroDivisionError as exc:  # errors reach the caller's thread as they are
            box.append(exc)

    worker = threading.Thread(target=failing)
    worker.start()
    worker.join(10)
    assert box


@pytest.mark.parametrize("value", ["0", "-1", "abc", "inf", "1e9"])
def test_a_bad_timeout_setting_names_the_variable(monkeypatch, value):
    monkeypatch.setenv(TIMEOUT_ENV, value)
    with pytest.raises(ValueError, match=f"\\${TIMEOUT_ENV}"):
        user_call_timeout_s()


def test_a_card_verifier_that_never_returns_is_refused_when_the_card_is_read(tmp_path, monkeypatch):
    """The card's golds are graded when it is read: a stuck verifier is named there, within
    the bound, before any model loads."""
    from isolab.tasks.card import CardError, load_card

    monkeypatch.setenv(TIMEOUT_ENV, "1")
    card = tmp_path / "wp"
    shutil.copytree(REPO / "examples" / "word-problems", card)
    (card / "stuck.py").write_text("def verify(completion, gold):\n    while True:\n        pass\n")
    data = yaml.safe_load((card / "task.yaml").read_text())
    data["verifier"] = "stuck.py:verify"
    (card / "task.yaml").write_text(yaml.safe_dump(data))
    t0 = time.monotonic()
    with pytest.raises(CardError, match="stuck.py:verify .*did not return within 1 s"):
        load_card(card / "task.yaml", run_code=True)
    assert time.monotonic() - t0 < 30


def test_a_reward_that_never_returns_ends_the_run_failed(
    tracking_uri, isolab_cache, tmp_path, monkeypatch
):
    """Before the deadline this run never ended: `isolab train` hung with the run RUNNING. One
    stuck at its first call is refused before the run exists (the pre-flight on gold answers)."""
    from isolab.config import RunConfig
    from isolab.rl.train import train
    from isolab.rl.user_rewards import RewardFunctionError

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(TIMEOUT_ENV, "2")
    (tmp_path / "stuck_first.py").write_text(STUCK)
    first = RunConfig(experiment="stuck-reward", reward="stuck_first.py:stuck", n=2, B_p=2, M=2)
    with pytest.raises(RewardFunctionError, match="before the run.*stuck_first.py:stuck did not"):
        train(first, tracking_uri=tracking_uri)
    (tmp_path / "stuck.py").write_text(STUCK_LATER)
    cfg = RunConfig(
        experiment="stuck-reward",
        reward="stuck.py:stuck",
        n=2,
        B_p=2,
        M=2,
        eval_problems=4,
        eval_k_samples=4,
    )
    t0 = time.monotonic()
    with pytest.raises(RewardFunctionError, match="reward stuck.py:stuck did not return"):
        train(cfg, tracking_uri=tracking_uri)
    assert time.monotonic() - t0 < 120
    client = MlflowClient(tracking_uri)
    runs = client.search_runs([client.get_experiment_by_name("stuck-reward").experiment_id])
    assert [r.info.status for r in runs] == ["FAILED"]
