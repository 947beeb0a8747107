"""How a command ends (issue 52): a failed run exits 1, a refusal 2, Ctrl-C 130, SIGTERM 143;
nothing a signal stopped is left RUNNING; an interrupted adaptive sweep says how to resume with
every option it was given."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import tiny_chat_model

from isolab.tracking import find_runs

REPO = Path(__file__).resolve().parents[1]
TINY = (
    "experiment: life\nmodel: tiny-m\nsplit: easy\nn: 2\nB_p: 2\nM: {M}\n"
    "eval_problems: 4\neval_k_samples: 1\neval_ks: [1]\n"
)


def _statuses(uri: str, experiment: str = "life") -> list[str]:
    return [r.info.status for r in find_runs(experiment, uri)]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("return [float('nan')] * len(completions)", "finite number"),
        ("import sys; sys.exit(0)", "raised SystemExit"),
    ],
    ids=["nan", "sys.exit"],
)
def test_a_run_that_fails_exits_1(cli, isolab_cache, tracking_uri, tmp_path, body, says):
    """A run whose reward returns NaN, or calls sys.exit(0), FAILED: exit 1 (2 is a refusal
    before any run exists, as of such a reward at its first call, the pre-flight on gold
    answers), and the message names the function."""
    (tmp_path / "bad_reward.py").write_text(
        "calls = []\n"
        "def bad(prompts, completions, answer=None, **kwargs):\n"
        "    calls.append(1)\n"
        "    if len(calls) == 1:  # the pre-flight: each gold (1), then a wrong answer (0)\n"
        "        return [1.0 - i % 2 for i in range(len(completions))]\n"
        f"    {body}\n"
    )
    (tmp_path / "run.yaml").write_text(TINY.format(M=2) + "reward: bad_reward.py:bad\n")
    result = cli("train", "run.yaml", "--tracking-uri", tracking_uri)
    assert result.exit_code == 1, result.output
    assert "bad_reward.py:bad" in result.output and says in result.output
    assert _statuses(tracking_uri) in ([], ["FAILED"])


def test_sigterm_ends_a_train_run_killed(isolab_cache, tracking_uri, tmp_path):
    """`kill` (SIGTERM) of `isolab train` ends its run KILLED, as Ctrl-C does, exit 143."""
    config = tmp_path / "run.yaml"
    config.write_text(TINY.format(M=400))
    log = tmp_path / "train.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "isolab.cli", "train", str(config), "--tracking-uri", tracking_uri],
        cwd=REPO,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while _statuses(tracking_uri) != ["RUNNING"]:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        time.sleep(3)  # into the training steps
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=60) == 143, log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert _statuses(tracking_uri) == ["KILLED"], log.read_text()


ADAPTIVE = """\
name: life-adaptive
base: {model: tiny-m, task: arithmetic, B_p: 2, eval_problems: 16, eval_k_samples: 4}
axes:
  n: [2, 4, 8]
budget_rollouts: 64
eval_points: 3
"""


@pytest.mark.parametrize(
    ("option", "value"),
    [("--eta", "inf"), ("--eta", "nan"), ("--z", "inf"), ("--z", "nan"), ("--z", "0"),
     ("--grace", "-1")],
)  # fmt: skip
def test_out_of_range_adaptive_options_are_refused(cli, tmp_path, option, value):
    """`--eta inf` would stop every arm but the best at the first rung it judges: refused,
    exit 2, naming the option, before anything runs."""
    (tmp_path / "spec.yaml").write_text(ADAPTIVE)
    result = cli("sweep", "adaptive", "spec.yaml", option, value)
    assert result.exit_code == 2, result.output
    assert f"option {option}" in result.output
    assert not (tmp_path / "runs" / "mlflow.db").exists()


def test_the_adaptive_resume_hint_repeats_every_option(cli, tmp_path, monkeypatch):
    """After Ctrl-C the command printed to resume is the one given: the same rule, the same
    store (a resume under another rule would judge the remaining rungs differently)."""
    import isolab.sweep.adaptive_live as live

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(live, "run_adaptive", interrupted)
    # the exit's watchdog needs a real stderr, which CliRunner's capture is not
    monkeypatch.setattr("faulthandler.dump_traceback_later", lambda *a, **k: None)
    (tmp_path / "spec.yaml").write_text(ADAPTIVE)
    uri = f"sqlite:///{tmp_path / 'other.db'}"
    args = ["--workers", "2", "--z", "3.5", "--grace", "1", "--eta", "2.0", "--tracking-uri", uri]
    result = cli("sweep", "adaptive", "spec.yaml", *args)
    assert result.exit_code == 130, result.output
    hint = " ".join(result.output.split("run again to resume:")[1].split())
    assert hint == f"isolab sweep adaptive spec.yaml {' '.join(args)}"


def test_a_verifier_that_calls_sys_exit_is_a_failure_naming_it(
    cli, isolab_cache, tracking_uri, tmp_path
):
    """`sys.exit(0)` in a card's verifier ended `isolab train` with exit 0 and no run: it is a
    failure (exit 1) whose message names the verifier."""
    import shutil

    import yaml

    card_dir = tmp_path / "wp"
    shutil.copytree(REPO / "examples" / "word-problems", card_dir)
    (card_dir / "grader.py").write_text(
        "import sys\n\n\ndef check(completion, gold):\n    sys.exit(0)\n"
    )
    data = yaml.safe_load((card_dir / "task.yaml").read_text())
    data["verifier"] = "grader.py:check"
    (card_dir / "task.yaml").write_text(yaml.safe_dump(data))
    model = tiny_chat_model(tmp_path / "chat-model")  # a card's prompts are chat prompts
    (tmp_path / "run.yaml").write_text(
        TINY.format(M=2).replace("split: easy", "split: all").replace("tiny-m", str(model))
        + f"task: {card_dir / 'task.yaml'}\ntrust_remote_code: true\n"
    )
    result = cli("train", "run.yaml", "--tracking-uri", tracking_uri)
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert "grader.py:check" in text and "SystemExit" in text
    assert _statuses(tracking_uri) in ([], ["FAILED"])
