import math
from pathlib import Path

import pytest
import yaml

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
    # Fields added later change no key at their defaults (committed runs keep theirs) ...
    assert RunConfig().run_key == "ce43fa5186ce557a"
    # ... and define a new configuration when set.
    assert RunConfig(train_limit=128).run_key != RunConfig().run_key


def test_train_limit_caps_the_training_problems_only(isolab_cache):
    from isolab.rl.prepare import prepare

    *_, train_full, val_full = prepare(RunConfig())
    *_, train_32, val_32 = prepare(RunConfig(train_limit=32))
    assert len(train_32) == 32 < len(train_full)
    assert train_32 == train_full[:32]
    assert val_32 == val_full
    with pytest.raises(ValueError, match="train_limit = 4: must be ≥ B_p = 8"):
        RunConfig(train_limit=4, B_p=8)


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


# ---- typed fields: YAML, --set and Python alike ------------------------------------------------
@pytest.mark.parametrize(
    ("yaml_text", "field", "value"),
    [
        ("lr_base: 5e-5\n", "lr_base", 5e-5),  # PyYAML reads 5e-5 as a string
        ("n: 8.0\n", "n", 8),
        ("eval_ks: [1, 4.0]\n", "eval_ks", (1, 4)),
        ("gradient_checkpointing: yes\n", "gradient_checkpointing", True),
    ],
)
def test_yaml_values_are_typed_by_their_field(tmp_path, yaml_text, field, value):
    path = tmp_path / "run.yaml"
    path.write_text(yaml_text)
    got = getattr(RunConfig.from_yaml(path), field)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"n": 8.5}, "n = 8.5: must be a whole number"),
        ({"n": True}, "n = True: a count"),
        ({"lr_base": "fast"}, "lr_base = 'fast'"),
        ({"lr_base": float("inf")}, "lr_base = inf: must be a finite number"),
        ({"temperature": float("nan")}, "temperature = nan: must be a finite number"),
        ({"beta": float("-inf")}, "beta = -inf: must be a finite number"),
        ({"experiment": 2024}, "experiment = 2024: .*quote it"),
        ({"model": ""}, "model = '': must not be empty"),
        ({"eval_ks": [1, "x"]}, "eval_ks.1 = 'x'"),
        ({"extra": {"grpo": {"learning_rate": 1e-6}}}, "extra.grpo.learning_rate: .*set lr_base"),
        ({"extra": {"grpo": {"report_to": "wandb"}}}, "extra.grpo.report_to: .*MLflow"),
        ({"extra": {"grpo": {"num_generations": 4}}}, "extra.grpo.num_generations: .*set n"),
        ({"extra": {"grpo": {"top_pp": 0.9}}}, "extra.grpo.top_pp: not a field of TRL"),
        ({"extra": {"grpo": [1]}}, "extra.grpo = \\[1\\]"),
        ({"extra": {"rewardmodel": "x"}}, "extra.rewardmodel: not a key isolab reads"),
    ],
)
def test_wrong_types_and_trl_passthrough_name_the_field(changes, message):
    with pytest.raises(ValueError, match=message):
        RunConfig.from_dict(changes)


def test_a_trl_field_isolab_does_not_set_passes_through():
    cfg = RunConfig.from_dict({"extra": {"grpo": {"top_p": 0.9, "loss_type": "dr_grpo"}}})
    assert cfg.extra["grpo"]["top_p"] == 0.9


def test_isolab_refuses_exactly_the_grpo_fields_it_sets(tmp_path):
    """TRL_OWNED is the set of keys `grpo_args` passes to GRPOConfig (kept in sync by this test)."""
    from isolab.rl.prepare import grpo_args
    from isolab.trl_args import TRL_OWNED, grpo_config_fields

    seen: dict = {}

    class Recorder:
        def __init__(self, **kwargs):
            seen.update(kwargs)

    import trl

    mp = pytest.MonkeyPatch()
    mp.setattr(trl, "GRPOConfig", Recorder)
    try:
        grpo_args(RunConfig(), str(tmp_path), 6)
        grpo_args(RunConfig(generation="hf"), str(tmp_path), 6)
    finally:
        mp.undo()
    vllm_keys = {"vllm_mode", "vllm_max_model_length", "vllm_enable_sleep_mode"}
    assert set(seen) | vllm_keys == set(TRL_OWNED)
    assert set(TRL_OWNED) <= grpo_config_fields()


def test_empty_config_file_and_sweep_spec_are_refused_with_the_fix(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing yet\n")
    with pytest.raises(ValueError, match="the file is empty"):
        RunConfig.from_yaml(empty)
    spec = REPO / "studies" / "nstar" / "cpu" / "main.yaml"
    with pytest.raises(ValueError, match="this is a sweep spec.*isolab sweep plan"):
        RunConfig.from_yaml(spec)
    with pytest.raises(ValueError, match="not a file"):
        RunConfig.from_yaml(tmp_path)
    binary = tmp_path / "weights.bin"
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(ValueError, match="not a readable YAML"):
        RunConfig.from_yaml(binary)


def test_set_overrides_are_typed_and_reach_nested_fields():
    from isolab.config import apply_overrides

    base = {"n": 8, "extra": {}}
    data = apply_overrides(base, ["n=16", "lr_base=1e-5", "extra.grpo.top_p=0.9"])
    cfg = RunConfig.from_dict(data)
    assert (cfg.n, cfg.lr_base, cfg.extra) == (16, 1e-5, {"grpo": {"top_p": 0.9}})
    assert base == {"n": 8, "extra": {}}  # the caller's dict is not changed
    with pytest.raises(ValueError, match="n is not a mapping"):
        apply_overrides(base, ["n.x=1"])
    with pytest.raises(ValueError, match="FIELD=VALUE"):
        apply_overrides(base, ["n"])


def test_with_overrides_derives_a_checked_config_from_set_text_and_fields():
    """`--set` text and a sweep's field values derive a config one way, checked as a file is."""
    base = RunConfig(n=8, extra={"grpo": {"top_k": 5}})
    cfg = base.with_overrides(["n=16", "extra.grpo.top_p=0.9"], B_p=4)
    assert (cfg.n, cfg.B_p, cfg.extra) == (16, 4, {"grpo": {"top_k": 5, "top_p": 0.9}})
    assert base.extra == {"grpo": {"top_k": 5}}  # the base config is not changed
    assert base.with_overrides() == base
    with pytest.raises(ValueError, match="n = 8.5"):
        base.with_overrides(["n=8.5"])
    with pytest.raises(ValueError, match=r"unknown RunConfig field\(s\) \['nn'\]"):
        base.with_overrides(nn=4)
    with pytest.raises(ValueError, match="FIELD=VALUE"):
        base.with_overrides(["n"])


# ---- examples and the README's config ---------------------------------------------------------
REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


def test_there_is_an_example_per_common_case():
    names = {p.stem for p in EXAMPLES}
    assert {"tiny-easy", "tiny-hard", "tiny-prm", "smollm2-lora-gsm8k", "qwen-gpu-vllm"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_is_a_valid_run_config(path):
    cfg = RunConfig.from_yaml(path)
    if cfg.model.startswith("tiny"):  # planned offline: the tiny presets ship with isolab
        from isolab.planning import plan_config

        plan = plan_config(cfg)
        assert plan["flops/total"] > 0 and 0 < plan["compute/rho"] <= 1


def test_the_documented_config_is_the_tiny_easy_example():
    readme = (REPO / "docs" / "commands.md").read_text()
    block = readme.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert yaml.safe_load(block) == yaml.safe_load(
        (REPO / "examples" / "tiny-easy.yaml").read_text()
    )


def test_version_and_commands_refuse_a_sweep_spec(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from isolab import __version__
    from isolab.cli import app

    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.strip() == f"isolab {__version__}"
    spec = str(REPO / "studies" / "nstar" / "cpu" / "main.yaml")
    for command in ("train", "flops"):
        res = runner.invoke(app, [command, spec])
        assert res.exit_code == 2 and "isolab sweep run" in res.output, res.output
    res = runner.invoke(app, ["flops", str(REPO / "examples" / "tiny-easy.yaml"), "--set", "n=8.5"])
    assert res.exit_code == 2 and "n = 8.5" in res.output
