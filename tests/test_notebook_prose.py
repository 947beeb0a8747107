"""The notebooks' prose about their data comes from the runs they were given (issue 48): a
researcher's own sweep is described by its own run count, grid and compute, with what each
claim's test lacks in it (a sweep, a split, a second seed), and never by the curated sweeps'
figures. `describe_runs` on small planted runs tables, then notebook 02 run on one through
papermill as `papermill … -p runs my-sweep` runs it."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from helpers import run_notebook

from isolab import study
from isolab.study.describe import describe_runs, first_clause, seeds_per_configuration
from isolab.synthetic import make_isocompute_runs
from isolab.tracking.snapshot import export_runs

#: What the notebooks once said about the curated nstar sweeps, whatever runs they were given.
CURATED = ("72 runs", "65,536", "131,072", "`nstar/cpu/main`", "8 seeds", "3 seeds")


def _my_sweep(seeds: int = 1, split: str = "easy") -> pl.DataFrame:
    """A researcher's 3 × 2 grid (n = 2, 4, 8; B_p = 1, 2) to 64 rollouts, four evaluations."""
    return make_isocompute_runs(
        n_grid=(2, 4, 8),
        B_p_grid=(1, 2),
        budget_rollouts=64,
        seeds=seeds,
        eval_points=4,
        experiment="my-sweep",
        split=split,
    )


def test_own_sweep_is_described_by_its_own_runs_and_its_missing_sweep():
    prose = describe_runs(study.get("nstar"), {"main": _my_sweep()})
    what, lacks = prose.split("**What each claim's test lacks in these runs:**")
    assert "Your sweep `my-sweep` (read as `main`): 6 runs of tiny-m on arithmetic" in what
    assert "n = {2, 4, 8}; B_p = {1, 2}; 1 seed per configuration" in what
    assert "compute per run 64 rollouts (2e9 FLOPs); 4 evaluations per run" in what
    assert "Not in these runs: `long`" in what
    claims = [line for line in lacks.splitlines() if line.startswith("- ")]
    assert len(claims) == 3  # nstar's three claims, one line each
    grows = [line for line in claims if line.startswith("- n* grows")]
    assert len(grows) == 2 and all("no `long` runs" in line for line in grows)
    assert "no hard runs (only split easy)" in grows[1] and "no easy runs" not in grows[0]
    assert all("the saturation gate cannot run" in line for line in grows)
    assert all("one seed per configuration" in line for line in claims)
    for figure in CURATED:
        assert figure not in prose, figure


def test_a_sweep_on_another_split_and_with_seeds_says_so():
    mine = _my_sweep(seeds=2, split="all")
    assert seeds_per_configuration(mine) == [2]
    prose = describe_runs(study.get("nstar"), {"main": mine})
    assert "12 runs" in prose and "split all" in prose and "2 seeds per configuration" in prose
    assert "one seed" not in prose  # two seeds: the spread between them is measured
    easy_above_hard = next(line for line in prose.splitlines() if "larger on Easy" in line)
    assert "no easy, hard runs" in easy_above_hard  # its test's own reason, first clause only
    assert "secondary reading" not in easy_above_hard


def test_the_curated_runs_are_described_by_theirs():
    """The same function on the committed smoke snapshot of nstar's `main`: its own figures,
    as its experiment names them, and `long` missing."""
    snap = Path(__file__).parent / "fixtures" / "smoke-snapshots" / "nstar" / "main"
    from isolab.tracking.runs import load_runs

    main = load_runs(snap)
    prose = describe_runs(study.get("n-vs-bp"), {"main": main})
    runs = main["run_key"].n_unique()
    assert f"`main` (experiment `nstar/smoke/main`): {runs} runs" in prose
    assert "Not in these runs" not in prose  # n-vs-bp reads `main` alone


def test_first_clause_keeps_brackets_whole():
    note = "untested: no pair (over 3 checkpoints; 2 seeds) resolves; secondary reading: x"
    assert first_clause(note) == "untested: no pair (over 3 checkpoints; 2 seeds) resolves"


def test_no_runs_is_refused_naming_the_fix():
    with pytest.raises(ValueError, match="isolab.study.collect"):
        describe_runs(study.get("nstar"), {})


def test_notebook_02_on_my_sweep_states_its_runs_not_the_curated_ones(tmp_path, monkeypatch):
    """The issue's walk: notebook 02 with `-p runs <my snapshot>`. Its markdown cells state no
    curated figure, and its description of the runs is this sweep's."""
    monkeypatch.setenv("ISOLAB_RESULTS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    snap = export_runs(_my_sweep(), tmp_path / "my-sweep")
    out = tmp_path / "02.ipynb"
    outputs = run_notebook("02_nstar_vs_compute", out, {"scale": "cpu", "runs": str(snap)})
    described = [
        o["data"]["text/markdown"] for o in outputs if "text/markdown" in o.get("data", {})
    ]
    assert len(described) == 1
    assert "Your sweep `my-sweep` (read as `main`): 6 runs" in described[0]
    assert "no `long` runs" in described[0]
    cells = json.loads(out.read_text())["cells"]
    shown = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    shown += "".join(described)
    for figure in CURATED:
        assert figure not in shown, figure
