"""`isolab ui` serves MLflow's UI so that it opens in model-training mode (issue 48): a run
opened from MLflow's own runs table, whose link carries no `workflowType`, opened in GenAI mode
in a browser that never used the mode switch. `isolab.tracking.ui_mode` explains the mechanism;
these tests hold it to the installed MLflow (its bundle and its app), without a browser
(tests/test_ui_browser.py drives one)."""

from __future__ import annotations

import importlib.metadata
import json
import re
from pathlib import Path

import mlflow.server
from starlette.testclient import TestClient

from isolab.tracking.ui_mode import (
    APP_NAME,
    DEFAULT_MODE_SCRIPT,
    ML_MODE_VALUE,
    MODE_KEY,
    app_path,
    create_app,
    with_default_mode,
)

BUNDLE = Path(mlflow.server.__file__).parent / "js" / "build" / "static" / "js"


def test_the_installed_mlflow_reads_its_mode_from_the_url_then_the_key_isolab_sets():
    """What `ui_mode` relies on, read in the installed bundle: an MLflow whose mode is kept
    under another key (or defaults otherwise) fails here, not silently in a browser."""
    (main,) = BUNDLE.glob("main.*.js")
    js = main.read_text(encoding="utf-8")
    key, version = re.fullmatch(r"(.+)_v(\d+)", MODE_KEY).groups()
    hook = re.search(re.escape(f'{{key:"{key}",version:') + r"(\d+),initialValue:\w+\}", js)
    assert hook is not None and hook.group(1) == version
    assert 'e.get("workflowType")' in js  # the URL's parameter comes first
    assert f'MACHINE_LEARNING="{ML_MODE_VALUE}"' in js
    # the stored value is read back with JSON.parse (MLflow's `useLocalStorage`)
    assert "window.localStorage.getItem(i);return e?JSON.parse(e)" in js


def test_the_start_page_stores_model_training_unless_the_browser_chose(tmp_path):
    page = b"<!doctype html><html><head><title>MLflow</title></head><body></body></html>"
    served = with_default_mode(page)
    assert served.startswith(b"<!doctype html><html><head><script>")
    assert served.replace(DEFAULT_MODE_SCRIPT.encode(), b"") == page
    script = DEFAULT_MODE_SCRIPT
    assert f"localStorage.getItem({json.dumps(MODE_KEY)})===null" in script  # a choice stays
    stored = script.split(f"setItem({json.dumps(MODE_KEY)},", 1)[1].split(")}", 1)[0]
    assert json.loads(json.loads(stored)) == ML_MODE_VALUE
    assert with_default_mode(b"no head here") == b"no head here"


def test_mlflows_app_serves_its_start_page_with_the_script_and_the_rest_untouched():
    client = TestClient(create_app(), base_url="http://127.0.0.1:5000")  # MLflow checks Host
    start = client.get("/")
    assert start.status_code == 200 and start.headers["content-type"].startswith("text/html")
    assert DEFAULT_MODE_SCRIPT in start.text and "static-files/static/js/main." in start.text
    assert int(start.headers["content-length"]) == len(start.content)
    assert "etag" not in start.headers
    (main,) = BUNDLE.glob("main.*.js")
    asset = client.get(f"/static-files/static/js/{main.name}")
    assert asset.status_code == 200 and asset.content == main.read_bytes()
    assert client.get("/health").text == "OK"


def test_mlflow_finds_the_app_by_its_entry_point(tmp_path):
    folder = app_path(tmp_path / "app")
    found = [
        ep
        for dist in importlib.metadata.distributions(path=[str(folder)])
        for ep in dist.entry_points
        if ep.group == "mlflow.app"
    ]
    assert [(ep.name, ep.load()) for ep in found] == [(APP_NAME, create_app)]
