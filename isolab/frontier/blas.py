"""One BLAS thread for the fits' small matrix products (`single_threaded`)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

try:  # optional: BLAS threads only slow these small products down, badly on a busy machine
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn / scipy stacks
    threadpool_limits = None

_depth = threading.local()
P = ParamSpec("P")
T = TypeVar("T")


def single_threaded(fn: Callable[P, T]) -> Callable[P, T]:
    """Run `fn` with one BLAS thread (outermost call only). The fits multiply matrices of a few
    thousand entries, where OpenBLAS threads cost far more than they save (measured 30 ms vs
    0.03 ms per product on 2 busy cores)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        if threadpool_limits is None or getattr(_depth, "on", False):
            return fn(*args, **kwargs)
        _depth.on = True
        try:
            with threadpool_limits(1, user_api="blas"):
                return fn(*args, **kwargs)
        finally:
            _depth.on = False

    return wrapper
