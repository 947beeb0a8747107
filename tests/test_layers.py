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
    _append(copy / "config" / "run.py", "def f():\n    import isolab.paths\n")
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
    assert checker.layer_of("isolab.verdicts.claim") < checker.layer_of("isolab.frontier.fit")
    assert checker.layer_of("isolab.verdicts.claim") < checker.layer_of("isolab.synthetic")


def test_a_statistics_module_that_imports_a_study_is_caught(copy):
    """verdicts/ holds the reusable statistics: even a lazy import of a study module (here the
    hub that gathers the claims) from it is a violation, named as such."""
    _append(copy / "verdicts" / "ols.py", "def f():\n    from isolab.study import claims\n")
    found = [p for p in _checker().check(copy) if p.startswith("isolab.verdicts.ols")]
    assert found and "imports the study module isolab.study.claims" in found[0]


def test_a_study_folder_that_imports_another_study_is_caught(copy):
    """n-vs-bp re-analyses nstar's runs, but its folder must not reach into nstar's: shared
    helpers belong in the study infrastructure."""
    _append(copy / "study" / "n_vs_bp" / "claims.py", "from isolab.study.nstar import claims\n")
    found = _checker().check(copy)
    assert any(
        p.startswith("isolab.study.n_vs_bp.claims (study n_vs_bp) imports isolab.study.nstar")
        for p in found
    ), found


def test_study_folders_may_import_the_shared_study_infrastructure(copy):
    """The registry and the hubs are not a study's folder: importing them is allowed."""
    _append(copy / "study" / "n_vs_bp" / "claims.py", "from isolab.study import registry\n")
    assert _checker().check(copy) == []
    assert _checker().study_folders(copy) >= {"nstar", "n_vs_bp", "interference", "mixtures"}
