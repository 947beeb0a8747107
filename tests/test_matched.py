"""Σlr (the summed learning rate) as logged and as derived, and the readings of an n effect at
equal Σlr and at equal avg@4 (`isolab.verdicts.matched`), recovered from planted worlds."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from isolab.table import with_lr_sum
from isolab.verdicts import matched
from isolab.vocab import EVAL_AVG, EVAL_WORST, LR_SUM, ROLLOUTS, STEP


def test_lr_sum_logged_equals_lr_times_step(isolab_cache, tracking_uri):
    from mlflow.tracking import MlflowClient

    from isolab.config import RunConfig
    from isolab.rl.train import train
    from isolab.tracking import mlflow_key
    from isolab.tracking.runs import load_runs

    cfg = RunConfig(
        experiment="test-lr-sum", n=2, B_p=2, M=3, eval_every=1, eval_problems=4, eval_k_samples=4
    )
    result = train(cfg, tracking_uri=tracking_uri)
    history = MlflowClient(tracking_uri).get_metric_history(result.run_id, mlflow_key(LR_SUM))
    logged = {m.step: m.value for m in history}
    assert sorted(logged) == [0, 1, 2, 3]  # every evaluation, the base included
    lr = cfg.resolved()["lr"]
    for step, value in logged.items():
        assert value == pytest.approx(lr * step, rel=1e-6)
    df = load_runs("test-lr-sum", tracking_uri=tracking_uri)
    derived = with_lr_sum(df.drop(LR_SUM))  # what a run that never logged it reads as
    assert df[LR_SUM].to_list() == pytest.approx(derived[LR_SUM].to_list(), rel=1e-6)


def test_with_lr_sum_keeps_logged_values_and_fills_the_rest():
    df = pl.DataFrame({"lr": [1e-4, 1e-4, 2e-4], STEP: [0, 10, 10], LR_SUM: [0.0, 9e-4, None]})
    out = with_lr_sum(df)[LR_SUM].to_list()
    assert out == pytest.approx([0.0, 9e-4, 2e-3])
    assert with_lr_sum(pl.DataFrame({"x": [1]})).columns == ["x"]  # no lr: left alone


def _world(n_effect: float = 0.0, worst_effect: float = 0.0, seed: int = 0) -> pl.DataFrame:
    """An nstar-like grid under the √B rule: avg@4 = f(log2 Σlr) + `n_effect`·log2 n + a run's
    own offset + evaluation noise; worst@4 = avg@4² + `worst_effect`·log2 n (+ noise)."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in (2, 4, 8, 16, 32):
        for B_p in (16, 64):
            B = n * B_p
            lr = 1e-4 * math.sqrt(B / 256)
            for s in range(3):
                offset = rng.normal(0, 0.01)
                for k in range(0, 18):
                    C = 0 if k == 0 else 2.0 ** (k + 2)
                    step = int(C // B)
                    if k and step < 1:
                        continue
                    u = math.log2(lr * step) if step else -math.inf
                    f = 0.2 + 0.6 / (1 + math.exp(-(u + 9) / 1.5)) if step else 0.2
                    avg = f + (n_effect * math.log2(n) + offset if step else 0.0)
                    avg += rng.normal(0, 0.005)
                    worst = avg**2 + (worst_effect * math.log2(n) if step else 0.0)
                    rows.append(
                        {
                            "run_key": f"{n}-{B_p}-{s}",
                            "n": n,
                            "B_p": B_p,
                            "seed": s,
                            "lr": lr,
                            STEP: step,
                            ROLLOUTS: C,
                            EVAL_AVG: avg,
                            EVAL_WORST: worst + rng.normal(0, 0.003),
                        }
                    )
    return pl.DataFrame(rows)


def test_equal_lr_sum_finds_no_n_effect_where_reward_follows_lr_sum_alone():
    df = _world()
    at_lr = matched.factor_effect(df, EVAL_AVG, LR_SUM)
    at_c = matched.factor_effect(df, EVAL_AVG, ROLLOUTS)
    assert at_lr.interval[0] < 0 < at_lr.interval[1] and abs(at_lr.estimate) < 0.004
    # at equal compute a larger n takes fewer updates: it looks worse, though n does nothing
    assert at_c.interval[1] < -0.01
    assert at_lr.extra["r2_axis"] > 0.9


def test_equal_lr_sum_recovers_a_planted_n_effect():
    r = matched.factor_effect(_world(n_effect=0.02), EVAL_AVG, LR_SUM)
    assert r.interval[0] < 0.02 < r.interval[1] and r.estimate == pytest.approx(0.02, abs=0.005)


def test_equal_lr_sum_is_refused_where_one_checkpoint_ties_it_to_n_and_bp():
    one = _world().filter(pl.col(ROLLOUTS).is_in([0.0, 2.0**14]))
    assert not matched.factor_effect(one, EVAL_AVG, LR_SUM).ran


def test_equal_avg_reads_what_n_changes_at_the_same_reward():
    null = matched.at_equal_level(_world(n_effect=0.02), EVAL_WORST)
    assert null.interval[0] < 0 < null.interval[1] and abs(null.estimate) < 0.003
    planted = matched.at_equal_level(_world(worst_effect=0.01), EVAL_WORST)
    assert planted.estimate == pytest.approx(0.01, abs=0.003)
    assert planted.interval[0] < 0.01 < planted.interval[1]


def test_readings_sentence_names_the_three_matchings():
    text, numbers = matched.readings(_world())
    assert "at equal C:" in text and "at equal Σlr:" in text and "at equal avg@4:" in text
    assert set(numbers) >= {"main_at_equal_C", "main_at_equal_lr_sum", "at_equal_avg_worst@4"}


def test_the_lr_sum_figure_draws_one_line_per_configuration():
    from matplotlib.figure import Figure

    from isolab.plots import plot_lr_sum

    ax = Figure().subplots()
    plot_lr_sum(_world(), ax)
    assert len([ln for ln in ax.get_lines() if len(ln.get_xdata())]) == 10  # 5 n × 2 B_p
    assert ax.get_xscale() == "log" and "Σlr" in ax.get_xlabel()
