"""The MLflow UI that `isolab ui` serves opens in MLflow's model-training mode, not its GenAI mode.

What decides the mode (read in MLflow 3.17.2's bundle, `mlflow/server/js/build`): the page's
URL parameter `workflowType`, else the browser's local storage key ``mlflow.workflowType_v1``
(its `useLocalStorage` hook: key ``mlflow.workflowType``, version 1), which only the mode switch
at the top left writes, else GenAI. The experiment tag ``mlflow.experimentKind`` is not read
while that switch exists (its feature flag is on in 3.17). isolab's links carry
``workflowType=machine_learning``, but a run opened from MLflow's own runs table does not: in a
browser that never used the switch it opened in GenAI mode. No server option sets the default.

So `isolab ui` starts MLflow's own server (``mlflow ui``, every option of it) with an app of
its own (``--app-name isolab``, `create_app`): MLflow's app, whose start page (``/``, where
MLflow serves its single page) first stores model training as the mode where the browser has
stored none (`DEFAULT_MODE_SCRIPT`). A browser whose person picked GenAI keeps it. MLflow finds
an app by its entry point (group ``mlflow.app``); `app_path` writes one into a folder for the
server's ``PYTHONPATH``, so no installed file changes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: The name `mlflow ui --app-name` takes.
APP_NAME = "isolab"
#: MLflow 3.17's local storage key for the mode, and the value of its model-training mode.
MODE_KEY = "mlflow.workflowType_v1"
ML_MODE_VALUE = "machine_learning"
_KEY, _VALUE = json.dumps(MODE_KEY), json.dumps(json.dumps(ML_MODE_VALUE))
#: Runs before MLflow's bundle (a deferred script): the mode where none is stored.
DEFAULT_MODE_SCRIPT = (
    f"<script>try{{if(localStorage.getItem({_KEY})===null)"
    f"localStorage.setItem({_KEY},{_VALUE})}}catch(e){{}}</script>"
)
#: The one page MLflow serves its UI from (a hash router: every view is `/#/…`).
START_PAGE = "/"
_HEAD = b"<head>"


def with_default_mode(page: bytes) -> bytes:
    """MLflow's start page with `DEFAULT_MODE_SCRIPT` first in its head; any other page as it
    is."""
    at = page.find(_HEAD)
    if at < 0:
        return page
    at += len(_HEAD)
    return page[:at] + DEFAULT_MODE_SCRIPT.encode() + page[at:]


class DefaultMode:
    """An ASGI app: `app`, its start page (an uncompressed HTML 200 to a GET of `START_PAGE`) with
    `with_default_mode`. Every other request and response passes through untouched, artifacts
    included (an HTML report is served as written)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "GET" or scope["path"] != START_PAGE:
            await self.app(scope, receive, send)
            return
        held: dict | None = None
        chunks: list[bytes] = []

        async def relay(message: dict) -> None:
            nonlocal held
            if message["type"] == "http.response.start" and _rewritable(message):
                held = message
                return
            if held is None or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            page = with_default_mode(b"".join(chunks))
            # the length changed; a validator of the file as stored would let a browser keep a
            # copy served without the script
            dropped = {b"content-length", b"etag", b"last-modified"}
            headers = [(k, v) for k, v in held["headers"] if k.lower() not in dropped]
            headers.append((b"content-length", str(len(page)).encode()))
            await send({**held, "headers": headers})
            await send({"type": "http.response.body", "body": page})

        await self.app(scope, receive, relay)


def _rewritable(start: dict) -> bool:
    """A 200 of uncompressed HTML."""
    headers = {k.lower(): v for k, v in start.get("headers", [])}
    return (
        start.get("status") == 200
        and headers.get(b"content-type", b"").startswith(b"text/html")
        and b"content-encoding" not in headers
    )


def create_app() -> DefaultMode:
    """The server's app (`mlflow ui --app-name isolab`, run by uvicorn as a factory): MLflow's
    own, its start page opening in model-training mode."""
    from mlflow.server.fastapi_app import app

    return DefaultMode(app)


def app_path(folder: Path) -> Path:
    """Write the entry point by which MLflow finds `create_app` (group ``mlflow.app``, name
    `APP_NAME`) into `folder` as an installed distribution's metadata, and return `folder`:
    the server's ``PYTHONPATH`` takes it."""
    info = folder / "isolab_mlflow_ui-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: isolab-mlflow-ui\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        f"[mlflow.app]\n{APP_NAME} = {__name__}:{create_app.__name__}\n"
    )
    return folder
