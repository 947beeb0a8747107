"""Advice that knows its uncertainty: `recommend` hedges or refuses where the runs cannot tell
(one seed, flat curves, options within noise, an optimum at the grid's edge, a fit below what
was observed), on sweeps planted with known laws and on the committed nstar snapshot."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib
import numpy as np
import polars as pl
import pytest

from isolab import frontier as fr
from isolab.synthetic import IsoComputeLaw, make_isocompute_runs
from isolab.table import as_float, as_int
from isolab.vocab import EVAL_AVG, ROLLOUTS

matplotlib.use("Agg")

REPO = Path(__file__).resolve().parents[1]
#: Every n plateaus at the same level, barely above the base: within the noise of a one-seed
#: sweep, every per-n fit is flat (the user's own sweep in issue 30).
BARELY = IsoComputeLaw(R0=0.4, A_max=0.43, n_sat=4, curvature=0.0, C_mid_ref=2e3, gamma=0.0)


def sweep(law: IsoComputeLaw, n_grid, *, seeds: int, seed: int, noise: float = 0.02, **kw):
    """A small iso-compute sweep (B_p = 8) of `law`, evaluated on 64 problems × 8 samples."""
    df = make_isocompute_runs(
        {EVAL_AVG: law},
        n_grid=n_grid,
        B_p_grid=(8,),
        seeds=seeds,
        budget_rollouts=2**14,
        eval_points=8,
        noise=noise,
        seed=seed,
        **kw,
    )
    return df.with_columns(eval_problems=pl.lit(64), eval_k_samples=pl.lit(8))


def advise(df: pl.DataFrame, budget: float | None = None) -> fr.Recommendation:
    return fr.recommend(df, budget or as_float(df[ROLLOUTS].max()), n_boot=0)


def test_one_seed_is_warned_and_its_noise_named() -> None:
    rising = IsoComputeLaw(C_mid_ref=2e3, n_sat=8)
    rec = advise(sweep(rising, (4, 8, 16), seeds=1, seed=1))
    assert "One seed per configuration" in rec.summary
    assert rec.seeds == 1 and rec.hedges[0].startswith("One seed per configuration")
    # one seed: the noise is the evaluation's binomial sampling, 64 problems × 8 samples
    assert rec.noise_source == "evaluation" and "P = 64 problems × K = 8 samples" in rec.summary
    R = rec.evidence[f"{EVAL_AVG}_at_budget"][0]
    assert rec.noise_sd == pytest.approx(math.sqrt(R * (1 - R) / 512))
    # … and without the evaluation's size there is none, which the advice says
    bare = advise(sweep(rising, (4, 8, 16), seeds=1, seed=1).drop("eval_problems"))
    assert bare.noise_source == "none" and "no noise estimate" in bare.summary
    assert bare.within_noise == (int(bare.evidence["n"][0]),)
    # one seed has no spread to resample: the intervals come from the fits' residuals, not
    # from replicates that all equal the data (a saturation "≈ 8 [8, 8]")
    res = fr.optimal_n(sweep(rising, (4, 8, 16), seeds=1, seed=1), n_boot=20)
    lo, hi = res.n_saturation_ci
    assert hi - lo > 1 and (res.per_n["A_hi"] - res.per_n["A_lo"]).min() > 0.01
    # two seeds: the spread between them, and no warning
    two = advise(sweep(rising, (4, 8, 16), seeds=2, seed=1))
    assert two.noise_source == "seeds" and "seed spread" in two.summary
    assert not any("One seed" in h for h in two.hedges)


def test_flat_fits_give_no_point_estimate() -> None:
    import matplotlib.pyplot as plt

    from isolab import plots

    df = sweep(BARELY, (2, 4, 8, 16), seeds=1, seed=3, noise=0.03)
    res = fr.optimal_n(df, n_boot=0)
    assert set(res.per_n["status"]) == {"flat"}
    assert res.status == "not identifiable" and "rises beyond noise" in res.reason
    assert math.isnan(res.n_saturation)
    rec = fr.recommend(df, as_float(df[ROLLOUTS].max()), n_star=res)
    assert math.isnan(rec.expected) and math.isnan(rec.n_star)
    assert "≈ 0." not in rec.summary and "fitted n*" not in rec.summary
    assert "No expected value" in rec.expected_note and "flat" in rec.expected_note
    # … nor a saturation drawn, and each flat fit as a band at its observed level, no line
    fig, (ax_f, ax_n) = plt.subplots(1, 2)
    plots.plot_frontier(df, ax_f, result=res)
    plots.plot_n_star(res, ax_n)
    labels = [t.get_text() for t in ax_f.get_legend().get_texts()]
    assert "flat fits: level ± SD" in labels and "per-n sigmoid fits" not in labels
    assert len(ax_f.lines) == 1  # the frontier's staircase alone
    assert not [t for t in ax_n.texts if "saturation n ≈" in t.get_text()]
    for (n,), c in res.curves.group_by(["n"]):
        points = df.filter((pl.col("n") == n) & (pl.col(ROLLOUTS) > 0))[EVAL_AVG]
        assert c["reward_fit"][0] == pytest.approx(points.mean())
    plt.close(fig)


@pytest.mark.parametrize(
    ("n_sat", "grid", "edge", "extension", "said"),
    [
        (1024, (4, 8, 16, 32), "largest", "n = 64", "add n = 64"),
        (2, (2, 4, 8, 16), "smallest", "", "n cannot go below 2 in GRPO"),
        (2, (4, 8, 16, 32), "smallest", "n = 2", "add n = 2"),
    ],
)
def test_an_optimum_at_the_grids_edge_is_named_with_its_extension(
    n_sat: int, grid: tuple[int, ...], edge: str, extension: str, said: str
) -> None:
    # every n rises at the same compute to a plateau that peaks at n_sat, beyond or at an edge
    law = IsoComputeLaw(R0=0.2, A_max=0.7, n_sat=n_sat, curvature=0.005, C_mid_ref=2e3, gamma=0)
    rec = advise(sweep(law, grid, seeds=2, seed=5, noise=0.01))
    assert said in rec.summary
    assert rec.n == (max(grid) if edge == "largest" else min(grid))
    assert rec.edge == edge and rec.extension == extension
    assert f"the grid's {edge} n" in rec.headline


def test_options_within_noise_are_named_with_the_noise() -> None:
    # n = 4, 8, 16 plateau within 0.002 of each other, under a seed noise of 0.02
    close = IsoComputeLaw(R0=0.2, A_max=0.7, n_sat=8, curvature=0.002, C_mid_ref=2e3, gamma=0.0)
    rec = advise(sweep(close, (4, 8, 16), seeds=3, seed=7))
    assert "n ∈ {4, 8, 16} are within noise of the best at C = 16,384" in rec.summary
    assert rec.within_noise == (4, 8, 16)
    assert rec.noise_source == "seeds" and f"SD {rec.noise_sd:.3f} of one run" in rec.summary
    assert rec.noise_sd == pytest.approx(0.02, rel=0.5)
    # planted apart by 0.08 (four SD): the best leads beyond noise
    apart = IsoComputeLaw(R0=0.2, A_max=0.7, n_sat=8, curvature=0.08, C_mid_ref=2e3, gamma=0.0)
    lead = advise(sweep(apart, (4, 8, 16), seeds=3, seed=7))
    assert lead.within_noise == (8,) and "n = 8 leads at C = 16,384 beyond noise" in lead.summary


def test_a_fit_below_the_observed_best_says_why() -> None:
    # every run jumps by 0.15 at its last evaluation: the sigmoids cannot follow, so at the
    # budget each fit lies below what was already observed there, by far more than the noise
    law = IsoComputeLaw(R0=0.2, A_max=0.6, n_sat=8, curvature=0.01, C_mid_ref=2e3, gamma=0.0)
    df = sweep(law, (4, 8, 16), seeds=2, seed=9, noise=0.01)
    last = pl.col("step") == pl.col("step").max().over("run_key")
    df = df.with_columns(pl.when(last).then(pl.col(EVAL_AVG) + 0.15).otherwise(pl.col(EVAL_AVG)))
    rec = advise(df)
    assert "The fit is pessimistic here" in rec.summary and "go by the observed" in rec.summary
    assert rec.expected < rec.frontier_reward - 3 * rec.noise_sd
    # within noise of the fit, the best observed is read as the best of many noisy points
    near = advise(sweep(law, (4, 8, 16), seeds=2, seed=9, noise=0.01))
    if near.expected < near.frontier_reward:
        assert "the best of many noisy points" in near.expected_note
    else:
        assert not near.expected_note


def test_the_nstar_snapshot_gets_a_recommendation_at_its_smallest_n() -> None:
    from isolab.tracking.runs import load_runs

    df = load_runs(REPO / "runs" / "nstar" / "cpu" / "main", statuses=["FINISHED"])
    easy = df.filter(pl.col("split") == "easy")
    res = fr.optimal_n(easy, n_boot=0)
    assert res.status == "not identifiable" and "falls with compute" in res.reason
    rec = fr.recommend(easy, as_float(easy[ROLLOUTS].max()), n_star=res)
    smallest = as_int(easy["n"].min())
    assert "GRPO's minimum" in rec.summary and "n ∈ {2, 4} are within noise" in rec.summary
    assert rec.n == smallest == 2 and rec.edge == "smallest" and smallest in rec.within_noise
    assert any("falls with compute" in note for note in rec.notes)


def test_cli_tables_fit_100_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    from isolab.cli import analysis
    from isolab.cli.common import console

    monkeypatch.setattr(console, "width", 100)
    nan = float("nan")
    n_star = pl.DataFrame({"C": np.geomspace(1e3, 1e5, 120), "n_star": [nan] * 120})
    n_star = n_star.with_columns(n_star=pl.when(pl.col("C") > 9e4).then(4.0).otherwise(nan))
    reason = "n*(C) falls with compute (4 → 2.5): no saturation to report (the Playbook …)"
    effect = pl.DataFrame(
        {
            "metric": ["eval/avg@4", "eval/best@4"],
            "n_saturation": [nan, nan],
            "status": ["not identifiable"] * 2,
            "reason": [reason, "ok"],
        }
    )
    with console.capture() as cap:
        analysis.print_frame(n_star, "n_star")
        analysis.print_frame(effect, "metric_effect")
    text = cap.get()
    table = [line for line in text.splitlines() if line[:1] in "│┃┏┡└"]
    assert table and max(map(len, table)) <= 100
    assert "–" not in text  # the rows and the column with no finite value are left out
    assert "n_saturation" not in text and "rows without a finite value left out" in text
    assert f"[1] {reason}" in text and text.count("falls with compute") == 1
