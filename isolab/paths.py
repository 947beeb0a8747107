"""Where isolab keeps things: the project's `runs/` (store, artifacts, caches, results) and the
sweep specs. Every other module asks here; none builds these paths itself."""

from __future__ import annotations

import os
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]
#: Inside an installed wheel: the specs, notebooks and committed snapshots (see setup.py).
_BUNDLE = Path(__file__).resolve().parent / "bundle"


def bundle_dir() -> Path:
    """Where the curated studies, notebooks and committed snapshots are: the checkout isolab
    runs from (its `studies/`, `notebooks/`, `runs/`), else the copy inside the installed
    package (`isolab/bundle/`)."""
    return _REPO if (_REPO / "studies").is_dir() and (_REPO / "notebooks").is_dir() else _BUNDLE


def name_path(name: str, what: str = "name") -> Path:
    """The relative path a name (an experiment, a study, a sweep) becomes under a folder isolab
    owns: `nstar/cpu/main` → nstar/cpu/main. The only way names become paths: `..`, `.`, empty
    parts, absolute paths, backslashes and control characters are refused, so that no name
    reaches outside the folder (ValueError naming `what`)."""
    text = str(name)
    parts = text.split("/")
    bad = (
        not text.strip()
        or text.startswith("/")
        or "\\" in text
        or any(ord(c) < 32 for c in text)
        or any(p in ("", ".", "..") or p != p.strip() for p in parts)
    )
    if bad:
        raise ValueError(
            f"{what} = {text!r}: names become folders, so use letters, digits, '-', '_' and '/' "
            "between non-empty parts (no '..', no leading '/', no backslash)."
        )
    return Path(*parts)


def runs_dir() -> Path:
    """isolab's working folder (store, artifacts, caches, results): `$ISOLAB_RUNS` if set, else
    the `runs/` folder of the nearest project at or above the current folder (so that a notebook
    running in `notebooks/` shares the project's store), else `./runs`. A project is a folder
    with `runs/` that is isolab's (it holds `mlflow.db` or `cache/`) or sits in a project root
    (`pyproject.toml` or `.git` beside it): a stray `~/runs` of another tool is not taken."""
    if os.environ.get("ISOLAB_RUNS"):
        return Path(os.environ["ISOLAB_RUNS"])
    here = Path.cwd()
    for folder in (here, *here.parents):
        runs = folder / "runs"
        if runs.is_dir() and (
            (runs / "mlflow.db").exists()
            or (runs / "cache").is_dir()
            or (folder / "pyproject.toml").exists()
            or (folder / ".git").exists()
        ):
            return runs
    return Path("runs")


def default_db() -> Path:
    """The default SQLite store: `runs/mlflow.db` (see `runs_dir`)."""
    return runs_dir() / "mlflow.db"


def cache_root() -> Path:
    """Where isolab caches models and difficulty labels: `$ISOLAB_CACHE` or `runs/cache`."""
    if os.environ.get("ISOLAB_CACHE"):
        return Path(os.environ["ISOLAB_CACHE"])
    return runs_dir() / "cache"


def studies_dir() -> Path:
    """Where the curated sweep specs live: `$ISOLAB_STUDIES_DIR`, else `studies/` of the
    checkout or of the installed package (`bundle_dir`)."""
    return Path(os.environ.get("ISOLAB_STUDIES_DIR") or bundle_dir() / "studies")


def results_root() -> Path:
    """Where study snapshots and figures go: `$ISOLAB_RESULTS_DIR`, else the project's `runs/`."""
    return Path(os.environ.get("ISOLAB_RESULTS_DIR") or runs_dir())


def presets_dir() -> Path:
    """The base models shipped inside the package (`isolab/presets/<name>/`)."""
    return Path(__file__).resolve().parent / "presets"
