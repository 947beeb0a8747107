"""Part of the smoke study against `mlflow server` backed by a real PostgreSQL (a team's setup).

The fixture installs Debian's `postgresql` when `initdb` / `pg_ctl` are missing (as
`scripts/ci_services.sh` does), creates a throwaway cluster on 127.0.0.1 and a free port, and
tears everything down afterwards. Skipped only when the package cannot be installed.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
import yaml
from helpers import free_port, mlflow_server
from mlflow.tracking import MlflowClient
from system_packages import apt_install
from typer.testing import CliRunner

from isolab.cli import sweep as cli_sweep
from isolab.sweep import SweepSpec, plan_sweep
from isolab.tracking import RUN_KEY_TAG, find_runs, mlflow_key
from isolab.vocab import COUNTS_FILE, EVAL_AVG, EVAL_PREFIX, FLOPS_TOTAL, ROLLOUTS

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "studies" / "smoke.yaml"


def _pg_bin() -> Path | None:
    """Folder holding initdb and pg_ctl: on PATH, else Debian's /usr/lib/postgresql/<v>/bin."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3])
    )
    return versions[-1].parent if versions else None


def _install_postgres() -> Path:
    if _pg_bin() is None:
        apt_install("postgresql")
    pg_bin = _pg_bin()
    if pg_bin is None:
        pytest.skip("postgresql installed but initdb / pg_ctl not found")
    return pg_bin


def _as_postgres(cmd: list[str]) -> list[str]:
    """initdb and postgres refuse to run as root: run them as the `postgres` user then."""
    if os.geteuid() != 0:
        return cmd
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("running as root and no `postgres` user to run the server as")
    return ["runuser", "-u", "postgres", "--", *cmd]


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL cluster in a temp dir on 127.0.0.1:<free port>, with a database `mlflow`."""
    pg_bin = _install_postgres()
    root = Path(tempfile.mkdtemp(prefix="isolab-pg-", dir="/tmp"))
    data = root / "data"
    data.mkdir()
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        for path in (root, data):
            os.chown(path, user.pw_uid, user.pw_gid)
    root.chmod(0o755)
    port = free_port()
    run = lambda cmd: subprocess.run(  # noqa: E731
        _as_postgres(cmd), check=True, capture_output=True, text=True, timeout=300
    )
    run([str(pg_bin / "initdb"), "-D", str(data), "-U", "isolab", "--auth=trust", "--no-sync"])
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off"
    pg_ctl = str(pg_bin / "pg_ctl")
    run([pg_ctl, "-D", str(data), "-o", options, "-l", str(root / "postgres.log"), "-w", "start"])
    try:
        createdb = pg_bin / "createdb"
        run([str(createdb), "-h", "127.0.0.1", "-p", str(port), "-U", "isolab", "mlflow"])
        # SQLAlchemy 2.1 maps plain postgresql:// to psycopg 3; isolab ships psycopg2-binary.
        yield f"postgresql+psycopg2://isolab@127.0.0.1:{port}/mlflow"
    finally:
        with contextlib.suppress(subprocess.SubprocessError):
            run([pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"])
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def server(
    postgres_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """`mlflow server` on the PostgreSQL cluster, started once for this file's tests: (its
    tracking URI, the folder its artifacts go to)."""
    root = tmp_path_factory.mktemp("pg-server")
    with mlflow_server(postgres_url, root / "artifacts", log_file=root / "server.log") as uri:
        yield uri, root / "artifacts"


def test_part_of_the_smoke_study_on_a_postgres_backed_server(isolab_cache, server, tmp_path):
    # Two of the smoke study's points (same configs, so the same run keys), the quickest ones.
    data = yaml.safe_load(SMOKE.read_text())
    data["axes"] = {"n": [8, 16], "B_p": [2]}
    spec_path = tmp_path / "smoke_part.yaml"
    spec_path.write_text(yaml.safe_dump(data))
    smoke_keys = {p.run_key for p in plan_sweep(SweepSpec.from_yaml(SMOKE)).points}
    part = plan_sweep(SweepSpec.from_yaml(spec_path))
    assert {p.run_key for p in part.points} <= smoke_keys

    t0 = time.perf_counter()
    uri, artifacts_dir = server
    app = typer.Typer()
    cli_sweep.register(app)
    # inline: the store is the subject here, not the workers (whose start-up costs ~20 s)
    args = ["sweep", "run", str(spec_path), "--backend", "inline", "--tracking-uri", uri]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "2 finished, 0 failed" in result.output

    runs = find_runs("smoke", uri)
    assert sorted(r.data.tags[RUN_KEY_TAG] for r in runs) == sorted(p.run_key for p in part.points)
    client = MlflowClient(uri)
    for run in runs:
        assert run.info.status == "FINISHED"
        m = run.data.metrics
        assert m[ROLLOUTS] == 128 and m[FLOPS_TOTAL] > 0
        assert mlflow_key(EVAL_AVG) in m and "reward" in m
        artifacts = [a.path for a in client.list_artifacts(run.info.run_id, "eval")]
        assert f"{EVAL_PREFIX}{COUNTS_FILE}" in artifacts
    assert any(artifacts_dir.rglob("per_problem_counts.json"))
    print(f"2 points on mlflow server + PostgreSQL: {time.perf_counter() - t0:.1f} s")


def test_runners_with_their_own_runs_folders_lease_through_the_server(server, tmp_path):
    """Two processes, each with its own ISOLAB_RUNS (as on two machines), lease one point
    through one server at the same moment: one holds it. Its holder dies without letting go; the
    lease is then stale and taken over. (Before leases lived in the store, each runner's lock
    file sat in its own runs/, and both trained every point.)"""
    from test_leases import LEASE_RACE, _leases_left, _race

    from isolab.tracking import experiment_id, leases

    uri, _ = server
    experiment_id("leases", uri)
    code = LEASE_RACE.replace("sys.argv[2]", repr(uri))
    envs = [{"ISOLAB_RUNS": str(tmp_path / f"runner{i}")} for i in range(2)]
    assert sorted(_race(tmp_path, code, envs)) == [False, True]
    assert len(_leases_left(uri, "leases")) == 1  # the dead holder's
    assert leases.take("leases", ["the-key"], uri) is not None
    assert len(_leases_left(uri, "leases")) == 1  # mine; the stale one was ended
