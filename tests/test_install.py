"""An installed isolab, not a checkout: the wheel built from this tree, installed into a
folder of its own, works from an empty folder — the studies are listed with their shipped
results, `isolab init` lays out a project, and the shipped base models install."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from isolab.study import STUDIES

REPO = Path(__file__).resolve().parents[1]
#: What a build needs of the tree; stores, caches and build leftovers stay out.
IGNORE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    "cache",
    "artifacts",
    "mlflow.db*",
    ".*.lock",
    "frontier",
    ".pytest_cache",
    ".ruff_cache",
)


def _run(cmd: list[str], cwd: Path, env: dict | None = None) -> str:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, (
        f"{' '.join(map(str, cmd))} → {out.returncode}\n{out.stdout}\n{out.stderr}"
    )
    return out.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict]:
    """The wheel of this tree installed (without dependencies: they are this venv's) into a
    folder that comes first on the path, and an environment that knows no checkout."""
    tmp = tmp_path_factory.mktemp("install")
    tree = tmp / "tree"
    shutil.copytree(REPO, tree, ignore=IGNORE)
    pip = [sys.executable, "-m", "pip", "-q"]
    _run(
        [*pip, "wheel", str(tree), "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist")],
        tmp,
    )
    (wheel,) = (tmp / "dist").glob("isolab-*.whl")
    site = tmp / "site"
    _run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], tmp)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ISOLAB_", "MLFLOW_"))}
    env["PYTHONPATH"] = str(site)
    return site, env


def test_the_wheel_carries_studies_notebooks_and_snapshots(installed):
    site, _ = installed
    bundle = site / "isolab" / "bundle"
    assert (bundle / "studies" / "nstar" / "cpu" / "main.yaml").is_file()
    assert len(list((bundle / "notebooks").glob("[0-9][0-9]_*.ipynb"))) == len(STUDIES)
    assert (bundle / "runs" / "nstar" / "cpu" / "main" / "runs.parquet").is_file()
    assert (site / "isolab" / "presets" / "tiny-m" / "model.safetensors").is_file()


def test_an_installed_isolab_works_from_an_empty_folder(installed, tmp_path):
    site, env = installed
    isolab = [sys.executable, "-m", "isolab.cli"]
    where = _run([sys.executable, "-c", "import isolab; print(isolab.__file__)"], tmp_path, env)
    assert where.startswith(str(site))  # the installed copy, not the checkout
    listed = _run([*isolab, "study", "list"], tmp_path, env)
    assert "nstar" in listed and "cpu ✓" in listed  # the shipped snapshots
    _run([*isolab, "init", "project"], tmp_path, env)
    project = tmp_path / "project"
    assert len(list((project / "notebooks").glob("[0-9][0-9]_*.ipynb"))) == len(STUDIES)
    assert (project / "runs" / "nstar" / "cpu" / "main" / "runs.parquet").is_file()
    # (re-plotting a snapshot: tests/test_readme_commands.py, tests/test_study.py)
    # the shipped base models come with the wheel: installed into the project's cache, checked
    built = _run([*isolab, "models", "build", "tiny-m"], project, env)
    assert "sha256" in built and (project / "runs" / "cache" / "models" / "tiny-m").is_dir()
