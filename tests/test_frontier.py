"""The frontier analysis recovers laws planted in synthetic runs, and says so when it cannot."""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import polars as pl
import pytest

from isolab import frontier as fr
from isolab.synthetic import (
    IsoComputeLaw,
    RhoLaw,
    isocompute_laws,
    make_isocompute_runs,
    make_rho_runs,
    rho_laws,
)

matplotlib.use("Agg")

TRUE = {"R0": 0.2, "A": 0.8, "C_mid": 1e5, "B": 1.5}


def planted_curve(seed: int, runs: int = 10, noise: float = 0.02) -> tuple[np.ndarray, np.ndarray]:
    """`runs` runs × 50 evaluation points (step 0 included) of the planted sigmoid plus noise."""
    C = np.tile(np.concatenate([[0.0], np.geomspace(1e3, 1e7, 49)]), runs)
    rng = np.random.default_rng(seed)
    return C, fr.sigmoid(C, **TRUE) + rng.normal(0.0, noise, C.size)


@pytest.fixture(scope="module")
def iso() -> pl.DataFrame:
    return make_isocompute_runs(seeds=2, seed=11)


@pytest.fixture(scope="module")
def rho() -> pl.DataFrame:
    return make_rho_runs(seed=3)


# ---- fit_sigmoid -----------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(5))
def test_sigmoid_recovers_planted_parameters_at_2pct_noise(seed: int) -> None:
    C, R = planted_curve(seed)
    f = fr.fit_sigmoid(C, R, seed=seed)
    assert f.status == "ok", f.reason
    for name in ("A", "B", "C_mid"):
        assert getattr(f, name) == pytest.approx(TRUE[name], rel=0.05), name
    assert pytest.approx(TRUE["R0"], abs=0.01) == f.R0
    assert f.rmse == pytest.approx(0.02, rel=0.15)  # residuals are the planted noise


def test_sigmoid_bootstrap_intervals_cover_the_truth() -> None:
    hits = {"A": 0, "B": 0, "C_mid": 0}
    for seed in range(20):
        C, R = planted_curve(100 + seed, runs=4)
        f = fr.fit_sigmoid(C, R, n_boot=200, seed=seed)
        for name in hits:
            lo, hi = getattr(f, f"{name}_ci")
            assert lo < getattr(f, name) < hi
            hits[name] += lo <= TRUE[name] <= hi
    # nominal 95%; percentile intervals run a little narrow, a broken bootstrap far narrower
    assert all(h >= 15 for h in hits.values()), hits


def test_sigmoid_residual_bootstrap_and_fixed_R0() -> None:
    C, R = planted_curve(7, runs=4)
    f = fr.fit_sigmoid(C, R, R0=0.2, bootstrap="residual", seed=1)
    assert f.R0 == 0.2 and f.R0_ci == (0.2, 0.2)
    assert pytest.approx(0.8, rel=0.05) == f.A and f.C_mid == pytest.approx(1e5, rel=0.1)
    assert f.A_ci[0] < 0.8 < f.A_ci[1]


def test_sigmoid_drops_the_early_range() -> None:
    C, R = planted_curve(3)
    R = np.where(C < 1e4, R + 0.1, R)  # a warm-up phase that does not follow the law
    biased = fr.fit_sigmoid(C, R, n_boot=0)
    clean = fr.fit_sigmoid(C, R, R0=0.2, c_min=1e4, n_boot=0)
    assert clean.n_points < biased.n_points
    assert clean.C_mid == pytest.approx(1e5, rel=0.05)
    assert abs(clean.C_mid / 1e5 - 1) < abs(biased.C_mid / 1e5 - 1)


def test_sigmoid_respects_the_bound_on_A() -> None:
    C = np.geomspace(1e3, 1e7, 60)
    R = fr.sigmoid(C, 0.3, 1.3, 1e5, 2.0)  # would want A = 1.3 > 1
    f = fr.fit_sigmoid(C, R, n_boot=0)
    assert f.A <= 1.0 and pytest.approx(1.0) == f.A
    g = fr.fit_sigmoid(C, R, bounds_A=(0.0, 2.0), n_boot=0)
    assert pytest.approx(1.3, rel=1e-3) == g.A


def test_sigmoid_escapes_local_minima_from_any_scale() -> None:
    # the same curve 5 decades to the right: a fixed starting point would be lost there
    C, R = planted_curve(1, runs=2)
    f = fr.fit_sigmoid(C * 1e5, R, n_boot=0)
    assert f.C_mid == pytest.approx(1e10, rel=0.1)
    assert pytest.approx(1.5, rel=0.1) == f.B


def test_sigmoid_degenerate_inputs_are_not_identifiable() -> None:
    C = np.geomspace(1e3, 1e6, 20)
    flat = fr.fit_sigmoid(C, np.full(20, 0.4))
    assert flat.status == "not identifiable" and "constant" in flat.reason
    assert np.isnan(flat.A) and np.isnan(flat.predict([1e4])).all()
    few = fr.fit_sigmoid([0, 1e3, 1e4], [0.1, 0.2, 0.3])
    assert few.status == "not identifiable" and "distinct compute" in few.reason
    nan = fr.fit_sigmoid(C, np.full(20, np.nan))
    assert nan.status == "not identifiable" and "no finite" in nan.reason
    with pytest.raises(ValueError, match="one R per C"):
        fr.fit_sigmoid(C, C[:-1])


def test_sigmoid_nans_are_dropped_not_fitted() -> None:
    C, R = planted_curve(2)
    R[::7] = np.nan
    f = fr.fit_sigmoid(C, R, n_boot=0)
    assert f.n_points == int(np.isfinite(R).sum())
    assert pytest.approx(0.8, rel=0.05) == f.A


def test_sigmoid_flags_an_unbent_curve_as_extrapolated() -> None:
    C = np.geomspace(1e2, 2e4, 40)  # stops well before C_mid = 1e5: A is not observed
    R = fr.sigmoid(C, **TRUE) + np.random.default_rng(0).normal(0, 0.005, C.size)
    f = fr.fit_sigmoid(C, R, n_boot=0)
    assert f.status == "extrapolated" and "has not bent" in f.reason


# ---- frontier and record points -------------------------------------------------------------
def test_frontier_and_record_points_by_hand() -> None:
    df = pl.DataFrame(
        {
            "compute/rollouts": [1.0, 2.0, 3.0, 4.0, 4.0, 5.0],
            "eval/avg@4": [0.1, 0.3, 0.2, 0.45, 0.5, 0.52],
            "run_key": ["a", "b", "a", "a", "b", "a"],
        }
    )
    f = fr.frontier(df)
    assert f["frontier"].to_list() == [0.1, 0.3, 0.3, 0.5, 0.52]
    assert f["run_key"].to_list() == ["a", "b", "b", "b", "a"]  # who holds the frontier
    exact = fr.record_points(df)
    assert exact["compute/rollouts"].to_list() == [1.0, 2.0, 4.0, 5.0]
    bucketed = fr.record_points(df, bin_width=0.25)  # buckets 0, 1, 0, 2, 2: 0.52 is noise
    assert bucketed["compute/rollouts"].to_list() == [1.0, 2.0, 4.0]
    with pytest.raises(ValueError, match="bin_width"):
        fr.record_points(df, bin_width=-1)


def test_frontier_is_the_running_max_of_a_big_table(iso: pl.DataFrame) -> None:
    f = fr.frontier(iso)
    best = iso.group_by("compute/rollouts").agg(pl.col("eval/avg@4").max()).sort("compute/rollouts")
    assert np.allclose(f["frontier"], np.maximum.accumulate(best["eval/avg@4"].to_numpy()))
    assert f.height == iso["compute/rollouts"].n_unique()


# ---- n*(C) -----------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [11, 12, 13])
def test_optimal_n_recovers_the_planted_saturation(seed: int) -> None:
    law = isocompute_laws()["eval/avg@4"]
    df = make_isocompute_runs(seeds=2, seed=seed)
    res = fr.optimal_n(df, seed=seed)
    assert res.status == "ok", res.reason
    # within one grid step (a factor 2) of the planted n_sat = 256
    assert abs(math.log2(res.n_saturation / law.n_saturation())) <= 1
    lo, hi = res.n_saturation_ci
    assert lo <= res.n_saturation <= hi
    # n* grows with compute: small n at the start, the saturation at the end
    C = res.table["C"].to_numpy()
    assert res.n_star_at(C[:1])[0] < 32 and res.n_star_at(C[-1:])[0] > 128
    # the per-n fits recover each planted midpoint C_mid(n) within 20% (n = 8 rises least)
    for row in res.per_n.iter_rows(named=True):
        assert row["C_mid"] == pytest.approx(float(law.C_mid(row["n"])), rel=0.2)


def test_optimal_n_tracks_the_true_n_star_of_the_law(iso: pl.DataFrame) -> None:
    law = isocompute_laws()["eval/avg@4"]
    res = fr.optimal_n(iso, n_boot=50)
    C = res.table["C"].to_numpy()
    late = C > 1e5  # once the curves have separated
    err = np.abs(np.log2(res.n_star_at(C[late])) - np.log2(law.n_star(C[late])))
    assert np.median(err) <= 1.0


def test_optimal_n_records_recipe_also_recovers_saturation(iso: pl.DataFrame) -> None:
    res = fr.optimal_n(iso, per_n="records", n_boot=50)
    assert abs(math.log2(res.n_saturation / 256)) <= 1


def test_metric_effect_orders_the_saturations(iso: pl.DataFrame) -> None:
    laws = isocompute_laws()
    eff = fr.metric_effect(iso, n_boot=50)
    sat = dict(zip(eff.summary["metric"], eff.summary["n_saturation"], strict=True))
    for m in fr.DEFAULT_METRICS:
        assert abs(math.log2(sat[m] / laws[m].n_saturation())) <= 1, (m, sat[m])
    # Easy-set law: a larger n serves worst@k (sharpening) more than best@k (coverage)
    assert sat["eval/best@4"] < sat["eval/avg@4"] < sat["eval/worst@4"]
    assert set(eff.table["metric"].unique()) == set(fr.DEFAULT_METRICS)


def test_metric_effect_reports_a_missing_metric(iso: pl.DataFrame) -> None:
    eff = fr.metric_effect(iso, metrics=("eval/avg@4", "eval/pass@8"), n_boot=0)
    row = eff.summary.filter(pl.col("metric") == "eval/pass@8").row(0, named=True)
    assert row["status"] == "not identifiable" and "not in the runs table" in row["reason"]


def test_optimal_n_degenerate_inputs(iso: pl.DataFrame) -> None:
    one_n = fr.optimal_n(iso.filter(pl.col("n") == 64))
    assert one_n.status == "not identifiable" and "only one n" in one_n.reason
    assert np.isnan(one_n.n_saturation)

    one_run = iso.filter(pl.col("run_key") == iso["run_key"][0])
    assert "only one n" in fr.optimal_n(one_run).reason

    flat = fr.optimal_n(iso.with_columns(pl.lit(0.5).alias("eval/avg@4")), n_boot=0)
    assert flat.status == "not identifiable" and "constant" in flat.reason

    nan = fr.optimal_n(iso.with_columns(pl.lit(float("nan")).alias("eval/avg@4")))
    assert nan.status == "not identifiable" and "no finite values" in nan.reason

    mixed = pl.concat([iso, iso.with_columns(pl.lit("hard").alias("split"))])
    with pytest.raises(ValueError, match="split"):
        fr.optimal_n(mixed)
    with pytest.raises(ValueError, match="not in the runs table"):
        fr.optimal_n(iso, y="eval/nope")


def test_optimal_n_says_when_the_largest_n_always_wins() -> None:
    # n_sat far beyond the grid: n* never saturates inside it
    law = {"eval/avg@4": IsoComputeLaw(n_sat=1 << 20, curvature=0.002, gamma=0.1)}
    df = make_isocompute_runs(law, n_grid=(8, 16, 32, 64), seeds=1, noise=0.005)
    res = fr.optimal_n(df, n_boot=0)
    assert res.status != "ok"
    assert "largest n" in res.reason


def test_optimal_n_accepts_pandas(iso: pl.DataFrame) -> None:
    res = fr.optimal_n(iso.to_pandas(), n_boot=0)
    assert isinstance(res.table, pl.DataFrame) and res.status == "ok"


# ---- fixed-batch trade-off ------------------------------------------------------------------
def test_tradeoff_fixed_batch_picks_the_planted_winners() -> None:
    # C_mid grows fast with n and the plateau slowly: small n (large B_p) rises first, large n
    # ends higher; the winners below are computed from the law, not assumed
    law = IsoComputeLaw(curvature=0.02, gamma=1.5, n_sat=256, B=1.5, C_mid_ref=1e4, bp_penalty=0)
    df = make_isocompute_runs({"eval/avg@4": law}, seeds=3, seed=4)
    res = fr.tradeoff_fixed_batch(df, 4096)
    assert res.status == "ok"
    grid = res.per_step["step"].to_numpy()
    splits = res.curves.select("B_p", "n").unique().rows()
    for row in res.winners.iter_rows(named=True):
        window = grid[(grid >= row["M_lo"]) & (grid <= row["M_hi"])]
        truth = {(bp, n): law.reward(4096 * window, n, bp).mean() for bp, n in splits}
        ranked = sorted(truth, key=truth.get, reverse=True)
        assert truth[ranked[0]] - truth[ranked[1]] > 0.02  # the design leaves a clear winner
        assert (row["B_p"], row["n"]) == ranked[0], row["regime"]
    small, large = res.winners["n"].to_list()
    assert small < large  # few steps: more problems; many steps: more rollouts per problem
    assert grid[0] <= res.crossover_M <= grid[-1]


def test_tradeoff_fixed_batch_degenerate(iso: pl.DataFrame) -> None:
    none = fr.tradeoff_fixed_batch(iso, 12345)
    assert none.status == "not identifiable" and "no runs with B" in none.reason
    single = fr.tradeoff_fixed_batch(iso, 64)  # only (B_p, n) = (8, 8)
    assert single.status == "not identifiable" and "only one split" in single.reason


# ---- ρ frontier and RACE --------------------------------------------------------------------
def test_rho_frontier_recovers_rho_star(rho: pl.DataFrame) -> None:
    laws = rho_laws()
    res = fr.rho_frontier(rho)
    assert res.fits.height == len(laws)
    for row in res.fits.iter_rows(named=True):
        assert row["status"] == "ok", row["reason"]
        assert abs(row["rho_star"] - laws[row["reward"]].rho_star) <= 0.05, row["reward"]
        assert row["rho_lo"] <= row["rho_star"] <= row["rho_hi"]
        assert row["n_runs"] == 27
    prm = res.fits.filter(pl.col("reward") == "prm").row(0, named=True)
    assert prm["share_reward_star"] > prm["share_search_star"]  # the PRM eats budget


def test_rho_frontier_empty_band_and_flat_rewards(rho: pl.DataFrame) -> None:
    empty = fr.rho_frontier(rho, (1.0, 2.0))
    assert empty.points.height == 0
    assert (empty.fits["status"] == "not identifiable").all()
    assert "no evaluation point" in empty.fits["reason"][0]
    flat = fr.rho_frontier(rho.with_columns(pl.lit(0.3).alias("eval/avg@4")))
    assert (flat.fits["status"] == "not identifiable").all()
    assert "same" in flat.fits["reason"][0]
    with pytest.raises(ValueError, match="lo < hi"):
        fr.rho_frontier(rho, (2.0, 1.0))
    old = fr.rho_frontier(rho.with_columns(pl.lit(None, pl.Float64).alias("compute/rho")), (1, 2))
    assert "no FLOP ledger" in old.fits["reason"][0]


def test_rho_frontier_without_an_interior_peak() -> None:
    monotone = {"sparse": RhoLaw(rho_star=1.5)}  # reward still rising at ρ = 0.9
    res = fr.rho_frontier(make_rho_runs(monotone, seed=1))
    row = res.fits.row(0, named=True)
    assert row["status"] == "not identifiable"
    assert np.isnan(row["rho_star"]) and row["rho_best_observed"] >= 0.8


def test_race_calls_the_planted_regimes() -> None:
    full = make_rho_runs(seed=5)
    pilot = make_rho_runs(rho_grid=(0.2, 0.5, 0.8), seeds=1, budget_flops=2e15, seed=6)
    res = fr.race(pilot, full)
    calls = dict(zip(res.table["reward"], res.table["full_regime"], strict=True))
    assert calls == {
        "sparse": "update-heavy",
        "structured": "update-heavy",
        "dense": "update-heavy",
        "proxy-prm": "search-heavy",
        "prm": "reward-heavy",
    }
    assert res.same_regime_rate == 1.0
    assert res.pilot_flops_fraction < 0.05


def test_race_reports_a_pilot_that_misses() -> None:
    full = make_rho_runs(seed=5)
    # a pilot that only tries update-heavy allocations cannot see the PRM's optimum at 0.44
    pilot = make_rho_runs(rho_grid=(0.6, 0.7, 0.8), seeds=1, budget_flops=2e15, seed=6)
    res = fr.race(pilot, full)
    prm = res.table.filter(pl.col("reward") == "prm").row(0, named=True)
    assert not prm["same"] and prm["pilot_regime"] == "update-heavy"
    assert res.same_regime_rate < 1.0


# ---- recommendation -------------------------------------------------------------------------
def test_recommend_inside_and_beyond_the_data(iso: pl.DataFrame) -> None:
    law = isocompute_laws()["eval/avg@4"]
    res = fr.optimal_n(iso, n_boot=50)
    rec = fr.recommend(iso, 1e7, n_star=res)
    assert abs(math.log2(rec.n / law.n_star(1e7)[0])) <= 1
    assert round(1e7 / (rec.n * rec.B_p)) == rec.M
    assert rec.evidence.height == iso.select("n", "B_p").unique().height
    assert rec.n_star_ci[0] <= rec.n_star <= rec.n_star_ci[1]
    assert "use n ≈" in rec.summary and not rec.notes
    far = fr.recommend(iso, 1e10, n_star=res)
    # the advice is checked on ≤ C/2 (`validate_recommend`) and goes no further than 2× the data
    c_max = float(iso["compute/rollouts"].max())
    assert far.validation[0].within and far.limit == 2 * c_max == far.advised_at
    assert far.headline.startswith("no point recommendation at C = 1e+10")
    assert any("beyond the largest compute" in note for note in far.notes)
    with pytest.raises(ValueError, match="positive"):
        fr.recommend(iso, 0)


# ---- plots -----------------------------------------------------------------------------------
def test_every_plot_draws_with_units(iso: pl.DataFrame, rho: pl.DataFrame) -> None:
    import matplotlib.pyplot as plt

    from isolab import plots

    res = fr.optimal_n(iso, n_boot=20)
    effect = fr.metric_effect(iso, n_boot=0)
    pilot = make_rho_runs(rho_grid=(0.2, 0.5, 0.8), seeds=1, budget_flops=2e15)
    fig, axes = plt.subplots(2, 3)
    ax = plots.plot_frontier(iso, axes[0, 0], result=res)
    assert "rollouts" in ax.get_xlabel() and len(ax.lines) >= 1 + res.per_n.height
    ax = plots.plot_n_star(res, axes[0, 1])
    assert ax.get_yscale() == "log" and len(ax.lines) >= 3
    ax = plots.plot_tradeoff(fr.tradeoff_fixed_batch(iso, 1024), axes[0, 2])
    assert "optimizer steps" in ax.get_xlabel() and len(ax.lines) == 5
    ax = plots.plot_metric_effect(effect, axes[1, 0])
    assert len(ax.lines) == 6
    ax = plots.plot_rho_frontier(fr.rho_frontier(rho, n_boot=0), axes[1, 1])
    assert "ρ" in ax.get_xlabel() and len(ax.lines) >= 5
    ax = plots.plot_race(fr.race(pilot, rho), axes[1, 2])
    assert "100%" in ax.get_title()
    # degenerate results draw a message instead of failing
    fig2, ax2 = plt.subplots()
    plots.plot_n_star(fr.optimal_n(iso.filter(pl.col("n") == 8)), ax2)
    assert "not identifiable" in ax2.texts[0].get_text()
    plt.close("all")


def test_optimal_n_reports_a_saturation_reached_before_the_smallest_compute() -> None:
    # C_mid independent of n (gamma = 0): the n with the highest plateau wins at every C, so
    # n*(C) is flat at the planted saturation over the whole range measured
    law = {"eval/avg@4": IsoComputeLaw(n_sat=16, gamma=0.0)}
    df = make_isocompute_runs(law, n_grid=(4, 8, 16, 32, 64), seeds=2, noise=0.01, seed=3)
    res = fr.optimal_n(df, n_boot=50)
    assert res.status == "extrapolated" and "flat" in res.reason
    assert abs(math.log2(res.n_saturation / 16)) <= 1
    lo, hi = res.n_saturation_ci
    assert lo <= res.n_saturation <= hi
    # (flat at the grid's largest n is not a saturation: see the test above)


def test_isoflop_band_takes_the_final_points_of_an_isoflop_grid() -> None:
    def runs(finals: list[float]) -> pl.DataFrame:
        rows = []
        for i, F in enumerate(finals):
            rows += [(f"r{i}", 0, 0.0), (f"r{i}", 1, F / 2), (f"r{i}", 2, F)]
        return pl.DataFrame(rows, schema=["run_key", "step", "flops/total"], orient="row")

    # IsoFLOP: every run ends within one step of the budget → each run's final point is in
    lo, hi = fr.isoflop_band(runs([1.0e10, 1.1e10, 1.3e10]))
    assert lo <= 1.0e10 and hi >= 1.3e10 and lo > 0.5e10 * 1.3  # no run's midpoint
    # runs of very different lengths → the largest band every run reaches, below the shortest
    lo, hi = fr.isoflop_band(runs([1.0e10, 4.0e10]))
    assert (lo, hi) == pytest.approx((1.0e10 / 1.5, 1.0e10))
