"""Issue 46's calls, re-derived from the committed snapshots: every call the review changed is
what the snapshots give, with the numbers its reason states; the old testbed is recognised from
the runs, and its clip-binding shares are recomputed from their history."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from isolab import study
from isolab.study import claims
from isolab.study.healthy_recipe import lr_exponent
from isolab.study.healthy_recipe import worlds as hw
from isolab.study.mixtures.optimum import coverage_expansion, coverage_keeps
from isolab.tracking.runs import load_runs
from isolab.verdicts import Verdict, testbed

REPO = Path(__file__).resolve().parents[1]


def _data(name: str) -> dict[str, pl.DataFrame]:
    """The study's committed sweeps, as `isolab.study.pipeline.collect` reads them."""
    s = study.get(name)
    return {w: load_runs(study.snapshot_dir(s, "cpu", w)) for w in s.sweeps}


def _verdicts(name: str) -> dict[str, Verdict]:
    return {v.claim: v for v in claims.evaluate(name, _data(name))}


def _spec(path: str) -> dict:
    return yaml.safe_load((REPO / path).read_text())


def test_the_new_testbed_is_the_nstar_specs_and_the_lr_grid_runs_on_it():
    nstar = _spec("studies/nstar/cpu/main.yaml")["base"]
    grid = _spec(lr_exponent.SPEC)["base"]
    assert nstar["pool_size"] == testbed.NEW_POOL == grid["pool_size"]
    assert grid["max_grad_norm"] == nstar["max_grad_norm"] and grid["recipe"] == nstar["recipe"]
    design = hw.planned_design()
    # every batch brackets the sqrt line with lrs two doublings below and three above it
    for (B,), part in design.group_by(["B"]):
        sqrt_lr = 5e-5 * (B / 64) ** 0.5
        assert part["lr"].min() <= sqrt_lr / 4 * 1.001 and part["lr"].max() >= sqrt_lr * 8 * 0.999
    assert sorted(design["B"].unique()) == [32, 128, 512, 2048] and design.height == 84


@pytest.mark.parametrize("sweep", sorted(testbed.CLIP_BINDING))
def test_the_old_testbeds_clip_binding_is_recomputed_from_its_history(sweep):
    """The share of steps whose grad norm exceeded the clip (1.0, TRL's default: the runs
    table has no max_grad_norm column), per configuration, lowest and highest."""
    folder = REPO / "runs" / sweep
    runs = pl.read_parquet(folder / "runs.parquet")
    assert "max_grad_norm" not in runs.columns and set(runs["pool_size"]) == {4000}
    config = [
        c
        for c in ("split", "recipe", "B", "lr_scaling", "model", "n")
        if c in runs.columns and runs[c].n_unique() > 1
    ]
    grads = pl.read_parquet(folder / "history.parquet").filter(pl.col("key") == "grad_norm")
    per_run = (
        grads.join(runs.select("run_key", *config).unique(), on="run_key")
        .group_by("run_key", *config)
        .agg((pl.col("value") > 1.0).mean().alias("share"))
    )
    shares = per_run.group_by(config).agg(pl.col("share").mean())["share"]
    assert (round(shares.min(), 2), round(shares.max(), 2)) == testbed.CLIP_BINDING[sweep]
    assert testbed.old_testbed(runs).startswith("untested (old testbed: pool 4,000, lr_base 1.5e-4")


def test_new_testbed_runs_pass_the_gate():
    assert testbed.old_testbed(pl.read_parquet(REPO / "runs/nstar/cpu/main/runs.parquet")) is None


def test_old_testbed_claims_are_untested_with_their_reasons():
    healthy = _verdicts("healthy-recipe")
    for claim in ("healthy.kl_entropy_easy", "healthy.kl_entropy_hard"):
        assert healthy[claim].call == "inconclusive" and healthy[claim].p_value is None
        assert "untested (old testbed: pool 4,000" in healthy[claim].note
    size = _verdicts("model-size")["size.best_n_depends"]
    assert size.call == "inconclusive" and size.note.endswith("tiny-l gets 12–50 steps")


def test_sqrt_scaling_is_read_on_the_new_testbeds_grid_not_the_old_contest():
    """The old lr-scaling runs (old testbed) made the call untested; the pre-registered (B, lr)
    grid on the new testbed locates the best lr at all four B, and its exponent, 0.50 [0.46,
    0.54], is inside sqrt's margin and rejects constant and linear."""
    healthy = _verdicts("healthy-recipe")
    lr = healthy["healthy.lr_sqrt"]
    assert lr.call == "agrees" and lr.statistic == pytest.approx(0.501, abs=0.001)
    assert lr.interval[0] > 0.25 and lr.interval[1] < 0.75
    assert "e = 0 (constant) p = 2.1e-36" in lr.note and "e = 1 (linear) p = 2.9e-36" in lr.note
    assert "old testbed" not in lr.note.split("Robustness")[0].lower()


def test_the_pilot_locates_no_optimum_so_its_exponent_has_no_interval():
    """One seed per (B, lr) at the testbed's noise (Easy 0.020, Hard 0.008): no batch's
    curvature is resolved, and the grid's own best lr gives e ≈ 0.33 on Easy."""
    pilot = load_runs(REPO / "runs/pilot/lr-cpu")
    easy = lr_exponent.best_lr_exponent(pilot.filter(pl.col("split") == "easy"), noise_sd=0.020)
    assert not easy.ran and "located at 0 of 2 batches" in easy.note
    assert easy.extra["argmax_exponent"] == pytest.approx(1 / 3, abs=1e-6)
    hard = lr_exponent.best_lr_exponent(pilot.filter(pl.col("split") == "hard"), noise_sd=0.008)
    assert not hard.ran and hard.extra["argmax_exponent"] == pytest.approx(0.5, abs=1e-6)


def test_non_monotone_hard_is_untested_where_the_advantage_never_changes_sign():
    v = _verdicts("n-vs-bp")
    hard = v["nvsbp.nonmonotone_hard"]
    assert hard.call == "inconclusive" and hard.note.startswith("untested: no sign change")
    assert "+0.0001 at C = 256" in hard.note and "-0.0050 at C = 65,536" in hard.note
    bp = v["nvsbp.bp_matters_little"]
    assert bp.call == "agrees" and "caveat: only 2 B_p levels (16, 64: a 4× range)" in bp.note
    assert "+0.0140 ± 0.0010 (SE) on Easy" in bp.note and "Hard 0.018 (" in bp.note


def test_bestk_claims_are_untested_where_every_n_is_past_the_optimum():
    v = _verdicts("bestk-worstk")
    for claim, reading in (
        ("bestk.worst_easy", "worst@4 at equal avg@4 +0.0043"),
        ("bestk.best_hard", "best@4 at equal avg@4 +0.0011"),
    ):
        assert v[claim].call == "inconclusive", claim
        assert v[claim].note.startswith("untested: every n tested is past the optimum")
        assert reading in v[claim].note


def test_never_coverage_is_untested_with_the_numbers_that_say_why():
    never = _data("mixtures")["never"]
    r = coverage_expansion(never)
    assert not r.ran and r.note.startswith("untested: every n peaks near eval/best@16 0.76")
    assert "the n read 0.746/0.743/0.768" in r.note and "n = 2: 0.746 → 0.561" in r.note
    keeps = coverage_keeps(never)
    assert keeps.estimate == pytest.approx(0.0517, abs=1e-4) and keeps.p_value < 0.04
    v = _verdicts("mixtures")["mixtures.never_coverage"]
    assert v.call == "inconclusive" and "a larger n keeps coverage at equal compute" in v.note


def test_rho_keeps_its_call_with_the_knob_caveat():
    v = _verdicts("reward-rho")["rho.rule_above_model"]
    assert v.call == "agrees"
    assert v.note.startswith("caveat: all 6 reward systems do best at k = 1 (no oversampling)")


@pytest.mark.parametrize(
    "name", ["n-vs-bp", "bestk-worstk", "mixtures", "reward-rho", "healthy-recipe", "model-size"]
)
def test_the_committed_findings_carry_the_calls_the_snapshots_give(name):
    """Each claim's own call (`per_claim_call` where the family-wise call sits beside it)."""
    committed = json.loads((REPO / "runs" / name / "cpu" / "findings.json").read_text())
    calls = {v["claim"]: v.get("per_claim_call", v["call"]) for v in committed["verdicts"]}
    assert calls == {c: v.call for c, v in _verdicts(name).items()}
