"""Sweep `combos`: fields that vary together, crossed with the axes. No training, seconds."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from isolab.cli import sweep as cli_sweep
from isolab.sweep import SpecError, SweepSpec, plan_sweep, split_sizes

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "studies" / "smoke.yaml"

#: Run keys of committed specs, computed before `combos` existed: sweeps resume by run key, so
#: a spec without combos must plan exactly these.
KEYS = {
    "studies/smoke.yaml": [
        "c64455a5c683f993",
        "06f92f5c584c552f",
        "77b93aaa5108eff9",
        "ba006f1f41fdf43c",
        "368e6198149b000c",
        "443fd969a85a3aa9",
        "6cd56370cb33c0a3",
        "c2347f455fa802c4",
        "0b2f9cf5d309d372",
        "d10ffee30d15c9a9",
        "be19509d5f15bf29",
        "4f3e94c9875ab110",
    ],
    "studies/nstar/smoke/main.yaml": [
        "60c31e3a92afaba1",
        "7b2c8d221c696153",
        "5ce490e711f361f2",
        "a1051190c3062324",
        "588b7f843eec5116",
        "e950e7f05abcd19f",
    ],
    "studies/reward-rho/smoke/full.yaml": [
        "23eed81fae73a99c",
        "7e965a4218cda0ba",
        "e669d4fdd870b024",
        "483d3ad1a5851128",
        "c9c060ff7b1c7814",
        "2930ff810786da66",
        "91a3d4f61b85135e",
        "018d9bcc1f09e6b0",
        "0eeec58ca6c09f51",
    ],
}

#: The (k, μ) pairs of the reward-rho study (issue 27): six, not the twelve of the product.
PAIRS = [(8, 1), (4, 1), (2, 1), (1, 1), (1, 2), (1, 4)]
REWARDS = ["sparse", "structured", "dense", "orm", "prm", "proxy-prm"]
EXAMPLE = {
    "name": "combos-example",
    "base": {
        "model": "tiny-m",
        "split": "easy",
        "n": 8,
        "B_p": 8,
        "eval_problems": 16,
        "eval_k_samples": 4,
    },
    "axes": {"reward": REWARDS},
    "combos": [{"search_oversample": k, "num_iterations": mu} for k, mu in PAIRS],
    "budget_flops": 2.4e11,
    "seeds": [0],
}


def cli(*args: str):
    app = typer.Typer()
    cli_sweep.register(app)
    return CliRunner().invoke(app, ["sweep", *args])


def smoke(**changes) -> dict:
    data = yaml.safe_load(SMOKE.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


@pytest.mark.parametrize("path", sorted(KEYS))
def test_specs_without_combos_keep_their_run_keys(path):
    spec = SweepSpec.from_yaml(REPO / path)
    assert spec.combos == ()
    assert [p.run_key for p in plan_sweep(spec).points] == KEYS[path]
    assert [p.run_key for p in plan_sweep(spec, split_sizes(spec)).points] == KEYS[path]


def test_combos_cross_the_axes_and_the_plan_table_shows_their_fields(tmp_path, monkeypatch):
    spec = SweepSpec.from_dict(EXAMPLE)
    assert spec.varying == ("reward", "search_oversample", "num_iterations")
    plan = plan_sweep(spec)
    got = [
        (p.config.reward, p.config.search_oversample, p.config.num_iterations) for p in plan.points
    ]
    assert got == [(r, k, mu) for r in REWARDS for k, mu in PAIRS]  # 6 × 6, in spec order
    assert not plan.dropped
    for p in plan.points:
        assert p.values == {
            "reward": p.config.reward,
            "search_oversample": p.config.search_oversample,
            "num_iterations": p.config.num_iterations,
            "seed": 0,
        }
        assert 0 < p.planned_flops <= spec.budget_flops
    path = tmp_path / "combos.yaml"
    path.write_text(yaml.safe_dump(EXAMPLE))
    monkeypatch.setattr(cli_sweep.console, "width", 250)  # room for every column's name
    result = cli("plan", str(path))
    assert result.exit_code == 0, result.output
    assert "36 runs" in result.output
    header = next(line for line in result.output.splitlines() if "run key" in line)
    assert "reward" in header and "search_oversample" in header and "num_iterations" in header


def test_combos_get_the_budget_and_the_batch_cap():
    """IsoCompute counts every generated rollout (k·B per step); max_batch drops a combo's
    point with the combo's values; `B` in combos fixes the batch as on an axis."""
    data = smoke(
        axes={"lr_base": [5e-5, 1e-4]},
        combos=[
            {"n": 4, "B_p": 2, "search_oversample": 1},
            {"n": 4, "B_p": 2, "search_oversample": 4},
            {"n": 8, "B_p": 8, "search_oversample": 1},  # B = 64 > max_batch 32
            {"n": 16, "B_p": 2, "search_oversample": 8},  # 8·32 rollouts per step > 128
        ],
    )
    plan = plan_sweep(SweepSpec.from_dict(data))
    assert {(p.config.search_oversample, p.config.M) for p in plan.points} == {(1, 16), (4, 4)}
    assert all(p.config.rollouts == 128 for p in plan.points)
    reasons = {(d.values["n"], d.values["lr_base"]): d.reason for d in plan.dropped}
    assert reasons == {
        (8, 5e-5): "B = 64 over max_batch = 32",
        (8, 1e-4): "B = 64 over max_batch = 32",
        (16, 5e-5): "budget 128 rollouts < one step of search_oversample·B = 256",
        (16, 1e-4): "budget 128 rollouts < one step of search_oversample·B = 256",
    }
    batch = smoke(axes=None, combos=[{"n": 2, "B": 8}, {"n": 4, "B": 8}, {"n": 3, "B": 8}])
    plan = plan_sweep(SweepSpec.from_dict(batch))  # no axes: the combos alone make the grid
    assert [(p.config.n, p.config.B_p) for p in plan.points] == [(2, 4), (4, 2)]
    assert [d.reason for d in plan.dropped] == ["B = 8 not divisible by n = 3"]


AXIS_N = {"n": [2, 4]}


@pytest.mark.parametrize(
    ("axes", "combos", "field", "fix"),
    [
        (AXIS_N, [], "combos", "or remove the key"),
        (AXIS_N, None, "combos", "or remove the key"),
        (AXIS_N, {"B_p": 2}, "combos", "give a list of mappings"),
        (AXIS_N, [5], "combos[0]", "give a mapping"),
        (AXIS_N, [{"B_p": 1}, {}], "combos[1]", "give a mapping"),
        (AXIS_N, [{"M": 4}], "combos[0].M", "set by the budget"),
        (AXIS_N, [{"seed": 1}], "combos[0].seed", "top-level `seeds`"),
        (AXIS_N, [{"temperture": 1.0}], "combos[0].temperture", "Sweepable fields"),
        (AXIS_N, [{"n": 8, "B_p": 1}], "combos[0].n", "either under axes"),
        (AXIS_N, [{"B_p": 1, "lr_base": 1e-4}, {"B_p": 2}], "combos[1].lr_base", "missing"),
        (AXIS_N, [{"B_p": 1}, {"B_p": 2, "lr_base": 1e-4}], "combos[1].lr_base", "not in combos"),
        (AXIS_N, [{"B_p": 1}, {"B_p": 0}], "combos[1].B_p", "B_p = 0"),
        (AXIS_N, [{"B_p": 1}, {"B_p": 1.0}], "combos[1]", "repeats combos[0]"),
        ({"B_p": [1, 2]}, [{"n": 4, "B": 8}], "combos[0].B", "not both"),
        (AXIS_N, [{"B": 1}], "combos[0].B", "integers ≥ 2"),
        (AXIS_N, [{"eval_ks": [1]}], "metric", "add 4"),
    ],
)
def test_bad_combos_name_the_field_and_the_fix(tmp_path, axes, combos, field, fix):
    data = smoke(axes=axes)
    data["combos"] = combos
    with pytest.raises(SpecError) as info:
        plan_sweep(SweepSpec.from_dict(data))
    assert info.value.field == field
    assert fix in str(info.value)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    result = cli("plan", str(path))
    assert result.exit_code == 2 and field in result.output, result.output


def test_the_grid_size_guard_counts_the_combos(monkeypatch):
    from isolab.config import SIZE_GUARD_ENV

    monkeypatch.delenv(SIZE_GUARD_ENV, raising=False)
    combos = [{"lr_base": 1e-5 * (i + 1)} for i in range(400)]
    data = smoke(axes={"n": [2, 4, 8, 16]}, combos=combos)  # 4 × 400 × 4 seeds
    data["seeds"] = [0, 1, 2, 3]
    with pytest.raises(SpecError, match="6,400 grid points"):
        plan_sweep(SweepSpec.from_dict(data))
