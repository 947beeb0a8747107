"""Inputs isolab must not trust: a reward-model folder that ships its own Python code, and
names that would become paths outside isolab's folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from isolab.cli import app
from isolab.config import RunConfig
from isolab.paths import name_path

CODE = """
import pathlib
pathlib.Path(__file__).with_name("RAN").write_text("this code ran")
from transformers import PretrainedConfig
class EvilConfig(PretrainedConfig):
    model_type = "isolab_evil"
"""


@pytest.fixture
def remote_code_folder(tmp_path: Path) -> Path:
    """A model folder whose config names its own configuration module (transformers'
    `auto_map`): loading it with trust_remote_code runs that module, which leaves a file."""
    folder = tmp_path / "evil-rm"
    folder.mkdir()
    (folder / "configuration_evil.py").write_text(CODE)
    config = {
        "model_type": "isolab_evil",
        "auto_map": {"AutoConfig": "configuration_evil.EvilConfig"},
        "hidden_size": 8,
        "num_hidden_layers": 1,
    }
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("command", ["flops", "train"])
def test_a_reward_model_folder_with_its_own_code_is_not_run(
    remote_code_folder, tmp_path, monkeypatch, isolab_cache, command
):
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "run.yaml"
    RunConfig(reward="orm", M=2, extra={"reward_model": str(remote_code_folder)}).to_yaml(cfg)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = [command, str(cfg)] + (["--tracking-uri", uri] if command == "train" else [])
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    assert "trust_remote_code: true" in " ".join(res.output.split())  # words, not line breaks
    assert "`trust_remote_code: true`" in res.output  # and not wrapped inside the snippet
    assert not (remote_code_folder / "RAN").exists()
    if command == "train":  # refused before any run exists
        from mlflow.tracking import MlflowClient

        client = MlflowClient(uri)
        exps = client.search_experiments()
        assert not client.search_runs([e.experiment_id for e in exps]) if exps else True


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


def test_a_snapshot_naming_a_traversal_experiment_imports_nothing(tmp_path):
    from isolab.synthetic import make_isocompute_runs
    from isolab.tracking.runs import export_runs, import_runs

    snap = export_runs(make_isocompute_runs(seeds=1, max_runs=2, eval_points=3), tmp_path / "s")
    meta = json.loads((snap / "snapshot.json").read_text())
    meta["experiment"] = "../../outside"
    (snap / "snapshot.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="names become folders"):
        import_runs(snap, tracking_uri=f"sqlite:///{tmp_path / 'm.db'}")
    assert not (tmp_path.parent / "outside").exists()
