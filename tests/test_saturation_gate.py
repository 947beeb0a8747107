"""The saturation gate reads a plateau (issue 45): on rising-then-flat curves with a planted
break, C_sat falls within a doubling after the break and never before it; a curve still rising
at the end does not pass. The full calibration is `benchmarks/nstar_calibration.py` (tables in
docs/statistics.md)."""

from __future__ import annotations

import math

import polars as pl
import pytest

from isolab.synthetic import PlateauLaw, make_plateau_runs
from isolab.verdicts.saturation import plateau_gate
from isolab.vocab import EVAL_AVG


def _gate(law: PlateauLaw, seed: int, rule: str = "first", **kw):
    df = make_plateau_runs(law, seed=seed, **kw)
    return plateau_gate(
        df.filter(pl.col("n") == 4), df.filter(pl.col("n") != 4), EVAL_AVG, rule=rule
    )


def test_a_steep_rise_then_a_long_plateau_puts_c_sat_at_the_break_not_at_the_start():
    """Rising 0.04 per doubling from 2^8 to 2^13, flat to 2^17. The window from 2^8 to C_max
    averages to 0.04·5/9 ≈ 0.02 per doubling, from 2^10 to 0.04·3/7 ≈ 0.017 … and the windows
    to C_max alone (the gate before issue 45, `rule="tail"`) let C_sat fall in the rise; its
    first doubling does not."""
    law = PlateauLaw(break_log2C=13.0, gain=0.04)
    gate = _gate(law, seed=1, seeds=8, seed_sd=0.01)
    assert gate.passed and gate.C_sat is not None
    assert 13.0 <= math.log2(gate.C_sat) <= 14.0
    first = gate.windows.filter((pl.col("doublings") == 1) & (pl.col("start_C") == gate.C_sat)).row(
        0, named=True
    )
    assert first["passes"] and first["end_C"] == 2 * gate.C_sat
    old = _gate(law, seed=1, rule="tail", seeds=8, seed_sd=0.01)
    assert old.C_sat is not None and math.log2(old.C_sat) < 13.0  # the old gate, in the rise


@pytest.mark.parametrize(
    ("brk", "gain", "per_doubling", "seeds"),
    [(11.0, 0.03, 1, 8), (12.5, 0.05, 2, 8), (14.0, 0.03, 2, 3), (12.0, 0.02, 1, 3)],
)
def test_c_sat_is_never_before_the_break_and_within_a_doubling_after_it(
    brk, gain, per_doubling, seeds
):
    law = PlateauLaw(break_log2C=brk, gain=gain)
    for seed in range(3):
        gate = _gate(law, seed, seeds=seeds, per_doubling=per_doubling, seed_sd=0.01)
        assert gate.passed and gate.C_sat is not None, gate.reason
        assert brk <= math.log2(gate.C_sat) <= brk + 1, (seed, gate.C_sat)


def test_a_curve_still_rising_at_the_end_does_not_pass():
    for seed in range(3):
        gate = _gate(PlateauLaw(break_log2C=18.0, gain=0.03), seed, seeds=8, per_doubling=2)
        assert gate.ran and not gate.passed and gate.C_sat is None
        assert gate.reason.startswith("untested at this scale")
