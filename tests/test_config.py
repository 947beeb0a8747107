import math

import pytest

from isolab.config import DEFAULT_BETA, DEFAULT_ENTROPY_COEF, RunConfig


def test_derived_quantities_and_sqrt_lr_rule():
    cfg = RunConfig(n=16, B_p=16, M=10, lr_base=1e-4, B_base=64)
    assert cfg.B == 256 and cfg.rollouts == 2560
    assert math.isclose(cfg.lr, 1e-4 * math.sqrt(256 / 64))
    assert math.isclose(cfg.replace(lr_scaling="linear").lr, 4e-4)
    assert math.isclose(cfg.replace(lr_scaling="const").lr, 1e-4)


def test_auto_recipe_regularises_easy_not_hard():
    easy, hard = RunConfig(split="easy"), RunConfig(split="hard")
    assert (easy.resolved_beta, easy.resolved_entropy_coef) == (DEFAULT_BETA, DEFAULT_ENTROPY_COEF)
    assert (hard.resolved_beta, hard.resolved_entropy_coef) == (0.0, 0.0)
    assert RunConfig(split="hard", beta=0.1).resolved_beta == 0.1  # explicit wins
    assert RunConfig(split="easy", recipe="kl").resolved_entropy_coef == 0.0


def test_run_key_is_deterministic_and_config_sensitive():
    assert RunConfig().run_key == RunConfig().run_key
    assert RunConfig(n=4).run_key != RunConfig(n=8).run_key
    assert RunConfig(n=16, B_p=4).run_name == "tiny-m·easy·n16·bp4"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"n": 1}, "n = 1"),
        ({"B_p": 0}, "B_p"),
        ({"lr_scaling": "cubic"}, "lr_scaling"),
        ({"recipe": "magic"}, "recipe"),
        ({"split": "medium"}, "split"),
        ({"eval_k_samples": 2, "eval_ks": (1, 4)}, "eval_k_samples"),
        ({"temperature": 0.0}, "temperature"),
    ],
)
def test_bad_values_name_the_field(changes, field):
    with pytest.raises(ValueError, match=field):
        RunConfig(**changes)


def test_yaml_round_trip_and_unknown_field(tmp_path):
    cfg = RunConfig(n=4, B_p=2, eval_at_rollouts=(8, 64))
    path = tmp_path / "run.yaml"
    cfg.to_yaml(path)
    assert RunConfig.from_yaml(path) == cfg
    path.write_text("n: 4\nrollouts_per_problem: 3\n")
    with pytest.raises(ValueError, match="rollouts_per_problem"):
        RunConfig.from_yaml(path)
