"""What a user reads: a sweep's progress piped to a file, `sweep plan` at 100 columns, a worker
stopped at the end of a clean sweep, libraries kept quiet, and the committed notebooks' outputs."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import re
import signal
import time
from dataclasses import replace
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from isolab.cli import common
from isolab.cli import sweep as cli_sweep
from isolab.sweep import SweepSpec, plan_sweep, split_sizes
from isolab.sweep.progress import SweepProgress

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "studies" / "smoke.yaml"
REWARD_RHO = REPO / "studies" / "reward-rho" / "cpu" / "full.yaml"


def sweep_cli(*args: str):
    app = typer.Typer()
    cli_sweep.register(app)
    return CliRunner().invoke(app, ["sweep", *args])


@pytest.fixture
def quiet(monkeypatch):
    """What `isolab`'s entry point does first (`isolab.logs.configure`), undone after the test:
    libraries' environment defaults, loggers and transformers' bars."""
    from transformers.utils import logging as hf_logging

    from isolab.logs import quiet_libraries

    monkeypatch.setattr(os, "environ", dict(os.environ))
    for name in ("mlflow", "vllm"):
        logger = logging.getLogger(name)
        monkeypatch.setattr(logger, "level", logger.level)
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    quiet_libraries()
    yield
    hf_logging.set_verbosity(verbosity)
    if bars:
        hf_logging.enable_progress_bar()


def test_a_tiny_sweep_piped_reads_as_lines_with_steps_and_an_eta(
    isolab_cache, tracking_uri, tmp_path, quiet
):
    """One point of 2 steps, inline, output captured (not a terminal): no traceback, a line
    per quarter of the run's steps, an ETA before the run ends, no carriage returns (rich's
    bar printed only its last state when piped)."""
    data = yaml.safe_load(SMOKE.read_text())
    data.update(name="output", axes={"n": [4], "B_p": [8]}, budget_rollouts=64, eval_points=1)
    data["base"]["eval_problems"] = 8
    spec = tmp_path / "output.yaml"
    spec.write_text(yaml.safe_dump(data))
    result = sweep_cli("run", str(spec), "--backend", "inline", "--tracking-uri", tracking_uri)
    out = result.output
    assert result.exit_code == 0, out
    assert "1 finished, 0 failed" in out
    assert "Traceback" not in out and "\r" not in out, out
    lines = out.splitlines()
    steps = [i for i, line in enumerate(lines) if re.search(r"seed 0: step \d/2 \(", line)]
    end = next(i for i, line in enumerate(lines) if line.startswith("✓"))
    assert len(steps) == 2 and steps[-1] < end, out  # step 1/2 (50%), step 2/2 (100%)
    assert re.search(r"0/1 runs · \d+% · ETA \d+:\d\d:\d\d$", lines[steps[0]]), out
    assert lines[end].endswith("1/1 runs · 100% · ETA 0:00:00"), out


def test_sweep_plan_fits_100_columns(monkeypatch):
    """The reward-rho grid (144 runs, 3 axes) at 100 columns: no line wider, no cell cut
    short with `…`; the columns every run shares are printed once above the table."""
    monkeypatch.setattr(common.console, "width", 100)
    result = sweep_cli("plan", str(REWARD_RHO))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert "…" not in result.output
    assert "every run: n=8 · B_p=8 · B=64" in result.output
    spec = SweepSpec.from_yaml(REWARD_RHO)
    plan = plan_sweep(spec, split_sizes(spec))
    rows = [line.split() for line in lines]
    for p in plan.points:  # each run's row holds its values whole, its run key included
        row = next(r for r in rows if r and r[-1] == p.run_key)
        assert row[:4] == [
            p.config.reward,
            str(p.config.search_oversample),
            str(p.config.num_iterations),
            str(p.config.seed),
        ]


def test_the_eta_comes_from_the_first_steps():
    """Two points planned at 10 s and 30 s; 5 s after the first started, it is half way: an
    eighth of the sweep is done, so 35 s are left at that pace. Before a step: no ETA."""
    spec = yaml.safe_load(SMOKE.read_text())
    plan = plan_sweep(SweepSpec.from_dict({**spec, "axes": {"n": [4, 8], "B_p": [1]}}))
    first, second = (replace(p, est_wall_s=s) for p, s in zip(plan.points, (10, 30), strict=True))
    progress = SweepProgress([first, second], workers=1)
    assert progress.eta_s(now=0.0) is None and progress.planned_s == 40.0
    progress.start(first, now=0.0)
    assert progress.eta_s(now=1.0) is None
    progress.step(first, first.config.M // 2, now=5.0)
    assert progress.fraction == pytest.approx(0.125)
    assert progress.eta_s(now=5.0) == pytest.approx(35.0)
    progress.end(first, now=8.0)
    assert progress.ended == 1
    progress.end(second, now=20.0)
    assert progress.fraction == 1.0 and progress.eta_s(now=20.0) == 0.0
    assert progress.ended == 2


def test_progress_piped_prints_a_line_per_tenth():
    """`isolab train` and the demo piped: a line per 10% of the steps and at the end, not one
    carriage-return-joined line."""
    bar = common.LineProgress()
    with common.console.capture() as captured, bar:
        task = bar.add_task("tiny-m·easy", total=25, info="")
        for step in range(1, 26):
            bar.update(task, completed=step, info=f"ρ 0.{step:02d}")
    lines = captured.get().splitlines()
    assert len(lines) == 10, lines
    assert lines[0] == "tiny-m·easy: step 3/25 (12%) · ρ 0.03"
    assert lines[-1] == "tiny-m·easy: step 25/25 (100%) · ρ 0.25"


class _SlowFinalizer:
    """What a library's finalizer does mid-import: it runs Python code, where a signal
    handler's exception cannot propagate and is printed as `Exception ignored in`."""

    def __del__(self) -> None:
        time.sleep(2)


def _setup_with_a_finalizer(*args, **kwargs) -> None:
    _SlowFinalizer()


def _worker(*args) -> None:
    """A worker that prints as a sweep's does: to file descriptor 2, line by line (a forked
    process exits without flushing pytest's capture), and Python's own report of an exception
    in a finalizer (pytest's collects it silently)."""
    import sys

    from isolab.sweep import local

    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115 - for the process's life
    sys.unraisablehook = sys.__unraisablehook__
    local._worker_main(*args)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_worker_stopped_before_its_first_point_prints_no_traceback(
    signum, monkeypatch, capfd, tracking_uri
):
    """The end of a clean sweep terminates a worker still importing (another took every
    point): its KeyboardInterrupt landed in a finalizer and printed a traceback under
    "5 finished, 0 failed". A worker with no run in progress now exits quietly."""
    from isolab.sweep import local

    monkeypatch.setattr(local, "setup_process", _setup_with_a_finalizer)
    ctx = multiprocessing.get_context("fork")  # the patched setup travels with the fork
    tasks, results = ctx.Queue(), ctx.Queue()
    tasks.put(None)
    args = (tasks, results, tracking_uri, "eval/avg@4", 1, {}, os.getpid())
    worker = ctx.Process(target=_worker, args=args, daemon=True)
    worker.start()
    time.sleep(0.5)  # inside the finalizer
    os.kill(worker.pid, signum)
    worker.join(timeout=15)
    assert worker.exitcode == 0
    err = capfd.readouterr().err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err


def test_quiet_libraries_silence_vllm_before_it_configures_its_logger(quiet, caplog):
    """vLLM logs "Triton is installed, but doesn't include CPU backend" on import, before it
    sets up its own handler, through Python's fallback handler: it broke the progress bar."""
    with caplog.at_level(logging.WARNING):
        logging.getLogger("vllm.triton_utils.importing").warning("Triton is installed, but …")
        logging.getLogger("isolab.sweep").warning("isolab's own warning")
    assert "Triton" not in caplog.text and "isolab's own warning" in caplog.text


MACHINE_PATH = re.compile(r"(/work/|/home/|/tmp/|/Users/|/root/)")


@pytest.mark.parametrize(
    "notebook", sorted((REPO / "notebooks").glob("[0-9]*.ipynb")), ids=lambda p: p.name
)
def test_committed_notebook_outputs_hold_no_download_bar_or_machine_path(notebook: Path):
    """MLflow's "Downloading artifacts" bars and a developer's absolute paths in the committed
    outputs (true of the notebooks as re-executed after issue 30)."""
    for cell in json.loads(notebook.read_text())["cells"]:
        text = json.dumps(cell.get("outputs", []))
        assert "Downloading artifacts" not in text, "".join(cell["source"])
        assert not MACHINE_PATH.search(text), "".join(cell["source"])
