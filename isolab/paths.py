"""Where isolab keeps things: the project's `runs/` (store, artifacts, caches, results) and the
sweep specs. Every other module asks here; none builds these paths itself."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

from isolab.userinput import brief

_REPO = Path(__file__).resolve().parents[1]
#: Inside an installed wheel: the specs, notebooks and committed snapshots (see setup.py).
_BUNDLE = Path(__file__).resolve().parent / "bundle"


def bundle_dir() -> Path:
    """Where the curated studies, notebooks and committed snapshots are: the checkout isolab
    runs from (its `studies/`, `notebooks/`, `runs/`), else the copy inside the installed
    package (`isolab/bundle/`)."""
    return _REPO if (_REPO / "studies").is_dir() and (_REPO / "notebooks").is_dir() else _BUNDLE


def shown(path: Path) -> str:
    """`path` as messages and notebooks show it: relative to the bundle (the checkout) when it
    lies inside, so that no user's absolute path lands in a committed notebook."""
    try:
        return str(Path(path).resolve().relative_to(bundle_dir()))
    except ValueError:
        return str(path)


#: Longest name (experiment, sweep) isolab accepts, in UTF-8 bytes: a name becomes an MLflow
#: experiment, a run name with " (sweep)" (MLflow caps those at 250 characters) and folders, or
#: one folder with `/` as `--` (`isolab frontier`; file systems cap a folder name at 255 bytes).
MAX_NAME_BYTES = 120


def name_path(name: str, what: str = "name") -> Path:
    """The relative path a name (an experiment, a study, a sweep) becomes under a folder isolab
    owns: `nstar/cpu/main` → nstar/cpu/main. The only way names become paths: `..`, `.`, empty
    parts, absolute paths, backslashes, control and bidirectional-text characters (U+202E shows
    a name reversed) and names over `MAX_NAME_BYTES` are refused, so that no name reaches
    outside the folder or hides what it is (ValueError naming `what`)."""
    text = str(name)
    shown = brief(text)
    check_visible(text, what, "use letters, digits, '-', '_' and '/'")
    size = len(text.encode())
    if size > MAX_NAME_BYTES:
        raise ValueError(
            f"{what} = {shown}: {size} bytes long, over isolab's limit of {MAX_NAME_BYTES} "
            "(names become MLflow experiments and folders); shorten it."
        )
    parts = text.split("/")
    bad = (
        not text.strip()
        or text.startswith("/")
        or "\\" in text
        or any(p in ("", ".", "..") or p != p.strip() for p in parts)
    )
    if bad:
        raise ValueError(
            f"{what} = {shown}: names become folders, so use letters, digits, '-', '_' and '/' "
            "between non-empty parts (no '..', no leading '/', no backslash)."
        )
    return Path(*parts)


def check_visible(text: str, what: str, fix: str) -> None:
    """ValueError naming `what` and `fix` when `text` (a name, a path, a hub id) holds a
    character one cannot see (`_invisible`): a NUL byte cuts a path short in C, U+202E shows
    it reversed."""
    hidden = next((c for c in str(text) if _invisible(c)), None)
    if hidden is not None:
        raise ValueError(
            f"{what} = {brief(str(text))}: holds the control or formatting character "
            f"U+{ord(hidden):04X}; {fix}."
        )


def _invisible(char: str) -> bool:
    """Control (C0, DEL, C1), format (bidirectional overrides, zero-width), surrogate,
    private-use and unassigned characters, and the line and paragraph separators."""
    return unicodedata.category(char)[0] == "C" or unicodedata.category(char) in ("Zl", "Zp")


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


def first_link(
    target: str | os.PathLike[str], root: str | os.PathLike[str] | None = None
) -> Path | None:
    """The first symbolic link on the way to `target` (a `Path`), or None: each folder between
    `root` and `target` when `target` lies under `root` (`runs/nstar` on the way to
    `runs/nstar/x`), then `target` itself. A write through a link lands wherever the link
    leads: onto a store, a config, another user's file. `root` itself may be a link (a
    `runs/` kept on another disk)."""
    target = Path(target)
    steps = [target]
    if root is not None:
        base = Path(root).absolute()
        try:
            parts = target.absolute().relative_to(base).parts
        except ValueError:  # not under root: only the target is isolab's to check
            parts = ()
        steps = [base.joinpath(*parts[:i]) for i in range(1, len(parts))] + steps
    return next((step for step in steps if step.is_symlink()), None)


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
