"""Quiet libraries: keep the terminal (and a notebook's output) for isolab's own progress.

The one place where isolab filters what other libraries print: their Python warnings, their
loggers, and the progress bars and banners they draw themselves (read from environment
variables when they are imported, or when they draw). `configure` sets it up for a command,
`quiet_libraries` for a notebook's kernel or a library entry point, `quiet_worker` for a sweep
worker, whose output lands in its runner's progress display. Set `$ISOLAB_LOG=INFO` to see
isolab's own INFO lines; an environment variable below that the user set is left as it is.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings

#: Packages whose warnings are theirs to fix, not the user's: deprecations inside TRL, a
#: vLLM version TRL has not been tested with, tokenizers' fork notes, MLflow's own notices.
QUIET_PACKAGES = (
    "accelerate",
    "datasets",
    "huggingface_hub",
    "mlflow",
    "peft",
    "torch",
    "transformers",
    "trl",
    "vllm",
)

#: Read by the libraries when imported (transformers, huggingface_hub, vLLM, tokenizers) or each
#: time they would draw (MLflow's artifact download bar: "Downloading artifacts: 0%").
QUIET_ENV = {
    "MLFLOW_LOGGING_LEVEL": "WARNING",
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",  # one line per run
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
    "TOKENIZERS_PARALLELISM": "false",
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    # vLLM's level once it configures its own handler (an engine's start): its INFO banners
    "VLLM_LOGGING_LEVEL": "ERROR",
}


def quiet_libraries() -> None:
    """No per-load progress bars, deprecation chatter or INFO lines from MLflow, transformers,
    TRL, vLLM or datasets; isolab's own warnings and logging are untouched. Safe to call more
    than once. Importing transformers here would cost every command (`isolab --help` included)
    seconds of start-up: its settings are set directly only where it is already imported."""
    warnings.filterwarnings("ignore", category=FutureWarning)
    for package in QUIET_PACKAGES:
        warnings.filterwarnings("ignore", module=rf"{package}(\.|$)")
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    # before vLLM configures its logger, its records reach Python's fallback handler: "Triton is
    # installed, but doesn't include CPU backend" on every CPU import broke the progress bar
    with contextlib.suppress(ValueError):  # a level the user set that logging does not know
        logging.getLogger("vllm").setLevel(os.environ["VLLM_LOGGING_LEVEL"].upper())
    if "transformers" in sys.modules:  # already imported: its settings are read, set them
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()


def quiet_worker() -> None:
    """A sweep worker process: every Python warning dropped, isolab's too, as they would break
    the runner's progress display (a worker writes to its terminal directly); `isolab train`
    on the point's config shows them."""
    quiet_libraries()
    warnings.filterwarnings("ignore")


def without_sklearn() -> None:
    """Keep transformers from importing scikit-learn: its generation code imports `roc_curve` at
    import time whenever scikit-learn is installed (MLflow installs it), for assisted
    generation's adaptive threshold, which isolab never uses. That import cost 5–6 s of CPU in
    every process that loads a model (`isolab train`, a sweep worker, a notebook's kernel, a
    test) on 2 cores. Call it before the first model class is imported; a no-op after."""
    if "transformers.generation.candidate_generator" in sys.modules:
        return
    import transformers.utils as hf_utils

    hf_utils.is_sklearn_available = _no_sklearn


def _no_sklearn() -> bool:
    return False


def configure(level: str | None = None) -> None:
    """Logging for a command-line entry point: `$ISOLAB_LOG` (default WARNING), libraries quiet."""
    logging.basicConfig(level=level or os.environ.get("ISOLAB_LOG", "WARNING"))
    quiet_libraries()
