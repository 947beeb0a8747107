"""The adaptive-path figure (issue 32, `isolab.plots.adaptive`) drawn on the committed
nstar/cpu/main replay: its panels show the replay's own numbers."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from isolab.plots.adaptive import plot_adaptive
from isolab.sweep.adaptive import Replay, StoppingRule, replay
from isolab.tracking.runs import load_runs

NSTAR = Path(__file__).resolve().parents[1] / "runs" / "nstar" / "cpu" / "main"


@pytest.fixture(scope="module")
def nstar() -> pl.DataFrame:
    return load_runs(NSTAR, statuses=["FINISHED"])


def lines(ax) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {str(ln.get_label()): (ln.get_xdata(), ln.get_ydata()) for ln in ax.get_lines()}


def test_figure_shows_the_replay_path_compute_and_arms(nstar):
    r: Replay = replay(nstar.filter(pl.col("split") == "easy"), StoppingRule())
    fig = plot_adaptive(r, "easy")
    fig.savefig(io.BytesIO(), format="png")  # draws without pyplot
    path, compute, twin = fig.axes  # n* panel, compute panel, the n* panel's arms axis
    C = r.path["C"].to_numpy()
    n = lines(path)
    assert np.array_equal(n["full grid: best n"][1], r.path["grid_n"].to_numpy())
    assert np.array_equal(n["adaptive: best surviving n"][1], r.path["adaptive_n"].to_numpy())
    assert "grid's best already stopped" not in n  # this replay kept it
    assert path.get_yscale() == "log" and path.get_xscale() == "log"
    # the arms running fall from all 12 to the kept ones, at the checkpoints that stop them
    running = lines(twin)["arms running on past C (right axis)"][1]
    assert running[-1] == len(r.kept) < r.arms.height
    assert np.all(np.diff(running) <= 0) and running[0] == r.arms.height
    # cumulative compute: equal before any stop, the final ratio is the replay's fraction
    spent = lines(compute)
    grid, adaptive = spent["full grid"], spent["adaptive"]
    assert np.array_equal(grid[0], C) and grid[1][0] == adaptive[1][0]
    assert adaptive[1][-1] / grid[1][-1] == pytest.approx(r.fraction)
    assert grid[1][-1] == pytest.approx(r.arms["full"].sum())
    assert f"{r.fraction:.0%}" in compute.get_title()
    assert all(ax.get_legend() is not None for ax in (twin, compute))
    assert "easy" in fig.get_suptitle() and "kept" in fig.get_suptitle()


def test_figure_marks_where_the_grids_best_was_already_stopped(nstar):
    """ASHA's rank cut (η = 3) stops the Hard split's final best: the figure says so."""
    r = replay(nstar.filter(pl.col("split") == "hard"), StoppingRule(eta=3))
    fig = plot_adaptive(r, "hard")
    lost = lines(fig.axes[0])["grid's best already stopped"]
    assert np.array_equal(lost[0], r.path.filter(~pl.col("best_alive"))["C"].to_numpy())
    assert r.best_dropped and "dropped" in fig.get_suptitle()
