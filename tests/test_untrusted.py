"""Inputs isolab must not trust: model folders that ship their own Python code, settings and
models refused only once a run existed, and names that would become paths outside isolab's
folders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from isolab.cli import app
from isolab.config import RunConfig
from isolab.paths import name_path, presets_dir

#: A module that leaves `marker` when imported: transformers runs a copy of it from its modules
#: cache, so the marker's path is written into the code.
CODE = """
import pathlib
pathlib.Path({marker!r}).write_text("this code ran")
{body}
"""
CONFIG_CLASS = """
from transformers import PretrainedConfig
class EvilConfig(PretrainedConfig):
    model_type = "isolab_evil"
"""
MODEL_CLASS = """
from transformers import LlamaForCausalLM
class EvilForCausalLM(LlamaForCausalLM):
    pass
"""


def _own_code(folder: Path, markers: Path, auto_map: dict[str, str]) -> None:
    """Write each module `auto_map` names into `folder`, each leaving a file in `markers`."""
    for target in auto_map.values():
        module = target.split(".")[0]
        body = CONFIG_CLASS if module.startswith("configuration") else MODEL_CLASS
        marker = str(markers / f"RAN-{module}")
        (folder / f"{module}.py").write_text(CODE.format(marker=marker, body=body))


@pytest.fixture
def remote_code_folder(tmp_path: Path) -> Path:
    """A model folder whose config names its own configuration module (transformers'
    `auto_map`): loading it with trust_remote_code runs that module, which leaves a file."""
    folder = tmp_path / "evil-rm"
    folder.mkdir()
    auto_map = {"AutoConfig": "configuration_evil.EvilConfig"}
    _own_code(folder, tmp_path, auto_map)
    config = {
        "model_type": "isolab_evil",
        "auto_map": auto_map,
        "hidden_size": 8,
        "num_hidden_layers": 1,
    }
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _ran(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.glob("RAN-*"))


def _no_runs(uri: str) -> None:
    if Path(uri.removeprefix("sqlite:///")).exists():
        client = MlflowClient(uri)
        exps = [e.experiment_id for e in client.search_experiments()]
        assert not client.search_runs(exps)


@pytest.mark.parametrize("command", ["flops", "train"])
def test_a_reward_model_folder_with_its_own_code_is_not_run(
    remote_code_folder, tmp_path, monkeypatch, isolab_cache, tracking_uri, command
):
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "run.yaml"
    RunConfig(reward="orm", M=2, extra={"reward_model": str(remote_code_folder)}).to_yaml(cfg)
    uri = tracking_uri
    args = [command, str(cfg)] + (["--tracking-uri", uri] if command == "train" else [])
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    assert "trust_remote_code: true" in " ".join(res.output.split())  # words, not line breaks
    assert "`trust_remote_code: true`" in res.output  # and not wrapped inside the snippet
    assert not _ran(tmp_path)
    _no_runs(uri)  # refused before any run exists


def _with_config(folder: Path, config: dict) -> Path:
    """`folder` with `config` as its config.json and a chat template in its tokenizer's."""
    (folder / "config.json").write_text(json.dumps(config))
    tokenizer = json.loads((folder / "tokenizer_config.json").read_text())
    tokenizer["chat_template"] = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    return folder


@pytest.fixture
def policy_with_own_code(tmp_path: Path) -> Path:
    """A policy folder (tiny-m's weights and tokenizer, with a chat template) whose config maps
    AutoConfig and AutoModelForCausalLM to its own modules, each leaving a file when imported."""
    folder = tmp_path / "evil-lm"
    shutil.copytree(presets_dir() / "tiny-m", folder)
    auto_map = {
        "AutoConfig": "configuration_evil.EvilConfig",
        "AutoModelForCausalLM": "modeling_evil.EvilForCausalLM",
    }
    _own_code(folder, tmp_path, auto_map)
    config = json.loads((folder / "config.json").read_text())
    config.update(model_type="isolab_evil", auto_map=auto_map)
    return _with_config(folder, config)


@pytest.mark.parametrize(
    ("command", "trusted", "says"),
    [
        ("flops", True, "isolab flops never runs it"),  # whatever the config says
        ("train", False, "`trust_remote_code: true`"),
    ],
)
def test_a_policy_folder_with_its_own_code_is_not_run_on_a_keystroke(
    policy_with_own_code, tmp_path, monkeypatch, isolab_cache, tracking_uri, command, trusted, says
):
    """transformers asks on stdin whether to run a model's own code unless told: isolab tells it,
    so a "y" typed (or piped) answers nothing."""
    cfg = tmp_path / "run.yaml"
    model = str(policy_with_own_code)
    run = RunConfig(model=model, split="all", M=2, eval_problems=2, trust_remote_code=trusted)
    run.to_yaml(cfg)
    uri = tracking_uri
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ISOLAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    args = [command, str(cfg)] + (["--tracking-uri", uri] if command == "train" else [])
    # in this process, stdin answering "y" to every question transformers could ask
    res = CliRunner().invoke(app, args, input="y\n" * 100)
    out = " ".join(res.output.split())
    assert not _ran(tmp_path), res.output
    assert res.exit_code == 2, res.output
    assert says in out
    assert model in out
    _no_runs(uri)


@pytest.mark.parametrize(
    ("override", "says"),
    [
        ("top_p=-5", "extra.grpo.top_p"),  # TRL passes it on: refused at the first rollout
        ("auto_find_batch_size=true", "auto_find_batch_size"),  # GRPOConfig refuses it
    ],
)
def test_grpo_settings_trl_refuses_leave_no_run(
    tmp_path, monkeypatch, isolab_cache, tracking_uri, override, says
):
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "run.yaml"
    RunConfig(M=2, eval_problems=2).to_yaml(cfg)
    uri = tracking_uri
    args = ["train", str(cfg), "--set", f"extra.grpo.{override}", "--tracking-uri", uri]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    assert says in " ".join(res.output.split())
    _no_runs(uri)


def test_a_chat_task_on_a_model_without_a_chat_template_leaves_no_run(
    tmp_path, monkeypatch, isolab_cache, tracking_uri
):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "no-template"  # tiny-m as a folder: a chat task, no template
    shutil.copytree(presets_dir() / "tiny-m", folder)
    cfg = tmp_path / "run.yaml"
    RunConfig(model=str(folder), split="all", M=2, eval_problems=2).to_yaml(cfg)
    uri = tracking_uri
    res = CliRunner().invoke(app, ["train", str(cfg), "--tracking-uri", uri])
    assert res.exit_code == 2, res.output
    assert "chat template" in " ".join(res.output.split())
    _no_runs(uri)


@pytest.mark.parametrize(
    "name", ["../../x", "/etc/isolab", "a/../../b", "a//b", "a\\\\b", ".", "", " a", "a/./b"]
)
def test_names_that_would_leave_isolabs_folders_are_refused(name):
    with pytest.raises(ValueError, match="names become folders"):
        name_path(name)
    with pytest.raises(ValueError, match="experiment"):
        RunConfig(experiment=name)


def test_ordinary_names_become_relative_paths():
    assert name_path("nstar/cpu/main") == Path("nstar", "cpu", "main")
    assert not name_path("my-runs_2").is_absolute()


def test_a_snapshot_naming_a_traversal_experiment_imports_nothing(tmp_path, tracking_uri):
    from isolab.synthetic import make_isocompute_runs
    from isolab.tracking.importing import import_runs
    from isolab.tracking.snapshot import export_runs

    snap = export_runs(make_isocompute_runs(seeds=1, max_runs=2, eval_points=3), tmp_path / "s")
    meta = json.loads((snap / "snapshot.json").read_text())
    meta["experiment"] = "../../outside"
    (snap / "snapshot.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="names become folders"):
        import_runs(snap, tracking_uri=tracking_uri)
    assert not (tmp_path.parent / "outside").exists()


@pytest.fixture
def llama_with_own_code(tmp_path: Path) -> Path:
    """tiny-m as a folder (with a chat template) that keeps `model_type: llama` but maps
    AutoModelForCausalLM to a module of its own, which leaves a file when imported: transformers
    loads the built-in Llama class for it unless told to trust the folder's code."""
    folder = tmp_path / "llama-own-code"
    shutil.copytree(presets_dir() / "tiny-m", folder)
    auto_map = {"AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"}
    _own_code(folder, tmp_path, auto_map)
    config = json.loads((folder / "config.json").read_text())
    # TRL builds its reference model from `architectures`: one transformers lacks sends it to
    # the auto_map
    config.update(auto_map=auto_map, architectures=["EvilForCausalLM"])
    return _with_config(folder, config)


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        # TRL builds the reference model with these kwargs (beta > 0 under recipe auto)
        (
            {"grpo": {"model_init_kwargs": {"trust_remote_code": True}}},
            "extra.grpo.model_init_kwargs.trust_remote_code",
        ),
        ({}, "`trust_remote_code: true`"),  # the built-in class, silently, before
    ],
)
def test_a_llama_folder_with_an_auto_map_runs_nothing_of_its_own_without_the_one_switch(
    llama_with_own_code, tmp_path, monkeypatch, isolab_cache, tracking_uri, extra, says
):
    """One switch, the run config's `trust_remote_code`: a nested flag in `extra` is refused,
    and a folder whose config.json has an `auto_map` is refused while the switch is off."""
    cfg = tmp_path / "run.yaml"
    model = str(llama_with_own_code)
    RunConfig(model=model, split="all", M=1, n=2, B_p=2, eval_problems=2).to_yaml(cfg)
    import yaml

    data = yaml.safe_load(cfg.read_text())
    data["extra"] = extra  # written by hand: RunConfig itself refuses the nested flag
    cfg.write_text(yaml.safe_dump(data))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ISOLAB_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    res = CliRunner().invoke(app, ["train", str(cfg), "--tracking-uri", tracking_uri])
    out = " ".join(res.output.split())
    assert not _ran(tmp_path), res.output
    assert res.exit_code == 2, res.output
    assert says in out
    _no_runs(tracking_uri)
