"""Nothing runs that you did not ask for, and nothing is written where you did not say (issue 52):
code named by a task card, rewards that are not functions of yours, writes through links, and
what `isolab ui` lets a local process change."""

from __future__ import annotations

import contextlib
import http.server
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from helpers import free_port, isolab_cmd, stop_group, tiny_chat_model
from mlflow.tracking import MlflowClient

from isolab.config import RunConfig

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "word-problems"
SNAPSHOT = REPO / "tests" / "fixtures" / "smoke-snapshots" / "nstar" / "main"


# ---- code named by a task card --------------------------------------------------------------
@pytest.fixture
def card_with_code(tmp_path: Path) -> Path:
    """The example card with `verifier: check.py:verify`, a module that leaves a file
    `RAN-check` beside the card when imported (and grades as `numeric` does)."""
    folder = tmp_path / "wp"
    shutil.copytree(EXAMPLE, folder)
    marker = folder / "RAN-check"
    (folder / "check.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n\n\n"
        "def verify(completion, gold):\n    return completion.strip().endswith(gold)\n"
    )
    card = folder / "task.yaml"
    data = yaml.safe_load(card.read_text())
    data.update(verifier="check.py:verify", few_shot=0, system=None)
    card.write_text(yaml.safe_dump(data))
    return card


@pytest.mark.parametrize(
    ("command", "trusted"),
    [("flops", False), ("flops", True), ("train", False)],
)
def test_a_cards_own_verifier_runs_only_with_the_opt_in_and_never_to_plan(
    cli, card_with_code, tmp_path, tracking_uri, command, trusted
):
    """Reading the card imported and called `check.py` before, even for `isolab flops`."""
    model = tiny_chat_model(tmp_path / "model")
    cfg = tmp_path / "run.yaml"
    run = RunConfig(
        model=str(model),
        split="all",
        n=2,
        B_p=2,
        M=1,
        max_completion_tokens=8,
        eval_problems=2,
        eval_k_samples=4,
    )
    run.to_yaml(cfg)
    data = yaml.safe_load(cfg.read_text())  # by hand: no card is read before the command
    data.update(task=str(card_with_code), trust_remote_code=trusted)
    cfg.write_text(yaml.safe_dump(data))
    args = [command, str(cfg)] + (["--tracking-uri", tracking_uri] if command == "train" else [])
    res = cli(*args)
    out = " ".join(res.output.split())
    assert not (card_with_code.parent / "RAN-check").exists(), res.output
    if trusted:  # planning never runs card code, whatever the config says
        assert res.exit_code == 0, res.output
        return
    assert res.exit_code == 2, res.output
    assert f"task card {card_with_code}" in out and "check.py" in out
    assert "trust_remote_code: true" in out
    db = Path(tracking_uri.removeprefix("sqlite:///"))
    assert not db.exists() or not MlflowClient(tracking_uri).search_runs(
        [e.experiment_id for e in MlflowClient(tracking_uri).search_experiments()]
    )


def test_difficulty_of_a_card_with_code_asks_for_the_flag_before_any_model_loads(
    cli, card_with_code
):
    """`isolab difficulty` has no run config: before, a card's own verifier was refused only at
    its first grade, after sampling had started, with no way to opt in."""
    res = cli("difficulty", "tiny-m", "--task", str(card_with_code), "--pool-size", "8")
    out = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert f"task card {card_with_code}" in out and "--trust-remote-code" in out
    assert not (card_with_code.parent / "RAN-check").exists()


def test_a_trusted_cards_verifier_must_take_the_verifier_call(card_with_code):
    """A card's verifier is called as verify(completion, gold): anything else is refused when
    the opt-in imports it, before any model loads."""
    from isolab.tasks.card import CardError, load_card

    (card_with_code.parent / "check.py").write_text("def verify(completion):\n    return True\n")
    with pytest.raises(CardError, match=r"verifier = 'check.py:verify': verify\(completion\)"):
        load_card(card_with_code, run_code=True)
    (card_with_code.parent / "check.py").write_text("from os import system as verify\n")
    with pytest.raises(CardError, match="not a Python function"):
        load_card(card_with_code, run_code=True)


# ---- rewards: functions of yours, with TRL's signature ----------------------------------------
@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("os:system", "os is a module of Python's standard library"),  # completions to a shell
        ("builtins:eval", "builtins is a module of Python's standard library"),
        ("subprocess:run", "standard library"),
        ("numpy:sum", "installed package"),
    ],
)
def test_a_reward_from_the_standard_library_or_a_package_is_refused_without_importing(spec, says):
    with pytest.raises(ValueError, match="reward = ") as info:
        RunConfig(reward=spec)
    assert says in str(info.value)
    assert "completions" in str(info.value)  # the signature asked for


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("from os import system as fn\n", "builtin_function_or_method, not a Python function"),
        ("from shutil import rmtree as fn\n", "fn is not yours"),
        ("class fn:\n    def __init__(self, **kw):\n        pass\n", "a type, not a Python"),
        ("import math\nfn = math.prod\n", "not a Python function"),
        ("def fn(x):\n    return [0.0]\n", "does not take that call"),
        ("def fn(prompts, completions):\n    return [0.0]\n", "does not take that call"),
    ],
)
def test_a_reward_must_be_a_python_function_of_yours_with_trls_signature(
    tmp_path, monkeypatch, body, says
):
    """TRL calls reward_func(prompts=..., completions=..., completion_ids=..., **columns)."""
    from isolab.rl.rewards import get_reward
    from isolab.tasks import get_task

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.py").write_text(body)
    RunConfig(reward="mine.py:fn")  # the config is checked without importing it
    with pytest.raises(ValueError, match=r"reward = 'mine.py:fn': .*function\(prompts") as info:
        get_reward("mine.py:fn", get_task("arithmetic", "raw"))
    assert says in str(info.value)


# ---- writes through links ---------------------------------------------------------------
def test_runs_export_refuses_a_linked_parent_folder_under_runs(cli, tmp_path, tracking_uri):
    """`runs/nstar` a link to elsewhere: the default destination runs/nstar/x/ is refused."""
    from isolab.synthetic import make_isocompute_runs
    from isolab.tracking.importing import import_runs
    from isolab.tracking.snapshot import export_runs

    runs = make_isocompute_runs(seeds=1, max_runs=2, eval_points=3)
    snap = export_runs(runs, tmp_path / "seed-snap", experiment="nstar/x")
    import_runs(snap, tracking_uri=tracking_uri)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "nstar").symlink_to(elsewhere, target_is_directory=True)
    res = cli("runs", "export", "nstar/x", "--tracking-uri", tracking_uri)
    out = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert f"{tmp_path / 'runs' / 'nstar'} is a symbolic link" in out and "Remove the link" in out
    assert not list(elsewhere.iterdir())


def test_report_out_refuses_an_existing_link(cli, tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    (tmp_path / "page.html").symlink_to(target)
    res = cli("report", str(SNAPSHOT), "--out", str(tmp_path / "page.html"), "--n-boot", "5")
    out = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert f"--out {tmp_path / 'page.html'}" in out and "symbolic link" in out
    assert target.read_text() == "keep me"


# ---- the UI ---------------------------------------------------------------------------------
@contextlib.contextmanager
def _ui(uri: str, cwd: Path, port: int, log: Path) -> Iterator[subprocess.Popen]:
    """`isolab ui` in a session of its own, stopped with its whole group at the end."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [*isolab_cmd(), "ui", "--tracking-uri", uri, "--port", str(port)],
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield proc
    finally:
        stop_group(proc, timeout_s=30)


def _wait_ready(proc: subprocess.Popen, log: Path, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while "ready:" not in log.read_text(errors="replace"):
        assert proc.poll() is None, log.read_text(errors="replace")
        assert time.monotonic() < deadline, log.read_text(errors="replace")
        time.sleep(0.3)


def _request(method: str, url: str, data: bytes | None = None) -> int:
    headers = {"Content-Type": "application/octet-stream"}  # as a client uploading a file
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def test_the_ui_serves_the_stores_artifacts_but_takes_no_artifact_writes(tmp_path, monkeypatch):
    """MLflow's artifact proxy (`--serve-artifacts`, on by default) took a PUT or DELETE of any
    file under ./mlartifacts of the folder the UI started in; the UI still shows a run's own
    artifacts (the store's artifact root, read by the server)."""
    from isolab.tracking import experiment_id

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri = f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}"
    (tmp_path / "runs").mkdir()
    client = MlflowClient(uri)
    run = client.create_run(experiment_id("ui-security", uri))
    (tmp_path / "note.txt").write_text("hello")
    client.log_artifact(run.info.run_id, str(tmp_path / "note.txt"))
    port, log = free_port(), tmp_path / "ui.log"
    with _ui(uri, tmp_path, port, log) as proc:
        _wait_ready(proc, log)
        base = f"http://127.0.0.1:{port}"
        put = _request("PUT", f"{base}/api/2.0/mlflow-artifacts/artifacts/x/evil.txt", b"evil")
        delete = _request("DELETE", f"{base}/api/2.0/mlflow-artifacts/artifacts/x/evil.txt")
        shown = _request(
            "GET", f"{base}/get-artifact?path=note.txt&run_uuid={run.info.run_id}"
        )  # the UI's own artifact view, and its list of a run's artifacts
        listed = _request(
            "GET", f"{base}/ajax-api/2.0/mlflow/artifacts/list?run_id={run.info.run_id}"
        )
    assert put >= 400 and delete >= 400, (put, delete, log.read_text(errors="replace")[-3000:])
    assert not [p for p in tmp_path.rglob("evil.txt")]
    assert shown == 200 and listed == 200


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # http.server's name
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"OK")

    def log_message(self, *args) -> None:
        pass


def test_ui_refuses_a_port_another_process_answers_on(cli, tmp_path):
    """Another process answering /health on the port: `isolab ui` said `ready:` for it."""
    server = http.server.HTTPServer(("127.0.0.1", 0), _Health)
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        res = cli("ui", "--port", str(port), "--tracking-uri", f"sqlite:///{tmp_path}/m.db")
    finally:
        server.shutdown()
        server.server_close()
    out = " ".join(res.output.split())
    assert "ready:" not in out
    assert res.exit_code == 2, res.output
    assert f"--port {port}" in out and "free" in out


def test_ui_port_0_is_refused_at_once(cli, tmp_path):
    t0 = time.monotonic()
    res = cli("ui", "--port", "0", "--tracking-uri", f"sqlite:///{tmp_path}/m.db")
    assert res.exit_code == 2, res.output
    assert "--port" in res.output
    assert time.monotonic() - t0 < 10
