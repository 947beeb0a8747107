"""`recommend` checked, not asserted: ScaleRL's held-out protocol (fit on the runs up to C/2 and
C/4, predict the best allocation at C, score its regret against the noise) finds no regret
where the planted laws extrapolate and a large one where a crossover is planted after C/2; the
advice refuses budgets beyond what was checked; and the committed nstar snapshot's printed
figures, its baselines' among them, are the script's."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from isolab import frontier as fr
from isolab.synthetic import IsoComputeLaw
from isolab.vocab import EVAL_AVG, ROLLOUTS

REPO = Path(__file__).resolve().parents[1]
#: Common checkpoints, geometric in C, as the cpu sweeps evaluate: 256 … 65,536 rollouts.
CHECKPOINTS = 2.0 ** np.arange(8, 17)
C_END = float(CHECKPOINTS[-1])
NS = (2, 4, 8, 16, 32)
B_P = 16
#: ScaleRL sigmoids per n (a saturating power law in C past C_mid): small n rise first and
#: plateau low, so the best n moves 2 → 4 → 8 with compute and is 8 from C/4 on, 0.028 ahead
#: of the next at C: a law fitted on ≤ C/2 (or C/4) sees the winner at C.
LAW = IsoComputeLaw(
    R0=0.2, A_max=0.7, n_sat=8, curvature=0.03, C_mid_ref=1e3, n_ref=2, gamma=0.7, B_p_opt=B_P
)


def late_crossover(C: np.ndarray, n: int) -> np.ndarray:
    """`LAW`, but n = 32 makes a second rise of 0.25 centred at 0.75·C_END: below the others up
    to C/2 (+0.009 there), 0.1 ahead of them at C_END. No fit on ≤ C/2 can see it."""
    extra = fr.sigmoid(C, 0.0, 0.25, 0.75 * C_END, 8.0) if n == 32 else 0.0
    return LAW.reward(C, n) + extra


def world(curve: Callable[[np.ndarray, int], np.ndarray], *, seed: int, seeds: int = 3):
    """Runs of every n (B_p = 16) × `seeds`, evaluated at step 0 and every checkpoint, the
    reward `curve(C, n)` plus N(0, 0.01²) noise between seeds."""
    rng = np.random.default_rng(seed)
    C = np.concatenate([[0.0], CHECKPOINTS])
    frames = []
    for n in NS:
        for s in range(seeds):
            frames.append(
                pl.DataFrame(
                    {
                        "run_key": f"n{n}-s{s}",
                        "n": n,
                        "B_p": B_P,
                        "M": int(C_END) // (n * B_P),
                        "seed": s,
                        "step": (C // (n * B_P)).astype(int),
                        ROLLOUTS: C,
                        EVAL_AVG: np.clip(curve(C, n) + rng.normal(0.0, 0.01, C.size), 0, 1),
                    }
                )
            )
    return pl.concat(frames)


def planted_best(curve: Callable[[np.ndarray, int], np.ndarray]) -> int:
    return NS[int(np.argmax([curve(np.array([C_END]), n)[0] for n in NS]))]


@pytest.mark.parametrize("seed", [0, 1])
def test_a_law_that_extrapolates_has_no_regret(seed: int) -> None:
    checks = fr.validate_recommend(world(LAW.reward, seed=seed))
    assert [v.factor for v in checks] == [2.0, 4.0]
    for v in checks:
        assert v.C == C_END and v.seen_max == C_END / v.factor and v.configs == len(NS)
        assert dict(v.best) == {"n": planted_best(LAW.reward)} == {"n": 8}
        assert dict(v.predicted) == dict(v.best) and v.regret == 0.0
        assert v.within and v.verdict == "within noise"
        # the yardstick: two seed means of 3 seeds at the planted noise 0.01
        assert v.noise is not None and v.noise.source == "seeds"
        assert v.se == pytest.approx(0.01 * np.sqrt(2 / 3), rel=0.6)
        assert "validated by fitting on ≤ C/" in v.text and "regret 0.000" in v.text


def test_a_crossover_after_half_the_compute_is_a_large_regret_and_stops_extrapolation() -> None:
    df = world(late_crossover, seed=3)
    checks = fr.validate_recommend(df)
    for v in checks:
        assert dict(v.best) == {"n": planted_best(late_crossover)} == {"n": 32}
        assert dict(v.predicted) == {"n": 8}  # what the runs up to C/2 say, rightly
        assert v.regret > 0.08 and v.regret > 4 * v.se
        assert v.verdict == "beyond noise" and v.text.startswith("not validated")
    # the advice that failed its check gives no allocation beyond the data
    rec = fr.recommend(df, 1.5 * C_END, n_boot=0)
    assert rec.limit == C_END and rec.advised_at == C_END
    assert "failed its own check" in rec.refusal
    assert rec.headline.startswith("no point recommendation at C = 98,304")
    assert "the furthest it vouches for: at C = 65,536 use n ≈ 32" in rec.headline
    assert round(C_END / (rec.B_p * rec.n)) == rec.M
    assert any(h.startswith("not validated by fitting on ≤ C/2") for h in rec.hedges)


def test_no_point_recommendation_beyond_twice_the_data() -> None:
    df = world(LAW.reward, seed=4)
    near = fr.recommend(df, 1.5 * C_END, n_boot=0)  # within the 2× the check vouches for
    assert not near.refusal and near.advised_at == near.budget and near.limit == 2 * C_END
    # n* is 8 over the last 4× of the data: nothing moved for the advice to refuse
    assert not any("moved within the data" in h for h in near.hedges)
    assert near.n == 8 and round(1.5 * C_END / (B_P * 8)) == near.M
    assert near.headline.startswith("at C = 98,304 use n ≈ 8")
    far = fr.recommend(df, 3 * C_END, n_boot=0)
    assert far.budget == 3 * C_END and far.advised_at == 2 * C_END
    assert "3× the largest compute in the data (65,536), beyond the 2×" in far.refusal
    assert far.headline.startswith("no point recommendation at C = 196,608")
    assert "at C = 131,072 use n ≈ 8" in far.headline
    assert round(2 * C_END / (far.B_p * far.n)) == far.M
    # without the check there is no limit (and nothing printed about one)
    bare = fr.recommend(df, 3 * C_END, n_boot=0, check=False)
    assert not bare.refusal and not bare.validation and round(3 * C_END / (B_P * 8)) == bare.M


def test_validate_refuses_a_factor_that_is_no_extrapolation() -> None:
    with pytest.raises(ValueError, match="factor must be above 1"):
        fr.validate(world(LAW.reward, seed=0), lambda seen, C: fr.Prediction({}), factor=1.0)


def test_the_committed_snapshot_prints_the_scripts_figures() -> None:
    from isolab.tracking.runs import load_runs

    spec = importlib.util.spec_from_file_location(
        "recommend_regret", REPO / "scripts" / "recommend_regret.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    main = load_runs(REPO / "runs" / "nstar" / "cpu" / "main", statuses=["FINISHED"])
    hard = main.filter(pl.col("split") == "hard")
    rec = fr.recommend(hard, C_END, n_boot=0)  # what `isolab frontier` prints for it
    table = pl.DataFrame(script.nstar_main(hard)).filter(pl.col("setting") == "hard, n × B_p")
    printed = [h for h in rec.hedges if "validated by fitting on ≤ C/" in h]
    assert len(printed) == table.height == 2
    for line, row, v in zip(printed, table.iter_rows(named=True), rec.validation, strict=True):
        assert row["factor"] == v.factor and row["C"] == C_END
        assert {k: row[k] for k in ("predicted", "best", "regret", "se")} == {
            k: v.to_dict()[k] for k in ("predicted", "best", "regret", "se")
        }
        assert f"predicted {row['predicted']}, measured best {row['best']}" in line
        assert f"regret {row['regret']:.3f} (noise {row['se']:.3f})" in line
        assert row["verdict"] in line and line == v.text
        # … beside its baseline, the best seed mean at ≤ C/f, and a random arm
        assert v.baseline is not None and row["baseline_regret"] == v.baseline.regret
        assert row["world"] == script.world(v)
        assert f"baseline best seed mean at ≤ C/{v.factor:g} ({row['baseline']}): regret " in line
        assert f"a random arm: expected regret {row['random_regret']:.3f}" in line
    # … and the script's markdown row says the same
    md = script.markdown(table)
    assert f"| {table['regret'][0]:.3f} | {table['se'][0]:.3f} | {table['verdict'][0]} |" in md
