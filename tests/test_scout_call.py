"""The scout's pre-registered reading (`scripts/scout_call.py`, issue 45) on snapshots built from
the two landed n = 4 runs: no call before all six runs land, a planted late crossing called,
arms that stay behind not."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import polars as pl
import pytest

from isolab.tracking.snapshot import read_snapshot
from isolab.vocab import EVAL_AVG, ROLLOUTS

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("scout_call", ROOT / "scripts" / "scout_call.py")
scout = importlib.util.module_from_spec(spec)
spec.loader.exec_module(scout)


@pytest.fixture(scope="module")
def n4() -> pl.DataFrame:
    return read_snapshot(ROOT / "runs" / "chunks" / "nstar-cpu-scout", None).filter(
        pl.col("n") == 4
    )


def _world(n4: pl.DataFrame, shift) -> pl.DataFrame:
    """n = 8 and 16 as n = 4's runs (their own seed noise) plus `shift(n, log2 C)`, each
    checkpoint rounded up to its own batch."""
    arms = [n4]
    for n in (8, 16):
        lc = pl.col(ROLLOUTS).cast(pl.Float64).log(2)
        moved = n4.with_columns(
            pl.lit(n, dtype=n4.schema["n"]).alias("n"),
            pl.col("run_key") + f"-n{n}",
            # each arm's checkpoints round up to its own batch B = 16 n, as in the scout
            ((pl.col(ROLLOUTS) / (16 * n)).ceil() * 16 * n).alias(ROLLOUTS),
            (pl.col(EVAL_AVG) + shift(n, lc)).alias(EVAL_AVG),
        )
        arms.append(moved)
    return pl.concat(arms)


def _save(df: pl.DataFrame, tmp_path: Path) -> Path:
    (tmp_path / "runs.parquet").parent.mkdir(parents=True, exist_ok=True)
    df.write_parquet(tmp_path / "runs.parquet")
    return tmp_path


def test_no_call_before_all_six_runs_land(n4, tmp_path, capsys):
    assert scout.main(["", str(_save(n4, tmp_path))]) == scout.NOT_READ
    assert "2 of 6 scout runs have landed" in capsys.readouterr().out


def test_a_planted_late_crossing_is_called(n4, tmp_path, capsys):
    # n = 16 behind by 0.2 at C = 1,024, level at 2^14, ahead by 0.15 at the budget
    def shift(n, lc):
        return (n == 16) * (0.2 / 4 * (lc - 14)).clip(-0.2, 0.15) - (n == 8) * 0.05

    assert scout.main(["", str(_save(_world(n4, shift), tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "call (pre-registered, nstar.scout_crossover): agrees" in out
    assert "n = 16" in out


def test_arms_that_stay_behind_are_not_called(n4, tmp_path, capsys):
    def shift(n, lc):  # larger n behind everywhere, by less late than early
        return -(0.3 - 0.01 * lc) * math.log2(n / 4) / 2

    assert scout.main(["", str(_save(_world(n4, shift), tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "agrees" not in out.split("call (pre-registered")[1]
