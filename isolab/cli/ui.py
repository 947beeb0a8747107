"""`isolab ui`: the MLflow UI on loopback for isolab's store, with links to its experiments."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from typing import Annotated

import typer

from isolab.cli.common import TrackingUri, console, safe

#: The UI's start page for isolab's experiments: the model-training view (runs tables).
UI_HOME = "#/experiments?workflowType=machine_learning"


def ui(
    tracking_uri: TrackingUri = None,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 5000,
    workers: Annotated[
        int,
        typer.Option(min=1, help="Server processes (MLflow's default is 4; one serves a browser)."),
    ] = 1,
) -> None:
    """Start the MLflow UI on 127.0.0.1 for the isolab store."""
    from isolab.tracking import artifact_root, resolve_uri

    uri = resolve_uri(tracking_uri)
    # `sys.executable -m mlflow`: the mlflow installed beside isolab, not whichever is first on PATH
    cmd = [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        uri,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
    ]
    root = artifact_root(uri)
    if root:  # a local store keeps its artifacts beside it; the UI must look there too
        cmd += ["--default-artifact-root", root]
    base = f"http://127.0.0.1:{port}"
    console.print(f"MLflow UI for the store {safe(uri)}; Ctrl-C stops it.")
    # MLflow 3.17 opens an experiment in its GenAI view (traces) unless the link asks for the
    # model-training one, whatever the experiment's kind tag says: these links land on the
    # runs tables
    console.print(f"  experiments   {base}/{UI_HOME}", soft_wrap=True, highlight=False)
    for exp_id, name in _recent_experiments(uri):
        link = f"{base}/#/experiments/{exp_id}/runs?workflowType=machine_learning"
        console.print(f"  {name}   {link}", soft_wrap=True, highlight=False, markup=False)
    raise typer.Exit(_serve(cmd))


def _recent_experiments(uri: str, count: int = 10) -> list[tuple[str, str]]:
    """(id, name) of the store's most recently updated experiments (none if it cannot be read)."""
    from isolab.tracking import client

    try:
        # one more than `count`: MLflow's empty "Default" experiment may be among them
        found = client(uri).search_experiments(
            max_results=count + 1, order_by=["last_update_time DESC"]
        )
    except Exception:  # noqa: BLE001 - the links are a convenience; the UI still starts
        return []
    return [(e.experiment_id, e.name) for e in found if e.name != "Default"][:count]


def _serve(cmd: list[str]) -> int:
    """Run the MLflow server in a process group of its own and stop that whole group (the
    server, uvicorn and its workers) when this process gets SIGINT, SIGTERM or SIGHUP."""
    import signal

    # A session (so a process group) of its own: `os.killpg` stops the server with uvicorn and
    # its workers and never this process, and the terminal's Ctrl-C reaches this process only
    # MLflow's job runner (a huey consumer per job type, each importing MLflow: 25 s of CPU and
    # 8 processes at every start, measured) serves GenAI jobs that isolab's runs never use.
    # MLFLOW_SERVER_ENABLE_JOB_EXECUTION=true in the shell turns it back on.
    env = dict(os.environ)
    env.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    server = subprocess.Popen(cmd, start_new_session=True, env=env)

    def stop(signum, frame) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    try:
        code = server.wait()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)  # whatever ignored SIGTERM
    # stopped by us (Ctrl-C, a signal) is how the UI normally ends: exit 0, not 143 or 130
    return 0 if code in (0, -signal.SIGTERM, -signal.SIGINT) else code


def register(app: typer.Typer) -> None:
    app.command()(ui)
