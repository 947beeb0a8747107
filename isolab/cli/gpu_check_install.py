"""`isolab gpu-check --self-check`: what an offline install must pass before a study starts.

`NEEDED` (every module a run imports), their installed versions (`versions`, also recorded in
gpu-check.json) and `self_check` (import each, log one run to a fresh SQLite store), which
install.sh runs last (`isolab bundle`). Apart from the measurements: it needs no GPU and no
data, and takes seconds.
"""

from __future__ import annotations

import tempfile
from typing import Any

#: What a run on the node imports: `--self-check` imports each and prints its version.
NEEDED = (
    "torch", "transformers", "accelerate", "peft", "trl", "datasets", "mlflow", "sqlalchemy",
    "alembic", "polars", "pyarrow", "pydantic", "math_verify", "numpy", "scipy", "matplotlib",
)  # fmt: skip


def versions() -> dict[str, str | None]:
    """Version of the distribution behind each module of `NEEDED`, vLLM and isolab (None: not
    installed); `mlflow` is mlflow-skinny's in a bundle's install."""
    import importlib.metadata as md

    dists = md.packages_distributions()
    out: dict[str, str | None] = {}
    for module in (*NEEDED, "vllm", "isolab"):
        names = dists.get(module) or []
        out[module] = md.version(names[0]) if names else None
    return out


def self_check() -> dict[str, Any]:
    """Import every module a run needs and log one run to a fresh SQLite store: what an
    offline install must pass before a study starts. Raises ImportError naming a missing one."""
    import importlib

    import torch

    for module in NEEDED:
        importlib.import_module(module)
    import mlflow

    with tempfile.TemporaryDirectory(prefix="isolab-self-check-") as tmp:
        mlflow.set_tracking_uri(f"sqlite:///{tmp}/mlflow.db")
        mlflow.set_experiment("self-check")
        with mlflow.start_run():
            mlflow.log_metric("ok", 1.0)
    cuda = torch.cuda.is_available()
    return {
        "versions": versions(),
        "cuda": cuda,
        "device_name": torch.cuda.get_device_name() if cuda else None,
    }
