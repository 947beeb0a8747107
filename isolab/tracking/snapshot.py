"""Snapshots: the runs table on disk, a folder that travels without the store.

A snapshot folder holds ``runs.parquet`` (the runs table, `isolab.tracking.runs.load_runs`),
``snapshot.json`` (where it came from, which columns are params and which metrics, the base
models' digests) and, when exported with its history, ``history.parquet`` (every metric every
run logged, TRL's curves too). `export_runs` writes one, `read_snapshot` reads it back,
`isolab.tracking.importing.import_runs` loads it into an MLflow store.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO

import polars as pl

from isolab.paths import first_link
from isolab.tracking.columns import param_columns
from isolab.vocab import METRIC_PREFIXES, RUN_ID, RUN_KEY

SNAPSHOT_FILE = "runs.parquet"
SNAPSHOT_META = "snapshot.json"
#: Every metric of every run, long (run_key, key, step, value, timestamp): TRL's reward, KL and
#: entropy curves too, which the runs table leaves out; written beside runs.parquet.
HISTORY_FILE = "history.parquet"


def is_snapshot(source: str | os.PathLike[str]) -> bool:
    """True when `source` is a snapshot folder (holding runs.parquet) or a .parquet file."""
    p = Path(source)
    return (p.is_dir() and (p / SNAPSHOT_FILE).exists()) or (p.is_file() and p.suffix == ".parquet")


def read_snapshot(path: Path, statuses: Sequence[str] | None) -> pl.DataFrame:
    """The runs table of snapshot folder (or parquet file) `path`, only runs with a status in
    `statuses` (None: all)."""
    file = path / SNAPSHOT_FILE if path.is_dir() else path
    try:
        df = pl.read_parquet(file)
    except Exception as exc:  # polars raises several kinds on a damaged file
        raise ValueError(
            f"{file}: not a readable snapshot ({type(exc).__name__}: {str(exc)[:200]}); export "
            "it again (`isolab runs export EXPERIMENT`) or copy it whole"
        ) from None
    if statuses is not None and "status" in df.columns:
        df = df.filter(pl.col("status").is_in(list(statuses)))
    return df


def export_runs(
    df: pl.DataFrame,
    dest: str | os.PathLike[str],
    *,
    experiment: str | None = None,
    extra_meta: dict[str, Any] | None = None,
    history: pl.DataFrame | None = None,
    root: str | os.PathLike[str] | None = None,
) -> Path:
    """Write the runs table as a snapshot folder: ``runs.parquet`` + ``snapshot.json`` (and
    ``history.parquet``, every logged metric, when `history` from `load_history` is given).

    The JSON records the experiment, when, the isolab version, the counts and which columns are
    params and which metrics (what `importing.import_runs` needs). Returns the folder.

    Each file is written whole or not at all (`_write_whole`), and never through a symbolic
    link: a folder or file of the snapshot that is a link, or a folder between `root` (isolab's
    `runs/`) and it, is a ValueError, before anything is written.
    """
    from isolab import __version__

    if df.height == 0:
        raise ValueError("the runs table is empty: nothing to export")
    dest = Path(dest)
    files = (dest / name for name in (SNAPSHOT_FILE, HISTORY_FILE, SNAPSHOT_META))
    link = first_link(dest, root) or next((f for f in files if f.is_symlink()), None)
    if link is not None:  # it may lead out of the folder, onto a store or a config
        raise ValueError(
            f"{link} is a symbolic link (to {os.readlink(link)}): an export never writes "
            "through one. Remove the link, or export to another folder."
        )
    dest.mkdir(parents=True, exist_ok=True)
    _write_whole(dest / SNAPSHOT_FILE, lambda f: df.write_parquet(f, compression="zstd"))
    if history is not None and history.height:
        _write_whole(dest / HISTORY_FILE, lambda f: history.write_parquet(f, compression="zstd"))
    if experiment is None and "experiment" in df.columns:
        experiment = str(df["experiment"][0])
    key = RUN_KEY if RUN_KEY in df.columns else RUN_ID
    meta = {
        "experiment": experiment or dest.name,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "isolab_version": __version__,
        "runs": df[key].n_unique(),
        "rows": df.height,
        "params": param_columns(df),
        "metrics": [c for c in df.columns if c.startswith(METRIC_PREFIXES)],
        "base_digests": base_digests(df),
        **(extra_meta or {}),
    }
    text = json.dumps(meta, indent=2) + "\n"
    _write_whole(dest / SNAPSHOT_META, lambda f: f.write(text.encode()))
    return dest


def _write_whole(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Write `path` whole or not at all: `write` fills a new file beside it, which then replaces
    `path` (`os.replace`: a crash or a full disk leaves the previous file, not half of one). The
    new file is created exclusively, so it is never a link, and a link at `path` is replaced,
    not written through."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())  # on disk before the rename makes it the snapshot
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def base_digests(df: pl.DataFrame) -> dict[str, list[str]]:
    """Model → the distinct base-model digests its runs recorded (empty when none did)."""
    if "base_digest" not in df.columns or "model" not in df.columns:
        return {}
    pairs = df.select("model", "base_digest").drop_nulls().unique().sort("model", "base_digest")
    out: dict[str, list[str]] = {}
    for model, digest in pairs.iter_rows():
        out.setdefault(str(model), []).append(str(digest))
    return out


def digest_mismatches(df: pl.DataFrame) -> list[str]:
    """Sentences for each model whose runs used other base weights than the ones in use now
    (`isolab.models.current_digest`), or recorded none: their results are for another base."""
    from isolab import models

    if "model" not in df.columns:
        return []
    recorded = base_digests(df)
    out = []
    for model in sorted(df["model"].unique().to_list()):
        now = models.current_digest(str(model))
        seen = recorded.get(str(model), [])
        if not seen:
            out.append(
                f"{model}: the runs record no base-model digest (made before isolab "
                "recorded one), so they may come from other weights than those in use"
            )
        elif now is not None and seen != [now]:
            out.append(
                f"{model}: the runs used weights {', '.join(d[:12] for d in seen)}…, the "
                f"model in use is {now[:12]}…: their results are for another base"
            )
    return out


def snapshot_experiment(meta: dict[str, Any]) -> str | None:
    """The experiment a snapshot came from (`study` in snapshots of isolab 0.1)."""
    return meta.get("experiment") or meta.get("study")


def read_snapshot_meta(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The snapshot's ``snapshot.json`` ({} when absent); ValueError naming the file when it is
    not a JSON object."""
    p = Path(path)
    meta = (p if p.is_dir() else p.parent) / SNAPSHOT_META
    if not meta.exists():
        return {}
    try:
        data = json.loads(meta.read_bytes().decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{meta}: not valid JSON ({exc}); export the snapshot again") from None
    if not isinstance(data, dict):
        raise ValueError(f"{meta}: expected a JSON object; export the snapshot again")
    return data
