"""Study specs, the iso-compute planner and the store scan: no training, seconds in all."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import typer
import yaml
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from isolab.cli import sweep as cli_sweep
from isolab.sweep import SpecError, SweepSpec, plan_sweep
from isolab.sweep import resume as sweep
from isolab.tracking import RUN_KEY_TAG

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "studies" / "smoke.yaml"


def cli(*args: str):
    app = typer.Typer()
    cli_sweep.register(app)
    return CliRunner().invoke(app, ["sweep", *args])


def write_spec(tmp_path: Path, **changes) -> Path:
    data = yaml.safe_load(SMOKE.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_smoke_spec_plans_twelve_runs_at_equal_compute():
    plan = plan_sweep(SweepSpec.from_yaml(SMOKE))
    assert len(plan.points) == 12
    assert {d.reason for d in plan.dropped} == {
        "B = 64 over max_batch = 32",
        "B = 128 over max_batch = 32",
    }
    for p in plan.points:
        c = p.config
        assert c.experiment == "smoke" and c.B <= 32
        assert c.M == 128 // c.B and c.rollouts == 128
        assert c.eval_at_rollouts == (32, 64, 128)  # common checkpoints, geometric in C
        assert p.run_key == c.run_key and p.planned_flops > 0 and 0 < p.rho < 1
    keys = [p.run_key for p in plan.points]
    assert len(set(keys)) == 12
    assert keys == [p.run_key for p in plan_sweep(SweepSpec.from_yaml(SMOKE)).points]


def test_nstar_cpu_spec_trades_n_against_steps_at_equal_rollouts():
    plan = plan_sweep(SweepSpec.from_yaml(REPO / "studies" / "nstar" / "cpu" / "main.yaml"))
    assert {p.config.n for p in plan.points} == {2, 4, 8, 16, 32, 64, 128}
    assert {p.config.split for p in plan.points} == {"easy", "hard"}
    assert {p.config.B_p for p in plan.points} == {16, 64}
    assert all(p.config.B <= 2048 and p.config.rollouts == 65536 for p in plan.points)
    assert all(p.config.M == 65536 // p.config.B for p in plan.points)
    # B_p = 16 at every n, B_p = 64 up to n = 32 (B ≤ 2,048): 12 configurations × 2 splits × 3
    # seeds, five of B shared by both B_p (the fixed-B pairs n-vs-bp reads)
    assert len(plan.points) == 72
    pairs = {p.config.B for p in plan.points if p.config.B_p == 64} & {
        p.config.B for p in plan.points if p.config.B_p == 16
    }
    assert pairs == {128, 256, 512, 1024, 2048}


def test_isoflop_gives_each_point_the_most_steps_that_fit():
    spec = SweepSpec.from_yaml(REPO / "studies" / "smoke_isoflop.yaml")
    plan = plan_sweep(spec)
    assert len(plan.points) == 9
    for p in plan.points:
        step = p.planned_flops / p.config.M
        assert p.planned_flops <= spec.budget_flops < p.planned_flops + step
        # checkpoints are the same fractions of the FLOP budget, in this point's rollouts
        full = spec.budget_flops / step * p.config.B
        assert p.config.eval_at_rollouts[-1] == round(full)
    rho = {p.config.num_iterations: p.rho for p in plan.points if p.config.n == 4}
    assert rho[1] < rho[2] < rho[4]  # more update passes spend more on learning


def test_batch_axis_drops_points_it_cannot_divide(tmp_path):
    path = write_spec(tmp_path, axes={"n": [2, 3, 4], "B": [8, 16]}, max_batch=None)
    plan = plan_sweep(SweepSpec.from_yaml(path))
    assert sorted((p.config.n, p.config.B_p) for p in plan.points) == [
        (2, 4),
        (2, 8),
        (4, 2),
        (4, 4),
    ]
    assert {d.reason for d in plan.dropped} == {
        "B = 8 not divisible by n = 3",
        "B = 16 not divisible by n = 3",
    }


def test_plan_command_prints_the_grid_and_the_drops():
    result = cli("plan", str(SMOKE))
    assert result.exit_code == 0, result.output
    assert "12 runs" in result.output and "3 points dropped" in result.output
    assert "over max_batch" in result.output


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"axes": {"n": [], "B_p": [1]}}, "axes.n"),
        ({"budget_rollouts": 1}, "budget_rollouts"),
        ({"axes": {"n": [2], "temperture": [1.0]}}, "axes.temperture"),
        ({"axes": {"n": [1, 2], "B_p": [1]}}, "axes.n"),
        ({"base": {"n": 1}, "axes": {"B_p": [1, 2]}}, "base.n"),
        ({"axes": {"M": [2, 4]}}, "axes.M"),
        ({"budget_flops": 1.0e9}, "budget_rollouts"),
        ({"budget_rollouts": None}, "budget_rollouts"),
        ({"seeds": []}, "seeds"),
        ({"max_batch": 1}, "max_batch"),
        ({"workers": 3}, "workers"),
        ({"name": None}, "name"),
        ({"base": {"M": 10}}, "base.M"),
        ({"base": {"lr_base": "fast"}}, "base.lr_base"),
        ({"axes": {"n": [2, 2.0, 4]}}, "axes.n"),  # 2.0 is the n 2: a repeat
    ],
)
def test_bad_specs_exit_2_naming_the_field_and_start_nothing(tmp_path, changes, field):
    path = write_spec(tmp_path, **changes)
    with pytest.raises(SpecError) as info:
        plan_sweep(SweepSpec.from_yaml(path))
    assert info.value.field == field
    store = tmp_path / "store.db"
    for command in ("plan", "run"):
        args = [command, str(path)] + (
            ["--tracking-uri", f"sqlite:///{store}"] * (command == "run")
        )
        result = cli(*args)
        assert result.exit_code == 2, result.output
        assert field in result.output
    assert not store.exists()


# ---- guards: the library refuses, the command line only exits 2 with its message ---------------
def test_a_sweep_over_the_wall_time_guard_is_refused_by_every_way_to_run_it(tmp_path, monkeypatch):
    """`run_sweep` and `execute` (what a study's `collect` calls) refuse a sweep estimated at over
    168 h before the store is touched, as `isolab sweep run` does; $ISOLAB_NO_SIZE_GUARDS=1
    lets it through."""
    from isolab.config import SIZE_GUARD_ENV
    from isolab.sweep import execute, run_sweep
    from isolab.sweep.plan import MAX_WALL_HOURS, check_wall_time

    monkeypatch.delenv(SIZE_GUARD_ENV, raising=False)
    path = write_spec(tmp_path, timing={"setup_s": 100_000.0})  # 12 points: ≈ 333 h
    plan = plan_sweep(SweepSpec.from_yaml(path))
    store = tmp_path / "store.db"
    uri = f"sqlite:///{store}"
    message = f"over isolab's guard of {MAX_WALL_HOURS} h"
    with pytest.raises(ValueError, match=message):
        run_sweep(plan, uri, backend="inline")
    with pytest.raises(ValueError, match=message):
        execute(plan.points, plan, uri, backend="inline")
    result = cli("run", str(path), "--tracking-uri", uri)
    assert result.exit_code == 2 and message in result.output, result.output
    assert SIZE_GUARD_ENV in result.output
    assert not store.exists()
    check_wall_time(plan, workers=2)  # ≈ 167 h with two workers: under the guard
    monkeypatch.setenv(SIZE_GUARD_ENV, "1")
    check_wall_time(plan)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"backend": "gpu"}, "--backend"),
        ({"workers": 0}, "--workers"),
        ({"backend": "inline", "workers": 2}, "--workers"),
        ({"address": "ray://x:1"}, "--address"),
        ({"limit": 0}, "--limit"),
        ({"backend": "ray", "address": "ray://x:1"}, "--tracking-uri"),
    ],
)
def test_run_options_that_cannot_work_are_refused_before_the_store_is_touched(
    tmp_path, options, named
):
    from isolab.sweep import check_run, run_sweep

    plan = plan_sweep(SweepSpec.from_yaml(SMOKE))
    store = tmp_path / "store.db"
    with pytest.raises(ValueError, match=named):
        check_run(plan, f"sqlite:///{store}", **options)
    with pytest.raises(ValueError, match=named):
        run_sweep(plan, f"sqlite:///{store}", **options)
    assert not store.exists()


# ---- the store scan ---------------------------------------------------------------------------
def _run(client, exp, key, status, pid, host=None, start_ms=None):
    tags = {RUN_KEY_TAG: key, "isolab.pid": str(pid), "isolab.host": host or os.uname().nodename}
    run = client.create_run(exp, tags=tags, start_time=start_ms)
    if status != "RUNNING":
        client.set_terminated(run.info.run_id, status)
    return run.info.run_id


def test_scan_sorts_runs_by_liveness_and_pending_reclaims_dead_ones(tracking_uri):
    plan = plan_sweep(SweepSpec.from_yaml(SMOKE))
    keys = [p.run_key for p in plan.points]
    client = MlflowClient(tracking_uri)
    exp = client.create_experiment("smoke")
    dead = _run(client, exp, keys[0], "RUNNING", 2**22 + 7)  # no such pid
    _run(client, exp, keys[1], "RUNNING", os.getpid())  # this process: alive
    remote = _run(client, exp, keys[2], "RUNNING", 1, host="elsewhere")
    finished = _run(client, exp, keys[3], "FINISHED", 1)
    _run(client, exp, keys[3], "FAILED", 1)
    failed = _run(client, exp, keys[4], "FAILED", 1)
    # a pid that exists but started after the run: recycled, so the run's process is gone
    recycled = _run(client, exp, keys[5], "RUNNING", os.getpid(), start_ms=1_000)
    _run(client, exp, "not-a-key-of-this-plan", "RUNNING", 2**22 + 7)

    state = sweep.scan_store(plan, tracking_uri)
    assert state.finished == {keys[3]: finished}
    assert set(state.live) == {keys[1], keys[2]}
    assert state.stale == {keys[0]: [dead], keys[5]: [recycled]}
    assert state.failed == {keys[4]: [failed]}
    assert keys[2] in sweep.scan_store(plan, tracking_uri, reclaim_remote=True).stale
    assert remote

    todo, _ = sweep.pending(plan, tracking_uri)
    assert [p.run_key for p in todo] == [k for k in keys if k not in (keys[1], keys[2], keys[3])]
    assert client.get_run(dead).info.status == "FAILED"
    assert client.get_run(recycled).info.status == "FAILED"
    assert sweep.pending(plan, tracking_uri, limit=2)[0] == todo[:2]


def test_process_alive():
    assert sweep.process_alive(os.getpid())
    assert sweep.process_alive(os.getpid(), started_ms=int(time.time() * 1000))
    assert not sweep.process_alive(os.getpid(), started_ms=1_000)
    assert not sweep.process_alive(2**22 + 7)


def test_base_can_be_a_run_config_file(tmp_path):
    (tmp_path / "run.yaml").write_text("model: tiny-m\nsplit: hard\nM: 500\nlr_base: 1e-4\n")
    path = write_spec(tmp_path, base="run.yaml")
    plan = plan_sweep(SweepSpec.from_yaml(path))
    assert {p.config.split for p in plan.points} == {"hard"}
    assert {p.config.lr_base for p in plan.points} == {1e-4}  # YAML's `1e-4` string → float
    assert {p.config.M * p.config.B for p in plan.points} == {128}  # the budget sets M
