"""The adaptive stopping rule run by Ray Tune (issue 32): `AdaptiveScheduler` replaying a slice
of the committed nstar/cpu/main curves stops the same arms at the same checkpoints, and spends
the same compute, as `isolab.sweep.adaptive.replay`."""

from __future__ import annotations

import signal
from pathlib import Path

import polars as pl
import pytest

from isolab.sweep.adaptive import StoppingRule, replay
from isolab.tracking.runs import load_runs

ray = pytest.importorskip("ray", reason="ray is not installed (pip install -e '.[dev]')")

from isolab.sweep.adaptive_tune import tune_replay  # noqa: E402  (needs ray)
from isolab.sweep.ray_backend import start_local_ray  # noqa: E402
from isolab.tracking.interrupts import handlers_kept  # noqa: E402

NSTAR = Path(__file__).resolve().parents[1] / "runs" / "nstar" / "cpu" / "main"


@pytest.fixture
def local_ray():
    """A local Ray instance on loopback (as the sweep's Ray backend starts one), shut down after,
    and the signal handlers ray.init sets put back."""
    if ray.is_initialized():
        pytest.skip("a Ray instance is already running in this process")
    with handlers_kept():
        try:
            start_local_ray(ray, num_cpus=2)
        except Exception as e:  # no Ray on this machine: say why instead of failing the suite
            pytest.skip(f"Ray cannot start here: {e}")
        yield
        ray.shutdown()


def test_tune_replay_stops_what_replay_stops(local_ray, tmp_path):
    # Easy split, B_p = 16: 7 arms (n = 2 … 128) × 3 seeds, 21 trials
    df = load_runs(NSTAR, statuses=["FINISHED"])
    df = df.filter((pl.col("split") == "easy") & (pl.col("B_p") == 16))
    rule = StoppingRule()
    want = replay(df, rule).arms.select("arm", "stopped_at", "spent").sort("arm")
    handler = signal.getsignal(signal.SIGINT)
    got = tune_replay(df, rule, tmp_path, pause=True)
    assert signal.getsignal(signal.SIGINT) is handler  # Tune's own is not left behind
    assert got.arms.select("arm", "stopped_at", "spent").sort("arm").equals(want)
    # the rule did stop arms, and kept n* = 4 (the full grid's best at the last checkpoint)
    stopped = dict(zip(got.arms["arm"], got.arms["stopped_at"], strict=True))
    assert stopped["n=4,B_p=16"] is None
    assert sum(v is not None for v in stopped.values()) >= 3
    assert all(r.startswith("below the best") for r in got.arms["reason"] if r)
