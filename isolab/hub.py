"""The Hugging Face Hub, asked once: is it there? (One quick probe instead of transformers' and
datasets' minute of retries when a machine is offline.)"""

from __future__ import annotations

import functools
import os
import socket
from urllib.parse import urlparse


def hub_reachable(timeout_s: float = 3.0) -> bool:
    """Whether the Hugging Face Hub answers a TCP connection within `timeout_s` (never, when
    `HF_HUB_OFFLINE` is set)."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    return _answers(url.hostname or "huggingface.co", url.port or 443, timeout_s)


@functools.cache
def _answers(host: str, port: int, timeout_s: float) -> bool:
    """One TCP probe per process: planning a sweep checks every point's model."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False
