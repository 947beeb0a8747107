"""What every planted run table shares: its run keys and where its evaluations fall."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np


def planted_key(parts: Sequence[object]) -> str:
    """A 16-hex-digit run key of a planted run, from what makes it one (law, n, B_p, seed …)."""
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:16]


def eval_steps(M: int, eval_points: int) -> np.ndarray:
    """`eval_points` evaluation steps from 0 to M, log-spaced, as isolab sweeps place them."""
    if eval_points > M:
        return np.arange(M + 1)
    steps = np.unique(np.round(np.geomspace(1, M, eval_points * 3)).astype(int))
    pick = np.unique(np.round(np.linspace(0, len(steps) - 1, eval_points - 1)).astype(int))
    return np.concatenate([[0], steps[pick]])
