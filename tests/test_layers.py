"""isolab's imports go one way: the checker passes on the package and catches what it must."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _checker():
    spec = importlib.util.spec_from_file_location("check_layers", REPO / "scripts/check_layers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_package_is_layered_without_cycles():
    assert _checker().check() == []


@pytest.fixture
def copy(tmp_path) -> Path:
    dest = tmp_path / "isolab"
    shutil.copytree(REPO / "isolab", dest, ignore=shutil.ignore_patterns("presets", "__pycache__"))
    return dest


def _append(path: Path, code: str) -> None:
    path.write_text(path.read_text() + "\n\n" + code + "\n")


def test_a_lazy_import_of_the_cli_from_the_library_is_caught(copy):
    _append(copy / "metrics.py", "def f():\n    from isolab.cli.common import fail\n")
    assert any("imports the command line" in p for p in _checker().check(copy))


def test_an_import_up_the_layers_is_caught(copy):
    _append(copy / "models" / "weights.py", "def f():\n    from isolab.rl import train\n")
    assert any(
        "isolab.models.weights (layer 5) imports isolab.rl.train" in p
        for p in _checker().check(copy)
    )


def test_a_cycle_inside_one_layer_is_caught(copy):
    _append(copy / "config.py", "def f():\n    import isolab.paths\n")
    _append(copy / "paths.py", "def g():\n    from isolab import config\n")
    assert any(p.startswith("import cycle") and "isolab.paths" in p for p in _checker().check(copy))


def test_a_module_reached_by_name_through_sys_modules_is_caught(copy):
    """The sweep once read the trainer's stop flag as `sys.modules.get("isolab.rl.train")`, a
    dependency no import statement showed; the flag now lives in the bottom layer."""
    _append(
        copy / "models" / "weights.py", 'import sys\nSTOP = sys.modules.get("isolab.rl.train")\n'
    )
    assert any(
        "isolab.models.weights (layer 5) imports isolab.rl.train" in p
        for p in _checker().check(copy)
    )


def test_the_stop_flag_and_the_vocabulary_sit_in_the_bottom_layer():
    checker = _checker()
    bottom = len(checker.LAYERS) - 1
    for module in ("isolab.stop", "isolab.vocab", "isolab.table", "isolab.config"):
        assert checker.layer_of(module) == bottom, module
    assert checker.layer_of("isolab.verdicts.claims") < checker.layer_of("isolab.frontier.fit")
    assert checker.layer_of("isolab.verdicts.claims") < checker.layer_of("isolab.synthetic")
