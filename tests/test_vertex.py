"""n* as a moving optimum (issue 27): per-checkpoint vertices, their shift with compute, the
saturation gate that decides whether the shift can be tested at this scale, and Easy above Hard
at the largest compute — on planned worlds of the new nstar design with little noise, where the
truth is known."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from isolab.study.calibration import NSTAR_LONG, NSTAR_MAIN, planned_setting
from isolab.study.claims import CLAIMS
from isolab.study.nstar.claims import nstar_gate
from isolab.verdicts import effects as fx
from isolab.verdicts.calibration import world
from isolab.verdicts.claim import verdict
from isolab.verdicts.planned import design_frame
from isolab.verdicts.saturation import plateau_gate
from isolab.verdicts.vertex import vertex_shift
from isolab.vocab import EVAL_AVG, ROLLOUTS


def _quiet(study: str = "nstar", scale: float = 0.25):
    """The planned setting with its noise scaled by `scale`."""
    s = planned_setting(study)
    noise = {
        k: {m: (ev * scale, tr * scale) for m, (ev, tr) in v.items()} for k, v in s.noise.items()
    }
    return type(s)(means=s.means, noise=noise, shares=s.shares)


def test_the_planned_grid_is_the_issue_27_design():
    main = design_frame(NSTAR_MAIN)
    cfg = main.select("split", "n", "B_p").unique()
    assert cfg.height == 24 and main["run_key"].n_unique() == 72  # 12 per split × 3 seeds
    assert set(cfg.filter(pl.col("B_p") == 64)["n"]) == {2, 4, 8, 16, 32}
    big = main.filter((pl.col("n") == 128) & (pl.col("seed") == 0) & (pl.col("split") == "easy"))
    # B = 2,048 reaches the checkpoints 256 … 2,048 at its first step
    assert big[ROLLOUTS].to_list() == [0, 2048, 4096, 8192, 16384, 32768, 65536]
    long = design_frame(NSTAR_LONG)
    assert long[ROLLOUTS].max() == 131_072 and set(long["n"]) == {4}


def test_a_planned_grid_places_evaluations_as_the_sweeps_did():
    """The committed nstar/cpu/main sweep (issue 27's grid, all 72 runs) is the design the
    calibration plans (`NSTAR_MAIN`): the same runs, evaluation steps and compute."""
    from isolab import study

    s = study.get("nstar")
    real = pl.read_parquet(study.snapshot_dir(s, "cpu", "main") / "runs.parquet")
    planned = design_frame(NSTAR_MAIN)
    cols = ["split", "n", "B_p", "seed", "step", ROLLOUTS]
    assert planned.select(cols).sort(cols).equals(real.select(cols).sort(cols))


def test_a_moving_optimum_is_located_and_its_shift_recovered():
    """n* = 2^(5 + 0.5·log2(C/65,536)): every checkpoint from 2,048 qualifies, the vertices sit
    on the planted line and the slope's interval holds 0.5."""
    plant = fx.optimum(lambda lc: 5.0 + 0.5 * (lc - 16.0), 0.012, "easy")
    w = world(_quiet(), plant, seed=3)
    main = w["main"].filter(pl.col("split") == "easy")
    result, table = vertex_shift(main, EVAL_AVG, from_C=2048)
    assert table["qualifies"].all() and table.height == 6
    truth = 5.0 + 0.5 * (table["log2_C"].to_numpy() - 16.0)
    assert np.abs(table["log2_n_star"].to_numpy() - truth).max() < 0.3
    assert result.interval[0] < 0.5 < result.interval[1] and result.p_value < 1e-3


def test_flat_and_edge_optima_do_not_qualify_and_say_why():
    flat = world(_quiet(), None, seed=4)["main"].filter(pl.col("split") == "easy")
    result, table = vertex_shift(flat, EVAL_AVG)
    assert not result.ran and "curvature not significantly negative" in result.note
    edge = world(_quiet(), fx.optimum(lambda lc: np.full_like(lc, 0.5), 0.012), seed=4)
    result, _ = vertex_shift(edge["main"].filter(pl.col("split") == "easy"), EVAL_AVG)
    assert not result.ran and "optimum at the grid's lower edge at C = 65,536" in result.note


def test_a_flat_top_and_a_cliff_misfit_the_quadratic():
    """A compute shift with n = 4 best: as the curves saturate the top flattens; the quadratic's
    vertex would drift right, and the lack-of-fit test stops it from counting."""
    shift = fx.compute_shift(lambda x: -0.25 * (x - 2.0) ** 2)
    main = world(_quiet(scale=0.1), shift, seed=5)["main"].filter(pl.col("split") == "easy")
    _, table = vertex_shift(main, EVAL_AVG, from_C=2048)
    assert table.filter(pl.col("reason").str.contains("misfits")).height >= 1


def _long(values_by_seed: list[list[float]]) -> pl.DataFrame:
    C = [0.0] + [256.0 * 2**i for i in range(len(values_by_seed[0]) - 1)]
    rows = []
    for s, values in enumerate(values_by_seed):
        for step, (c, v) in enumerate(zip(C, values, strict=True)):
            rows.append(
                {
                    "run_key": f"l{s}",
                    "split": "easy",
                    "n": 4,
                    "B_p": 16,
                    "seed": s,
                    "step": step,
                    ROLLOUTS: c,
                    EVAL_AVG: v,
                    "eval_problems": 300,
                    "eval_k_samples": 16,
                }
            )
    return pl.DataFrame(rows)


def test_the_saturation_gate_passes_a_plateau_and_fails_a_climb():
    rng = np.random.default_rng(0)
    base = [0.28, 0.3, 0.33, 0.37, 0.42, 0.47, 0.5, 0.51, 0.512, 0.513, 0.513]
    plateau = [[v + 0.002 * rng.standard_normal() for v in base] for _ in range(3)]
    gate = plateau_gate(_long(plateau), None, EVAL_AVG)
    assert gate.passed and gate.upper < 0.01 and "plateaus" in gate.reason
    # three seeds alone (2 df) cannot resolve one doubling under the margin: C_sat unplaced
    assert gate.C_sat is None and "C_sat not placed" in gate.reason
    # with a main sweep lending its seed variance of slopes it is placed, on the plateau
    main = _long([[v + 0.002 * rng.standard_normal() for v in base] for _ in range(24)])
    main = main.with_columns(n=(pl.col("seed") % 8) + 10)
    gate = plateau_gate(_long(plateau), main, EVAL_AVG)
    assert gate.passed and gate.C_sat is not None and gate.C_sat >= 16384
    climbing = [[v + 0.03 * max(i - 7, 0) for i, v in enumerate(row)] for row in plateau]
    gate = plateau_gate(_long(climbing), None, EVAL_AVG)
    assert gate.ran and not gate.passed and gate.C_sat is None
    assert gate.reason.startswith("untested at this scale: n = 4 (B_p = 16) still gains +0.03")
    assert not plateau_gate(None, None, EVAL_AVG).ran


@pytest.mark.parametrize("split", ["easy", "hard"])
def test_n_star_grows_is_untested_when_n4_still_climbs_never_refuted(split):
    """A world whose optimum falls with compute (a disagree if tested) while n = 4 still gains
    0.03 per doubling at the end of `long`: the claim is untested at this scale."""
    falling = fx.optimum(lambda lc: 5.0 - 0.5 * (lc - 16.0), 0.012)

    def climb(name: str, means: pl.DataFrame) -> dict[str, np.ndarray]:
        out = falling(name, means)
        if name == "long":
            lc = fx.log2_of(means, ROLLOUTS)
            out[EVAL_AVG] = out[EVAL_AVG] + 0.03 * np.clip(lc - 15, 0, None)
        return out

    data = world(_quiet(), climb, seed=6)
    assert not nstar_gate(data, split).passed
    v = verdict(CLAIMS[f"nstar.grows_{split}"], CLAIMS[f"nstar.grows_{split}"].run(data))
    assert v.call == "inconclusive" and v.note.startswith("untested at this scale")
    assert "secondary reading (two-stage" in v.note


def test_n_star_grows_is_called_where_the_gate_passes():
    """The crossing test calls it (issue 45); the vertex slope is a secondary reading."""
    plant = fx.optimum(lambda lc: 5.0 + 0.5 * (lc - 16.0), 0.012, "easy")
    data = world(_quiet(), plant, seed=7)
    claim = CLAIMS["nstar.grows_easy"]
    v = verdict(claim, claim.run(data))
    assert v.call == "agrees" and "plateaus" in v.note and "n* grows" in v.note
    assert "secondary reading (vertex slope): +0.49" in v.note and v.statistic > 0


def test_easy_above_hard_needs_two_interior_optima():
    claim = CLAIMS["nstar.easy_above_hard"]
    both = world(_quiet(), fx.optimum_by_split(5.0, 2.5), seed=8)
    v = verdict(claim, claim.run(both))
    assert v.call == "agrees" and v.interval is not None and v.interval[0] < 2.5 < v.interval[1]
    edge = world(_quiet(), fx.optimum_by_split(5.0, 0.5, curvature_hard=0.0015), seed=8)
    v = verdict(claim, claim.run(edge))
    assert v.call == "inconclusive" and "Hard: optimum at the grid's lower edge" in v.note
    assert "Easy − Hard +" in v.note  # the boundary-proof secondary: slopes at the largest C
