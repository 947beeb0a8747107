"""`isolab ui`: the MLflow UI on loopback for isolab's store, with links that open each
experiment on its runs (`isolab.tracking.views`), printed once the server answers."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Annotated

import typer

from isolab.cli.common import TrackingUri, console, fail, safe

#: The UI's start page for isolab's experiments: the list, in MLflow 3's model-training mode
#: (its home page is a GenAI welcome page, and its experiment pages open on GenAI traces).
UI_HOME = "#/experiments?workflowType=machine_learning"
#: How often the server is asked whether it answers yet, and how long one question may take.
POLL_S, ASK_TIMEOUT_S = 0.5, 2.0


def ui(
    tracking_uri: TrackingUri = None,
    port: Annotated[
        int, typer.Option(min=1024, max=65535, help="Port on 127.0.0.1 (1024–65535).")
    ] = 5000,
    workers: Annotated[
        int,
        typer.Option(min=1, help="Server processes (MLflow's default is 4; one serves a browser)."),
    ] = 1,
) -> None:
    """Start the MLflow UI on 127.0.0.1 for the isolab store; say "ready" with the links to
    open once it answers.

    What a local process can change through it: MLflow has no read-only mode, so any process
    on this machine that reaches the port can create, rename and delete experiments and runs,
    and log or tag them, through MLflow's REST API. It cannot write or delete artifact files:
    the artifact proxy is off (`--no-serve-artifacts`), and the UI reads a run's artifacts
    from the store's own artifact root."""
    from isolab.tracking import artifact_root, resolve_uri
    from isolab.tracking.ui_mode import APP_NAME, app_path

    if _port_taken(port):  # another process there would answer /health for us
        fail(
            f"--port {port}: 127.0.0.1:{port} is taken by another process; give a free port, "
            f"e.g. --port {_free_port()}."
        )
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
        # MLflow's artifact proxy takes PUT and DELETE of any file under ./mlartifacts of the
        # folder the UI starts in, from any local process; the UI needs none of it to show a
        # local store's artifacts (the server reads them from the store's artifact root)
        "--no-serve-artifacts",
        # MLflow's app, its start page opening in model-training mode (`tracking.ui_mode`)
        "--app-name",
        APP_NAME,
    ]
    root = artifact_root(uri)
    if root:  # a local store keeps its artifacts beside it; the UI must look there too
        cmd += ["--default-artifact-root", root]
    base = f"http://127.0.0.1:{port}"
    console.print(
        f"Starting the MLflow UI for the store {safe(uri)} (it takes 10–60 s); Ctrl-C stops it."
    )
    with tempfile.TemporaryDirectory(prefix="isolab-ui-") as folder:
        raise typer.Exit(_serve(cmd, base, uri, app_path(Path(folder))))


def _experiment_links(uri: str, base: str, count: int = 10) -> list[tuple[str, str]]:
    """(name, link) of the store's most recently updated experiments, each link opening
    isolab's view of its runs (`views.ensure_view`: written into the store when missing).
    None if the store cannot be read; a plain link where the view cannot be written (a store
    read-only to this user)."""
    from mlflow.exceptions import MlflowException

    from isolab.tracking import client
    from isolab.tracking.views import ensure_view, runs_url

    try:
        c = client(uri)
        # one more than `count`: MLflow's empty "Default" experiment may be among them
        found = c.search_experiments(max_results=count + 1, order_by=["last_update_time DESC"])
    except Exception:  # the links are a convenience; the UI still starts
        return []
    links = []
    for exp in [e for e in found if e.name != "Default"][:count]:
        key = None
        with contextlib.suppress(MlflowException, OSError):
            key = ensure_view(c, exp.experiment_id)
        links.append((exp.name, runs_url(base, exp.experiment_id, key)))
    return links


def _port_taken(port: int) -> bool:
    """Whether another process listens on 127.0.0.1:`port` (a bind fails). SO_REUSEADDR: a
    port a stopped server left in TIME_WAIT is free to a new one, as it is to uvicorn."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _free_port() -> int:
    """A port on 127.0.0.1 that no process listens on now (the system picks it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _answers(base: str) -> bool:
    """Whether the server answers HTTP (its `/health` says OK)."""
    try:
        with urllib.request.urlopen(f"{base}/health", timeout=ASK_TIMEOUT_S) as response:
            return response.status == 200
    except OSError:
        return False


def _serve(cmd: list[str], base: str, uri: str, app_folder: Path) -> int:
    """Run the MLflow server in a process group of its own, its app found in `app_folder`
    (`ui_mode.app_path`), say "ready" with the links once it answers, and stop that whole
    group (the server, uvicorn and its workers) when this process gets SIGINT, SIGTERM or
    SIGHUP."""
    import signal

    # A session (so a process group) of its own: `os.killpg` stops the server with uvicorn and
    # its workers and never this process, and the terminal's Ctrl-C reaches this process only
    # MLflow's job runner (a huey consumer per job type, each importing MLflow: 25 s of CPU and
    # 8 processes at every start, measured) serves GenAI jobs that isolab's runs never use.
    # MLFLOW_SERVER_ENABLE_JOB_EXECUTION=true in the shell turns it back on.
    env = dict(os.environ)
    env.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(app_folder), env.get("PYTHONPATH")) if p)
    server = subprocess.Popen(cmd, start_new_session=True, env=env)

    def stop(signum, frame) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    try:
        links = _experiment_links(uri, base)  # while the server starts
        while server.poll() is None and not _answers(base):
            time.sleep(POLL_S)
        if server.poll() is None:
            console.print(f"ready: {base}/{UI_HOME}", soft_wrap=True, highlight=False)
            for name, link in links:
                console.print(f"  {name}   {link}", soft_wrap=True, highlight=False, markup=False)
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
