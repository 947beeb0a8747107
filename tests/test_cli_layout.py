"""What a reader sees first (issue 48, "small but visible"): tables at 80 columns or piped keep
every name whole, `isolab init` lays out the examples, the demo says what it runs and how long
before it starts, and a sweep reads in MLflow's UI as isolab writes it there — table numbers
formatted, runs coloured by n, links in the model-training mode."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.table import Table
from typer.testing import CliRunner

from isolab import models
from isolab.cli import common

REPO = Path(__file__).resolve().parents[1]
#: A shipped preset's folder where a from-scratch build of other weights stands: the widest
#: row `models list` prints ("from-scratch", a digest "≠ shipped").
WIDE_PRESET = "tiny-chat"


def _fits(output: str, width: int = 80) -> None:
    lines = output.splitlines()
    assert max(len(line) for line in lines) <= width, max(lines, key=len)
    assert "…" not in output, output


@pytest.fixture
def wide_cache(tmp_path, monkeypatch) -> Path:
    """A model cache holding a from-scratch tiny-chat whose digest is not the shipped one."""
    cache = tmp_path / "cache"
    folder = cache / "models" / WIDE_PRESET
    shutil.copytree(models.shipped_dir(WIDE_PRESET), folder)
    info = json.loads((folder / models.BUILD_INFO).read_text())
    info.update(source="from-scratch", digest="ab" * 32)
    (folder / models.BUILD_INFO).write_text(json.dumps(info))
    monkeypatch.setenv("ISOLAB_CACHE", str(cache))
    return cache


def test_models_list_piped_at_80_columns_keeps_every_name_whole(wide_cache):
    """`isolab models list | cat` with COLUMNS=80: a real process, its output a pipe."""
    env = {**os.environ, "COLUMNS": "80", "ISOLAB_CACHE": str(wide_cache)}
    out = subprocess.run(
        [sys.executable, "-m", "isolab.cli", "models", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    _fits(out)
    names = [row.split("│")[1].strip() for row in out.splitlines() if row.startswith("│")]
    rows = models.list_models()
    assert {r["name"] for r in rows} <= set(names), out  # each on one line, whole
    assert next(r for r in rows if r["name"] == WIDE_PRESET)["installed"] == "from-scratch"


def test_models_list_in_process_at_80_columns(wide_cache, monkeypatch):
    monkeypatch.setattr(common.console, "width", 80)
    from isolab.cli import app

    result = CliRunner().invoke(app, ["models", "list"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    _fits(result.output)
    for row in models.list_models():
        assert f"│ {row['name']} " in result.output, row["name"]


def test_fit_names_folds_the_other_columns_never_the_names(monkeypatch):
    """Without `fit_names` rich cuts every column alike and the names end in `…`."""
    monkeypatch.setattr(common.console, "width", 80)
    names = ["smollm2-135m·easy·n16·bp16·s0", "tiny-chat·all·n4·bp4"]

    def table() -> Table:
        out = Table("run", "avg@4", "best@4", "worst@4", "FLOPs", "ρ", "wall s")
        for name in names:
            out.add_row(
                name, "0.318 → 0.381", "0.707 → 0.767", "0.045 → 0.064", "1.17e+11", "0.82", "100"
            )
            for column in out.columns:
                column.no_wrap = True
        return out

    with common.console.capture() as plain:
        common.console.print(table())
    assert any(name not in plain.get() for name in names)  # rich's default cuts them
    with common.console.capture() as fitted:
        common.console.print(common.fit_names(table()))
    _fits(fitted.get())
    for name in names:
        assert name in fitted.get()


def test_init_lays_out_the_examples(cli, tmp_path, monkeypatch):
    """`isolab init` copies examples/ (the word-problems card, its data and reward with it),
    and from the new project's folder its run config loads as the README runs it."""
    from isolab.config import RunConfig
    from isolab.tasks.card import load_card

    result = cli("init", "project")
    assert result.exit_code == 0, result.output
    assert "examples/" in result.output
    project = tmp_path / "project"
    shipped = [
        p for p in (REPO / "examples").rglob("*") if p.is_file() and "__pycache__" not in p.parts
    ]
    for path in shipped:
        copy = project / path.relative_to(REPO)
        assert copy.read_bytes() == path.read_bytes(), copy
    card = load_card(project / "examples" / "word-problems" / "task.yaml")
    assert len(card.problems("train")) > 0
    monkeypatch.chdir(project)  # the example's paths are relative to the project's folder
    run = RunConfig.from_yaml(Path("examples/word-problems/run.yaml"))
    assert (
        run.model == "tiny-chat"
    )  # the card runs in seconds on a CPU without a model of one's own


def test_the_demo_states_its_runs_and_an_estimate_before_it_starts():
    """What `isolab demo` prints first: its runs, their evaluations as the evaluator schedules
    them, and the CPU time they should take: the measured figure at the defaults, scaled by
    `sweep plan`'s cost model for other options, said to be an idle machine's wall time."""
    from isolab.cli.demo import (
        DEMO_CPU_S,
        demo_configs,
        estimate_cpu_s,
        evaluations,
        up_front,
    )
    from isolab.cli.sweep_progress import duration
    from isolab.config import RunConfig
    from isolab.rl.evaluate import Evaluator

    for M, every in ((150, 25), (7, 3), (2, 0)):
        cfg = RunConfig(M=M, eval_every=every)
        due = Evaluator.__new__(Evaluator)  # its schedule only: `due` reads cfg and pending
        due.cfg, due.pending = cfg, []
        assert evaluations(cfg) == sum(due.due(s, 0, s == M) for s in range(M + 1)), (M, every)
    default = demo_configs("tiny-m", 150, 1e-4, 128)
    assert estimate_cpu_s(default) == pytest.approx(DEMO_CPU_S)
    short = demo_configs("tiny-m", 2, 1e-4, 16)
    assert estimate_cpu_s(short) < DEMO_CPU_S / 10  # `--steps 2 --eval-problems 16`: seconds
    said = up_front(default)
    assert f"about {duration(DEMO_CPU_S)} of CPU" in said
    assert "2 GRPO runs (Easy and Hard)" in said and "9,600 rollouts" in said
    assert "7 evaluations of up to 128 problems × 16 samples" in said
    assert "idle" in said and "grows with the machine's load" in said


# ---- MLflow as a reader expects ------------------------------------------------------------
def test_a_logged_run_is_coloured_by_its_n(tracking_uri):
    from mlflow.tracking import MlflowClient

    from isolab.tracking.logger import RunLogger
    from isolab.tracking.views import COLOUR_TAG, colour_of_n

    colours = {}
    for n, seed in ((4, 0), (4, 1), (16, 0)):
        run = RunLogger("colours", f"n{n}·s{seed}", f"key-{n}-{seed}", tracking_uri)
        run.log_params({"n": n, "seed": seed})
        run.end()
        colours[n, seed] = MlflowClient(tracking_uri).get_run(run.run_id).data.tags[COLOUR_TAG]
    assert colours[4, 0] == colours[4, 1] == colour_of_n(4) != colours[16, 0]
    assert colour_of_n(1) != colour_of_n(2) != colour_of_n(512)
    assert all(c.startswith("#") and len(c) == 7 for c in colours.values())


def test_a_sweep_reads_in_mlflow_with_formatted_numbers_colours_and_training_links(
    tracking_uri, tmp_path
):
    """An imported sweep (runs without colours): every child coloured by its n, the points
    table's ρ to 3 decimals and FLOPs as `1.90e12`, the experiment's description saying what
    the colours and MLflow's mode switch mean, and its links in the model-training mode."""
    import re

    import pandas as pd
    from mlflow.tracking import MlflowClient

    from isolab.synthetic import make_isocompute_runs
    from isolab.tracking import KIND_TAG
    from isolab.tracking.describe import NOTE_TAG
    from isolab.tracking.importing import import_runs
    from isolab.tracking.parents import POINTS_TABLE
    from isolab.tracking.snapshot import export_runs
    from isolab.tracking.views import COLOUR_TAG, COLOURS_NOTE, ML_MODE, MODE_NOTE, colour_of_n

    snap = export_runs(make_isocompute_runs(seeds=1, max_runs=4, eval_points=4), tmp_path / "s")
    name, created, _ = import_runs(snap, tracking_uri=tracking_uri)
    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name(name)
    (parent,) = client.search_runs([exp.experiment_id], f"tags.`{KIND_TAG}` = 'sweep'")
    children = client.search_runs(
        [exp.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'"
    )
    assert len(children) == created > 1
    for run in children:
        assert run.data.tags[COLOUR_TAG] == colour_of_n(float(run.data.params["n"]))
    local = client.download_artifacts(parent.info.run_id, POINTS_TABLE, str(tmp_path))
    table = json.loads(Path(local).read_text())
    frame = pd.DataFrame(table["data"], columns=table["columns"])
    assert all(re.fullmatch(r"\d\.\d\de\d+", f) for f in frame["flops/total"]), frame
    assert all(round(r, 3) == r for r in frame["compute/rho"]), frame
    note = client.get_experiment(exp.experiment_id).tags[NOTE_TAG]
    assert COLOURS_NOTE in note and MODE_NOTE in note
    links = re.findall(r"\]\((#/[^)]+)\)", note)
    assert links and all(ML_MODE in link for link in links), note
