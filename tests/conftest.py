"""Shared fixtures: the tiny model built once per session, and throwaway MLflow stores."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def isolab_cache() -> Iterator[Path]:
    """Cache with tiny-m and its difficulty splits, built once (a no-op when already there).

    `$ISOLAB_CACHE` if set, else the repo's `runs/cache`, as an absolute path exported to this
    process and every subprocess or worker it starts.
    """
    from isolab import models
    from isolab.rl.difficulty import load_or_label

    root = Path(os.environ.get("ISOLAB_CACHE") or REPO / "runs" / "cache").resolve()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ISOLAB_CACHE", str(root))
        models.build("tiny-m")
        load_or_label("tiny-m", "arithmetic", pool_size=4000)
        yield root


@pytest.fixture
def tracking_uri(tmp_path: Path) -> str:
    """A fresh SQLite MLflow store for one test."""
    return f"sqlite:///{tmp_path / 'mlflow.db'}"
