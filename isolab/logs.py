"""Quiet libraries: keep the terminal (and a notebook's output) for isolab's own progress."""

from __future__ import annotations

import logging
import os
import sys
import warnings


def quiet_libraries() -> None:
    """No per-load progress bars, deprecation chatter or INFO lines from MLflow, transformers,
    TRL or datasets; isolab's own logging is untouched. Safe to call more than once."""
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="trl")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")  # read when mlflow is imported
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")  # one line per run
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    # read when transformers / huggingface_hub are imported: importing transformers here would
    # cost every command (`isolab --help` included) seconds of start-up
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    if "transformers" in sys.modules:  # already imported: its settings are read, set them
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()


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
