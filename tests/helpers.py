"""Helpers the tests share (not part of isolab): a real `mlflow server` on loopback."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def mlflow_server(
    backend_store_uri: str,
    artifacts_dir: str | Path,
    port: int | None = None,
    log_file: str | Path | None = None,
    timeout_s: float = 180.0,
) -> Iterator[str]:
    """Start `mlflow server` on 127.0.0.1 in front of a store; yields its tracking URI.

    Use it for stores that several machines share (PostgreSQL); the server proxies artifacts
    into `artifacts_dir`. The server is stopped when the block exits.
    """
    port = port or free_port()
    cmd = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        backend_store_uri,
        "--artifacts-destination",
        Path(artifacts_dir).resolve().as_uri(),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    out = open(log_file, "ab") if log_file else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited with code {proc.returncode}: {cmd}")
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"mlflow server did not answer on {uri} in {timeout_s:.0f} s")
            time.sleep(0.5)
        yield uri
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if log_file:
            out.close()
