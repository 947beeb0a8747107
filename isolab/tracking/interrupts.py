"""Store writes that Ctrl-C does not cut in half: SIGINT and SIGTERM wait for the write.

A KeyboardInterrupt raised inside SQLAlchemy (a commit, a connection going back to its pool)
can leave this process's connection in an open write transaction: the status write that ends
the run KILLED then waits on the process's own lock, and the run stays RUNNING (1 in 8 Ctrl-C
of `isolab train` during `log_params`: 188 s, exit 1). A write is short, so the signal waits for
it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar, cast

_Fn = TypeVar("_Fn", bound=Callable[..., Any])


@contextlib.contextmanager
def interrupts_deferred():
    """Hold SIGINT and SIGTERM while a store write is in flight, and deliver them after it: the
    previous handler then gets the signal as it would have. Only the main thread can set
    handlers: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[tuple[int, Any]] = []

    def hold(signum: int, frame: Any) -> None:
        caught.append((signum, frame))

    # keyed by int: a handler gets the signal's number, and a Signals is equal to its int
    previous: dict[int, Callable[[int, FrameType | None], Any] | int | None] = {
        sig: signal.signal(sig, hold) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if caught:
            signum, frame = caught[0]
            handler = previous[signum]
            if callable(handler):
                handler(signum, frame)
            elif handler != signal.SIG_IGN:  # the default action: SIGINT raises, SIGTERM ends
                if signum == signal.SIGINT:
                    raise KeyboardInterrupt
                os.kill(os.getpid(), signum)


@contextlib.contextmanager
def handlers_kept():
    """Put the SIGINT and SIGTERM handlers back as they were once the block ends. Ray installs
    its own (`ray.init`: SIGTERM; Ray Tune's `fit`: SIGINT, which ends a tuning loop instead of
    raising) and leaves them: without this, Ctrl-C in the same process (a notebook, the next
    command) after an adaptive sweep raised nothing. Only the main thread can set handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a blocked SIGINT would stay pending
        for sig, handler in previous.items():
            if handler is not None:  # None: set outside Python, nothing to put back
                signal.signal(sig, handler)


def uninterrupted(fn: _Fn) -> _Fn:
    """`fn` runs with `interrupts_deferred`: a store write is never cut in half."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with interrupts_deferred():
            return fn(*args, **kwargs)

    return cast(_Fn, wrapper)  # functools.wraps keeps fn's signature


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be: whatever ends a run KILLED on
    Ctrl-C ends it KILLED on `kill` or a scheduler's stop too (an `except KeyboardInterrupt`
    catches both; the exit status can still tell them apart: 143, not 130)."""


@contextlib.contextmanager
def terminate_as_interrupt():
    """SIGTERM raises `Terminated` in the block (its default action ends the process at once,
    leaving its MLflow run RUNNING for good). Only the main thread can set handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminated(signum: int, frame: Any) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
