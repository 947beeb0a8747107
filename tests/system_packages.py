"""Debian packages a test needs (PostgreSQL, Chromium), installed on first use or skipped.

`scripts/ci_services.sh` installs them before `make test` in CI; a test that still finds one
missing installs it here when it runs as root with apt-get, and skips with the reason otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def apt_install(*packages: str) -> None:
    """`apt-get install` the packages, or skip the calling test saying why it could not."""
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        pytest.skip(f"{', '.join(packages)} missing and apt-get (as root) is not available")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *packages]):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            pytest.skip(f"could not install {packages[0]}: {' '.join(cmd)}: {done.stderr[-500:]}")
