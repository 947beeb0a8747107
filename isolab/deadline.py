"""A bound on every call into a user's code (a reward function, a task card's verifier): a call
that does not return in time raises `CallTimeout`, naming the function, instead of holding a run
RUNNING for good (issue 52: a verifier stuck in a loop hung `isolab train` with no output).

In the main thread the bound is a real-time timer (`signal.setitimer`), so the user's loop is
interrupted where it stands and the run ends FAILED with the timeout's message. Elsewhere (a
thread, where signals cannot be set) the call runs in a daemon thread that is abandoned at the
deadline: the run still fails at once, and the thread ends with the process. Bottom layer:
imports nothing of isolab's.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: Seconds one call into a user's function may take: a reward gets one call per batch of
#: completions, a verifier one per completion. Generous: a slow verifier is allowed, a stuck one
#: is not. `$ISOLAB_USER_CALL_TIMEOUT_S` changes it.
USER_CALL_TIMEOUT_S = 300.0
TIMEOUT_ENV = "ISOLAB_USER_CALL_TIMEOUT_S"


class CallTimeout(RuntimeError):
    """A user's function did not return within its deadline."""


def user_call_timeout_s() -> float:
    """`USER_CALL_TIMEOUT_S`, or `$ISOLAB_USER_CALL_TIMEOUT_S` where it is set."""
    raw = os.environ.get(TIMEOUT_ENV)
    if raw is None or not raw.strip():
        return USER_CALL_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= 86_400):
        raise ValueError(
            f"${TIMEOUT_ENV} = {raw[:40]!r}: give seconds from 0 to 86400 (one call into a "
            f"reward or verifier; the default is {USER_CALL_TIMEOUT_S:g})"
        )
    return value


def call_with_deadline(what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)`, or `CallTimeout` naming `what` once `user_call_timeout_s()` pass."""
    seconds = user_call_timeout_s()
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        return _with_timer(what, seconds, fn, args, kwargs)
    return _with_thread(what, seconds, fn, args, kwargs)


def _message(what: str, seconds: float) -> str:
    return (
        f"{what} did not return within {seconds:g} s (a loop that never ends, or a wait on "
        f"something that never answers): fix it, or raise ${TIMEOUT_ENV} if it is only slow"
    )


def _with_timer(what: str, seconds: float, fn: Callable[..., T], args, kwargs) -> T:
    outer_left, _ = signal.getitimer(signal.ITIMER_REAL)
    if outer_left and outer_left <= seconds:  # an enclosing deadline ends first: it bounds this
        return fn(*args, **kwargs)

    def expired(signum, frame):
        raise CallTimeout(_message(what, seconds))

    previous = signal.signal(signal.SIGALRM, expired)
    started = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn(*args, **kwargs)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_left:  # put the enclosing deadline back with what is left of it
            left = outer_left - (time.monotonic() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-3))


def _with_thread(what: str, seconds: float, fn: Callable[..., T], args, kwargs) -> T:
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the caller's thread as it is
            box["error"] = exc

    worker = threading.Thread(target=run, name=f"isolab-call:{what[:40]}", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise CallTimeout(_message(what, seconds))
    if "error" in box:
        raise box["error"]
    return box["value"]
