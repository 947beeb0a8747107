"""Shared fixtures: the tiny model built once per session, a throwaway MLflow store, and the
`isolab` command line run in-process. (Plain helpers a test imports, such as `tiny_llama` and
`mlflow_server`, are in helpers.py: a module-level constant cannot take a fixture.)

Under pytest-xdist (`make test` runs 2 workers, a test file per worker) the controller builds
the model cache before the workers start, and each worker and the processes it starts use one
torch thread: two workers on two cores, no oversubscription.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from click.testing import Result

REPO = Path(__file__).resolve().parents[1]


#: Files handed out first under xdist (`--dist loadfile`: a file's tests on one worker, as they
#: share module fixtures and the README commands run in order), longest first, so that the two
#: workers end together (most of the suite's minutes are in them; seconds per file from the
#: fresh-clone CI's --durations, in the comments). xdist ≥ 3.6 hands files out by their number
#: of tests instead (`--loadscope-reorder`, on by default), which put these among the last (the
#: adaptive sweeps' file 54th of 76, the notebooks 65th): balanced by luck if at all.
#: `pytest_configure` turns that off, so this order is the one the workers get.
LONG_FIRST = (
    "test_adaptive_interrupts.py",  # ~215 s: two Ctrl-C / SIGKILL sweeps, each resumed
    "test_notebooks.py",  # ~110
    "test_readme_commands.py",
    "test_sweep_interrupts.py",  # ~70
    "test_study.py",
    "test_vllm.py",  # ~60: a vLLM engine on the CPU
    "test_sweep_run.py",  # ~50
    "test_adaptive_live.py",  # ~45
    "test_researcher_loop.py",  # ~45
    "test_verdicts.py",
    "test_ui_browser.py",  # ~30
    "test_install.py",
    "test_adaptive_tune.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: files keep order


def _cache_root() -> Path:
    return Path(os.environ.get("ISOLAB_CACHE") or REPO / "runs" / "cache").resolve()


def _build_cache() -> None:
    """tiny-m and its difficulty labels into $ISOLAB_CACHE (a no-op when already there)."""
    from isolab import models
    from isolab.difficulty import load_or_label

    models.build("tiny-m")
    load_or_label("tiny-m", "arithmetic", pool_size=4000)


def pytest_configure(config: pytest.Config) -> None:
    # MLflow's usage telemetry: a sender thread in every process the tests start, on a machine
    # without internet; it once raced in a server's start-up (`_MLFLOW_TELEMETRY_SESSION_ID`)
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    # `make test &` from a script (no job control) starts with SIGINT ignored, which every
    # subprocess inherits: the Ctrl-C tests' sweeps would ignore their Ctrl-C
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    worker = hasattr(config, "workerinput")
    if worker:
        os.environ.setdefault("OMP_NUM_THREADS", "1")  # inherited by the worker's subprocesses
        import torch

        torch.set_num_threads(1)
        from isolab.logs import without_sklearn

        without_sklearn()  # as isolab's own processes do: 5 s of CPU per worker
    elif config.getoption("numprocesses", default=None):
        # the controller of xdist workers: build once what they all read, before they start
        os.environ["ISOLAB_CACHE"] = str(_cache_root())
        _build_cache()
        # files in LONG_FIRST's order, not by their number of tests (see LONG_FIRST)
        config.option.loadscopereorder = False


@pytest.fixture(scope="session")
def isolab_cache() -> Iterator[Path]:
    """Cache with tiny-m and its difficulty splits, built once (a no-op when already there).

    `$ISOLAB_CACHE` if set, else the repo's `runs/cache`, as an absolute path exported to this
    process and every subprocess or worker it starts.
    """
    root = _cache_root()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ISOLAB_CACHE", str(root))
        _build_cache()
        yield root


@pytest.fixture
def tracking_uri(tmp_path: Path) -> str:
    """A fresh SQLite MLflow store for one test (the file is made on first write).

    Build a URI by hand only where a test needs a second store beside this one, or the store's
    file at a path it then checks."""
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    """`cli("runs", "export", …)`: the `isolab` command line run in-process (typer's
    CliRunner), returning click's Result (`exit_code`, `output`).

    The test runs in `tmp_path` with no $MLFLOW_TRACKING_URI, so that `runs/` and the default
    store are its own: a command without --tracking-uri writes nothing outside the test."""
    from typer.testing import CliRunner

    from isolab.cli import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return lambda *args: CliRunner().invoke(app, list(args))


@pytest.fixture(scope="module")
def bench():
    """benchmarks/flops_accuracy.py as a module: its FlopCounterMode measurements, which the
    FLOP tests compare the ledger with."""
    import importlib.util
    import sys

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "flops_accuracy.py"
    spec = importlib.util.spec_from_file_location("flops_accuracy", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["flops_accuracy"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """One torch thread for a module's tests: tiny matmuls on shared cores run up to 10× faster
    without OpenMP contention (`pytestmark = pytest.mark.usefixtures("one_thread")`)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def signal_handlers_restored(request) -> Iterator[None]:
    """Every test gets the process's SIGINT/SIGTERM handlers (and signal mask) as the one before
    left them, and leaves them so: a handler left behind (SIGINT ignored) is inherited by every subprocess a
    later test starts in the same xdist worker, whose Ctrl-C then does nothing (CI once failed
    two Ctrl-C tests so). A test that changed them is named in a warning."""
    import signal
    import threading
    import warnings

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    if signal.pthread_sigmask(signal.SIG_BLOCK, []) != mask:  # a blocked SIGINT is inherited too
        warnings.warn(f"{request.node.nodeid} left signals blocked: restored", stacklevel=1)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    for sig, handler in before.items():
        if signal.getsignal(sig) != handler:
            warnings.warn(
                f"{request.node.nodeid} left {signal.Signals(sig).name} handled by "
                f"{signal.getsignal(sig)!r} (restored to {handler!r})",
                stacklevel=1,
            )
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
