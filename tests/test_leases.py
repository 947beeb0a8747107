"""Nobody let in twice, nothing counted twice: run keys are leased in the store itself
(`isolab.tracking.leases`), so concurrent imports and runners with their own runs/ folders in
front of one `mlflow server` write each key once; a failed import leaves nothing behind.

Real SQLite stores and a real `mlflow server` (on SQLite), real processes racing; no mocks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
import yaml
from helpers import mlflow_server
from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient

from isolab.synthetic import make_isocompute_runs
from isolab.tracking import RUN_KEY_TAG, find_runs
from isolab.tracking.columns import COUNTS
from isolab.tracking.snapshot import export_runs

REPO = Path(__file__).resolve().parents[1]
EXPERIMENT = "synthetic-isocompute"  # make_isocompute_runs's


def _snapshot(dest: Path, runs: int) -> Path:
    return export_runs(make_isocompute_runs(seeds=1, max_runs=runs, eval_points=3), dest)


def _race(tmp_path: Path, code: str, envs: list[dict[str, str]], timeout_s: float = 300) -> list:
    """Run `code` in one process per env, all released at once (a `go` file) once every one has
    imported what it needs; returns each one's last stdout line, parsed as JSON."""
    go = tmp_path / "go"
    prelude = (
        "import json, os, sys, time\n"
        f"{code}\n"
        "open(sys.argv[1], 'w').close()\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.005)\n"
        "print(json.dumps(main()), flush=True)\n"
    )
    ready = [tmp_path / f"ready{i}" for i in range(len(envs))]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", prelude, str(flag)],
            cwd=REPO,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for flag, env in zip(ready, envs, strict=True)
    ]
    deadline = time.monotonic() + timeout_s
    while not all(f.exists() for f in ready):
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        assert time.monotonic() < deadline, "the racers did not start"
        time.sleep(0.05)
    go.touch()
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=timeout_s)
        assert p.returncode == 0, stderr[-3000:]
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def _leases_left(uri: str, experiment: str) -> list:
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    return client.search_runs([exp.experiment_id], "tags.`isolab.kind` = 'lease'")


# ---- imports ----------------------------------------------------------------------------------
IMPORT = """
from isolab.tracking.importing import import_runs
def main():
    return import_runs(sys.argv[2], tracking_uri=sys.argv[3])[1:]
"""


def test_two_imports_of_one_snapshot_write_each_run_once(tmp_path, tracking_uri):
    snap = _snapshot(tmp_path / "snap", runs=12)
    uri = tracking_uri
    code = IMPORT.replace("sys.argv[2]", repr(str(snap))).replace("sys.argv[3]", repr(uri))
    # store, tables and experiment made first: the race is on the runs, not the schema
    from isolab.tracking import experiment_id

    experiment_id(EXPERIMENT, uri)
    results = _race(tmp_path, code, [{}, {}])
    runs = find_runs(EXPERIMENT, uri)
    per_key = Counter(r.data.tags[RUN_KEY_TAG] for r in runs)
    assert len(per_key) == 12 and set(per_key.values()) == {1}, per_key
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert sorted(results) == [[0, 12], [12, 0]]  # one wrote all, the other found them there
    assert not _leases_left(uri, EXPERIMENT)


def test_an_import_that_waits_too_long_for_a_held_key_says_so_and_writes_nothing(
    tmp_path, cli, monkeypatch, tracking_uri
):
    """A writer holds one of the snapshot's run keys past the import's wait: exit 2 with what to
    do, and not one run written (it was a TimeoutError traceback, exit 1)."""
    from isolab.tracking import experiment_id, importing, leases

    snap = _snapshot(tmp_path / "snap", runs=3)
    uri = tracking_uri
    experiment_id(EXPERIMENT, uri)
    key = pl.read_parquet(snap / "runs.parquet")["run_key"][0]
    monkeypatch.setattr(importing, "IMPORT_WAIT_S", 1.0)
    with leases.lease(EXPERIMENT, [key], uri) as held:
        assert held
        res = cli("runs", "import", str(snap), "--tracking-uri", uri)
    assert res.exit_code == 2, res.output
    assert "nothing was imported" in " ".join(res.output.split())
    assert not find_runs(EXPERIMENT, uri)


def _no_runs_left(uri: str) -> None:
    """Nothing the import wrote is active, and nothing it wrote (deleted or not) is RUNNING."""
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    if exp is None:
        return
    assert not client.search_runs([exp.experiment_id])
    every = client.search_runs([exp.experiment_id], run_view_type=ViewType.ALL)
    assert "RUNNING" not in {r.info.status for r in every}


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        ("long metric name", "'eval/xxxx"),
        ("long param name", "'pppp"),
        ("long param value", "'notes'"),
    ],
)
def test_a_snapshot_mlflow_would_refuse_imports_nothing(tmp_path, cli, damage, named):
    df = make_isocompute_runs(seeds=1, max_runs=3, eval_points=3)
    if damage == "long metric name":
        df = df.with_columns(pl.lit(0.5).alias("eval/" + "x" * 295))
    elif damage == "long param name":
        df = df.with_columns(pl.lit("a").alias("p" * 300))
    else:  # the last run's only: the first two must not be written either
        last = df["run_key"].unique(maintain_order=True)[-1]
        note = pl.when(pl.col("run_key") == last).then(pl.lit("n" * 7000)).otherwise(pl.lit("ok"))
        df = df.with_columns(note.alias("notes"))
    snap = export_runs(df, tmp_path / "snap")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"  # a path: its file is checked below
    result = cli("runs", "import", str(snap), "--tracking-uri", uri)
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert named in text and ("250" in text or "6000" in text), text
    assert "nothing was imported" in text
    assert not (tmp_path / "mlflow.db").exists()  # checked before the store was even opened


def test_a_store_fault_midway_leaves_no_run_behind(tmp_path):
    """The third run's artifact cannot be written (its folder is a file: as a full disk, a
    fault of the store itself, not of the snapshot): the two runs written, the one being
    written and the sweep's parent are ended and deleted."""
    from isolab.tracking.importing import ImportStopped, import_runs

    df = make_isocompute_runs(seeds=1, max_runs=3, eval_points=3)
    last = df["run_key"].unique(maintain_order=True)[-1]
    counts = [[1, 2, 3] if key == last else None for key in df["run_key"]]
    df = df.with_columns(pl.Series(COUNTS, counts, dtype=pl.List(pl.Int64)))
    snap = export_runs(df, tmp_path / "snap")
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / EXPERIMENT).write_text("not a folder")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"  # a path: its artifacts/ is the fault above
    with pytest.raises(ImportStopped, match="Not a directory .*deleted; free space"):
        import_runs(snap, tracking_uri=uri)
    _no_runs_left(uri)
    assert not _leases_left(uri, EXPERIMENT)
    (tmp_path / "artifacts" / EXPERIMENT).unlink()  # the fault mended: the import goes through
    assert import_runs(snap, tracking_uri=uri)[1:] == (3, 0)


# ---- leases -----------------------------------------------------------------------------------
def test_leases_exclude_each_other_under_contention(tracking_uri):
    """Four leaseholders, three rounds each, on one key of a SQLite store: never two holders, and
    every round is held in the end."""
    from isolab.tracking import leases

    uri = tracking_uri
    leases.take("contended", ["warm-up"], uri)  # the store's tables, made once
    holders, most, wins = [0], [0], [0]
    lock = threading.Lock()

    def leaseholder() -> None:
        for _ in range(3):
            lease_id = leases.take("contended", ["the-key", "other"], uri, wait_s=60)
            if lease_id is None:
                continue
            with lock:
                holders[0] += 1
                most[0] = max(most[0], holders[0])
                wins[0] += 1
            time.sleep(0.02)
            with lock:
                holders[0] -= 1
            leases.release(lease_id, uri)

    threads = [threading.Thread(target=leaseholder) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1 and wins[0] == 12, (most, wins)
    assert len(_leases_left(uri, "contended")) == 1  # the warm-up's, never released


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`mlflow server` on a SQLite store: what several machines share."""
    root = tmp_path_factory.mktemp("server")
    with mlflow_server(
        f"sqlite:///{root / 'server.db'}", root / "artifacts", log_file=root / "server.log"
    ) as uri:
        yield uri


#: A process that leases one point through `sys.argv[2]`'s store (raced by `_race`); the
#: holder dies without letting go. Used against a real server in test_sweep_postgres.py.
LEASE_RACE = """
from isolab.sweep.resume import lease
def main():
    with lease("the-key", "leases", sys.argv[2]) as mine:
        time.sleep(3)  # held while the others try
        if mine:  # the holder dies without letting go
            print(json.dumps(mine), flush=True)
            os._exit(0)
    return mine
"""


@pytest.mark.slow  # two runners' start-up and two trainings: minutes on a busy 2-core machine
def test_two_runners_with_their_own_runs_folders_train_each_point_once(
    isolab_cache, server, tmp_path
):
    """`isolab sweep run` twice at once on one server, ISOLAB_RUNS apart: two points, each
    trained once between them."""
    data = yaml.safe_load((REPO / "studies" / "smoke.yaml").read_text())
    data["name"] = "smoke-leases"
    data["axes"] = {"n": [8, 16], "B_p": [2]}  # the smoke study's two quickest points
    spec = tmp_path / "two.yaml"
    spec.write_text(yaml.safe_dump(data))
    cmd = [sys.executable, "-m", "isolab.cli", "sweep", "run", str(spec), "--backend", "inline"]
    procs = []
    for i in range(2):
        env = {**os.environ, "ISOLAB_RUNS": str(tmp_path / f"runner{i}"), "OMP_NUM_THREADS": "1"}
        procs.append(
            subprocess.Popen(
                [*cmd, "--tracking-uri", server],
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    for p in procs:
        out = p.communicate(timeout=400)[0]
        assert p.returncode == 0, out[-3000:]
    runs = find_runs("smoke-leases", server)
    per_key = Counter(r.data.tags[RUN_KEY_TAG] for r in runs if r.info.status == "FINISHED")
    assert len(per_key) == 2 and set(per_key.values()) == {1}, per_key
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert not _leases_left(server, "smoke-leases")


# ---- sweep parents ----------------------------------------------------------------------------
PARENT_RACE = """
from isolab.tracking import sweep_parent
def main():
    return sweep_parent("parents", "parents", sys.argv[2])
"""


def test_runners_started_together_on_a_server_share_one_sweep_parent(server, tmp_path):
    """Four runners of one sweep find or create its parent at the same moment through one
    server: one parent (each made its own: the SQLite lock does not reach through a server)."""
    from isolab.tracking import experiment_id

    experiment_id("parents", server)  # the race is on the parent, not the experiment
    ids = _race(tmp_path, PARENT_RACE.replace("sys.argv[2]", repr(server)), [{}] * 4)
    client = MlflowClient(server)
    exp = client.get_experiment_by_name("parents")
    parents = client.search_runs([exp.experiment_id], "tags.`isolab.kind` = 'sweep'")
    assert len(parents) == 1 and set(ids) == {parents[0].info.run_id}, ids
    assert not _leases_left(server, "parents")


def test_a_killed_import_leaves_nothing_a_reimport_doubles(tmp_path, tracking_uri, cli):
    """SIGKILL of `isolab runs import` while a run is half written (RUNNING): the next import
    deletes it and writes every run once (it left the RUNNING run, and the key got two runs)."""
    snap = _snapshot(tmp_path / "snap", runs=40)
    uri = tracking_uri
    cmd = [sys.executable, "-m", "isolab.cli", "runs", "import", str(snap), "--tracking-uri", uri]
    log = tmp_path / "import.log"
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 240
        while not [r for r in find_runs(EXPERIMENT, uri) if r.info.status == "RUNNING"]:
            assert proc.poll() is None, f"the import ended first: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.02)
        proc.kill()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    half = [r for r in find_runs(EXPERIMENT, uri) if r.info.status == "RUNNING"]
    assert half, "the kill should leave a run half written"

    res = cli("runs", "import", str(snap), "--tracking-uri", uri)
    assert res.exit_code == 0, res.output
    runs = find_runs(EXPERIMENT, uri)
    per_key = Counter(r.data.tags[RUN_KEY_TAG] for r in runs)
    keys = pl.read_parquet(snap / "runs.parquet")["run_key"].n_unique()
    assert len(per_key) == keys and set(per_key.values()) == {1}, per_key
    assert {r.info.status for r in runs} == {"FINISHED"}
