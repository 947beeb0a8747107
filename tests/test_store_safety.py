"""Reading a store changes nothing and writes a snapshot only where it was told: a snapshot
file or folder that is a symbolic link is refused, a failed export leaves the previous snapshot,
a read-only store reads, and an empty file is not made into a store."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from isolab.synthetic import make_isocompute_runs
from isolab.table import with_added_defaults, with_lr_sum
from isolab.tracking.importing import import_runs
from isolab.tracking.runs import load_runs
from isolab.tracking.snapshot import SNAPSHOT_FILE, export_runs

EXPERIMENT = "synthetic-isocompute"  # what make_isocompute_runs names its runs' experiment


def _runs() -> pl.DataFrame:
    return make_isocompute_runs(seeds=1, max_runs=4, eval_points=8)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mlflow.db of a SQLite store holding four runs (made once; tests copy it)."""
    tmp = tmp_path_factory.mktemp("store")
    import_runs(export_runs(_runs(), tmp / "snapshot"), tracking_uri=f"sqlite:///{tmp}/mlflow.db")
    return tmp / "mlflow.db"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_export_through_a_linked_runs_parquet_exits_2_and_leaves_its_target(cli, store, tmp_path):
    target = tmp_path / "elsewhere" / "mlflow.db"  # what the link leads to: here, a store
    target.parent.mkdir()
    shutil.copy(store, target)
    before = _digest(target)
    dest = tmp_path / "snap"
    dest.mkdir()
    (dest / SNAPSHOT_FILE).symlink_to(target)
    res = cli("runs", "export", EXPERIMENT, str(dest), "--tracking-uri", f"sqlite:///{store}")
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert f"{dest / SNAPSHOT_FILE} is a symbolic link" in text and "Remove the link" in text
    assert _digest(target) == before
    assert sorted(p.name for p in dest.iterdir()) == [SNAPSHOT_FILE]  # nothing else written


def test_export_into_a_linked_folder_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "snap").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ValueError, match="is a symbolic link"):
        export_runs(_runs(), tmp_path / "snap")
    assert not list(elsewhere.iterdir())


def test_a_failed_export_leaves_the_previous_snapshot(tmp_path, monkeypatch) -> None:
    first = _runs()
    dest = export_runs(first, tmp_path / "snap")
    write = pl.DataFrame.write_parquet

    def disk_full(self, file, *args, **kwargs):  # half a file, then the disk is full
        write(self.head(1), file, *args, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", disk_full)
    with pytest.raises(OSError, match="No space left"):
        export_runs(first.with_columns(pl.col("step") + 1), dest)
    monkeypatch.undo()
    assert load_runs(dest, statuses=None).equals(with_lr_sum(with_added_defaults(first)))
    assert sorted(p.name for p in dest.iterdir()) == ["runs.parquet", "snapshot.json"]


_CAP_DAC_OVERRIDE = 1  # linux/capability.h: write any file whatever its mode


@contextlib.contextmanager
def _read_only(folder: Path) -> Iterator[None]:
    """`folder` and its files read-only to this thread (and the threads it starts), as a
    mounted archive or another user's store is. Permissions do not stop root: as root, the
    capability that lets it write anywhere is dropped from the thread's effective set meanwhile
    (and raised again after)."""
    modes = {p: p.stat().st_mode for p in [folder, *folder.iterdir()]}
    for p in modes:
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        if os.geteuid() != 0:
            yield
            return

        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        class Data(ctypes.Structure):
            _fields_ = [(f, ctypes.c_uint32) for f in ("effective", "permitted", "inheritable")]

        libc = ctypes.CDLL(None, use_errno=True)
        header, data = Header(0x20080522, 0), (Data * 2)()  # _LINUX_CAPABILITY_VERSION_3
        if libc.capget(ctypes.byref(header), data) != 0:
            pytest.skip("root, and capget failed: cannot make a folder read-only to root")
        effective = data[0].effective
        data[0].effective &= ~(1 << _CAP_DAC_OVERRIDE)
        if libc.capset(ctypes.byref(header), data) != 0:
            pytest.skip("root, and capset failed: cannot make a folder read-only to root")
        try:
            with pytest.raises(PermissionError):
                (folder / "probe").touch()
            yield
        finally:
            data[0].effective = effective
            libc.capset(ctypes.byref(header), data)
    finally:
        for p, mode in modes.items():
            p.chmod(mode)


def test_a_read_only_store_reads(cli, store, tmp_path) -> None:
    """`runs export` (to a folder it can write) and the runs table `frontier` reads
    (`load_runs`, its first step) from a store whose folder this process cannot write: no lock
    file, no change to the store."""
    ro = tmp_path / "archive"
    ro.mkdir()
    shutil.copy(store, ro / "mlflow.db")
    before = _digest(ro / "mlflow.db")
    uri = f"sqlite:///{ro}/mlflow.db"
    with _read_only(ro):
        exported = cli("runs", "export", EXPERIMENT, "snap", "--tracking-uri", uri)
        table = load_runs(EXPERIMENT, tracking_uri=uri)
    assert exported.exit_code == 0, exported.output
    assert load_runs(tmp_path / "snap").equals(table) and table["run_key"].n_unique() == 4
    assert sorted(p.name for p in ro.iterdir()) == ["mlflow.db"]
    assert _digest(ro / "mlflow.db") == before


def test_an_empty_file_is_no_store_and_stays_empty(cli, tmp_path) -> None:
    db = tmp_path / "mlflow.db"
    db.touch()
    uri = f"sqlite:///{db}"
    res = cli("runs", "export", EXPERIMENT, "--tracking-uri", uri)
    assert res.exit_code == 2, res.output
    assert f"{db} is empty: not an MLflow store" in " ".join(res.output.split())
    with pytest.raises(ValueError, match="is empty: not an MLflow store"):
        load_runs(EXPERIMENT, tracking_uri=uri)  # what `frontier` reads first
    assert db.stat().st_size == 0
