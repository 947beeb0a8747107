"""The MLflow UI served by `isolab ui`, driven in headless Chromium as a user would browse it.

Two real (tiny) training runs are exported as a snapshot and imported into a throwaway SQLite
store, and an analysis with a figure is logged on the sweep's parent run; the test then finds,
in the rendered pages, the study's experiment opening on its runs table, the parent run with its
two children, a child's `flops/total` metric, and the figure in the parent's artifacts.

Setup installs Debian's `chromium` and `chromium-driver` (the driver matches the browser's
version exactly) when they are missing, as `scripts/ci_services.sh` does; the test skips only
when they cannot be installed. Selenium never downloads anything: the driver path is explicit
and Selenium Manager runs offline.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import psutil
import pytest
from system_packages import apt_install

pytest.importorskip("selenium", reason="selenium is not installed (pip install -e '.[dev]')")

from helpers import free_port  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import TimeoutException, WebDriverException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as EC  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from isolab import tracking  # noqa: E402
from isolab.config import RunConfig  # noqa: E402
from isolab.rl.train import train  # noqa: E402
from isolab.study.analyses import Report  # noqa: E402
from isolab.study.pipeline import log_analysis, save_report  # noqa: E402
from isolab.tracking import KIND_TAG  # noqa: E402
from isolab.tracking.importing import import_runs  # noqa: E402
from isolab.tracking.runs import load_history, load_runs  # noqa: E402
from isolab.tracking.snapshot import export_runs  # noqa: E402

STUDY = "ui-browser"
ANALYSIS = "frontier"  # the report's name: its artifacts go under analysis/frontier/
METRIC = "flops/total"
FIGURE = "ui_browser_frontier.png"
FIGURE_PX = (300, 200)  # 3 x 2 inches at 100 dpi
WAIT_S = 60  # the UI is slow on a loaded 2-core machine; each wait is for one element
UI_START_S = 120


# ---- Chromium ------------------------------------------------------------------------------
def _chromium_paths() -> tuple[str, str] | None:
    browser = shutil.which("chromium")
    driver = shutil.which("chromedriver") or (
        "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").is_file() else None
    )
    return (browser, driver) if browser and driver else None


@pytest.fixture(scope="session")
def chromium() -> tuple[str, str]:
    """Paths of Debian's Chromium and its chromedriver, installed with apt-get when missing."""
    if _chromium_paths() is None:
        apt_install("chromium", "chromium-driver")
    paths = _chromium_paths()
    if paths is None:
        pytest.skip("chromium-driver installed but `chromium` / `chromedriver` not found")
    return paths


@pytest.fixture
def browser(chromium: tuple[str, str], tmp_path: Path) -> Iterator[webdriver.Chrome]:
    binary, driver_path = chromium
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1600,1000",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(arg)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SE_OFFLINE", "true")  # never let Selenium Manager reach the network
        service = Service(executable_path=driver_path, log_output=str(tmp_path / "driver.log"))
        driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()


# ---- `isolab ui` ---------------------------------------------------------------------------
def _isolab_cmd() -> list[str]:
    """The `isolab` console script of this environment (`[project.scripts]`)."""
    script = Path(sys.executable).parent / "isolab"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from isolab.cli import main; main()"]


@contextlib.contextmanager
def _isolab_ui(uri: str, cwd: Path, log: Path) -> Iterator[tuple[str, Callable, Callable]]:
    """Start `isolab ui` in its own session; yields its URL, a wait-until-healthy function and
    a stop function that checks the whole server stops."""
    port = free_port()
    cmd = [*_isolab_cmd(), "ui", "--tracking-uri", uri, "--port", str(port)]
    base = f"http://127.0.0.1:{port}"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )

    def wait_healthy() -> None:
        deadline = time.monotonic() + UI_START_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"`isolab ui` exited with {proc.returncode}:\n{_tail(log)}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{base}/health", timeout=2) as response,
            ):
                if response.status == 200:
                    return
            if time.monotonic() > deadline:
                pytest.fail(f"`isolab ui` did not answer in {UI_START_S} s:\n{_tail(log)}")
            time.sleep(0.5)

    def stop() -> None:
        """SIGTERM to `isolab ui` alone, as a process manager sends it: the MLflow server it
        started (uvicorn and its workers, in a process group of their own) must stop too."""
        server = psutil.Process(proc.pid).children(recursive=True)
        assert server, "isolab ui started no server process"
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, _tail(log)
        _, alive = psutil.wait_procs(server, timeout=15)
        assert not alive, f"still running after isolab ui stopped: {alive}"
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{base}/health", timeout=2):
            pytest.fail("the UI still answers after isolab ui stopped")

    try:
        yield base, wait_healthy, stop
    finally:
        # Whatever is left if the test failed first: `isolab ui` and the server's group.
        for child in (
            psutil.Process(proc.pid).children(recursive=True) if proc.poll() is None else []
        ):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _printed_link(log: Path, name: str) -> str:
    """The link `isolab ui` printed for experiment `name`."""
    import re

    text = log.read_text(errors="replace")
    found = re.search(rf"^\s*{re.escape(name)}\s+(http://127\.0\.0\.1:\S+)", text, re.MULTILINE)
    assert found, f"`isolab ui` printed no link for {name}:\n{_tail(log)}"
    return found.group(1)


def _tail(path: Path, n: int = 3000) -> str:
    return path.read_text(errors="replace")[-n:] if path.exists() else ""


# ---- data ----------------------------------------------------------------------------------
def _figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(FIGURE_PX[0] / 100, FIGURE_PX[1] / 100), dpi=100)
    ax.plot([1, 2, 4, 8], [0.2, 0.35, 0.45, 0.5], marker="o")
    return fig


def _imported_study(tmp_path: Path, uri: str) -> None:
    """Two real tiny runs trained in a scratch store, exported as a snapshot (with every
    metric), imported into the UI's store (a sweep parent with its two children), and an
    analysis with one figure and one table logged on the parent."""
    scratch = f"sqlite:///{tmp_path / 'scratch.db'}"
    for n in (2, 4):
        cfg = RunConfig(
            experiment=STUDY, model="tiny-m", n=n, B_p=2, M=2,
            eval_problems=4, eval_k_samples=2, eval_ks=(1, 2),
        )  # fmt: skip
        train(cfg, tracking_uri=scratch)
    df = load_runs(STUDY, tracking_uri=scratch)
    snap = export_runs(df, tmp_path / "snapshot", history=load_history(STUDY, tracking_uri=scratch))
    import_runs(snap, tracking_uri=uri)
    report = Report(ANALYSIS, "", figures={FIGURE.removesuffix(".png"): _figure()})
    report.tables["by_n"] = df.select("n", "step", "eval/avg@2")
    log_analysis(STUDY, report, save_report(report, tmp_path / "report"), uri)


# ---- the test ------------------------------------------------------------------------------
def test_mlflow_ui_lands_on_an_imported_sweep_with_children_metrics_and_figures(
    isolab_cache, tracking_uri, tmp_path, browser
):
    # The store and experiment exist before the UI starts, so the UI boots (slow: several
    # uvicorn workers) while the tiny runs train.
    exp_id = tracking.experiment_id(STUDY, tracking_uri)
    log = tmp_path / "isolab-ui.log"
    with _isolab_ui(tracking_uri, tmp_path, log) as (base, wait_healthy, stop):
        _imported_study(tmp_path, tracking_uri)
        client = MlflowClient(tracking_uri)
        (parent,) = client.search_runs([exp_id], filter_string=f"tags.`{KIND_TAG}` = 'sweep'")
        children = client.search_runs(
            [exp_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'"
        )
        assert len(children) == 2
        child = children[0]
        flops_total = child.data.metrics[METRIC]
        wait_healthy()

        ui = _Page(browser, tmp_path, log)

        # 1. The link `isolab ui` prints for the study lands on its runs table (not on MLflow's
        #    GenAI overview), which lists the sweep's parent run.
        ui.get(_printed_link(log, STUDY))
        ui.wait(EC.url_contains(f"/experiments/{exp_id}/runs"), f"experiment {STUDY!r} opened")
        parent_name = parent.info.run_name
        ui.wait(
            EC.visibility_of_element_located(
                (By.XPATH, f"//*[normalize-space(text())='{parent_name}']")
            ),
            f"the sweep's parent run {parent_name!r} in the runs table the experiment opens on",
        )

        # 2. The parent expands to its child runs; a child's page shows flops/total.
        expander = (  # the ⊞ button in the parent's run-name cell
            f"//*[normalize-space(text())='{parent_name}']/ancestor::*[@role='gridcell'][1]"
            "//button[contains(@data-component-id, 'runnamecellrenderer')]"
        )
        ui.wait(
            EC.element_to_be_clickable((By.XPATH, expander)),
            "the expander of the parent's child runs",
        ).click()
        for run in children:
            ui.wait(
                EC.visibility_of_element_located(
                    (By.XPATH, f"//*[normalize-space(text())='{run.info.run_name}']")
                ),
                f"child run {run.info.run_name!r} under the parent",
            )
        ui.click_text(child.info.run_name, f"child run {child.info.run_name!r}")
        ui.wait(EC.url_contains(f"/runs/{child.info.run_id}"), "the child's run page")
        search = ui.wait(
            EC.visibility_of_element_located(
                (By.CSS_SELECTOR, "input[placeholder='Search metrics']")
            ),
            "the metrics search box of the child run",
        )
        search.send_keys(METRIC)  # as a user would among ~60 metrics; the table may be virtual
        name = ui.wait(
            EC.visibility_of_element_located(
                (By.XPATH, f"//*[@role='row']//*[normalize-space(text())='{METRIC}']")
            ),
            f"metric {METRIC!r} in the metrics table of the child run",
        )
        row = name.find_element(By.XPATH, "./ancestor::*[@role='row'][1]")
        cells = [c for c in row.text.splitlines() if c.strip() and c.strip() != METRIC]
        ui.check(
            any(_number(c) == pytest.approx(flops_total, rel=1e-3) for c in cells),
            f"{METRIC} row reads {row.text!r}, expected {flops_total:g}",
        )

        # 3. The parent's page holds the analysis: the figure's preview loads.
        ui.get(_printed_link(log, STUDY))
        ui.click_text(parent_name, f"the parent run {parent_name!r} in the runs table")
        ui.wait(EC.url_contains(f"/runs/{parent.info.run_id}"), "the parent's run page")
        ui.click_text("Artifacts", "the Artifacts tab of the parent run")
        for node in ("analysis", ANALYSIS, "figures", FIGURE):  # not the breadcrumb's links
            locator = (By.XPATH, f"//*[normalize-space(text())='{node}'][not(ancestor::a)]")
            ui.wait(
                EC.element_to_be_clickable(locator), f"{node} in the parent's artifacts"
            ).click()
        ui.wait(
            lambda d: d.execute_script(
                "return [...document.images].some(i => i.complete"
                " && i.naturalWidth === arguments[0] && i.naturalHeight === arguments[1])",
                *FIGURE_PX,
            ),
            f"a loaded {FIGURE_PX[0]}x{FIGURE_PX[1]} preview image of {FIGURE}",
        )

        # 4. SIGTERM to `isolab ui` stops the whole server.
        stop()


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", "").strip())
    except ValueError:
        return None


class _Page:
    """Explicit waits that fail with a screenshot, the page source and the UI's log."""

    def __init__(self, driver: webdriver.Chrome, out: Path, ui_log: Path):
        self.driver, self.out, self.ui_log = driver, out, ui_log
        self.waiter = WebDriverWait(driver, WAIT_S, poll_frequency=0.5)

    def get(self, url: str) -> None:
        try:
            self.driver.get(url)
            return
        except WebDriverException as err:
            error = err.msg
        self.fail(f"could not load {url}: {error}")  # outside `except`: no chained traceback

    def wait(self, condition: Callable[[Any], Any], what: str) -> Any:
        try:
            return self.waiter.until(condition)
        except TimeoutException:
            pass
        self.fail(f"the UI did not show {what} within {WAIT_S} s")

    def click_text(self, text: str, what: str) -> None:
        locator = (By.XPATH, f"//*[normalize-space(text())='{text}']")
        self.wait(EC.element_to_be_clickable(locator), what).click()

    def check(self, ok: bool, message: str) -> None:
        if not ok:
            self.fail(message)

    def fail(self, message: str) -> NoReturn:
        shot, source = self.out / "failure.png", self.out / "failure.html"
        url = "?"
        with contextlib.suppress(WebDriverException):
            url = self.driver.current_url
        with contextlib.suppress(WebDriverException):
            self.driver.save_screenshot(str(shot))
        with contextlib.suppress(WebDriverException):
            source.write_text(self.driver.page_source)
        pytest.fail(
            f"{message}\nurl: {url}\nscreenshot: {shot}\n"
            f"page source: {source}\n`isolab ui` log ({self.ui_log}):\n{_tail(self.ui_log, 1500)}",
            pytrace=False,
        )
