"""The MLflow UI served by `isolab ui`, driven in headless Chromium as a user would browse it.

Two real (tiny) training runs are exported as a snapshot and imported into a throwaway SQLite
store; an analysis with a figure, and the sweep's report page (`isolab report --log`, run as a
user runs it), are logged on the sweep's parent run. The test waits for `isolab ui` to say
"ready" (the server must answer then) and walks, taking a screenshot at each stop (in
`$ISOLAB_TEST_ARTIFACTS/ui-browser/`, else the test's tmp_path; the paths are printed):

1. the landing page it prints: the experiments list in MLflow's model-training mode;
2. the sweep's runs, flat, with n, B_p, M, seed, final avg@k, ρ, FLOPs and rollouts as
   columns (`isolab.tracking.views`), a child's FLOPs in its row;
3. the chart view, its metrics charted against compute (x: `compute/rollouts`, `flops/total`);
4. a run's FLOP-split figure, reached from the link in the run's description;
5. the analysis figure on the sweep's parent run, reached from the experiment's description;
6. the sweep's report, opened from the parent run's artifacts: MLflow's preview (an iframe)
   shows the page's title and every figure it embeds.

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
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import psutil
import pytest
from system_packages import apt_install

pytest.importorskip("selenium", reason="selenium is not installed (pip install -e '.[dev]')")

from helpers import free_port, isolab_cmd
from mlflow.tracking import MlflowClient
from selenium import webdriver
from selenium.common.exceptions import (
    ElementClickInterceptedException,
    StaleElementReferenceException,
    TimeoutException,
    WebDriverException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from isolab import tracking
from isolab.config import RunConfig
from isolab.rl.train import train
from isolab.study.pipeline import log_analysis, save_report
from isolab.study.report import Report
from isolab.tracking import KIND_TAG
from isolab.tracking.importing import import_runs
from isolab.tracking.runs import load_history, load_runs
from isolab.tracking.snapshot import export_runs

STUDY = "ui-browser"
ANALYSIS = "frontier"  # the report's name: its artifacts go under analysis/frontier/
METRIC = "flops/total"
#: The report's reward column: the runs evaluate avg@1 and avg@2 only (not the default avg@4).
REPORT_METRIC = "eval/avg@2"
REPORT_FILE = f"{STUDY}.html"  # the name `isolab report` gives it by default
FIGURE = "ui_browser_frontier.png"
FIGURE_PX = (300, 200)  # 3 x 2 inches at 100 dpi
RUN_FIGURE_PX = (630, 324)  # run_figure's 7 x 3.6 inches at 90 dpi
#: The runs table's columns a sweep opens with: the grid, then final metrics (the runs evaluate
#: avg@1 and avg@2 only: the view picks the largest k).
COLUMNS = (
    "n",
    "B_p",
    "M",
    "seed",
    "eval/avg_at_2",
    "compute/rho",
    "flops/total",
    "compute/rollouts",
)
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
@contextlib.contextmanager
def _isolab_ui(uri: str, cwd: Path, log: Path) -> Iterator[tuple[str, Callable, Callable]]:
    """Start `isolab ui` in its own session; yields its URL, a function that waits for its
    "ready" (returning the landing URL it printed) and a stop function that checks the whole
    server stops."""
    port = free_port()
    cmd = [*isolab_cmd(), "ui", "--tracking-uri", uri, "--port", str(port)]
    base = f"http://127.0.0.1:{port}"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )

    def wait_ready() -> str:
        """The URL `isolab ui` printed with "ready", once it did; the server must answer
        HTTP then: "ready" means ready."""
        import re

        deadline = time.monotonic() + UI_START_S
        while True:
            found = re.search(r"^ready: (http://\S+)", _tail(log, 10**6), re.MULTILINE)
            if found:
                break
            if proc.poll() is not None:
                pytest.fail(f"`isolab ui` exited with {proc.returncode}:\n{_tail(log)}")
            if time.monotonic() > deadline:
                pytest.fail(f"`isolab ui` said no 'ready' in {UI_START_S} s:\n{_tail(log)}")
            time.sleep(0.2)
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=5) as response:
                assert response.status == 200
        except OSError as exc:
            pytest.fail(f"`isolab ui` said ready, but the server does not answer: {exc}")
        return found.group(1)

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
        yield base, wait_ready, stop
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
            experiment=STUDY,
            model="tiny-m",
            n=n,
            B_p=2,
            M=2,
            eval_problems=4,
            eval_k_samples=2,
            eval_ks=(1, 2),
        )
        train(cfg, tracking_uri=scratch)
    df = load_runs(STUDY, tracking_uri=scratch)
    snap = export_runs(df, tmp_path / "snapshot", history=load_history(STUDY, tracking_uri=scratch))
    import_runs(snap, tracking_uri=uri)
    report = Report(ANALYSIS, "", figures={FIGURE.removesuffix(".png"): _figure()})
    report.tables["by_n"] = df.select("n", "step", "eval/avg@2")
    log_analysis(STUDY, report, save_report(report, tmp_path / "report"), uri)


# ---- the test ------------------------------------------------------------------------------
def _shots_dir(tmp_path: Path) -> Path:
    """Where the screenshots go: `$ISOLAB_TEST_ARTIFACTS/ui-browser/` (kept after the run, for
    CI to upload) or the test's tmp_path."""
    root = os.environ.get("ISOLAB_TEST_ARTIFACTS")
    out = (Path(root) if root else tmp_path) / "ui-browser"
    out.mkdir(parents=True, exist_ok=True)
    return out


def _logged_report(cli, uri: str, out: Path) -> int:
    """`isolab report STUDY --log`, as a user runs it after a sweep: the page is written to
    `out` and logged on the sweep's parent run. Returns how many figures the page embeds."""
    import re

    started = time.monotonic()
    res = cli(
        "report",
        STUDY,
        "--metric",
        REPORT_METRIC,
        "--n-boot",
        "0",
        "--out",
        str(out),
        "--log",
        "--tracking-uri",
        uri,
    )
    assert res.exit_code == 0, res.output
    assert f"artifact report/{out.name}" in res.output, res.output
    found = re.search(r"\((\d+) figures\)", res.output)
    assert found and int(found.group(1)) > 0, res.output
    print(f"isolab report --log: {time.monotonic() - started:.1f} s")
    return int(found.group(1))


def test_mlflow_ui_opens_on_a_sweeps_points_charts_against_compute_and_figures(
    isolab_cache, tracking_uri, tmp_path, browser, cli
):
    # The store and experiment exist before the UI starts, so the UI boots (slow on 2 cores)
    # while the tiny runs train.
    started = time.monotonic()
    exp_id = tracking.experiment_id(STUDY, tracking_uri)
    log = tmp_path / "isolab-ui.log"
    with _isolab_ui(tracking_uri, tmp_path, log) as (base, wait_ready, stop):
        _imported_study(tmp_path, tracking_uri)
        print(f"runs trained and imported: {time.monotonic() - started:.1f} s")
        figures = _logged_report(cli, tracking_uri, tmp_path / REPORT_FILE)
        client = MlflowClient(tracking_uri)
        (parent,) = client.search_runs([exp_id], filter_string=f"tags.`{KIND_TAG}` = 'sweep'")
        children = client.search_runs(
            [exp_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'"
        )
        assert len(children) == 2
        child = max(children, key=lambda r: r.data.metrics[METRIC])
        landing = wait_ready()
        ui = _Page(browser, tmp_path, log, _shots_dir(tmp_path))
        print(f"isolab ui ready, runs imported: {time.monotonic() - started:.1f} s")

        # 1. The landing page `isolab ui` printed with "ready": the experiments list in the
        #    model-training mode, not MLflow's GenAI welcome page.
        ui.get(landing)
        ui.wait(EC.visibility_of_element_located((By.LINK_TEXT, STUDY)), f"experiment {STUDY}")
        ui.check("workflowType=machine_learning" in browser.current_url, browser.current_url)
        ui.check("Welcome to MLflow" not in browser.page_source, "the GenAI welcome page")
        ui.close_assistant()
        ui.shot("1-landing")

        # 2. The link printed for the sweep opens on its points, flat (not folded under the
        #    parent run), with the grid and the final metrics as columns.
        ui.get(_printed_link(log, STUDY))
        ui.wait(EC.url_contains(f"/experiments/{exp_id}/runs"), f"experiment {STUDY!r} opened")
        for column in COLUMNS:
            ui.wait(
                EC.presence_of_element_located(
                    (By.CSS_SELECTOR, f"[data-testid='sort-header-{column}']")
                ),
                f"column {column!r} in the sweep's runs table",
            )
        for run in children:
            ui.wait(
                EC.visibility_of_element_located(
                    (By.XPATH, f"//*[normalize-space(text())='{run.info.run_name}']")
                ),
                f"run {run.info.run_name!r} in the table, not folded under the parent",
            )
        parent_rows = browser.find_elements(
            By.XPATH, f"//*[normalize-space(text())='{parent.info.run_name}']"
        )
        ui.check(not parent_rows, "the sweep's parent run among its points")
        cells = ui.row_text(child.info.run_name)
        expected = child.data.metrics[METRIC]
        ui.check(
            any(_number(c) == pytest.approx(expected, rel=1e-3) for c in cells),
            f"{METRIC} in the row of {child.info.run_name} reads {cells}, expected {expected:g}",
        )
        ui.shot("2-sweep-runs")

        # 3. The chart view: its metrics against compute (x: a metric, not the step).
        mode = "//input[@name='runs-view-mode'][@value='CHART']/ancestor::label[1]"
        ui.click((By.XPATH, mode), "the chart view switch")
        ui.wait(
            EC.visibility_of_element_located((By.XPATH, "//*[text()='At equal compute']")),
            "the chart section 'At equal compute'",
        )
        for x in ("compute/rollouts", "flops/total"):
            ui.wait(
                lambda d, x=x: d.execute_script(
                    "return [...document.querySelectorAll('text.xtitle')]"
                    ".some(t => t.textContent === arguments[0])",
                    x,
                ),
                f"a chart with x-axis {x}",
            )
        ui.wait(
            lambda d: d.execute_script(
                "return document.querySelectorAll('path.js-line').length >= 2"
            ),
            "the runs' lines in the charts",
        )
        ui.shot("3-charts-against-compute")

        # 4. A run's FLOP-split figure, from the link in the run's description.
        ui.get(_printed_link(log, STUDY))
        ui.click_text(child.info.run_name, f"run {child.info.run_name!r}")
        ui.wait(EC.url_contains(f"/runs/{child.info.run_id}"), "the run's page")
        ui.follow(
            (By.LINK_TEXT, "figures/flop_split.png"),
            "the link to the FLOP-split figure in the run's description",
        )
        ui.wait(EC.url_contains(f"/runs/{child.info.run_id}/artifacts"), "the run's artifacts")
        ui.wait_image(RUN_FIGURE_PX, "the FLOP-split figure")
        ui.shot("4-flop-split")

        # 5. The sweep's parent run, from the experiment's description: its analysis figure.
        ui.get(_printed_link(log, STUDY))
        ui.click(
            (
                By.CSS_SELECTOR,
                "[data-component-id='mlflow.experiment.metadata_editor.expand_button']",
            ),
            "the expander of the experiment's description",
        )
        ui.follow(
            (By.PARTIAL_LINK_TEXT, "the sweep's run"),
            "the link to the sweep's run in the experiment's description",
        )
        ui.wait(EC.url_contains(f"/runs/{parent.info.run_id}"), "the parent's run page")
        ui.click_text("Artifacts", "the Artifacts tab of the parent run")
        for node in ("analysis", ANALYSIS, "figures", FIGURE):  # not the breadcrumb's links
            locator = (By.XPATH, f"//*[normalize-space(text())='{node}'][not(ancestor::a)]")
            ui.click(locator, f"{node} in the parent's artifacts")
        ui.wait_image(FIGURE_PX, f"the preview of {FIGURE}")
        ui.shot("5-parent-analysis")

        # 6. The sweep's report, beside the analysis: MLflow previews the page in an iframe
        #    (a sandboxed blob: URL), which must show its title and every figure it embeds.
        for node in ("report", REPORT_FILE):
            locator = (By.XPATH, f"//*[normalize-space(text())='{node}'][not(ancestor::a)]")
            ui.click(locator, f"{node} in the parent's artifacts")
        ui.wait(
            EC.frame_to_be_available_and_switch_to_it(
                (By.CSS_SELECTOR, "iframe.mlflow-html-iframe")
            ),
            f"the preview of {REPORT_FILE}",
        )
        ui.wait(
            EC.text_to_be_present_in_element((By.TAG_NAME, "h1"), f"isolab report: {STUDY}"),
            "the report's title in the preview",
        )
        ui.wait(
            lambda d: d.execute_script(
                "const imgs = [...document.images];"
                " return imgs.length === arguments[0] && imgs.every(i => i.complete"
                " && i.naturalWidth > 0 && i.src.startsWith('data:image/png;base64,'))",
                figures,
            ),
            f"the report's {figures} embedded figures, loaded, in the preview",
        )
        # the screenshot shows the first figure under its section's heading
        browser.execute_script("document.images[0].closest('section').scrollIntoView()")
        browser.switch_to.default_content()
        ui.shot("6-report")
        print("screenshots:", *ui.shots, sep="\n  ")

        # 7. SIGTERM to `isolab ui` stops the whole server.
        stop()


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", "").strip())
    except ValueError:
        return None


class _Page:
    """Explicit waits that fail with a screenshot, the page source and the UI's log."""

    def __init__(self, driver: webdriver.Chrome, out: Path, ui_log: Path, shots: Path):
        self.driver, self.out, self.ui_log, self.shots_dir = driver, out, ui_log, shots
        self.waiter = WebDriverWait(driver, WAIT_S, poll_frequency=0.5)
        self.shots: list[str] = []
        self.t0 = time.monotonic()

    def shot(self, name: str) -> None:
        """A screenshot of the page as it is, kept as the test's artifact (with the seconds
        since the browsing began, to see where the test's time goes)."""
        path = self.shots_dir / f"{name}.png"
        self.driver.save_screenshot(str(path))
        self.shots.append(f"{path}  ({time.monotonic() - self.t0:.1f} s)")

    def follow(self, locator: tuple[str, str], what: str) -> None:
        """Click a link of a description (MLflow opens those in a new tab) and go on there."""
        before = set(self.driver.window_handles)
        self.click(locator, what)
        self.wait(lambda d: set(d.window_handles) - before, f"the tab that {what} opens")
        (tab,) = set(self.driver.window_handles) - before
        self.driver.switch_to.window(tab)

    def close_assistant(self) -> None:
        """Close MLflow's assistant panel, which opens by itself on a browser's first visit
        to a local server (a third of the screen in every screenshot otherwise)."""
        for button in self.driver.find_elements(
            By.CSS_SELECTOR, "[data-component-id='mlflow.assistant.chat_panel.close']"
        ):
            with contextlib.suppress(WebDriverException):
                button.click()

    def row_text(self, run_name: str) -> list[str]:
        """The cells of the runs-table row of `run_name` (its pinned name cell and its
        scrolling cells are two rows of the grid with one row index)."""
        name = self.wait(
            EC.visibility_of_element_located(
                (By.XPATH, f"//*[@role='row']//*[normalize-space(text())='{run_name}']")
            ),
            f"the row of {run_name}",
        )
        index = name.find_element(By.XPATH, "./ancestor::*[@role='row'][1]").get_attribute(
            "row-index"
        )
        rows = self.driver.find_elements(By.CSS_SELECTOR, f"[role='row'][row-index='{index}']")
        return [c.strip() for r in rows for c in r.text.splitlines() if c.strip()]

    def wait_image(self, size: tuple[int, int], what: str) -> None:
        """Wait for a loaded image of `size` pixels on the page."""
        self.wait(
            lambda d: d.execute_script(
                "return [...document.images].some(i => i.complete"
                " && i.naturalWidth === arguments[0] && i.naturalHeight === arguments[1])",
                *size,
            ),
            f"{what}: a loaded {size[0]}x{size[1]} image",
        )

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

    def click(self, locator: tuple[str, str], what: str) -> None:
        """Click `locator` once a click lands: while the page still renders (an artifact tree
        unfolding, a table re-laying out), another element can sit where it is drawn, or the
        element be replaced, and the click is tried again (CI once failed on one such race)."""

        def clicked(driver: webdriver.Chrome) -> bool:
            try:
                element = EC.element_to_be_clickable(locator)(driver)
                if element:
                    element.click()
                return bool(element)
            except (ElementClickInterceptedException, StaleElementReferenceException):
                return False

        self.wait(clicked, what)

    def click_text(self, text: str, what: str) -> None:
        self.click((By.XPATH, f"//*[normalize-space(text())='{text}']"), what)

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
